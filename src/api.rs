//! The daemon's HTTP/JSON API, as types: the daemon serialises them and the
//! CLI deserialises them, so the two cannot drift apart. Every route lives
//! under `/v1`; a breaking change gets `/v2`, never a silent edit here.
//!
//! Unknown fields are tolerated when reading (a newer daemon may add some)
//! and refused in request bodies (a typo in a script should not be ignored).

use serde::{Deserialize, Serialize};

use crate::agent::settings::Source;
use crate::agent::{Message, Outcome, RunEvent};
use crate::llm::Usage;

/// `POST /v1/runs`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateRun {
    pub agent: String,
    pub request: String,
}

/// Where a run is in its life. `outcome` says how an `ended` run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Waiting for a slot under `[daemon] max_concurrent_runs`.
    Queued,
    Running,
    Ended,
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Queued => "queued",
            RunState::Running => "running",
            RunState::Ended => "ended",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "queued" => Some(RunState::Queued),
            "running" => Some(RunState::Running),
            "ended" => Some(RunState::Ended),
            _ => None,
        }
    }
}

/// One run as `GET /v1/runs` lists it: everything but the transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub id: String,
    /// Orders runs by creation; `GET /v1/runs?before=SEQ` pages with it.
    pub seq: i64,
    pub agent: String,
    pub request: String,
    pub state: RunState,
    /// Absent until the run has ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    pub steps: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<u32>,
    /// The step records joined with newlines; absent until the run has ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub usage: Usage,
    /// Unix time in milliseconds.
    pub created_at_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at_ms: Option<i64>,
}

/// `GET /v1/runs/{id}`: the summary plus every message of the run in order
/// (the whole transcript, not only the memory window the model saw last).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunView {
    #[serde(flatten)]
    pub summary: RunSummary,
    #[serde(default)]
    pub messages: Vec<Message>,
}

/// `GET /v1/runs`: newest first.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunList {
    pub runs: Vec<RunSummary>,
    /// Pass as `before=` for the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_before: Option<i64>,
}

/// One line of `GET /v1/runs/{id}/events`: the event with its place in the
/// run and when it happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventLine {
    pub seq: u64,
    pub at_ms: i64,
    #[serde(flatten)]
    pub event: RunEvent,
}

/// `GET /v1/agents`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentList {
    pub agents: Vec<AgentView>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentView {
    pub name: String,
    pub strategy: String,
    pub tools: Vec<String>,
    /// The step limit its runs get: the agent's, else its strategy's
    /// default, else the daemon's (`max_steps_source` says which).
    #[serde(default)]
    pub max_steps: Option<u32>,
    #[serde(default = "unknown_source")]
    pub max_steps_source: Source,
    /// The prompts its runs send, with where each comes from: `agent`
    /// (its configuration), `strategy` (the strategy plugin's default) or
    /// `none` (no prompt is sent).
    #[serde(default)]
    pub system_prompt: Option<String>,
    #[serde(default = "unknown_source")]
    pub system_prompt_source: Source,
    #[serde(default)]
    pub next_step_prompt: Option<String>,
    #[serde(default = "unknown_source")]
    pub next_step_prompt_source: Source,
    /// The plugins this agent names that are not loaded: a run of it would
    /// fail at once, so this is reported rather than discovered.
    #[serde(default)]
    pub missing_plugins: Vec<String>,
}

fn unknown_source() -> Source {
    Source::None
}

/// `GET /v1/status`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Status {
    pub version: String,
    pub uptime_s: f64,
    pub runs_active: usize,
    pub runs_queued: usize,
    pub plugins_loaded: usize,
    pub sandbox_engine: EngineStatus,
    pub socket: String,
    pub state_dir: String,
    /// False once SIGTERM arrived: new runs are refused with 503.
    pub accepting_runs: bool,
    pub plugin_cache: CacheStatus,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EngineStatus {
    pub reachable: bool,
    pub address: String,
    #[serde(default)]
    pub error: Option<String>,
}

/// Every error the API returns has this body.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// Stable, for scripts: `bad_request`, `not_found`, `unknown_agent`,
    /// `conflict`, `payload_too_large`, `forbidden`, `shutting_down`,
    /// `internal`.
    pub code: String,
    /// For people; may change between versions.
    pub message: String,
}

/// `GET /v1/status`'s `plugin_cache`: how plugins were loaded since this
/// daemon process started.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CacheStatus {
    pub enabled: bool,
    /// Plugins taken compiled from `<state_dir>/cache`.
    pub hits: u64,
    /// Plugins compiled because the cache had no sound entry.
    pub misses: u64,
}

/// One line of `GET /v1/events`, the daemon-wide stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DaemonEventLine {
    pub seq: u64,
    pub at_ms: i64,
    #[serde(flatten)]
    pub event: DaemonEvent,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum DaemonEvent {
    PluginLoaded(PluginChangeInfo),
    PluginReplaced(PluginChangeInfo),
    PluginFailed(PluginChangeInfo),
    PluginRemoved(PluginChangeInfo),
    PluginConflict(PluginChangeInfo),
    RunCreated {
        run_id: String,
        agent: String,
    },
    RunEnded {
        run_id: String,
        agent: String,
        outcome: Outcome,
    },
}

/// A plugin file's change, as the event stream reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PluginChangeInfo {
    pub plugin: String,
    pub file: String,
    #[serde(default)]
    pub version: Option<String>,
    /// The version serving before (`replaced`, `removed`) or still serving
    /// instead of this file (`failed`, `conflict`).
    #[serde(default)]
    pub previous_version: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
}
