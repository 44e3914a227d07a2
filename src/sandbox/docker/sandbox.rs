//! [`DockerSandbox`]: one run's container, created on first use.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use async_trait::async_trait;
use bollard::Docker;
use tokio::sync::Mutex;
use tracing::Instrument;

use super::container::{self, Container};
use super::engine::OpError;
use super::exec::{self, ExecRequest, Target};
use super::files;
use super::leftovers;
use super::provider::Shared;
use super::shell::Shell;
use crate::sandbox::{CommandOutput, CommandSpec, DirEntry, KeptFiles, Sandbox, SandboxError};

/// How long an operation that lost the engine waits for it to come back
/// before the run's sandbox counts as lost: an engine restart takes a few
/// seconds.
const ENGINE_WAIT: Duration = Duration::from_secs(60);
/// How often the engine is pinged meanwhile.
const ENGINE_POLL: Duration = Duration::from_millis(250);

#[derive(Default)]
struct State {
    container: Option<Arc<Container>>,
    destroyed: bool,
    /// A creation began. If its future was dropped (a cancel mid-create),
    /// the engine may hold a container `container` never learnt of.
    creating: bool,
}

/// A run's sandbox. Making one is free; the container is created by the
/// first operation (or by `prepare()` when `create_on_start` is set),
/// exactly once even when first uses race.
pub struct DockerSandbox {
    run_id: String,
    shared: Arc<Shared>,
    /// Held while the container is created, so concurrent first uses wait
    /// for the one creation, and `destroy` cannot miss a container being
    /// made.
    state: Mutex<State>,
    fatal: StdMutex<Option<SandboxError>>,
    shell: Shell,
}

impl DockerSandbox {
    pub(crate) fn new(run_id: &str, shared: Arc<Shared>) -> Self {
        DockerSandbox {
            run_id: run_id.to_string(),
            shared,
            state: Mutex::new(State::default()),
            fatal: StdMutex::new(None),
            shell: Shell::default(),
        }
    }

    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Creates the container if it does not exist yet; returns its name.
    /// `prepare()` does this when `create_on_start` is set; benchmarks
    /// call it to time creation.
    pub async fn ensure_container(&self) -> Result<String, SandboxError> {
        let (_, c) = self.container().await?;
        Ok(c.name.clone())
    }

    /// Removes whatever carries this run's label: the fallback when a
    /// creation was interrupted before its id was recorded.
    async fn remove_by_label(&self) {
        let Ok(docker) = self.shared.docker().await else {
            return;
        };
        leftovers::remove_run(&self.shared.leftovers, &docker, &self.run_id).await;
    }

    /// The container's id, if it has been created (and not destroyed).
    pub async fn container_id(&self) -> Option<String> {
        let state = self.state.lock().await;
        state.container.as_ref().map(|c| c.id.clone())
    }

    fn span(&self, op: &'static str) -> tracing::Span {
        tracing::info_span!("sandbox", run = %self.run_id, op)
    }

    fn fatal(&self) -> Option<SandboxError> {
        self.fatal.lock().map(|f| f.clone()).unwrap_or(None)
    }

    /// Remembers `e` as the reason this sandbox can never work.
    fn record_fatal(&self, e: SandboxError) -> SandboxError {
        if let Ok(mut f) = self.fatal.lock() {
            if f.is_none() {
                tracing::warn!(run = %self.run_id, error = %e, "sandbox unusable");
                *f = Some(e.clone());
            }
        }
        e
    }

    /// The engine and the container, created on first use.
    async fn container(&self) -> Result<(Docker, Arc<Container>), SandboxError> {
        if let Some(e) = self.fatal() {
            return Err(e);
        }
        let mut state = self.state.lock().await;
        if state.destroyed {
            return Err(SandboxError::Failed(format!(
                "the sandbox of run {} has been destroyed",
                self.run_id
            )));
        }
        if let Some(e) = self.fatal() {
            return Err(e);
        }
        let docker = self
            .shared
            .docker()
            .await
            .map_err(|e| self.record_fatal(e))?;
        if let Some(c) = &state.container {
            return Ok((docker, c.clone()));
        }
        if let Some(warm) = self.shared.pool.take() {
            self.shell.adopt(warm.shell).await;
            let c = Arc::new(warm.container);
            tracing::info!(container = %c.name, "sandbox container taken from the warm pool");
            // The run's name, for people reading `docker ps`; off the path
            // of the first command.
            let (d, id, run) = (docker.clone(), c.id.clone(), self.run_id.clone());
            let parent = crate::otel::LogParent::current();
            tokio::spawn(async move { container::rename_for_run(&d, &id, &run, &parent).await });
            state.container = Some(c.clone());
            return Ok((docker, c));
        }
        let started = std::time::Instant::now();
        state.creating = true;
        let c = match self.create(&docker).await {
            Ok(c) => c,
            // The engine answered when the provider connected and does not
            // now: it is restarting (a package upgrade restarts it), and
            // nothing of this run is lost yet. Wait for it as a command
            // that lost it does, then try once more (a container the failed
            // attempt left under this run's name is removed then).
            Err(e) if !self.engine_answers(&docker).await => {
                tracing::warn!(run = %self.run_id, engine = %self.shared.engine, error = %e, "the Docker engine went away while the sandbox container was being made; waiting for it");
                if !self.engine_back(&docker).await {
                    let (SandboxError::Unavailable(why) | SandboxError::Failed(why)) = e;
                    return Err(self.record_fatal(SandboxError::Unavailable(format!(
                        "{why}; the engine did not come back within {}s",
                        ENGINE_WAIT.as_secs()
                    ))));
                }
                self.create(&docker)
                    .await
                    .map_err(|e| self.record_fatal(e))?
            }
            Err(e) => return Err(self.record_fatal(e)),
        };
        tracing::info!(
            container = %c.name,
            image = %self.shared.config.image,
            ms = started.elapsed().as_millis() as u64,
            "sandbox container started"
        );
        let c = Arc::new(c);
        state.container = Some(c.clone());
        Ok((docker, c))
    }

    /// This run's container, made and started, with the ids it runs as.
    async fn create(&self, docker: &Docker) -> Result<Container, SandboxError> {
        let ids = self.shared.ids(docker).await?;
        container::create(
            docker,
            &self.shared.config,
            &self.shared.limits,
            ids,
            container::Made {
                run_id: &self.run_id,
                owner: &self.shared.owner_label,
                pool: None,
                engine: &self.shared.engine,
            },
        )
        .await
    }

    /// Whether the engine answers a ping now.
    async fn engine_answers(&self, docker: &Docker) -> bool {
        matches!(
            tokio::time::timeout(ENGINE_POLL * 4, docker.ping()).await,
            Ok(Ok(_))
        )
    }

    /// Waits up to [`ENGINE_WAIT`] for the engine to answer again; false
    /// when it does not.
    async fn engine_back(&self, docker: &Docker) -> bool {
        let deadline = tokio::time::Instant::now() + ENGINE_WAIT;
        loop {
            if self.engine_answers(docker).await {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(ENGINE_POLL).await;
        }
    }

    /// Words an operation's error; a vanished container becomes fatal.
    /// When the engine stopped answering, waits (up to [`ENGINE_WAIT`])
    /// for it to come back and looks for the container: a restarted
    /// engine has stopped it (and auto-removed it), which is fatal, as is
    /// an engine that does not come back.
    async fn failed(&self, docker: &Docker, c: &Container, e: OpError) -> SandboxError {
        let engine_down = e.is_unreachable();
        let (err, fatal) = e.classify(&self.shared.engine, &c.name);
        if fatal {
            return self.record_fatal(err);
        }
        if !engine_down {
            return err;
        }
        match self.await_engine(docker, c).await {
            Some(lost) => self.record_fatal(lost),
            None => err,
        }
    }

    /// `r`, its error worded by [`Self::failed`].
    async fn check<T>(
        &self,
        docker: &Docker,
        c: &Container,
        r: Result<T, OpError>,
    ) -> Result<T, SandboxError> {
        match r {
            Ok(v) => Ok(v),
            Err(e) => Err(self.failed(docker, c, e).await),
        }
    }

    /// `None`: the engine answers again and the container still runs.
    async fn await_engine(&self, docker: &Docker, c: &Container) -> Option<SandboxError> {
        let engine = &self.shared.engine;
        tracing::warn!(run = %self.run_id, engine = %engine, "the Docker engine stopped answering; waiting for it");
        if !self.engine_back(docker).await {
            return Some(SandboxError::Failed(format!(
                "the Docker engine at {engine} stopped answering while the sandbox \
                 container {} was in use and did not come back within {}s; this run's \
                 sandbox is lost",
                c.name,
                ENGINE_WAIT.as_secs()
            )));
        }
        let running = docker
            .inspect_container(&c.id, None)
            .await
            .ok()
            .and_then(|i| i.state)
            .and_then(|s| s.running);
        if running == Some(true) {
            tracing::info!(run = %self.run_id, "the Docker engine is back and the sandbox container survived");
            return None;
        }
        Some(SandboxError::Failed(format!(
            "the sandbox container {} was lost when the Docker engine at {engine} went away \
             (restarted or stopped); this run's sandbox cannot be used any more",
            c.name
        )))
    }

    fn work_dir(&self) -> &str {
        &self.shared.config.work_dir
    }
}

#[async_trait]
impl Sandbox for DockerSandbox {
    async fn prepare(&self) -> Result<(), SandboxError> {
        if !self.shared.config.create_on_start {
            return Ok(());
        }
        self.container()
            .instrument(self.span("prepare"))
            .await
            .map(|_| ())
    }

    fn fatal_error(&self) -> Option<SandboxError> {
        self.fatal()
    }

    async fn run(&self, spec: CommandSpec) -> Result<CommandOutput, SandboxError> {
        async {
            let (docker, c) = self.container().await?;
            let t = Target {
                docker: &docker,
                container: &c.id,
                user: &c.exec_user,
            };
            let timeout = self.shared.config.command_timeout(spec.timeout);
            let working_dir = files::within_work_dir(self.work_dir(), spec.workdir.as_deref())
                .map_err(SandboxError::Failed)?;
            let req = ExecRequest {
                cmd: vec!["sh".into(), "-c".into(), spec.command],
                working_dir: Some(working_dir),
                stdin: spec.stdin.map(String::into_bytes),
                timeout,
                output_limit: self.shared.config.output_limit,
                killable: true,
            };
            let o = self.check(&docker, &c, exec::run(t, req).await).await?;
            let (stdout, out_truncated) = o.stdout.into_text();
            let (mut stderr, err_truncated) = o.stderr.into_text();
            let note = if o.timed_out {
                Some(format!(
                    "[command timed out after {}s and was killed]",
                    timeout.as_secs_f64()
                ))
            } else if o.flooded {
                Some(format!(
                    "[command printed more than {} and was killed]",
                    exec::human_bytes(exec::flood_limit(self.shared.config.output_limit))
                ))
            } else {
                None
            };
            if let Some(note) = note {
                if !stderr.is_empty() && !stderr.ends_with('\n') {
                    stderr.push('\n');
                }
                stderr.push_str(&note);
            }
            if o.exit_code.is_none() && !o.timed_out && !o.flooded {
                // The stream broke off: tell a dead container from a glitch.
                self.check(&docker, &c, exec::check_running(t).await)
                    .await?;
            }
            Ok(CommandOutput {
                stdout,
                stderr,
                exit_code: o.exit_code.map_or(-1, |c| c as i32),
                timed_out: o.timed_out,
                truncated: out_truncated || err_truncated,
            })
        }
        .instrument(self.span("run"))
        .await
    }

    async fn shell(
        &self,
        command: &str,
        timeout: Option<Duration>,
    ) -> Result<CommandOutput, SandboxError> {
        async {
            let (docker, c) = self.container().await?;
            let t = Target {
                docker: &docker,
                container: &c.id,
                user: &c.exec_user,
            };
            let r = self
                .shell
                .run(
                    t,
                    self.work_dir(),
                    command,
                    self.shared.config.command_timeout(timeout),
                    self.shared.config.output_limit,
                )
                .await;
            self.check(&docker, &c, r).await
        }
        .instrument(self.span("shell"))
        .await
    }

    async fn restart_shell(&self) -> Result<(), SandboxError> {
        async {
            let (docker, c) = self.container().await?;
            let t = Target {
                docker: &docker,
                container: &c.id,
                user: &c.exec_user,
            };
            let r = self.shell.restart(t, self.work_dir()).await;
            self.check(&docker, &c, r).await
        }
        .instrument(self.span("restart_shell"))
        .await
    }

    async fn read_file(&self, path: &str) -> Result<Vec<u8>, SandboxError> {
        async {
            let (docker, c) = self.container().await?;
            let t = Target {
                docker: &docker,
                container: &c.id,
                user: &c.exec_user,
            };
            let max = self.shared.max_read_bytes.load(Ordering::Relaxed);
            let r = files::read(t, self.work_dir(), path, max).await;
            self.check(&docker, &c, r).await
        }
        .instrument(self.span("read_file"))
        .await
    }

    async fn write_file(&self, path: &str, contents: &[u8]) -> Result<(), SandboxError> {
        async {
            let (docker, c) = self.container().await?;
            let t = Target {
                docker: &docker,
                container: &c.id,
                user: &c.exec_user,
            };
            let r = files::write(t, self.work_dir(), path, contents, c.ids).await;
            self.check(&docker, &c, r).await
        }
        .instrument(self.span("write_file"))
        .await
    }

    async fn list_dir(&self, path: &str) -> Result<Vec<DirEntry>, SandboxError> {
        async {
            let (docker, c) = self.container().await?;
            let t = Target {
                docker: &docker,
                container: &c.id,
                user: &c.exec_user,
            };
            let r = files::list(t, self.work_dir(), path).await;
            self.check(&docker, &c, r).await
        }
        .instrument(self.span("list_dir"))
        .await
    }

    async fn keep_files(
        &self,
        patterns: &[String],
        limit: u64,
        dest: &std::path::Path,
    ) -> Result<KeptFiles, SandboxError> {
        async {
            // Nothing to keep from a container never made: none is made
            // for this.
            let Some(c) = self.state.lock().await.container.clone() else {
                return Ok(KeptFiles {
                    limit,
                    ..KeptFiles::default()
                });
            };
            let docker = self.shared.docker().await?;
            let t = Target {
                docker: &docker,
                container: &c.id,
                user: &c.exec_user,
            };
            Ok(files::keep(t, self.work_dir(), patterns, limit, dest).await)
        }
        .instrument(self.span("keep_files"))
        .await
    }

    async fn destroy(&self) {
        async {
            let taken = {
                let mut state = self.state.lock().await;
                state.destroyed = true;
                state.container.take()
            };
            let creating = std::mem::take(&mut self.state.lock().await.creating);
            self.shell.close();
            let Some(c) = taken else {
                if creating {
                    self.remove_by_label().await;
                }
                return;
            };
            let docker = match self.shared.docker().await {
                Ok(d) => d,
                Err(e) => {
                    tracing::warn!(container = %c.name, error = %e, "cannot remove the sandbox container; the orphan reaper will");
                    return;
                }
            };
            if leftovers::remove(&self.shared.leftovers, &docker, &c).await {
                tracing::info!(container = %c.name, "sandbox container removed");
            }
        }
        .instrument(self.span("destroy"))
        .await
    }
}
