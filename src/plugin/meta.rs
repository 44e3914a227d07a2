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
    Strategy,
    Tool,
}

#[derive(Debug, Clone, Serialize)]
pub struct PluginMeta {
    pub name: String,
    pub version: String,
    pub description: String,
    pub kind: PluginKind,
    pub file: PathBuf,
    /// The contract version the component was built against.
    #[serde(serialize_with = "contract_str")]
    pub contract: Contract,
}

fn contract_str<S: serde::Serializer>(c: &Contract, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(c.as_str())
}

/// What a strategy asks for when an agent's configuration is silent (the
/// strategy world's `defaults()`, read once at load time). `None` defers to
/// the daemon's default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StrategyDefaults {
    pub system_prompt: Option<String>,
    pub next_step_prompt: Option<String>,
    pub max_steps: Option<u32>,
    pub tool_choice: Option<ToolChoice>,
    pub special_tools: Option<Vec<String>>,
}
