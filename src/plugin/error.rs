//! Why a plugin, the engine or the folder watch could not be set up. In its
//! own file, below everything else in `plugin`, so that every part can
//! return it without depending on the module root.

use std::path::PathBuf;

/// Each variant that concerns a file names it, so the message alone says
/// which plugin file to look at.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PluginError {
    #[error("plugin engine: {0}")]
    Engine(String),
    #[error("{}: {message}", path.display())]
    Io { path: PathBuf, message: String },
    #[error("{}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
    #[error("{}: two plugins are named `{name}`; the one from {} is kept", path.display(), earlier.display())]
    Conflict {
        path: PathBuf,
        name: String,
        earlier: PathBuf,
    },
    #[error("{}: {message}", path.display())]
    Watch { path: PathBuf, message: String },
    /// A folder code would be loaded from is writable by others, owned by
    /// someone else, or a link; the message names it and the fix.
    #[error(transparent)]
    Untrusted(#[from] super::trust::TrustError),
    #[error(transparent)]
    Cache(#[from] super::cache::CacheError),
}
