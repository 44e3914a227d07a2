use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// No HTTP answer: the connection failed or broke before a response.
    /// `nothing_listens` when it was refused or the name did not resolve
    /// (no server at that address), as opposed to a reset or a cut answer.
    #[error("LLM endpoint {url} is unreachable: {message}")]
    Connect {
        url: String,
        message: String,
        nothing_listens: bool,
    },
    /// The connection failed (refused, or the name does not resolve) and
    /// the endpoint has not answered once since the client was built: a
    /// server that is not running or a wrong address, which retries cannot
    /// fix, so the run fails at once and `help` says what to change.
    #[error("LLM endpoint {url} is unreachable: {message}; {help}")]
    Absent {
        url: String,
        message: String,
        help: String,
    },
    /// The endpoint's certificate was refused. Retrying cannot help, and the
    /// fix is on this side (a CA to trust), so the message says where.
    #[error(
        "the TLS certificate of LLM endpoint {url} is not trusted: {message}; \
         add its CA to the system trust store or set [llm] ca_file"
    )]
    Certificate { url: String, message: String },
    #[error("LLM request timed out after {0:?}")]
    Timeout(Duration),
    /// `message` is the server's own `error.message` when it sent one.
    #[error("LLM endpoint answered HTTP {status}: {message}")]
    Status {
        status: u16,
        message: String,
        retry_after: Option<Duration>,
    },
    /// Retrying before the server's `Retry-After` would only be refused
    /// again, and waiting longer than the configured limit would park the
    /// run, so the request fails and says which key allows the wait.
    #[error(
        "LLM endpoint answered HTTP {status}: {message}; it asked to be retried after {} s, \
         longer than [llm] retry_max_wait ({} s): raise retry_max_wait to wait that long",
        asked.as_secs_f64().ceil(),
        max_wait.as_secs_f64()
    )]
    RetryAfterTooLong {
        status: u16,
        message: String,
        asked: Duration,
        max_wait: Duration,
    },
    #[error("LLM response is malformed: {0}")]
    Malformed(String),
    #[error("LLM is not configured: {0}")]
    NotConfigured(String),
}

impl LlmError {
    /// Connection errors, timeouts, 408 (request timeout), 409 (conflict, as
    /// the OpenAI SDKs treat it), 429 and 5xx may succeed on a later try; any
    /// other 4xx means the request itself is wrong and would fail again, and a
    /// refused certificate stays refused.
    pub fn is_retryable(&self) -> bool {
        match self {
            LlmError::Connect { .. } | LlmError::Timeout(_) => true,
            LlmError::Status { status, .. } => matches!(*status, 408 | 409 | 429) || *status >= 500,
            LlmError::Certificate { .. }
            | LlmError::Absent { .. }
            | LlmError::RetryAfterTooLong { .. }
            | LlmError::Malformed(_)
            | LlmError::NotConfigured(_) => false,
        }
    }

    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            LlmError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}
