//! The `execute_tool {tool}` span's ending (see `crate::otel`): a failed
//! call marks it an error with a short `error.type`.

use tracing::Span;

use super::tool::ToolFailure;

/// Records how a tool call ended on its span; nothing when it is not exported.
pub(super) fn tool_ended(span: &Span, result: &Result<String, ToolFailure>) {
    let Err(e) = result else { return };
    let error_type = match e {
        ToolFailure::Unknown(_) => "unknown_tool",
        ToolFailure::Reported(_) => "tool_error",
        ToolFailure::Trapped { .. } => "trap",
        ToolFailure::Timeout { .. } => "timeout",
        ToolFailure::Limit(_) => "limit",
    };
    crate::otel::failed(span, error_type);
}
