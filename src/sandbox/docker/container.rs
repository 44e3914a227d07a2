//! Creating and removing a run's container.

use std::collections::HashMap;

use bollard::errors::Error as DockerError;
use bollard::models::{
    ContainerCreateBody, HostConfig, HostConfigLogConfig, Mount, MountType, MountVolumeOptions,
    MountVolumeOptionsDriverConfig, ResourcesUlimits,
};
use bollard::query_parameters::{CreateContainerOptionsBuilder, RemoveContainerOptionsBuilder};
use bollard::Docker;

use super::engine::{chain, is_no_such_container, is_unreachable, unreachable};
use super::scripts;
use super::user::{self, Ids, UserSpec};
use crate::sandbox::SandboxConfig;
use crate::sandbox::SandboxError;

/// Set to `true` on every container agentd creates: what the orphan reaper
/// looks for.
pub const LABEL_MANAGED: &str = "agentd.managed";
/// The id of the run a container belongs to. A pooled container is made
/// before its run exists: it carries `pool-<random>` here for good (labels
/// cannot change), is renamed `agentd-<run id>` when a run takes it, and
/// the run's record of it is the daemon's, not the label's.
pub const LABEL_RUN: &str = "agentd.run";
/// On a container made ahead of time for the warm pool: the pool's id
/// (one per provider configuration), so a drained pool's containers are
/// told from the current one's.
pub const LABEL_POOL: &str = "agentd.pool";

/// Docker refuses less than 6 MiB.
const MIN_MEMORY: i64 = 6 << 20;

/// Parses `[sandbox] memory_limit` as Docker does: `512m`, `1g`, `256k`,
/// `1.5g` or a plain number of bytes (k/m/g/t are powers of 1024; a
/// trailing `b` or `ib` is allowed). Empty or `0` means no limit.
pub fn parse_memory_limit(text: &str) -> Result<Option<i64>, String> {
    let t = text.trim();
    if t.is_empty() || t == "0" {
        return Ok(None);
    }
    let bytes = crate::size::parse_size(t)
        .map_err(|why| format!("invalid [sandbox] memory_limit `{text}`: {why}"))?;
    // parse_size keeps sizes below i64::MAX, Docker's type.
    Ok(Some(i64::try_from(bytes).unwrap_or(i64::MAX)))
}

/// The resource limits of every container, checked once when the provider
/// is made so a bad value is reported at start-up, not at the first run.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    memory: Option<i64>,
    nano_cpus: Option<i64>,
    pids: Option<i64>,
    /// Bytes of each tmpfs (work dir, /tmp).
    disk: i64,
    nofile: i64,
    pub(crate) user: UserSpec,
}

/// The smallest `disk_limit`: room for a few source files.
const MIN_DISK: i64 = 1 << 20;

impl Limits {
    pub(crate) fn from_config(c: &SandboxConfig) -> Result<Limits, String> {
        if !c.cpu_limit.is_finite() {
            return Err(format!("invalid [sandbox] cpu_limit {}", c.cpu_limit));
        }
        let memory = parse_memory_limit(&c.memory_limit)?;
        if memory.is_some_and(|m| m < MIN_MEMORY) {
            return Err(format!(
                "invalid [sandbox] memory_limit `{}`: Docker needs at least 6m",
                c.memory_limit
            ));
        }
        let disk = parse_memory_limit(&c.disk_limit)
            .map_err(|e| e.replace("memory_limit", "disk_limit"))?
            .filter(|d| *d >= MIN_DISK)
            .ok_or_else(|| {
                format!(
                    "invalid [sandbox] disk_limit `{}`: the work dir and /tmp need a size of at \
                     least 1m (they are memory, and unbounded memory is not offered)",
                    c.disk_limit
                )
            })?;
        if c.max_open_files < 16 || c.max_open_files > i64::MAX as u64 {
            return Err(format!(
                "invalid [sandbox] max_open_files {}: a shell needs at least 16",
                c.max_open_files
            ));
        }
        check_work_dir(&c.work_dir)?;
        Ok(Limits {
            memory,
            nano_cpus: (c.cpu_limit > 0.0).then(|| (c.cpu_limit * 1e9).round() as i64),
            pids: (c.pids_limit > 0).then_some(c.pids_limit),
            disk,
            nofile: c.max_open_files as i64,
            user: user::parse(&c.user)?,
        })
    }
}

/// The work dir becomes a tmpfs mount point: it must be an absolute,
/// normalised path other than `/`.
fn check_work_dir(dir: &str) -> Result<(), String> {
    let bad = |why: &str| Err(format!("invalid [sandbox] work_dir `{dir}`: {why}"));
    if !dir.starts_with('/') {
        return bad("it must be an absolute path");
    }
    let parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    if parts.is_empty() {
        return bad("it cannot be `/` (the root filesystem is read-only)");
    }
    if parts.iter().any(|p| *p == "." || *p == "..") {
        return bad("it cannot contain `.` or `..`");
    }
    if dir.contains(':') || dir.contains(',') {
        return bad("it cannot contain `:` or `,`");
    }
    Ok(())
}

/// The `nobody` ids that the container's init and keep-alive process run
/// as. Not the sandbox user: a process can open another's
/// `/proc/PID/fd/1` only with the same uid (or CAP_SYS_PTRACE, which is
/// dropped), and PID 1's stdout is the pipe to the engine's log copier.
/// Out of reach, a command cannot make the engine (outside the container's
/// CPU limit) copy gigabytes, even with logs off.
const KEEPER_USER: &str = "65534:65534";

/// A created and started container.
#[derive(Debug)]
pub(crate) struct Container {
    pub(crate) id: String,
    pub(crate) name: String,
    /// Who commands run as, and who owns uploaded files.
    pub(crate) ids: Ids,
    /// `ids` as an exec's `User`.
    pub(crate) exec_user: String,
    /// Its `agentd.run` label, which its volumes carry too: the run's id,
    /// or `pool-...` for a container made for the pool.
    pub(crate) run_label: String,
}

/// `agentd-<run id>`, reduced to what Docker accepts in a name.
fn container_name(run_id: &str) -> String {
    let clean: String = run_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(100)
        .collect();
    format!("agentd-{clean}")
}

/// An anonymous volume of the `local` driver backed by a tmpfs of `size`
/// bytes, mounted at `target`.
///
/// A volume rather than `HostConfig.tmpfs`: the engine refuses archive
/// uploads anywhere on a read-only root filesystem except into mount points
/// it knows as volumes, and `tmpfs` mounts are not. A volume rather than a
/// `tmpfs` mount: API 1.41 cannot give those a `uid`, and they are
/// `noexec`. `nocopy`: the image's files at `target` would be copied in
/// with their owner, taking the folder from the sandbox user. The volume
/// goes with the container (`docker rm -v`, and auto-removal).
fn tmpfs_volume(target: &str, size: i64, options: &str, labels: &HashMap<String, String>) -> Mount {
    let driver_options = HashMap::from([
        ("type".to_string(), "tmpfs".to_string()),
        ("device".to_string(), "tmpfs".to_string()),
        (
            "o".to_string(),
            format!("size={size},{options},nosuid,nodev"),
        ),
    ]);
    Mount {
        target: Some(target.to_string()),
        typ: Some(MountType::VOLUME),
        read_only: Some(false),
        volume_options: Some(MountVolumeOptions {
            no_copy: Some(true),
            labels: Some(labels.clone()),
            driver_config: Some(MountVolumeOptionsDriverConfig {
                name: Some("local".into()),
                options: Some(driver_options),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn ulimit(name: &str, value: i64) -> ResourcesUlimits {
    ResourcesUlimits {
        name: Some(name.into()),
        soft: Some(value),
        hard: Some(value),
    }
}

fn spec(
    config: &SandboxConfig,
    limits: &Limits,
    ids: Ids,
    run_id: &str,
    owner: &str,
    pool: Option<&str>,
) -> ContainerCreateBody {
    let mut labels = HashMap::from([
        (LABEL_MANAGED.to_string(), "true".to_string()),
        (LABEL_RUN.to_string(), run_id.to_string()),
        (super::owner::LABEL_OWNER.to_string(), owner.to_string()),
    ]);
    if let Some(pool) = pool {
        labels.insert(LABEL_POOL.to_string(), pool.to_string());
    }
    let work_dir = config.work_dir.trim_end_matches('/').to_string();
    let mut mounts = vec![tmpfs_volume(
        &work_dir,
        limits.disk,
        &format!("uid={},gid={},mode=0755", ids.uid, ids.gid),
        &labels,
    )];
    if work_dir != "/tmp" {
        mounts.push(tmpfs_volume("/tmp", limits.disk, "mode=1777", &labels));
    }
    let host_config = HostConfig {
        memory: limits.memory,
        // Equal to memory: no swap on top of the limit.
        memory_swap: limits.memory,
        nano_cpus: limits.nano_cpus,
        pids_limit: limits.pids,
        network_mode: (!config.network_enabled).then(|| "none".to_string()),
        cap_drop: Some(vec!["ALL".to_string()]),
        security_opt: Some(vec!["no-new-privileges".to_string()]),
        // docker-init reaps the zombies the model's commands leave behind.
        init: Some(true),
        // agentd never reads container logs; with the default json-file
        // driver anything written to PID 1's stdout lands, unbounded, in a
        // file on the host.
        log_config: Some(HostConfigLogConfig {
            typ: Some("none".into()),
            config: None,
        }),
        // Nothing a command writes reaches the host's disk: the root
        // filesystem is read-only, the work dir and /tmp are tmpfs
        // (memory, counted in the container's memory limit).
        readonly_rootfs: Some(true),
        mounts: Some(mounts),
        ulimits: Some(vec![
            ulimit("nofile", limits.nofile),
            // Twice the tmpfs size: a file filling the work dir meets
            // ENOSPC, the error programs expect, before SIGXFSZ; any place
            // that is not one of agentd's tmpfs is still bounded.
            ulimit("fsize", limits.disk.saturating_mul(2)),
        ]),
        // A container stopped behind agentd's back (`docker kill`, an
        // engine restart) is removed by the engine itself, volumes too,
        // even when agentd cannot reach it at that moment.
        auto_remove: Some(true),
        ..Default::default()
    };
    // Never the sandbox user's uid, so that its commands cannot open PID 1's
    // stdout (see KEEPER_USER).
    let keeper = if ids.uid == 65534 {
        "65533:65533"
    } else {
        KEEPER_USER
    };
    ContainerCreateBody {
        image: Some(config.image.clone()),
        // As the entrypoint, so an image's own ENTRYPOINT/CMD never runs.
        entrypoint: Some(vec![
            "sh".into(),
            "-c".into(),
            scripts::KEEP_ALIVE.into(),
            "agentd-keepalive".into(),
            work_dir.clone(),
        ]),
        cmd: Some(Vec::new()),
        user: Some(keeper.to_string()),
        // The root filesystem is read-only: HOME is the (writable) work dir
        // whatever the image's passwd says, and whether it has an entry for
        // the user at all.
        env: Some(vec![format!("HOME={work_dir}")]),
        working_dir: Some(work_dir),
        labels: Some(labels),
        network_disabled: (!config.network_enabled).then_some(true),
        tty: Some(false),
        open_stdin: Some(false),
        host_config: Some(host_config),
        ..Default::default()
    }
}

/// Who a container is made for: its run (or pool slot), the provider that
/// owns it, and the pool it waits in, if any.
pub(crate) struct Made<'a> {
    pub(crate) run_id: &'a str,
    pub(crate) owner: &'a str,
    pub(crate) pool: Option<&'a str>,
    /// The engine's address, for messages.
    pub(crate) engine: &'a str,
}

/// Creates and starts the run's container, whose commands run as `ids`.
/// Every error is [`SandboxError::Unavailable`]: without a container the
/// run has no sandbox at all. The image is never pulled.
pub(crate) async fn create(
    docker: &Docker,
    config: &SandboxConfig,
    limits: &Limits,
    ids: Ids,
    made: Made<'_>,
) -> Result<Container, SandboxError> {
    let started = std::time::Instant::now();
    let result = create_untimed(docker, config, limits, ids, made).await;
    crate::sandbox::metrics::created(started.elapsed(), result.is_ok());
    result
}

async fn create_untimed(
    docker: &Docker,
    config: &SandboxConfig,
    limits: &Limits,
    ids: Ids,
    made: Made<'_>,
) -> Result<Container, SandboxError> {
    let Made {
        run_id,
        owner,
        pool,
        engine,
    } = made;
    let body = spec(config, limits, ids, run_id, owner, pool);
    let mut name = container_name(run_id);
    let mut attempts = 0;
    let id = loop {
        attempts += 1;
        let options = CreateContainerOptionsBuilder::default().name(&name).build();
        match docker.create_container(Some(options), body.clone()).await {
            Ok(created) => break created.id,
            Err(DockerError::DockerResponseServerError {
                status_code: 409, ..
            }) if attempts < 3 => {
                name = resolve_name_conflict(docker, &name, run_id).await;
            }
            Err(e) => return Err(create_error(&e, &config.image, engine)),
        }
    };
    if let Err(e) = docker.start_container(&id, None).await {
        let _ = remove(docker, &id).await;
        if is_unreachable(&e) {
            return Err(unreachable(engine, &e));
        }
        return Err(SandboxError::Unavailable(format!(
            "cannot start the sandbox container from image `{}`: {}",
            config.image,
            server_message(&e)
        )));
    }
    Ok(Container {
        id,
        name,
        ids,
        exec_user: ids.exec_user(),
        run_label: run_id.to_string(),
    })
}

/// Gives a pooled container its run's name, so `docker ps` shows whose it
/// is. Best effort: the name is for people; agentd tracks the container by
/// id.
/// `parent` (the run's span) is its log line's: it runs in a task of its
/// own, outside the run's spans.
pub(crate) async fn rename_for_run(
    docker: &Docker,
    id: &str,
    run_id: &str,
    parent: &crate::otel::LogParent,
) -> Option<String> {
    let name = container_name(run_id);
    let options = bollard::query_parameters::RenameContainerOptionsBuilder::default()
        .name(&name)
        .build();
    match docker.rename_container(id, options).await {
        Ok(()) => Some(name),
        Err(e) => {
            tracing::debug!(parent: parent.id(), container = id, run = run_id, error = %e, "pooled container kept its pool name");
            None
        }
    }
}

/// A container already has our name: a leftover of this very run (a daemon
/// restart) is removed; anything else makes us pick another name.
async fn resolve_name_conflict(docker: &Docker, name: &str, run_id: &str) -> String {
    if let Ok(existing) = docker.inspect_container(name, None).await {
        let labels = existing.config.and_then(|c| c.labels).unwrap_or_default();
        let ours = labels.get(LABEL_MANAGED).map(String::as_str) == Some("true")
            && labels.get(LABEL_RUN).map(String::as_str) == Some(run_id);
        if ours && remove(docker, name).await.is_ok() {
            tracing::info!(container = name, "removed a leftover container of this run");
            return name.to_string();
        }
    }
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    format!("{name}-{}", &suffix[..8])
}

pub(crate) fn create_error(e: &DockerError, image: &str, engine: &str) -> SandboxError {
    if is_unreachable(e) {
        return unreachable(engine, e);
    }
    match e {
        DockerError::DockerResponseServerError {
            status_code: 404,
            message,
        } if message.to_ascii_lowercase().contains("no such image") => {
            SandboxError::Unavailable(format!(
                "image `{}` is not present on the Docker engine at {engine}; build it with \
                 scripts/build-images.sh (no registry pull is attempted)",
                image
            ))
        }
        _ => SandboxError::Unavailable(format!(
            "cannot create the sandbox container from image `{}`: {}",
            image,
            server_message(e)
        )),
    }
}

pub(crate) fn server_message(e: &DockerError) -> String {
    match e {
        DockerError::DockerResponseServerError { message, .. } => message.clone(),
        other => chain(other),
    }
}

/// Removes one volume; whether it is gone. Gone already (404: its
/// container's removal took it meanwhile) counts; in use (409) is expected
/// while its container is going, and only logged at debug.
pub(crate) async fn remove_volume(docker: &Docker, name: &str) -> bool {
    let options = bollard::query_parameters::RemoveVolumeOptions { force: false };
    match docker.remove_volume(name, Some(options)).await {
        Ok(()) => {
            tracing::debug!(volume = name, "removed a sandbox volume");
            true
        }
        Err(DockerError::DockerResponseServerError {
            status_code: 404, ..
        }) => true,
        Err(e) => {
            tracing::debug!(volume = name, error = %e, "sandbox volume not removed");
            false
        }
    }
}

/// Removes a container whatever its state. A container that is already
/// gone counts as removed.
pub(crate) async fn remove(docker: &Docker, id: &str) -> Result<(), DockerError> {
    let started = std::time::Instant::now();
    let result = remove_untimed(docker, id).await;
    crate::sandbox::metrics::removed(started.elapsed(), result.is_ok());
    result
}

async fn remove_untimed(docker: &Docker, id: &str) -> Result<(), DockerError> {
    let options = RemoveContainerOptionsBuilder::default()
        .force(true)
        .v(true)
        .build();
    match docker.remove_container(id, Some(options)).await {
        Ok(()) => Ok(()),
        Err(e) if is_no_such_container(&e) => Ok(()),
        // "removal of container ... is already in progress"
        Err(DockerError::DockerResponseServerError {
            status_code: 409,
            message,
        }) if message.contains("already in progress") => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_limits() {
        assert_eq!(parse_memory_limit("512m"), Ok(Some(512 << 20)));
        assert_eq!(parse_memory_limit("1g"), Ok(Some(1 << 30)));
        assert_eq!(parse_memory_limit("1.5G"), Ok(Some(3 << 29)));
        assert_eq!(parse_memory_limit("262144k"), Ok(Some(256 << 20)));
        assert_eq!(parse_memory_limit("10485760"), Ok(Some(10 << 20)));
        assert_eq!(parse_memory_limit("64MiB"), Ok(Some(64 << 20)));
        assert_eq!(parse_memory_limit(""), Ok(None));
        assert_eq!(parse_memory_limit("256k"), Ok(Some(256 << 10)));
        let small = SandboxConfig {
            memory_limit: "256k".into(),
            ..SandboxConfig::default()
        };
        assert!(Limits::from_config(&small)
            .expect_err("too small")
            .contains("6m"));
        assert!(parse_memory_limit("12x").is_err());
        assert!(parse_memory_limit("m").is_err());
        assert!(parse_memory_limit("-5m").is_err());
    }

    #[test]
    fn names_are_docker_safe() {
        assert_eq!(container_name("run 1/ä"), "agentd-run_1__");
        assert!(container_name(&"x".repeat(500)).len() <= 107);
    }
}
