//! [`FleetSandbox`]: one run's sandbox on whichever engine the fleet
//! placed it. The engine is chosen at first use (waiting for a slot when
//! every reachable engine is full) and kept for the whole run; every call
//! goes to that engine's [`DockerSandbox`], raced against the engine being
//! found down, which makes the call fail with
//! `sandbox unavailable: engine NAME: ...` and the run's fatal error.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::OnceCell;

use super::placement::{Board, Slot};
use crate::sandbox::docker::{DockerSandbox, DockerSandboxProvider};
use crate::sandbox::{CommandOutput, CommandSpec, DirEntry, KeptFiles, Sandbox, SandboxError};
use crate::sync::LockExt;

/// Where a run landed.
struct Placed {
    index: usize,
    inner: Arc<DockerSandbox>,
    /// Taken by `destroy`; otherwise freed when the sandbox is dropped.
    slot: Mutex<Option<Slot>>,
}

pub(crate) struct FleetSandbox {
    run_id: String,
    board: Arc<Board>,
    engines: Arc<Vec<DockerSandboxProvider>>,
    placed: OnceCell<Placed>,
    fatal: Mutex<Option<SandboxError>>,
    /// Configured engines: a call is raced against its engine failing and
    /// errors name the engine. The implicit single engine delegates plainly,
    /// so its runs behave (and word errors) as before engines existed,
    /// waiting for a restarting engine as `DockerSandbox` does.
    strict: bool,
}

impl FleetSandbox {
    pub(crate) fn new(
        run_id: &str,
        board: Arc<Board>,
        engines: Arc<Vec<DockerSandboxProvider>>,
        strict: bool,
    ) -> Self {
        FleetSandbox {
            run_id: run_id.to_string(),
            board,
            engines,
            placed: OnceCell::new(),
            fatal: Mutex::new(None),
            strict,
        }
    }

    fn record_fatal(&self, e: SandboxError) -> SandboxError {
        let mut fatal = self.fatal.lock_unpoisoned();
        if fatal.is_none() {
            tracing::warn!(run = %self.run_id, error = %e, "sandbox unusable");
            *fatal = Some(e.clone());
        }
        e
    }

    fn own_fatal(&self) -> Option<SandboxError> {
        self.fatal.lock_unpoisoned().clone()
    }

    fn engine_down(&self, index: usize) -> SandboxError {
        let why = self
            .board
            .last_error(index)
            .unwrap_or_else(|| "the engine stopped answering".into());
        SandboxError::Unavailable(format!("engine {}: {why}", self.board.name(index)))
    }

    /// The run's engine, placing it on first use.
    async fn placed(&self) -> Result<&Placed, SandboxError> {
        self.placed
            .get_or_try_init(|| async {
                let engines = &self.engines;
                let slot = self
                    .board
                    .place(|| engines.iter().map(|e| e.pool_status().ready).collect())
                    .await
                    .map_err(|e| SandboxError::Unavailable(e.0))?;
                let index = slot.index();
                let engine = self.engines.get(index).ok_or_else(|| {
                    SandboxError::Unavailable(format!("engine #{index} is not configured"))
                })?;
                tracing::info!(run = %self.run_id, engine = %self.board.name(index), "sandbox placed");
                Ok(Placed {
                    index,
                    inner: engine.sandbox(&self.run_id),
                    slot: Mutex::new(Some(slot)),
                })
            })
            .await
    }

    /// Runs `op` on the run's engine, failing it as soon as that engine is
    /// found down.
    async fn call<T, F, Fut>(&self, op: F) -> Result<T, SandboxError>
    where
        F: FnOnce(Arc<DockerSandbox>) -> Fut,
        Fut: Future<Output = Result<T, SandboxError>>,
    {
        if let Some(e) = self.own_fatal() {
            return Err(e);
        }
        let placed = self.placed().await.map_err(|e| self.record_fatal(e))?;
        if !self.strict {
            return op(placed.inner.clone()).await;
        }
        let index = placed.index;
        if !self.board.reachable(index) {
            return Err(self.record_fatal(self.engine_down(index)));
        }
        let result = tokio::select! {
            r = op(placed.inner.clone()) => r,
            () = self.board.went_down(index) => {
                return Err(self.record_fatal(self.engine_down(index)));
            }
        };
        let result = match result {
            // A failure may be the engine going away before the next probe
            // (its exec streams end first): ask it now rather than let the
            // model retry on a dead engine.
            Err(e) if self.board.reachable(index) => {
                if let Some(engine) = self.engines.get(index) {
                    super::health::record(&self.board, index, super::health::probe(engine).await);
                }
                Err(e)
            }
            other => other,
        };
        match result {
            Ok(v) => Ok(v),
            // The probe saw the engine go while the call failed.
            Err(_) if !self.board.reachable(index) => {
                Err(self.record_fatal(self.engine_down(index)))
            }
            Err(SandboxError::Unavailable(m)) => {
                let e =
                    SandboxError::Unavailable(format!("engine {}: {m}", self.board.name(index)));
                if placed.inner.fatal_error().is_some() {
                    Err(self.record_fatal(e))
                } else {
                    Err(e)
                }
            }
            Err(e) => Err(e),
        }
    }
}

#[async_trait]
impl Sandbox for FleetSandbox {
    /// Places the run only when its container is made at start: a lazy
    /// sandbox takes no slot until a tool uses it.
    async fn prepare(&self) -> Result<(), SandboxError> {
        let eager = self
            .engines
            .first()
            .is_some_and(|e| e.config().create_on_start);
        if !eager {
            return Ok(());
        }
        self.call(|s| async move { s.prepare().await }).await
    }

    fn fatal_error(&self) -> Option<SandboxError> {
        if let Some(e) = self.own_fatal() {
            return Some(e);
        }
        let placed = self.placed.get()?;
        if !self.strict {
            return placed.inner.fatal_error();
        }
        match placed.inner.fatal_error()? {
            SandboxError::Unavailable(m) => Some(SandboxError::Unavailable(format!(
                "engine {}: {m}",
                self.board.name(placed.index)
            ))),
            other => Some(other),
        }
    }

    async fn run(&self, command: CommandSpec) -> Result<CommandOutput, SandboxError> {
        self.call(|s| async move { s.run(command).await }).await
    }

    async fn shell(
        &self,
        command: &str,
        timeout: Option<Duration>,
    ) -> Result<CommandOutput, SandboxError> {
        self.call(|s| async move { s.shell(command, timeout).await })
            .await
    }

    async fn restart_shell(&self) -> Result<(), SandboxError> {
        self.call(|s| async move { s.restart_shell().await }).await
    }

    async fn read_file(&self, path: &str) -> Result<Vec<u8>, SandboxError> {
        self.call(|s| async move { s.read_file(path).await }).await
    }

    async fn write_file(&self, path: &str, contents: &[u8]) -> Result<(), SandboxError> {
        self.call(|s| async move { s.write_file(path, contents).await })
            .await
    }

    async fn list_dir(&self, path: &str) -> Result<Vec<DirEntry>, SandboxError> {
        self.call(|s| async move { s.list_dir(path).await }).await
    }

    /// From the run's engine, if it was ever placed (placing it now would
    /// make a container just to find it empty). A down engine has nothing
    /// to give: the error says which.
    async fn keep_files(
        &self,
        patterns: &[String],
        limit: u64,
        dest: &std::path::Path,
    ) -> Result<KeptFiles, SandboxError> {
        let Some(placed) = self.placed.get() else {
            return Ok(KeptFiles {
                limit,
                ..KeptFiles::default()
            });
        };
        if self.strict && !self.board.reachable(placed.index) {
            return Err(self.engine_down(placed.index));
        }
        placed.inner.keep_files(patterns, limit, dest).await
    }

    /// Removes the container (on a down engine that is left to the reaper
    /// when it comes back) and frees the run's slot.
    async fn destroy(&self) {
        let Some(placed) = self.placed.get() else {
            return;
        };
        if !self.strict || self.board.reachable(placed.index) {
            placed.inner.destroy().await;
        } else {
            // Bounded: a down engine must not hold the run's end.
            let _ = tokio::time::timeout(Duration::from_secs(5), placed.inner.destroy()).await;
        }
        let slot = placed.slot.lock_unpoisoned().take();
        drop(slot);
    }
}
