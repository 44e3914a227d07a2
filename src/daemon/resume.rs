//! `POST /v1/runs/{id}/resume`: a new run that continues an ended one.
//!
//! The new run starts from the old run's transcript up to its last
//! checkpoint (the end of its last completed step, made durable by the
//! checkpoint hook before the next step began) and from its step count,
//! with the agent as the current configuration and plugin set make it now
//! and a fresh sandbox. What is carried over and what is not is the
//! README's "Resuming" paragraph; the rules are here:
//!
//! - resumable: runs that ended `interrupted`, `max_steps`, `error` or
//!   `cancelled`. A `finished` run has nothing left to do; a `token_limit`
//!   run was stopped by its token budget, which is per run, so resuming it
//!   would hand it a fresh budget behind the operator's back.
//! - one to one: a run is resumed at most once (`resumed_by`); resume the
//!   newest run of a chain instead. Concurrent resumes of one run are
//!   serialised by `RunManager::reserve_resume`, and the history's unique
//!   index on `resumed_from` backs it.
//! - a run recorded before checkpoints existed (schema 2), or whose
//!   transcript has holes below its checkpoint (messages dropped while the
//!   state disk was full), is refused: what the model would be shown is
//!   not known.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};

use super::error::ApiError;
use super::history::HistoryError;
use super::peer::Caller;
use super::run_api::{self, StartError};
use super::runs::Resume;
use super::state::Daemon;
use crate::agent::{Outcome, Prior};
use crate::api::{ResumeLinks, ResumeRun, RunState, RunView};
use crate::chat::{Message, Role};

/// Why a run was not resumed.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    #[error("no run `{0}`")]
    NotFound(String),
    #[error("run `{id}` cannot be resumed yet (it is {state}); only an ended run can be resumed")]
    Live { id: String, state: String },
    #[error("run `{id}` cannot be resumed: {reason}")]
    NotResumable { id: String, reason: String },
    #[error(
        "run `{id}` was already resumed by run `{by}`; a run is resumed once: resume `{by}` instead"
    )]
    AlreadyResumed { id: String, by: String },
    #[error("`steps` must be at least 1")]
    NoSteps,
    /// Shutting down, the agent gone or unusable, the queue full, the
    /// history unwritable: as for any new run.
    #[error(transparent)]
    Start(#[from] StartError),
    #[error(transparent)]
    History(#[from] HistoryError),
}

/// How long a resume waits for a run that has ended but is still being
/// written to history (its end is flushed before it leaves memory): a
/// client resuming as soon as it saw `run_ended` is served, not refused.
const ENDING_WAIT: Duration = Duration::from_secs(10);

/// Refuses a run that is queued, running or waiting. A run that has just
/// ended is waited for (up to [`ENDING_WAIT`]) until its end is on disk,
/// since the resume point is read from there; past that (a full disk
/// holding the flush) it is refused, saying so.
async fn live(d: &Daemon, id: &str) -> Result<(), ResumeError> {
    let deadline = tokio::time::Instant::now() + ENDING_WAIT;
    loop {
        let Some(run) = d.runs.get(id) else {
            return Ok(());
        };
        let state = run.state();
        if state == RunState::Ended && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        }
        return Err(ResumeError::Live {
            id: id.to_string(),
            state: if state == RunState::Ended {
                "ended, but its end is still being written to history".to_string()
            } else {
                state.as_str().to_string()
            },
        });
    }
}

/// Resumes the ended run `id` for the client `uid` with `steps` more steps
/// (default: what is left of the agent's step limit, at least 1); answers
/// once the new run, with its copy of the old transcript, is on disk.
pub async fn resume_run(
    d: &Daemon,
    id: &str,
    steps: Option<u32>,
    uid: Option<u32>,
    with_files: bool,
) -> Result<RunView, ResumeError> {
    if steps == Some(0) {
        return Err(ResumeError::NoSteps);
    }
    if !d.runs.accepting() {
        return Err(StartError::ShuttingDown.into());
    }
    live(d, id).await?;
    let new_id = uuid::Uuid::new_v4().simple().to_string();
    // Held until the new run is committed: from then on the history says
    // `resumed_by`, which the next resume of this run reads.
    let hold = d
        .runs
        .reserve_resume(id, &new_id)
        .map_err(|by| ResumeError::AlreadyResumed {
            id: id.to_string(),
            by,
        })?;
    let point = d
        .history
        .resume_point(id)
        .await?
        .ok_or_else(|| ResumeError::NotFound(id.to_string()))?;
    // Ended while its resume point was read.
    live(d, id).await?;
    let summary = point.summary;
    let not_resumable = |reason: String| ResumeError::NotResumable {
        id: id.to_string(),
        reason,
    };
    if let Some(by) = summary.resume.resumed_by.clone() {
        return Err(ResumeError::AlreadyResumed {
            id: id.to_string(),
            by,
        });
    }
    match summary.outcome {
        Some(Outcome::Interrupted | Outcome::MaxSteps | Outcome::Error | Outcome::Cancelled) => {}
        Some(Outcome::Finished) => {
            return Err(not_resumable(
                "it finished; start a new run to go on from its result".into(),
            ))
        }
        Some(Outcome::TokenLimit) => {
            return Err(not_resumable(
                "it used up a token budget (max_input_tokens, which is per run, or a \
                 daily_token_budget); start a new run instead"
                    .into(),
            ))
        }
        None => {
            return Err(ResumeError::Live {
                id: id.to_string(),
                state: summary.state.as_str().to_string(),
            })
        }
    }
    let Some(checkpoint) = point.checkpoint else {
        return Err(not_resumable(
            "it was recorded by an older agentd, which kept no step checkpoints".into(),
        ));
    };
    let messages = carried_messages(&summary.request, checkpoint.messages, point.messages)
        .map_err(not_resumable)?;
    let agent = d
        .generation()
        .agent(&summary.agent)
        .map_err(StartError::from)?;
    let files = if with_files {
        let root = d.runs.artifacts().to_path_buf();
        let old = id.to_string();
        tokio::task::spawn_blocking(move || super::artifacts::input_files(&root, &old))
            .await
            .map_err(|e| StartError::Internal(e.to_string()))?
            .map_err(|reason| {
                not_resumable(format!(
                    "{reason}; resume with \"files\": false to start without its kept files"
                ))
            })?
    } else {
        Vec::new()
    };
    let resume = Resume {
        id: new_id,
        files,
        links: ResumeLinks {
            resumed_from: Some(id.to_string()),
            resumed_at_step: Some(checkpoint.steps),
            resumed_messages: Some(u32::try_from(messages.len()).unwrap_or(u32::MAX)),
            resumed_by: None,
        },
        prior: Prior {
            messages,
            steps: checkpoint.steps,
            stuck_warning: checkpoint.stuck_warning,
            more_steps: steps,
            plan: point.plan,
        },
    };
    // In a task of its own, as `run_api::start_run`: a client that hangs
    // up meanwhile cannot strand a registered run. The hold goes with it.
    let runs = d.runs.clone();
    let request = summary.request;
    Ok(run_api::detached(async move {
        let created = runs.create_resumed(agent, request, uid, resume).await;
        drop(hold);
        created
    })
    .await?)
}

/// The old transcript up to its checkpoint, whole: every index below it
/// present (a gap is a message dropped while the disk refused writes) and
/// the request first. A run that had not pinned its request at its
/// checkpoint (none of its steps completed) starts from its request.
fn carried_messages(
    request: &str,
    upto: u32,
    stored: Vec<(u32, Message)>,
) -> Result<Vec<Message>, String> {
    if upto == 0 {
        return Ok(vec![Message::user(request)]);
    }
    if stored.len() != upto as usize || stored.iter().zip(0..).any(|((idx, _), i)| *idx != i) {
        return Err(format!(
            "its transcript misses messages below its last checkpoint ({} of {upto} kept; \
             they were dropped while the state disk refused writes)",
            stored.len()
        ));
    }
    let messages: Vec<Message> = stored.into_iter().map(|(_, m)| m).collect();
    if messages.first().map(|m| m.role) != Some(Role::User) {
        return Err("its transcript does not start with its request".into());
    }
    Ok(messages)
}

/// The route: the body (`{"steps": N}`) is optional, and parsed as JSON
/// whatever its content type, as `POST /v1/runs`'s.
pub async fn route(
    State(d): State<Arc<Daemon>>,
    Path(id): Path<String>,
    caller: Option<Extension<Caller>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let uid = caller.and_then(|Extension(c)| c.uid);
    let body = body.map_err(|r| ApiError::bad_request(format!("cannot read the body: {r}")))?;
    let ask: ResumeRun = if body.iter().all(u8::is_ascii_whitespace) {
        ResumeRun::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| {
            ApiError::bad_request(format!(
                "the body must be empty or JSON {{\"steps\": N}}: {e}"
            ))
        })?
    };
    match resume_run(&d, &id, ask.steps, uid, ask.files.unwrap_or(true)).await {
        Ok(view) => Ok((StatusCode::CREATED, Json(view)).into_response()),
        Err(e) => Ok(error_response(e)),
    }
}

/// A refused resume as the API words it (codes in the README).
fn error_response(e: ResumeError) -> Response {
    let conflict = |code, e: &ResumeError| ApiError::new(StatusCode::CONFLICT, code, e.to_string());
    match e {
        ResumeError::NotFound(_) => ApiError::not_found(e.to_string()).into_response(),
        ResumeError::NoSteps => ApiError::bad_request(e.to_string()).into_response(),
        ResumeError::Live { .. } => conflict("run_live", &e).into_response(),
        ResumeError::NotResumable { .. } => conflict("not_resumable", &e).into_response(),
        ResumeError::AlreadyResumed { .. } => conflict("already_resumed", &e).into_response(),
        ResumeError::Start(e) => super::routes::start_error(e),
        ResumeError::History(e) => ApiError::internal(e).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_transcript_carried_is_whole_up_to_the_checkpoint() {
        let stored = vec![(0, Message::user("task")), (1, Message::assistant("one"))];
        assert_eq!(
            carried_messages("task", 2, stored.clone()),
            Ok(vec![Message::user("task"), Message::assistant("one")])
        );
        assert_eq!(
            carried_messages("task", 0, Vec::new()),
            Ok(vec![Message::user("task")])
        );
        let holed = vec![(0, Message::user("task")), (2, Message::assistant("x"))];
        assert!(carried_messages("task", 3, holed.clone()).is_err());
        assert!(carried_messages("task", 2, holed).is_err());
        let not_request = vec![(0, Message::assistant("x"))];
        assert!(carried_messages("task", 1, not_request).is_err());
    }
}
