//! The state of one run, and the run as the plugin host sees it: the loop
//! implements the host's [`RunHost`] here, so the host never names the
//! loop's types.
//!
//! It lives outside the wasm store on purpose: when a guest traps, times out
//! or a host call panics, the store is gone but the memory, usage and step
//! records are still here for the run record. Its state is private: the
//! loop moves it forward through the methods below, which keep its rules
//! (one step at a time, the warning for one step only, the budget).

use std::sync::{Mutex, MutexGuard};

use super::events::{EventSink, MessageSink, RunEvent};
use super::memory::Memory;
use super::settings::RunSettings;
use super::stuck::{self, is_stuck};
use crate::chat::{check_request, Message, MessageError, Role, ToolCall};
use crate::chat::{ToolChoice, ToolSpec, Usage};
use crate::llm::{estimate_tokens, ChatRequest, ChatResponse, LlmClient};
use crate::plugin::run_host::{ChatFailure, RunHost, StepConfig};
use crate::sync::LockExt;

/// One run's state outside the wasm store, and the strategy host's view of
/// the run ([`RunHost`]): it outlives a trap or timeout, so the record can
/// still be built from it.
pub struct RunContext {
    /// The run's id, copied into its record.
    pub run_id: String,
    /// The agent's configuration layered over its strategy's defaults.
    pub settings: RunSettings,
    llm: LlmClient,
    tool_specs: Vec<ToolSpec>,
    events: EventSink,
    messages: Option<MessageSink>,
    state: Mutex<RunState>,
}

struct RunState {
    memory: Memory,
    usage: Usage,
    current_step: u32,
    finished: bool,
    /// Set when the input-token budget refused a request.
    token_limit: Option<String>,
    /// Input tokens counted against `max_input_tokens`: the server's count,
    /// or agentd's estimate when the server reports none.
    budget_spent: u64,
    /// The step whose prompt carries the stuck warning (one step only).
    warning_step: Option<u32>,
    results: Vec<String>,
}

/// What the loop does next, decided under one lock.
pub enum NextStep {
    /// A step to run, with the memory mark it started at.
    Step {
        /// The 1-based number of the step to run.
        step: u32,
        /// The memory mark before the step, for stuck detection.
        mark: u64,
    },
    /// The run was finished (a special tool, the strategy, the budget).
    Finished,
    /// The step limit was reached; the `Terminated` line is recorded.
    LimitReached,
}

/// What the loop learns when it records a step.
pub struct Recorded {
    /// The step repeated an earlier action (`agent::stuck`); the next step's
    /// prompt carries the warning.
    pub stuck: bool,
    /// The token budget refused a request during the step: the run ends as
    /// `token_limit`.
    pub token_limited: bool,
}

/// Everything the run record needs, read under one lock.
pub struct Final {
    /// Steps begun, including a last one that failed.
    pub steps: u32,
    /// One line per step (`Step N: ...`), plus `Terminated: ...` at the limit.
    pub results: Vec<String>,
    /// The memory at the end: the pinned request, then the window.
    pub messages: Vec<Message>,
    /// Token usage summed over every chat call of the run.
    pub usage: Usage,
}

impl RunContext {
    /// A run with an empty memory at step 0; `messages`, when set, receives
    /// every message as it enters memory (the transcript the window may drop).
    pub fn new(
        run_id: String,
        settings: RunSettings,
        llm: LlmClient,
        tool_specs: Vec<ToolSpec>,
        events: EventSink,
        messages: Option<MessageSink>,
    ) -> Self {
        let memory = Memory::new(settings.max_messages as usize);
        RunContext {
            run_id,
            settings,
            llm,
            tool_specs,
            events,
            messages,
            state: Mutex::new(RunState {
                memory,
                usage: Usage::default(),
                current_step: 0,
                finished: false,
                token_limit: None,
                budget_spent: 0,
                warning_step: None,
                results: Vec::new(),
            }),
        }
    }

    /// Never held across an await. A poisoned lock only means a host call
    /// panicked mid-update; the data is still the best record there is.
    fn lock(&self) -> MutexGuard<'_, RunState> {
        self.state.lock_unpoisoned()
    }

    /// Hands `event` to the run's event sink.
    pub fn emit(&self, event: RunEvent) {
        (self.events)(&event);
    }

    /// The resolved step limit (at least 1).
    pub fn max_steps(&self) -> u32 {
        self.settings.max_steps
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

    /// Moves to the next step, unless the run is finished or at its limit.
    pub fn next_step(&self) -> NextStep {
        let mut st = self.lock();
        if st.finished {
            return NextStep::Finished;
        }
        if st.current_step >= self.settings.max_steps {
            let line = format!(
                "Terminated: Reached max steps ({})",
                self.settings.max_steps
            );
            st.results.push(line);
            return NextStep::LimitReached;
        }
        st.current_step += 1;
        NextStep::Step {
            step: st.current_step,
            mark: st.memory.mark(),
        }
    }

    /// Whether the input-token budget has refused a request in this run; the
    /// loop then ends it as `token_limit` even if the strategy failed.
    pub fn token_limited(&self) -> bool {
        self.lock().token_limit.is_some()
    }

    /// Records `"Step {step}: {text}"` and checks whether the step that began
    /// at `mark` repeated an earlier action; if so the next step's prompt
    /// carries the warning, once.
    pub fn record_step(&self, step: u32, mark: u64, text: &str) -> Recorded {
        let mut st = self.lock();
        st.results.push(format!("Step {step}: {text}"));
        let stuck = is_stuck(&st.memory, mark, self.settings.duplicate_threshold as usize);
        if stuck {
            st.warning_step = Some(step + 1);
        }
        Recorded {
            stuck,
            token_limited: st.token_limit.is_some(),
        }
    }

    /// Steps, step results, memory and usage, read together for the run record.
    pub fn final_state(&self) -> Final {
        let st = self.lock();
        Final {
            steps: st.current_step,
            results: st.results.clone(),
            messages: st.memory.messages(),
            usage: st.usage,
        }
    }
}

#[async_trait::async_trait]
impl RunHost for RunContext {
    fn step_config(&self) -> StepConfig {
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
            max_steps: self.settings.max_steps,
            max_observe: self.settings.max_observe,
            tool_choice: self.settings.tool_choice,
            special_tools: self.settings.special_tools.clone(),
        }
    }

    fn memory(&self) -> Vec<Message> {
        self.lock().memory.messages()
    }

    fn add_message(&self, message: Message) -> Result<(), MessageError> {
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

    /// One LLM call on behalf of the strategy, inside the run's token budget.
    async fn chat(
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
        let response = self
            .llm
            .chat(ChatRequest {
                messages: &messages,
                tools: &tools,
                tool_choice,
            })
            .await
            .map_err(|e| ChatFailure::Failed(e.to_string()))?;
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

    fn tool_specs(&self) -> Vec<ToolSpec> {
        self.tool_specs.clone()
    }

    fn tool_started(&self, call: &ToolCall) {
        let step = self.lock().current_step;
        self.emit(RunEvent::ToolCall {
            step,
            id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
        });
    }

    fn tool_finished(&self, call: &ToolCall, ok: bool, output: &str) {
        let step = self.lock().current_step;
        self.emit(RunEvent::ToolResult {
            step,
            id: call.id.clone(),
            name: call.name.clone(),
            ok,
            output: output.to_string(),
        });
    }

    fn finish(&self) {
        self.lock().finished = true;
    }
}
