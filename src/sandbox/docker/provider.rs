//! [`DockerSandboxProvider`]: the engine connection and configuration
//! shared by the sandboxes of all runs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use bollard::Docker;
use tokio::sync::OnceCell;

use super::container::Limits;
use super::engine::{self, Connected, Host, PROBE_TIMEOUT};
use super::leftovers::Leftovers;
use super::owner::Owner;
use super::pool::{Pool, PoolRoom};
use super::reaper;
use super::sandbox::DockerSandbox;
use super::user::{self, Ids, UserSpec};
use crate::sandbox::{EngineConfig, SandboxConfig};
use crate::sandbox::{PoolStatus, Sandbox, SandboxError, SandboxProvider};
use crate::sync::{LockExt, RwLockExt};

/// Files larger than this are refused by `read_file` unless changed with
/// [`DockerSandboxProvider::with_max_read_bytes`]: a read is held in memory.
pub const DEFAULT_MAX_READ_BYTES: u64 = 64 << 20;

/// What every sandbox made under one configuration shares. A `[sandbox]`
/// change makes a new one; runs already under way keep theirs.
pub(crate) struct Shared {
    pub(crate) config: SandboxConfig,
    /// The engine entry this state was made for (address, TLS files).
    entry: EngineConfig,
    pub(crate) limits: Limits,
    host: Host,
    /// The engine's address, for messages.
    pub(crate) engine: String,
    /// Set once the engine has answered; until then every use retries, so
    /// an engine started after the daemon is picked up.
    docker: OnceCell<Connected>,
    pub(crate) max_read_bytes: AtomicU64,
    owner: Owner,
    pub(crate) owner_label: String,
    /// `[sandbox] user` as numbers, once looked up in the image.
    ids: tokio::sync::Mutex<Option<Ids>>,
    /// Containers made ahead of runs with this configuration.
    pub(crate) pool: Arc<Pool>,
    /// What ended runs left that the engine could not remove at the time.
    pub(crate) leftovers: Arc<Leftovers>,
}

impl Drop for Shared {
    /// Stops the pool's refill task; its ready containers were drained by
    /// whoever replaced this configuration, or go to the reaper.
    fn drop(&mut self) {
        self.pool.close();
    }
}

impl Shared {
    pub(crate) async fn docker(&self) -> Result<Docker, SandboxError> {
        self.docker
            .get_or_try_init(|| engine::open(&self.host, &self.engine))
            .await
            .map(|c| c.docker.clone())
    }

    /// The ids commands run as: from the configuration, or looked up once
    /// in the image (a failed lookup is retried by the next run: the image
    /// may have been rebuilt meanwhile).
    pub(crate) async fn ids(&self, docker: &Docker) -> Result<Ids, SandboxError> {
        let (user, group) = match &self.limits.user {
            UserSpec::Ids(ids) => return Ok(*ids),
            UserSpec::Lookup { user, group } => (user, group),
        };
        let mut known = self.ids.lock().await;
        if let Some(ids) = *known {
            return Ok(ids);
        }
        let ids = user::lookup(
            docker,
            &self.config.image,
            user,
            group.as_deref(),
            &self.owner_label,
            &self.engine,
        )
        .await?;
        *known = Some(ids);
        Ok(ids)
    }
}

/// Makes one [`DockerSandbox`] per run, all on one engine connection.
///
/// Cheap to construct and never touches the engine there: a daemon whose
/// engine is down still starts, and the problem surfaces as
/// [`SandboxError::Unavailable`] at first use (see [`Self::ping`] for
/// status reports).
pub struct DockerSandboxProvider {
    /// Swapped whole by [`Self::reconfigure`].
    shared: RwLock<Arc<Shared>>,
    /// Whether the warm pool runs (the daemon's choice): kept across
    /// reconfigurations.
    pooling: std::sync::atomic::AtomicBool,
    /// What bounds the pool by the engine's capacity (the fleet's), given
    /// to every pool this provider makes.
    room: Option<Arc<dyn PoolRoom>>,
    /// The drains of pools a reconfiguration replaced, awaited by
    /// [`Self::drain_pool`].
    old_drains: std::sync::Mutex<Vec<tokio::task::JoinHandle<usize>>>,
}

impl DockerSandboxProvider {
    /// Fails only on configuration errors (a `memory_limit` that does not
    /// parse, an unsupported `docker_host`), never because the engine is
    /// down. A caller that wants to start anyway can serve
    /// [`NoSandbox`](crate::sandbox::NoSandbox) with the error's text.
    ///
    /// With `[[sandbox.engines]]` this is the first engine: callers that
    /// want them all use [`Fleet`](crate::sandbox::fleet::Fleet).
    ///
    /// The warm pool does not run until [`Self::start_pool`]: a one-run
    /// `run --local` or `doctor` has no use for containers made ahead.
    pub fn new(config: &SandboxConfig) -> Result<Self, SandboxError> {
        let first = config
            .engine_list()
            .into_iter()
            .next()
            .unwrap_or_else(|| EngineConfig::default_engine(config.docker_host.clone()));
        Self::for_engine(config, &first, None)
    }

    /// The provider of one `[[sandbox.engines]]` entry: its address and
    /// TLS files, the rest of `[sandbox]` as for every engine. `room`, when
    /// given, bounds its warm pool by what the engine may still hold.
    pub fn for_engine(
        config: &SandboxConfig,
        entry: &EngineConfig,
        room: Option<Arc<dyn PoolRoom>>,
    ) -> Result<Self, SandboxError> {
        let shared = Self::make_shared(config, entry, Owner::current(), None, room.clone())?;
        Ok(DockerSandboxProvider {
            shared: RwLock::new(Arc::new(shared)),
            pooling: std::sync::atomic::AtomicBool::new(false),
            room,
            old_drains: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// `connected`: the engine connection to keep, when the address did
    /// not change.
    fn make_shared(
        config: &SandboxConfig,
        entry: &EngineConfig,
        owner: Owner,
        connected: Option<Connected>,
        room: Option<Arc<dyn PoolRoom>>,
    ) -> Result<Shared, SandboxError> {
        let limits = Limits::from_config(config).map_err(SandboxError::Unavailable)?;
        let (host, engine) = Host::parse_engine(entry.docker_host.as_deref(), entry.tls.as_ref())
            .map_err(SandboxError::Unavailable)?;
        let owner_label = owner.to_string();
        Ok(Shared {
            config: config.clone(),
            entry: entry.clone(),
            limits,
            host,
            engine,
            docker: OnceCell::new_with(connected),
            max_read_bytes: AtomicU64::new(DEFAULT_MAX_READ_BYTES),
            owner,
            ids: tokio::sync::Mutex::new(None),
            pool: Arc::new(Pool::new(config.pool_size, room)),
            leftovers: Arc::new(Leftovers::new(owner_label.clone())),
            owner_label,
        })
    }

    fn shared(&self) -> Arc<Shared> {
        self.shared.read_unpoisoned().clone()
    }

    /// Whether `config` would be accepted by [`Self::reconfigure`]: what a
    /// reload checks before it commits to a new file.
    pub fn check(config: &SandboxConfig) -> Result<(), SandboxError> {
        Limits::from_config(config).map_err(SandboxError::Unavailable)?;
        for entry in config.engine_list() {
            Host::parse_engine(entry.docker_host.as_deref(), entry.tls.as_ref())
                .map_err(SandboxError::Unavailable)?;
        }
        Ok(())
    }

    /// Makes the sandboxes of runs started from now on with `config`
    /// (SIGHUP). Runs under way keep the configuration they started with,
    /// and their containers; the old pool's ready containers, made with
    /// the old settings, are removed (in the background) and a new pool
    /// filled. `entry` is this engine's (its address may change only for
    /// the implicit engine of `docker_host`); the engine connection is kept
    /// when it did not change. Needs a Tokio runtime.
    pub fn reconfigure(
        &self,
        config: &SandboxConfig,
        entry: &EngineConfig,
    ) -> Result<(), SandboxError> {
        let old = self.shared();
        let same_engine = old.entry == *entry;
        let connected = same_engine.then(|| old.docker.get().cloned()).flatten();
        let fresh = Self::make_shared(
            config,
            entry,
            old.owner.clone(),
            connected,
            self.room.clone(),
        )?;
        fresh.max_read_bytes.store(
            old.max_read_bytes.load(Ordering::Relaxed),
            Ordering::Relaxed,
        );
        let fresh = Arc::new(fresh);
        *self.shared.write_unpoisoned() = fresh.clone();
        let drain = tokio::spawn(async move { old.pool.drain(&old).await });
        let mut drains = self.old_drains.lock_unpoisoned();
        drains.retain(|d| !d.is_finished());
        drains.push(drain);
        drop(drains);
        if self.pooling.load(Ordering::Acquire) {
            Pool::start(&fresh);
        }
        Ok(())
    }

    /// Starts keeping `[sandbox] pool_size` containers ready (a daemon
    /// does; needs a Tokio runtime). Idempotent.
    pub fn start_pool(&self) {
        self.pooling.store(true, Ordering::Release);
        Pool::start(&self.shared());
    }

    /// Removes the pool's ready containers and stops refilling it: at
    /// shutdown, before the last reap. Returns how many were removed.
    pub async fn drain_pool(&self) -> usize {
        self.pooling.store(false, Ordering::Release);
        let shared = self.shared();
        let mut removed = shared.pool.drain(&shared).await;
        // The pools SIGHUP replaced may still be removing theirs (or
        // waiting for a creation to finish): done before the last reap.
        let old: Vec<_> = self.old_drains.lock_unpoisoned().drain(..).collect();
        for drain in old {
            removed += drain.await.unwrap_or(0);
        }
        removed
    }

    /// The warm pool now.
    pub fn pool_status(&self) -> PoolStatus {
        self.shared().pool.status()
    }

    /// The current pool's id, the value of its containers'
    /// [`LABEL_POOL`](super::LABEL_POOL) label.
    pub fn pool_id(&self) -> String {
        self.shared().pool.id.clone()
    }

    /// Changes the largest file `read_file` accepts (default
    /// [`DEFAULT_MAX_READ_BYTES`]).
    pub fn with_max_read_bytes(self, bytes: u64) -> Self {
        self.shared().max_read_bytes.store(bytes, Ordering::Relaxed);
        self
    }

    /// The engine's address, e.g. `unix:///var/run/docker.sock`.
    pub fn engine_address(&self) -> String {
        self.shared().engine.clone()
    }

    /// The configuration the sandboxes of new runs are made from.
    pub fn config(&self) -> SandboxConfig {
        self.shared().config.clone()
    }

    /// What weakens the sandbox's isolation on this engine (old runc, no
    /// user namespace, ...), as found when it was first reached; empty
    /// until then.
    pub fn isolation_warnings(&self) -> Vec<String> {
        self.shared()
            .docker
            .get()
            .map(|c| c.warnings.clone())
            .unwrap_or_default()
    }

    /// Whether the engine answers, for status reports.
    pub async fn ping(&self) -> Result<(), SandboxError> {
        let shared = self.shared();
        let docker = shared.docker().await?;
        match tokio::time::timeout(PROBE_TIMEOUT, docker.ping()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(engine::unreachable(&shared.engine, &e)),
            Err(_) => Err(SandboxError::Unavailable(format!(
                "cannot reach the Docker engine at {}: no answer within {}s",
                shared.engine,
                PROBE_TIMEOUT.as_secs()
            ))),
        }
    }

    /// Force-removes the orphans among the containers labelled
    /// `agentd.managed=true`, and returns how many: those whose owner process
    /// is gone, and this provider's own whose `agentd.run` is not in
    /// `live_run_ids`. Containers of other live processes (a concurrent
    /// `agentd run --local`, another daemon) are left alone.
    pub async fn reap_orphans(&self, live_run_ids: &[String]) -> Result<usize, SandboxError> {
        let shared = self.shared();
        let docker = shared.docker().await?;
        reaper::reap(&docker, &shared.owner, live_run_ids)
            .await
            .map_err(|e| {
                if engine::is_unreachable(&e) {
                    engine::unreachable(&shared.engine, &e)
                } else {
                    SandboxError::Failed(format!(
                        "cannot list sandbox containers: {}",
                        engine::chain(&e)
                    ))
                }
            })
    }

    /// The sandbox of `run_id`, as its concrete type (for benchmarks and
    /// tests; runs use [`SandboxProvider::for_run`]).
    pub fn sandbox(&self, run_id: &str) -> Arc<DockerSandbox> {
        Arc::new(DockerSandbox::new(run_id, self.shared()))
    }

    /// The engine connection (connecting on first use), for benchmarks
    /// that compare against raw bollard calls.
    pub async fn docker(&self) -> Result<Docker, SandboxError> {
        self.shared().docker().await
    }
}

impl SandboxProvider for DockerSandboxProvider {
    fn for_run(&self, run_id: &str) -> Arc<dyn Sandbox> {
        self.sandbox(run_id)
    }
}
