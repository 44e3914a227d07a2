//! The loaded plugins and the immutable set a run uses.
//!
//! The current set is an `Arc<PluginSet>` held by the
//! [`Catalog`](super::catalog::Catalog): a run takes a snapshot (an `Arc`
//! clone) when it starts and keeps it to its last step, so replacing a
//! plugin later never changes a run under way. How a plugin is built lives
//! in `loader.rs`, how the set is swapped in `catalog.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::meta::{PluginKind, PluginMeta};
use super::strategy::StrategyPlugin;
use super::tool::ToolPlugin;

/// Cloning is cheap (an `Arc`), and identity (`same_as`) tells whether a
/// rescan swapped the plugin or kept the very one already serving.
#[derive(Clone)]
pub enum LoadedPlugin {
    /// A strategy plugin, shared by the set and every run that uses it.
    Strategy(Arc<StrategyPlugin>),
    /// A tool plugin, shared by the set and every run that uses it.
    Tool(Arc<ToolPlugin>),
}

impl LoadedPlugin {
    /// What the plugin said about itself at load time.
    pub fn meta(&self) -> &PluginMeta {
        match self {
            LoadedPlugin::Strategy(p) => &p.meta,
            LoadedPlugin::Tool(p) => &p.meta,
        }
    }

    /// Strategy or tool: with the name, the key a plugin is served under.
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
    /// Strategies by their metadata name.
    pub strategies: BTreeMap<String, Arc<StrategyPlugin>>,
    /// Tools by their metadata name (which is also their spec's name).
    pub tools: BTreeMap<String, Arc<ToolPlugin>>,
}

impl PluginSet {
    /// The strategy serving under `name`, if any.
    pub fn strategy(&self, name: &str) -> Option<Arc<StrategyPlugin>> {
        self.strategies.get(name).cloned()
    }

    /// The tool serving under `name`, if any.
    pub fn tool(&self, name: &str) -> Option<Arc<ToolPlugin>> {
        self.tools.get(name).cloned()
    }

    /// Every plugin's metadata: strategies first, then tools, each by name.
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
