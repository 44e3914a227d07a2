//! The loaded plugins and the immutable set a run uses.
//!
//! The current set is an `Arc<PluginSet>` held by [`PluginHost`]: a run takes
//! a snapshot (an `Arc` clone) when it starts and keeps it to its last step,
//! so replacing a plugin later never changes a run under way. How the set is
//! built and swapped lives in `loader.rs` and `catalog.rs`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::bindings::Contract;
use super::world::{StrategyPre, ToolPre};
use super::PluginError;
use crate::llm::{ToolChoice, ToolSpec};

/// Kept here as well as in `plugin` so that `plugin::registry::PluginHost`
/// still names it for code written before the host moved to its own file.
pub use super::host::PluginHost;

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

pub struct StrategyPlugin {
    pub meta: PluginMeta,
    pub defaults: StrategyDefaults,
    pub pre: StrategyPre,
}

pub struct ToolPlugin {
    pub meta: PluginMeta,
    pub spec: ToolSpec,
    pub pre: ToolPre,
}

/// Cloning is cheap (an `Arc`), and identity (`same_as`) tells whether a
/// rescan swapped the plugin or kept the very one already serving.
#[derive(Clone)]
pub enum LoadedPlugin {
    Strategy(Arc<StrategyPlugin>),
    Tool(Arc<ToolPlugin>),
}

impl LoadedPlugin {
    pub fn meta(&self) -> &PluginMeta {
        match self {
            LoadedPlugin::Strategy(p) => &p.meta,
            LoadedPlugin::Tool(p) => &p.meta,
        }
    }

    pub fn kind(&self) -> PluginKind {
        self.meta().kind
    }

    /// The same loaded instance, not merely the same name and version: a
    /// file rewritten with identical metadata is still a new plugin.
    pub fn same_as(&self, other: &LoadedPlugin) -> bool {
        match (self, other) {
            (LoadedPlugin::Strategy(a), LoadedPlugin::Strategy(b)) => Arc::ptr_eq(a, b),
            (LoadedPlugin::Tool(a), LoadedPlugin::Tool(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// An immutable set of loaded plugins, by name.
#[derive(Default)]
pub struct PluginSet {
    pub strategies: BTreeMap<String, Arc<StrategyPlugin>>,
    pub tools: BTreeMap<String, Arc<ToolPlugin>>,
}

impl PluginSet {
    pub fn strategy(&self, name: &str) -> Option<Arc<StrategyPlugin>> {
        self.strategies.get(name).cloned()
    }

    pub fn tool(&self, name: &str) -> Option<Arc<ToolPlugin>> {
        self.tools.get(name).cloned()
    }

    pub fn metas(&self) -> Vec<PluginMeta> {
        self.strategies
            .values()
            .map(|p| p.meta.clone())
            .chain(self.tools.values().map(|p| p.meta.clone()))
            .collect()
    }

    pub(super) fn insert(&mut self, plugin: LoadedPlugin) {
        match plugin {
            LoadedPlugin::Strategy(p) => {
                self.strategies.insert(p.meta.name.clone(), p);
            }
            LoadedPlugin::Tool(p) => {
                self.tools.insert(p.meta.name.clone(), p);
            }
        }
    }
}

/// What [`PluginHost::load_dir`] found: the plugins now serving from the
/// folder, and the files that did not load (failed or in conflict), each
/// with an error that names the file. Both in file name order.
#[derive(Debug, Default)]
pub struct LoadReport {
    pub loaded: Vec<PluginMeta>,
    pub failed: Vec<(PathBuf, PluginError)>,
}
