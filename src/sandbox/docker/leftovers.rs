//! Removing what a run leaves on the engine, now or, when the engine
//! cannot take it now, in the background until it can.
//!
//! A run's container and volumes usually go when the run ends. They cannot
//! when the engine is away (restarting, or stopped for a minute), and a
//! run's volumes cannot while the engine itself is still removing a
//! container it stopped (an auto-removed container holds its volumes until
//! it is gone). The orphan reaper only runs when the daemon starts and
//! stops; a daemon that serves for weeks would keep such leftovers until
//! then. So what cannot go now is queued here and a task retries it,
//! backing off, until it is gone or [`GIVE_UP`] has passed (the next
//! start's reaper has it then). Only what carries the ended run's label is
//! touched, and a label is never reused within a process (runs have uuids,
//! an MCP session's sandboxes are numbered), so a retry never takes a live
//! run's container.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bollard::query_parameters::ListContainersOptionsBuilder;
use bollard::Docker;
use tokio::time::Instant;

use super::container::{self, Container, LABEL_RUN};
use crate::sync::LockExt;

/// How long one removal (of a container, or of a run's volumes) may take.
pub(crate) const REMOVE_TIMEOUT: Duration = Duration::from_secs(30);
/// The first retry: an engine restart takes a few seconds.
const FIRST_RETRY: Duration = Duration::from_secs(1);
/// Retries back off up to this.
const MAX_RETRY: Duration = Duration::from_secs(30);
/// A run's leftovers are retried this long, then left to the reaper.
const GIVE_UP: Duration = Duration::from_secs(3600);

/// The runs whose containers or volumes are still to be removed, with
/// when to give up on each; one engine's.
#[derive(Default)]
pub(crate) struct Leftovers {
    runs: Mutex<HashMap<String, Instant>>,
}

impl Leftovers {
    /// Queues what `run_id` left for removal, and starts the retry task if
    /// none is under way.
    pub(crate) fn defer(self: &Arc<Self>, docker: &Docker, run_id: &str) {
        let start = {
            let mut runs = self.runs.lock_unpoisoned();
            let idle = runs.is_empty();
            runs.entry(run_id.to_string())
                .or_insert_with(|| Instant::now() + GIVE_UP);
            idle
        };
        if start {
            tokio::spawn(retry(self.clone(), docker.clone()));
        }
    }
}

/// Removes container `c` and its run's volumes, each bounded by
/// [`REMOVE_TIMEOUT`]; whatever cannot go now goes to `leftovers`.
/// Returns whether the container went now (its volumes may follow).
pub(crate) async fn remove(leftovers: &Arc<Leftovers>, docker: &Docker, c: &Container) -> bool {
    match tokio::time::timeout(REMOVE_TIMEOUT, container::remove(docker, &c.id)).await {
        Ok(Ok(())) => {
            let volumes = container::remove_volumes(docker, &c.run_label);
            if !matches!(
                tokio::time::timeout(REMOVE_TIMEOUT, volumes).await,
                Ok(true)
            ) {
                tracing::info!(container = %c.name, "the container's volumes are still in use; removing them in the background");
                leftovers.defer(docker, &c.run_label);
            }
            return true;
        }
        Ok(Err(e)) => {
            tracing::warn!(container = %c.name, error = %e, "cannot remove the container now; retrying in the background")
        }
        Err(_) => {
            tracing::warn!(container = %c.name, "removing the container timed out; retrying in the background")
        }
    }
    leftovers.defer(docker, &c.run_label);
    false
}

/// Removes every container and volume labelled with `run_id`; whether
/// none is left.
pub(crate) async fn remove_run(docker: &Docker, run_id: &str) -> bool {
    let filters = HashMap::from([("label", vec![format!("{LABEL_RUN}={run_id}")])]);
    let options = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    let listed = tokio::time::timeout(REMOVE_TIMEOUT, docker.list_containers(Some(options))).await;
    let Ok(Ok(found)) = listed else {
        return false;
    };
    let mut clear = true;
    for id in found.into_iter().filter_map(|c| c.id) {
        let removed = tokio::time::timeout(REMOVE_TIMEOUT, container::remove(docker, &id)).await;
        if matches!(removed, Ok(Ok(()))) {
            tracing::info!(container = %id, run = run_id, "removed a container a run left");
        } else {
            clear = false;
        }
    }
    let volumes = container::remove_volumes(docker, run_id);
    clear
        && matches!(
            tokio::time::timeout(REMOVE_TIMEOUT, volumes).await,
            Ok(true)
        )
}

/// Retries the queued runs until none is left: every run whose
/// leftovers are all gone, or whose time is up, leaves the queue.
async fn retry(leftovers: Arc<Leftovers>, docker: Docker) {
    let mut wait = FIRST_RETRY;
    loop {
        tokio::time::sleep(wait).await;
        let runs: Vec<String> = leftovers.runs.lock_unpoisoned().keys().cloned().collect();
        for run in runs {
            let gone = remove_run(&docker, &run).await;
            let mut queued = leftovers.runs.lock_unpoisoned();
            if gone {
                tracing::info!(run = %run, "what the run left on the engine is removed");
                queued.remove(&run);
            } else if queued
                .get(&run)
                .is_some_and(|&until| Instant::now() >= until)
            {
                tracing::warn!(run = %run, "cannot remove what the run left on the engine; the orphan reaper will at the next start");
                queued.remove(&run);
            }
        }
        // A run queued after this look finds the queue empty and starts a
        // task of its own; one queued before it keeps this one going.
        if leftovers.runs.lock_unpoisoned().is_empty() {
            return;
        }
        wait = (wait * 2).min(MAX_RETRY);
    }
}
