//! The WebAssembly plugin host: one engine, one linker per world, plugins
//! compiled once (or taken from the compile cache) and instantiated per run;
//! the plugins folder can be rescanned or watched, and the set is swapped
//! whole so runs keep the versions they started with.
//!
//! The host is two parts with one handle on top, named for what they do:
//! - [`Loader`] (`loader.rs`, with `probe.rs`): the engine, the linkers and
//!   the compile cache; a component's bytes in, a checked [`LoadedPlugin`]
//!   out. It keeps no state about which plugins serve.
//! - [`Catalog`] (`catalog.rs`): the folder's files, who serves each name,
//!   the current [`PluginSet`] and per-file statuses; rescans and swaps. It
//!   is given the loader for each scan and never looks inside it.
//! - [`PluginHost`] (`host.rs`): owns one of each and forwards to them, so
//!   the daemon and `run --local` hold a single `Arc<PluginHost>`.

pub mod bindings;
mod cache;
mod catalog;
pub mod clock;
mod compat_v0_1;
mod convert;
pub mod engine;
mod host;
mod loader;
mod probe;
pub mod registry;
pub mod run_host;
pub mod session;
mod stdio;
pub mod strategy_host;
pub mod tool_host;
pub mod watch;
pub mod world;

use std::path::PathBuf;
use std::sync::Arc;

use wasmtime::{Engine, Store};
use wasmtime_wasi::WasiCtx;

use bindings::v0_2::strategy::agentd::plugin::logging::Level;
pub use bindings::Contract;
pub use catalog::{
    is_plugin_file_name, Catalog, ChangeKind, FileStatus, PluginChange, PluginStatus,
};
pub use engine::EngineLimits;
pub use host::PluginHost;
pub use loader::{Loader, MAX_COMPONENT_BYTES};
pub use registry::{LoadReport, LoadedPlugin, PluginKind, PluginMeta, PluginSet, StrategyDefaults};
pub use watch::{watch, PluginWatcher, QUIET as WATCH_QUIET};

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
}

/// WASI for a plugin: no preopened directories, no environment, no
/// arguments, no network (the builder grants none of them unless asked);
/// stdout and stderr go to the log under the plugin's name.
fn sandboxed_wasi(plugin: &Arc<str>) -> WasiCtx {
    WasiCtx::builder()
        .stdout(stdio::LogStream::new(plugin.clone(), "stdout"))
        .stderr(stdio::LogStream::new(plugin.clone(), "stderr"))
        .build()
}

/// Every store yields to the async runtime at each epoch tick, so a deadline
/// or a cancel can stop a guest that never returns.
pub(crate) fn new_store<T: 'static>(engine: &Engine, data: T) -> Store<T> {
    let mut store = Store::new(engine, data);
    store.set_epoch_deadline(1);
    store.epoch_deadline_async_yield_and_update(1);
    store
}

fn plugin_log(plugin: &str, level: Level, message: &str) {
    match level {
        Level::Trace => tracing::trace!(target: "agentd::guest", plugin, "{message}"),
        Level::Debug => tracing::debug!(target: "agentd::guest", plugin, "{message}"),
        Level::Info => tracing::info!(target: "agentd::guest", plugin, "{message}"),
        Level::Warn => tracing::warn!(target: "agentd::guest", plugin, "{message}"),
        Level::Error => tracing::error!(target: "agentd::guest", plugin, "{message}"),
    }
}
