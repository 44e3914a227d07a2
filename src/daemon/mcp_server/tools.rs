//! agentd's own MCP tools: `run_agent` (waits for the end), `start_run`,
//! `get_run` and `cancel_run` (for work longer than a client waits), and
//! `list_agents`. Each is a thin wording of what the `/v1` routes do,
//! through the same functions (`run_api.rs`): a run started here is the
//! same run, queued under the same caps for the same uid, in the same
//! history, and `agentd runs` lists it.

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool};
use serde_json::{json, Value};

use crate::api::RunSummary;
use crate::daemon::paging::PageRequest;
use crate::daemon::run_api::{self, CancelRunError, FindError, StartError};
use crate::daemon::state::Daemon;

pub const RUN_AGENT: &str = "run_agent";
pub const START_RUN: &str = "start_run";
pub const GET_RUN: &str = "get_run";
pub const CANCEL_RUN: &str = "cancel_run";
pub const LIST_AGENTS: &str = "list_agents";

/// Their names: a tool plugin of one of these names is not offered.
pub const NAMES: &[&str] = &[RUN_AGENT, START_RUN, GET_RUN, CANCEL_RUN, LIST_AGENTS];

fn schema(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

fn agent_and_request() -> Arc<JsonObject> {
    schema(json!({
        "type": "object",
        "properties": {
            "agent": {"type": "string", "description": "The agent to run (list_agents names them)."},
            "request": {"type": "string", "description": "What the agent is asked to do."}
        },
        "required": ["agent", "request"],
        "additionalProperties": false
    }))
}

fn run_id() -> Arc<JsonObject> {
    schema(json!({
        "type": "object",
        "properties": {
            "run_id": {"type": "string", "description": "The run's id, as start_run or run_agent gave it."}
        },
        "required": ["run_id"],
        "additionalProperties": false
    }))
}

/// The tools, as `tools/list` shows them.
pub fn list() -> Vec<Tool> {
    vec![
        Tool::new(
            RUN_AGENT,
            "Runs an agent on a request and waits for it to end; returns its result and outcome. \
             Reports each step as progress when asked; cancelling the call cancels the run.",
            agent_and_request(),
        ),
        Tool::new(
            START_RUN,
            "Starts an agent on a request and returns the run's id at once; follow it with get_run.",
            agent_and_request(),
        ),
        Tool::new(
            GET_RUN,
            "A run's state: queued, running or ended, its steps, and once ended its outcome and result.",
            run_id(),
        ),
        Tool::new(CANCEL_RUN, "Cancels a queued or running run.", run_id()),
        Tool::new(
            LIST_AGENTS,
            "The agents this daemon runs: strategy, tools, step limit and any plugin they lack.",
            schema(json!({"type": "object", "properties": {}, "additionalProperties": false})),
        ),
    ]
}

/// A string argument, or the tool error naming it.
pub fn string_arg(arguments: &Option<JsonObject>, key: &str) -> Result<String, CallToolResult> {
    match arguments.as_ref().and_then(|a| a.get(key)) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(tool_error(format!("`{key}` must be a string"))),
        None => Err(tool_error(format!("`{key}` is required"))),
    }
}

/// An error the client (or its model) can read and act on: `isError` with
/// the message, not a protocol error (which clients show as a bare failure).
pub fn tool_error(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

/// The value as text (for clients that read only `content`) and as
/// `structuredContent`.
pub fn structured(value: Value) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(value.to_string())]);
    result.structured_content = Some(value);
    result
}

/// What a run looks like to an MCP client: its summary without the
/// request (the client sent it) or usage.
pub fn run_json(s: &RunSummary) -> Value {
    json!({
        "run_id": s.id,
        "agent": s.agent,
        "state": s.state,
        "outcome": s.outcome,
        "steps": s.steps,
        "max_steps": s.max_steps,
        "result": s.result,
        "error": s.error,
    })
}

/// `start_run`.
pub async fn start_run(
    d: &Daemon,
    arguments: &Option<JsonObject>,
    uid: Option<u32>,
) -> CallToolResult {
    let (agent, request) = match (
        string_arg(arguments, "agent"),
        string_arg(arguments, "request"),
    ) {
        (Ok(a), Ok(r)) => (a, r),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    match run_api::start_run(d, &agent, request, uid, Vec::new()).await {
        Ok(view) => structured(run_json(&view.summary)),
        Err(e) => start_error(e),
    }
}

/// A refused run, as a tool error; the queue caps keep their key names.
pub fn start_error(e: StartError) -> CallToolResult {
    if let StartError::Create(create) = &e {
        tracing::warn!(error = %create, "refused a run from an MCP client");
    }
    tool_error(e.to_string())
}

/// `get_run`.
pub async fn get_run(d: &Daemon, arguments: &Option<JsonObject>) -> CallToolResult {
    let id = match string_arg(arguments, "run_id") {
        Ok(id) => id,
        Err(e) => return e,
    };
    match run_api::find_run(d, &id, PageRequest::first()).await {
        Ok(view) => structured(run_json(&view.summary)),
        Err(e @ FindError::NotFound(_)) => tool_error(e.to_string()),
        Err(FindError::History(e)) => tool_error(format!("cannot read the run history: {e}")),
    }
}

/// `cancel_run`.
pub async fn cancel_run(d: &Daemon, arguments: &Option<JsonObject>) -> CallToolResult {
    let id = match string_arg(arguments, "run_id") {
        Ok(id) => id,
        Err(e) => return e,
    };
    match run_api::cancel_run(d, &id).await {
        Ok(view) => structured(run_json(&view.summary)),
        Err(e @ (CancelRunError::NotFound(_) | CancelRunError::Ended(_))) => {
            tool_error(e.to_string())
        }
        Err(CancelRunError::History(e)) => tool_error(format!("cannot read the run history: {e}")),
    }
}

/// `list_agents`: `GET /v1/agents`'s list.
pub fn list_agents(d: &Daemon) -> CallToolResult {
    match serde_json::to_value(d.agent_list()) {
        Ok(value) => structured(value),
        Err(e) => tool_error(format!("cannot encode the agents: {e}")),
    }
}
