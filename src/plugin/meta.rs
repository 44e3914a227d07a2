//! What a plugin says about itself, checked at load time: its kind, name,
//! version and contract ([`PluginMeta`]), and for a strategy the defaults it
//! asks for ([`StrategyDefaults`]). Plain data, below both worlds' code, so
//! that the strategy side, the tool side, the set and the catalog can all
//! name it without naming each other.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::bindings::Contract;
use crate::chat::ToolChoice;

/// Strategies and tools have separate namespaces (an agent names one
/// strategy and a list of tools), so a plugin is identified by kind and name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PluginKind {
    /// A `strategy` world component: it decides each step.
    Strategy,
    /// A `tool` world component: it does one thing the model can call.
    Tool,
}

/// What a plugin said about itself at load time, checked by the probe, plus
/// where it came from; `GET /v1/plugins` and `agentd plugins` show it.
#[derive(Debug, Clone, Serialize)]
pub struct PluginMeta {
    /// The name agents use to refer to it: 1-64 ASCII letters, digits, `_`
    /// or `-` (checked at load). For a tool it is also the name the model calls.
    pub name: String,
    /// The plugin's own version string (any non-empty text; not compared by
    /// the host, only reported).
    pub version: String,
    /// A short description from the plugin, shown in listings.
    pub description: String,
    /// Which world the component exports.
    pub kind: PluginKind,
    /// The file it was loaded from.
    pub file: PathBuf,
    /// The contract version the component was built against.
    #[serde(serialize_with = "contract_str")]
    pub contract: Contract,
    /// The interfaces the component imports, as named in it (sorted): what
    /// it may ask of the host, and so which grants it can use.
    pub imports: Vec<String>,
}

impl PluginMeta {
    /// The `[plugins.<name>]` keys that would give this plugin something
    /// it imports (see [`grants_for`]).
    pub fn grants_needed(&self) -> Vec<&'static str> {
        grants_for(&self.imports)
    }
}

/// Which `[plugins.<name>]` keys matter to a component with these imports:
/// `allow_hosts` for `wasi:http/outgoing-handler`, `env` and `secrets` for
/// `wasi:cli/environment`, `config` for `agentd:plugin/config`. Sorted, no
/// repeats. Other WASI imports (filesystem, sockets, ...) are linked but
/// never granted anything: no preopened directory, no socket.
pub fn grants_for(imports: &[String]) -> Vec<&'static str> {
    let mut keys: Vec<&'static str> = imports
        .iter()
        .flat_map(|import| {
            let interface = import.split('@').next().unwrap_or(import);
            match interface {
                "wasi:http/outgoing-handler" => &["allow_hosts"][..],
                "wasi:cli/environment" => &["env", "secrets"][..],
                "agentd:plugin/config" => &["config"][..],
                _ => &[][..],
            }
        })
        .copied()
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// Whether `name` may name a plugin: 1-64 ASCII letters, digits, `_` or
/// `-`. The probe holds every `metadata().name` to it, and the daemon's
/// install route to the name in its path, which becomes a file name: no
/// `/`, no `..`, no leading `.` that would hide the file from the catalog.
pub fn is_valid_plugin_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn contract_str<S: serde::Serializer>(c: &Contract, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(c.as_str())
}

/// What a strategy asks for when an agent's configuration is silent (the
/// strategy world's `defaults()`, read once at load time). `None` defers to
/// the daemon's default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StrategyDefaults {
    /// The system prompt the strategy wants; an empty one counts as none.
    pub system_prompt: Option<String>,
    /// Added as a `user` message before each step's request.
    pub next_step_prompt: Option<String>,
    /// The run's step limit; a `0` becomes 1 when settings are resolved.
    pub max_steps: Option<u32>,
    /// How the model may use tools in the strategy's requests.
    pub tool_choice: Option<ToolChoice>,
    /// Tools whose successful execution finishes the run.
    pub special_tools: Option<Vec<String>>,
}
