//! Loading plugin components and keeping the current set of them.
//!
//! The current set is an `Arc<PluginSet>` behind a lock: a run takes a
//! snapshot (an `Arc` clone) when it starts and keeps it to its last step, so
//! replacing a plugin later never changes a run under way.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde::Serialize;
use tracing::{info, warn};
use wasmtime::component::{Component, Linker};
use wasmtime::Engine;

use super::bindings::strategy::{Strategy, StrategyPre};
use super::bindings::tool::{Tool, ToolPre};
use super::bindings::{STRATEGY_EXPORT, TOOL_EXPORT};
use super::convert::spec_from_wit;
use super::engine::{build_engine, EngineLimits};
use super::strategy_host::StrategyState;
use super::tool_host::ToolState;
use super::{new_store, PluginError};
use crate::llm::ToolSpec;
use crate::sandbox::NoSandbox;

/// A plugin that calls nothing but `metadata` must answer quickly.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
}

pub struct StrategyPlugin {
    pub meta: PluginMeta,
    pub default_max_steps: Option<u32>,
    pub pre: StrategyPre<StrategyState>,
}

pub struct ToolPlugin {
    pub meta: PluginMeta,
    pub spec: ToolSpec,
    pub pre: ToolPre<ToolState>,
}

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
}

#[derive(Debug, Default)]
pub struct LoadReport {
    pub loaded: Vec<PluginMeta>,
    pub failed: Vec<(PathBuf, PluginError)>,
}

pub struct PluginHost {
    engine: Engine,
    strategy_linker: Linker<StrategyState>,
    tool_linker: Linker<ToolState>,
    current: RwLock<Arc<PluginSet>>,
}

impl PluginHost {
    pub fn new(limits: EngineLimits) -> Result<Self, PluginError> {
        let engine = build_engine(limits)?;
        let link = |e: wasmtime::Error| PluginError::Engine(format!("cannot build linker: {e:#}"));
        let mut strategy_linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut strategy_linker).map_err(link)?;
        Strategy::add_to_linker::<_, wasmtime::component::HasSelf<_>>(&mut strategy_linker, |s| s)
            .map_err(link)?;
        let mut tool_linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut tool_linker).map_err(link)?;
        Tool::add_to_linker::<_, wasmtime::component::HasSelf<_>>(&mut tool_linker, |s| s)
            .map_err(link)?;
        Ok(PluginHost {
            engine,
            strategy_linker,
            tool_linker,
            current: RwLock::new(Arc::new(PluginSet::default())),
        })
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The set a run should use from start to finish.
    pub fn snapshot(&self) -> Arc<PluginSet> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Loads every `*.wasm` in `dir` and makes them the current set. A file
    /// that fails is reported and skipped; it never stops the others.
    pub async fn load_dir(&self, dir: &Path) -> Result<LoadReport, PluginError> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| PluginError::Io {
                path: dir.to_path_buf(),
                message: e.to_string(),
            })?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "wasm") && p.is_file())
            .collect();
        files.sort();
        let mut set = PluginSet::default();
        let mut report = LoadReport::default();
        for file in files {
            match self.load_file(&file).await {
                Ok(plugin) => {
                    let meta = plugin.meta().clone();
                    let clash = match &plugin {
                        LoadedPlugin::Strategy(_) => {
                            set.strategies.get(&meta.name).map(|p| p.meta.file.clone())
                        }
                        LoadedPlugin::Tool(_) => {
                            set.tools.get(&meta.name).map(|p| p.meta.file.clone())
                        }
                    };
                    if let Some(earlier) = clash {
                        let e = PluginError::Conflict {
                            path: file.clone(),
                            name: meta.name.clone(),
                            earlier,
                        };
                        warn!(file = %file.display(), error = %e, "plugin not loaded");
                        report.failed.push((file, e));
                        continue;
                    }
                    info!(name = %meta.name, version = %meta.version, kind = ?meta.kind, file = %file.display(), "plugin loaded");
                    match plugin {
                        LoadedPlugin::Strategy(p) => {
                            set.strategies.insert(meta.name.clone(), p);
                        }
                        LoadedPlugin::Tool(p) => {
                            set.tools.insert(meta.name.clone(), p);
                        }
                    }
                    report.loaded.push(meta);
                }
                Err(e) => {
                    warn!(file = %file.display(), error = %e, "plugin not loaded");
                    report.failed.push((file, e));
                }
            }
        }
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(set);
        Ok(report)
    }

    /// Compiles, type-checks and probes one component. Compilation runs off
    /// the async runtime: it takes tens of milliseconds of CPU.
    pub async fn load_file(&self, path: &Path) -> Result<LoadedPlugin, PluginError> {
        let bytes = tokio::fs::read(path).await.map_err(|e| PluginError::Io {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        let engine = self.engine.clone();
        let component = tokio::task::spawn_blocking(move || Component::new(&engine, &bytes))
            .await
            .map_err(|e| PluginError::Invalid {
                path: path.to_path_buf(),
                message: format!("compilation panicked: {e}"),
            })?
            .map_err(|e| PluginError::Invalid {
                path: path.to_path_buf(),
                message: format!("not a valid WebAssembly component: {e:#}"),
            })?;
        self.instantiate_checked(path, component).await
    }

    async fn instantiate_checked(
        &self,
        path: &Path,
        component: Component,
    ) -> Result<LoadedPlugin, PluginError> {
        let invalid = |message: String| PluginError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        let exports: Vec<String> = component
            .component_type()
            .exports(&self.engine)
            .map(|(name, _)| name.to_string())
            .collect();
        let file = path.to_path_buf();
        if exports.iter().any(|e| e == STRATEGY_EXPORT) {
            let pre = self
                .strategy_linker
                .instantiate_pre(&component)
                .and_then(StrategyPre::new)
                .map_err(|e| invalid(format!("does not fit the `strategy` world: {e:#}")))?;
            let mut store = new_store(&self.engine, StrategyState::probe("(loading)".into()));
            let probe = async {
                let inst = pre.instantiate_async(&mut store).await?;
                let api = inst.agentd_plugin_strategy_api();
                let meta = api.call_metadata(&mut store).await?;
                let steps = api.call_default_max_steps(&mut store).await?;
                Ok::<_, wasmtime::Error>((meta, steps))
            };
            let (meta, default_max_steps) = tokio::time::timeout(PROBE_TIMEOUT, probe)
                .await
                .map_err(|_| invalid("metadata() did not answer in time".into()))?
                .map_err(|e| invalid(format!("metadata() failed: {e:#}")))?;
            let meta = checked_meta(meta, PluginKind::Strategy, file).map_err(invalid)?;
            return Ok(LoadedPlugin::Strategy(Arc::new(StrategyPlugin {
                meta,
                default_max_steps,
                pre,
            })));
        }
        if exports.iter().any(|e| e == TOOL_EXPORT) {
            let pre = self
                .tool_linker
                .instantiate_pre(&component)
                .and_then(ToolPre::new)
                .map_err(|e| invalid(format!("does not fit the `tool` world: {e:#}")))?;
            let sandbox = crate::sandbox::SandboxProvider::for_run(
                &NoSandbox::new("load-time probe"),
                "probe",
            );
            let mut store = new_store(
                &self.engine,
                ToolState::new("(loading)".into(), sandbox, None),
            );
            let probe = async {
                let inst = pre.instantiate_async(&mut store).await?;
                let api = inst.agentd_plugin_tool_api();
                let meta = api.call_metadata(&mut store).await?;
                let spec = api.call_spec(&mut store).await?;
                Ok::<_, wasmtime::Error>((meta, spec))
            };
            let (meta, spec) = tokio::time::timeout(PROBE_TIMEOUT, probe)
                .await
                .map_err(|_| invalid("metadata() did not answer in time".into()))?
                .map_err(|e| invalid(format!("metadata() failed: {e:#}")))?;
            let meta = checked_meta(meta, PluginKind::Tool, file).map_err(invalid)?;
            let spec = spec_from_wit(spec);
            if spec.name != meta.name {
                return Err(invalid(format!(
                    "spec().name `{}` differs from metadata().name `{}`",
                    spec.name, meta.name
                )));
            }
            if serde_json::from_str::<serde_json::Value>(&spec.parameters).is_err() {
                return Err(invalid(format!(
                    "spec().parameters of `{}` is not valid JSON",
                    spec.name
                )));
            }
            return Ok(LoadedPlugin::Tool(Arc::new(ToolPlugin { meta, spec, pre })));
        }
        Err(invalid(format!(
            "exports neither `{STRATEGY_EXPORT}` nor `{TOOL_EXPORT}` (it exports: {})",
            if exports.is_empty() {
                "nothing".to_string()
            } else {
                exports.join(", ")
            }
        )))
    }
}

fn checked_meta(
    m: super::bindings::types::PluginMetadata,
    kind: PluginKind,
    file: PathBuf,
) -> Result<PluginMeta, String> {
    let valid_name = !m.name.is_empty()
        && m.name.len() <= 64
        && m.name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !valid_name {
        return Err(format!(
            "metadata().name {:?} is not a valid plugin name (1-64 of a-z, 0-9, `_`, `-`)",
            m.name
        ));
    }
    if m.version.trim().is_empty() {
        return Err(format!("plugin `{}` has an empty version", m.name));
    }
    Ok(PluginMeta {
        name: m.name,
        version: m.version,
        description: m.description,
        kind,
        file,
    })
}
