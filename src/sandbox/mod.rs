//! The per-run sandbox tools act in.
//!
//! The plugin host only knows this trait; the Docker implementation lives
//! beside it. A run owns exactly one [`Sandbox`] and calls
//! [`Sandbox::destroy`] when it ends, whatever the ending.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

pub mod docker;
pub mod fleet;
mod settings;

pub use fleet::{EngineConfig, TlsFiles};
pub use settings::SandboxConfig;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSpec {
    pub command: String,
    pub workdir: Option<String>,
    pub timeout: Option<Duration>,
    pub stdin: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CommandOutput {
    pub stdout: String,
    pub stderr: String,
    pub exit_code: i32,
    pub timed_out: bool,
    pub truncated: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub name: String,
    pub is_dir: bool,
    pub size: u64,
}

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum SandboxError {
    /// No sandbox can be had at all (engine down, not configured).
    #[error("sandbox unavailable: {0}")]
    Unavailable(String),
    /// The sandbox is there but the operation failed.
    #[error("{0}")]
    Failed(String),
}

#[async_trait]
pub trait Sandbox: Send + Sync {
    /// Called once when the run starts. A sandbox configured to be created
    /// eagerly creates its container here; a lazy one does nothing.
    async fn prepare(&self) -> Result<(), SandboxError> {
        Ok(())
    }
    /// Set once the sandbox knows it can never work for this run (engine
    /// down, image missing). The run loop then ends the run with `error`
    /// carrying this message instead of letting the model retry blindly.
    fn fatal_error(&self) -> Option<SandboxError> {
        None
    }
    async fn run(&self, command: CommandSpec) -> Result<CommandOutput, SandboxError>;
    async fn shell(
        &self,
        command: &str,
        timeout: Option<Duration>,
    ) -> Result<CommandOutput, SandboxError>;
    async fn restart_shell(&self) -> Result<(), SandboxError>;
    async fn read_file(&self, path: &str) -> Result<Vec<u8>, SandboxError>;
    async fn write_file(&self, path: &str, contents: &[u8]) -> Result<(), SandboxError>;
    async fn list_dir(&self, path: &str) -> Result<Vec<DirEntry>, SandboxError>;
    /// Removes everything the sandbox created. Idempotent; never fails the
    /// run (problems are logged and left to the orphan reaper).
    async fn destroy(&self);
}

/// Makes one sandbox per run. Creating the handle must be cheap: the
/// container itself is created on first use.
pub trait SandboxProvider: Send + Sync {
    fn for_run(&self, run_id: &str) -> Arc<dyn Sandbox>;
}

/// The provider used when no container engine is configured: every call
/// answers a clear error instead of touching the host.
pub struct NoSandbox {
    reason: String,
}

impl NoSandbox {
    pub fn new(reason: impl Into<String>) -> Self {
        NoSandbox {
            reason: reason.into(),
        }
    }
}

impl SandboxProvider for NoSandbox {
    fn for_run(&self, _run_id: &str) -> Arc<dyn Sandbox> {
        Arc::new(Unavailable(self.reason.clone()))
    }
}

struct Unavailable(String);

#[async_trait]
impl Sandbox for Unavailable {
    async fn run(&self, _: CommandSpec) -> Result<CommandOutput, SandboxError> {
        Err(SandboxError::Unavailable(self.0.clone()))
    }
    async fn shell(&self, _: &str, _: Option<Duration>) -> Result<CommandOutput, SandboxError> {
        Err(SandboxError::Unavailable(self.0.clone()))
    }
    async fn restart_shell(&self) -> Result<(), SandboxError> {
        Err(SandboxError::Unavailable(self.0.clone()))
    }
    async fn read_file(&self, _: &str) -> Result<Vec<u8>, SandboxError> {
        Err(SandboxError::Unavailable(self.0.clone()))
    }
    async fn write_file(&self, _: &str, _: &[u8]) -> Result<(), SandboxError> {
        Err(SandboxError::Unavailable(self.0.clone()))
    }
    async fn list_dir(&self, _: &str) -> Result<Vec<DirEntry>, SandboxError> {
        Err(SandboxError::Unavailable(self.0.clone()))
    }
    async fn destroy(&self) {}
}
