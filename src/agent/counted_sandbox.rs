//! The sandbox a run's tools see: the run's own, with each operation
//! counted against `max_host_calls_per_step` first (see
//! [`RunContext::admit_host_call`] for why). A decorator here, in the loop,
//! rather than a check in the plugin host's `sandbox` import: the loop owns
//! the run's limits and its step counter, the host stays unaware of both,
//! and the strategy's LLM requests are counted by the same counter.
//!
//! Only the operations a tool asks for are counted: `prepare`,
//! `fatal_error` and `destroy` are the loop's own and pass straight through.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::context::RunContext;
use crate::sandbox::{CommandOutput, CommandSpec, DirEntry, Sandbox, SandboxError};

/// `inner` behind the run's host-call budget: past it, an operation is not
/// performed and fails with an error naming the key, at once.
pub struct CountedSandbox {
    inner: Arc<dyn Sandbox>,
    ctx: Arc<RunContext>,
}

impl CountedSandbox {
    /// `inner`, the run's sandbox, counted against `ctx`'s budget.
    pub fn new(inner: Arc<dyn Sandbox>, ctx: Arc<RunContext>) -> Self {
        CountedSandbox { inner, ctx }
    }

    fn admit(&self, operation: &str) -> Result<(), SandboxError> {
        self.ctx
            .admit_host_call(&format!("sandbox `{operation}`"))
            .map_err(SandboxError::Failed)
    }
}

#[async_trait]
impl Sandbox for CountedSandbox {
    async fn prepare(&self) -> Result<(), SandboxError> {
        self.inner.prepare().await
    }

    fn fatal_error(&self) -> Option<SandboxError> {
        self.inner.fatal_error()
    }

    async fn run(&self, command: CommandSpec) -> Result<CommandOutput, SandboxError> {
        self.admit("run")?;
        self.inner.run(command).await
    }

    async fn shell(
        &self,
        command: &str,
        timeout: Option<Duration>,
    ) -> Result<CommandOutput, SandboxError> {
        self.admit("shell")?;
        self.inner.shell(command, timeout).await
    }

    async fn restart_shell(&self) -> Result<(), SandboxError> {
        self.admit("restart_shell")?;
        self.inner.restart_shell().await
    }

    async fn read_file(&self, path: &str) -> Result<Vec<u8>, SandboxError> {
        self.admit("read_file")?;
        self.inner.read_file(path).await
    }

    async fn write_file(&self, path: &str, contents: &[u8]) -> Result<(), SandboxError> {
        self.admit("write_file")?;
        self.inner.write_file(path, contents).await
    }

    async fn list_dir(&self, path: &str) -> Result<Vec<DirEntry>, SandboxError> {
        self.admit("list_dir")?;
        self.inner.list_dir(path).await
    }

    async fn destroy(&self) {
        self.inner.destroy().await
    }
}
