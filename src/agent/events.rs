//! What a run reports as it happens. `run --local` prints these; the daemon
//! streams them to followers (`GET /v1/runs/{id}/events`) and stores them in
//! the run history. Their JSON is the `/v1` event format, pinned by the
//! snapshot tests in `api.rs`.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::outcome::Outcome;

/// One thing a run reports; serialized with a `type` tag in snake_case, which
/// is the `/v1` event format followers and the run history see.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RunEvent {
    /// The first event of a run whose agent and strategy resolved: what it runs
    /// and with which limit. A run that fails to resolve goes straight to `RunEnded`
    /// (a resumed one after the `PlanChanged` of the plan it carries, so its
    /// record keeps it).
    RunStarted {
        /// The run's id: the caller's (`RunOptions::run_id`) or a fresh UUID.
        run_id: String,
        /// The agent's configured name.
        agent: String,
        /// The user's request, verbatim.
        request: String,
        /// The resolved step limit (agent, else strategy, else daemon default).
        max_steps: u32,
        /// The strategy plugin's name, as its metadata gives it.
        strategy: String,
        /// The strategy plugin's own version string, from its metadata.
        strategy_version: String,
    },
    /// A step is about to call the strategy's `step()`.
    StepStarted {
        /// 1-based step number.
        step: u32,
        /// The run's step limit, repeated so a follower needs no earlier event.
        max_steps: u32,
    },
    /// The strategy added an assistant message to memory.
    AssistantMessage {
        /// The step during which it was added.
        step: u32,
        /// Its text, if any (a pure tool-call message has none).
        content: Option<String>,
        /// The names of the tools it asks to call, in order (arguments follow in
        /// `ToolCall` events when the strategy runs them).
        tool_calls: Vec<String>,
    },
    /// The strategy is about to run a tool on the model's behalf.
    ToolCall {
        /// The step during which the tool runs.
        step: u32,
        /// The model's call id, which pairs this with its `ToolResult`.
        id: String,
        /// The tool's name, as the model called it.
        name: String,
        /// The arguments as the model sent them: JSON text, not validated here.
        arguments: String,
    },
    /// A tool call ended, with the text the model will see.
    ToolResult {
        /// The step during which the tool ran.
        step: u32,
        /// The call id of the matching `ToolCall`.
        id: String,
        /// The tool's name, as the model called it.
        name: String,
        /// `false` when the call failed: an unknown tool, the tool's own error,
        /// or a trap.
        ok: bool,
        /// The tool's output, or the error text when `ok` is false.
        output: String,
    },
    /// The step repeated an earlier action (see `agent::stuck`); the next step's
    /// prompt carries the warning.
    StuckDetected {
        /// The step that repeated itself.
        step: u32,
    },
    /// A step returned normally; its text is also one line of the run's result.
    StepFinished {
        /// The step that finished.
        step: u32,
        /// What the strategy's `step()` returned for it.
        result: String,
    },
    /// The run waits for a person to answer `question` (a plugin called
    /// `human.ask`; the bundled `ask_human` tool does). Answer with
    /// `POST /v1/runs/{id}/input`; the run is `waiting` until
    /// `InputReceived`.
    InputRequested {
        /// The step during which it asked.
        step: u32,
        /// The request's id within the run (`input-N`).
        id: String,
        /// The plugin that asked: a tool's name or the strategy's.
        plugin: String,
        /// The question, verbatim (cut to `max_message_bytes`).
        question: String,
        /// How long the run waits (`[agents.X] input_timeout`).
        timeout_secs: f64,
    },
    /// The wait of `InputRequested` ended: answered, or not in time.
    InputReceived {
        /// The step during which it asked.
        step: u32,
        /// The id of its `InputRequested`.
        id: String,
        /// The answer; `None` when nobody answered within the timeout.
        text: Option<String>,
        /// Who answered: the uid of the client's connection (`None` on a
        /// timeout).
        by_uid: Option<u32>,
        /// True when nobody answered in time; the plugin got "no answer
        /// within N".
        timed_out: bool,
    },
    /// A tool call waits for an operator's approval (`[agents.X] approve`):
    /// `POST /v1/runs/{id}/approve` with its `call_id`.
    ApprovalRequested {
        /// The step during which the call was made.
        step: u32,
        /// The model's call id.
        call_id: String,
        /// The tool, as the model called it.
        tool: String,
        /// The arguments as the model sent them.
        arguments: String,
        /// How long the run waits (`[agents.X] approval_timeout`); then it
        /// is denied.
        timeout_secs: f64,
    },
    /// The operator's decision on an `ApprovalRequested` call, or the
    /// denial its timeout made.
    ApprovalDecided {
        /// The step during which the call was made.
        step: u32,
        /// The model's call id.
        call_id: String,
        /// The tool, as the model called it.
        tool: String,
        /// `approve` or `deny`.
        decision: crate::agent::human::Decision,
        /// The operator's reason, if given (a denial's is the model's
        /// observation).
        reason: Option<String>,
        /// Who decided: the uid of the client's connection; `None` on a
        /// timeout.
        by_uid: Option<u32>,
        /// True when nobody decided within the timeout (a denial).
        timed_out: bool,
    },
    /// The run's plan changed (a strategy published one through the
    /// contract's `plan` import, contract 0.2.3): the whole plan, so a
    /// follower needs no earlier event. Emitted only when the plan differs
    /// from the current one; a resumed run begins with one carrying its
    /// predecessor's plan, at the step it resumed after.
    PlanChanged {
        /// The step during which it was published.
        step: u32,
        /// The plan as published.
        plan: crate::plan::Plan,
    },
    /// The last event of every run, whatever its ending; the daemon's history
    /// writes one for a run it finds interrupted.
    RunEnded {
        /// How the run ended.
        outcome: Outcome,
        /// Steps begun, including one that failed.
        steps: u32,
        /// Why the run failed, for `error` (and `interrupted`); `None` otherwise.
        error: Option<String>,
    },
}

/// Receives every event of a run as it happens. It is called synchronously
/// from the loop and from inside host calls, so it must return quickly.
pub type EventSink = Arc<dyn Fn(&RunEvent) + Send + Sync>;

/// Receives every message as it enters the run's memory, before the sliding
/// window can drop it: the daemon stores the whole transcript this way, so a
/// run that dies mid-way still has every message it produced. It is handed
/// the message memory holds, with its JSON already encoded (the daemon's
/// history stores that JSON instead of encoding the message again).
pub type MessageSink = Arc<dyn Fn(&Arc<crate::chat::Kept>) + Send + Sync>;

/// A sink that drops every event, for callers that only want the record
/// (the default of `RunOptions`).
pub fn discard_events() -> EventSink {
    Arc::new(|_| {})
}
