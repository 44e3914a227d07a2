//! `agentd serve`: the long-running service.
//!
//! Start-up order matters: history first (so runs a dead daemon left in
//! flight are marked `interrupted` before anyone can ask), then the sandbox
//! reaper, plugins, and only then the socket and `READY=1`, so a client that
//! connects finds everything loaded.

mod artifacts;
mod body;
mod budget;
mod error;
mod event_bus;
mod event_log;
mod heap_trim;
pub mod history;
mod listener;
mod mcp_server;
mod mcp_status;
mod metrics;
mod paging;
mod peer;
mod plugin_events;
mod plugin_install;
mod resume;
mod routes;
mod run_api;
mod runs;
mod server;
pub mod settings;
mod state;
mod systemd;
mod user_slots;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::signal::unix::{signal, Signal, SignalKind};
use tracing::{error, info, warn};

use crate::config::{default_config_path, default_socket_path, Config};
use crate::plugin::{EngineLimits, PluginHost};
use crate::sandbox::fleet::Fleet;
use crate::sandbox::{NoSandbox, SandboxProvider};
use crate::time::now_ms;
use history::History;
use peer::{resolve_group, AccessPolicy};
use state::{Daemon, DaemonParts};

/// Exit status when the configuration is unusable (as for the CLI).
const EXIT_CONFIG: i32 = 2;

/// How often old runs are pruned while the daemon runs.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// Runs the daemon until SIGTERM/SIGINT; returns the process exit status.
/// `socket` (the command line's `--socket`) wins over the configuration.
pub async fn serve(config_path: Option<PathBuf>, socket: Option<PathBuf>) -> i32 {
    // Before anything records: the handles the layers below make from now
    // on are the exporter's. A failure leaves them no-ops and `/metrics`
    // answering 503; the daemon itself is unaffected.
    if let Err(e) = metrics::install() {
        warn!(error = %e, "metrics disabled");
    }
    let config_path = config_path.or_else(default_config_path);
    let config = match Config::load_with_secrets(config_path.as_deref()) {
        Ok(mut c) => {
            if socket.is_some() {
                c.daemon.socket = socket;
            }
            c
        }
        Err(e) => {
            error!("{e}");
            eprintln!("agentd: {e}");
            return EXIT_CONFIG;
        }
    };
    match start(config, config_path).await {
        Ok(code) => code,
        Err(e) => {
            error!("{e:#}");
            eprintln!("agentd: {e:#}");
            1
        }
    }
}

async fn start(config: Config, config_path: Option<PathBuf>) -> anyhow::Result<i32> {
    let mut signals = Signals::install()?;
    let group = match &config.daemon.socket_group {
        Some(name) => Some(resolve_group(name).map_err(anyhow::Error::msg)?),
        None => None,
    };
    let history = History::open(&config.daemon.state_dir)?;
    // On a full disk this cannot commit: the daemon still starts (a restart
    // loop would hit systemd's start limit and leave the unit down), serves
    // the history, and refuses new runs with the reason until the step,
    // still queued, commits.
    if let Err(e) = history.interrupt_unfinished(now_ms()).await {
        error!(error = %e, "serving the run history read-only for now");
    }
    let artifacts = config.daemon.state_dir.join("artifacts");
    prune(&history, &artifacts, config.daemon.history_days).await;

    let (fleet, docker_error) = match Fleet::new(&config.sandbox) {
        Ok(f) => (Some(Arc::new(f.start_probes())), None),
        Err(e) => {
            warn!(error = %e, "sandbox disabled: tools that need one will fail");
            (None, Some(e.to_string()))
        }
    };
    if let Some(fleet) = &fleet {
        reap(fleet).await;
        // After the reap, which would take the pool's containers for a
        // dead run's; filled in the background, so start-up never waits
        // for the engine.
        fleet.start_pools();
    }
    let sandboxes: Arc<dyn SandboxProvider> = match &fleet {
        Some(p) => p.clone(),
        None => Arc::new(NoSandbox::new(
            docker_error.clone().unwrap_or_else(|| "no sandbox".into()),
        )),
    };

    let bus = Arc::new(event_bus::EventBus::default());
    // A compile cache or plugins folder that others can write to refuses
    // start-up: code may already have been planted there, and the operator
    // must look before agentd runs it (the message says how to fix it).
    // Each plugin file is checked too: one that others can write is
    // `failed` (naming the file and the fix), the rest serve.
    let plugins = Arc::new(
        PluginHost::with_settings(
            EngineLimits {
                max_concurrent_runs: config.daemon.max_concurrent_runs,
            },
            config.plugins,
        )?
        .with_cache_dir(config.daemon.state_dir.join("cache"))?
        .with_follow_symlinks(config.daemon.follow_symlinks)
        .with_file_checks(true),
    );
    let plugins_dir = config.daemon.plugins_dir.clone();
    load_plugins(&plugins, &plugins_dir, &bus).await?;

    let socket_path = config
        .daemon
        .socket
        .clone()
        .unwrap_or_else(default_socket_path);
    let bound = listener::listen(&socket_path, group)?;
    let body_limits = body::BodyLimits {
        max_bytes: config.daemon.max_request_bytes,
        timeout: config.daemon.body_timeout,
        key: "max_request_bytes",
    };
    let plugin_body_limits = body::BodyLimits {
        max_bytes: config.daemon.max_plugin_bytes,
        timeout: config.daemon.body_timeout,
        key: "max_plugin_bytes",
    };
    let limits = server::ServerLimits {
        max_connections: config.daemon.max_connections,
        max_connections_per_user: config.daemon.max_connections_per_user,
        header_timeout: config.daemon.header_timeout,
        write_timeout: config.daemon.write_timeout,
    };
    let grace = config.daemon.shutdown_grace;
    let metrics_listen = config.daemon.metrics_listen;
    let history_days = config.daemon.history_days;
    // Each server comes up in the background; a run that needs one still
    // starting waits for it (at most its start_timeout).
    let mcp = crate::mcp::McpClients::start(config.mcp.clone());
    let daemon = Arc::new(Daemon::new(DaemonParts {
        config,
        config_path,
        plugins,
        fleet: fleet.clone(),
        sandboxes,
        docker_error,
        history: history.clone(),
        socket: bound.path.clone(),
        policy: AccessPolicy::new(group),
        bus: bus.clone(),
        mcp,
    }));
    // Before the socket serves: the first run is checked against today's
    // count as the history has it.
    if let Err(e) = daemon.budgets.load(&history).await {
        error!(error = %e, "cannot read today's token use from the history; the daily budgets count from zero");
    }
    daemon.warn_missing_plugins();
    let _watcher = watch_plugins(plugins_dir, &daemon);

    // Cancelled at shutdown once the runs have ended, so MCP sessions
    // (and their sandboxes) close before the last reap.
    let mcp_stop = tokio_util::sync::CancellationToken::new();
    let mcp = mcp_server::service(&daemon, mcp_stop.clone());
    let app = routes::router(daemon.clone(), body_limits, plugin_body_limits, mcp);
    let stop = tokio_util::sync::CancellationToken::new();
    if let Some(addr) = metrics_listen {
        // Before the socket serves: an address that cannot be bound stops
        // start-up, naming the key, before any client got an answer.
        metrics::listen(addr, daemon.clone(), limits.clone(), stop.clone()).await?;
    }
    let server = tokio::spawn(server::serve(
        bound.listener,
        app,
        daemon.policy.clone(),
        limits,
        stop.clone(),
    ));
    info!(socket = %bound.path.display(), "agentd listening");
    systemd::ready(&status_line(&daemon));
    systemd::spawn_watchdog();
    spawn_status_updates(daemon.clone());
    spawn_pruning(history.clone(), artifacts.clone(), history_days);
    // Runs' memory goes back to the system after they end (see heap_trim).
    if heap_trim::SUPPORTED {
        heap_trim::spawn(
            bus.subscribe_run_ends(),
            heap_trim::TRIM_EVERY,
            stop.clone(),
            heap_trim::trim,
        );
    }

    signals.wait_for_termination(&daemon).await;

    systemd::stopping();
    info!(grace = ?grace, "shutting down");
    daemon.runs.shut_down(grace).await;
    // The runs are over: their MCP servers can go (stdio ones are killed
    // with their process groups if they do not stop in time).
    daemon.mcp.stop(crate::mcp::clients::STOP_WITHIN).await;
    mcp_stop.cancel();
    if let Some(fleet) = &fleet {
        // The pools first, so no refill starts after the reap.
        fleet.drain_pools().await;
        // Every run has removed its own sandbox; this catches a container
        // whose removal failed, so none outlives the daemon.
        reap(fleet).await;
    }
    stop.cancel();
    // Followers' streams have ended with their runs; idle connections get a
    // moment to close.
    if tokio::time::timeout(Duration::from_secs(2), server)
        .await
        .is_err()
    {
        warn!("connections still open at exit");
    }
    if bound.owned {
        let _ = std::fs::remove_file(&bound.path);
    }
    if let Err(e) = history.flush().await {
        warn!(error = %e, "exiting with run history writes not committed");
    }
    info!("agentd stopped");
    Ok(0)
}

/// Fails only when the folder is not trusted; a folder that cannot be read
/// is logged and the daemon serves without plugins until it is fixed.
async fn load_plugins(
    plugins: &PluginHost,
    dir: &Path,
    bus: &event_bus::EventBus,
) -> Result<(), crate::plugin::PluginError> {
    // An empty (or missing) folder gets the plugins shipped beside the
    // binary, so a fresh install runs its bundled agents; the log says
    // which happened. A folder with any plugin is the operator's and is left
    // as it is.
    use crate::plugin::bundle::{seed_empty_dir, Bundle, Seeded};
    // Nothing is written into a folder the daemon would refuse to load from.
    if dir.exists() {
        crate::plugin::trust::check_dir("plugins folder", dir)?;
    }
    match seed_empty_dir(dir, Bundle::find().as_ref()) {
        Ok(Seeded::HadPlugins) => {}
        Ok(Seeded::Installed { from, count }) => info!(
            dir = %dir.display(), from = %from.display(), count,
            "the plugins folder was empty: installed the bundled plugins"
        ),
        Ok(Seeded::NoBundle { looked_in }) => warn!(
            dir = %dir.display(),
            looked_in = %looked_in.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "),
            "the plugins folder is empty and no bundled plugins were found: \
             install them with scripts/install.sh, or add plugins with `agentd plugin install`"
        ),
        Err(e) => warn!(dir = %dir.display(), error = %e,
            "cannot install the bundled plugins into the plugins folder"),
    }
    // A missing folder is created so that the watcher has something to
    // watch and a user can drop plugins in without restarting.
    if let Err(e) = crate::plugin::bundle::create_private_dir(dir) {
        warn!(dir = %dir.display(), error = %e, "cannot create the plugins folder");
    }
    if dir.exists() {
        crate::plugin::trust::check_dir("plugins folder", dir)?;
    }
    match plugins.try_rescan(dir).await {
        Ok(changes) => {
            for change in &changes {
                plugin_events::report(bus, change);
            }
            let snapshot = plugins.snapshot();
            info!(
                loaded = snapshot.strategies.len() + snapshot.tools.len(),
                from_cache = plugins.cache_hits(),
                compiled = plugins.cache_misses(),
                dir = %dir.display(),
                "plugins ready"
            );
        }
        // The daemon still serves its history and status; runs fail with
        // "plugin not loaded" until the folder is fixed.
        Err(e) => error!(dir = %dir.display(), error = %e, "cannot read the plugins folder"),
    }
    Ok(())
}

/// Keeps the plugin set in line with the folder. Without a watcher (an
/// inotify limit reached, say) the daemon still works and
/// `POST /v1/plugins/reload` rescans on demand.
fn watch_plugins(dir: PathBuf, daemon: &Arc<Daemon>) -> Option<crate::plugin::PluginWatcher> {
    let bus = daemon.bus.clone();
    let d = Arc::downgrade(daemon);
    let on_change = Arc::new(move |change: &crate::plugin::PluginChange| {
        plugin_events::report(&bus, change);
        if let Some(d) = d.upgrade() {
            d.warn_missing_plugins();
        }
    });
    match crate::plugin::watch(daemon.plugins.clone(), dir.clone(), on_change) {
        Ok(w) => Some(w),
        Err(e) => {
            warn!(dir = %dir.display(), error = %e, "not watching the plugins folder; use POST /v1/plugins/reload");
            None
        }
    }
}

/// Removes containers of agentd processes that are gone (a daemon killed
/// with -9 leaves its runs' containers behind) and of our own runs that are
/// no longer live.
/// Per engine, all at once, each bounded: a down engine is reaped by the
/// next start-up or shutdown that reaches it.
async fn reap(fleet: &Fleet) {
    for (engine, result) in fleet.reap_orphans(&[], Duration::from_secs(15)).await {
        match result {
            Ok(0) => {}
            Ok(n) => info!(engine = %engine, removed = n, "removed orphaned sandbox containers"),
            Err(e) => warn!(engine = %engine, error = %e, "cannot reap orphaned sandboxes"),
        }
    }
}

/// Prunes the runs older than `days` and then the kept files of every run
/// the history no longer has (`artifacts`: `<state_dir>/artifacts`).
async fn prune(history: &History, artifacts: &std::path::Path, days: u32) {
    if days == 0 {
        return;
    }
    let cutoff = now_ms() - i64::from(days) * 86_400_000;
    match history.prune(cutoff).await {
        Ok(0) => {}
        Ok(n) => info!(runs = n, days, "pruned old runs"),
        Err(e) => warn!(error = %e, "cannot prune old runs"),
    }
    match artifacts::prune(artifacts, history).await {
        0 => {}
        n => info!(runs = n, "removed the kept files of pruned runs"),
    }
}

fn spawn_pruning(history: History, artifacts: std::path::PathBuf, days: u32) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(PRUNE_EVERY);
        tick.tick().await;
        loop {
            tick.tick().await;
            prune(&history, &artifacts, days).await;
        }
    });
}

fn status_line(daemon: &Daemon) -> String {
    let c = daemon.runs.counts();
    format!(
        "{} runs active ({} waiting for a person), {} queued",
        c.active, c.waiting, c.queued
    )
}

/// systemd's `STATUS=`, refreshed when it changes.
fn spawn_status_updates(daemon: Arc<Daemon>) {
    tokio::spawn(async move {
        let mut last = status_line(&daemon);
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            let now = status_line(&daemon);
            if now != last {
                systemd::status(&now);
                last = now;
            }
        }
    });
}

/// The signals the daemon handles, installed before anything else starts:
/// a SIGTERM that arrives during start-up must still mean a clean shutdown,
/// not the default action (death without removing sandboxes).
struct Signals {
    term: Signal,
    int: Signal,
    hup: Signal,
}

impl Signals {
    fn install() -> anyhow::Result<Self> {
        let install =
            |kind| signal(kind).map_err(|e| anyhow::anyhow!("cannot install signal handlers: {e}"));
        Ok(Signals {
            term: install(SignalKind::terminate())?,
            int: install(SignalKind::interrupt())?,
            hup: install(SignalKind::hangup())?,
        })
    }

    /// Returns on SIGTERM or SIGINT; handles SIGHUP (configuration reload)
    /// in the meantime.
    async fn wait_for_termination(&mut self, daemon: &Daemon) {
        loop {
            tokio::select! {
                _ = self.term.recv() => return,
                _ = self.int.recv() => return,
                _ = self.hup.recv() => reload(daemon),
            }
        }
    }
}

/// SIGHUP: agents, LLM settings, plugin grants and MCP servers come from the file again. A file that
/// does not load is refused whole and the running configuration kept.
fn reload(daemon: &Daemon) {
    systemd::reloading();
    let Some(path) = daemon.config_path.as_deref() else {
        info!("SIGHUP: no configuration file to reload (running on defaults)");
        systemd::ready(&status_line(daemon));
        return;
    };
    match Config::load_with_secrets(Some(path)) {
        Ok(mut config) => {
            let old = daemon.generation();
            // The socket, folders and limits are bound at start-up;
            // taking them from the new file would make the status and the
            // running daemon disagree.
            if config.daemon != old.config.daemon
                || config.plugins != old.config.plugins
                || config.mcp_server != old.config.mcp_server
            {
                warn!("SIGHUP: changes to [daemon], [mcp_server] and [plugins] memory_limit take effect at the next restart; agents, [llm], [sandbox], [mcp.<server>] and the grants of [plugins.<name>] are reloaded now");
            }
            config.daemon = old.config.daemon.clone();
            config.mcp_server = old.config.mcp_server.clone();
            config.plugins = old.config.plugins;
            // `[sandbox]` applies to runs started from now on; runs under
            // way keep their containers, and the warm pool is remade.
            let mut sandbox_changed = config.sandbox != old.config.sandbox;
            if sandbox_changed {
                match &daemon.fleet {
                    None => {
                        warn!("SIGHUP: the sandbox was disabled at start-up; changes to [sandbox] take effect at the next restart");
                        sandbox_changed = false;
                    }
                    Some(fleet) if !fleet.same_engines(&config.sandbox) => {
                        warn!("SIGHUP: a change to [[sandbox.engines]] takes effect at the next restart; [sandbox] is kept as it runs");
                        sandbox_changed = false;
                    }
                    Some(_) => {
                        if let Err(e) =
                            crate::sandbox::docker::DockerSandboxProvider::check(&config.sandbox)
                        {
                            error!(error = %e, "configuration reload refused; keeping the running configuration");
                            systemd::ready(&status_line(daemon));
                            return;
                        }
                    }
                }
                if !sandbox_changed {
                    config.sandbox = old.config.sandbox.clone();
                }
            }
            if let Err(e) = config
                .plugin_grants
                .check_memory_limits(config.plugins.memory_limit)
            {
                error!(error = %e, "configuration reload refused; keeping the running configuration");
                systemd::ready(&status_line(daemon));
                return;
            }
            if let (Some(fleet), true) = (&daemon.fleet, sandbox_changed) {
                if let Err(e) = fleet.reconfigure(&config.sandbox) {
                    error!(error = %e, "configuration reload refused; keeping the running configuration");
                    systemd::ready(&status_line(daemon));
                    return;
                }
                info!("[sandbox] changed: new runs use the new settings; the warm pool is remade");
            }
            daemon.swap_config(config);
            info!(file = %path.display(), "configuration reloaded");
            daemon.warn_missing_plugins();
        }
        Err(e) => {
            error!(error = %e, "configuration reload refused; keeping the running configuration")
        }
    }
    systemd::ready(&status_line(daemon));
}
