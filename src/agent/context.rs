//! The state of one run, and the run as the plugin host sees it: the loop
//! implements the host's [`RunHost`] here, so the host never names the
//! loop's types.
//!
//! It lives outside the wasm store on purpose: when a guest traps, times out
//! or a host call panics, the store is gone but the memory, usage and step
//! records are still here for the run record. Its state is private: the
//! loop moves it forward through the methods below, which keep its rules
//! (one step at a time, the warning for one step only, the budget).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::events::{EventSink, MessageSink, RunEvent};
use super::human::{human_duration, Decision, HumanChannel, Reply, Waiting};
use super::limits::{event_bytes, human_bytes, message_bytes, truncate_with_note};
use super::memory::{Entry, Memory};
use super::resume::{Checkpoint, CheckpointHook, Prior};
use super::settings::{RunLimits, RunSettings};
use super::stuck::{self, is_stuck};
use crate::chat::{check_request, AsMessage, Kept, Message, MessageError, Role, ToolCall};
use crate::chat::{ToolChoice, ToolSpec, Usage};
use crate::llm::{estimate_tokens, ChatRequest, ChatResponse, LlmClient};
use crate::plan::Plan;
use crate::plugin::human::{AskFailure, AskHuman};
use crate::plugin::plan::{PlanRefused, RunPlan};
use crate::plugin::run_host::{AddMessageError, ChatFailure, Refused, RunHost, StepConfig};
use crate::sync::LockExt;

/// One run's state outside the wasm store, and the strategy host's view of
/// the run ([`RunHost`]): it outlives a trap or timeout, so the record can
/// still be built from it.
pub struct RunContext {
    /// The run's id, copied into its record.
    pub run_id: String,
    /// The agent's configuration layered over its strategy's defaults.
    pub settings: RunSettings,
    /// What this run may make the host keep, and for how long it may go on.
    pub limits: RunLimits,
    llm: LlmClient,
    /// Shared with every request that sends the agent's tools as they are.
    tool_specs: Arc<[ToolSpec]>,
    events: EventSink,
    messages: Option<MessageSink>,
    state: Mutex<RunState>,
    /// Cancelled when a limit ends the run from inside a host call (the
    /// byte budget, an over-size message): the loop stops the step at the
    /// guest's next yield instead of waiting for the strategy to notice.
    stop: CancellationToken,
    /// Where the run's questions and held tool calls wait for a person;
    /// `None` when nobody can be reached (asks fail, held calls are denied).
    human: Option<Arc<HumanChannel>>,
    /// The caller's hook at the end of each completed step.
    checkpoint_hook: Option<CheckpointHook>,
    /// The run's metric handles (steps, plugin time, tokens).
    pub metrics: super::metrics::RunMetrics,
    /// Budgets shared with other runs (`agent::budget`), asked beside
    /// `max_input_tokens` before each request.
    budget: Option<Arc<dyn super::budget::TokenBudget>>,
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
    /// Bytes of transcript and events kept so far, against `max_run_bytes`.
    bytes_kept: u64,
    /// Why a limit ended the run; set once, with `stop` cancelled.
    stopped: Option<String>,
    /// Tool calls asked for in the current step (admitted or not).
    tool_calls_in_step: u32,
    /// Host calls that wait (LLM requests, sandbox operations) asked for in
    /// the current step, admitted or not, against `max_host_calls_per_step`.
    host_calls_in_step: u32,
    /// Calls of the model whose arguments were over the limit and were
    /// replaced: call id → (the placeholder arguments, why it is refused).
    stripped_calls: HashMap<String, (String, String)>,
    /// Time spent waiting for a person in earlier waits, and the start of
    /// the current one: neither counts against `max_run_time`.
    waited: Duration,
    waiting_since: Option<Instant>,
    /// Messages of the run's transcript so far (a resumed run's count from
    /// the first message it started from): where a checkpoint ends.
    transcript_len: u32,
    /// The plan the strategy last published (a resumed run's predecessor's
    /// until then), for `plan.current()` and the record.
    plan: Option<Plan>,
    /// The system message of the last `chat_with_memory`, encoded: a
    /// strategy sends the same system prompt at every step, and encoding it
    /// (a few KiB to escape, for the bundled agents) at every request was
    /// work done again for nothing.
    system: Option<Arc<Kept>>,
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
    /// The step's result as recorded: cut to `max_message_bytes`.
    pub result: String,
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
    /// The plan at the end.
    pub plan: Option<Plan>,
}

impl RunContext {
    /// A run with an empty memory at step 0; `messages`, when set, receives
    /// every message as it enters memory (the transcript the window may drop).
    pub fn new(
        run_id: String,
        settings: RunSettings,
        limits: RunLimits,
        llm: LlmClient,
        tool_specs: Vec<ToolSpec>,
        events: EventSink,
        messages: Option<MessageSink>,
    ) -> Self {
        let memory = Memory::new(settings.max_messages as usize);
        let metrics = super::metrics::RunMetrics::new(&settings.name, &llm.settings().model);
        RunContext {
            run_id,
            settings,
            limits,
            llm,
            tool_specs: tool_specs.into(),
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
                bytes_kept: 0,
                stopped: None,
                tool_calls_in_step: 0,
                host_calls_in_step: 0,
                stripped_calls: HashMap::new(),
                waited: Duration::ZERO,
                waiting_since: None,
                transcript_len: 0,
                plan: None,
                system: None,
            }),
            stop: CancellationToken::new(),
            human: None,
            checkpoint_hook: None,
            metrics,
            budget: None,
        }
    }

    /// The run's channel to a person (see [`HumanChannel`]).
    pub fn with_human(mut self, human: Option<Arc<HumanChannel>>) -> Self {
        self.human = human;
        self
    }

    /// Time the run has spent waiting for a person, the current wait
    /// included: the run's wall clock does not count it.
    pub fn waited(&self) -> Duration {
        let st = self.lock();
        st.waited + st.waiting_since.map_or(Duration::ZERO, |t| t.elapsed())
    }

    /// Puts `waiting` on the run's channel and waits at most `timeout`;
    /// `announce` is emitted once it can be answered, and `record` gets the
    /// answer (`None`: none in time) as soon as the wait ends, before the
    /// run waits for its slot again (`release_waiting`), so the decision's
    /// event says when it was made. The time, the slot's wait included, is
    /// recorded as waited (also when a cancel drops the wait).
    async fn wait_for_person<R>(
        &self,
        human: &HumanChannel,
        waiting: Waiting,
        timeout: Duration,
        announce: RunEvent,
        record: impl FnOnce(Option<Reply>) -> R,
    ) -> R {
        self.lock().waiting_since = Some(Instant::now());
        let _counted = WaitCounted(self);
        let reply = human.wait(waiting, timeout, || self.emit(announce)).await;
        let recorded = record(reply);
        human.take_slot_back().await;
        recorded
    }

    /// A plugin's question to a person (`human.ask`): waits for the answer
    /// at most `input_timeout`. The question and the answer are cut to
    /// `max_message_bytes` like any message, since both are kept.
    pub async fn ask_person(
        &self,
        plugin: &str,
        mut question: String,
    ) -> Result<String, AskFailure> {
        let Some(human) = self.human.clone() else {
            return Err(AskFailure::Unavailable(format!(
                "no person can be asked in this run (agent `{}`): nothing answers its questions here",
                self.settings.name
            )));
        };
        // Counted like an LLM request: the wait pauses the step clock, so a
        // plugin asking in a loop would otherwise go on without any limit.
        self.admit_host_call("a question to a person")
            .map_err(AskFailure::Unavailable)?;
        truncate_with_note(
            &mut question,
            self.limits.max_message_bytes,
            "the question",
            "max_message_bytes",
        );
        let timeout = self.settings.input_timeout;
        let id = human.next_id();
        let step = self.current_step();
        let since_ms = crate::time::now_ms();
        let waiting = Waiting::Input {
            id: id.clone(),
            plugin: plugin.to_string(),
            question: question.clone(),
            since_ms,
            deadline_ms: since_ms.saturating_add(timeout.as_millis() as i64),
        };
        let announce = RunEvent::InputRequested {
            step,
            id: id.clone(),
            plugin: plugin.to_string(),
            question,
            timeout_secs: timeout.as_secs_f64(),
        };
        let record = |reply| match reply {
            Some(Reply::Text { mut text, by_uid }) => {
                truncate_with_note(
                    &mut text,
                    self.limits.max_message_bytes,
                    "the answer",
                    "max_message_bytes",
                );
                self.emit(RunEvent::InputReceived {
                    step,
                    id,
                    text: Some(text.clone()),
                    by_uid,
                    timed_out: false,
                });
                Ok(text)
            }
            _ => {
                self.emit(RunEvent::InputReceived {
                    step,
                    id,
                    text: None,
                    by_uid: None,
                    timed_out: true,
                });
                Err(AskFailure::NoAnswer(format!(
                    "no answer within {} (input_timeout)",
                    human_duration(timeout)
                )))
            }
        };
        self.wait_for_person(&human, waiting, timeout, announce, record)
            .await
    }

    /// The same run, calling `hook` at the end of each completed step
    /// ([`Self::checkpoint_step`]).
    pub fn with_checkpoint_hook(mut self, hook: Option<CheckpointHook>) -> Self {
        self.checkpoint_hook = hook;
        self
    }

    /// The budgets shared with other runs (see [`super::budget`]).
    pub fn with_budget(mut self, budget: Option<Arc<dyn super::budget::TokenBudget>>) -> Self {
        self.budget = budget;
        self
    }

    /// Hands the end of the step just recorded to the caller's hook and
    /// waits for it (the daemon makes the step durable there).
    pub async fn checkpoint_step(&self) {
        if let Some(hook) = &self.checkpoint_hook {
            hook(self.checkpoint()).await;
        }
    }

    /// Never held across an await. A poisoned lock only means a host call
    /// panicked mid-update; the data is still the best record there is.
    fn lock(&self) -> MutexGuard<'_, RunState> {
        self.state.lock_unpoisoned()
    }

    /// Sends `event` to the run's sink, unless it would take the run over
    /// its byte budget (then the run is stopped and the event dropped).
    pub fn emit(&self, event: RunEvent) {
        let _ = self.emit_kept(event);
    }

    /// [`Self::emit`], saying whether the event was kept: `Err` is why the
    /// byte budget refused it (the run is stopped then).
    fn emit_kept(&self, event: RunEvent) -> Result<(), String> {
        let kept = {
            let mut st = self.lock();
            self.charge(&mut st, event_bytes(&event))
        };
        if kept.is_ok() {
            (self.events)(&event);
        }
        kept
    }

    /// Counts `bytes` against `max_run_bytes`; past it, stops the run.
    fn charge(&self, st: &mut RunState, bytes: u64) -> Result<(), String> {
        if let Some(reason) = &st.stopped {
            return Err(reason.clone());
        }
        let total = st.bytes_kept.saturating_add(bytes);
        if total > self.limits.max_run_bytes {
            let reason = format!(
                "the run's transcript and events reached max_run_bytes ({}): it would keep {} bytes",
                human_bytes(self.limits.max_run_bytes),
                total
            );
            self.stop_with(st, reason.clone());
            return Err(reason);
        }
        st.bytes_kept = total;
        Ok(())
    }

    /// Ends the run with `reason` (the first reason wins).
    fn stop_with(&self, st: &mut RunState, reason: String) {
        if st.stopped.is_none() {
            warn!(run_id = %self.run_id, %reason, "a run limit ends the run");
            st.stopped = Some(reason);
        }
        self.stop.cancel();
    }

    /// Resolves once a limit has ended the run (see [`Self::stop_reason`]).
    pub async fn stopped(&self) {
        self.stop.cancelled().await
    }

    /// Why a limit ended the run, if one did.
    pub fn stop_reason(&self) -> Option<String> {
        self.lock().stopped.clone()
    }

    /// Refuses a message over its size limits (content, a call's
    /// arguments): a strategy that sends one ends the run, naming the key.
    fn check_message_size(&self, m: &Message) -> Result<(), String> {
        let content = m.content.as_ref().map_or(0, String::len);
        if content > self.limits.max_message_bytes {
            return Err(format!(
                "content is {content} bytes, over max_message_bytes ({})",
                human_bytes(self.limits.max_message_bytes as u64)
            ));
        }
        if let Some(c) = m
            .tool_calls
            .iter()
            .find(|c| c.arguments.len() > self.limits.max_tool_arguments_bytes)
        {
            return Err(format!(
                "call of `{}` has {} bytes of arguments, over max_tool_arguments_bytes ({})",
                c.name,
                c.arguments.len(),
                human_bytes(self.limits.max_tool_arguments_bytes as u64)
            ));
        }
        Ok(())
    }

    /// What the model returned, within the limits before any of it is
    /// kept: text over `max_message_bytes` is cut with a note; a call whose
    /// arguments are over `max_tool_arguments_bytes` keeps a small
    /// placeholder instead, and is refused with an explanation when the
    /// strategy invokes it, so the model learns why and the run goes on.
    fn cap_reply(&self, message: &mut Message) {
        if let Some(content) = &mut message.content {
            truncate_with_note(
                content,
                self.limits.max_message_bytes,
                "the model's reply",
                "max_message_bytes",
            );
        }
        let max = self.limits.max_tool_arguments_bytes;
        for call in &mut message.tool_calls {
            if call.arguments.len() <= max {
                continue;
            }
            let reason = format!(
                "the model's arguments for `{}` were {} bytes, over max_tool_arguments_bytes ({}): agentd did not keep them and did not run the call. Send shorter arguments (for example, write a long file in several steps).",
                call.name,
                call.arguments.len(),
                human_bytes(max as u64)
            );
            warn!(run_id = %self.run_id, tool = %call.name, bytes = call.arguments.len(), "the model's tool arguments are over max_tool_arguments_bytes");
            let placeholder = serde_json::json!({ "agentd_error": reason }).to_string();
            call.arguments = placeholder.clone();
            self.lock()
                .stripped_calls
                .insert(call.id.clone(), (placeholder, reason));
        }
    }

    /// Counts one host call that waits (`what`: "an LLM request", "sandbox
    /// `list_dir`") against `max_host_calls_per_step`; past it, `Err` says
    /// why it must not be made, naming the key, and the first refusal of a
    /// step is logged.
    ///
    /// Why a count and not a clock: the step deadline counts plugin time
    /// only, because a slow model or a long command is not the plugin's
    /// fault, so every wait pauses it. A plugin that does nothing but wait
    /// (a tool looping `list_dir("/")`, a strategy looping `chat`) would
    /// then never reach it and go on until `max_run_time`, loading the
    /// engine or spending tokens all along. Refusing the call at once,
    /// without waiting, lets the plugin's time count again, so such a loop
    /// meets the step deadline within `step_timeout`. It is counted here,
    /// in the loop that owns the run's limits and its step counter, not in
    /// the plugin host, so no plugin can reset it.
    pub fn admit_host_call(&self, what: &str) -> Result<(), String> {
        let mut st = self.lock();
        st.host_calls_in_step = st.host_calls_in_step.saturating_add(1);
        let (n, max) = (st.host_calls_in_step, self.limits.max_host_calls_per_step);
        if n <= max {
            return Ok(());
        }
        if n == max + 1 {
            warn!(run_id = %self.run_id, step = st.current_step, max, "further LLM requests and sandbox operations of this step are refused: max_host_calls_per_step");
        }
        Err(format!(
            "{what} refused, not performed: it is host call {n} of step {} (LLM requests and sandbox operations), and max_host_calls_per_step is {max}",
            st.current_step
        ))
    }

    /// Whether host calls were refused in the current step, and the limit:
    /// the step deadline a refused plugin then meets is named with it.
    pub fn host_calls_refused(&self) -> Option<u32> {
        let st = self.lock();
        let max = self.limits.max_host_calls_per_step;
        (st.host_calls_in_step > max).then_some(max)
    }

    /// The names of the run's tools, as the model calls them.
    pub fn tool_specs_names(&self) -> Vec<String> {
        self.tool_specs.iter().map(|t| t.name.clone()).collect()
    }

    /// The resolved step limit (at least 1).
    pub fn max_steps(&self) -> u32 {
        self.settings.max_steps
    }

    /// Pins the run's request outside the memory window (it is still one
    /// message of the transcript).
    pub fn pin_request(&self, request: &str) -> Result<(), MessageError> {
        let message = Arc::new(Kept::new(Message::user(request)));
        {
            let mut st = self.lock();
            st.memory.pin_kept(message.clone())?;
            st.transcript_len += 1;
        }
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
        st.tool_calls_in_step = 0;
        st.host_calls_in_step = 0;
        NextStep::Step {
            step: st.current_step,
            mark: st.memory.mark(),
        }
    }

    /// The step being run (0 before the first).
    pub fn current_step(&self) -> u32 {
        self.lock().current_step
    }

    /// Whether the input-token budget has refused a request in this run; the
    /// loop then ends it as `token_limit` even if the strategy failed.
    pub fn token_limited(&self) -> bool {
        self.lock().token_limit.is_some()
    }

    /// Records `"Step {step}: {text}"` and checks whether the step that began
    /// at `mark` repeated an earlier action; if so the next step's prompt
    /// carries the warning, once.
    pub fn record_step(&self, step: u32, mark: u64, mut text: String) -> Recorded {
        // The strategy's result line is kept too: cut like a message.
        truncate_with_note(
            &mut text,
            self.limits.max_message_bytes,
            "the step's result",
            "max_message_bytes",
        );
        let mut st = self.lock();
        st.results.push(format!("Step {step}: {text}"));
        let stuck = is_stuck(&st.memory, mark, self.settings.duplicate_threshold as usize);
        if stuck {
            st.warning_step = Some(step + 1);
        }
        Recorded {
            stuck,
            token_limited: st.token_limit.is_some(),
            result: text,
        }
    }

    /// Steps, step results, memory and usage, read together for the run
    /// record once the run is over: moved out, not copied (the memory's
    /// messages cost a deep copy each otherwise), which leaves the results,
    /// memory and plan empty; nothing reads them after the record.
    pub fn take_final(&self) -> Final {
        let mut st = self.lock();
        Final {
            steps: st.current_step,
            results: std::mem::take(&mut st.results),
            messages: st.memory.take_messages(),
            usage: st.usage,
            plan: st.plan.take(),
        }
    }

    /// Instead of [`Self::pin_request`] for a resumed run: the prior
    /// transcript's first message is pinned as the request and the others
    /// are added to the window in order, so the memory (and with it the
    /// next request) is the one the earlier run had after its last
    /// completed step; the step counter and a stuck warning owed to the
    /// next step carry over. The messages are not handed to the message
    /// sink: they are the caller's already (the daemon copies them into the
    /// new run's transcript when it creates the run). They count against
    /// `max_run_bytes`, which bounds what this run keeps.
    pub fn restore(&self, prior: &Prior) -> Result<(), String> {
        let Some((request, rest)) = prior.messages.split_first() else {
            return Err("the run to resume has no messages, not even its request".into());
        };
        if request.role != Role::User {
            return Err(format!(
                "the run to resume starts with a `{}` message, not its request",
                request.role
            ));
        }
        let mut st = self.lock();
        for m in &prior.messages {
            self.charge(&mut st, message_bytes(m))?;
        }
        st.memory
            .pin_request(request.clone())
            .map_err(|e| format!("the request of the run to resume: {e}"))?;
        for (i, m) in rest.iter().enumerate() {
            st.memory
                .add(m.clone())
                .map_err(|e| format!("message {} of the run to resume: {e}", i + 1))?;
        }
        st.current_step = prior.steps;
        st.warning_step = prior.stuck_warning.then(|| prior.steps.saturating_add(1));
        st.transcript_len = u32::try_from(prior.messages.len()).unwrap_or(u32::MAX);
        st.plan = prior.plan.clone();
        drop(st);
        // The run's own story (its events, and the record built from them)
        // starts from the plan it inherits, at the step it resumes after.
        if let Some(plan) = prior.plan.clone() {
            self.emit_kept(RunEvent::PlanChanged {
                step: prior.steps,
                plan,
            })?;
        }
        Ok(())
    }

    /// The system message for `prompt`: the one encoded for the last
    /// request when the prompt is the same (it is, step after step), else
    /// encoded now, outside the run's lock, and kept for the next.
    fn system_message(&self, prompt: String) -> Arc<Kept> {
        if let Some(kept) = &self.lock().system {
            if kept.content_str() == prompt {
                return kept.clone();
            }
        }
        let kept = Arc::new(Kept::new(Message::system(prompt)));
        self.lock().system = Some(kept.clone());
        kept
    }

    /// Where the step that just completed leaves the run, for the
    /// checkpoint hook: read after [`Self::record_step`].
    pub fn checkpoint(&self) -> Checkpoint {
        let st = self.lock();
        Checkpoint {
            steps: st.current_step,
            messages: st.transcript_len,
            stuck_warning: st.warning_step == Some(st.current_step.saturating_add(1)),
        }
    }

    /// Sends one request within the run's limits and budgets, and counts
    /// what it cost; `messages` owned (`chat`) or shared (`chat_with_memory`).
    async fn send_chat<M: AsMessage>(
        &self,
        messages: &[M],
        tools: &[ToolSpec],
        tool_choice: ToolChoice,
    ) -> Result<ChatResponse, ChatFailure> {
        self.admit_host_call("an LLM request")
            .map_err(ChatFailure::Failed)?;
        check_request(messages)
            .map_err(|e| ChatFailure::Invalid(format!("invalid chat request, not sent: {e}")))?;
        let needed = estimate_tokens(messages, tools);
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
        if let Some(Err(msg)) = self.budget.as_ref().map(|b| b.admit()) {
            self.lock().token_limit = Some(msg.clone());
            return Err(ChatFailure::TokenLimit(msg));
        }
        let mut response = self
            .llm
            .chat(ChatRequest {
                messages,
                tools,
                tool_choice,
                run_id: Some(&self.run_id),
            })
            .await
            .map_err(|e| ChatFailure::Failed(e.to_string()))?;
        self.cap_reply(&mut response.message);
        self.metrics.tokens(response.usage);
        if let Some(budget) = &self.budget {
            budget.charge(response.usage);
        }
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

    fn add_message(&self, message: Message) -> Result<(), Refused> {
        if let Err(why) = self.check_message_size(&message) {
            let reason = format!(
                "the strategy added a `{}` message whose {why}; it was refused",
                message.role
            );
            self.stop_with(&mut self.lock(), reason.clone());
            return Err(Refused::new(AddMessageError::OverLimit(reason), &message));
        }
        message.validate().map_err(|e| Refused::new(e, &message))?;
        let size = message_bytes(&message);
        let announce = (message.role == Role::Assistant).then(|| {
            (
                message.content.clone(),
                message.tool_calls.iter().map(|c| c.name.clone()).collect(),
            )
        });
        // Encoded and fingerprinted here, outside the run's lock: memory
        // keeps the JSON that every later request carries (the sink gets
        // the same) and what stuck detection compares.
        let kept = Arc::new(Kept::new(message));
        let entry = Entry::new(kept.clone());
        let step = {
            let mut st = self.lock();
            if let Err(reason) = self.charge(&mut st, size) {
                return Err(Refused::new(AddMessageError::OverLimit(reason), &kept));
            }
            // Validated above: `add_entry` checks again, and cannot refuse it.
            st.memory.add_entry(entry).map_err(|e| Refused {
                error: e.into(),
                described: String::new(),
            })?;
            st.transcript_len += 1;
            st.current_step
        };
        if let Some(sink) = &self.messages {
            sink(&kept);
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
        self.send_chat(&messages, &tools, tool_choice).await
    }

    /// The request a strategy would build from `memory` (the default's),
    /// with the memory's messages shared, not copied: at every step, the
    /// whole transcript used to be copied here, into the plugin and back.
    async fn chat_with_memory(
        &self,
        system_prompt: Option<String>,
        tools: Arc<[ToolSpec]>,
        tool_choice: ToolChoice,
    ) -> Result<ChatResponse, ChatFailure> {
        let system = system_prompt.map(|prompt| self.system_message(prompt));
        let messages: Vec<Arc<Kept>> = {
            let st = self.lock();
            let mut messages = Vec::with_capacity(st.memory.len() + 1);
            messages.extend(system);
            messages.extend(st.memory.shared());
            messages
        };
        self.send_chat(&messages, &tools, tool_choice).await
    }

    fn tool_specs(&self) -> Arc<[ToolSpec]> {
        self.tool_specs.clone()
    }

    fn admit_tool_call(&self, call: &ToolCall) -> Result<(), String> {
        let mut st = self.lock();
        st.tool_calls_in_step += 1;
        let (n, max) = (st.tool_calls_in_step, self.limits.max_tool_calls_per_step);
        if n > max {
            if n == max + 1 {
                warn!(run_id = %self.run_id, step = st.current_step, max, "further tool calls of this step are refused: max_tool_calls_per_step");
            }
            return Err(format!(
                "not run: this is tool call {n} of step {}, and max_tool_calls_per_step is {max}. Ask for fewer calls at once.",
                st.current_step
            ));
        }
        if let Some((placeholder, reason)) = st.stripped_calls.get(&call.id) {
            if *placeholder == call.arguments {
                return Err(reason.clone());
            }
        }
        let max = self.limits.max_tool_arguments_bytes;
        if call.arguments.len() > max {
            return Err(format!(
                "not run: the arguments for `{}` are {} bytes, over max_tool_arguments_bytes ({})",
                call.name,
                call.arguments.len(),
                human_bytes(max as u64)
            ));
        }
        Ok(())
    }

    fn run_id(&self) -> Option<&str> {
        Some(&self.run_id)
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

    fn tool_finished(&self, call: &ToolCall, ok: bool, mut output: String) -> String {
        let what = if ok { "tool result" } else { "tool error" };
        truncate_with_note(
            &mut output,
            self.limits.max_tool_result_bytes,
            what,
            "max_tool_result_bytes",
        );
        let step = self.lock().current_step;
        self.emit(RunEvent::ToolResult {
            step,
            id: call.id.clone(),
            name: call.name.clone(),
            ok,
            output: output.clone(),
        });
        output
    }

    async fn approve_tool_call(&self, call: &ToolCall) -> Result<(), String> {
        if !self.settings.approve.needs(&call.name) {
            return Ok(());
        }
        let Some(human) = self.human.clone() else {
            return Err(format!(
                "denied: calls of `{}` need an operator's approval ([agents.{}] approve), and no operator can be reached in this run",
                call.name, self.settings.name
            ));
        };
        let timeout = self.settings.approval_timeout;
        let step = self.current_step();
        let since_ms = crate::time::now_ms();
        let waiting = Waiting::Approval {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
            since_ms,
            deadline_ms: since_ms.saturating_add(timeout.as_millis() as i64),
        };
        let announce = RunEvent::ApprovalRequested {
            step,
            call_id: call.id.clone(),
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
            timeout_secs: timeout.as_secs_f64(),
        };
        let record = |reply| self.record_decision(step, call, timeout, reply);
        self.wait_for_person(&human, waiting, timeout, announce, record)
            .await
    }

    fn finish(&self) {
        self.lock().finished = true;
    }
}

impl RunContext {
    /// The `approval_decided` event for `call`, from the operator's reply
    /// (`None`: a denial by `approval_timeout`), and what the call then
    /// gets: `Ok` to run, or the denial's observation.
    fn record_decision(
        &self,
        step: u32,
        call: &ToolCall,
        timeout: Duration,
        reply: Option<Reply>,
    ) -> Result<(), String> {
        let (decision, reason, by_uid, timed_out) = match reply {
            Some(Reply::Decision {
                decision,
                reason,
                by_uid,
            }) => (decision, reason, by_uid, false),
            _ => (
                Decision::Deny,
                Some(format!(
                    "no decision within {} (approval_timeout)",
                    human_duration(timeout)
                )),
                None,
                true,
            ),
        };
        let reason = reason.map(|mut r| {
            truncate_with_note(
                &mut r,
                self.limits.max_message_bytes,
                "the reason",
                "max_message_bytes",
            );
            r
        });
        self.emit(RunEvent::ApprovalDecided {
            step,
            call_id: call.id.clone(),
            tool: call.name.clone(),
            decision,
            reason: reason.clone(),
            by_uid,
            timed_out,
        });
        match decision {
            Decision::Approve => Ok(()),
            Decision::Deny => Err(format!(
                "denied by the operator: {}",
                reason.as_deref().unwrap_or("no reason given")
            )),
        }
    }
}

/// Adds the current wait to the run's waited time when it ends, however
/// it ends (answered, timed out, dropped by a cancel).
struct WaitCounted<'a>(&'a RunContext);

impl Drop for WaitCounted<'_> {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        if let Some(since) = st.waiting_since.take() {
            st.waited += since.elapsed();
        }
    }
}

/// The run as the keeper of its strategy's plan: the current plan here, each
/// change an event (charged to `max_run_bytes` like any other), the latest
/// in the record. The host has checked the plan against the contract's
/// limits before it gets here.
impl RunPlan for RunContext {
    fn current(&self) -> Option<Plan> {
        self.lock().plan.clone()
    }

    fn publish(&self, _plugin: &str, plan: Plan) -> Result<(), PlanRefused> {
        let step = {
            let st = self.lock();
            if st.plan.as_ref() == Some(&plan) {
                return Ok(());
            }
            st.current_step
        };
        // Kept only once its event is: the record and the story agree. One
        // strategy instance calls at a time, so nothing publishes between.
        self.emit_kept(RunEvent::PlanChanged {
            step,
            plan: plan.clone(),
        })
        .map_err(PlanRefused::OverLimit)?;
        self.lock().plan = Some(plan);
        Ok(())
    }
}

/// The run as whoever answers its plugins' `human.ask`: the question waits
/// on the run's channel (see [`RunContext::ask_person`]).
#[async_trait::async_trait]
impl AskHuman for RunContext {
    async fn ask(&self, plugin: &str, question: String) -> Result<String, AskFailure> {
        self.ask_person(plugin, question).await
    }
}
