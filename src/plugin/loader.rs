//! The loader: the engine, one linker per world and the compile cache, and
//! the one job of turning a component file into a checked plugin. It holds
//! no plugin set and knows no folder; which files to (re)load and what
//! serves is the [`Catalog`](super::catalog::Catalog)'s business, which
//! hands its files to the loader and gets plugins back.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::info;
use wasmtime::component::{Component, Linker};
use wasmtime::Engine;

use super::cache::{sha256, CompileCache, Origin};
use super::engine::{build_engine_with, EngineLimits};
use super::error::PluginError;
use super::probe;
use super::registry::LoadedPlugin;
use super::settings::PluginSettings;
use super::strategy::link_strategy;
use super::strategy_host::StrategyState;
use super::tool::link_tool;
use super::tool_host::ToolState;
use super::trust::{self, TrustError};

/// A plugin file larger than this is refused before it is read: no real
/// component comes near it, and reading it whole would let a stray file in
/// the folder exhaust memory.
pub const MAX_COMPONENT_BYTES: u64 = 256 << 20;

/// Compiles, links and probes components: bytes in, [`LoadedPlugin`] out.
/// Built once per process (the engine reserves the instance pool), shared by
/// every load; loading never changes what serves.
pub struct Loader {
    engine: Engine,
    strategy_linker: Linker<StrategyState>,
    tool_linker: Linker<ToolState>,
    cache: Option<Arc<CompileCache>>,
    settings: PluginSettings,
}

impl Loader {
    /// The engine sized by `limits`, with both worlds of every contract
    /// version linked; no compile cache until [`with_cache_dir`](Self::with_cache_dir).
    /// The default [`PluginSettings`].
    pub fn new(limits: EngineLimits) -> Result<Self, PluginError> {
        Self::with_settings(limits, PluginSettings::default())
    }

    /// [`new`](Self::new) with `[plugins]` settings: the engine's pool and
    /// every store of every plugin it loads follow them.
    pub fn with_settings(
        limits: EngineLimits,
        settings: PluginSettings,
    ) -> Result<Self, PluginError> {
        settings.check().map_err(PluginError::Engine)?;
        let engine = build_engine_with(limits, &settings)?;
        let link = |e: wasmtime::Error| PluginError::Engine(format!("cannot build linker: {e:#}"));
        let mut strategy_linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut strategy_linker).map_err(link)?;
        link_strategy(&mut strategy_linker).map_err(link)?;
        let mut tool_linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut tool_linker).map_err(link)?;
        // Every tool may import `wasi:http`; whether a request goes out is
        // the egress check's call, per request (`egress.rs`).
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut tool_linker).map_err(link)?;
        link_tool(&mut tool_linker).map_err(link)?;
        Ok(Loader {
            engine,
            strategy_linker,
            tool_linker,
            cache: None,
            settings,
        })
    }

    /// Keeps compiled plugins in `dir` (the daemon uses `<state_dir>/cache`).
    /// A folder that cannot be trusted (a link, owned by someone else, or
    /// writable by anyone but this user) is an error, not a silently
    /// disabled cache: it means someone may already have planted machine
    /// code there, which the operator must look at.
    pub fn with_cache_dir(mut self, dir: PathBuf) -> Result<Self, PluginError> {
        let cache = CompileCache::open(dir, &self.engine)?;
        self.cache = Some(Arc::new(cache));
        Ok(self)
    }

    /// The `[plugins]` settings every plugin this loader loads is held to.
    pub fn settings(&self) -> &PluginSettings {
        &self.settings
    }

    /// The cache folder in use, if the cache is on.
    pub fn cache_dir(&self) -> Option<&Path> {
        self.cache.as_deref().map(CompileCache::dir)
    }

    /// Plugins loaded from the compile cache since this loader was made.
    pub fn cache_hits(&self) -> u64 {
        self.cache.as_ref().map_or(0, |c| c.hits())
    }

    /// Plugins compiled because the cache had no sound entry for them
    /// (absent, corrupt, or from another engine). 0 when the cache is off.
    pub fn cache_misses(&self) -> u64 {
        self.cache.as_ref().map_or(0, |c| c.misses())
    }

    /// The process's one engine: every plugin is compiled for it, and every
    /// store a run makes belongs to it.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Compiles (or takes from the cache), type-checks and probes one
    /// component. It does not change what serves.
    pub async fn load_file(&self, path: &Path) -> Result<LoadedPlugin, PluginError> {
        let rules = ReadRules {
            follow_symlinks: true,
            check_files: false,
            as_user: None,
        };
        let (bytes, sha) = read_component(path, rules)
            .await
            .map_err(|e| e.into_plugin_error(path))?;
        self.load_bytes(path, bytes, sha).await
    }

    /// [`load_file`](Self::load_file) for bytes already read and hashed (the
    /// catalog hashes a file first to see whether it changed at all).
    /// Not public: `sha` must be the hash of `bytes`, since the compile
    /// cache files the artefact under it.
    pub(super) async fn load_bytes(
        &self,
        path: &Path,
        bytes: Vec<u8>,
        sha: [u8; 32],
    ) -> Result<LoadedPlugin, PluginError> {
        let compiled = self.compile_hashed(path, bytes, sha).await?;
        self.probe(path, &compiled).await
    }

    /// The first half of a load: compiles `bytes` (or takes them from the
    /// cache) without probing them, so that `agentd plugin check` can list
    /// a component's imports and exports even when its probe then fails,
    /// and time the two apart. `path` only names the component in errors.
    pub async fn compile(&self, path: &Path, bytes: Vec<u8>) -> Result<Compiled, PluginError> {
        let sha = sha256(&bytes);
        self.compile_hashed(path, bytes, sha).await
    }

    /// Compilation takes tens of milliseconds of CPU per plugin (seconds
    /// for an interpreter compiled to wasm, more in debug builds), so it
    /// runs on the blocking pool, never on a runtime worker that other runs
    /// need.
    async fn compile_hashed(
        &self,
        path: &Path,
        bytes: Vec<u8>,
        sha: [u8; 32],
    ) -> Result<Compiled, PluginError> {
        let engine = self.engine.clone();
        let cache = self.cache.clone();
        let file = path.to_path_buf();
        let started = Instant::now();
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
            message: compile_error(&e),
        })?;
        Ok(Compiled {
            component,
            from_cache: !matches!(origin, Origin::Compiled),
            origin: origin.as_str(),
            compile_time: started.elapsed(),
        })
    }

    /// The second half of a load: the world check and the `metadata()`
    /// probe of `probe.rs`, on a component this loader compiled. It does not
    /// change what serves.
    pub async fn probe(
        &self,
        path: &Path,
        compiled: &Compiled,
    ) -> Result<LoadedPlugin, PluginError> {
        let plugin = probe::check(
            &self.engine,
            &self.strategy_linker,
            &self.tool_linker,
            path,
            compiled.component.clone(),
            self.settings.memory_limit_bytes(),
        )
        .await?;
        let meta = plugin.meta();
        info!(
            name = %meta.name,
            version = %meta.version,
            kind = ?meta.kind,
            file = %path.display(),
            "plugin {} {} loaded ({})",
            meta.name,
            meta.version,
            compiled.origin
        );
        Ok(plugin)
    }
}

/// A component compiled for a [`Loader`]'s engine, not yet probed.
pub struct Compiled {
    component: Component,
    origin: &'static str,
    /// Whether it came from the compile cache rather than the compiler.
    pub from_cache: bool,
    /// Wall time of the compilation (or of the cache load).
    pub compile_time: Duration,
}

impl Compiled {
    /// What the component imports, by name (`wasi:cli/environment@0.2.0`,
    /// `agentd:plugin/sandbox@0.2.0`, ...), in the component's order.
    pub fn imports(&self, engine: &Engine) -> Vec<String> {
        self.component
            .component_type()
            .imports(engine)
            .map(|(name, _)| name.to_string())
            .collect()
    }

    /// What the component exports, by name, in the component's order.
    pub fn exports(&self, engine: &Engine) -> Vec<String> {
        self.component
            .component_type()
            .exports(engine)
            .map(|(name, _)| name.to_string())
            .collect()
    }
}

/// Why a component did not compile. The pool's per-component caps are
/// checked by wasmtime when a component is compiled (or deserialized), with
/// an error that names the count and the cap but not which setting it is:
/// say so, since the file is then valid wasm that this host refuses.
fn compile_error(e: &wasmtime::Error) -> String {
    let text = format!("{e:#}");
    if text.contains("pooling allocator") {
        format!(
            "refused by the per-component caps of the plugin pool (at most {} core instances, {} memories, {} tables, {} bytes of instance state): {text}",
            super::engine::MAX_CORE_INSTANCES_PER_COMPONENT,
            super::engine::MAX_MEMORIES_PER_COMPONENT,
            super::engine::MAX_TABLES_PER_COMPONENT,
            super::engine::MAX_COMPONENT_INSTANCE_SIZE,
        )
    } else {
        format!("not a valid WebAssembly component: {text}")
    }
}

/// How a plugin file may be read: the catalog's rules for its folder.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct ReadRules {
    /// Whether a symbolic link is followed; if not, it is refused unread.
    pub follow_symlinks: bool,
    /// Whether the opened file must be owned by this process's user or root
    /// and writable by no one else ([`trust::check_file`]). On for the
    /// daemon's folder, whose plugins every user's runs get; off for
    /// `run --local`, which loads a user's own folder as that user, where
    /// user-private groups make 0664 files the norm and the only one who can
    /// plant code is someone who could already run it as that user.
    pub check_files: bool,
    /// Whose view `check_files` takes: this process's user when `None`,
    /// else this uid's (the doctor, run by root, judging as the service's
    /// user).
    pub as_user: Option<u32>,
}

/// Why a plugin file was not read.
#[derive(Debug)]
pub(super) enum ReadError {
    /// It could not be opened or read: gone, a link not followed, too large.
    Io(std::io::Error),
    /// It was opened, but its owner or mode is not trusted, so it was not
    /// read; the error names the file and the fix.
    Untrusted(TrustError),
}

impl ReadError {
    /// The plugin error reported for `path`.
    pub(super) fn into_plugin_error(self, path: &Path) -> PluginError {
        match self {
            ReadError::Io(e) => PluginError::Io {
                path: path.to_path_buf(),
                message: e.to_string(),
            },
            ReadError::Untrusted(e) => PluginError::Untrusted(e),
        }
    }
}

impl From<std::io::Error> for ReadError {
    fn from(e: std::io::Error) -> Self {
        ReadError::Io(e)
    }
}

/// Reads and hashes a plugin file on the blocking pool: files can be tens of
/// megabytes (an interpreter compiled to wasm) and hashing them is CPU work.
/// Without `follow_symlinks` a link is refused (`O_NOFOLLOW`, so a link
/// swapped in after the folder was listed is refused too) with a message
/// saying how to allow links. With `check_files` the owner and mode are
/// checked on the opened descriptor (`fstat`), before a byte is read: the
/// file checked is the file read, whatever is renamed over the name meanwhile.
pub(super) async fn read_component(
    path: &Path,
    rules: ReadRules,
) -> Result<(Vec<u8>, [u8; 32]), ReadError> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || {
        use std::io::Read;
        use std::os::unix::fs::OpenOptionsExt;
        let mut options = std::fs::File::options();
        options.read(true);
        if !rules.follow_symlinks {
            options.custom_flags(libc::O_NOFOLLOW);
        }
        let file = options.open(&path).map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                std::io::Error::other(
                    "is a symbolic link, which is not followed \
                     (copy the component into the plugins folder, \
                     or set [daemon] follow_symlinks = true)",
                )
            } else {
                e
            }
        })?;
        let meta = file.metadata()?;
        if rules.check_files {
            let user = rules.as_user.unwrap_or_else(trust::euid);
            trust::check_file_as(&path, &meta, user).map_err(ReadError::Untrusted)?;
        }
        let len = meta.len();
        if len > MAX_COMPONENT_BYTES {
            return Err(std::io::Error::other(format!(
                "{len} bytes is larger than the {MAX_COMPONENT_BYTES} bytes a plugin may be"
            ))
            .into());
        }
        let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
        file.take(MAX_COMPONENT_BYTES + 1).read_to_end(&mut bytes)?;
        if bytes.len() as u64 > MAX_COMPONENT_BYTES {
            return Err(std::io::Error::other(format!(
                "larger than the {MAX_COMPONENT_BYTES} bytes a plugin may be"
            ))
            .into());
        }
        let sha = sha256(&bytes);
        Ok((bytes, sha))
    })
    .await
    .map_err(|e| ReadError::Io(std::io::Error::other(e)))?
}
