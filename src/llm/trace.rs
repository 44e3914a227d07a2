//! The `chat {model}` span's attributes from the client's answer (see
//! `crate::otel`): what the model answered, or the failure's `error.type`.

use std::borrow::Cow;

use tracing::Span;

use super::client::ChatResponse;
use super::error::LlmError;

/// Records `result` on `span`; nothing when the span is not exported.
pub(super) fn record(span: &Span, result: &Result<ChatResponse, LlmError>) {
    if span.is_disabled() {
        return;
    }
    match result {
        Ok(r) => crate::otel::chat_answered(
            span,
            r.usage.prompt_tokens,
            r.usage.completion_tokens,
            r.finish_reason.as_ref().map(|f| f.as_str()),
        ),
        Err(e) => crate::otel::failed(span, &error_type(e)),
    }
}

/// `error.type` as the conventions want it: the HTTP status when there was
/// one, else a short name of what went wrong.
pub(super) fn error_type(e: &LlmError) -> Cow<'static, str> {
    match e {
        LlmError::Status { status, .. } | LlmError::RetryAfterTooLong { status, .. } => {
            Cow::Owned(status.to_string())
        }
        LlmError::Connect { .. } | LlmError::Absent { .. } => Cow::Borrowed("connect"),
        LlmError::Certificate { .. } => Cow::Borrowed("certificate"),
        LlmError::Timeout(_) => Cow::Borrowed("timeout"),
        LlmError::Malformed(_) => Cow::Borrowed("malformed_response"),
        LlmError::NotConfigured(_) => Cow::Borrowed("not_configured"),
    }
}

/// `gen_ai.response.model`, when the server named the model that answered.
pub(super) fn response_model(span: &Span, model: Option<&str>) {
    if let Some(model) = model.filter(|_| !span.is_disabled()) {
        span.record("gen_ai.response.model", model);
    }
}
