use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("LLM endpoint {url} is unreachable: {message}")]
    Connect { url: String, message: String },
    #[error("LLM request timed out after {0:?}")]
    Timeout(Duration),
    /// `message` is the server's own `error.message` when it sent one.
    #[error("LLM endpoint answered HTTP {status}: {message}")]
    Status {
        status: u16,
        message: String,
        retry_after: Option<Duration>,
    },
    #[error("LLM response is malformed: {0}")]
    Malformed(String),
    #[error("LLM is not configured: {0}")]
    NotConfigured(String),
}

impl LlmError {
    /// Connection errors, timeouts, 429 and 5xx may succeed on a later try;
    /// any other 4xx means the request itself is wrong and would fail again.
    pub fn is_retryable(&self) -> bool {
        match self {
            LlmError::Connect { .. } | LlmError::Timeout(_) => true,
            LlmError::Status { status, .. } => *status == 429 || *status >= 500,
            LlmError::Malformed(_) | LlmError::NotConfigured(_) => false,
        }
    }

    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            LlmError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}
