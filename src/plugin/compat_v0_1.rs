//! Components built against `agentd:plugin@0.1.0` keep working: their
//! imports are served by converting to the current contract's types and
//! calling the current implementation, so both versions behave the same and
//! only one implementation exists. The types of the two versions are
//! structurally identical except where 0.2.0 added something (a chat
//! response's finish reason), which 0.1.0 simply does not see.
//!
//! This file holds only the conversions. The 0.1.0 imports themselves are
//! implemented beside the current ones (`strategy_host.rs`, `tool_host.rs`),
//! and the 0.1.0 exports are called beside theirs (`strategy.rs`,
//! `tool.rs`), so the conversions sit below both and depend on neither.

use super::bindings::{v0_1, v0_2};

/// The 0.1.0 types, by their names.
pub(super) mod old {
    pub use crate::plugin::bindings::v0_1::strategy::agentd::plugin::agent::{
        AgentConfig, ChatError, ChatRequest, ChatResponse, ToolChoice,
    };
    pub use crate::plugin::bindings::v0_1::strategy::agentd::plugin::logging::Level;
    pub use crate::plugin::bindings::v0_1::strategy::agentd::plugin::types::{
        Error, ErrorCode, Message, Role, ToolCall, ToolSpec, Usage,
    };
    pub use crate::plugin::bindings::v0_1::tool::agentd::plugin::sandbox::{
        Command, CommandOutput, DirEntry,
    };
}

/// The current (0.2.0) types, by their names.
pub(super) mod new {
    pub use crate::plugin::bindings::v0_2::strategy::agentd::plugin::agent::{
        AgentConfig, ChatError, ChatRequest, ChatResponse,
    };
    pub use crate::plugin::bindings::v0_2::strategy::agentd::plugin::logging::Level;
    pub use crate::plugin::bindings::v0_2::strategy::agentd::plugin::types::{
        Error, ErrorCode, Message, Role, ToolCall, ToolChoice, ToolSpec, Usage,
    };
    pub use crate::plugin::bindings::v0_2::tool::agentd::plugin::sandbox::{
        Command, CommandOutput, DirEntry,
    };
}

/// A structural conversion between two versions' generated types.
pub(super) trait Conv<T> {
    fn conv(self) -> T;
}

macro_rules! identity {
    ($($t:ty),*) => { $(impl Conv<$t> for $t { fn conv(self) -> $t { self } })* };
}
identity!((), String, bool, u8, u32, i32, u64);

impl<A: Conv<B>, B> Conv<Vec<B>> for Vec<A> {
    fn conv(self) -> Vec<B> {
        self.into_iter().map(Conv::conv).collect()
    }
}

impl<A: Conv<B>, B> Conv<Option<B>> for Option<A> {
    fn conv(self) -> Option<B> {
        self.map(Conv::conv)
    }
}

impl<A: Conv<B>, B, E: Conv<F>, F> Conv<Result<B, F>> for Result<A, E> {
    fn conv(self) -> Result<B, F> {
        self.map(Conv::conv).map_err(Conv::conv)
    }
}

/// Both directions for a record whose fields are the same in both versions.
macro_rules! record {
    ($t:ident { $($f:ident),* $(,)? }) => {
        impl Conv<new::$t> for old::$t {
            fn conv(self) -> new::$t { new::$t { $($f: self.$f.conv()),* } }
        }
        impl Conv<old::$t> for new::$t {
            fn conv(self) -> old::$t { old::$t { $($f: self.$f.conv()),* } }
        }
    };
}

/// Both directions for an enum whose cases are the same in both versions.
macro_rules! cases {
    ($t:ident { $($c:ident),* $(,)? }) => {
        impl Conv<new::$t> for old::$t {
            fn conv(self) -> new::$t { match self { $(old::$t::$c => new::$t::$c),* } }
        }
        impl Conv<old::$t> for new::$t {
            fn conv(self) -> old::$t { match self { $(new::$t::$c => old::$t::$c),* } }
        }
    };
}

cases!(Role {
    System,
    User,
    Assistant,
    Tool
});
cases!(Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error
});
cases!(ToolChoice {
    None,
    Auto,
    Required
});
cases!(ErrorCode {
    InvalidInput,
    UnknownTool,
    LlmFailed,
    SandboxUnavailable,
    SandboxFailed,
    Failed,
    Cancelled,
});
record!(ToolCall {
    id,
    name,
    arguments
});
record!(Message {
    role,
    content,
    tool_calls,
    tool_call_id,
    name
});
record!(ToolSpec {
    name,
    description,
    parameters
});
record!(Error { code, message });
record!(Usage {
    prompt_tokens,
    completion_tokens
});
record!(AgentConfig {
    name,
    system_prompt,
    next_step_prompt,
    current_step,
    max_steps,
    max_observe,
    tool_choice,
    special_tools,
});
record!(ChatRequest {
    messages,
    tools,
    tool_choice
});
record!(Command {
    command,
    workdir,
    timeout_secs,
    stdin
});
record!(CommandOutput {
    stdout,
    stderr,
    exit_code,
    timed_out,
    truncated,
});
record!(DirEntry { name, is_dir, size });

/// 0.1.0 has no finish reason: the answer is passed on without it.
impl Conv<old::ChatResponse> for new::ChatResponse {
    fn conv(self) -> old::ChatResponse {
        old::ChatResponse {
            message: self.message.conv(),
            usage: self.usage.conv(),
        }
    }
}

impl Conv<old::ChatError> for new::ChatError {
    fn conv(self) -> old::ChatError {
        match self {
            new::ChatError::TokenLimit(m) => old::ChatError::TokenLimit(m),
            new::ChatError::Failed(e) => old::ChatError::Failed(e.conv()),
        }
    }
}

/// The 0.1.0 export's metadata, in the current type.
pub(super) fn metadata(
    m: v0_1::strategy::agentd::plugin::types::PluginMetadata,
) -> v0_2::strategy::agentd::plugin::types::PluginMetadata {
    v0_2::strategy::agentd::plugin::types::PluginMetadata {
        name: m.name,
        version: m.version,
        description: m.description,
    }
}

pub(super) fn spec(s: old::ToolSpec) -> new::ToolSpec {
    s.conv()
}

pub(super) fn error(e: old::Error) -> new::Error {
    e.conv()
}
