//! What every plugin store starts with, whichever world it serves: the
//! epoch settings that let a deadline or a cancel stop the guest, WASI with
//! nothing ambient, and the guest's log lines under its name.

use std::sync::Arc;

use wasmtime::{Engine, Store};
use wasmtime_wasi::WasiCtx;

use super::bindings::v0_2::strategy::agentd::plugin::logging::Level;
use super::stdio;

/// WASI for a plugin: no preopened directories, no environment, no
/// arguments, no network (the builder grants none of them unless asked);
/// stdout and stderr go to the log under the plugin's name.
pub(super) fn sandboxed_wasi(plugin: &Arc<str>) -> WasiCtx {
    WasiCtx::builder()
        .stdout(stdio::LogStream::new(plugin.clone(), "stdout"))
        .stderr(stdio::LogStream::new(plugin.clone(), "stderr"))
        .build()
}

/// Every store yields to the async runtime at each epoch tick, so a deadline
/// or a cancel can stop a guest that never returns.
pub(super) fn new_store<T: 'static>(engine: &Engine, data: T) -> Store<T> {
    let mut store = Store::new(engine, data);
    store.set_epoch_deadline(1);
    store.epoch_deadline_async_yield_and_update(1);
    store
}

/// A guest's `logging.log`, at its level, tagged with the plugin.
pub(super) fn plugin_log(plugin: &str, level: Level, message: &str) {
    match level {
        Level::Trace => tracing::trace!(target: "agentd::guest", plugin, "{message}"),
        Level::Debug => tracing::debug!(target: "agentd::guest", plugin, "{message}"),
        Level::Info => tracing::info!(target: "agentd::guest", plugin, "{message}"),
        Level::Warn => tracing::warn!(target: "agentd::guest", plugin, "{message}"),
        Level::Error => tracing::error!(target: "agentd::guest", plugin, "{message}"),
    }
}
