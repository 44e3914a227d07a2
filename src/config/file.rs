//! The TOML file as written by users. Every table refuses unknown keys: a
//! typo that silently falls back to a default is worse than an error.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use crate::chat::ToolChoice;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    #[serde(default)]
    pub llm: LlmSection,
    #[serde(default)]
    pub daemon: DaemonKeys,
    #[serde(default)]
    pub sandbox: SandboxKeys,
    #[serde(default)]
    pub plugins: PluginsKeys,
    #[serde(default)]
    pub mcp_server: McpServeKeys,
    #[serde(default)]
    pub agents: BTreeMap<String, AgentKeys>,
    /// `[mcp.<server>]`, by server name.
    #[serde(default)]
    pub mcp: BTreeMap<String, McpServerKeys>,
}

/// `[mcp.<server>]`: one MCP server whose tools agents may use, reached
/// either by starting `command` (stdio) or at `url` (Streamable HTTP).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerKeys {
    /// stdio: the program to start.
    pub command: Option<String>,
    /// stdio: its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// stdio: its environment (nothing else of the daemon's but `PATH`).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Secrets by name: a stdio server gets them in its environment; an
    /// HTTP server's `headers` may use them as `${NAME}`.
    #[serde(default)]
    pub secrets: Vec<String>,
    /// stdio: the folder it starts in.
    pub cwd: Option<PathBuf>,
    /// Streamable HTTP: the endpoint.
    pub url: Option<String>,
    /// Streamable HTTP: headers sent with every request.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// `false` keeps the table but starts nothing.
    pub enabled: Option<bool>,
    /// Seconds one tool call may take.
    pub timeout: Option<f64>,
    /// Seconds starting the server may take.
    pub start_timeout: Option<f64>,
    /// The server's tools agents may use (all when absent).
    pub tools: Option<Vec<String>>,
    /// A fresh server for each run that uses it.
    pub per_run: Option<bool>,
}

/// `[mcp_server]`: agentd as an MCP server at `/mcp` on its socket.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServeKeys {
    pub enabled: Option<bool>,
    /// Offer the loaded tool plugins as MCP tools too.
    pub expose_tools: Option<bool>,
    /// Seconds an MCP session's sandbox may go without a tool call.
    pub idle_timeout: Option<f64>,
}

/// `[plugins]`: what one plugin instance may take from the host, where
/// secret values are kept, and one `[plugins.<name>]` table per plugin
/// with its grants. A table value is a plugin's grants; any other key
/// must be one of the section's own (unknown ones are refused, as
/// everywhere).
#[derive(Debug, Default, Clone)]
pub struct PluginsKeys {
    /// Linear memory one plugin instance may hold, summed over its
    /// memories: bytes, or a size like `256m`.
    pub memory_limit: Option<super::size::ByteSize>,
    /// The file of `NAME=value` lines that `secrets` are read from (when
    /// systemd does not pass them as credentials); relative to the
    /// configuration file's folder.
    pub secrets_file: Option<PathBuf>,
    /// `[plugins.<name>]`, by plugin name.
    pub grants: BTreeMap<String, PluginGrantKeys>,
}

/// `[plugins.<name>]`: what the operator grants one plugin (deny by default).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginGrantKeys {
    /// Hosts (and ports) its HTTP requests may reach.
    #[serde(default)]
    pub allow_hosts: Vec<String>,
    /// Environment variables it sees, with their values.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Environment variables it sees whose values are secrets: names only
    /// here; the values come from the secrets file or systemd credentials.
    #[serde(default)]
    pub secrets: Vec<String>,
    /// Settings its `config` import reads: strings, numbers or booleans.
    #[serde(default)]
    pub config: BTreeMap<String, toml::Value>,
    /// Its memory limit instead of `[plugins] memory_limit`.
    pub memory_limit: Option<super::size::ByteSize>,
    /// Seconds: a strategy's step deadline, or one tool call's limit.
    pub timeout: Option<f64>,
}

impl<'de> Deserialize<'de> for PluginsKeys {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let table = toml::Table::deserialize(d)?;
        let mut keys = PluginsKeys::default();
        for (key, value) in table {
            match key.as_str() {
                "memory_limit" => {
                    keys.memory_limit = Some(value.try_into().map_err(D::Error::custom)?)
                }
                "secrets_file" => {
                    keys.secrets_file = Some(value.try_into().map_err(|e| {
                        D::Error::custom(format!("[plugins] secrets_file must be a path: {e}"))
                    })?)
                }
                _ if value.is_table() => {
                    let grant = value.try_into().map_err(|e: toml::de::Error| {
                        D::Error::custom(format!("[plugins.{key}] {}", e.message().trim()))
                    })?;
                    keys.grants.insert(key, grant);
                }
                _ => {
                    return Err(D::Error::custom(format!(
                        "unknown key `{key}` in [plugins] (its keys are memory_limit and secrets_file; a plugin's grants go in a table of their own, [plugins.<name>])"
                    )))
                }
            }
        }
        Ok(keys)
    }
}

/// Keys of `[llm]` and of each per-agent override (`[llm.<agent>]`,
/// `[agents.<agent>.llm]`).
#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LlmKeys {
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    /// Name of an environment variable holding the key, so the file itself
    /// can be world-readable.
    pub api_key_env: Option<String>,
    /// A file holding the key (surrounding whitespace ignored), read when
    /// the LLM clients are built, so the configuration file holds no secret.
    /// A relative path names a systemd credential: it is looked up in
    /// `$CREDENTIALS_DIRECTORY` (`LoadCredential=`) when that is set, else
    /// next to the configuration file.
    pub api_key_file: Option<PathBuf>,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f32>,
    pub max_input_tokens: Option<u64>,
    /// Seconds per HTTP request.
    pub timeout: Option<f64>,
    pub max_retries: Option<u32>,
    /// Upper bound of the first retry delay in milliseconds; doubles on each
    /// retry (the delay is drawn at random below the bound).
    pub retry_backoff_ms: Option<u64>,
    /// Retries after a request timed out, apart from `max_retries`: a model
    /// that always exceeds `timeout` must not be regenerated many times.
    pub timeout_retries: Option<u32>,
    /// Seconds: the longest `Retry-After` honoured.
    pub retry_max_wait: Option<f64>,
    /// PEM file of extra CA certificates to trust for this endpoint; a
    /// relative path is relative to the configuration file.
    pub ca_file: Option<PathBuf>,
    /// Price per million input (prompt) tokens, in the operator's currency:
    /// a run's `cost`.
    pub input_price: Option<f64>,
    /// Price per million output (completion) tokens.
    pub output_price: Option<f64>,
}

/// One `[llm.prices."<model>"]` table: the prices of the model of that name,
/// for every agent that uses it and sets no price of its own.
#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ModelPriceKeys {
    pub input_price: Option<f64>,
    pub output_price: Option<f64>,
}

impl LlmKeys {
    /// `self` overlaid with `over`, key by key.
    pub fn overlay(&self, over: &LlmKeys) -> LlmKeys {
        // `api_key`, `api_key_env` and `api_key_file` are one setting: an
        // override that sets any replaces all three.
        let own_key =
            over.api_key.is_some() || over.api_key_env.is_some() || over.api_key_file.is_some();
        let base = LlmKeys {
            api_key: if own_key { None } else { self.api_key.clone() },
            api_key_env: if own_key {
                None
            } else {
                self.api_key_env.clone()
            },
            api_key_file: if own_key {
                None
            } else {
                self.api_key_file.clone()
            },
            ..self.clone()
        };
        macro_rules! pick {
            ($($f:ident),*) => { LlmKeys { $($f: over.$f.clone().or_else(|| base.$f.clone())),* } };
        }
        pick!(
            model,
            base_url,
            api_key,
            api_key_env,
            api_key_file,
            max_tokens,
            temperature,
            max_input_tokens,
            timeout,
            max_retries,
            retry_backoff_ms,
            timeout_retries,
            retry_max_wait,
            ca_file,
            input_price,
            output_price
        )
    }
}

const LLM_KEYS: &[&str] = &[
    "model",
    "base_url",
    "api_key",
    "api_key_env",
    "api_key_file",
    "max_tokens",
    "temperature",
    "max_input_tokens",
    "timeout",
    "max_retries",
    "retry_backoff_ms",
    "timeout_retries",
    "retry_max_wait",
    "ca_file",
    "input_price",
    "output_price",
];

/// `[llm]` mixes the default keys with `[llm.<agent>]` sub-tables, which
/// serde's derive cannot express together with `deny_unknown_fields`. Errors
/// found here are kept with their byte span so the caller, which has the
/// text, can name the line.
#[derive(Debug, Default)]
pub struct LlmSection {
    pub base: LlmKeys,
    pub overrides: BTreeMap<String, LlmKeys>,
    /// `[llm.prices."<model>"]`, by model name as written.
    pub prices: BTreeMap<String, ModelPriceKeys>,
    /// Per override (agent name in lower case): the name as written and
    /// where its table is, so a name matching no agent can be reported
    /// with its line once the agents are known.
    pub override_sites: BTreeMap<String, (String, std::ops::Range<usize>)>,
    pub problems: Vec<(std::ops::Range<usize>, String)>,
}

impl<'de> Deserialize<'de> for LlmSection {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = LlmSection;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("the [llm] table")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LlmSection, A::Error> {
                let mut section = LlmSection::default();
                let mut base = toml::Table::new();
                while let Some(key) = map.next_key::<String>()? {
                    let value = map.next_value::<toml::Spanned<toml::Value>>()?;
                    let span = value.span();
                    let value = value.into_inner();
                    if LLM_KEYS.contains(&key.as_str()) {
                        // Checked one key at a time so the error names it.
                        let single = toml::Table::from_iter([(key.clone(), value.clone())]);
                        match LlmKeys::deserialize(toml::Value::Table(single)) {
                            Ok(_) => {
                                base.insert(key, value);
                            }
                            Err(e) => section
                                .problems
                                .push((span, format!("[llm] {key}: {}", e.message()))),
                        }
                        continue;
                    }
                    if key == "prices" {
                        read_prices(&mut section, value, span);
                        continue;
                    }
                    match value {
                        toml::Value::Table(t) => match LlmKeys::deserialize(toml::Value::Table(t)) {
                            Ok(keys) => {
                                let lower = key.to_lowercase();
                                // `[llm.Manus]` and `[llm.manus]` are one agent's:
                                // keeping either silently would lose the other.
                                if let Some((first, _)) = section.override_sites.get(&lower) {
                                    section.problems.push((
                                        span.clone(),
                                        format!("[llm.{key}] and [llm.{first}] are overrides of the same agent (names compare in lower case); keep one"),
                                    ));
                                }
                                section.override_sites.insert(lower.clone(), (key, span));
                                section.overrides.insert(lower, keys);
                            }
                            Err(e) => section
                                .problems
                                .push((span, format!("in [llm.{key}]: {}", e.message()))),
                        },
                        _ => section.problems.push((
                            span,
                            format!(
                                "unknown key `{key}` in [llm]; expected one of {}, or a [llm.<agent>] table",
                                LLM_KEYS.join(", ")
                            ),
                        )),
                    }
                }
                // Every key was checked above, so this cannot fail.
                section.base = LlmKeys::deserialize(toml::Value::Table(base)).unwrap_or_default();
                Ok(section)
            }
        }
        d.deserialize_map(V)
    }
}

/// `[llm.prices]`: a table of models, each a [`ModelPriceKeys`] table. (So
/// an agent named `prices` takes its overrides in `[agents.prices.llm]`.)
fn read_prices(section: &mut LlmSection, value: toml::Value, span: std::ops::Range<usize>) {
    let toml::Value::Table(models) = value else {
        section.problems.push((
            span,
            "[llm] prices must be a table of models: [llm.prices.\"<model>\"] with input_price and output_price".into(),
        ));
        return;
    };
    for (model, keys) in models {
        match ModelPriceKeys::deserialize(keys) {
            Ok(keys) => {
                section.prices.insert(model, keys);
            }
            Err(e) => section.problems.push((
                span.clone(),
                format!("in [llm.prices.\"{model}\"]: {}", e.message()),
            )),
        }
    }
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DaemonKeys {
    pub plugins_dir: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
    pub socket: Option<PathBuf>,
    /// Seconds a single step may run before the run ends with `error`.
    pub step_timeout: Option<f64>,
    pub max_concurrent_runs: Option<u32>,
    /// A group whose members may use the socket besides root and the
    /// daemon's own user.
    pub socket_group: Option<String>,
    /// Seconds running runs get after SIGTERM before they are cancelled.
    pub shutdown_grace: Option<f64>,
    /// Runs that ended longer ago than this many days are pruned; 0 keeps all.
    pub history_days: Option<u32>,
    /// Largest request body the API accepts, in bytes.
    pub max_request_bytes: Option<super::size::ByteSize>,
    /// Largest component `PUT /v1/plugins/{name}` accepts, in bytes.
    pub max_plugin_bytes: Option<super::size::ByteSize>,
    // The limits of each run (agent::RunLimits).
    /// Seconds of wall clock a run may take once it leaves the queue.
    pub max_run_time: Option<f64>,
    /// Bytes of transcript plus events one run may make the daemon keep.
    pub max_run_bytes: Option<super::size::ByteSize>,
    /// Tool calls run per step; further ones get an error observation.
    pub max_tool_calls_per_step: Option<u32>,
    /// LLM requests plus sandbox operations per step; further ones are
    /// refused at once.
    pub max_host_calls_per_step: Option<u32>,
    /// Bytes of a message's content.
    pub max_message_bytes: Option<super::size::ByteSize>,
    /// Bytes of one tool call's arguments.
    pub max_tool_arguments_bytes: Option<super::size::ByteSize>,
    /// Bytes of a tool's result kept (longer ones are cut with a note).
    pub max_tool_result_bytes: Option<super::size::ByteSize>,
    /// API connections open at once.
    pub max_connections: Option<usize>,
    /// API connections one user (uid) may have open at once.
    pub max_connections_per_user: Option<usize>,
    /// Runs waiting for a slot before `POST /v1/runs` answers 429.
    pub max_queued_runs: Option<usize>,
    /// Runs one user (uid) may have waiting for a slot.
    pub max_queued_runs_per_user: Option<usize>,
    /// Seconds a client has to send a request's headers (also the idle
    /// keep-alive timeout).
    pub header_timeout: Option<f64>,
    /// Seconds a client has to send a request's whole body.
    pub body_timeout: Option<f64>,
    /// Seconds a response may wait for the client to read any of it.
    pub write_timeout: Option<f64>,
    /// A TCP address (`127.0.0.1:9464`) serving `GET /metrics` only.
    pub metrics_listen: Option<String>,
    /// Load plugins through symbolic links in the plugins folder.
    pub follow_symlinks: Option<bool>,
    /// A run waiting for a person gives its `max_concurrent_runs` slot back.
    pub release_waiting: Option<bool>,
    /// Tokens (input plus output) all runs together may use per UTC day.
    pub daily_token_budget: Option<u64>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxKeys {
    pub image: Option<String>,
    pub work_dir: Option<String>,
    pub memory_limit: Option<String>,
    pub cpu_limit: Option<f64>,
    /// Seconds per command.
    pub timeout: Option<u64>,
    pub network_enabled: Option<bool>,
    pub pids_limit: Option<i64>,
    /// `unix://`, `tcp://` or `ssh://`; default: the local engine
    /// (`$DOCKER_HOST`, else the default socket).
    pub docker_host: Option<String>,
    /// Create the container when the run starts instead of on first use.
    pub create_on_start: Option<bool>,
    /// Bytes of stdout (and of stderr) kept per command.
    pub output_limit: Option<super::size::ByteSize>,
    /// Who commands run as: a user name of the image, `uid[:gid]`, or `root`.
    pub user: Option<String>,
    /// Size of the work dir's and of /tmp's tmpfs (`1g`, `256m`, ...).
    pub disk_limit: Option<String>,
    /// The `nofile` ulimit in the container.
    pub max_open_files: Option<u64>,
    /// Containers kept ready ahead of runs (0: none).
    pub pool_size: Option<usize>,
    /// `[[sandbox.engines]]`: the engines runs are placed on; none means
    /// the one engine of `docker_host`. The span locates errors.
    #[serde(default)]
    pub engines: Vec<toml::Spanned<EngineKeys>>,
}

/// One `[[sandbox.engines]]` entry.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineKeys {
    pub name: Option<String>,
    /// `unix://`, `tcp://` or `ssh://`.
    pub docker_host: Option<String>,
    /// For `tcp://` with TLS: the CA, this client's certificate and key.
    pub tls_ca: Option<PathBuf>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// Sandboxes placed on it at once.
    pub max_containers: Option<u64>,
    /// Default 1.
    pub weight: Option<f64>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentKeys {
    /// `[agents.<name>.llm]`: this agent's `[llm]` overrides. Unlike
    /// `[llm.<name>]` it works for any name, `timeout` or `model` included;
    /// the span locates the table in errors.
    pub llm: Option<toml::Spanned<LlmKeys>>,
    pub strategy: Option<String>,
    pub tools: Option<Vec<String>>,
    pub system_prompt: Option<String>,
    pub next_step_prompt: Option<String>,
    pub max_steps: Option<u32>,
    pub max_observe: Option<u32>,
    pub duplicate_threshold: Option<u32>,
    pub max_messages: Option<u32>,
    pub tool_choice: Option<ToolChoice>,
    pub special_tools: Option<Vec<String>>,
    /// Seconds: this agent's `[daemon] max_run_time`.
    pub max_run_time: Option<f64>,
    /// This agent's `[daemon] max_tool_calls_per_step`.
    pub max_tool_calls_per_step: Option<u32>,
    /// This agent's `[daemon] max_host_calls_per_step`.
    pub max_host_calls_per_step: Option<u32>,
    /// The tools whose calls wait for an operator's approval: a list of
    /// names, or `"all"`.
    pub approve: Option<ApproveKey>,
    /// Seconds a question waits for a person (default an hour).
    pub input_timeout: Option<f64>,
    /// Seconds a held tool call waits for a decision before it is denied
    /// (default an hour).
    pub approval_timeout: Option<f64>,
    /// Globs (relative to the work dir) of the files a run leaves behind.
    pub keep_files: Option<Vec<String>>,
    /// Bytes of kept files per run (`100m`, `1GiB`, or a number).
    pub keep_limit: Option<super::size::ByteSize>,
    /// Tokens (input plus output) this agent's runs may use per UTC day.
    pub daily_token_budget: Option<u64>,
}

/// `approve = ["bash"]` or `approve = "all"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum ApproveKey {
    Word(String),
    Tools(Vec<String>),
}
