//! [`DockerSandboxProvider`]: the engine connection and configuration
//! shared by the sandboxes of all runs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bollard::Docker;
use tokio::sync::OnceCell;

use super::container::Limits;
use super::engine::{self, Connected, Host, PROBE_TIMEOUT};
use super::owner::Owner;
use super::reaper;
use super::sandbox::DockerSandbox;
use super::user::{self, Ids, UserSpec};
use crate::sandbox::{EngineConfig, SandboxConfig};
use crate::sandbox::{Sandbox, SandboxError, SandboxProvider};

/// Files larger than this are refused by `read_file` unless changed with
/// [`DockerSandboxProvider::with_max_read_bytes`]: a read is held in memory.
pub const DEFAULT_MAX_READ_BYTES: u64 = 64 << 20;

/// What every sandbox of a provider shares.
pub(crate) struct Shared {
    pub(crate) config: SandboxConfig,
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
    shared: Arc<Shared>,
}

impl DockerSandboxProvider {
    /// Fails only on configuration errors (a `memory_limit` that does not
    /// parse, an unsupported `docker_host`), never because the engine is
    /// down. A caller that wants to start anyway can serve
    /// [`NoSandbox`](crate::sandbox::NoSandbox) with the error's text.
    ///
    /// With `[[sandbox.engines]]` this is the first engine: callers that
    /// want them all use [`Fleet`](crate::sandbox::fleet::Fleet).
    pub fn new(config: &SandboxConfig) -> Result<Self, SandboxError> {
        let first = config
            .engine_list()
            .into_iter()
            .next()
            .unwrap_or_else(|| EngineConfig::default_engine(config.docker_host.clone()));
        Self::for_engine(config, &first)
    }

    /// The provider of one `[[sandbox.engines]]` entry: its address and
    /// TLS files, the rest of `[sandbox]` as for every engine.
    pub fn for_engine(config: &SandboxConfig, entry: &EngineConfig) -> Result<Self, SandboxError> {
        let limits = Limits::from_config(config).map_err(SandboxError::Unavailable)?;
        let (host, engine) = Host::parse_engine(entry.docker_host.as_deref(), entry.tls.as_ref())
            .map_err(SandboxError::Unavailable)?;
        let owner = Owner::current();
        Ok(DockerSandboxProvider {
            shared: Arc::new(Shared {
                config: config.clone(),
                limits,
                host,
                engine,
                docker: OnceCell::new(),
                max_read_bytes: AtomicU64::new(DEFAULT_MAX_READ_BYTES),
                owner_label: owner.to_string(),
                owner,
                ids: tokio::sync::Mutex::new(None),
            }),
        })
    }

    /// Changes the largest file `read_file` accepts (default
    /// [`DEFAULT_MAX_READ_BYTES`]).
    pub fn with_max_read_bytes(self, bytes: u64) -> Self {
        self.shared.max_read_bytes.store(bytes, Ordering::Relaxed);
        self
    }

    /// The engine's address, e.g. `unix:///var/run/docker.sock`.
    pub fn engine_address(&self) -> &str {
        &self.shared.engine
    }

    /// The configuration the sandboxes are made from.
    pub fn config(&self) -> &SandboxConfig {
        &self.shared.config
    }

    /// What weakens the sandbox's isolation on this engine (old runc, no
    /// user namespace, ...), as found when it was first reached; empty
    /// until then.
    pub fn isolation_warnings(&self) -> Vec<String> {
        self.shared
            .docker
            .get()
            .map(|c| c.warnings.clone())
            .unwrap_or_default()
    }

    /// Whether the engine answers, for status reports.
    pub async fn ping(&self) -> Result<(), SandboxError> {
        let docker = self.shared.docker().await?;
        match tokio::time::timeout(PROBE_TIMEOUT, docker.ping()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(engine::unreachable(&self.shared.engine, &e)),
            Err(_) => Err(SandboxError::Unavailable(format!(
                "cannot reach the Docker engine at {}: no answer within {}s",
                self.shared.engine,
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
        let docker = self.shared.docker().await?;
        reaper::reap(&docker, &self.shared.owner, live_run_ids)
            .await
            .map_err(|e| {
                if engine::is_unreachable(&e) {
                    engine::unreachable(&self.shared.engine, &e)
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
        Arc::new(DockerSandbox::new(run_id, self.shared.clone()))
    }

    /// The engine connection (connecting on first use), for benchmarks
    /// that compare against raw bollard calls.
    pub async fn docker(&self) -> Result<Docker, SandboxError> {
        self.shared.docker().await
    }
}

impl SandboxProvider for DockerSandboxProvider {
    fn for_run(&self, run_id: &str) -> Arc<dyn Sandbox> {
        self.sandbox(run_id)
    }
}
