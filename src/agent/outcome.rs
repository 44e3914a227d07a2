//! How a run ended, and the record it leaves.

use serde::{Deserialize, Serialize};

use crate::chat::Message;
use crate::chat::Usage;

/// OpenManus restores IDLE in a `finally`, so FINISHED and ERROR are never
/// seen by the caller. Every agentd run ends with one of these, recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Finished,
    MaxSteps,
    Error,
    Cancelled,
    TokenLimit,
    /// The daemon died (crash, `kill -9`, power loss) while the run was in
    /// flight; set when the daemon starts again and finds it unfinished.
    Interrupted,
}

impl Outcome {
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
    Idle,
    Running,
    Finished,
    Error,
}

/// Everything a finished run leaves behind; the `--json` output and, later,
/// the daemon's run history.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunRecord {
    pub id: String,
    pub agent: String,
    pub request: String,
    pub outcome: Outcome,
    pub steps: u32,
    /// The step records joined with newlines (OpenManus's `run()` result).
    pub result: String,
    pub error: Option<String>,
    /// The memory window at the end, OpenAI-shaped.
    pub messages: Vec<Message>,
    pub usage: Usage,
}
