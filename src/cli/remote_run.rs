//! `agentd run` through the daemon: create the run, watch it, report it as
//! `run --local` would, with the same exit statuses.
//!
//! The run belongs to the daemon, not to this process: if this process
//! dies, the run goes on; Ctrl-C asks the daemon to cancel it.

use std::time::Duration;

use serde_json::Value;
use tokio::signal::unix::{signal, SignalKind};

use super::ask::Prompting;
use super::client::{from_value, path_segment, Client, ClientError};
use super::follow::{follow, Ending};
use super::live::LiveStatus;
use super::sanitize::terminal_safe;
use super::view::{EventView, Progress};
use super::{exit, out, RunArgs};
use crate::api::{CreateRun, RunState, RunView};

/// The daemon may send `run_ended` a moment before the record says so;
/// this is how long the record gets to catch up.
const RECORD_TRIES: u32 = 20;
const RECORD_DELAY: Duration = Duration::from_millis(100);

pub async fn run(client: &Client, args: &RunArgs) -> Result<i32, ClientError> {
    let files = match super::files::input_files(&args.files) {
        Ok(files) => files,
        Err(e) => {
            eprintln!("agentd: {e}");
            return Ok(exit::USAGE);
        }
    };
    let request = CreateRun {
        agent: args.agent.clone(),
        request: args.request.clone(),
        files,
    };
    let created: Value = match client.post("/v1/runs", &request).await {
        Ok(v) => v,
        Err(e) if refuses_the_input(&e) => {
            eprintln!("agentd: {e}");
            return Ok(exit::USAGE);
        }
        Err(e) => return Err(e),
    };
    follow_created(client, created, args.json, args.detach).await
}

/// What `run` does once the daemon has created the run (`created` is its
/// answer), shared with `resume`: print the id and return (`detach`), or
/// follow the run to its end and report it, exiting by its outcome.
pub async fn follow_created(
    client: &Client,
    created: Value,
    json: bool,
    detach: bool,
) -> Result<i32, ClientError> {
    let view: RunView = from_value("the new run", &created)?;
    let id = view.summary.id.clone();
    if detach {
        if json {
            out::json(&created)?;
        } else {
            out::line(&id);
        }
        return Ok(0);
    }

    // Installed before the stream opens, so no Ctrl-C falls between.
    let interrupts = match signal(SignalKind::interrupt()) {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!("agentd: warning: cannot watch Ctrl-C ({e}): it will not cancel the run");
            None
        }
    };
    let s = &view.summary;
    let mut progress = Progress::for_stderr(LiveStatus::new(s.state, s.created_at_ms, s.max_steps));
    let mut view = Prompting::new(&mut progress, client.clone(), id.clone());
    let ending = follow(client, &id, true, interrupts, &mut view).await;
    progress.finish();
    let outcome = match ending? {
        Ending::Ended(outcome) => outcome,
        Ending::Quit => return Ok(exit::INTERRUPTED),
        Ending::Drained => {
            return Err(ClientError::Protocol(format!(
                "the event stream of run {id} ended without its end"
            )))
        }
    };

    let (value, view) = final_record(client, &id).await?;
    if json {
        out::json(&value)?;
    } else if let Some(result) = &view.summary.result {
        // The result quotes the model and tools: printed for people, so
        // escape sequences in it are removed (`--json` keeps them exact).
        out::line(&terminal_safe(result.trim_end_matches('\n')));
    }
    Ok(exit::for_outcome(view.summary.outcome.unwrap_or(outcome)))
}

/// The daemon refusing to create the run because of what it was asked (an
/// unknown agent, an agent whose `[llm]` settings are unusable, a bad or
/// oversized request) is bad usage or configuration: exit 2, as `run --local`
/// does for the same mistakes. Told apart by the API's stable error codes;
/// anything else (shutting down, internal) stays a failure of the command.
pub(super) fn refuses_the_input(e: &ClientError) -> bool {
    matches!(
        e,
        ClientError::Http { code, .. }
            if matches!(code.as_str(), "unknown_agent" | "bad_request" | "payload_too_large")
    )
}

/// The run's record once it says the run ended, as JSON (to print whole)
/// and as a type.
async fn final_record(client: &Client, id: &str) -> Result<(Value, RunView), ClientError> {
    let path = format!("/v1/runs/{}", path_segment(id));
    let mut tries = 0;
    loop {
        let value: Value = client.get(&path).await?;
        let view: RunView = from_value(&path, &value)?;
        tries += 1;
        if view.summary.state == RunState::Ended || tries >= RECORD_TRIES {
            return Ok((value, view));
        }
        tokio::time::sleep(RECORD_DELAY).await;
    }
}
