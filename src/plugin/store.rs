//! What every plugin store starts with, whichever world it serves: the
//! epoch settings that let a deadline or a cancel stop the guest, the
//! limits of `limits.rs` (memory, handles, bytes per call), WASI with
//! nothing ambient, and the guest's log lines under its name, within the
//! store's log rate (`log_rate.rs`).

use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime::{Engine, Store};
use wasmtime_wasi::WasiCtx;

use super::bindings::v0_2::strategy::agentd::plugin::logging::Level;
use super::grants::PluginGrant;
use super::limits::{
    capped_log_message, StoreLimiter, HOSTCALL_FUEL, MAX_COMPONENT_HANDLES, MAX_HOST_HANDLES,
};
use super::log_rate::LogRate;
use super::stdio;

/// The data of every plugin store gives access to its limiter, so
/// [`new_store`] can install it and a trap can be explained by it.
pub(super) trait Limited {
    /// The store's limiter (memory and tables of this plugin instance).
    fn limiter(&mut self) -> &mut StoreLimiter;
}

/// A resource table for a plugin's host handles, capped at
/// [`MAX_HOST_HANDLES`] (wasmtime's default is a million).
pub(super) fn capped_table() -> ResourceTable {
    let mut table = ResourceTable::new();
    table.set_max_capacity(MAX_HOST_HANDLES);
    table
}

/// WASI for a plugin: no preopened directories, no arguments, no sockets
/// and no name lookups (the builder grants none of them unless asked, and
/// nothing here asks), and an environment of only what `grant` gives
/// (`env` and `secrets`); stdout and stderr go to the log under the
/// plugin's name, within `rate`, the store's log rate. HTTP is not WASI
/// sockets: it goes through `wasi:http` and the egress check (`egress.rs`).
pub(super) fn sandboxed_wasi(rate: &Arc<LogRate>, grant: &PluginGrant) -> WasiCtx {
    WasiCtx::builder()
        // The builder's own defaults already refuse every address; saying
        // so here keeps a future default from granting sockets silently.
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .envs(&grant.environment())
        .stdout(stdio::LogStream::new(rate.clone(), "stdout"))
        .stderr(stdio::LogStream::new(rate.clone(), "stderr"))
        .build()
}

/// A plugin's `config.get`: the value the operator set for `key`.
pub(super) fn config_get(grant: &PluginGrant, key: &str) -> Option<String> {
    grant.config.get(key).cloned()
}

/// A plugin's `config.keys`: every key set, sorted.
pub(super) fn config_keys(grant: &PluginGrant) -> Vec<String> {
    grant.config.keys().cloned().collect()
}

/// Every store yields to the async runtime at each epoch tick, so a deadline
/// or a cancel can stop a guest that never returns; its memory and tables
/// are limited by the data's [`StoreLimiter`], and what one call may copy
/// out of the guest and the handles it may hold are capped.
pub(super) fn new_store<T: Limited + 'static>(engine: &Engine, data: T) -> Store<T> {
    let mut store = Store::new(engine, data);
    store.set_epoch_deadline(1);
    store.epoch_deadline_async_yield_and_update(1);
    store.limiter(|data| data.limiter() as &mut dyn wasmtime::ResourceLimiter);
    store.set_hostcall_fuel(HOSTCALL_FUEL);
    store.set_max_component_handles(MAX_COMPONENT_HANDLES);
    store
}

/// A guest's `logging.log`, at its level, tagged with the plugin, cut to
/// [`MAX_LOG_MESSAGE`](super::limits::MAX_LOG_MESSAGE) bytes; dropped (and
/// counted) past the store's log rate. A line the log filter leaves out
/// (debug lines, by default) takes nothing from the rate, so a plugin's
/// debug chatter never costs it the lines the operator does see.
pub(super) fn plugin_log(rate: &LogRate, level: Level, message: &str) {
    use tracing::Level as L;
    let shown = match level {
        Level::Trace => tracing::enabled!(target: "agentd::guest", L::TRACE),
        Level::Debug => tracing::enabled!(target: "agentd::guest", L::DEBUG),
        Level::Info => tracing::enabled!(target: "agentd::guest", L::INFO),
        Level::Warn => tracing::enabled!(target: "agentd::guest", L::WARN),
        Level::Error => tracing::enabled!(target: "agentd::guest", L::ERROR),
    };
    if !shown || !rate.admit() {
        return;
    }
    let plugin: &str = rate.plugin();
    let message = capped_log_message(message);
    match level {
        Level::Trace => tracing::trace!(target: "agentd::guest", plugin, "{message}"),
        Level::Debug => tracing::debug!(target: "agentd::guest", plugin, "{message}"),
        Level::Info => tracing::info!(target: "agentd::guest", plugin, "{message}"),
        Level::Warn => tracing::warn!(target: "agentd::guest", plugin, "{message}"),
        Level::Error => tracing::error!(target: "agentd::guest", plugin, "{message}"),
    }
}
