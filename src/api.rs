//! The daemon's HTTP/JSON API, as types: the daemon serialises them and the
//! CLI deserialises them, so the two cannot drift apart. Every route lives
//! under `/v1`; a breaking change gets `/v2`, never a silent edit here.
//!
//! The run event stream is the one shape defined elsewhere: [`EventLine`]
//! flattens the run loop's `RunEvent`. The snapshot tests at the end of this
//! file (`wire_tests`) pin the JSON of every `RunEvent`, `DaemonEvent` and
//! `Outcome` variant, so an edit of the loop's types that would change the
//! wire fails them.
//!
//! Unknown fields are tolerated when reading (a newer daemon may add some)
//! and refused in request bodies (a typo in a script should not be ignored).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::agent::settings::Source;
use crate::agent::{Outcome, RunEvent};
use crate::chat::Message;
use crate::chat::Usage;

/// `POST /v1/runs`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateRun {
    pub agent: String,
    pub request: String,
    /// Files written into the run's work dir before its first step, by
    /// path relative to it: `{"notes.txt": "text", "data.bin":
    /// {"content": "AAEC", "encoding": "base64"}}`. The request body's
    /// `max_request_bytes` bounds them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub files: BTreeMap<String, FileContent>,
}

/// One file of [`CreateRun::files`]: a string is the file's text; an
/// object gives its `content` in an `encoding` (`text`, the default, or
/// `base64` for any bytes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FileContent {
    Text(String),
    Encoded(EncodedFile),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EncodedFile {
    pub content: String,
    #[serde(default)]
    pub encoding: FileEncoding,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileEncoding {
    #[default]
    Text,
    Base64,
}

impl FileContent {
    /// `bytes` as sent: text when it is UTF-8, base64 otherwise.
    pub fn of(bytes: Vec<u8>) -> Self {
        match String::from_utf8(bytes) {
            Ok(text) => FileContent::Text(text),
            Err(e) => {
                use base64::Engine;
                FileContent::Encoded(EncodedFile {
                    content: base64::engine::general_purpose::STANDARD.encode(e.as_bytes()),
                    encoding: FileEncoding::Base64,
                })
            }
        }
    }

    /// The file's bytes; an error says why base64 did not decode.
    pub fn bytes(self) -> Result<Vec<u8>, String> {
        match self {
            FileContent::Text(text)
            | FileContent::Encoded(EncodedFile {
                content: text,
                encoding: FileEncoding::Text,
            }) => Ok(text.into_bytes()),
            FileContent::Encoded(EncodedFile {
                content,
                encoding: FileEncoding::Base64,
            }) => {
                use base64::Engine;
                base64::engine::general_purpose::STANDARD
                    .decode(content.trim())
                    .map_err(|e| format!("not base64: {e}"))
            }
        }
    }
}

/// `POST /v1/runs/{id}/input`: the answer to the run's question.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputRun {
    pub text: String,
    /// The question's id (`waiting.id`): when given, the answer is taken
    /// only for that question, so one meant for a question that timed out
    /// never answers the next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// `POST /v1/runs/{id}/approve`: the decision on the call the run holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApproveRun {
    /// The held call's id (`waiting.call_id`), so a decision meant for one
    /// call is never taken for another.
    pub call_id: String,
    pub decision: crate::agent::Decision,
    /// For a denial, the model's observation: "denied by the operator: REASON".
    #[serde(default)]
    pub reason: Option<String>,
}

/// `POST /v1/runs/{id}/resume`; the body may be empty.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResumeRun {
    /// Steps the new run may take after the old run's (at least 1);
    /// default: what is left of the agent's step limit, at least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<u32>,
    /// Whether the new run starts with the old run's kept files in its
    /// work dir (default `true`: resuming is continuing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<bool>,
}

/// How a run is linked to the run it resumed and to the run that resumed
/// it (`POST /v1/runs/{id}/resume`). Links are one to one: a run is resumed
/// at most once. Flattened into [`RunSummary`]; every field is absent when
/// it does not apply.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResumeLinks {
    /// The run this one continues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_from: Option<String>,
    /// Steps that run had completed when this one took over: this run's
    /// first step is `resumed_at_step + 1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_at_step: Option<u32>,
    /// How many messages at the start of this run's transcript are copies
    /// of that run's (its request first): where `agentd show` marks the
    /// resumption.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_messages: Option<u32>,
    /// The run that continues this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_by: Option<String>,
}

/// Where a run is in its life. `outcome` says how an `ended` run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Waiting for a slot under `[daemon] max_concurrent_runs`.
    Queued,
    Running,
    /// Waiting for a person: an answer (`POST /v1/runs/{id}/input`) or an
    /// approval (`.../approve`); the summary's `waiting` says which.
    Waiting,
    Ended,
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Queued => "queued",
            RunState::Running => "running",
            RunState::Waiting => "waiting",
            RunState::Ended => "ended",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "queued" => Some(RunState::Queued),
            "running" => Some(RunState::Running),
            "waiting" => Some(RunState::Waiting),
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
    /// The whole request in `GET /v1/runs/{id}`; in list rows only its
    /// first [`LIST_REQUEST_CHARS`] characters (`request_truncated` says so).
    pub request: String,
    /// True when `request` was cut for a list row.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub request_truncated: bool,
    pub state: RunState,
    /// What a `waiting` run waits for: the question, or the call to
    /// approve with its `call_id`. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<crate::agent::Waiting>,
    /// Absent until the run has ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    pub steps: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<u32>,
    /// The step records joined with newlines; absent until the run has
    /// ended. In list rows only its first [`LIST_RESULT_CHARS`] characters
    /// (`result_truncated` says so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// True when `result` was cut for a list row.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub result_truncated: bool,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub usage: Usage,
    /// What `usage` cost at the prices in force for the run (`[llm]
    /// input_price`/`output_price`, per million tokens, in the operator's
    /// currency); `null` when no price is configured. Kept as it was when
    /// prices change later.
    #[serde(default)]
    pub cost: Option<f64>,
    /// Unix time in milliseconds.
    pub created_at_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at_ms: Option<i64>,
    /// Its links to the run it resumed and the run that resumed it.
    #[serde(flatten)]
    pub resume: ResumeLinks,
}

impl RunSummary {
    /// A run just created, not started: the daemon's and `run --local`'s
    /// records begin the same way.
    /// Marks the run ended with what the agent returned; the daemon and
    /// `run --local` record an ending the same way.
    pub fn end(&mut self, record: &crate::agent::RunRecord) {
        self.state = RunState::Ended;
        self.outcome = Some(record.outcome);
        self.steps = record.steps;
        self.result = Some(record.result.clone());
        self.error = record.error.clone();
        self.usage = record.usage;
        self.ended_at_ms = Some(crate::time::now_ms());
    }

    pub fn queued(id: &str, seq: i64, agent: &str, request: &str) -> Self {
        RunSummary {
            id: id.to_string(),
            seq,
            agent: agent.to_string(),
            request: request.to_string(),
            request_truncated: false,
            state: RunState::Queued,
            waiting: None,
            outcome: None,
            steps: 0,
            max_steps: None,
            result: None,
            result_truncated: false,
            error: None,
            usage: Default::default(),
            cost: None,
            created_at_ms: crate::time::now_ms(),
            started_at_ms: None,
            ended_at_ms: None,
            resume: ResumeLinks::default(),
        }
    }
}

/// List rows (`GET /v1/runs`) carry at most this many characters of each
/// run's request: a page of 1000 rows must not be a gigabyte of requests.
pub const LIST_REQUEST_CHARS: usize = 4096;

/// ...and of each run's result, which joins every step's result: a model
/// can make each of those megabytes long.
pub const LIST_RESULT_CHARS: usize = 4096;

impl RunSummary {
    /// A copy for a list row: the request cut to [`LIST_REQUEST_CHARS`]
    /// without copying the rest of it first.
    pub fn list_row(&self) -> RunSummary {
        let cut = self.request.char_indices().nth(LIST_REQUEST_CHARS);
        let result_cut = self.result.as_deref().and_then(|r| {
            r.char_indices()
                .nth(LIST_RESULT_CHARS)
                .map(|(at, _)| &r[..at])
        });
        RunSummary {
            id: self.id.clone(),
            seq: self.seq,
            agent: self.agent.clone(),
            request: match cut {
                Some((at, _)) => self.request[..at].to_string(),
                None => self.request.clone(),
            },
            request_truncated: self.request_truncated || cut.is_some(),
            state: self.state,
            waiting: self.waiting.as_ref().map(|w| w.cut(LIST_REQUEST_CHARS)),
            outcome: self.outcome,
            steps: self.steps,
            max_steps: self.max_steps,
            result: match result_cut {
                Some(head) => Some(head.to_string()),
                None => self.result.clone(),
            },
            result_truncated: self.result_truncated || result_cut.is_some(),
            error: self.error.clone(),
            usage: self.usage,
            cost: self.cost,
            created_at_ms: self.created_at_ms,
            started_at_ms: self.started_at_ms,
            ended_at_ms: self.ended_at_ms,
            resume: self.resume.clone(),
        }
    }

    /// Cuts `request` to `max` characters for a list row, saying so.
    pub fn truncate_request(&mut self, max: usize) {
        if let Some((at, _)) = self.request.char_indices().nth(max) {
            self.request.truncate(at);
            self.request_truncated = true;
        }
    }
}

/// `GET /v1/runs/{id}`: the summary plus the run's messages in order (the
/// whole transcript, not only the memory window the model saw last), one
/// page at a time: `?messages_from=N&messages_limit=M`. A run whose
/// transcript fits one page (most do) comes whole, as before paging.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunView {
    #[serde(flatten)]
    pub summary: RunSummary,
    /// The run's plan (contract 0.2.3): the last `plan_changed` event's,
    /// `null` when its strategy published none. Here and not in list rows:
    /// a plan may be 64 KiB.
    #[serde(default)]
    pub plan: Option<crate::plan::Plan>,
    #[serde(default)]
    pub messages: Vec<Message>,
    #[serde(flatten)]
    pub paging: MessagePaging,
    /// What `[agents.X] keep_files` kept when the run ended (the files,
    /// their bytes, and what the `keep_limit` cap left out); absent while
    /// the run goes on and for an agent that keeps nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<crate::agent::KeptFiles>,
}

/// Where a page of messages sits in the transcript.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MessagePaging {
    /// How many messages the run has recorded in all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages_total: Option<u32>,
    /// Index of the first message of this page, when it is not the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages_from: Option<u32>,
    /// Pass as `messages_from=` for the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_messages_from: Option<u32>,
}

impl MessagePaging {
    /// A transcript of `count` messages given whole, on one page: how
    /// `run --local --json` describes its record, so that it has the shape
    /// of the daemon's.
    pub fn whole(count: usize) -> Self {
        MessagePaging {
            messages_total: Some(u32::try_from(count).unwrap_or(u32::MAX)),
            messages_from: None,
            next_messages_from: None,
        }
    }
}

/// A page of messages at most this many messages...
pub const DEFAULT_MESSAGES_LIMIT: u32 = 1000;
/// ...and, after its first message, at most this many bytes of JSON, so a
/// run of huge tool outputs still comes in bounded answers.
pub const MESSAGES_PAGE_BYTES: usize = 8 << 20;

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

/// The last line of an event stream that the daemon ended before the
/// run's `run_ended` (a follower too far behind, the history unreadable):
/// `{"type":"stream_error","code":...,"message":...,"resume_since":SEQ}`.
/// Reconnecting with `?since=SEQ` continues where it stopped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamError {
    #[serde(rename = "type")]
    pub kind: StreamErrorType,
    pub code: String,
    pub message: String,
    /// The seq of the last event this stream delivered (0: none).
    pub resume_since: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamErrorType {
    StreamError,
}

/// The NDJSON line of [`EventLine`] from the event's own JSON object (as
/// stored): the same bytes serde writes for the flattened struct, without
/// parsing and re-encoding the event.
pub fn event_line(seq: u64, at_ms: i64, event_json: &str) -> Vec<u8> {
    let fields = event_json.strip_prefix('{').unwrap_or(event_json);
    // Written into one buffer of exactly the right size: this runs for
    // every event of every run, `format!` grows its string as it goes, and
    // a buffer with room to spare is copied again when it becomes the
    // event log's `Bytes`.
    let prefix =
        "{\"seq\":,\"at_ms\":,".len() + decimal_len(seq.into()) + decimal_len(at_ms.into());
    let mut line = String::with_capacity(prefix + fields.len() + 1);
    push_event_line(&mut line, seq, at_ms, event_json);
    line.into_bytes()
}

/// [`event_line`] appended to `out`: the history stores a run's events of
/// one commit as their lines, one after the other.
pub fn push_event_line(
    out: &mut String,
    seq: impl std::fmt::Display,
    at_ms: i64,
    event_json: &str,
) {
    use std::fmt::Write;
    let fields = event_json.strip_prefix('{').unwrap_or(event_json);
    // Writing into a String cannot fail.
    let _ = write!(out, "{{\"seq\":{seq},\"at_ms\":{at_ms},");
    out.push_str(fields);
    out.push('\n');
}

/// How many characters `n` takes in decimal, its sign included.
fn decimal_len(n: i128) -> usize {
    let sign = usize::from(n < 0);
    sign + n
        .unsigned_abs()
        .checked_ilog10()
        .map_or(1, |l| l as usize + 1)
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
    /// Runs started and not ended, `waiting` ones included.
    pub runs_active: usize,
    /// Of `runs_active`, those waiting for a person.
    #[serde(default)]
    pub runs_waiting: usize,
    pub runs_queued: usize,
    pub plugins_loaded: usize,
    /// The first engine, as before `[[sandbox.engines]]` existed.
    pub sandbox_engine: EngineStatus,
    /// Every engine runs are placed on, in configuration order.
    #[serde(default)]
    pub engines: Vec<EngineSummary>,
    pub socket: String,
    pub state_dir: String,
    /// False once SIGTERM arrived: new runs are refused with 503.
    pub accepting_runs: bool,
    pub plugin_cache: CacheStatus,
    /// Today's tokens against the daily budgets.
    #[serde(default)]
    pub token_budgets: TokenBudgets,
}

/// Tokens used today (the current UTC day) against the daily budgets.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TokenBudgets {
    /// Tokens (input plus output) of every run today.
    pub used_today: u64,
    /// The next UTC midnight (Unix time in ms), when the count starts again.
    pub resets_at_ms: i64,
    /// `[daemon] daily_token_budget`, when set.
    #[serde(default)]
    pub daemon: Option<BudgetUse>,
    /// Each `[agents.X] daily_token_budget` set, by agent name.
    #[serde(default)]
    pub agents: Vec<BudgetUse>,
}

/// One daily budget and today's use of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetUse {
    /// The agent whose budget it is; absent for the daemon's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    pub budget: u64,
    pub used: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EngineStatus {
    pub reachable: bool,
    pub address: String,
    #[serde(default)]
    pub error: Option<String>,
    /// What weakens the sandbox's isolation on this engine (seccomp off, no
    /// user namespace, an engine or runc older than a security fix), found
    /// when agentd first reached it.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// The warm pool of containers made ahead of runs on this engine.
    #[serde(default)]
    pub pool: PoolStatus,
}

/// `GET /v1/status`'s `sandbox_engine.pool`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolStatus {
    /// How many containers are kept ready (`[sandbox] pool_size`; 0: off).
    pub target: usize,
    /// Created, started, shell open, waiting for a run.
    pub ready: usize,
    /// Being created now.
    pub creating: usize,
    /// Containers handed to runs since this pool was made (a `[sandbox]`
    /// change makes a new pool).
    #[serde(default)]
    pub served: u64,
    /// Why the last refill failed, until one succeeds.
    #[serde(default)]
    pub last_error: Option<String>,
}

impl From<crate::sandbox::PoolStatus> for PoolStatus {
    fn from(p: crate::sandbox::PoolStatus) -> Self {
        PoolStatus {
            target: p.target,
            ready: p.ready,
            creating: p.creating,
            served: p.served,
            last_error: p.last_error,
        }
    }
}

/// One engine in `GET /v1/status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineSummary {
    pub name: String,
    pub address: String,
    /// As the daemon's last probe (every 2 s) found it.
    pub reachable: bool,
    /// Containers this daemon holds there: sandboxes placed and not yet
    /// removed, and its warm pool's (both count against `capacity`).
    pub containers: usize,
    /// `max_containers`; `null`: no bound of its own.
    #[serde(default)]
    pub capacity: Option<usize>,
    /// The last probe failure, kept after the engine answers again.
    #[serde(default)]
    pub last_error: Option<String>,
    /// Its warm pool.
    #[serde(default)]
    pub pool: PoolStatus,
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
    /// `queue_full`, `too_many_connections`, `request_timeout`, `internal`;
    /// resuming a run adds `not_resumable`, `run_live`, `already_resumed`.
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

impl DaemonEvent {
    /// A change of the plugin set, as opposed to a run's start or end.
    pub fn is_plugin_change(&self) -> bool {
        match self {
            DaemonEvent::PluginLoaded(_)
            | DaemonEvent::PluginReplaced(_)
            | DaemonEvent::PluginFailed(_)
            | DaemonEvent::PluginRemoved(_)
            | DaemonEvent::PluginConflict(_) => true,
            DaemonEvent::RunCreated { .. } | DaemonEvent::RunEnded { .. } => false,
        }
    }
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

/// The `/v1` event streams, byte for byte. `RunEvent` is defined by the run
/// loop and reaches the wire through [`EventLine`]'s `flatten`, so an edit
/// there is an edit of the API: these snapshots make it fail here first.
/// A change that breaks one of them needs `/v2`, not a new snapshot.
/// `GET /v1/mcp`: every `[mcp.<server>]` of the running configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct McpList {
    pub servers: Vec<McpServerView>,
}

/// Where an MCP server is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McpState {
    /// Its first start is under way.
    Starting,
    /// Initialized, its tools listed.
    Ready,
    /// It died or failed; a new attempt is under way.
    Restarting,
    /// Its last attempt failed (`error`); the next comes after `retry_in_ms`.
    Failed,
    /// `enabled = false`, or stopping with the daemon.
    Stopped,
    /// A `per_run` server: one process per run that uses it, none now.
    Idle,
    /// A `per_run` server with runs using it (`instances`).
    PerRun,
}

/// One MCP server, without its environment values or headers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct McpServerView {
    pub name: String,
    /// `stdio` or `http`.
    pub transport: String,
    /// The command line or the URL.
    pub target: String,
    pub enabled: bool,
    pub per_run: bool,
    pub state: McpState,
    /// Why the last attempt failed or the connection ended.
    #[serde(default)]
    pub error: Option<String>,
    /// A stdio server's process id (the shared one).
    #[serde(default)]
    pub pid: Option<u32>,
    #[serde(default)]
    pub restarts: u32,
    #[serde(default)]
    pub retry_in_ms: Option<u64>,
    /// Its tools as last listed.
    pub tools: Vec<McpToolView>,
    /// The live servers of a `per_run` table, one per run.
    #[serde(default)]
    pub instances: Vec<McpInstance>,
}

/// One tool of an MCP server.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct McpToolView {
    /// Its name on the server.
    pub name: String,
    /// The name the model is shown.
    pub model_name: String,
    pub description: String,
    /// Whether `[mcp.<server>] tools` lets agents use it.
    pub allowed: bool,
}

/// One live server of a `per_run` table.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct McpInstance {
    pub run_id: String,
    pub state: McpState,
    #[serde(default)]
    pub pid: Option<u32>,
    #[serde(default)]
    pub error: Option<String>,
}

#[cfg(test)]
mod wire_tests {
    use std::fmt::Debug;

    use serde::de::DeserializeOwned;

    use super::*;

    const AT: i64 = 1_700_000_000_000;

    /// What the daemon writes is `expected`, and what the CLI reads back
    /// from it is the value again.
    fn assert_wire<T>(value: T, expected: &str)
    where
        T: Serialize + DeserializeOwned + PartialEq + Debug,
    {
        let json = serde_json::to_string(&value).expect("serialise");
        assert_eq!(json, expected);
        let back: T = serde_json::from_str(&json).expect("deserialise");
        assert_eq!(back, value);
    }

    #[test]
    fn an_engine_in_status() {
        assert_wire(
            EngineSummary {
                name: "far".into(),
                address: "tcp://10.0.0.2:2376 (TLS)".into(),
                reachable: false,
                containers: 2,
                capacity: Some(40),
                last_error: Some("connection refused".into()),
                pool: PoolStatus {
                    target: 2,
                    ready: 1,
                    creating: 1,
                    served: 5,
                    last_error: None,
                },
            },
            r#"{"name":"far","address":"tcp://10.0.0.2:2376 (TLS)","reachable":false,"containers":2,"capacity":40,"last_error":"connection refused","pool":{"target":2,"ready":1,"creating":1,"served":5,"last_error":null}}"#,
        );
        // A daemon from before engines: no `engines` at all.
        let old = r#"{"version":"0.1.0","uptime_s":1.0,"runs_active":0,"runs_queued":0,
            "plugins_loaded":0,"sandbox_engine":{"reachable":true,"address":"unix:///s"},
            "socket":"/s","state_dir":"/d","accepting_runs":true,
            "plugin_cache":{"enabled":false,"hits":0,"misses":0}}"#;
        let status: Status = serde_json::from_str(old).expect("an older daemon's status");
        assert!(status.engines.is_empty());
    }

    fn line(seq: u64, event: RunEvent) -> EventLine {
        EventLine {
            seq,
            at_ms: AT,
            event,
        }
    }

    /// Adding a variant to `RunEvent` stops this from compiling: give the
    /// new one a snapshot below, then a line here.
    fn snapshotted(event: &RunEvent) {
        match event {
            RunEvent::RunStarted { .. }
            | RunEvent::StepStarted { .. }
            | RunEvent::AssistantMessage { .. }
            | RunEvent::ToolCall { .. }
            | RunEvent::ToolResult { .. }
            | RunEvent::StuckDetected { .. }
            | RunEvent::StepFinished { .. }
            | RunEvent::InputRequested { .. }
            | RunEvent::InputReceived { .. }
            | RunEvent::ApprovalRequested { .. }
            | RunEvent::ApprovalDecided { .. }
            | RunEvent::PlanChanged { .. }
            | RunEvent::RunEnded { .. } => {}
        }
    }

    /// As [`snapshotted`], for `DaemonEvent`.
    fn daemon_snapshotted(event: &DaemonEvent) {
        match event {
            DaemonEvent::PluginLoaded(_)
            | DaemonEvent::PluginReplaced(_)
            | DaemonEvent::PluginFailed(_)
            | DaemonEvent::PluginRemoved(_)
            | DaemonEvent::PluginConflict(_)
            | DaemonEvent::RunCreated { .. }
            | DaemonEvent::RunEnded { .. } => {}
        }
    }

    #[test]
    fn every_run_event_line_keeps_its_v1_shape() {
        let cases = [
            (
                RunEvent::RunStarted {
                    run_id: "r1".into(),
                    agent: "coder".into(),
                    request: "fix it".into(),
                    max_steps: 30,
                    strategy: "toolcall".into(),
                    strategy_version: "0.2.0".into(),
                },
                r#"{"seq":1,"at_ms":1700000000000,"type":"run_started","run_id":"r1","agent":"coder","request":"fix it","max_steps":30,"strategy":"toolcall","strategy_version":"0.2.0"}"#,
            ),
            (
                RunEvent::StepStarted {
                    step: 1,
                    max_steps: 30,
                },
                r#"{"seq":2,"at_ms":1700000000000,"type":"step_started","step":1,"max_steps":30}"#,
            ),
            (
                RunEvent::AssistantMessage {
                    step: 1,
                    content: Some("Let me look.".into()),
                    tool_calls: vec!["bash".into()],
                },
                r#"{"seq":3,"at_ms":1700000000000,"type":"assistant_message","step":1,"content":"Let me look.","tool_calls":["bash"]}"#,
            ),
            (
                RunEvent::AssistantMessage {
                    step: 1,
                    content: None,
                    tool_calls: vec![],
                },
                r#"{"seq":4,"at_ms":1700000000000,"type":"assistant_message","step":1,"content":null,"tool_calls":[]}"#,
            ),
            (
                RunEvent::ToolCall {
                    step: 1,
                    id: "call_1".into(),
                    name: "bash".into(),
                    arguments: r#"{"command":"ls"}"#.into(),
                },
                r#"{"seq":5,"at_ms":1700000000000,"type":"tool_call","step":1,"id":"call_1","name":"bash","arguments":"{\"command\":\"ls\"}"}"#,
            ),
            (
                RunEvent::ToolResult {
                    step: 1,
                    id: "call_1".into(),
                    name: "bash".into(),
                    ok: true,
                    output: "README.md\n".into(),
                },
                r#"{"seq":6,"at_ms":1700000000000,"type":"tool_result","step":1,"id":"call_1","name":"bash","ok":true,"output":"README.md\n"}"#,
            ),
            (
                RunEvent::StuckDetected { step: 3 },
                r#"{"seq":7,"at_ms":1700000000000,"type":"stuck_detected","step":3}"#,
            ),
            (
                RunEvent::StepFinished {
                    step: 1,
                    result: "done".into(),
                },
                r#"{"seq":8,"at_ms":1700000000000,"type":"step_finished","step":1,"result":"done"}"#,
            ),
            (
                RunEvent::RunEnded {
                    outcome: Outcome::MaxSteps,
                    steps: 30,
                    error: None,
                },
                r#"{"seq":9,"at_ms":1700000000000,"type":"run_ended","outcome":"max_steps","steps":30,"error":null}"#,
            ),
            (
                RunEvent::RunEnded {
                    outcome: Outcome::Error,
                    steps: 2,
                    error: Some("boom".into()),
                },
                r#"{"seq":10,"at_ms":1700000000000,"type":"run_ended","outcome":"error","steps":2,"error":"boom"}"#,
            ),
            (
                RunEvent::InputRequested {
                    step: 2,
                    id: "input-1".into(),
                    plugin: "ask_human".into(),
                    question: "Which branch?".into(),
                    timeout_secs: 3600.0,
                },
                r#"{"seq":11,"at_ms":1700000000000,"type":"input_requested","step":2,"id":"input-1","plugin":"ask_human","question":"Which branch?","timeout_secs":3600.0}"#,
            ),
            (
                RunEvent::InputReceived {
                    step: 2,
                    id: "input-1".into(),
                    text: Some("main".into()),
                    by_uid: Some(1000),
                    timed_out: false,
                },
                r#"{"seq":12,"at_ms":1700000000000,"type":"input_received","step":2,"id":"input-1","text":"main","by_uid":1000,"timed_out":false}"#,
            ),
            (
                RunEvent::ApprovalRequested {
                    step: 3,
                    call_id: "call_7".into(),
                    tool: "bash".into(),
                    arguments: r#"{"command":"rm -rf build"}"#.into(),
                    timeout_secs: 60.0,
                },
                r#"{"seq":13,"at_ms":1700000000000,"type":"approval_requested","step":3,"call_id":"call_7","tool":"bash","arguments":"{\"command\":\"rm -rf build\"}","timeout_secs":60.0}"#,
            ),
            (
                RunEvent::ApprovalDecided {
                    step: 3,
                    call_id: "call_7".into(),
                    tool: "bash".into(),
                    decision: crate::agent::Decision::Deny,
                    reason: Some("not on main".into()),
                    by_uid: None,
                    timed_out: false,
                },
                r#"{"seq":14,"at_ms":1700000000000,"type":"approval_decided","step":3,"call_id":"call_7","tool":"bash","decision":"deny","reason":"not on main","by_uid":null,"timed_out":false}"#,
            ),
            (
                RunEvent::PlanChanged {
                    step: 2,
                    plan: crate::plan::Plan {
                        title: "Fix the build".into(),
                        steps: vec![
                            crate::plan::PlanStep {
                                text: "Read the error".into(),
                                status: crate::plan::StepStatus::Completed,
                                notes: Some("a missing import".into()),
                            },
                            crate::plan::PlanStep {
                                text: "Add it".into(),
                                status: crate::plan::StepStatus::InProgress,
                                notes: None,
                            },
                        ],
                    },
                },
                r#"{"seq":15,"at_ms":1700000000000,"type":"plan_changed","step":2,"plan":{"title":"Fix the build","steps":[{"text":"Read the error","status":"completed","notes":"a missing import"},{"text":"Add it","status":"in_progress","notes":null}]}}"#,
            ),
        ];
        for (seq, (event, expected)) in (1..).zip(cases) {
            snapshotted(&event);
            assert_wire(line(seq, event), expected);
        }
    }

    #[test]
    fn an_event_line_is_what_serde_writes_for_event_line() {
        let event = RunEvent::StepStarted {
            step: 2,
            max_steps: 5,
        };
        let json = serde_json::to_string(&event).expect("json");
        let mut expected = serde_json::to_vec(&EventLine {
            seq: 7,
            at_ms: 123,
            event,
        })
        .expect("json");
        expected.push(b'\n');
        assert_eq!(event_line(7, 123, &json), expected);
    }

    /// The line is built in a buffer of exactly its size, so that turning
    /// it into the event log's `Bytes` does not copy it again; the same
    /// bytes serde writes, at every width of the two numbers.
    #[test]
    fn an_event_line_fills_its_buffer_exactly() {
        let json = serde_json::to_string(&RunEvent::StepStarted {
            step: 1,
            max_steps: 2,
        })
        .expect("json");
        for (seq, at_ms) in [
            (0, 0),
            (9, 10),
            (10, -1),
            (99, -10),
            (100, 1_765_000_000_000),
            (u64::MAX, i64::MIN),
            (1, i64::MAX),
        ] {
            let line = event_line(seq, at_ms, &json);
            assert_eq!(line.capacity(), line.len(), "seq {seq}, at_ms {at_ms}");
            let parsed: serde_json::Value = serde_json::from_slice(&line).expect("one JSON line");
            assert_eq!(parsed["seq"], serde_json::json!(seq));
            assert_eq!(parsed["at_ms"], serde_json::json!(at_ms));
        }
    }

    #[test]
    fn resume_links_keep_their_names_and_are_absent_when_unset() {
        let mut run = RunSummary::queued("r2", 2, "coder", "fix it");
        run.created_at_ms = AT;
        let plain = serde_json::to_value(&run).expect("json");
        assert!(
            plain
                .as_object()
                .expect("object")
                .keys()
                .all(|k| !k.starts_with("resumed")),
            "{plain}"
        );
        run.resume = ResumeLinks {
            resumed_from: Some("r1".into()),
            resumed_at_step: Some(3),
            resumed_messages: Some(9),
            resumed_by: Some("r3".into()),
        };
        assert_wire(
            run,
            r#"{"id":"r2","seq":2,"agent":"coder","request":"fix it","state":"queued","steps":0,"error":null,"usage":{"prompt_tokens":0,"completion_tokens":0},"cost":null,"created_at_ms":1700000000000,"resumed_from":"r1","resumed_at_step":3,"resumed_messages":9,"resumed_by":"r3"}"#,
        );
        assert_wire(
            ResumeRun {
                steps: Some(2),
                files: None,
            },
            r#"{"steps":2}"#,
        );
        assert_wire(
            ResumeRun {
                steps: None,
                files: Some(false),
            },
            r#"{"files":false}"#,
        );
    }

    #[test]
    fn a_run_s_cost_is_a_number_beside_its_usage_or_null() {
        let mut run = RunSummary::queued("r1", 1, "coder", "fix it");
        run.created_at_ms = AT;
        run.usage = crate::chat::Usage {
            prompt_tokens: 1000,
            completion_tokens: 200,
        };
        run.cost = Some(0.0045);
        assert_wire(
            run,
            r#"{"id":"r1","seq":1,"agent":"coder","request":"fix it","state":"queued","steps":0,"error":null,"usage":{"prompt_tokens":1000,"completion_tokens":200},"cost":0.0045,"created_at_ms":1700000000000}"#,
        );
    }

    #[test]
    fn run_files_are_text_or_encoded() {
        let create: CreateRun = serde_json::from_str(
            r#"{"agent":"a","request":"r","files":{"a.txt":"hi","b.bin":{"content":"AAE=","encoding":"base64"},"c.txt":{"content":"x"}}}"#,
        )
        .expect("parse");
        let bytes: Vec<Vec<u8>> = create
            .files
            .into_values()
            .map(|f| f.bytes().expect("bytes"))
            .collect();
        assert_eq!(bytes, [b"hi".to_vec(), vec![0, 1], b"x".to_vec()]);
        assert!(serde_json::from_str::<CreateRun>(
            r#"{"agent":"a","request":"r","files":{"a":{"content":"x","encoding":"rot13"}}}"#
        )
        .is_err());
        assert_eq!(
            FileContent::of(b"text".to_vec()),
            FileContent::Text("text".into())
        );
        assert_eq!(
            FileContent::of(vec![0xff]).bytes().expect("bytes"),
            vec![0xff]
        );
    }

    #[test]
    fn every_outcome_keeps_its_v1_name() {
        for (outcome, expected) in [
            (Outcome::Finished, r#""finished""#),
            (Outcome::MaxSteps, r#""max_steps""#),
            (Outcome::Error, r#""error""#),
            (Outcome::Cancelled, r#""cancelled""#),
            (Outcome::TokenLimit, r#""token_limit""#),
            (Outcome::Interrupted, r#""interrupted""#),
        ] {
            assert_wire(outcome, expected);
        }
    }

    #[test]
    fn every_daemon_event_line_keeps_its_v1_shape() {
        let info = || PluginChangeInfo {
            plugin: "bash".into(),
            file: "bash.wasm".into(),
            version: Some("0.2.0".into()),
            previous_version: None,
            error: None,
        };
        let fields = r#""plugin":"bash","file":"bash.wasm","version":"0.2.0","previous_version":null,"error":null"#;
        let cases = [
            (
                DaemonEvent::PluginLoaded(info()),
                format!(r#"{{"seq":1,"at_ms":1700000000000,"type":"plugin_loaded",{fields}}}"#),
            ),
            (
                DaemonEvent::PluginReplaced(info()),
                format!(r#"{{"seq":2,"at_ms":1700000000000,"type":"plugin_replaced",{fields}}}"#),
            ),
            (
                DaemonEvent::PluginFailed(PluginChangeInfo {
                    plugin: "bash".into(),
                    file: "bash.wasm".into(),
                    version: None,
                    previous_version: Some("0.1.0".into()),
                    error: Some("not a component".into()),
                }),
                r#"{"seq":3,"at_ms":1700000000000,"type":"plugin_failed","plugin":"bash","file":"bash.wasm","version":null,"previous_version":"0.1.0","error":"not a component"}"#.to_string(),
            ),
            (
                DaemonEvent::PluginRemoved(info()),
                format!(r#"{{"seq":4,"at_ms":1700000000000,"type":"plugin_removed",{fields}}}"#),
            ),
            (
                DaemonEvent::PluginConflict(info()),
                format!(r#"{{"seq":5,"at_ms":1700000000000,"type":"plugin_conflict",{fields}}}"#),
            ),
            (
                DaemonEvent::RunCreated {
                    run_id: "r1".into(),
                    agent: "coder".into(),
                },
                r#"{"seq":6,"at_ms":1700000000000,"type":"run_created","run_id":"r1","agent":"coder"}"#.to_string(),
            ),
            (
                DaemonEvent::RunEnded {
                    run_id: "r1".into(),
                    agent: "coder".into(),
                    outcome: Outcome::Finished,
                },
                r#"{"seq":7,"at_ms":1700000000000,"type":"run_ended","run_id":"r1","agent":"coder","outcome":"finished"}"#.to_string(),
            ),
        ];
        for (seq, (event, expected)) in (1..).zip(cases) {
            daemon_snapshotted(&event);
            let line = DaemonEventLine {
                seq,
                at_ms: AT,
                event,
            };
            assert_wire(line, &expected);
        }
    }
}

/// One line of `agentd doctor` (and of `GET /v1/doctor`). `name` is stable
/// (`config`, `state`, `plugins`, `docker`, `image`, `llm`, `daemon`);
/// `fix` is set exactly when `ok` is false.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DoctorCheck {
    pub name: String,
    pub ok: bool,
    pub detail: String,
    pub fix: Option<String>,
}

/// `GET /v1/doctor?agent=NAME`, and what `agentd doctor --json` prints:
/// `ok` exactly when every check is.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DoctorReport {
    pub ok: bool,
    pub checks: Vec<DoctorCheck>,
}
