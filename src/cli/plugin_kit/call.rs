//! `agentd plugin call FILE.wasm|NAME '{"json":"args"}'`: one tool call,
//! without a daemon or a model, the author's inner loop. The tool runs as
//! in a run: its own store under `[plugins]`, what `[plugins.<name>]`
//! grants it, its plugin time bounded by `[daemon] step_timeout` (or its
//! grant's `timeout`), and a Docker sandbox behind its `sandbox`
//! import, made from `[sandbox]` as `run --local` makes it: created on the
//! first sandbox call only, and removed afterwards whatever happened (a
//! result, an error, a trap, the deadline, Ctrl-C).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::{usage, CallArgs};
use crate::cli::exit;
use crate::config::{default_config_path, Config};
use crate::plugin::bindings::types::ErrorCode;
use crate::plugin::tool::{call_once as call_tool_once, CallFailure, ToolFailure};
use crate::plugin::{EngineLimits, Grants, LoadedPlugin, NoHuman, PluginHost, ToolPlugin};
use crate::sandbox::docker::DockerSandboxProvider;
use crate::sandbox::{NoSandbox, Sandbox, SandboxProvider};

/// The configuration file as `serve` and `run --local` find it (without
/// the secrets: `check` needs none).
pub(super) fn load_config(path: Option<&Path>) -> Result<Config, i32> {
    let path = path.map(Path::to_path_buf).or_else(default_config_path);
    Config::load(path.as_deref()).map_err(usage)
}

pub async fn run(args: &CallArgs) -> i32 {
    let mut config = match load_config(args.config.as_deref()) {
        Ok(c) => c,
        Err(code) => return code,
    };
    // The tool gets its grants, secrets included, as in a run.
    if let Err(e) = config.read_secrets() {
        return usage(e);
    }
    if let Err(e) =
        serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&args.arguments)
    {
        return usage(format!(
            "the arguments must be a JSON object, as a model sends them: {e}"
        ));
    }
    let host = match PluginHost::with_settings(
        EngineLimits {
            max_concurrent_runs: 1,
        },
        config.plugins,
    ) {
        Ok(h) => h,
        Err(e) => return usage(e),
    };
    let tool = match find_tool(&host, &config, &args.tool).await {
        Ok(t) => t,
        Err(e) => return usage(e),
    };
    let run_id = format!("call-{}", uuid::Uuid::new_v4().simple());
    // A bad [sandbox] section is only the problem of a tool that uses it.
    let sandbox: Arc<dyn Sandbox> = match DockerSandboxProvider::new(&config.sandbox) {
        Ok(p) => p.for_run(&run_id),
        Err(e) => {
            NoSandbox::new(format!("the [sandbox] configuration is invalid: {e}")).for_run(&run_id)
        }
    };
    let name = tool.meta.name.clone();
    // The tool gets what the configuration grants it, as in a run: its
    // hosts, environment, settings and limits (`[plugins.<name>]`).
    let grants = Arc::new(config.plugin_grants.clone());
    let outcome = call_once(
        tool,
        sandbox.clone(),
        grants,
        &args.arguments,
        config.daemon.step_timeout,
    )
    .await;
    // Whatever happened: a container made for this call goes with it.
    sandbox.destroy().await;
    match outcome {
        Called::Result(text) => {
            if args.json {
                println!("{}", serde_json::json!({"ok": true, "result": text}));
            } else {
                println!("{}", crate::cli::sanitize::terminal_safe(&text));
            }
            0
        }
        Called::Failed(message) => {
            if args.json {
                println!("{}", serde_json::json!({"ok": false, "error": message}));
            } else {
                eprintln!(
                    "agentd: tool `{name}` failed: {}",
                    crate::cli::sanitize::terminal_safe(&message)
                );
            }
            1
        }
        Called::Interrupted => {
            eprintln!("agentd: interrupted; the call's sandbox was removed");
            exit::INTERRUPTED
        }
    }
}

enum Called {
    Result(String),
    Failed(String),
    Interrupted,
}

/// A `.wasm` path (or anything with a `/`) is a file; else a tool of that
/// name in the plugins folder, loaded as `run --local` loads it.
async fn find_tool(
    host: &PluginHost,
    config: &Config,
    tool: &str,
) -> Result<Arc<ToolPlugin>, String> {
    let as_file = tool.ends_with(".wasm") || tool.contains('/');
    if as_file {
        let path = Path::new(tool);
        let bytes = std::fs::read(path).map_err(|e| format!("cannot read {tool}: {e}"))?;
        return match host.validate(path, bytes).await.map_err(|e| e.to_string())? {
            LoadedPlugin::Tool(t) => Ok(t),
            LoadedPlugin::Strategy(s) => Err(format!(
                "{tool} is the strategy `{}`: only tools can be called (run an agent on it instead)",
                s.meta.name
            )),
        };
    }
    let dir = &config.daemon.plugins_dir;
    // `NAME.wasm` first: what `plugin install` writes, and loading only it
    // spares compiling the whole folder (seconds per Python plugin). The
    // name is the metadata's, so anything else means looking at them all.
    let named = dir.join(format!("{tool}.wasm"));
    if let Ok(bytes) = std::fs::read(&named) {
        if let Ok(LoadedPlugin::Tool(t)) = host.validate(&named, bytes).await {
            if t.meta.name == tool {
                return Ok(t);
            }
        }
    }
    let report = host.load_dir(dir).await.map_err(|e| {
        format!(
            "cannot read the plugins folder: {e} (give a .wasm file, or set [daemon] plugins_dir)"
        )
    })?;
    let snapshot = host.snapshot();
    snapshot.tool(tool).ok_or_else(|| {
        let known: Vec<&str> = snapshot.tools.keys().map(String::as_str).collect();
        let failed: Vec<String> = report
            .failed
            .iter()
            .map(|(f, e)| format!("{}: {e}", f.display()))
            .collect();
        let mut message = format!(
            "no tool `{tool}` in {} (tools there: {})",
            dir.display(),
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        );
        if !failed.is_empty() {
            message.push_str(&format!("; files that did not load: {}", failed.join("; ")));
        }
        message
    })
}

/// What a tool that asks a person is told: `plugin call` is the author's
/// test of one call, with no run to wait in (a run's `ask_human` is
/// answered through the daemon).
const NO_HUMAN: NoHuman = NoHuman(
    "`agentd plugin call` has no person to ask: a question is answered only in a run (through the daemon)",
);

/// One `invoke` (the plugin layer's [`call_tool_once`]: its plugin time bounded
/// by `step_timeout`, sandbox waits not counted, as in a run), and Ctrl-C
/// heeded.
async fn call_once(
    tool: Arc<ToolPlugin>,
    sandbox: Arc<dyn Sandbox>,
    grants: Arc<Grants>,
    arguments: &str,
    step_timeout: Duration,
) -> Called {
    tokio::select! {
        result = call_tool_once(tool, sandbox, grants, Arc::new(NO_HUMAN), arguments, step_timeout) => match result {
            Ok(text) => Called::Result(text),
            Err(CallFailure::Tool(ToolFailure::Reported(e))) => {
                Called::Failed(format!("{}: {}", code_name(e.code), e.message))
            }
            Err(other) => Called::Failed(other.to_string()),
        },
        _ = tokio::signal::ctrl_c() => Called::Interrupted,
    }
}

/// The WIT name of an error code, as the contract spells it.
fn code_name(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::InvalidInput => "invalid-input",
        ErrorCode::UnknownTool => "unknown-tool",
        ErrorCode::LlmFailed => "llm-failed",
        ErrorCode::SandboxUnavailable => "sandbox-unavailable",
        ErrorCode::SandboxFailed => "sandbox-failed",
        ErrorCode::Failed => "failed",
        ErrorCode::Cancelled => "cancelled",
    }
}
