//! The plugin host: the engine, one linker per world, the current plugin set
//! and the compile cache. Turning bytes into a checked plugin lives here;
//! deciding which files to (re)load and swapping the set lives in `scan.rs`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use tracing::{info, warn};
use wasmtime::component::{Component, Linker};
use wasmtime::Engine;

use super::cache::{sha256, CompileCache, Origin};
use super::engine::{build_engine, EngineLimits};
use super::registry::{LoadedPlugin, PluginSet};
use super::scan::{PluginStatus, ScanState};
use super::strategy_host::StrategyState;
use super::tool_host::ToolState;
use super::{world, PluginError};
use crate::sync::RwLockExt;

/// A plugin file larger than this is refused before it is read: no real
/// component comes near it, and reading it whole would let a stray file in
/// the folder exhaust memory.
pub const MAX_COMPONENT_BYTES: u64 = 256 << 20;

pub struct PluginHost {
    pub(super) engine: Engine,
    pub(super) strategy_linker: Linker<StrategyState>,
    pub(super) tool_linker: Linker<ToolState>,
    /// Swapped whole, never edited: runs hold the `Arc` they took.
    pub(super) current: RwLock<Arc<PluginSet>>,
    pub(super) cache: Option<Arc<CompileCache>>,
    /// One rescan at a time (the watcher and an API request may both ask);
    /// an async lock because a rescan awaits compilation while holding it.
    pub(super) scan: tokio::sync::Mutex<ScanState>,
    /// Published with the set, so `statuses()` never waits for a rescan.
    pub(super) statuses: RwLock<Arc<Vec<PluginStatus>>>,
}

impl PluginHost {
    pub fn new(limits: EngineLimits) -> Result<Self, PluginError> {
        let engine = build_engine(limits)?;
        let link = |e: wasmtime::Error| PluginError::Engine(format!("cannot build linker: {e:#}"));
        let mut strategy_linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut strategy_linker).map_err(link)?;
        world::link_strategy(&mut strategy_linker).map_err(link)?;
        let mut tool_linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut tool_linker).map_err(link)?;
        world::link_tool(&mut tool_linker).map_err(link)?;
        Ok(PluginHost {
            engine,
            strategy_linker,
            tool_linker,
            current: RwLock::new(Arc::new(PluginSet::default())),
            cache: None,
            scan: tokio::sync::Mutex::new(ScanState::default()),
            statuses: RwLock::new(Arc::new(Vec::new())),
        })
    }

    /// Keeps compiled plugins in `dir` (the daemon uses `<state_dir>/cache`).
    /// A cache that cannot be used safely (not creatable, owned by another
    /// user) is logged and left off: plugins still load, only slower, which
    /// beats refusing to start over an optimisation. `cache_dir()` tells
    /// whether it is on.
    pub fn with_cache_dir(mut self, dir: PathBuf) -> Self {
        match CompileCache::open(dir.clone(), &self.engine) {
            Ok(cache) => self.cache = Some(Arc::new(cache)),
            Err(e) => {
                warn!(dir = %dir.display(), error = %e, "compile cache disabled");
                self.cache = None;
            }
        }
        self
    }

    /// The cache folder in use, if the cache is on.
    pub fn cache_dir(&self) -> Option<&Path> {
        self.cache.as_deref().map(CompileCache::dir)
    }

    /// Plugins loaded from the compile cache since this host was made.
    pub fn cache_hits(&self) -> u64 {
        self.cache.as_ref().map_or(0, |c| c.hits())
    }

    /// Plugins compiled because the cache had no sound entry for them
    /// (absent, corrupt, or from another engine). 0 when the cache is off.
    pub fn cache_misses(&self) -> u64 {
        self.cache.as_ref().map_or(0, |c| c.misses())
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The set a run should use from start to finish.
    pub fn snapshot(&self) -> Arc<PluginSet> {
        self.current.read_unpoisoned().clone()
    }

    /// Compiles (or takes from the cache), type-checks and probes one
    /// component. It does not change the current set.
    pub async fn load_file(&self, path: &Path) -> Result<LoadedPlugin, PluginError> {
        let (bytes, sha) = read_component(path).await.map_err(|e| PluginError::Io {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        self.load_bytes(path, bytes, sha).await
    }

    /// Compilation takes tens of milliseconds of CPU per plugin (more in
    /// debug builds), so it runs on the blocking pool, never on a runtime
    /// worker that other runs need.
    pub(super) async fn load_bytes(
        &self,
        path: &Path,
        bytes: Vec<u8>,
        sha: [u8; 32],
    ) -> Result<LoadedPlugin, PluginError> {
        let engine = self.engine.clone();
        let cache = self.cache.clone();
        let file = path.to_path_buf();
        let (component, origin) = tokio::task::spawn_blocking(move || match cache {
            Some(cache) => cache.component(&engine, &bytes, &sha, &file),
            None => Component::new(&engine, &bytes).map(|c| (c, Origin::Compiled)),
        })
        .await
        .map_err(|e| PluginError::Invalid {
            path: path.to_path_buf(),
            message: format!("compilation panicked: {e}"),
        })?
        .map_err(|e| PluginError::Invalid {
            path: path.to_path_buf(),
            message: format!("not a valid WebAssembly component: {e:#}"),
        })?;
        let plugin = self.instantiate_checked(path, component).await?;
        let meta = plugin.meta();
        info!(
            name = %meta.name,
            version = %meta.version,
            kind = ?meta.kind,
            file = %path.display(),
            "plugin {} {} loaded ({})",
            meta.name,
            meta.version,
            origin.as_str()
        );
        Ok(plugin)
    }
}

/// Reads and hashes a plugin file on the blocking pool: files can be tens of
/// megabytes (an interpreter compiled to wasm) and hashing them is CPU work.
pub(super) async fn read_component(path: &Path) -> std::io::Result<(Vec<u8>, [u8; 32])> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || {
        use std::io::Read;
        let file = std::fs::File::open(&path)?;
        let len = file.metadata()?.len();
        if len > MAX_COMPONENT_BYTES {
            return Err(std::io::Error::other(format!(
                "{len} bytes is larger than the {MAX_COMPONENT_BYTES} bytes a plugin may be"
            )));
        }
        let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
        file.take(MAX_COMPONENT_BYTES + 1).read_to_end(&mut bytes)?;
        if bytes.len() as u64 > MAX_COMPONENT_BYTES {
            return Err(std::io::Error::other(format!(
                "larger than the {MAX_COMPONENT_BYTES} bytes a plugin may be"
            )));
        }
        let sha = sha256(&bytes);
        Ok((bytes, sha))
    })
    .await
    .map_err(std::io::Error::other)?
}
