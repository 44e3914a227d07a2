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
use crate::api::{EventLine, RunState, RunView};

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
    let query = if follow { "" } else { "?follow=false" };
    let mut body = client
        .stream(&format!("/v1/runs/{id}/events{query}"))
        .await?;
    let mut splitter = LineSplitter::default();
    let mut ticker = tokio::time::interval(TICK);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let ticks = view.wants_ticks();
    let mut cancel_sent = false;
    let broke = loop {
        tokio::select! {
            frame = body.frame() => match frame {
                None => break None,
                Some(Err(e)) => break Some(e.to_string()),
                Some(Ok(frame)) => {
                    let Ok(data) = frame.into_data() else { continue };
                    let lines = splitter
                        .push(&data)
                        .map_err(|e| ClientError::Protocol(format!("run {run_id}: {e}")))?;
                    for line in lines {
                        if let Some(outcome) = show(&line, view) {
                            return Ok(Ending::Ended(outcome));
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
        if let Some(outcome) = show(&line, view) {
            return Ok(Ending::Ended(outcome));
        }
    }
    if !follow {
        return Ok(Ending::Drained);
    }
    recover(client, run_id, broke, view).await
}

/// Hands one line to the view; the outcome if it was the run's end.
fn show(raw: &[u8], view: &mut dyn EventView) -> Option<Outcome> {
    match serde_json::from_slice::<EventLine>(raw) {
        Ok(event) => {
            view.line(raw, Some(&event));
            match event.event {
                RunEvent::RunEnded { outcome, .. } => Some(outcome),
                _ => None,
            }
        }
        Err(e) => {
            tracing::debug!(error = %e, "event line not understood");
            view.line(raw, None);
            None
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

/// The stream stopped before `run_ended`: ask the record.
async fn recover(
    client: &Client,
    run_id: &str,
    broke: Option<String>,
    view: &mut dyn EventView,
) -> Result<Ending, ClientError> {
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
            Ok(Ending::Ended(outcome))
        }
        _ => Err(ClientError::Protocol(format!(
            "the event stream of run {run_id} ended before the run did (was agentd restarted?); \
             `agentd logs -f {run_id}` follows it again"
        ))),
    }
}
