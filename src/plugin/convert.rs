//! Conversions between the WIT types and agentd's own. Kept in one place so
//! the rest of the host never handles generated types.

use super::bindings::types as wit;
use super::bindings::v0_2::strategy::agentd::plugin::agent as wit_agent;
use crate::chat::{Message, Role, ToolCall};
use crate::chat::{ToolChoice, ToolSpec, Usage};
use crate::llm::FinishReason;
use crate::sandbox::SandboxError;

pub fn role_from_wit(r: wit::Role) -> Role {
    match r {
        wit::Role::System => Role::System,
        wit::Role::User => Role::User,
        wit::Role::Assistant => Role::Assistant,
        wit::Role::Tool => Role::Tool,
    }
}

pub fn role_to_wit(r: Role) -> wit::Role {
    match r {
        Role::System => wit::Role::System,
        Role::User => wit::Role::User,
        Role::Assistant => wit::Role::Assistant,
        Role::Tool => wit::Role::Tool,
    }
}

pub fn message_from_wit(m: wit::Message) -> Message {
    Message {
        role: role_from_wit(m.role),
        content: m.content,
        tool_calls: m.tool_calls.into_iter().map(call_from_wit).collect(),
        tool_call_id: m.tool_call_id,
        name: m.name,
    }
}

pub fn message_to_wit(m: Message) -> wit::Message {
    wit::Message {
        role: role_to_wit(m.role),
        content: m.content,
        tool_calls: m.tool_calls.into_iter().map(call_to_wit).collect(),
        tool_call_id: m.tool_call_id,
        name: m.name,
    }
}

pub fn call_from_wit(c: wit::ToolCall) -> ToolCall {
    ToolCall {
        id: c.id,
        name: c.name,
        arguments: c.arguments,
    }
}

pub fn call_to_wit(c: ToolCall) -> wit::ToolCall {
    wit::ToolCall {
        id: c.id,
        name: c.name,
        arguments: c.arguments,
    }
}

pub fn spec_from_wit(s: wit::ToolSpec) -> ToolSpec {
    ToolSpec {
        name: s.name,
        description: s.description,
        parameters: s.parameters,
    }
}

pub fn spec_to_wit(s: ToolSpec) -> wit::ToolSpec {
    wit::ToolSpec {
        name: s.name,
        description: s.description,
        parameters: s.parameters,
    }
}

pub fn choice_from_wit(c: wit::ToolChoice) -> ToolChoice {
    match c {
        wit::ToolChoice::None => ToolChoice::None,
        wit::ToolChoice::Auto => ToolChoice::Auto,
        wit::ToolChoice::Required => ToolChoice::Required,
    }
}

pub fn choice_to_wit(c: ToolChoice) -> wit::ToolChoice {
    match c {
        ToolChoice::None => wit::ToolChoice::None,
        ToolChoice::Auto => wit::ToolChoice::Auto,
        ToolChoice::Required => wit::ToolChoice::Required,
    }
}

pub fn finish_to_wit(f: FinishReason) -> wit_agent::FinishReason {
    match f {
        FinishReason::Stop => wit_agent::FinishReason::Stop,
        FinishReason::Length => wit_agent::FinishReason::Length,
        FinishReason::ToolCalls => wit_agent::FinishReason::ToolCalls,
        FinishReason::ContentFilter => wit_agent::FinishReason::ContentFilter,
        FinishReason::Other(_) => wit_agent::FinishReason::Other,
    }
}

pub fn usage_to_wit(u: Usage) -> wit::Usage {
    let clamp = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    wit::Usage {
        prompt_tokens: clamp(u.prompt_tokens),
        completion_tokens: clamp(u.completion_tokens),
    }
}

pub fn error(code: wit::ErrorCode, message: impl Into<String>) -> wit::Error {
    wit::Error {
        code,
        message: message.into(),
    }
}

pub fn sandbox_error(e: SandboxError) -> wit::Error {
    match e {
        SandboxError::Unavailable(_) => error(wit::ErrorCode::SandboxUnavailable, e.to_string()),
        SandboxError::Failed(_) => error(wit::ErrorCode::SandboxFailed, e.to_string()),
    }
}
