//! The per-run sandbox tools act in.
//!
//! The plugin host only knows this trait; the Docker implementation lives
//! beside it. A run owns exactly one [`Sandbox`] and calls
//! [`Sandbox::destroy`] when it ends, whatever the ending.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

pub mod docker;
pub mod fleet;
pub mod metrics;
mod settings;

pub use fleet::{EngineConfig, TlsFiles};
pub use settings::{SandboxConfig, MAX_POOL_SIZE};

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

/// The warm pool of one engine, for status reports.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PoolStatus {
    /// `[sandbox] pool_size`: how many containers are kept ready.
    pub target: usize,
    /// Created, started, shell open, waiting for a run.
    pub ready: usize,
    /// Being created now.
    pub creating: usize,
    /// Containers handed to runs since this pool was made.
    pub served: u64,
    /// Why the last refill failed, until one succeeds.
    pub last_error: Option<String>,
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

/// One file [`Sandbox::keep_files`] copied out of the work dir.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KeptFile {
    /// Relative to the work dir, `/`-separated.
    pub path: String,
    pub size: u64,
}

/// What [`Sandbox::keep_files`] did: the files kept and what the size cap
/// (`[agents.X] keep_limit`) left out, so a run's record shows whether its
/// artifacts are complete.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KeptFiles {
    /// The files copied, in the order the work dir's archive gave them.
    #[serde(default)]
    pub kept: Vec<KeptFile>,
    /// Their bytes in all (at most `limit`).
    #[serde(default)]
    pub bytes: u64,
    /// The cap the run had (`keep_limit`).
    #[serde(default)]
    pub limit: u64,
    /// True when matching files were left out because of `limit`.
    #[serde(default)]
    pub capped: bool,
    /// The matching files the cap left out (the first
    /// [`LEFT_OUT_NAMES`] of them; `left_out_count` counts them all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
    #[serde(default)]
    pub left_out_count: u64,
    /// Matching entries that are not regular files (symlinks, devices,
    /// hard links): never followed, never kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
    /// Why keeping stopped early (the engine failed, the disk is full);
    /// what was kept before it is still listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Names listed in [`KeptFiles::left_out`] and [`KeptFiles::skipped`]:
/// enough to see what is missing, bounded however many files the work dir
/// holds.
pub const LEFT_OUT_NAMES: usize = 100;

/// The globs of `[agents.X] keep_files`, matched against paths relative to
/// the work dir. `*` does not cross a `/` (`*.py` is the work dir's own
/// Python files, `**/*.py` all of them), as in a `.gitignore`.
pub fn keep_globs(patterns: &[String]) -> Result<globset::GlobSet, String> {
    let mut set = globset::GlobSetBuilder::new();
    for p in patterns {
        let glob = globset::GlobBuilder::new(p)
            .literal_separator(true)
            .build()
            .map_err(|e| format!("keep_files pattern `{p}`: {e}"))?;
        set.add(glob);
    }
    set.build().map_err(|e| format!("keep_files: {e}"))
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
    /// Copies the regular files of the work dir whose paths (relative to
    /// it) match one of `patterns` into `dest`, up to `limit` bytes in
    /// all, before the run's [`Sandbox::destroy`]: what a run leaves
    /// behind (`[agents.X] keep_files`). Symlinks are never followed. A
    /// sandbox that never made a container has nothing to keep (none is
    /// made for this); the default keeps nothing.
    async fn keep_files(
        &self,
        _patterns: &[String],
        limit: u64,
        _dest: &Path,
    ) -> Result<KeptFiles, SandboxError> {
        Ok(KeptFiles {
            limit,
            ..KeptFiles::default()
        })
    }
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
