//! How a run ended, and the record it leaves.

use serde::{Deserialize, Serialize};

use crate::chat::Message;
use crate::chat::Usage;

/// OpenManus restores IDLE in a `finally`, so FINISHED and ERROR are never
/// seen by the caller. Every agentd run ends with one of these, recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The strategy called `finish`, typically after a special tool such as
    /// `terminate` succeeded.
    Finished,
    /// The step limit was reached before the run finished.
    MaxSteps,
    /// The run failed; the record's `error` says why (a plugin missing, a trap,
    /// the step deadline, the sandbox).
    Error,
    /// The caller cancelled the run, or dropped it before it ended.
    Cancelled,
    /// The input-token budget (`max_input_tokens`) refused a chat request.
    TokenLimit,
    /// The daemon died (crash, `kill -9`, power loss) while the run was in
    /// flight; set when the daemon starts again and finds it unfinished.
    Interrupted,
}

impl Outcome {
    /// The snake_case name, as serialized and shown in the CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Finished => "finished",
            Outcome::MaxSteps => "max_steps",
            Outcome::Error => "error",
            Outcome::Cancelled => "cancelled",
            Outcome::TokenLimit => "token_limit",
            Outcome::Interrupted => "interrupted",
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The agent's lifecycle state (OpenManus's `AgentState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AgentState {
    /// Ready for a run; the only state [`Agent::run`](super::Agent::run) starts from.
    Idle,
    /// A run is in progress; a second `run` is refused.
    Running,
    /// Kept from OpenManus's states; agentd never sets it, since a run's
    /// ending is its [`Outcome`] and the agent is `Idle` again.
    Finished,
    /// Kept from OpenManus's states; agentd never sets it (a failed run is
    /// the [`Outcome::Error`] of its record).
    Error,
}

/// Everything a finished run leaves behind; the `--json` output and, later,
/// the daemon's run history.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunRecord {
    /// The run's id (`RunEvent::RunStarted::run_id`).
    pub id: String,
    /// The agent's name.
    pub agent: String,
    /// The user's request, verbatim.
    pub request: String,
    /// How the run ended.
    pub outcome: Outcome,
    /// Steps begun, including one that failed.
    pub steps: u32,
    /// The step records joined with newlines (OpenManus's `run()` result).
    pub result: String,
    /// Why the run failed, for `error` (and `interrupted`); `None` otherwise.
    pub error: Option<String>,
    /// The memory window at the end, OpenAI-shaped.
    pub messages: Vec<Message>,
    /// Token usage summed over every chat call of the run.
    pub usage: Usage,
    /// The run's plan at its end (the last one published, or its
    /// predecessor's for a resumed run); `None` when it has none.
    #[serde(default)]
    pub plan: Option<crate::plan::Plan>,
    /// What `[agents.X] keep_files` kept when the run ended; `None` when
    /// the agent keeps nothing (or the caller gave no folder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<crate::sandbox::KeptFiles>,
}
