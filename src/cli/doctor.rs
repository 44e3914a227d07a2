//! `agentd doctor`: is everything `agentd run <agent>` needs in place?
//!
//! A new user's first run fails on whichever prerequisite is missing first,
//! with that one's error; the doctor checks them all at once and says, one
//! line each, what is wrong and the command that fixes it (issue 18).
//!
//! The checks, in order, by their stable names (`--json` scripts match on
//! them):
//! - `config`: the configuration file loads, with the loader the daemon
//!   uses (an unknown key is `FILE:LINE` and the key);
//! - `state`: `[daemon] state_dir` is writable, with at least 100 MiB free;
//! - `plugins`: `[daemon] plugins_dir` passes the daemon's trust check and
//!   its components load, the agent's strategy and tools among them (an
//!   empty or missing folder is fine when a bundle will fill it);
//! - `docker`: the engine answers, and with which version;
//! - `image`: `[sandbox] image` is on the engine and has bash and python3
//!   (a throwaway sandbox, made and removed the way runs do);
//! - `llm`: the agent's endpoint answers `GET /models`, accepts the key and
//!   serves the model (when it lists models);
//! - `daemon`: a daemon answers on the socket.
//!
//! A configuration that does not load fails `config`; the other checks
//! still run, on the built-in defaults, and say so: the engine, the
//! endpoint and the daemon are worth knowing about while the file is being
//! fixed, but none of them makes the run ready. The exit status is 0 only
//! when every check passes, 1 otherwise, 2 for bad usage (an agent the
//! configuration does not define).
//!
//! Nothing is changed on the way but a probe file in the state folder, the
//! probe sandbox (removed at once) and, when the daemon's compile cache is
//! this user's, entries it would have compiled itself.

use std::ffi::CString;
use std::io::ErrorKind;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use super::client::{Client, ClientError};
use super::{endpoint, exit, out, sanitize, DoctorArgs};
use crate::agent::{AgentConfig, MCP_PREFIX};
use crate::api::Status;
use crate::config::{client_socket_path, default_config_path, Config, ConfigError};
use crate::llm::{LlmClient, LlmError, ModelList};
use crate::plugin::bundle::Bundle;
use crate::plugin::trust::{self, TrustError};
use crate::plugin::{EngineLimits, PluginHost};
use crate::sandbox::docker::DockerSandboxProvider;
use crate::sandbox::{CommandSpec, Sandbox, SandboxConfig, SandboxError};

/// Below this the run history and plugin cache soon fail to write.
const MIN_FREE_BYTES: u64 = 100 << 20;

/// How long the endpoint, the engine's version and the daemon may take to
/// answer: a diagnosis should take seconds, not a request timeout.
const ANSWER_WITHIN: Duration = Duration::from_secs(5);

/// How long the probe command in the sandbox may run.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);

/// Prints `NAME=PATH` (an empty path when missing) for each program the
/// bundled tools run: `bash` for `bash`, `python3` for `python_execute`.
const PROBE: &str =
    r#"for p in bash python3; do printf '%s=%s\n' "$p" "$(command -v "$p" 2>/dev/null)"; done"#;

const DEFAULTS_NOTE: &str =
    " (checked with the built-in defaults: the configuration does not load)";

/// One line of the report. `fix` is set exactly when `ok` is false.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub ok: bool,
    pub detail: String,
    pub fix: Option<String>,
}

impl Check {
    fn pass(name: &'static str, detail: impl Into<String>) -> Self {
        Check {
            name,
            ok: true,
            detail: detail.into(),
            fix: None,
        }
    }

    fn fail(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Check {
            name,
            ok: false,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }

    /// A failure whose message ends with its own `(fix: ...)`, as the trust
    /// check words them: the fix goes to its own line, not twice.
    fn fail_split(name: &'static str, message: &str, fallback_fix: impl Into<String>) -> Self {
        match message.rsplit_once(" (fix: ") {
            Some((detail, fix)) => Check::fail(name, detail, fix.trim_end_matches(')')),
            None => Check::fail(name, message, fallback_fix),
        }
    }
}

/// What `--json` prints.
#[derive(Debug, Serialize)]
struct Report<'a> {
    ok: bool,
    checks: &'a [Check],
}

pub async fn run(args: DoctorArgs, socket: Option<PathBuf>) -> i32 {
    let (config, config_check) = check_config(args.config.as_deref());
    let loaded = config_check.ok;
    let agent = config.agent(&args.agent).cloned();
    if agent.is_none() && loaded {
        let known: Vec<_> = config.agents.keys().cloned().collect();
        eprintln!(
            "agentd: unknown agent `{}` (known: {})",
            args.agent,
            known.join(", ")
        );
        return exit::USAGE;
    }
    let socket = endpoint::choose(socket, config.daemon.socket.clone(), client_socket_path);
    let state = check_state(&config.daemon.state_dir);
    // The slow ones (compiling plugins, a sandbox, the network) at once.
    let (plugins, (docker, image), llm, daemon) = tokio::join!(
        check_plugins(&config, &args.agent, agent.as_ref()),
        check_sandbox(&config.sandbox),
        check_llm(&config, &args.agent),
        check_daemon(socket),
    );
    let mut checks = vec![config_check, state, plugins, docker, image, llm, daemon];
    if !loaded {
        for check in &mut checks[1..] {
            check.detail.push_str(DEFAULTS_NOTE);
        }
    }
    let ok = checks.iter().all(|c| c.ok);
    if args.json {
        if let Err(e) = out::json(&Report {
            ok,
            checks: &checks,
        }) {
            eprintln!("agentd: {e}");
            return 1;
        }
    } else {
        out::text(&render(&checks, &args.agent));
    }
    if ok {
        0
    } else {
        1
    }
}

/// The text report: a line a check (the fix indented under a failing one),
/// then the verdict. Details carry servers' and files' words, so they are
/// made terminal-safe.
fn render(checks: &[Check], agent: &str) -> String {
    let mut text = String::new();
    for c in checks {
        let mark = if c.ok { '✓' } else { '✗' };
        let detail = sanitize::terminal_safe(&c.detail);
        text.push_str(&format!("{mark} {:<7} {detail}\n", c.name));
        if let Some(fix) = &c.fix {
            text.push_str(&format!("  fix: {}\n", sanitize::terminal_safe(fix)));
        }
    }
    match checks.iter().filter(|c| !c.ok).count() {
        0 => text.push_str(&format!("all checks passed: agentd run {agent} is ready\n")),
        1 => text.push_str("1 problem\n"),
        n => text.push_str(&format!("{n} problems\n")),
    }
    text
}

/// `--config`, else the default file, loaded with the daemon's own loader
/// (secrets included, as `serve` reads them); on failure, the defaults.
fn check_config(flag: Option<&Path>) -> (Config, Check) {
    let path = flag.map(Path::to_path_buf).or_else(default_config_path);
    match Config::load_with_secrets(path.as_deref()) {
        Ok(config) => {
            let detail = match &path {
                Some(p) => p.display().to_string(),
                None => "none: built-in defaults".to_string(),
            };
            (config, Check::pass("config", detail))
        }
        Err(e) => {
            let fix = config_fix(&e);
            (
                Config::defaults(),
                Check::fail("config", e.to_string(), fix),
            )
        }
    }
}

fn config_fix(e: &ConfigError) -> String {
    match e {
        ConfigError::Invalid {
            file,
            line: Some(line),
            ..
        } => format!("correct {}:{line}", file.display()),
        ConfigError::Invalid {
            file, line: None, ..
        } => format!("correct {}", file.display()),
        ConfigError::Read { file, source } if source.kind() == ErrorKind::NotFound => format!(
            "create {}, or name an existing file with --config (or $AGENTD_CONFIG)",
            file.display()
        ),
        ConfigError::Read { file, .. } => format!(
            "let this user read {} (chmod, chown), or name another file with --config",
            file.display()
        ),
        ConfigError::KeyFile { path, .. } => format!(
            "put the key in {} and make it readable by this user, or set api_key_env instead",
            path.display()
        ),
    }
}

/// Writable (a probe file created and removed) with room to spare. A
/// folder that does not exist yet is fine when the daemon can create it:
/// its nearest existing parent is checked instead, and nothing is created.
fn check_state(dir: &Path) -> Check {
    let shown = dir.display();
    let set_it = "set [daemon] state_dir to a folder this user can write";
    let (measured, detail) = match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => {
            return Check::fail("state", format!("{shown} is not a folder"), set_it)
        }
        Ok(_) => {
            let probe = dir.join(format!(".agentd-doctor-{}", std::process::id()));
            let written = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&probe);
            if let Err(e) = written {
                return Check::fail(
                    "state",
                    format!("{shown} is not writable: {e}"),
                    format!(
                        "chown the folder to the daemon's user (chown $USER {shown}), or {set_it}"
                    ),
                );
            }
            let _ = std::fs::remove_file(&probe);
            (dir.to_path_buf(), shown.to_string())
        }
        Err(e) if e.kind() == ErrorKind::NotFound => {
            let Some(parent) = dir.ancestors().skip(1).find(|a| a.is_dir()) else {
                return Check::fail("state", format!("{shown} cannot be created"), set_it);
            };
            if let Err(e) = writable(parent) {
                return Check::fail(
                    "state",
                    format!("{shown} does not exist and cannot be created in {}: {e}", parent.display()),
                    format!("create it for the daemon's user (mkdir -p {shown}; chown $USER {shown}), or {set_it}"),
                );
            }
            (
                parent.to_path_buf(),
                format!("{shown} (not there yet: the daemon creates it)"),
            )
        }
        Err(e) => return Check::fail("state", format!("cannot inspect {shown}: {e}"), set_it),
    };
    match free_bytes(&measured) {
        Ok(free) if free < MIN_FREE_BYTES => Check::fail(
            "state",
            format!(
                "{detail}: only {} free (agentd needs {})",
                crate::plugin::settings::show_bytes(free),
                crate::plugin::settings::show_bytes(MIN_FREE_BYTES)
            ),
            "free space on that file system, or set [daemon] state_dir to a folder on another",
        ),
        Ok(free) => Check::pass(
            "state",
            format!(
                "{detail}, {} free",
                crate::plugin::settings::show_bytes(free)
            ),
        ),
        Err(e) => Check::fail(
            "state",
            format!("{detail}: cannot tell the free space: {e}"),
            set_it,
        ),
    }
}

fn c_path(path: &Path) -> std::io::Result<CString> {
    Ok(CString::new(path.as_os_str().as_bytes())?)
}

/// Whether this user may create entries in `dir` (`access(2)`, which
/// answers for the real uid as the daemon started by this user would run).
fn writable(dir: &Path) -> std::io::Result<()> {
    let path = c_path(dir)?;
    // SAFETY: `path` is a valid NUL-terminated string for the call's length.
    if unsafe { libc::access(path.as_ptr(), libc::W_OK | libc::X_OK) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Bytes an unprivileged writer may still use on `dir`'s file system.
fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    let path = c_path(dir)?;
    // SAFETY: statvfs is plain data; all zeroes is a valid value of it.
    let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is NUL-terminated and `stats` is a live, writable statvfs.
    if unsafe { libc::statvfs(path.as_ptr(), &mut stats) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    #[allow(clippy::unnecessary_cast)] // the field types differ by platform
    Ok((stats.f_bavail as u64).saturating_mul(stats.f_frsize as u64))
}

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
async fn check_plugins(config: &Config, agent_name: &str, agent: Option<&AgentConfig>) -> Check {
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
    let empty = match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == ErrorKind::NotFound => Some("missing"),
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
            match Bundle::at(dir).components() {
                Ok(c) if c.is_empty() => Some("empty"),
                Ok(_) => None,
                Err(e) => {
                    return Err(Check::fail(
                        "plugins",
                        format!("cannot read the plugins folder {shown}: {e}"),
                        inspect_fix(dir, &e),
                    ))
                }
            }
        }
    };
    let Some(state) = empty else {
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

/// `docker` and `image` together: the image is checked on the engine the
/// first found, and skipped without one.
async fn check_sandbox(config: &SandboxConfig) -> (Check, Check) {
    let no_engine = || {
        Check::fail(
            "image",
            format!("{}: skipped: no Docker engine", config.image),
            "fix the docker check first",
        )
    };
    let provider = match DockerSandboxProvider::new(config) {
        Ok(p) => p,
        Err(e) => {
            return (
                Check::fail(
                    "docker",
                    sandbox_message(&e),
                    "correct [sandbox] in the configuration",
                ),
                no_engine(),
            )
        }
    };
    let docker = match provider.docker().await {
        Ok(d) => d,
        Err(e) => {
            let message = sandbox_message(&e);
            let fix = docker_fix(&message);
            return (Check::fail("docker", message, fix), no_engine());
        }
    };
    let address = provider.engine_address();
    let docker_check = match tokio::time::timeout(ANSWER_WITHIN, docker.version()).await {
        Ok(Ok(v)) => {
            let mut detail = format!(
                "{address}, Docker {} (API {})",
                v.version.as_deref().unwrap_or("?"),
                v.api_version.as_deref().unwrap_or("?")
            );
            // Each is logged (at the warn level) when the engine is first
            // reached: they weaken the sandbox, but runs work.
            match provider.isolation_warnings().len() {
                0 => {}
                1 => detail.push_str("; 1 isolation warning (logged)"),
                n => detail.push_str(&format!("; {n} isolation warnings (logged)")),
            }
            Check::pass("docker", detail)
        }
        Ok(Err(e)) => {
            let message = format!("the Docker engine at {address} did not give its version: {e}");
            let fix = docker_fix(&message);
            return (Check::fail("docker", message, fix), no_engine());
        }
        Err(_) => {
            return (
                Check::fail(
                    "docker",
                    format!(
                        "the Docker engine at {address} did not answer within {} s",
                        ANSWER_WITHIN.as_secs()
                    ),
                    docker_fix(""),
                ),
                no_engine(),
            )
        }
    };
    (docker_check, check_image(&provider, &docker, config).await)
}

fn sandbox_message(e: &SandboxError) -> String {
    match e {
        SandboxError::Unavailable(m) | SandboxError::Failed(m) => m.clone(),
    }
}

fn docker_fix(message: &str) -> String {
    if message.to_ascii_lowercase().contains("permission denied") {
        "let this user reach the engine: sudo usermod -aG docker $USER, then log in again (or set [sandbox] docker_host)".into()
    } else {
        "start the engine (scripts/ensure-docker.sh), or set [sandbox] docker_host to where it listens".into()
    }
}

async fn check_image(
    provider: &DockerSandboxProvider,
    docker: &bollard::Docker,
    config: &SandboxConfig,
) -> Check {
    let image = &config.image;
    let address = provider.engine_address();
    match docker.inspect_image(image).await {
        Ok(_) => {}
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => return Check::fail(
            "image",
            format!("{image} is not on the Docker engine at {address}"),
            "build it: scripts/build-images.sh (agentd never pulls images), or set [sandbox] image",
        ),
        Err(e) => {
            return Check::fail(
                "image",
                format!("cannot inspect {image} on the engine at {address}: {e}"),
                docker_fix(&e.to_string()),
            )
        }
    }
    // A sandbox as a run gets one (labels, limits, user), so what works
    // here works in a run; destroyed whatever the probe did.
    let run_id = format!("doctor-{}", uuid::Uuid::new_v4().simple());
    let sandbox = provider.sandbox(&run_id);
    let probed = sandbox
        .run(CommandSpec {
            command: PROBE.into(),
            workdir: None,
            timeout: Some(PROBE_TIMEOUT),
            stdin: None,
        })
        .await;
    sandbox.destroy().await;
    let output = match probed {
        Ok(o) => o,
        Err(e) => {
            return Check::fail(
                "image",
                format!("cannot run a command in a sandbox from {image}: {}", sandbox_message(&e)),
                "check [sandbox] (user, limits) against the image, or rebuild it: scripts/build-images.sh",
            )
        }
    };
    let found = probe_paths(&output.stdout);
    let missing: Vec<&str> = found
        .iter()
        .filter(|(_, path)| path.is_empty())
        .map(|(name, _)| *name)
        .collect();
    if output.exit_code != 0 || found.len() != 2 {
        return Check::fail(
            "image",
            format!(
                "the probe in a sandbox from {image} failed (exit {}): {}",
                output.exit_code,
                output.stderr.trim()
            ),
            "rebuild the image: scripts/build-images.sh",
        );
    }
    if !missing.is_empty() {
        return Check::fail(
            "image",
            format!("{image} has no {}", missing.join(" and no ")),
            "rebuild the image (scripts/build-images.sh), or set [sandbox] image to one with bash and python3",
        );
    }
    let paths: Vec<&str> = found.iter().map(|(_, p)| p.as_str()).collect();
    Check::pass("image", format!("{image} (has {})", paths.join(", ")))
}

/// `bash=/bin/bash` lines, as [`PROBE`] prints them.
fn probe_paths(stdout: &str) -> Vec<(&'static str, String)> {
    ["bash", "python3"]
        .into_iter()
        .filter_map(|name| {
            stdout.lines().find_map(|line| {
                let path = line.strip_prefix(name)?.strip_prefix('=')?;
                Some((name, path.trim().to_string()))
            })
        })
        .collect()
}

async fn check_llm(config: &Config, agent: &str) -> Check {
    let settings = config.llm.for_agent(agent);
    let base_url = settings.base_url.clone();
    let model = settings.model.clone();
    if base_url.is_empty() {
        // The same lines a run that needs the endpoint ends with.
        let examples: String = crate::llm::setup::ENDPOINT_EXAMPLES
            .lines()
            .map(|l| format!("\n  {l}"))
            .collect();
        return Check::fail(
            "llm",
            "no LLM endpoint is configured ([llm] base_url, $OPENAI_BASE_URL or an API key)",
            format!(
                "add one of these to the configuration, or set $OPENAI_BASE_URL (and $OPENAI_API_KEY) where agentd runs:{examples}"
            ),
        );
    }
    if let Err(e) = config.llm.check_api_key(agent) {
        return Check::fail("llm", e.to_string(), config_fix(&e));
    }
    let has_key = settings.api_key.as_deref().is_some_and(|k| !k.is_empty());
    let client = match LlmClient::new(settings) {
        Ok(c) => c,
        Err(e) => return Check::fail("llm", e.to_string(), "correct [llm] base_url or ca_file"),
    };
    let reachable_fix = "start the server, or correct [llm] base_url";
    match client.list_models(ANSWER_WITHIN).await {
        Ok(ModelList::Listed(ids)) if ids.contains(&model) => {
            Check::pass("llm", format!("{base_url} serves {model}"))
        }
        Ok(ModelList::Listed(ids)) => {
            const SHOWN: usize = 10;
            let mut has = ids.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(", ");
            if ids.len() > SHOWN {
                has.push_str(&format!(", and {} more", ids.len() - SHOWN));
            }
            Check::fail(
                "llm",
                format!("{base_url}: model {model} is not served (it has: {has})"),
                "set [llm] model to one the server serves",
            )
        }
        Ok(ModelList::Unlisted(why)) => Check::pass(
            "llm",
            format!("{base_url} is reachable; it does not list models ({why}), so model {model} is not checked"),
        ),
        Err(LlmError::Connect { message, .. }) => Check::fail(
            "llm",
            // The innermost cause ("Connection refused") is the news; the
            // layers above it only repeat the URL.
            format!(
                "{base_url} is unreachable: {}",
                message.rsplit(": ").next().unwrap_or(&message)
            ),
            reachable_fix,
        ),
        Err(LlmError::Timeout(t)) => Check::fail(
            "llm",
            format!("{base_url} did not answer within {} s", t.as_secs()),
            reachable_fix,
        ),
        Err(LlmError::Status {
            status: status @ (401 | 403),
            message,
            ..
        }) => Check::fail(
            "llm",
            if has_key {
                format!("{base_url} refused the API key (HTTP {status}: {message})")
            } else {
                format!("{base_url} wants an API key, and none is set (HTTP {status}: {message})")
            },
            "set the key: [llm] api_key, api_key_env or api_key_file, or $OPENAI_API_KEY",
        ),
        Err(e @ LlmError::Certificate { .. }) => Check::fail(
            "llm",
            e.to_string(),
            "add the endpoint's CA to the system trust store, or set [llm] ca_file",
        ),
        Err(e) => Check::fail(
            "llm",
            format!("{base_url}: {e}"),
            "check the server, or correct [llm] base_url",
        ),
    }
}

async fn check_daemon(socket: PathBuf) -> Check {
    let shown = socket.display().to_string();
    let client = Client::new(socket);
    let answer = tokio::time::timeout(ANSWER_WITHIN, client.get::<Status>("/v1/status")).await;
    let start = "start it: `agentd serve`, or `systemctl start agentd` (`systemctl --user start agentd` for a user install)";
    match answer {
        Ok(Ok(status)) => {
            let mut detail = format!(
                "running at {shown} (version {}, {} runs active)",
                status.version, status.runs_active
            );
            let mine = env!("CARGO_PKG_VERSION");
            if status.version != mine {
                detail.push_str(&format!("; this agentd is version {mine}"));
            }
            Check::pass("daemon", detail)
        }
        Ok(Err(ClientError::Connect { source, .. })) if source.kind() == ErrorKind::PermissionDenied => {
            Check::fail(
                "daemon",
                format!("cannot connect to {shown}: permission denied"),
                "join the socket's group (sudo usermod -aG agentd $USER, then log in again), or run as its owner",
            )
        }
        Ok(Err(ClientError::Connect { .. })) => {
            Check::fail("daemon", format!("no daemon at {shown}"), start)
        }
        Ok(Err(e)) => Check::fail(
            "daemon",
            format!("the daemon at {shown} did not answer as expected: {e}"),
            "restart it; if it persists, see its log (journalctl -u agentd)",
        ),
        Err(_) => Check::fail(
            "daemon",
            format!(
                "the daemon at {shown} did not answer within {} s",
                ANSWER_WITHIN.as_secs()
            ),
            "restart it; if it persists, see its log (journalctl -u agentd)",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Check> {
        vec![
            Check::pass("config", "/etc/agentd/agentd.toml"),
            Check::fail(
                "llm",
                "http://127.0.0.1:9/v1 is unreachable: connection refused",
                "start the server, or correct [llm] base_url",
            ),
        ]
    }

    #[test]
    fn text_is_a_line_a_check_with_the_fix_under_a_failure() {
        assert_eq!(
            render(&sample(), "manus"),
            "✓ config  /etc/agentd/agentd.toml\n\
             ✗ llm     http://127.0.0.1:9/v1 is unreachable: connection refused\n  \
             fix: start the server, or correct [llm] base_url\n\
             1 problem\n"
        );
        assert!(render(&sample()[..1], "manus")
            .ends_with("all checks passed: agentd run manus is ready\n"));
    }

    #[test]
    fn json_has_ok_and_every_check_with_a_null_fix_when_ok() {
        let checks = sample();
        let v = serde_json::to_value(Report {
            ok: false,
            checks: &checks,
        })
        .expect("json");
        assert_eq!(
            v,
            serde_json::json!({"ok": false, "checks": [
                {"name": "config", "ok": true, "detail": "/etc/agentd/agentd.toml", "fix": null},
                {"name": "llm", "ok": false,
                 "detail": "http://127.0.0.1:9/v1 is unreachable: connection refused",
                 "fix": "start the server, or correct [llm] base_url"},
            ]})
        );
    }

    #[test]
    fn a_message_with_its_own_fix_is_split() {
        let c = Check::fail_split(
            "plugins",
            "the plugins folder /p is writable by everyone (mode 0777); refusing (fix: chmod go-w /p, and check what is in it)",
            "unused",
        );
        assert_eq!(
            c.detail,
            "the plugins folder /p is writable by everyone (mode 0777); refusing"
        );
        assert_eq!(
            c.fix.as_deref(),
            Some("chmod go-w /p, and check what is in it")
        );
        let c = Check::fail_split("plugins", "no fix here", "the fallback");
        assert_eq!(c.fix.as_deref(), Some("the fallback"));
    }

    #[test]
    fn probe_output_names_each_program_or_none() {
        assert_eq!(
            probe_paths("bash=/bin/bash\npython3=\n"),
            vec![("bash", "/bin/bash".into()), ("python3", String::new())]
        );
        assert_eq!(probe_paths("garbage"), vec![]);
    }

    #[test]
    fn a_state_folder_that_is_missing_is_judged_by_its_parent() {
        let tmp = tempfile::tempdir().expect("tmp");
        let c = check_state(&tmp.path().join("a/b"));
        assert!(c.ok, "{c:?}");
        assert!(c.detail.contains("the daemon creates it"), "{c:?}");
        assert!(!tmp.path().join("a").exists());
        let file = tmp.path().join("file");
        std::fs::write(&file, "x").expect("write");
        assert!(!check_state(&file).ok);
        let c = check_state(tmp.path());
        assert!(c.ok && c.detail.contains("free"), "{c:?}");
        assert_eq!(std::fs::read_dir(tmp.path()).expect("ls").count(), 1);
    }
}
