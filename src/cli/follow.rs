//! Reading a run's event stream to its end, for `run` and `logs`.
//!
//! The stream is the only way to see a run as it happens, but it is not the
//! record: when it breaks (the daemon restarted), the run's record says how
//! the run ended.

use std::time::Duration;

use http_body_util::BodyExt;
use hyper::StatusCode;
use tokio::signal::unix::Signal;
use tokio::time::MissedTickBehavior;

use super::client::{path_segment, Client, ClientError};
use super::ndjson::LineSplitter;
use super::view::EventView;
use crate::agent::{Outcome, RunEvent};
use crate::api::{EventLine, RunState, RunView, StreamError};

const TICK: Duration = Duration::from_millis(200);

/// A restarting daemon is unreachable while it starts (compiling plugins
/// can take seconds); this is how long a broken stream waits for it.
const RECONNECT_TRIES: u32 = 30;
const RECONNECT_DELAY: Duration = Duration::from_millis(500);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Ended(Outcome),
    /// `follow = false`: the events so far were all sent.
    Drained,
    /// Ctrl-C a second time: the user wants out now.
    Quit,
}

/// `interrupts`: when given, the first Ctrl-C cancels the run and the
/// second quits; without it Ctrl-C keeps its default (the process ends,
/// the run goes on in the daemon).
pub async fn follow(
    client: &Client,
    run_id: &str,
    follow: bool,
    mut interrupts: Option<Signal>,
    view: &mut dyn EventView,
) -> Result<Ending, ClientError> {
    let id = path_segment(run_id);
    let mut ticker = tokio::time::interval(TICK);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let ticks = view.wants_ticks();
    let mut cancel_sent = false;
    // The seq of the last event shown: a new stream resumes after it.
    let mut since = 0u64;
    let mut resumes = 0u32;
    loop {
        let mut query = Vec::new();
        if !follow {
            query.push("follow=false".to_string());
        }
        if since > 0 {
            query.push(format!("since={since}"));
        }
        let query = if query.is_empty() {
            String::new()
        } else {
            format!("?{}", query.join("&"))
        };
        let mut body = client
            .stream(&format!("/v1/runs/{id}/events{query}"))
            .await?;
        let mut splitter = LineSplitter::default();
        let broke = loop {
            tokio::select! {
                frame = body.frame() => match frame {
                    None => break Broke::Ended,
                    Some(Err(e)) => break Broke::Error(e.to_string()),
                    Some(Ok(frame)) => {
                        let Ok(data) = frame.into_data() else { continue };
                        let lines = splitter
                            .push(&data)
                            .map_err(|e| ClientError::Protocol(format!("run {run_id}: {e}")))?;
                        for line in lines {
                            match show(&line, view, &mut since) {
                                Shown::Event => {}
                                Shown::End(outcome) => return Ok(Ending::Ended(outcome)),
                                Shown::Dropped(e) => {
                                    since = since.max(e.resume_since);
                                    tracing::debug!(code = %e.code, "the daemon ended the event stream: {}", e.message);
                                }
                            }
                        }
                    }
                },
                _ = ticker.tick(), if ticks => view.tick(),
                () = interrupted(&mut interrupts) => {
                    if cancel_sent {
                        view.finish();
                        return Ok(Ending::Quit);
                    }
                    cancel_sent = true;
                    view.note(&format!("agentd: cancelling run {run_id} (Ctrl-C again to quit at once)"));
                    match client.post_empty::<serde_json::Value>(&format!("/v1/runs/{id}/cancel")).await {
                        // Already ended: its run_ended is on the way.
                        Err(e) if e.is_status(StatusCode::CONFLICT) => {}
                        Err(e) => view.note(&format!("agentd: cannot cancel run {run_id}: {e}")),
                        Ok(_) => {}
                    }
                }
            }
        };
        if let Some(line) = splitter.finish() {
            if let Shown::End(outcome) = show(&line, view, &mut since) {
                return Ok(Ending::Ended(outcome));
            }
        }
        if !follow {
            return Ok(Ending::Drained);
        }
        let broke = match broke {
            Broke::Ended => None,
            Broke::Error(e) => Some(e),
        };
        match recover(client, run_id, broke, view).await? {
            Some(ending) => return Ok(ending),
            // Still going (the daemon dropped a slow follower, or the
            // connection broke): follow again from the last event shown.
            None if resumes < MAX_RESUMES => resumes += 1,
            None => {
                return Err(ClientError::Protocol(format!(
                    "the event stream of run {run_id} keeps breaking; `agentd logs -f {run_id}` follows it again"
                )))
            }
        }
    }
}

/// How many times one `follow` picks a broken stream up again.
const MAX_RESUMES: u32 = 10;

enum Broke {
    /// The body ended without `run_ended`.
    Ended,
    Error(String),
}

enum Shown {
    Event,
    End(Outcome),
    /// The daemon's last line: it dropped this stream.
    Dropped(StreamError),
}

/// Hands one line to the view and notes its seq.
fn show(raw: &[u8], view: &mut dyn EventView, since: &mut u64) -> Shown {
    match serde_json::from_slice::<EventLine>(raw) {
        Ok(event) => {
            *since = (*since).max(event.seq);
            view.line(raw, Some(&event));
            match event.event {
                RunEvent::RunEnded { outcome, .. } => Shown::End(outcome),
                _ => Shown::Event,
            }
        }
        Err(e) => {
            if let Ok(dropped) = serde_json::from_slice::<StreamError>(raw) {
                return Shown::Dropped(dropped);
            }
            tracing::debug!(error = %e, "event line not understood");
            view.line(raw, None);
            Shown::Event
        }
    }
}

async fn interrupted(signal: &mut Option<Signal>) {
    if let Some(s) = signal {
        if s.recv().await.is_some() {
            return;
        }
    }
    std::future::pending().await
}

/// The stream stopped before `run_ended`: ask the record. `None`: the
/// run is still going, so following it again makes sense.
async fn recover(
    client: &Client,
    run_id: &str,
    broke: Option<String>,
    view: &mut dyn EventView,
) -> Result<Option<Ending>, ClientError> {
    let path = format!("/v1/runs/{}", path_segment(run_id));
    let mut tries = 0;
    let record = loop {
        match client.get::<RunView>(&path).await {
            // Anything but an answer: the daemon is not (fully) back yet.
            Err(ClientError::Connect { .. } | ClientError::Protocol(_))
                if tries + 1 < RECONNECT_TRIES =>
            {
                tries += 1;
                tokio::time::sleep(RECONNECT_DELAY).await;
            }
            Err(e) => {
                return Err(ClientError::Protocol(format!(
                "lost the event stream of run {run_id}{}, and agentd does not answer again: {e}",
                broke.map(|b| format!(" ({b})")).unwrap_or_default()
            )))
            }
            Ok(r) => break r,
        }
    };
    match (record.summary.state, record.summary.outcome) {
        (RunState::Ended, Some(outcome)) => {
            view.note(&format!(
                "agentd: lost the event stream of run {run_id}; its record says it ended: {outcome}"
            ));
            Ok(Some(Ending::Ended(outcome)))
        }
        _ => Ok(None),
    }
}
