//! `agentd run --local` and `agentd plugins --local`: the agent core in this
//! process, with no daemon.

use std::path::Path;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{progress, PluginsArgs, RunArgs, EXIT_USAGE};
use crate::agent::{Agent, RunOptions, Runtime};
use crate::config::{default_config_path, Config};
use crate::llm::LlmClient;
use crate::plugin::{EngineLimits, PluginHost};
use crate::sandbox::docker::DockerSandboxProvider;
use crate::sandbox::{NoSandbox, SandboxProvider};

fn fail(message: impl std::fmt::Display) -> i32 {
    eprintln!("agentd: {message}");
    EXIT_USAGE
}

fn load_config(path: Option<&Path>) -> Result<Config, i32> {
    let path = path.map(Path::to_path_buf).or_else(default_config_path);
    Config::load(path.as_deref()).map_err(fail)
}

async fn load_plugins(config: &Config) -> Result<Arc<PluginHost>, i32> {
    let host = PluginHost::new(EngineLimits {
        max_concurrent_runs: 1,
    })
    .map_err(fail)?;
    let dir = &config.daemon.plugins_dir;
    let report = host.load_dir(dir).await.map_err(|e| {
        fail(format!(
            "cannot read the plugins folder: {e} (set [daemon] plugins_dir, or build and install the bundled plugins with scripts/build-plugins.sh --install {})",
            dir.display()
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

pub async fn run(args: RunArgs) -> i32 {
    if !args.local {
        return fail("only `agentd run --local` is available in this version: the daemon is not part of it yet");
    }
    let config = match load_config(args.config.as_deref()) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let Some(agent_config) = config.agent(&args.agent).cloned() else {
        let known: Vec<_> = config.agents.keys().cloned().collect();
        return fail(format!(
            "unknown agent `{}` (known: {})",
            args.agent,
            known.join(", ")
        ));
    };
    let llm = match LlmClient::new(config.llm.for_agent(&args.agent)) {
        Ok(l) => l,
        Err(e) => return fail(e),
    };
    let plugins = match load_plugins(&config).await {
        Ok(p) => p,
        Err(code) => return code,
    };
    // A bad [sandbox] section is reported, but runs that never touch a
    // sandbox still work; tools that do get the reason.
    let run_id = uuid::Uuid::new_v4().simple().to_string();
    let sandboxes: Arc<dyn SandboxProvider> = match DockerSandboxProvider::new(&config.sandbox) {
        Ok(p) => {
            let p = Arc::new(p);
            reap_in_background(p.clone(), run_id.clone());
            p
        }
        Err(e) => {
            eprintln!("agentd: warning: {e}");
            Arc::new(NoSandbox::new(e.to_string()))
        }
    };
    let runtime = Arc::new(Runtime {
        plugins,
        sandboxes,
        step_timeout: config.daemon.step_timeout,
    });
    let agent = Agent::new(agent_config, llm, runtime);
    let cancel = CancellationToken::new();
    let on_ctrl_c = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("agentd: cancelling the run");
            on_ctrl_c.cancel();
        }
    });
    let opts = RunOptions {
        run_id: Some(run_id),
        cancel,
        events: Arc::new(progress::print_event),
    };
    let record = match agent.run(&args.request, opts).await {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    if args.json {
        match serde_json::to_string_pretty(&record) {
            Ok(s) => println!("{s}"),
            Err(e) => return fail(format!("cannot encode the run record: {e}")),
        }
    } else {
        println!("{}", record.result);
    }
    record.outcome.exit_code()
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
    if !args.local {
        return fail("only `agentd plugins --local` is available in this version: the daemon is not part of it yet");
    }
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
