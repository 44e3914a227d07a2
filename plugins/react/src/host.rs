//! The host as this strategy uses it. A trait rather than direct calls so
//! the step logic can be tested natively against a fake host.
//!
//! The trait and [`Imports`] are `toolcall`'s, method for method, so both
//! strategies can move to one shared definition in the strategy SDK by
//! changing an import.

use agentd_strategy_sdk::{
    AgentConfig, ChatError, ChatRequest, ChatResponse, Error, Message, ToolCall, ToolSpec, agent,
    log,
};

pub trait Host {
    fn config(&mut self) -> AgentConfig;
    fn memory(&mut self) -> Vec<Message>;
    fn add_message(&mut self, message: Message) -> Result<(), Error>;
    fn chat(&mut self, request: &ChatRequest) -> Result<ChatResponse, ChatError>;
    fn tools(&mut self) -> Vec<ToolSpec>;
    fn invoke_tool(&mut self, call: &ToolCall) -> Result<String, Error>;
    fn finish(&mut self);
    fn info(&mut self, message: &str);
    fn warn(&mut self, message: &str);
    fn error(&mut self, message: &str);
}

/// The real host, through the component's imports.
pub struct Imports;

impl Host for Imports {
    fn config(&mut self) -> AgentConfig {
        agent::config()
    }
    fn memory(&mut self) -> Vec<Message> {
        agent::memory()
    }
    fn add_message(&mut self, message: Message) -> Result<(), Error> {
        agent::add_message(&message)
    }
    fn chat(&mut self, request: &ChatRequest) -> Result<ChatResponse, ChatError> {
        agent::chat(request)
    }
    fn tools(&mut self) -> Vec<ToolSpec> {
        agent::tools()
    }
    fn invoke_tool(&mut self, call: &ToolCall) -> Result<String, Error> {
        agent::invoke_tool(call)
    }
    fn finish(&mut self) {
        agent::finish();
    }
    fn info(&mut self, message: &str) {
        // The host already reports steps as events; this chatter is for debugging.
        log::debug(message);
    }
    fn warn(&mut self, message: &str) {
        log::warn(message);
    }
    fn error(&mut self, message: &str) {
        log::error(message);
    }
}
