//! `plugins`: the folder passes the daemon's trust check and the agent's
//! strategy and tools load from it (or from the bundle that will fill it).

use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::Check;
use crate::agent::{AgentConfig, MCP_PREFIX};
use crate::config::Config;
use crate::plugin::bundle::{folder_state, Bundle};
use crate::plugin::trust::{self, TrustError};
use crate::plugin::{EngineLimits, PluginHost};

/// Where the components a daemon would load come from.
enum Source {
    /// The folder has its own.
    Folder,
    /// The folder is empty or missing; the daemon fills it from the bundle.
    Bundle(Bundle, &'static str),
}

/// The plugins folder as the daemon would find it, then every component
/// loaded the way the daemon loads them (the folder's trust check, each
/// file's too, links only when `follow_symlinks` says).
pub(super) async fn check_plugins(
    config: &Config,
    agent_name: &str,
    agent: Option<&AgentConfig>,
) -> Check {
    let dir = &config.daemon.plugins_dir;
    let source = match plugins_source(dir) {
        Ok(s) => s,
        Err(check) => return check,
    };
    let from = match &source {
        Source::Folder => dir.clone(),
        Source::Bundle(b, _) => b.dir().to_path_buf(),
    };
    let host = match plugin_host(config).await {
        Ok(h) => h,
        Err(e) => {
            return Check::fail(
                "plugins",
                format!("cannot start the plugin engine: {e}"),
                "correct [plugins] in the configuration",
            )
        }
    };
    let report = match host.load_dir(&from).await {
        Ok(r) => r,
        Err(e) => {
            return Check::fail(
                "plugins",
                format!("cannot read {}: {e}", from.display()),
                format!("let this user read it: chmod u+rx {}", from.display()),
            )
        }
    };
    let set = host.snapshot();
    let mut detail = match &source {
        Source::Folder => format!(
            "{}: {} and {} load",
            dir.display(),
            count(set.strategies.len(), "strategy", "strategies"),
            count(set.tools.len(), "tool", "tools")
        ),
        Source::Bundle(b, state) => format!(
            "{} is {state}: the daemon will install {} bundled plugins from {} at start",
            dir.display(),
            b.components().map_or(0, |c| c.len()),
            b.dir().display()
        ),
    };
    if !report.failed.is_empty() {
        let failed: Vec<String> = report
            .failed
            .iter()
            .map(|(file, e)| format!("{}: {e}", file.display()))
            .collect();
        detail.push_str(&format!("; not loaded: {}", failed.join("; ")));
    }
    let Some(agent) = agent else {
        return Check::fail(
            "plugins",
            format!("{detail}; agent `{agent_name}` is not among the defaults, so its plugins are not checked"),
            "fix the configuration first",
        );
    };
    let mut missing = Vec::new();
    if set.strategy(&agent.strategy).is_none() {
        missing.push(agent.strategy.clone());
    }
    // `mcp:` tools come from MCP servers, not from this folder.
    missing.extend(
        agent
            .tools
            .iter()
            .filter(|t| !t.starts_with(MCP_PREFIX) && set.tool(t).is_none())
            .cloned(),
    );
    if missing.is_empty() {
        return Check::pass("plugins", detail);
    }
    let fix = if report.failed.is_empty() {
        format!(
            "install them: scripts/build-plugins.sh --install {} (or copy their .wasm files there)",
            dir.display()
        )
    } else {
        format!(
            "fix or replace the files that do not load, or reinstall: scripts/build-plugins.sh --install {}",
            dir.display()
        )
    };
    Check::fail(
        "plugins",
        format!(
            "{detail}; {agent_name} needs {}, which {} not load",
            missing.join(", "),
            if missing.len() == 1 { "does" } else { "do" }
        ),
        fix,
    )
}

fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The folder itself: missing or empty means the bundle (if there is one),
/// and anything the daemon would refuse or fail to read is the check's
/// failure.
fn plugins_source(dir: &Path) -> Result<Source, Check> {
    let shown = dir.display();
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => {
            return Err(Check::fail(
                "plugins",
                format!("cannot inspect the plugins folder {shown}: {e}"),
                inspect_fix(dir, &e),
            ))
        }
        Ok(_) => {
            if let Err(e) = trust::check_dir("plugins folder", dir) {
                return Err(Check::fail_split("plugins", &e.to_string(), trust_fix(&e)));
            }
        }
    }
    let found = folder_state(dir).map_err(|e| {
        Check::fail(
            "plugins",
            format!("cannot read the plugins folder {shown}: {e}"),
            inspect_fix(dir, &e),
        )
    })?;
    let Some(state) = found.lacking() else {
        return Ok(Source::Folder);
    };
    match Bundle::find() {
        Some(bundle) => Ok(Source::Bundle(bundle, state)),
        None => {
            let looked: Vec<String> = Bundle::candidates()
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            Err(Check::fail(
                "plugins",
                format!(
                    "the plugins folder {shown} is {state}, and there are no bundled plugins to fill it (looked in {})",
                    looked.join(", ")
                ),
                format!("install agentd with scripts/install.sh, or build the plugins into the folder: scripts/build-plugins.sh --install {shown}"),
            ))
        }
    }
}

fn inspect_fix(dir: &Path, e: &std::io::Error) -> String {
    let shown = dir.display();
    match e.raw_os_error() {
        Some(libc::ENOTDIR) => format!(
            "a parent of {shown} is a file: set [daemon] plugins_dir to a folder"
        ),
        _ => format!(
            "let this user read it and its parents (chmod u+rx {shown}, or chown $USER {shown}), or set [daemon] plugins_dir"
        ),
    }
}

fn trust_fix(e: &TrustError) -> String {
    match e {
        TrustError::Symlink { .. } => "set [daemon] plugins_dir to the real folder".into(),
        TrustError::NotADirectory { path, .. } => format!(
            "set [daemon] plugins_dir to a folder ({} is not one), or remove it",
            path.display()
        ),
        TrustError::Inspect { path, .. } => format!(
            "let this user read {} and its parents (chmod, chown)",
            path.display()
        ),
        TrustError::Owner { path, me, .. } => format!("chown {me} {}", path.display()),
        TrustError::Writable { path, .. } => {
            format!("chmod go-w {}, and check what is in it", path.display())
        }
    }
}

/// An engine like the daemon's. It uses the daemon's compile cache only
/// when that cache is this user's, so entries it writes are ones the daemon
/// can read, and it never creates one.
async fn plugin_host(config: &Config) -> Result<PluginHost, crate::plugin::PluginError> {
    let build = || {
        PluginHost::with_settings(
            EngineLimits {
                max_concurrent_runs: 1,
            },
            config.plugins,
        )
        .map(|h| {
            h.with_follow_symlinks(config.daemon.follow_symlinks)
                .with_file_checks(true)
        })
    };
    let cache = config.daemon.state_dir.join("cache");
    let ours =
        std::fs::symlink_metadata(&cache).is_ok_and(|m| m.is_dir() && m.uid() == trust::euid());
    if ours {
        if let Ok(host) = build()?.with_cache_dir(cache) {
            return Ok(host);
        }
    }
    build()
}
