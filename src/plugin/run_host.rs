//! What the strategy world's imports need from the run they serve. The host
//! defines it and the run loop implements it (as Zed's extension host sees
//! the editor only through delegate traits), so the plugin host never knows
//! the loop's types and the loop never knows wasmtime's.

use std::sync::Arc;

use crate::chat::{Message, MessageError, ToolCall};
use crate::chat::{ToolChoice, ToolSpec};
use crate::llm::ChatResponse;

/// The agent's configuration as it applies to the step being executed: the
/// strategy world's `agent-config`, in the host's types.
#[derive(Debug, Clone, PartialEq)]
pub struct StepConfig {
    /// The agent's name.
    pub name: String,
    /// The resolved system prompt; `None` sends none.
    pub system_prompt: Option<String>,
    /// Carries the stuck warning for this one step when there is one.
    pub next_step_prompt: Option<String>,
    /// 1-based number of the step being executed (0 while probing).
    pub current_step: u32,
    /// The run's resolved step limit.
    pub max_steps: u32,
    /// Truncate tool observations to this many characters; applied by the
    /// strategy, not the host (the bundled `toolcall` reads `None` and 0 as
    /// no limit).
    pub max_observe: Option<u32>,
    /// How the model may use tools in this step's requests.
    pub tool_choice: ToolChoice,
    /// Tools whose successful execution finishes the run; the strategy is
    /// the one that matches them (case-insensitively) and calls `finish`.
    pub special_tools: Vec<String>,
}

/// Why a `chat` import did not answer.
#[derive(Debug, Clone, PartialEq)]
pub enum ChatFailure {
    /// The run's input-token budget refused the request.
    TokenLimit(String),
    /// The request is one a real server would refuse; it was not sent.
    Invalid(String),
    /// The LLM failed (after retries) or refused the request.
    Failed(String),
}

/// Why `add-message` refused a message.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum AddMessageError {
    /// A message a real server would refuse.
    #[error(transparent)]
    Invalid(#[from] MessageError),
    /// Over one of the run's limits (a message's size, the run's byte
    /// budget): not stored, and the run ends with this reason.
    #[error("{0}")]
    OverLimit(String),
}

/// A message `add-message` refused: why, and which message.
#[derive(Debug, PartialEq, thiserror::Error)]
#[error("{error}")]
pub struct Refused {
    /// Why it was refused.
    pub error: AddMessageError,
    /// The message's [`Message::describe`], so the strategy is told which
    /// one: made only when a message is refused, not for each one added
    /// (it walks the content, which may be a long tool result).
    pub described: String,
}

impl Refused {
    /// `message` refused for `error`.
    pub fn new(error: impl Into<AddMessageError>, message: &Message) -> Self {
        Refused {
            error: error.into(),
            described: message.describe(),
        }
    }
}

/// The run behind a strategy's imports. Waits (`chat`) pause the step clock
/// in the import that makes them, not here.
#[async_trait::async_trait]
pub trait RunHost: Send + Sync {
    /// The agent's configuration for the current step (the `config` import).
    fn step_config(&self) -> StepConfig;
    /// The run's request, then the memory window.
    fn memory(&self) -> Vec<Message>;
    /// Adds a message to the run's memory (the `add-message` import); refuses
    /// one a real server would refuse, and nothing is added then.
    fn add_message(&self, message: Message) -> Result<(), Refused>;
    /// One LLM call within the run's budget.
    async fn chat(
        &self,
        messages: Vec<Message>,
        tools: Vec<ToolSpec>,
        tool_choice: ToolChoice,
    ) -> Result<ChatResponse, ChatFailure>;
    /// `chat` with the request built from what the host holds (the
    /// `chat-with-memory` import): `system_prompt` as a `system` message,
    /// then [`Self::memory`]. The default builds exactly that and sends it;
    /// a host may send the same request more cheaply.
    ///
    /// `tools` is shared: with the agent's tools alone (the common case) it
    /// is [`Self::tool_specs`] itself, not a copy of every name,
    /// description and schema made for each request.
    async fn chat_with_memory(
        &self,
        system_prompt: Option<String>,
        tools: Arc<[ToolSpec]>,
        tool_choice: ToolChoice,
    ) -> Result<ChatResponse, ChatFailure> {
        let mut messages: Vec<Message> = system_prompt.map(Message::system).into_iter().collect();
        messages.extend(self.memory());
        self.chat(messages, tools.to_vec(), tool_choice).await
    }
    /// The specs of the run's tools, as the strategy passes them to `chat`;
    /// shared, since they are the same for the whole run.
    fn tool_specs(&self) -> Arc<[ToolSpec]>;
    /// Asked before a tool call runs; `Err` carries why it must not (the
    /// step's call limit, arguments over their limit). Enforced here, in
    /// the host, so a strategy cannot get around it.
    fn admit_tool_call(&self, call: &ToolCall) -> Result<(), String>;
    /// Asked after [`Self::admit_tool_call`], with the step clock paused:
    /// a call the operator must approve first waits here for the decision.
    /// `Err` carries the observation of a denied call ("denied by the
    /// operator: ..."). Most runs approve nothing, hence the default.
    async fn approve_tool_call(&self, _call: &ToolCall) -> Result<(), String> {
        Ok(())
    }
    /// A tool call is about to run (the loop reports it).
    fn tool_started(&self, call: &ToolCall);
    /// The run this host serves, for its trace's `execute_tool` spans;
    /// none while a plugin is probed at load time.
    fn run_id(&self) -> Option<&str> {
        None
    }
    /// A tool call ended with `output` (its result, or its error's text);
    /// returns the output as the strategy and the record get it: cut to the
    /// run's limit with a note.
    fn tool_finished(&self, call: &ToolCall, ok: bool, output: String) -> String;
    /// The run is finished after this step.
    fn finish(&self);
}

/// The host a plugin sees while it is probed at load time, when no run
/// exists: what could act on a run fails, the rest is empty.
pub struct ProbeHost;

const NOT_WHILE_LOADING: &str = "agent imports are not available while the plugin is being loaded";

#[async_trait::async_trait]
impl RunHost for ProbeHost {
    fn step_config(&self) -> StepConfig {
        StepConfig {
            name: String::new(),
            system_prompt: None,
            next_step_prompt: None,
            current_step: 0,
            max_steps: 0,
            max_observe: None,
            tool_choice: ToolChoice::None,
            special_tools: Vec::new(),
        }
    }

    fn memory(&self) -> Vec<Message> {
        Vec::new()
    }

    fn add_message(&self, message: Message) -> Result<(), Refused> {
        Err(Refused::new(
            MessageError::Unavailable(NOT_WHILE_LOADING),
            &message,
        ))
    }

    async fn chat(
        &self,
        _messages: Vec<Message>,
        _tools: Vec<ToolSpec>,
        _tool_choice: ToolChoice,
    ) -> Result<ChatResponse, ChatFailure> {
        Err(ChatFailure::Failed(NOT_WHILE_LOADING.into()))
    }

    fn tool_specs(&self) -> Arc<[ToolSpec]> {
        Arc::new([])
    }

    fn admit_tool_call(&self, _call: &ToolCall) -> Result<(), String> {
        Err(NOT_WHILE_LOADING.into())
    }

    fn tool_started(&self, _call: &ToolCall) {}

    fn tool_finished(&self, _call: &ToolCall, _ok: bool, output: String) -> String {
        output
    }

    fn finish(&self) {}
}
