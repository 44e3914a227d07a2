//! Components built against `agentd:plugin@0.1.0` keep working: their
//! imports are served by converting to the current contract's types and
//! calling the current implementation, so both versions behave the same and
//! only one implementation exists. The types of the two versions are
//! structurally identical except where 0.2.0 added something (a chat
//! response's finish reason), which 0.1.0 simply does not see.

use super::bindings::{v0_1, v0_2};
use super::strategy_host::StrategyState;
use super::tool_host::ToolState;

mod old {
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

mod new {
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
trait Conv<T> {
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

use v0_1::strategy::agentd::plugin::{agent as old_agent, logging as old_logging};
use v0_1::tool::agentd::plugin::sandbox as old_sandbox;
use v0_2::strategy::agentd::plugin::{agent as new_agent, logging as new_logging};
use v0_2::tool::agentd::plugin::sandbox as new_sandbox;

impl v0_1::strategy::agentd::plugin::types::Host for StrategyState {}

impl old_logging::Host for StrategyState {
    async fn log(&mut self, level: old::Level, message: String) -> wasmtime::Result<()> {
        <Self as new_logging::Host>::log(self, level.conv(), message).await
    }
}

impl old_agent::Host for StrategyState {
    async fn config(&mut self) -> wasmtime::Result<old::AgentConfig> {
        Ok(<Self as new_agent::Host>::config(self).await?.conv())
    }

    async fn memory(&mut self) -> wasmtime::Result<Vec<old::Message>> {
        Ok(<Self as new_agent::Host>::memory(self).await?.conv())
    }

    async fn add_message(
        &mut self,
        message: old::Message,
    ) -> wasmtime::Result<Result<(), old::Error>> {
        Ok(<Self as new_agent::Host>::add_message(self, message.conv())
            .await?
            .conv())
    }

    async fn chat(
        &mut self,
        request: old::ChatRequest,
    ) -> wasmtime::Result<Result<old::ChatResponse, old::ChatError>> {
        Ok(<Self as new_agent::Host>::chat(self, request.conv())
            .await?
            .conv())
    }

    async fn tools(&mut self) -> wasmtime::Result<Vec<old::ToolSpec>> {
        Ok(<Self as new_agent::Host>::tools(self).await?.conv())
    }

    async fn invoke_tool(
        &mut self,
        call: old::ToolCall,
    ) -> wasmtime::Result<Result<String, old::Error>> {
        Ok(<Self as new_agent::Host>::invoke_tool(self, call.conv())
            .await?
            .conv())
    }

    async fn finish(&mut self) -> wasmtime::Result<()> {
        <Self as new_agent::Host>::finish(self).await
    }
}

impl v0_1::strategy::agentd::plugin::types::Host for ToolState {}

impl old_logging::Host for ToolState {
    async fn log(&mut self, level: old::Level, message: String) -> wasmtime::Result<()> {
        <Self as new_logging::Host>::log(self, level.conv(), message).await
    }
}

impl old_sandbox::Host for ToolState {
    async fn run(
        &mut self,
        command: old::Command,
    ) -> wasmtime::Result<Result<old::CommandOutput, old::Error>> {
        Ok(<Self as new_sandbox::Host>::run(self, command.conv())
            .await?
            .conv())
    }

    async fn shell(
        &mut self,
        command: String,
        timeout_secs: Option<u32>,
    ) -> wasmtime::Result<Result<old::CommandOutput, old::Error>> {
        Ok(
            <Self as new_sandbox::Host>::shell(self, command, timeout_secs)
                .await?
                .conv(),
        )
    }

    async fn restart_shell(&mut self) -> wasmtime::Result<Result<(), old::Error>> {
        Ok(<Self as new_sandbox::Host>::restart_shell(self)
            .await?
            .conv())
    }

    async fn read_file(&mut self, path: String) -> wasmtime::Result<Result<Vec<u8>, old::Error>> {
        // Moved, not converted byte by byte.
        Ok(<Self as new_sandbox::Host>::read_file(self, path)
            .await?
            .map_err(Conv::conv))
    }

    async fn write_file(
        &mut self,
        path: String,
        contents: Vec<u8>,
    ) -> wasmtime::Result<Result<(), old::Error>> {
        Ok(
            <Self as new_sandbox::Host>::write_file(self, path, contents)
                .await?
                .conv(),
        )
    }

    async fn list_dir(
        &mut self,
        path: String,
    ) -> wasmtime::Result<Result<Vec<old::DirEntry>, old::Error>> {
        Ok(<Self as new_sandbox::Host>::list_dir(self, path)
            .await?
            .conv())
    }
}
