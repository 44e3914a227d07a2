//! Configuration: one TOML file, OpenManus-compatible where OpenManus has the
//! key. This module only parses, layers and checks it, and builds the
//! settings types each subsystem owns (`agent::AgentConfig`,
//! `sandbox::SandboxConfig`, `daemon::settings::DaemonConfig`,
//! `llm::LlmSettings`): it sits on top, so no subsystem depends on it.

mod bundled;
mod file;
mod grants;
mod llm_overrides;
mod mcp;
mod paths;
mod size;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use bundled::{MANUS_NEXT_STEP_PROMPT, MANUS_SYSTEM_PROMPT};
use file::{AgentKeys, FileConfig, LlmKeys};
pub use paths::{client_socket_path, default_config_path, default_socket_path, SYSTEM_SOCKET};

use crate::agent::settings::{MESSAGE_FRAMING_BYTES, MIN_TOOL_RESULT_BYTES};
use crate::agent::{AgentConfig, Approve, RunLimits};
use crate::daemon::settings::{
    DaemonConfig, McpServerConfig, DEFAULT_BODY_TIMEOUT, DEFAULT_HEADER_TIMEOUT,
    DEFAULT_HISTORY_DAYS, DEFAULT_MAX_CONCURRENT_RUNS, DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_CONNECTIONS_PER_USER, DEFAULT_MAX_PLUGIN_BYTES, DEFAULT_MAX_QUEUED_RUNS,
    DEFAULT_MAX_QUEUED_RUNS_PER_USER, DEFAULT_MAX_REQUEST_BYTES, DEFAULT_MCP_IDLE_TIMEOUT,
    DEFAULT_SHUTDOWN_GRACE, DEFAULT_STEP_TIMEOUT, DEFAULT_WRITE_TIMEOUT,
};
use crate::llm::{LlmSettings, RetryPolicy};
use crate::plugin::{Grants, PluginSettings};
use crate::sandbox::{SandboxConfig, MAX_POOL_SIZE};

/// The endpoint assumed when an API key is set and no base URL is.
const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// The model asked for when neither `[llm] model` nor the agent's own says.
pub const DEFAULT_MODEL: &str = "gpt-4o";

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{file}: cannot read: {source}")]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    /// `line` is 1-based; `message` names the key.
    #[error("{}{}: {message}", file.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Invalid {
        file: PathBuf,
        line: Option<usize>,
        message: String,
    },
    /// `[llm] api_key_file` (or a systemd credential) cannot give a key.
    #[error("[llm] api_key_file {}: {reason}", path.display())]
    KeyFile { path: PathBuf, reason: String },
}

#[derive(Debug, Clone)]
pub struct Config {
    /// The file this came from; `None` for the built-in defaults.
    pub source: Option<PathBuf>,
    pub llm: LlmConfig,
    pub daemon: DaemonConfig,
    /// `[mcp_server]`, read at start-up.
    pub mcp_server: McpServerConfig,
    pub sandbox: SandboxConfig,
    /// `[plugins]`, read at start-up (the engine's pool is sized from it).
    pub plugins: PluginSettings,
    /// `[plugins.<name>]`: reloaded on SIGHUP (a run keeps those it started
    /// with). Without secrets unless loaded with [`Config::load_with_secrets`].
    pub plugin_grants: Grants,
    /// `[plugins]` as written, for [`Config::read_secrets`].
    plugin_keys: file::PluginsKeys,
    pub agents: BTreeMap<String, AgentConfig>,
    /// `[mcp.<server>]`: the MCP servers whose tools agents may use;
    /// reloaded on SIGHUP. Without secrets unless loaded with
    /// [`Config::load_with_secrets`].
    pub mcp: crate::mcp::McpSettings,
    /// `[mcp.<server>]` as written, for [`Config::read_secrets`].
    mcp_keys: BTreeMap<String, file::McpServerKeys>,
}

#[derive(Debug, Clone)]
pub struct LlmConfig {
    base: LlmKeys,
    overrides: BTreeMap<String, LlmKeys>,
    /// `[llm.prices."<model>"]`, by model name.
    prices: BTreeMap<String, crate::llm::Price>,
}

/// An `[agents.X]` table's keys over `agent`, key by key.
fn apply_agent_keys(agent: &mut AgentConfig, k: &AgentKeys) {
    macro_rules! set {
        ($($f:ident),*) => { $(if let Some(v) = &k.$f { agent.$f = v.clone(); })* };
    }
    macro_rules! set_opt {
        ($($f:ident),*) => { $(if let Some(v) = &k.$f { agent.$f = Some(v.clone()); })* };
    }
    set!(strategy, tools, duplicate_threshold, max_messages);
    set_opt!(
        system_prompt,
        next_step_prompt,
        max_steps,
        max_observe,
        tool_choice,
        special_tools,
        max_tool_calls_per_step,
        max_host_calls_per_step
    );
}

/// `[agents.X] keep_files` and `keep_limit`: the globs are compiled
/// here so a bad one stops the daemon at start, not every run at its end.
fn apply_keep_keys(agent: &mut AgentConfig, k: &AgentKeys) -> Result<(), String> {
    let name = &agent.name;
    if let Some(globs) = &k.keep_files {
        crate::sandbox::keep_globs(globs).map_err(|e| format!("[agents.{name}] {e}"))?;
        agent.keep_files = globs.clone();
    }
    if let Some(limit) = &k.keep_limit {
        agent.keep_limit = limit.bytes(&format!("[agents.{name}] keep_limit"))?;
        if agent.keep_limit > crate::agent::MAX_KEEP_LIMIT {
            return Err(format!(
                "[agents.{name}] keep_limit is more than 1 GiB: a resumed run holds the kept \
                 files in memory until they are in its sandbox"
            ));
        }
    }
    Ok(())
}

/// `[agents.X] approve`, `input_timeout` and `approval_timeout`.
fn apply_human_keys(agent: &mut AgentConfig, k: &AgentKeys) -> Result<(), String> {
    let name = &agent.name;
    match &k.approve {
        None => {}
        Some(file::ApproveKey::Word(w)) if w == "all" => agent.approve = Approve::All,
        Some(file::ApproveKey::Word(w)) => {
            return Err(format!(
                "[agents.{name}] approve must be a list of tool names or \"all\", not \"{w}\""
            ))
        }
        Some(file::ApproveKey::Tools(tools)) if tools.is_empty() => {
            agent.approve = Approve::Nothing
        }
        Some(file::ApproveKey::Tools(tools)) => agent.approve = Approve::Tools(tools.clone()),
    }
    for (value, key, slot) in [
        (k.input_timeout, "input_timeout", &mut agent.input_timeout),
        (
            k.approval_timeout,
            "approval_timeout",
            &mut agent.approval_timeout,
        ),
    ] {
        if let Some(t) = value {
            *slot = seconds(t).ok_or_else(|| {
                format!("[agents.{name}] {key} must be a positive number of seconds (at most a year), not {t}")
            })?;
        }
    }
    Ok(())
}

impl Config {
    /// The configuration with no file at all.
    pub fn defaults() -> Self {
        Self::from_file(None, "", FileConfig::default()).expect("the built-in defaults are valid")
    }

    /// Loads `path`, or the defaults when `path` is `None`.
    pub fn load(path: Option<&Path>) -> Result<Self, ConfigError> {
        match path {
            None => Ok(Self::defaults()),
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|source| ConfigError::Read {
                    file: p.to_path_buf(),
                    source,
                })?;
                Self::parse(&text, p)
            }
        }
    }

    /// [`load`](Self::load), then the secrets of `[plugins.<name>]` read
    /// (see [`read_secrets`](Self::read_secrets)): for what runs plugins.
    pub fn load_with_secrets(path: Option<&Path>) -> Result<Self, ConfigError> {
        let mut config = Self::load(path)?;
        config.read_secrets()?;
        Ok(config)
    }

    /// Reads the values of every `[plugins.<name>] secrets` (systemd
    /// credentials, else the secrets file) into the grants. Only what runs
    /// plugins calls it: a client reading the file for its socket path has
    /// no business with the secrets, and usually no right to read them.
    pub fn read_secrets(&mut self) -> Result<(), ConfigError> {
        let file = self.source.clone().unwrap_or_default();
        let dir = self.source.as_deref().and_then(Path::parent);
        let invalid = |message| ConfigError::Invalid {
            file: file.clone(),
            line: None,
            message,
        };
        self.plugin_grants =
            grants::build(&self.plugin_keys, &self.plugins, dir, true).map_err(invalid)?;
        self.mcp = mcp::build(&self.mcp_keys, &self.plugin_keys, dir, true).map_err(invalid)?;
        Ok(())
    }

    pub fn parse(text: &str, file: &Path) -> Result<Self, ConfigError> {
        let parsed: FileConfig = toml::from_str(text).map_err(|e| ConfigError::Invalid {
            file: file.to_path_buf(),
            line: e.span().map(|s| line_of(text, s.start)),
            message: e.message().trim().to_string(),
        })?;
        if let Some((span, message)) = parsed.llm.problems.first() {
            return Err(ConfigError::Invalid {
                file: file.to_path_buf(),
                line: Some(line_of(text, span.start)),
                message: message.clone(),
            });
        }
        Self::from_file(Some(file), text, parsed).map_err(|e| match e {
            ConfigError::Invalid {
                file,
                line: None,
                message,
            } => ConfigError::Invalid {
                line: locate(text, &message),
                file,
                message,
            },
            other => other,
        })
    }

    /// `text` is the file's text (empty for the defaults), for errors that
    /// know where they are.
    fn from_file(file: Option<&Path>, text: &str, f: FileConfig) -> Result<Self, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid {
            file: file.map(Path::to_path_buf).unwrap_or_default(),
            line: None,
            message,
        };
        let state_dir = f
            .daemon
            .state_dir
            .clone()
            .unwrap_or_else(paths::default_state_dir);
        let step_timeout = match f.daemon.step_timeout {
            None => DEFAULT_STEP_TIMEOUT,
            Some(t) => seconds(t).ok_or_else(|| {
                invalid(format!(
                    "[daemon] step_timeout must be a positive number of seconds, not {t}"
                ))
            })?,
        };
        let shutdown_grace = match f.daemon.shutdown_grace {
            None => DEFAULT_SHUTDOWN_GRACE,
            Some(t) => {
                if t == 0.0 {
                    Duration::ZERO
                } else {
                    seconds(t).ok_or_else(|| {
                        invalid(format!(
                            "[daemon] shutdown_grace must be a number of seconds (0 or more), not {t}"
                        ))
                    })?
                }
            }
        };
        let d = SandboxConfig::default();
        let output_limit = size_key(&f.sandbox.output_limit, "[sandbox] output_limit")
            .map_err(invalid)?
            .unwrap_or(d.output_limit);
        let run_limits = run_limits(&f.daemon, output_limit).map_err(invalid)?;
        let max_request_bytes =
            size_key(&f.daemon.max_request_bytes, "[daemon] max_request_bytes").map_err(invalid)?;
        let max_plugin_bytes =
            size_key(&f.daemon.max_plugin_bytes, "[daemon] max_plugin_bytes").map_err(invalid)?;
        let positive_seconds = |value: Option<f64>, default: Duration, key: &str| match value {
            None => Ok(default),
            Some(t) => seconds(t).ok_or_else(|| {
                invalid(format!(
                    "[daemon] {key} must be a positive number of seconds, not {t}"
                ))
            }),
        };
        let max_connections = f
            .daemon
            .max_connections
            .unwrap_or(DEFAULT_MAX_CONNECTIONS)
            .max(1);
        let max_connections_per_user = per_user_share(
            f.daemon.max_connections_per_user,
            DEFAULT_MAX_CONNECTIONS_PER_USER,
            max_connections,
            "max_connections_per_user",
            "connection",
        )
        .map_err(invalid)?;
        // Every run holds a place from its creation until it gets a slot,
        // so 0 would refuse them all.
        let max_queued_runs = f
            .daemon
            .max_queued_runs
            .unwrap_or(DEFAULT_MAX_QUEUED_RUNS)
            .max(1);
        let max_queued_runs_per_user = per_user_share(
            f.daemon.max_queued_runs_per_user,
            DEFAULT_MAX_QUEUED_RUNS_PER_USER,
            max_queued_runs,
            "max_queued_runs_per_user",
            "run",
        )
        .map_err(invalid)?;
        let daemon = DaemonConfig {
            plugins_dir: f
                .daemon
                .plugins_dir
                .clone()
                .unwrap_or_else(|| state_dir.join("plugins")),
            state_dir,
            socket: f.daemon.socket.clone(),
            step_timeout,
            max_concurrent_runs: f
                .daemon
                .max_concurrent_runs
                .unwrap_or(DEFAULT_MAX_CONCURRENT_RUNS)
                .max(1),
            socket_group: f.daemon.socket_group.clone(),
            shutdown_grace,
            history_days: f.daemon.history_days.unwrap_or(DEFAULT_HISTORY_DAYS),
            max_request_bytes: max_request_bytes
                .unwrap_or(DEFAULT_MAX_REQUEST_BYTES)
                .max(1024),
            max_plugin_bytes: max_plugin_bytes
                .unwrap_or(DEFAULT_MAX_PLUGIN_BYTES)
                .min(crate::plugin::MAX_COMPONENT_BYTES as usize)
                .max(1024),
            run_limits,
            max_connections,
            max_connections_per_user,
            max_queued_runs,
            max_queued_runs_per_user,
            header_timeout: positive_seconds(
                f.daemon.header_timeout,
                DEFAULT_HEADER_TIMEOUT,
                "header_timeout",
            )?,
            body_timeout: positive_seconds(
                f.daemon.body_timeout,
                DEFAULT_BODY_TIMEOUT,
                "body_timeout",
            )?,
            release_waiting: f.daemon.release_waiting.unwrap_or(false),
            write_timeout: positive_seconds(
                f.daemon.write_timeout,
                DEFAULT_WRITE_TIMEOUT,
                "write_timeout",
            )?,
            follow_symlinks: f.daemon.follow_symlinks.unwrap_or(false),
            metrics_listen: match &f.daemon.metrics_listen {
                None => None,
                Some(a) => Some(a.parse().map_err(|_| {
                    invalid(format!(
                        "[daemon] metrics_listen must be an IP address and port such as \"127.0.0.1:9464\", not {a:?}"
                    ))
                })?),
            },
            daily_token_budget: budget_key(f.daemon.daily_token_budget, "[daemon]")
                .map_err(invalid)?,
        };
        let mcp_server = McpServerConfig {
            enabled: f.mcp_server.enabled.unwrap_or(true),
            expose_tools: f.mcp_server.expose_tools.unwrap_or(false),
            idle_timeout: match f.mcp_server.idle_timeout {
                None => DEFAULT_MCP_IDLE_TIMEOUT,
                Some(t) => seconds(t).ok_or_else(|| {
                    invalid(format!(
                        "[mcp_server] idle_timeout must be a positive number of seconds, not {t}"
                    ))
                })?,
            },
        };
        let s = &f.sandbox;
        let sandbox = SandboxConfig {
            image: s.image.clone().unwrap_or(d.image),
            work_dir: s.work_dir.clone().unwrap_or(d.work_dir),
            memory_limit: s.memory_limit.clone().unwrap_or(d.memory_limit),
            cpu_limit: s.cpu_limit.unwrap_or(d.cpu_limit),
            timeout: s.timeout.map(Duration::from_secs).unwrap_or(d.timeout),
            network_enabled: s.network_enabled.unwrap_or(d.network_enabled),
            pids_limit: s.pids_limit.unwrap_or(d.pids_limit),
            docker_host: s.docker_host.clone().or(d.docker_host),
            create_on_start: s.create_on_start.unwrap_or(d.create_on_start),
            output_limit,
            user: s.user.clone().unwrap_or(d.user),
            disk_limit: s.disk_limit.clone().unwrap_or(d.disk_limit),
            max_open_files: s.max_open_files.unwrap_or(d.max_open_files),
            pool_size: match s.pool_size {
                Some(n) if n > MAX_POOL_SIZE => {
                    return Err(invalid(format!(
                        "[sandbox] pool_size {n} is more than {MAX_POOL_SIZE}: each pooled \
                         container holds its memory while idle"
                    )))
                }
                n => n.unwrap_or(d.pool_size),
            },
            engines: engines(&s.engines, s.docker_host.is_some()).map_err(|(at, message)| {
                ConfigError::Invalid {
                    file: file.map(Path::to_path_buf).unwrap_or_default(),
                    line: Some(line_of(text, at)),
                    message,
                }
            })?,
        };
        let mut plugins = PluginSettings::default();
        if let Some(size) = &f.plugins.memory_limit {
            plugins.memory_limit = size.bytes("[plugins] memory_limit").map_err(invalid)?;
        }
        plugins.check().map_err(invalid)?;

        let mut agents: BTreeMap<String, AgentConfig> = bundled::agents()
            .into_iter()
            .map(|a| (a.name.clone(), a))
            .collect();
        for (name, keys) in &f.agents {
            let agent = agents
                .entry(name.clone())
                .or_insert_with(|| AgentConfig::with_defaults(name));
            apply_agent_keys(agent, keys);
            if let Some(t) = keys.max_run_time {
                agent.max_run_time = Some(seconds(t).ok_or_else(|| {
                    invalid(format!(
                        "[agents.{name}] max_run_time must be a positive number of seconds (at most a year), not {t}"
                    ))
                })?);
            }
            apply_human_keys(agent, keys).map_err(invalid)?;
            apply_keep_keys(agent, keys).map_err(invalid)?;
            agent.daily_token_budget =
                budget_key(keys.daily_token_budget, &format!("[agents.{name}]"))
                    .map_err(invalid)?;
        }
        for agent in agents.values() {
            if agent.max_steps == Some(0) {
                return Err(invalid(format!(
                    "[agents.{}] max_steps must be at least 1",
                    agent.name
                )));
            }
            if agent.max_tool_calls_per_step == Some(0) {
                return Err(invalid(format!(
                    "[agents.{}] max_tool_calls_per_step must be at least 1",
                    agent.name
                )));
            }
            if agent.max_host_calls_per_step == Some(0) {
                return Err(invalid(format!(
                    "[agents.{}] max_host_calls_per_step must be at least 1",
                    agent.name
                )));
            }
        }
        let names: Vec<&str> = agents.keys().map(String::as_str).collect();
        let overrides = llm_overrides::resolve(&f.llm, &f.agents, &names, text).map_err(|r| {
            ConfigError::Invalid {
                file: file.map(Path::to_path_buf).unwrap_or_default(),
                line: Some(line_of(text, r.at)),
                message: r.message,
            }
        })?;
        let tables: BTreeMap<String, String> = overrides
            .iter()
            .map(|(name, o)| (name.clone(), o.table.clone()))
            .collect();
        let config_dir = file.and_then(Path::parent);
        let prices = f
            .llm
            .prices
            .iter()
            .map(|(model, keys)| {
                let table = format!("[llm.prices.\"{model}\"]");
                model_price(keys.input_price, keys.output_price, &table)
                    .map(|price| (model.clone(), price))
            })
            .collect::<Result<_, _>>()
            .map_err(invalid)?;
        let mut llm = LlmConfig {
            base: f.llm.base,
            overrides: overrides.into_iter().map(|(k, o)| (k, o.keys)).collect(),
            prices,
        };
        for (table, keys) in std::iter::once(("[llm]".to_string(), &mut llm.base)).chain(
            llm.overrides.iter_mut().map(|(name, keys)| {
                let table = tables
                    .get(name)
                    .cloned()
                    .unwrap_or_else(|| format!("[llm.{name}]"));
                (table, keys)
            }),
        ) {
            check_llm_keys(keys, config_dir).map_err(|e| invalid(format!("{table} {e}")))?;
        }
        let plugin_grants =
            grants::build(&f.plugins, &plugins, config_dir, false).map_err(invalid)?;
        let mcp = mcp::build(&f.mcp, &f.plugins, config_dir, false).map_err(invalid)?;
        Ok(Config {
            source: file.map(Path::to_path_buf),
            llm,
            daemon,
            mcp_server,
            sandbox,
            plugins,
            plugin_grants,
            plugin_keys: f.plugins,
            agents,
            mcp,
            mcp_keys: f.mcp,
        })
    }

    pub fn agent(&self, name: &str) -> Option<&AgentConfig> {
        self.agents.get(name)
    }
}

/// `daily_token_budget` of `table`: unset is no budget; 0 would refuse
/// every run, which is what stopping the daemon is for.
fn budget_key(value: Option<u64>, table: &str) -> Result<Option<u64>, String> {
    match value {
        Some(0) => Err(format!(
            "{table} daily_token_budget must be at least 1 (leave it out for no budget)"
        )),
        v => Ok(v),
    }
}

/// A pair of prices, each checked, named by `table` when refused.
fn model_price(
    input: Option<f64>,
    output: Option<f64>,
    table: &str,
) -> Result<crate::llm::Price, String> {
    let check = |value: Option<f64>, key: &str| {
        value
            .map(crate::llm::check_price)
            .transpose()
            .map_err(|e| format!("{table} {key} {e}"))
    };
    Ok(crate::llm::Price {
        input: check(input, "input_price")?,
        output: check(output, "output_price")?,
    })
}

impl LlmConfig {
    /// The model `agent` asks for: its own `[agents.X.llm] model`, else
    /// `[llm] model`, else [`DEFAULT_MODEL`]. One place, so that the model
    /// a run is sent to and the one it is priced at cannot differ.
    pub fn model_for(&self, agent: &str) -> &str {
        self.overrides
            .get(&agent.to_lowercase())
            .and_then(|o| o.model.as_deref())
            .or(self.base.model.as_deref())
            .unwrap_or(DEFAULT_MODEL)
    }

    /// The prices in force for `agent`'s runs, each one separately the first
    /// set of: the agent's own `input_price`/`output_price` (its
    /// `[agents.<agent>.llm]` or `[llm.<agent>]`), `[llm.prices."<model>"]`
    /// for the model the agent uses, `[llm]`'s own. The model's table comes
    /// before `[llm]`'s keys because an agent that names another model
    /// should not be billed at the default model's price.
    pub fn price_for(&self, agent: &str) -> crate::llm::Price {
        let own = self.overrides.get(&agent.to_lowercase());
        let table = self.prices.get(self.model_for(agent));
        crate::llm::Price {
            input: own
                .and_then(|o| o.input_price)
                .or_else(|| table.and_then(|t| t.input))
                .or(self.base.input_price),
            output: own
                .and_then(|o| o.output_price)
                .or_else(|| table.and_then(|t| t.output))
                .or(self.base.output_price),
        }
    }

    /// Whether the agent's key can be had: an `api_key_file` that cannot be
    /// read (or is empty) makes the agent unusable, with the file named,
    /// rather than send requests without a key.
    pub fn check_api_key(&self, agent: &str) -> Result<(), ConfigError> {
        let keys = match self.overrides.get(&agent.to_lowercase()) {
            Some(o) => self.base.overlay(o),
            None => self.base.clone(),
        };
        match (&keys.api_key, &keys.api_key_env, &keys.api_key_file) {
            (None, None, Some(file)) => read_key_file(file).map(drop),
            _ => Ok(()),
        }
    }

    /// `[llm]` overlaid with the agent's overrides (`[agents.<agent>.llm]`
    /// or `[llm.<agent>]`, names compared in lower case), then the
    /// environment fallbacks for what is still unset.
    pub fn for_agent(&self, agent: &str) -> LlmSettings {
        let keys = match self.overrides.get(&agent.to_lowercase()) {
            Some(o) => self.base.overlay(o),
            None => self.base.clone(),
        };
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        // `api_key_env` names where the key is; if that variable is unset the
        // key is missing, never silently replaced by $OPENAI_API_KEY (which
        // would send one provider's key to another's endpoint).
        let api_key = match (&keys.api_key, &keys.api_key_env, &keys.api_key_file) {
            (Some(k), _, _) => Some(k.clone()),
            (None, Some(var), _) => env(var),
            // An unreadable file is reported by `check_api_key`, which the
            // daemon and `run --local` call before building a client.
            (None, None, Some(file)) => read_key_file(file).ok(),
            (None, None, None) => env("OPENAI_API_KEY"),
        };
        // OpenAI is assumed only when there is a key to send it; with
        // neither an endpoint nor a key, the base URL stays empty and the
        // client answers every request with the setup help at once (see
        // `LlmClient::new`) instead of retrying a server the user never
        // chose.
        let base_url = keys
            .base_url
            .clone()
            .or_else(|| env("OPENAI_BASE_URL"))
            .or_else(|| api_key.is_some().then(|| OPENAI_BASE_URL.to_string()))
            .unwrap_or_default();
        let defaults = RetryPolicy::default();
        LlmSettings {
            model: self.model_for(agent).to_string(),
            base_url,
            api_key,
            // Sent only when configured: reasoning models refuse `max_tokens`
            // and any non-default temperature.
            max_tokens: keys.max_tokens,
            temperature: keys.temperature,
            max_input_tokens: keys.max_input_tokens,
            request_timeout: keys
                .timeout
                .and_then(seconds)
                .unwrap_or(Duration::from_secs(300)),
            retry: RetryPolicy {
                max_retries: keys.max_retries.unwrap_or(defaults.max_retries),
                timeout_retries: keys.timeout_retries.unwrap_or(defaults.timeout_retries),
                initial_backoff: keys
                    .retry_backoff_ms
                    .map(Duration::from_millis)
                    .unwrap_or(defaults.initial_backoff),
                max_backoff: defaults.max_backoff,
                max_wait: keys
                    .retry_max_wait
                    .and_then(|t| {
                        if t == 0.0 {
                            Some(Duration::ZERO)
                        } else {
                            seconds(t)
                        }
                    })
                    .unwrap_or(defaults.max_wait),
            },
            ca_file: keys.ca_file.clone(),
        }
    }
}

/// The key in an `api_key_file`, without surrounding whitespace (files
/// written with `echo` end with a newline).
fn read_key_file(path: &Path) -> Result<String, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::KeyFile {
        path: path.to_path_buf(),
        reason: source.to_string(),
    })?;
    let key = text.trim();
    if key.is_empty() {
        return Err(ConfigError::KeyFile {
            path: path.to_path_buf(),
            reason: "the file is empty".into(),
        });
    }
    Ok(key.to_string())
}

/// Where a relative `api_key_file` is: systemd passes credentials
/// (`LoadCredential=NAME:PATH`) as files in `$CREDENTIALS_DIRECTORY`, the
/// way other daemons read them; outside systemd, next to the configuration.
fn resolve_key_file(path: &Path, config_dir: Option<&Path>) -> PathBuf {
    if path.is_absolute() {
        return path.to_path_buf();
    }
    let credentials = std::env::var_os("CREDENTIALS_DIRECTORY").filter(|d| !d.is_empty());
    match (credentials, config_dir) {
        (Some(dir), _) => Path::new(&dir).join(path),
        (None, Some(dir)) => dir.join(path),
        (None, None) => path.to_path_buf(),
    }
}

/// The checks on one `[llm]` or `[llm.<agent>]` table that need more than a
/// type: values that would make every request fail are refused at load, with
/// the key first in the message so `locate` finds its line. A relative
/// `ca_file` is made relative to the configuration file's folder.
fn check_llm_keys(keys: &mut LlmKeys, config_dir: Option<&Path>) -> Result<(), String> {
    let sources = [
        keys.api_key.is_some(),
        keys.api_key_env.is_some(),
        keys.api_key_file.is_some(),
    ];
    if sources.iter().filter(|set| **set).count() > 1 {
        return Err(
            "api_key, api_key_env and api_key_file are one setting: set only one of them".into(),
        );
    }
    if let Some(path) = &mut keys.api_key_file {
        *path = resolve_key_file(path, config_dir);
    }
    if let Some(t) = keys.timeout {
        if seconds(t).is_none() {
            return Err("timeout must be a positive number of seconds".into());
        }
    }
    if let Some(t) = keys.retry_max_wait {
        if t != 0.0 && seconds(t).is_none() {
            return Err(format!(
                "retry_max_wait must be a number of seconds (0 or more, at most a year), not {t}"
            ));
        }
    }
    if let Some(url) = &keys.base_url {
        crate::llm::check_base_url(url)?;
    }
    model_price(keys.input_price, keys.output_price, "").map_err(|e| e.trim().to_string())?;
    if let Some(path) = &mut keys.ca_file {
        if let Some(dir) = config_dir.filter(|_| path.is_relative()) {
            *path = dir.join(&*path);
        }
        crate::llm::load_ca_file(path)?;
    }
    Ok(())
}

/// The `[daemon]` limits of each run over their defaults (which follow
/// `[sandbox] output_limit`), refused when they are zero or cannot work
/// together. Errors start with `[daemon] key` so `locate` finds the line.
fn run_limits(k: &file::DaemonKeys, output_limit: usize) -> Result<RunLimits, String> {
    let mut limits = RunLimits::with_output_limit(output_limit);
    let max_tool_result_bytes =
        size_key(&k.max_tool_result_bytes, "[daemon] max_tool_result_bytes")?;
    let max_message_bytes = size_key(&k.max_message_bytes, "[daemon] max_message_bytes")?;
    let max_tool_arguments_bytes = size_key(
        &k.max_tool_arguments_bytes,
        "[daemon] max_tool_arguments_bytes",
    )?;
    let max_run_bytes = size_key(&k.max_run_bytes, "[daemon] max_run_bytes")?.map(|n| n as u64);
    if let Some(t) = k.max_run_time {
        limits.max_run_time = seconds(t).ok_or_else(|| {
            format!("[daemon] max_run_time must be a positive number of seconds (at most a year), not {t}")
        })?;
    }
    if let Some(n) = k.max_tool_calls_per_step {
        if n == 0 {
            return Err("[daemon] max_tool_calls_per_step must be at least 1".into());
        }
        limits.max_tool_calls_per_step = n;
    }
    if let Some(n) = k.max_host_calls_per_step {
        if n == 0 {
            return Err("[daemon] max_host_calls_per_step must be at least 1".into());
        }
        limits.max_host_calls_per_step = n;
    }
    // Below these a normal run cannot work: a tool result must fit its
    // note, a message its framing.
    const MIN_BYTES: usize = 4 << 10;
    let at_least = |key: &str, v: usize, min: usize| {
        if v < min {
            Err(format!(
                "[daemon] {key} must be at least {min} bytes, not {v}"
            ))
        } else {
            Ok(v)
        }
    };
    if let Some(n) = max_tool_result_bytes {
        limits.max_tool_result_bytes = at_least("max_tool_result_bytes", n, MIN_BYTES)?;
        if max_message_bytes.is_none() {
            limits.max_message_bytes = limits.max_message_bytes.max(n.saturating_mul(2));
        }
    }
    if let Some(n) = max_message_bytes {
        limits.max_message_bytes = at_least("max_message_bytes", n, MIN_BYTES)?;
        let needed = limits
            .max_tool_result_bytes
            .saturating_add(MESSAGE_FRAMING_BYTES);
        if n < needed {
            return Err(format!(
                "[daemon] max_message_bytes ({n}) must exceed max_tool_result_bytes ({}) by at least {MESSAGE_FRAMING_BYTES} bytes: a tool message carries a tool's result and the strategy's words around it (max_tool_result_bytes defaults to [sandbox] output_limit, at least {MIN_TOOL_RESULT_BYTES})",
                limits.max_tool_result_bytes
            ));
        }
    }
    if let Some(n) = max_tool_arguments_bytes {
        limits.max_tool_arguments_bytes = at_least("max_tool_arguments_bytes", n, MIN_BYTES)?;
    }
    if let Some(n) = max_run_bytes {
        let min = (limits.max_message_bytes as u64).saturating_mul(2);
        if n < min {
            return Err(format!(
                "[daemon] max_run_bytes must be at least twice max_message_bytes ({min} bytes), not {n}"
            ));
        }
        limits.max_run_bytes = n;
    }
    Ok(limits)
}

/// A positive, representable number of seconds, at most a year (`1e20` is
/// neither a sensible timeout nor a `Duration`).
fn seconds(t: f64) -> Option<Duration> {
    Duration::try_from_secs_f64(t)
        .ok()
        .filter(|d| !d.is_zero() && *d <= Duration::from_secs(365 * 24 * 3600))
}

/// The line of the key a semantic error names. Such errors start with
/// `[table] key`; the file is valid TOML by then, so a line scan suffices.
fn locate(text: &str, message: &str) -> Option<usize> {
    let rest = message.strip_prefix('[')?;
    let (table, rest) = rest.split_once(']')?;
    let key = rest.split_whitespace().next()?;
    let mut current = String::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.split(']').next()) {
            current = header.trim().to_lowercase();
            continue;
        }
        let is_key = line
            .strip_prefix(key)
            .is_some_and(|after| after.trim_start().starts_with('='));
        if is_key && current == table.to_lowercase() {
            return Some(i + 1);
        }
    }
    None
}

/// `[[sandbox.engines]]` checked, or the offset of the entry at fault and
/// why. `docker_host_too` is whether `[sandbox] docker_host` is set, which
/// the entries replace.
fn engines(
    keys: &[toml::Spanned<file::EngineKeys>],
    docker_host_too: bool,
) -> Result<Vec<crate::sandbox::EngineConfig>, (usize, String)> {
    use crate::sandbox::fleet;
    let mut out: Vec<crate::sandbox::EngineConfig> = Vec::new();
    for spanned in keys {
        let at = spanned.span().start;
        let k = spanned.get_ref();
        if docker_host_too {
            return Err((
                at,
                "[sandbox] docker_host and [[sandbox.engines]] are both set: give each engine \
                 its own docker_host and drop the one in [sandbox]"
                    .into(),
            ));
        }
        let name = k.name.clone().unwrap_or_default();
        let tls = fleet::tls_files(
            &name,
            k.tls_ca.clone(),
            k.tls_cert.clone(),
            k.tls_key.clone(),
        )
        .map_err(|m| (at, m))?;
        let Some(max) = k.max_containers else {
            return Err((
                at,
                format!("[[sandbox.engines]] `{name}`: max_containers is required"),
            ));
        };
        let engine = crate::sandbox::EngineConfig {
            name,
            docker_host: k.docker_host.clone(),
            tls,
            max_containers: Some(usize::try_from(max).unwrap_or(usize::MAX)),
            weight: k.weight.unwrap_or(1.0),
        };
        let seen: Vec<&str> = out.iter().map(|e| e.name.as_str()).collect();
        fleet::check(&engine, &seen).map_err(|m| (at, m))?;
        out.push(engine);
    }
    Ok(out)
}

fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset.min(text.len()))
        .map(|prefix| prefix.matches('\n').count() + 1)
        .unwrap_or(1)
}

#[cfg(test)]
mod tests;

/// A byte-size key (`1048576`, or `"1m"` as Docker writes sizes) in bytes,
/// or `None` when it is not set; the error names `key`.
fn size_key(value: &Option<size::ByteSize>, key: &str) -> Result<Option<usize>, String> {
    let Some(size) = value else {
        return Ok(None);
    };
    let bytes = size.bytes(key)?;
    usize::try_from(bytes)
        .map(Some)
        .map_err(|_| format!("{key} is too large"))
}

/// One user's share of a whole (`[daemon] key`, of `total` `what`s): 0 is
/// refused, not rounded up, since it would lock every user out, root
/// included, and cannot be what was meant; above the whole it is clamped to
/// it rather than refused, so lowering the whole alone (under the share's
/// default) stays valid.
fn per_user_share(
    value: Option<usize>,
    default: usize,
    total: usize,
    key: &str,
    what: &str,
) -> Result<usize, String> {
    match value {
        None => Ok(default.min(total)),
        Some(0) => Err(format!(
            "[daemon] {key} must be at least 1 (0 would refuse every {what})"
        )),
        Some(n) => Ok(n.min(total)),
    }
}
