//! What the LLM client records through the `metrics` facade. The daemon
//! installs the Prometheus exporter (`daemon/metrics.rs`) and registers the
//! buckets named here; without one (`run --local`, tests) every record is
//! a no-op. This layer knows nothing of the daemon.
//!
//! The two OpenTelemetry GenAI client metrics, `gen_ai.client.operation.duration`
//! and `gen_ai.client.token.usage`, are named here in their Prometheus form
//! (dots to underscores, the unit as a suffix), with the buckets the
//! semantic conventions prescribe. Token usage is recorded by the loop,
//! which knows the agent (`agent/metrics.rs`).

use std::sync::Arc;
use std::time::Duration;

use ::metrics::{counter, histogram, Histogram, SharedString};

use super::LlmError;

/// Seconds of one HTTP attempt to the endpoint (a retried request counts
/// once per attempt), by `model`.
pub const REQUEST_DURATION: &str = "agentd_llm_request_duration_seconds";
/// Attempts that failed, by `model` and `status_class` (`4xx`, `5xx`,
/// `timeout`, `connect`, `tls`, `malformed`, `not_configured`).
pub const REQUEST_ERRORS: &str = "agentd_llm_request_errors_total";
/// `gen_ai.client.operation.duration`: one chat operation, retries
/// included, with `gen_ai_operation_name`, `gen_ai_request_model` and, when
/// it failed, `error_type`.
pub const OPERATION_DURATION: &str = "gen_ai_client_operation_duration_seconds";
/// `gen_ai.client.token.usage`: tokens of one chat operation, with
/// `gen_ai_token_type` (`input`, `output`), `gen_ai_operation_name`,
/// `gen_ai_request_model` and `agent`.
pub const TOKEN_USAGE: &str = "gen_ai_client_token_usage";

/// The buckets the GenAI semantic conventions prescribe for
/// `gen_ai.client.operation.duration` (seconds); the attempts' histogram
/// uses them too, so both read alike.
pub const DURATION_BUCKETS: &[f64] = &[
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];
/// The buckets the GenAI semantic conventions prescribe for
/// `gen_ai.client.token.usage`.
pub const TOKEN_BUCKETS: &[f64] = &[
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0, 67108864.0,
];

/// The only operation agentd performs (`gen_ai.operation.name`).
pub const OPERATION_CHAT: &str = "chat";

/// One client's handles, made once with the client so that a request only
/// records into them: no label is built on the success path.
#[derive(Clone)]
pub(crate) struct LlmMetrics {
    model: SharedString,
    attempt: Histogram,
    operation_ok: Histogram,
}

impl LlmMetrics {
    pub(crate) fn new(model: &str) -> Self {
        let model = SharedString::from(Arc::<str>::from(model));
        LlmMetrics {
            attempt: histogram!(REQUEST_DURATION, "model" => model.clone()),
            operation_ok: histogram!(
                OPERATION_DURATION,
                "gen_ai_operation_name" => OPERATION_CHAT,
                "gen_ai_request_model" => model.clone()
            ),
            model,
        }
    }

    /// One HTTP attempt ended (`error`: how it failed).
    pub(crate) fn attempt(&self, elapsed: Duration, error: Option<&LlmError>) {
        self.attempt.record(elapsed.as_secs_f64());
        if let Some(e) = error {
            counter!(REQUEST_ERRORS, "model" => self.model.clone(), "status_class" => status_class(e))
                .increment(1);
        }
    }

    /// One chat operation ended, after its retries.
    pub(crate) fn operation(&self, elapsed: Duration, error: Option<&LlmError>) {
        let seconds = elapsed.as_secs_f64();
        match error {
            None => self.operation_ok.record(seconds),
            Some(e) => histogram!(
                OPERATION_DURATION,
                "gen_ai_operation_name" => OPERATION_CHAT,
                "gen_ai_request_model" => self.model.clone(),
                "error_type" => error_type(e)
            )
            .record(seconds),
        }
    }
}

/// A failure's class: the HTTP status's hundred, or what happened instead
/// of an answer. A handful of values, so the label stays small.
pub fn status_class(e: &LlmError) -> &'static str {
    match e {
        LlmError::Status { status, .. } | LlmError::RetryAfterTooLong { status, .. } => {
            match status / 100 {
                1 => "1xx",
                2 => "2xx",
                3 => "3xx",
                4 => "4xx",
                5 => "5xx",
                _ => "other",
            }
        }
        LlmError::Timeout(_) => "timeout",
        LlmError::Connect { .. } | LlmError::Absent { .. } => "connect",
        LlmError::Certificate { .. } => "tls",
        LlmError::Malformed(_) => "malformed",
        LlmError::NotConfigured(_) => "not_configured",
    }
}

/// `error.type` as the GenAI conventions want it: the HTTP status code when
/// the server answered one, else the class of failure.
fn error_type(e: &LlmError) -> SharedString {
    match e {
        LlmError::Status { status, .. } | LlmError::RetryAfterTooLong { status, .. } => {
            SharedString::from(status.to_string())
        }
        other => SharedString::const_str(status_class(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_the_hundreds_or_the_kind_of_failure() {
        let status = |status| LlmError::Status {
            status,
            message: String::new(),
            retry_after: None,
        };
        assert_eq!(status_class(&status(500)), "5xx");
        assert_eq!(status_class(&status(429)), "4xx");
        assert_eq!(status_class(&LlmError::Timeout(Duration::ZERO)), "timeout");
        assert_eq!(&*error_type(&status(503)), "503");
        assert_eq!(
            &*error_type(&LlmError::Malformed(String::new())),
            "malformed"
        );
    }
}
