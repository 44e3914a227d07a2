//! What the `/v1` run routes and the MCP server's tools share: starting a
//! run, reading one, cancelling one. Each returns a typed error, and each
//! front end words it its own way (an HTTP status with a stable code, or an
//! MCP tool error), so the rules themselves are written once.

use super::history::HistoryError;
use super::paging::PageRequest;
use super::runs::{CancelError, CreateError, LiveRun};
use super::state::{AgentLookupError, Daemon};
use crate::agent::human::{Decision, ReplyError};
use crate::api::RunView;

/// Why no run was started.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("`request` must not be empty")]
    EmptyRequest,
    #[error("agentd is shutting down and accepts no new runs")]
    ShuttingDown,
    #[error(transparent)]
    Agent(#[from] AgentLookupError),
    /// The queue (or the caller's share of it) is full, or the history
    /// cannot be written. Never [`CreateError::ShuttingDown`], which is
    /// [`StartError::ShuttingDown`].
    #[error(transparent)]
    Create(CreateError),
    #[error("creating the run failed: {0}")]
    Internal(String),
}

/// Why a run could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FindError {
    #[error("no run `{0}`")]
    NotFound(String),
    #[error(transparent)]
    History(#[from] HistoryError),
}

/// Why a run was not cancelled.
#[derive(Debug, thiserror::Error)]
pub enum CancelRunError {
    #[error("no run `{0}`")]
    NotFound(String),
    #[error(transparent)]
    Ended(#[from] CancelError),
    #[error(transparent)]
    History(#[from] HistoryError),
}

/// Starts a run of `agent` on `request` for the client `uid` (its
/// connection's credentials: its share of the queue), built from the
/// current configuration generation; answers once the run is on disk.
pub async fn start_run(
    d: &Daemon,
    agent: &str,
    request: String,
    uid: Option<u32>,
    files: Vec<crate::agent::InputFile>,
) -> Result<RunView, StartError> {
    if request.trim().is_empty() {
        return Err(StartError::EmptyRequest);
    }
    if !d.runs.accepting() {
        return Err(StartError::ShuttingDown);
    }
    let agent = d.generation().agent(agent)?;
    // In a task of its own: if the client goes away while the row commits
    // (hyper, or an MCP cancellation, drops this future), a run already
    // registered must still be started (or forgotten), never left in memory
    // with nothing driving it.
    let runs = d.runs.clone();
    detached(async move { runs.create(agent, request, uid, files).await }).await
}

/// Runs a run's creation in a task of its own (see [`start_run`]), and
/// words its refusal as a [`StartError`]; shared with resuming.
pub(super) async fn detached(
    create: impl std::future::Future<Output = Result<RunView, CreateError>> + Send + 'static,
) -> Result<RunView, StartError> {
    let created = tokio::spawn(create)
        .await
        .map_err(|e| StartError::Internal(e.to_string()))?;
    created.map_err(|e| match e {
        CreateError::ShuttingDown => StartError::ShuttingDown,
        other => StartError::Create(other),
    })
}

/// The run `id` with one page of its messages: from memory while it is
/// live, else from the history.
pub async fn find_run(d: &Daemon, id: &str, page: PageRequest) -> Result<RunView, FindError> {
    let mut view = match d.runs.get(id) {
        Some(live) => live.view(page),
        None => d
            .history
            .get_page(id, page)
            .await?
            .ok_or_else(|| FindError::NotFound(id.to_string()))?,
    };
    // Written before the run shows as ended, so an ended run has it.
    if view.summary.state == crate::api::RunState::Ended {
        view.files = super::artifacts::read_manifest(d.runs.artifacts(), id);
    }
    Ok(view)
}

/// Cancels the live run `id`; a run that has already ended (in memory or
/// only in the history) is [`CancelError::Ended`].
pub async fn cancel_run(d: &Daemon, id: &str) -> Result<RunView, CancelRunError> {
    match d.runs.cancel(id) {
        Some(result) => Ok(result?),
        None => match d.history.summary(id).await? {
            Some(summary) => Err(CancelError::Ended {
                id: id.to_string(),
                outcome: summary
                    .outcome
                    .map(|o| o.to_string())
                    .unwrap_or_else(|| "unknown".into()),
            }
            .into()),
            None => Err(CancelRunError::NotFound(id.to_string())),
        },
    }
}

/// Why an answer (`POST /v1/runs/{id}/input` or `.../approve`) was not taken.
#[derive(Debug, thiserror::Error)]
pub enum ReplyRunError {
    #[error("no run `{0}`")]
    NotFound(String),
    /// The run ended, or waits for something else (or nothing).
    #[error("run `{id}`: {reason}")]
    NotWaiting { id: String, reason: String },
    #[error(transparent)]
    History(#[from] HistoryError),
}

/// Gives the answer `text` to the question the live run `id` waits on.
pub async fn answer(
    d: &Daemon,
    id: &str,
    question: Option<&str>,
    text: String,
    by_uid: Option<u32>,
) -> Result<RunView, ReplyRunError> {
    let run = live_or_ended(d, id).await?;
    reply(id, &run, run.human().answer(question, text, by_uid))
}

/// Decides on the call `call_id` the live run `id` holds for approval.
pub async fn decide(
    d: &Daemon,
    id: &str,
    call_id: &str,
    decision: Decision,
    reason: Option<String>,
    by_uid: Option<u32>,
) -> Result<RunView, ReplyRunError> {
    let run = live_or_ended(d, id).await?;
    reply(
        id,
        &run,
        run.human().decide(call_id, decision, reason, by_uid),
    )
}

async fn live_or_ended(d: &Daemon, id: &str) -> Result<std::sync::Arc<LiveRun>, ReplyRunError> {
    if let Some(run) = d.runs.get(id) {
        return Ok(run);
    }
    match d.history.summary(id).await? {
        Some(s) => Err(ReplyRunError::NotWaiting {
            id: id.to_string(),
            reason: format!(
                "it already ended ({})",
                s.outcome
                    .map_or_else(|| "unknown".to_string(), |o| o.to_string())
            ),
        }),
        None => Err(ReplyRunError::NotFound(id.to_string())),
    }
}

fn reply(id: &str, run: &LiveRun, r: Result<(), ReplyError>) -> Result<RunView, ReplyRunError> {
    match r {
        Ok(()) => Ok(run.first_view()),
        Err(ReplyError::NotWaiting(reason)) => Err(ReplyRunError::NotWaiting {
            id: id.to_string(),
            reason,
        }),
    }
}
