//! Removing what a run leaves on the engine, now or, when the engine
//! cannot take it now, in the background until it can.
//!
//! A run's container and volumes usually go when the run ends. They cannot
//! when the engine is away (restarting, stopped for a minute, or hung), and
//! a run's volumes cannot while the engine itself is still removing a
//! container it stopped (an auto-removed container holds its volumes until
//! it is gone). The orphan reaper only runs when the daemon starts and
//! stops; a daemon that serves for weeks would keep such leftovers until
//! then. So what cannot go now is queued here and one task retries it,
//! backing off, until it is gone or [`GIVE_UP`] has passed (the reaper has
//! it then).
//!
//! Only what carries both this daemon's owner label and the ended run's
//! label is touched. The owner label is this daemon's alone (another
//! daemon, or `agentd run --local`, on the same engine has its own), and
//! within it a run label is never reused (runs have uuids, pooled
//! containers and an MCP session's sandboxes ids of their own), so a retry
//! never takes a live run's container.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bollard::query_parameters::{ListContainersOptionsBuilder, ListVolumesOptions};
use bollard::Docker;
use tokio::sync::Notify;
use tokio::time::{timeout, Instant};

use super::container::{self, Container, LABEL_RUN};
use super::owner::LABEL_OWNER;
use crate::sync::LockExt;

/// How long one removal (of a container, or of a run's volumes) may take.
pub(crate) const REMOVE_TIMEOUT: Duration = Duration::from_secs(30);
/// The first retry: an engine restart takes a few seconds.
const FIRST_RETRY: Duration = Duration::from_secs(1);
/// Retries back off up to this.
const MAX_RETRY: Duration = Duration::from_secs(30);
/// A run's leftovers are retried this long, then left to the reaper.
const GIVE_UP: Duration = Duration::from_secs(3600);

/// The runs whose containers or volumes are still to be removed, for one
/// sandbox configuration (its engine and owner label).
pub(crate) struct Leftovers {
    owner_label: String,
    queue: Mutex<Queue>,
    /// Wakes the retry task when a run is queued, so that a run queued
    /// behind others is first retried after [`FIRST_RETRY`], not after
    /// whatever the task's back-off has grown to.
    queued: Notify,
}

#[derive(Default)]
struct Queue {
    /// Each queued run, with when to give up on it.
    runs: HashMap<String, Instant>,
    /// Whether the retry task is under way. Set and cleared under the same
    /// lock as `runs`, so there is never more than one task, and never a
    /// queued run without one.
    task: bool,
}

impl Leftovers {
    pub(crate) fn new(owner_label: String) -> Self {
        Leftovers {
            owner_label,
            queue: Mutex::default(),
            queued: Notify::new(),
        }
    }

    /// Queues what `run_id` left for removal, and starts the retry task if
    /// none is under way. Safe to call from `Drop` (a removal abandoned
    /// midway): outside a runtime the run stays queued for the next call's
    /// task, or for the reaper.
    pub(crate) fn defer(self: &Arc<Self>, docker: &Docker, run_id: &str) {
        let mut queue = self.queue.lock_unpoisoned();
        queue
            .runs
            .entry(run_id.to_string())
            .or_insert_with(|| Instant::now() + GIVE_UP);
        if queue.task {
            self.queued.notify_one();
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            queue.task = true;
            runtime.spawn(retry(self.clone(), docker.clone()));
        }
    }

    #[cfg(test)]
    fn queued(&self) -> Vec<String> {
        self.queue.lock_unpoisoned().runs.keys().cloned().collect()
    }
}

/// Queues a run's leftovers if dropped armed: a removal whose future is
/// dropped midway (a caller's timeout around an engine that hangs) still
/// leaves its run to the retry task.
struct DeferOnDrop<'a> {
    leftovers: &'a Arc<Leftovers>,
    docker: &'a Docker,
    run_id: &'a str,
    armed: bool,
}

impl Drop for DeferOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.leftovers.defer(self.docker, self.run_id);
        }
    }
}

/// Removes container `c` and its run's volumes, each bounded by
/// [`REMOVE_TIMEOUT`]; whatever cannot go now (or is abandoned midway) goes
/// to `leftovers`. Returns whether the container went now (its volumes may
/// follow).
pub(crate) async fn remove(leftovers: &Arc<Leftovers>, docker: &Docker, c: &Container) -> bool {
    let mut guard = DeferOnDrop {
        leftovers,
        docker,
        run_id: &c.run_label,
        armed: true,
    };
    match timeout(REMOVE_TIMEOUT, container::remove(docker, &c.id)).await {
        Ok(Ok(())) => {
            let runs = HashSet::from([c.run_label.as_str()]);
            let volumes = remove_volumes(docker, &leftovers.owner_label, &runs);
            match timeout(REMOVE_TIMEOUT, volumes).await {
                Ok(left) if left.is_empty() => guard.armed = false,
                Ok(left) => {
                    let why = left.into_values().next().unwrap_or_default();
                    tracing::info!(container = %c.name, why = %why, "the container's volumes cannot be removed yet; removing them in the background");
                }
                Err(_) => {
                    tracing::info!(container = %c.name, "removing the container's volumes timed out; removing them in the background");
                }
            }
            return true;
        }
        Ok(Err(e)) => {
            tracing::warn!(container = %c.name, error = %container::server_message(&e), "cannot remove the container now; retrying in the background");
        }
        Err(_) => {
            tracing::warn!(container = %c.name, "removing the container timed out; retrying in the background");
        }
    }
    false
}

/// Removes every container and volume of this daemon labelled with one of
/// `runs`. Returns the runs that still have something left, each with why
/// (the last reason seen); a run not in it has nothing left.
async fn sweep(
    docker: &Docker,
    owner_label: &str,
    runs: &HashSet<&str>,
) -> HashMap<String, String> {
    let mut left = HashMap::new();
    let filters = HashMap::from([("label", label_filters(owner_label, runs))]);
    let options = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    let found = match timeout(REMOVE_TIMEOUT, docker.list_containers(Some(options))).await {
        Ok(Ok(found)) => found,
        Ok(Err(e)) => {
            let why = format!("cannot list containers: {}", container::server_message(&e));
            return all_left(runs, &why);
        }
        Err(_) => {
            return all_left(runs, "listing containers timed out");
        }
    };
    for c in found {
        let run = c.labels.as_ref().and_then(|l| l.get(LABEL_RUN));
        let (Some(run), Some(id)) = (run.filter(|r| runs.contains(r.as_str())), c.id) else {
            continue;
        };
        match timeout(REMOVE_TIMEOUT, container::remove(docker, &id)).await {
            Ok(Ok(())) => {
                tracing::debug!(container = %id, run = %run, "removed a container an ended run left")
            }
            Ok(Err(e)) => {
                let why = format!("container {id}: {}", container::server_message(&e));
                left.insert(run.clone(), why);
            }
            Err(_) => {
                left.insert(run.clone(), format!("removing container {id} timed out"));
            }
        }
    }
    match timeout(REMOVE_TIMEOUT, remove_volumes(docker, owner_label, runs)).await {
        Ok(volumes) => left.extend(volumes),
        Err(_) => left.extend(all_left(runs, "removing volumes timed out")),
    }
    left
}

/// Removes this daemon's volumes (a run's work dir and /tmp) labelled with
/// one of `runs`. Removing a container with `v` takes its volumes, but a
/// container the engine removed itself (while restoring after a restart)
/// leaves them behind. Returns the runs with a volume left, each with why:
/// a volume still in use (its container not gone yet) is left alone.
async fn remove_volumes(
    docker: &Docker,
    owner_label: &str,
    runs: &HashSet<&str>,
) -> HashMap<String, String> {
    let filters = HashMap::from([("label".to_string(), label_filters(owner_label, runs))]);
    let options = ListVolumesOptions {
        filters: Some(filters),
    };
    let listed = match docker.list_volumes(Some(options)).await {
        Ok(l) => l.volumes.unwrap_or_default(),
        Err(e) => {
            let why = format!("cannot list volumes: {}", container::server_message(&e));
            return all_left(runs, &why);
        }
    };
    let mut left = HashMap::new();
    for v in listed {
        let Some(run) = v
            .labels
            .get(LABEL_RUN)
            .filter(|r| runs.contains(r.as_str()))
        else {
            continue;
        };
        if !container::remove_volume(docker, &v.name).await {
            left.insert(run.clone(), format!("volume {} is still in use", v.name));
        }
    }
    left
}

/// Every one of `runs`, left for the same reason (the engine could not be
/// asked about any of them).
fn all_left(runs: &HashSet<&str>, why: &str) -> HashMap<String, String> {
    runs.iter()
        .map(|r| (r.to_string(), why.to_string()))
        .collect()
}

/// The engine's `label` filters (which it ANDs): this daemon's owner label,
/// and the run's label when there is one run to look for (with several, the
/// runs are matched here, so that a round costs one list, not one per run).
fn label_filters(owner_label: &str, runs: &HashSet<&str>) -> Vec<String> {
    let mut filters = vec![format!("{LABEL_OWNER}={owner_label}")];
    if let (1, Some(run)) = (runs.len(), runs.iter().next()) {
        filters.push(format!("{LABEL_RUN}={run}"));
    }
    filters
}

/// Removes what `run_id` left (a creation interrupted before its id was
/// recorded). It is also queued, whatever this finds: the engine may still
/// finish such a creation after this look, and the first retry catches a
/// container that lands by then (the reaper, one later).
pub(crate) async fn remove_run(leftovers: &Arc<Leftovers>, docker: &Docker, run_id: &str) {
    leftovers.defer(docker, run_id);
    let runs = HashSet::from([run_id]);
    if let Some(why) = sweep(docker, &leftovers.owner_label, &runs)
        .await
        .remove(run_id)
    {
        tracing::warn!(run = run_id, why = %why, "cannot remove the container whose creation was interrupted now; retrying in the background");
    }
}

/// Retries the queued runs until none is left: every run whose leftovers
/// are all gone, or whose time is up, leaves the queue.
async fn retry(leftovers: Arc<Leftovers>, docker: Docker) {
    let mut wait = FIRST_RETRY;
    loop {
        if timeout(wait, leftovers.queued.notified()).await.is_ok() {
            // A run was queued: give it the first delay, then start over.
            tokio::time::sleep(FIRST_RETRY).await;
            wait = FIRST_RETRY;
        }
        let runs: Vec<String> = leftovers
            .queue
            .lock_unpoisoned()
            .runs
            .keys()
            .cloned()
            .collect();
        let looking: HashSet<&str> = runs.iter().map(String::as_str).collect();
        let mut left = sweep(&docker, &leftovers.owner_label, &looking).await;
        let mut queue = leftovers.queue.lock_unpoisoned();
        let now = Instant::now();
        for run in &runs {
            match left.remove(run) {
                None => {
                    tracing::info!(run = %run, "what the run left on the engine is removed");
                    queue.runs.remove(run);
                }
                Some(why) if queue.runs.get(run).is_some_and(|&until| now >= until) => {
                    tracing::warn!(run = %run, why = %why, "cannot remove what the run left on the engine; giving up, the orphan reaper removes it when the daemon stops or starts");
                    queue.runs.remove(run);
                }
                Some(why) => {
                    tracing::debug!(run = %run, why = %why, "what the run left is still there; retrying")
                }
            }
        }
        // Under the lock `defer` takes: a run queued from now on finds the
        // task gone and starts another.
        if queue.runs.is_empty() {
            queue.task = false;
            return;
        }
        drop(queue);
        wait = (wait * 2).min(MAX_RETRY);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_run_is_looked_for_by_both_labels_several_by_the_owner() {
        let one = HashSet::from(["r1"]);
        assert_eq!(
            label_filters("o", &one),
            vec![format!("{LABEL_OWNER}=o"), format!("{LABEL_RUN}=r1")]
        );
        let two = HashSet::from(["r1", "r2"]);
        assert_eq!(label_filters("o", &two), vec![format!("{LABEL_OWNER}=o")]);
    }

    /// A removal abandoned midway (its future dropped by a caller's
    /// timeout, as when the engine hangs) still queues its run, and however
    /// often runs are queued one task retries them.
    #[tokio::test]
    async fn a_removal_dropped_midway_queues_its_run() {
        // An engine that takes connections and never answers.
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("hung.sock");
        let listener = tokio::net::UnixListener::bind(&path).expect("bind");
        let held = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((conn, _)) = listener.accept().await {
                held.push(conn);
            }
        });
        let socket = path.to_str().expect("utf-8 path");
        let docker = Docker::connect_with_unix(socket, 120, bollard::API_DEFAULT_VERSION)
            .expect("a client needs no connection");
        let leftovers = Arc::new(Leftovers::new("owner".into()));
        let c = Container {
            id: "c1".into(),
            name: "agentd-c1".into(),
            ids: super::super::user::Ids {
                uid: 1000,
                gid: 1000,
            },
            exec_user: "1000:1000".into(),
            run_label: "run-1".into(),
        };
        let abandoned = timeout(Duration::from_millis(200), remove(&leftovers, &docker, &c)).await;
        assert!(abandoned.is_err(), "the hung engine answered");
        assert_eq!(leftovers.queued(), vec!["run-1".to_string()]);
        leftovers.defer(&docker, "run-2");
        leftovers.defer(&docker, "run-1");
        let mut queued = leftovers.queued();
        queued.sort();
        assert_eq!(queued, vec!["run-1".to_string(), "run-2".to_string()]);
        assert!(leftovers.queue.lock_unpoisoned().task);
        held.abort();
    }
}
