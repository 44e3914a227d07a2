//! A scripted host for native tests of a strategy's step: replies from a
//! script, tool results from a table, everything the step did recorded.
//!
//! ```ignore
//! let mut host = ScriptedHost::new()
//!     .reply(Some("let me echo"), &[("echo", r#"{"text":"hi"}"#)])
//!     .result("echo", Ok("hi"));
//! step(&mut host)?;
//! assert_eq!(host.invoked[0].name, "echo");
//! assert!(!host.finished);
//! ```
//!
//! Every field is public: a test sets the config, memory or tools it needs
//! before the step and reads what the step sent, added and ran after it.
//! The step takes `&mut host` (the SDK's `impl Host for &mut H`), so the
//! test keeps the host.
//!
//! No cargo feature gates this module: it is plain Rust over the SDK's own
//! types and calls no import, so it builds for every target, and a
//! component that does not use it carries none of it (nothing refers to it,
//! and the linker drops unreferenced code).

use std::collections::{HashMap, VecDeque};

use crate::host::Host;
use crate::{
    AgentConfig, ChatError, ChatRequest, ChatResponse, Error, ErrorCode, FinishReason, Message,
    Plan, ToolCall, ToolChoice, ToolSpec, Usage,
};

/// A host whose model answers from [`replies`](Self::replies) and whose
/// tools answer from [`results`](Self::results), recording every request,
/// call, log line and `finish` of the step.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptedHost {
    /// What `config()` returns.
    pub config: AgentConfig,
    /// The run's memory: `memory()` returns it, `add_message` appends to it.
    /// It starts with the run's request.
    pub memory: Vec<Message>,
    /// The model's replies, one per `chat`, in order. A `chat` past the end
    /// of the script panics: the test did not expect it.
    pub replies: VecDeque<Result<Message, ChatError>>,
    /// The finish reason of each reply, popped with it; none left is none
    /// given (`finish_reason: None`).
    pub finish_reasons: VecDeque<Option<FinishReason>>,
    /// Every request `chat` was given, in order.
    pub requests: Vec<ChatRequest>,
    /// What `tools()` returns.
    pub tools: Vec<ToolSpec>,
    /// What a call of each tool returns, by tool name; a tool not in the
    /// table returns `Ok("")`.
    pub results: HashMap<String, Result<String, Error>>,
    /// Every call `invoke_tool` was given, refused ones included, in order.
    pub invoked: Vec<ToolCall>,
    /// Whether the step called `finish()`.
    pub finished: bool,
    /// What the step logged, each line as `info: ...`, `warn: ...` or
    /// `error: ...`.
    pub logs: Vec<String>,
    /// The calls the host runs per step, as agentd's
    /// `max_tool_calls_per_step`: later calls are recorded in `invoked` and
    /// refused with agentd's message. `None` is no limit. The count is of
    /// `invoked`, so a test that runs several steps clears it between them.
    pub max_tool_calls_per_step: Option<usize>,
    /// The run's plan, for a strategy that keeps one (contract 0.2.3).
    /// [`Host`] has no plan methods: such a strategy has its own trait over
    /// the plan (the bundled `planning` does), and its tests implement it
    /// over this field and [`published`](Self::published).
    pub plan: Option<Plan>,
    /// Every plan published, in order.
    pub published: Vec<Plan>,
}

impl Default for ScriptedHost {
    fn default() -> Self {
        Self::new()
    }
}

impl ScriptedHost {
    /// Agent `agent` at step 1 of 10, with system prompt `be brief`, no
    /// next-step prompt, `tool_choice: auto` and `terminate` as its special
    /// tool; memory holds the request `hello`; tools `echo` and
    /// `terminate` (no description, `{}` parameters); nothing scripted, no
    /// call limit, no plan.
    pub fn new() -> Self {
        ScriptedHost {
            config: AgentConfig {
                name: "agent".to_string(),
                system_prompt: Some("be brief".to_string()),
                next_step_prompt: None,
                current_step: 1,
                max_steps: 10,
                max_observe: None,
                tool_choice: ToolChoice::Auto,
                special_tools: vec!["terminate".to_string()],
            },
            memory: vec![Message::user("hello")],
            replies: VecDeque::new(),
            finish_reasons: VecDeque::new(),
            requests: Vec::new(),
            tools: ["echo", "terminate"]
                .iter()
                .map(|name| ToolSpec::new(*name, "", "{}"))
                .collect(),
            results: HashMap::new(),
            invoked: Vec::new(),
            finished: false,
            logs: Vec::new(),
            max_tool_calls_per_step: None,
            plan: None,
            published: Vec::new(),
        }
    }

    /// Scripts the model's next reply, ending with `stop`.
    pub fn message(mut self, message: Message) -> Self {
        self.replies.push_back(Ok(message));
        self.finish_reasons.push_back(Some(FinishReason::Stop));
        self
    }

    /// Scripts a reply with this content and these `(name, arguments)`
    /// tool calls, their ids `call_0`, `call_1`, ...
    pub fn reply(self, content: Option<&str>, calls: &[(&str, &str)]) -> Self {
        let calls = calls
            .iter()
            .enumerate()
            .map(|(i, (name, arguments))| ToolCall {
                id: format!("call_{i}"),
                name: name.to_string(),
                arguments: arguments.to_string(),
            })
            .collect();
        self.message(Message::assistant_with_tools(
            content.map(str::to_string),
            calls,
        ))
    }

    /// Scripts a plain text reply.
    pub fn text(self, content: &str) -> Self {
        self.message(Message::assistant(content))
    }

    /// Scripts a failed `chat` (a token limit or a failure).
    pub fn fail(mut self, error: ChatError) -> Self {
        self.replies.push_back(Err(error));
        self.finish_reasons.push_back(None);
        self
    }

    /// Marks the last scripted reply as cut at `max_tokens` (`length`).
    pub fn cut(mut self) -> Self {
        if let Some(last) = self.finish_reasons.back_mut() {
            *last = Some(FinishReason::Length);
        }
        self
    }

    /// What every call of `tool` returns.
    pub fn result(mut self, tool: &str, result: Result<&str, Error>) -> Self {
        self.results
            .insert(tool.to_string(), result.map(str::to_string));
        self
    }

    /// The messages the step added to memory: those after the first, the
    /// run's request.
    pub fn added(&self) -> &[Message] {
        self.memory.get(1..).unwrap_or_default()
    }
}

impl Host for ScriptedHost {
    fn config(&mut self) -> AgentConfig {
        self.config.clone()
    }
    fn memory(&mut self) -> Vec<Message> {
        self.memory.clone()
    }
    fn add_message(&mut self, message: Message) -> Result<(), Error> {
        self.memory.push(message);
        Ok(())
    }
    fn chat(&mut self, request: &ChatRequest) -> Result<ChatResponse, ChatError> {
        self.requests.push(request.clone());
        let finish_reason = self.finish_reasons.pop_front().flatten();
        let message = self
            .replies
            .pop_front()
            .expect("the step asked the model more often than the test scripted replies")?;
        Ok(ChatResponse {
            message,
            finish_reason,
            usage: Usage {
                prompt_tokens: 1,
                completion_tokens: 1,
            },
        })
    }
    fn tools(&mut self) -> Vec<ToolSpec> {
        self.tools.clone()
    }
    fn invoke_tool(&mut self, call: &ToolCall) -> Result<String, Error> {
        self.invoked.push(call.clone());
        let n = self.invoked.len();
        if let Some(max) = self.max_tool_calls_per_step.filter(|&max| n > max) {
            return Err(Error::new(
                ErrorCode::InvalidInput,
                format!(
                    "not run: this is tool call {n} of step {}, and max_tool_calls_per_step is {max}. Ask for fewer calls at once.",
                    self.config.current_step
                ),
            ));
        }
        self.results
            .get(&call.name)
            .cloned()
            .unwrap_or_else(|| Ok(String::new()))
    }
    fn finish(&mut self) {
        self.finished = true;
    }
    fn info(&mut self, message: &str) {
        self.logs.push(format!("info: {message}"));
    }
    fn warn(&mut self, message: &str) {
        self.logs.push(format!("warn: {message}"));
    }
    fn error(&mut self, message: &str) {
        self.logs.push(format!("error: {message}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryChatRequest;

    #[test]
    fn replies_come_in_order_with_their_finish_reasons() {
        let mut host = ScriptedHost::new()
            .text("one")
            .reply(None, &[("echo", "{}")])
            .cut()
            .fail(ChatError::TokenLimit("full".to_string()));
        let request = ChatRequest {
            messages: host.memory.clone(),
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
        };
        let first = host.chat(&request).expect("a reply");
        assert_eq!(first.message, Message::assistant("one"));
        assert_eq!(first.finish_reason, Some(FinishReason::Stop));
        let second = host.chat(&request).expect("a reply");
        assert_eq!(second.message.tool_calls[0].id, "call_0");
        assert_eq!(second.finish_reason, Some(FinishReason::Length));
        assert_eq!(
            host.chat(&request),
            Err(ChatError::TokenLimit("full".to_string()))
        );
        assert_eq!(host.requests.len(), 3);
    }

    /// The request `chat_with_memory` stands for, which the real host
    /// builds the same way: the system prompt, then memory; the agent's
    /// tools less those an extra tool replaces, then the extra tools.
    #[test]
    fn chat_with_memory_sends_the_system_prompt_memory_and_tools() {
        let spec = |name: &str, description: &str| ToolSpec {
            name: name.to_string(),
            description: description.to_string(),
            parameters: "{}".to_string(),
        };
        let mut host = ScriptedHost::new().text("one").text("two");
        host.tools = vec![spec("echo", "agent's"), spec("planning", "agent's")];
        let memory = host.memory.clone();
        host.chat_with_memory(&MemoryChatRequest {
            system_prompt: Some("be brief".to_string()),
            agent_tools: true,
            extra_tools: vec![spec("planning", "strategy's")],
            tool_choice: ToolChoice::Required,
        })
        .expect("a reply");
        let sent = &host.requests[0];
        assert_eq!(sent.messages[0], Message::system("be brief"));
        assert_eq!(sent.messages[1..], memory[..]);
        assert_eq!(
            sent.tools,
            [spec("echo", "agent's"), spec("planning", "strategy's")]
        );
        assert_eq!(sent.tool_choice, ToolChoice::Required);

        host.chat_with_memory(&MemoryChatRequest {
            system_prompt: None,
            agent_tools: false,
            extra_tools: Vec::new(),
            tool_choice: ToolChoice::None,
        })
        .expect("a reply");
        let sent = &host.requests[1];
        assert_eq!(sent.messages, memory);
        assert!(sent.tools.is_empty());
    }

    #[test]
    fn tools_answer_from_the_table_up_to_the_call_limit() {
        let mut host = ScriptedHost::new().result("echo", Ok("hi"));
        host.max_tool_calls_per_step = Some(1);
        let call = |name: &str| ToolCall {
            id: "1".to_string(),
            name: name.to_string(),
            arguments: "{}".to_string(),
        };
        assert_eq!(host.invoke_tool(&call("echo")), Ok("hi".to_string()));
        let refused = host.invoke_tool(&call("other")).expect_err("refused");
        assert_eq!(
            refused.message,
            "not run: this is tool call 2 of step 1, and max_tool_calls_per_step is 1. Ask for fewer calls at once."
        );
        host.max_tool_calls_per_step = None;
        assert_eq!(host.invoke_tool(&call("other")), Ok(String::new()));
        assert_eq!(host.invoked.len(), 3);
    }

    #[test]
    fn added_is_what_came_after_the_request() {
        let mut host = ScriptedHost::new();
        assert!(host.added().is_empty());
        host.add_message(Message::assistant("hi")).expect("added");
        assert_eq!(host.added(), [Message::assistant("hi")]);
        host.memory.clear();
        assert!(host.added().is_empty());
        host.warn("careful");
        host.finish();
        assert_eq!(host.logs, ["warn: careful"]);
        assert!(host.finished);
    }
}
