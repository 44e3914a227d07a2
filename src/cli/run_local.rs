//! `agentd run --local` and `agentd plugins --local`: the agent core in this
//! process, with no daemon.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::local_record::LocalRecord;
use super::{exit, progress, PluginsArgs, RunArgs};
use crate::agent::{Agent, RunOptions, Runtime};
use crate::config::{default_config_path, Config};
use crate::llm::LlmClient;
use crate::plugin::bundle::{folder_state, Bundle, FolderState};
use crate::plugin::{EngineLimits, PluginHost};
use crate::sandbox::docker::DockerSandboxProvider;
use crate::sandbox::{NoSandbox, SandboxProvider};

fn fail(message: impl std::fmt::Display) -> i32 {
    eprintln!("agentd: {message}");
    exit::USAGE
}

fn load_config(path: Option<&Path>) -> Result<Config, i32> {
    let path = path.map(Path::to_path_buf).or_else(default_config_path);
    Config::load_with_secrets(path.as_deref()).map_err(fail)
}

async fn load_plugins(config: &Config) -> Result<Arc<PluginHost>, i32> {
    let host = PluginHost::with_settings(
        EngineLimits {
            max_concurrent_runs: 1,
        },
        config.plugins,
    )
    .map_err(fail)?;
    let dir = plugins_source(&config.daemon.plugins_dir)?;
    let report = host.load_dir(&dir).await.map_err(|e| {
        fail(format!(
            "cannot read the plugins folder: {e} (set [daemon] plugins_dir, or install the bundled plugins with scripts/install.sh)"
        ))
    })?;
    for (file, error) in &report.failed {
        eprintln!(
            "agentd: warning: plugin {} not loaded: {error}",
            file.display()
        );
    }
    Ok(Arc::new(host))
}

/// The configured plugins folder, or the bundle beside the binary when the
/// folder is missing or holds no component: a fresh install runs its
/// bundled agents without a daemon having filled the folder first. Nothing
/// is written: a local run leaves the folder to the daemon.
fn plugins_source(configured: &Path) -> Result<PathBuf, i32> {
    // Unreadable: loading reports it with the folder's name.
    let state = folder_state(configured).unwrap_or(FolderState::HasPlugins);
    if state == FolderState::HasPlugins {
        return Ok(configured.to_path_buf());
    }
    match Bundle::find() {
        Some(bundle) => {
            eprintln!(
                "agentd: no plugins in {}: using the bundled plugins in {}",
                configured.display(),
                bundle.dir().display()
            );
            Ok(bundle.dir().to_path_buf())
        }
        None => Err(fail(format!(
            "no plugins in {} and no bundled plugins beside the binary (looked in {}): \
             install them with scripts/install.sh, or set [daemon] plugins_dir",
            configured.display(),
            Bundle::candidates()
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

pub async fn run(args: RunArgs) -> i32 {
    let config = match load_config(args.config.as_deref()) {
        Ok(c) => c,
        Err(code) => return code,
    };
    // Refused as the daemon refuses it, so a script sees one behaviour.
    if args.request.trim().is_empty() {
        return fail("the request must not be empty");
    }
    let Some(agent_config) = config.agent(&args.agent).cloned() else {
        let known: Vec<_> = config.agents.keys().cloned().collect();
        return fail(format!(
            "unknown agent `{}` (known: {})",
            args.agent,
            known.join(", ")
        ));
    };
    if let Err(e) = config.llm.check_api_key(&args.agent) {
        return fail(e);
    }
    let llm = match LlmClient::new(config.llm.for_agent(&args.agent)) {
        Ok(l) => l,
        Err(e) => return fail(e),
    };
    let mut files = Vec::new();
    match super::files::input_files(&args.files) {
        Ok(given) => {
            for (path, content) in given {
                let made = content
                    .bytes()
                    .and_then(|bytes| crate::agent::InputFile::new(&path, bytes));
                match made {
                    Ok(file) => files.push(file),
                    Err(e) => return fail(format!("--file {path}: {e}")),
                }
            }
        }
        Err(e) => return fail(e),
    }
    let run_id = uuid::Uuid::new_v4().simple().to_string();
    let local = LocalRecord::new(&run_id, &agent_config.name, &args.request);
    let plugins = match load_plugins(&config).await {
        Ok(p) => p,
        Err(code) => return code,
    };
    // A bad [sandbox] section is reported, but runs that never touch a
    // sandbox still work; tools that do get the reason.
    let docker = match DockerSandboxProvider::new(&config.sandbox) {
        Ok(p) => Some(Arc::new(p)),
        Err(e) => {
            eprintln!("agentd: warning: {e}");
            None
        }
    };
    let sandboxes: Arc<dyn SandboxProvider> = match &docker {
        Some(p) => {
            reap_in_background(p.clone(), run_id.clone());
            p.clone()
        }
        None => Arc::new(NoSandbox::new("the [sandbox] configuration is invalid")),
    };
    // Only the MCP servers this agent names are started, for this one run.
    let mut mcp = config.mcp.clone();
    mcp.servers.retain(|name, _| {
        agent_config
            .tools
            .iter()
            .any(|t| crate::mcp::names::parse_entry(t).is_ok_and(|s| s.server == name.as_str()))
    });
    let mcp = crate::mcp::McpClients::start(mcp);
    let runtime = Arc::new(Runtime {
        plugins,
        sandboxes,
        step_timeout: config.daemon.step_timeout,
        grants: Arc::new(config.plugin_grants.clone()),
        limits: config.daemon.run_limits,
        tool_provider: mcp.clone(),
    });
    let agent = Agent::new(agent_config, llm, runtime);
    let cancel = CancellationToken::new();
    watch_signals(cancel.clone());
    let opts = RunOptions {
        run_id: Some(run_id),
        cancel,
        events: local.event_sink(Arc::new(progress::print_event)),
        messages: Some(local.message_sink()),
        // Nobody answers a local run's questions: they fail at once and
        // calls that need approval are denied (the daemon's `agentd run`
        // asks on the terminal).
        human: None,
        files,
        ..RunOptions::default()
    };
    local.start();
    let record = match agent.run(&args.request, opts).await {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    drop(agent);
    mcp.stop(crate::mcp::clients::STOP_WITHIN).await;
    // After the run, too: a container whose creation a cancel interrupted
    // is ours and no longer live.
    if let Some(p) = docker {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), p.reap_orphans(&[])).await;
    }
    if args.json {
        // The daemon's record, not the agent's: one shape with or without
        // `--local`, and the whole transcript.
        let mut view = local.finish(&record);
        // At the prices the daemon would cost it at (`[llm] input_price`...).
        view.summary.cost = config.llm.price_for(&args.agent).cost(view.summary.usage);
        match serde_json::to_string_pretty(&view) {
            Ok(s) => println!("{s}"),
            Err(e) => return fail(format!("cannot encode the run record: {e}")),
        }
    } else {
        println!("{}", super::sanitize::terminal_safe(&record.result));
    }
    exit::for_outcome(record.outcome)
}

/// SIGINT or SIGTERM cancels the run, which then removes its sandbox and
/// exits 5; a second signal exits at once.
fn watch_signals(cancel: CancellationToken) {
    use tokio::signal::unix::{signal, SignalKind};
    tokio::spawn(async move {
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            tracing::warn!("cannot watch signals: Ctrl-C will not cancel cleanly");
            return;
        };
        for round in 0..2 {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            if round == 0 {
                eprintln!("agentd: cancelling the run (again to quit at once)");
                cancel.cancel();
            } else {
                std::process::exit(130);
            }
        }
    });
}

/// Removes containers left behind by agentd processes that died, without
/// delaying the run; our own run is named so it is never taken for one.
fn reap_in_background(provider: Arc<DockerSandboxProvider>, run_id: String) {
    tokio::spawn(async move {
        let reap = provider.reap_orphans(std::slice::from_ref(&run_id));
        match tokio::time::timeout(std::time::Duration::from_secs(10), reap).await {
            Ok(Ok(n)) if n > 0 => {
                tracing::info!(removed = n, "removed orphaned sandbox containers")
            }
            Ok(Ok(_)) => {}
            // The engine being down is reported by the run that needs it.
            Ok(Err(e)) => tracing::debug!(error = %e, "orphan reaping skipped"),
            Err(_) => tracing::debug!("orphan reaping timed out"),
        }
    });
}

pub async fn plugins(args: PluginsArgs) -> i32 {
    let config = match load_config(args.config.as_deref()) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let plugins = match load_plugins(&config).await {
        Ok(p) => p,
        Err(code) => return code,
    };
    let metas = plugins.snapshot().metas();
    if args.json {
        match serde_json::to_string_pretty(&metas) {
            Ok(s) => println!("{s}"),
            Err(e) => return fail(e),
        }
    } else {
        println!("{:<20} {:<9} {:<10} FILE", "NAME", "KIND", "VERSION");
        for m in metas {
            let kind = match m.kind {
                crate::plugin::PluginKind::Strategy => "strategy",
                crate::plugin::PluginKind::Tool => "tool",
            };
            println!(
                "{:<20} {:<9} {:<10} {}",
                m.name,
                kind,
                m.version,
                m.file.display()
            );
        }
    }
    0
}
