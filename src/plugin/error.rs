//! Why a plugin, the engine or the folder watch could not be set up. In its
//! own file, below everything else in `plugin`, so that every part can
//! return it without depending on the module root.

use std::path::PathBuf;

/// Each variant that concerns a file names it, so the message alone says
/// which plugin file to look at.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PluginError {
    /// The engine or a linker could not be built, so no plugin can load; for
    /// the engine it is usually the instance pool, and the message then says
    /// to lower `[daemon] max_concurrent_runs`.
    #[error("plugin engine: {0}")]
    Engine(String),
    /// A plugin file, or the plugins folder itself, could not be read.
    #[error("{}: {message}", path.display())]
    Io {
        /// The file or folder that could not be read.
        path: PathBuf,
        /// The I/O error, as text.
        message: String,
    },
    /// A file was read but is no plugin this host can serve: not a
    /// component, neither world in a known contract version, or a probe of
    /// its metadata that failed or was refused.
    #[error("{}: {message}", path.display())]
    Invalid {
        /// The plugin file.
        path: PathBuf,
        /// What is wrong with it, for the person who built it.
        message: String,
    },
    /// A file loads, but another file already serves a plugin of the same
    /// kind and name; the earlier one keeps serving.
    #[error("{}: two plugins are named `{name}`; the one from {} is kept", path.display(), earlier.display())]
    Conflict {
        /// The file that lost.
        path: PathBuf,
        /// The plugin name both files offer.
        name: String,
        /// The file that serves the name and keeps it.
        earlier: PathBuf,
    },
    /// The plugins folder could not be watched (no tokio runtime, or the OS
    /// watcher failed); the plugins already loaded stay.
    #[error("{}: {message}", path.display())]
    Watch {
        /// The folder that was to be watched.
        path: PathBuf,
        /// Why watching failed.
        message: String,
    },
    /// A folder code would be loaded from is writable by others, owned by
    /// someone else, or a link; the message names it and the fix.
    #[error(transparent)]
    Untrusted(#[from] super::trust::TrustError),
    /// The compile cache cannot be used (its folder is untrusted or cannot
    /// be made); the message names the folder and the fix.
    #[error(transparent)]
    Cache(#[from] super::cache::CacheError),
}
