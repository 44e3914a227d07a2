//! The host as a strategy uses it, as a trait, so that a strategy's logic
//! can be tested natively against a fake host and one strategy can wrap
//! another's host (the bundled `planning` runs `toolcall`'s step over a host
//! that adds its `planning` tool).
//!
//! [`Imports`] is the real host, through the component's imports. A
//! strategy writes its step over `H: Host` and calls it with `Imports` from
//! `Guest::step`; its tests call it with a fake.

use crate::{
    AgentConfig, ChatError, ChatRequest, ChatResponse, Error, MemoryChatRequest, Message, ToolCall,
    ToolSpec,
};
use crate::{agent, log};

/// What a strategy's step needs from its run: the `agent` interface and a
/// log. The methods mirror the imports one for one; see the WIT
/// (`interface agent`) for what each does and refuses.
pub trait Host {
    fn config(&mut self) -> AgentConfig;
    fn memory(&mut self) -> Vec<Message>;
    fn add_message(&mut self, message: Message) -> Result<(), Error>;
    fn chat(&mut self, request: &ChatRequest) -> Result<ChatResponse, ChatError>;
    /// `chat` with the run's memory as the host holds it (contract 0.2.4).
    /// The default builds the request the host would (the system prompt,
    /// then `memory()`; the agent's `tools()` when asked for, less those
    /// named in `extra_tools`, then `extra_tools`) and sends it with `chat`,
    /// so a fake or wrapping host gets the same request either way; the
    /// real host ([`Imports`]) builds it without copying the transcript.
    fn chat_with_memory(&mut self, request: &MemoryChatRequest) -> Result<ChatResponse, ChatError> {
        let mut messages: Vec<Message> = request
            .system_prompt
            .iter()
            .map(|prompt| Message::system(prompt.as_str()))
            .collect();
        messages.extend(self.memory());
        let mut tools = if request.agent_tools {
            self.tools()
        } else {
            Vec::new()
        };
        tools.retain(|tool| !request.extra_tools.iter().any(|e| e.name == tool.name));
        tools.extend(request.extra_tools.iter().cloned());
        self.chat(&ChatRequest {
            messages,
            tools,
            tool_choice: request.tool_choice,
        })
    }
    fn tools(&mut self) -> Vec<ToolSpec>;
    fn invoke_tool(&mut self, call: &ToolCall) -> Result<String, Error>;
    fn finish(&mut self);
    fn info(&mut self, message: &str);
    fn warn(&mut self, message: &str);
    fn error(&mut self, message: &str);
}

/// A borrowed host is a host, so a step that takes its host by value can be
/// given `&mut host` and the caller keeps it (a wrapping host, a test's
/// fake) to look at afterwards.
impl<H: Host + ?Sized> Host for &mut H {
    fn config(&mut self) -> AgentConfig {
        (**self).config()
    }
    fn memory(&mut self) -> Vec<Message> {
        (**self).memory()
    }
    fn add_message(&mut self, message: Message) -> Result<(), Error> {
        (**self).add_message(message)
    }
    fn chat(&mut self, request: &ChatRequest) -> Result<ChatResponse, ChatError> {
        (**self).chat(request)
    }
    fn chat_with_memory(&mut self, request: &MemoryChatRequest) -> Result<ChatResponse, ChatError> {
        (**self).chat_with_memory(request)
    }
    fn tools(&mut self) -> Vec<ToolSpec> {
        (**self).tools()
    }
    fn invoke_tool(&mut self, call: &ToolCall) -> Result<String, Error> {
        (**self).invoke_tool(call)
    }
    fn finish(&mut self) {
        (**self).finish();
    }
    fn info(&mut self, message: &str) {
        (**self).info(message);
    }
    fn warn(&mut self, message: &str) {
        (**self).warn(message);
    }
    fn error(&mut self, message: &str) {
        (**self).error(message);
    }
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
    fn chat_with_memory(&mut self, request: &MemoryChatRequest) -> Result<ChatResponse, ChatError> {
        agent::chat_with_memory(request)
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
