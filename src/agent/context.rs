//! The state of one run that the strategy's host imports act on.
//!
//! It lives outside the wasm store on purpose: when a guest traps, times out
//! or a host call panics, the store is gone but the memory, usage and step
//! records are still here for the run record.

use std::sync::{Arc, Mutex, MutexGuard};

use super::deadline::StepClock;
use super::events::{EventSink, MessageSink, RunEvent};
use super::memory::Memory;
use super::message::{check_request, Message, MessageError, Role};
use super::settings::RunSettings;
use super::stuck;
use crate::llm::{
    estimate_tokens, ChatRequest, ChatResponse, LlmClient, ToolChoice, ToolSpec, Usage,
};

pub struct RunContext {
    pub run_id: String,
    /// The agent's configuration layered over its strategy's defaults.
    pub settings: RunSettings,
    pub max_steps: u32,
    pub llm: LlmClient,
    pub tool_specs: Vec<ToolSpec>,
    pub events: EventSink,
    pub messages: Option<MessageSink>,
    /// The current step's deadline clock; host waits pause it.
    pub clock: Arc<StepClock>,
    state: Mutex<RunState>,
}

pub struct RunState {
    pub memory: Memory,
    pub usage: Usage,
    pub current_step: u32,
    pub finished: bool,
    /// Set when the input-token budget refused a request.
    pub token_limit: Option<String>,
    /// Input tokens counted against `max_input_tokens`: the server's count,
    /// or agentd's estimate when the server reports none.
    pub budget_spent: u64,
    /// The step whose prompt carries the stuck warning (one step only).
    pub warning_step: Option<u32>,
    /// The plugin executing right now, to name it when a step overruns.
    pub current_plugin: String,
    pub results: Vec<String>,
}

/// The configuration as it applies to the step being executed.
pub struct StepConfig {
    pub name: String,
    pub system_prompt: Option<String>,
    pub next_step_prompt: Option<String>,
    pub current_step: u32,
    pub max_steps: u32,
    pub max_observe: Option<u32>,
    pub tool_choice: ToolChoice,
    pub special_tools: Vec<String>,
}

pub enum ChatFailure {
    TokenLimit(String),
    /// The strategy's request is one a real server would refuse; it was not
    /// sent.
    Invalid(String),
    Failed(String),
}

impl RunContext {
    pub fn new(
        run_id: String,
        settings: RunSettings,
        llm: LlmClient,
        tool_specs: Vec<ToolSpec>,
        events: EventSink,
        strategy_name: &str,
    ) -> Self {
        let memory = Memory::new(settings.max_messages as usize);
        RunContext {
            run_id,
            max_steps: settings.max_steps,
            settings,
            llm,
            tool_specs,
            events,
            messages: None,
            clock: StepClock::new(),
            state: Mutex::new(RunState {
                memory,
                usage: Usage::default(),
                current_step: 0,
                finished: false,
                token_limit: None,
                budget_spent: 0,
                warning_step: None,
                current_plugin: strategy_name.to_string(),
                results: Vec::new(),
            }),
        }
    }

    /// Never held across an await. A poisoned lock only means a host call
    /// panicked mid-update; the data is still the best record there is.
    pub fn lock(&self) -> MutexGuard<'_, RunState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn emit(&self, event: RunEvent) {
        (self.events)(&event);
    }

    pub fn step_config(&self) -> StepConfig {
        let st = self.lock();
        let configured = self.settings.next_step_prompt.as_deref();
        let next_step_prompt = if st.warning_step == Some(st.current_step) {
            Some(stuck::prompt_with_warning(configured))
        } else {
            configured.map(str::to_string)
        };
        StepConfig {
            name: self.settings.name.clone(),
            system_prompt: self.settings.system_prompt.clone(),
            next_step_prompt,
            current_step: st.current_step,
            max_steps: self.max_steps,
            max_observe: self.settings.max_observe,
            tool_choice: self.settings.tool_choice,
            special_tools: self.settings.special_tools.clone(),
        }
    }

    pub fn with_message_sink(mut self, sink: Option<MessageSink>) -> Self {
        self.messages = sink;
        self
    }

    /// Pins the run's request outside the memory window (it is still one
    /// message of the transcript).
    pub fn pin_request(&self, request: &str) -> Result<(), MessageError> {
        let message = Message::user(request);
        self.lock().memory.pin_request(message.clone())?;
        if let Some(sink) = &self.messages {
            sink(&message);
        }
        Ok(())
    }

    pub fn add_message(&self, message: Message) -> Result<(), MessageError> {
        let copy = self.messages.as_ref().map(|_| message.clone());
        let announce = (message.role == Role::Assistant).then(|| {
            (
                message.content.clone(),
                message.tool_calls.iter().map(|c| c.name.clone()).collect(),
            )
        });
        let step = {
            let mut st = self.lock();
            st.memory.add(message)?;
            st.current_step
        };
        if let (Some(sink), Some(copy)) = (&self.messages, copy) {
            sink(&copy);
        }
        if let Some((content, tool_calls)) = announce {
            self.emit(RunEvent::AssistantMessage {
                step,
                content,
                tool_calls,
            });
        }
        Ok(())
    }

    pub fn finish(&self) {
        self.lock().finished = true;
    }

    /// One LLM call on behalf of the strategy, inside the run's token budget.
    pub async fn chat(
        &self,
        messages: Vec<Message>,
        tools: Vec<ToolSpec>,
        tool_choice: ToolChoice,
    ) -> Result<ChatResponse, ChatFailure> {
        check_request(&messages)
            .map_err(|e| ChatFailure::Invalid(format!("invalid chat request, not sent: {e}")))?;
        let needed = estimate_tokens(&messages, &tools);
        if let Some(max) = self.llm.settings().max_input_tokens {
            let mut st = self.lock();
            let current = st.budget_spent;
            if st.token_limit.is_some() || current + needed > max {
                let msg = format!(
                    "Request may exceed input token limit (Current: {current}, Needed: {needed}, Max: {max})"
                );
                st.token_limit = Some(msg.clone());
                return Err(ChatFailure::TokenLimit(msg));
            }
        }
        let response = {
            // Waiting for the model is not plugin time.
            let _paused = self.clock.pause();
            self.llm
                .chat(ChatRequest {
                    messages: &messages,
                    tools: &tools,
                    tool_choice,
                })
                .await
                .map_err(|e| ChatFailure::Failed(e.to_string()))?
        };
        let mut st = self.lock();
        st.usage += response.usage;
        st.budget_spent += if response.usage.prompt_tokens > 0 {
            response.usage.prompt_tokens
        } else {
            needed
        };
        drop(st);
        Ok(response)
    }
}
