//! Removing containers no run owns any more.
//!
//! Containers live outside the daemon's cgroup: when the daemon dies, or a
//! removal fails, nothing else ever removes them.

use std::collections::HashMap;

use bollard::errors::Error as DockerError;
use bollard::query_parameters::ListContainersOptionsBuilder;
use bollard::Docker;

use super::container::{remove, remove_volume, LABEL_MANAGED, LABEL_RUN};
use super::owner::{Owner, Ownership, LABEL_OWNER};
use super::user::LOOKUP_RUN;

/// Force-removes the containers labelled [`LABEL_MANAGED`] that no live run
/// owns (see [`Owner::classify`]); returns how many went. A container that
/// cannot be removed is logged and skipped.
pub(crate) async fn reap(
    docker: &Docker,
    me: &Owner,
    live: &[String],
) -> Result<usize, DockerError> {
    let filters = HashMap::from([("label", vec![format!("{LABEL_MANAGED}=true")])]);
    let options = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    let mut removed = 0;
    let orphan = |labels: Option<&HashMap<String, String>>| {
        let run = labels.and_then(|l| l.get(LABEL_RUN));
        let owner = labels.and_then(|l| l.get(LABEL_OWNER));
        match me.classify(owner.map(String::as_str)) {
            // A user lookup of ours may be in flight (it lasts a moment).
            Ownership::Ours => !run.is_some_and(|r| r == LOOKUP_RUN || live.iter().any(|l| l == r)),
            Ownership::Dead => true,
            Ownership::Unlabelled => {
                tracing::warn!(run = ?run,
                    "a container or volume labelled {LABEL_MANAGED}=true has no owner label, so it was \
                     not made by this agentd; leaving it (remove it with `docker rm -f` or \
                     `docker volume rm` if it is an orphan)");
                false
            }
            Ownership::AliveElsewhere | Ownership::OtherHost | Ownership::Unverifiable => false,
        }
    };
    for c in docker.list_containers(Some(options)).await? {
        let run = c.labels.as_ref().and_then(|l| l.get(LABEL_RUN));
        if !orphan(c.labels.as_ref()) {
            continue;
        }
        let Some(id) = c.id else { continue };
        match remove(docker, &id).await {
            Ok(()) => {
                tracing::info!(container = %id, run = ?run, "removed an orphaned sandbox container");
                removed += 1;
            }
            Err(e) => {
                tracing::warn!(container = %id, error = %e, "cannot remove an orphaned sandbox container")
            }
        }
    }
    // The work dir and /tmp volumes of containers that went without them
    // (removed by the engine while it restored after a restart). In use
    // means a container still has them: left alone.
    let filters = HashMap::from([("label".to_string(), vec![format!("{LABEL_MANAGED}=true")])]);
    let options = bollard::query_parameters::ListVolumesOptions {
        filters: Some(filters),
    };
    for v in docker
        .list_volumes(Some(options))
        .await?
        .volumes
        .unwrap_or_default()
    {
        if orphan(Some(&v.labels)) && remove_volume(docker, &v.name).await {
            tracing::info!(volume = %v.name, "removed an orphaned sandbox volume");
        }
    }
    Ok(removed)
}
