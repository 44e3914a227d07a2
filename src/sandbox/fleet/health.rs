//! The fleet's probe: every engine pinged every [`PROBE_EVERY`], each ping
//! bounded by [`PROBE_TIMEOUT`]; an engine that fails stops receiving runs
//! (and its runs' sandboxes fail their next call), one that answers again
//! rejoins.

use std::sync::Arc;
use std::time::Duration;

use super::placement::Board;
use crate::sandbox::docker::DockerSandboxProvider;

/// How often each engine is pinged.
pub(crate) const PROBE_EVERY: Duration = Duration::from_secs(2);
/// How long one ping may take before the engine counts as down.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Pings `engine` once.
pub(crate) async fn probe(engine: &DockerSandboxProvider) -> Result<(), String> {
    match tokio::time::timeout(PROBE_TIMEOUT, engine.ping()).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(strip(e.to_string())),
        Err(_) => Err(format!(
            "no answer from {} within {}s",
            engine.engine_address(),
            PROBE_TIMEOUT.as_secs()
        )),
    }
}

/// "sandbox unavailable: cannot reach ..." without the prefix the fleet's
/// own error adds again.
fn strip(text: String) -> String {
    match text.strip_prefix("sandbox unavailable: ") {
        Some(rest) => rest.to_string(),
        None => text,
    }
}

/// Probes every engine forever (the fleet aborts it when dropped); all
/// engines are probed at once, so a slow one does not delay the others.
pub(crate) async fn watch(board: Arc<Board>, engines: Arc<Vec<DockerSandboxProvider>>) {
    let mut tick = tokio::time::interval(PROBE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let probes = engines.iter().map(probe);
        let answers = futures::future::join_all(probes).await;
        for (index, answer) in answers.into_iter().enumerate() {
            record(&board, index, answer);
        }
    }
}

/// Records one probe's answer, logging a change.
pub(crate) fn record(board: &Board, index: usize, answer: Result<(), String>) {
    let error = answer.as_ref().err().cloned();
    if board.set_health(index, answer) {
        let name = board.name(index);
        match error {
            None => tracing::info!(engine = %name, "engine answers again; it receives runs"),
            Some(e) => {
                tracing::warn!(engine = %name, error = %e, "engine unreachable; it receives no runs until it answers")
            }
        }
    }
}
