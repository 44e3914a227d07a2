//! `run_agent`: starts a run as `POST /v1/runs` does, follows its events as
//! a `GET /v1/runs/{id}/events` follower does (the run's in-memory log,
//! then the history), reports each `step_started` as
//! `notifications/progress` when the client sent a progress token, and
//! answers with the run's result once it has ended. The client cancelling
//! the call (`notifications/cancelled`, which cancels the request's token)
//! cancels the run.

use std::time::Duration;

use futures::StreamExt;
use rmcp::model::{
    CallToolResult, ContentBlock, JsonObject, ProgressNotificationParam, ProgressToken,
};
use rmcp::{Peer, RoleServer};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use super::tools::{start_error, string_arg, tool_error};
use crate::agent::{Outcome, RunEvent};
use crate::api::{EventLine, RunState, RunSummary};
use crate::daemon::event_log;
use crate::daemon::paging::PageRequest;
use crate::daemon::run_api;
use crate::daemon::state::Daemon;

/// How often the run is looked up when its event stream ended early (a
/// follower dropped, the history unreadable for a moment).
const POLL: Duration = Duration::from_millis(500);

/// Where progress goes: the client's token and the session's peer.
pub struct Progress {
    pub token: ProgressToken,
    pub peer: Peer<RoleServer>,
}

pub async fn run_agent(
    d: &Daemon,
    arguments: &Option<JsonObject>,
    uid: Option<u32>,
    progress: Option<Progress>,
    cancel: &CancellationToken,
) -> CallToolResult {
    let (agent, request) = match (
        string_arg(arguments, "agent"),
        string_arg(arguments, "request"),
    ) {
        (Ok(a), Ok(r)) => (a, r),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let view = match run_api::start_run(d, &agent, request, uid, Vec::new()).await {
        Ok(view) => view,
        Err(e) => return start_error(e),
    };
    let id = view.summary.id;
    info!(run_id = %id, agent = %agent, "run started by an MCP client");
    tokio::select! {
        () = follow(d, &id, progress.as_ref()) => {}
        () = cancel.cancelled() => {
            info!(run_id = %id, "the MCP client cancelled run_agent: cancelling the run");
            // Already ended, or gone: nothing is left to cancel.
            let _ = run_api::cancel_run(d, &id).await;
            return tool_error(format!("run {id} cancelled by the client"));
        }
    }
    loop {
        match run_api::find_run(d, &id, PageRequest::first()).await {
            Ok(view) if view.summary.state == RunState::Ended => return answer(&view.summary),
            Ok(_) => {}
            Err(e) => debug!(run_id = %id, error = %e, "cannot read the run yet"),
        }
        tokio::select! {
            () = tokio::time::sleep(POLL) => {}
            () = cancel.cancelled() => {
                let _ = run_api::cancel_run(d, &id).await;
                return tool_error(format!("run {id} cancelled by the client"));
            }
        }
    }
}

/// Follows run `id`'s events until its `run_ended` (or the stream's end),
/// sending a progress notification per step.
async fn follow(d: &Daemon, id: &str, progress: Option<&Progress>) {
    let live = d.runs.get(id);
    let mut events = Box::pin(event_log::follow(
        id.to_string(),
        live.as_ref().map(|r| &r.events),
        d.history.clone(),
        0,
        true,
    ));
    drop(live);
    while let Some(chunk) = events.next().await {
        for line in chunk.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            // A `stream_error` line is not an event: the loop after this
            // one reads the run instead.
            let Ok(line) = serde_json::from_slice::<EventLine>(line) else {
                continue;
            };
            match line.event {
                RunEvent::StepStarted { step, max_steps } => {
                    if let Some(p) = progress {
                        notify(p, id, step, max_steps).await;
                    }
                }
                RunEvent::RunEnded { .. } => return,
                _ => {}
            }
        }
    }
}

async fn notify(p: &Progress, id: &str, step: u32, max_steps: u32) {
    let param = ProgressNotificationParam::new(p.token.clone(), f64::from(step))
        .with_total(f64::from(max_steps))
        .with_message(format!("run {id}: step {step} of {max_steps}"));
    if let Err(e) = p.peer.notify_progress(param).await {
        debug!(run_id = %id, error = %e, "the client did not take a progress notification");
    }
}

/// The ended run as the tool's answer: its result as text, the record as
/// `structuredContent`, and `isError` unless it finished.
fn answer(s: &RunSummary) -> CallToolResult {
    let outcome = s.outcome.unwrap_or(Outcome::Error);
    let result = s.result.clone().unwrap_or_default();
    let mut text = result.clone();
    if outcome != Outcome::Finished {
        text = format!("run {} ended `{outcome}`\n{text}", s.id);
    }
    if let Some(error) = &s.error {
        text.push_str(&format!("\nerror: {error}"));
    }
    let mut answer = if outcome == Outcome::Finished {
        CallToolResult::success(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::error(vec![ContentBlock::text(text)])
    };
    answer.structured_content = Some(json!({
        "run_id": s.id,
        "outcome": outcome,
        "steps": s.steps,
        "result": result,
        "error": s.error,
    }));
    answer
}
