//! A tool plugin once loaded: [`ToolPlugin`] (what the set holds), its
//! component linked and type-checked in whichever contract version it was
//! built against ([`ToolPre`]), one instance's exports ([`ToolInstance`]),
//! and a run's tools ([`ToolBox`]). The imports those instances call are
//! served by [`ToolState`] (`tool_host.rs`).

use std::collections::HashMap;
use std::sync::Arc;

use wasmtime::component::{Component, Linker};
use wasmtime::{Engine, Store};

use super::bindings::types::{self as wit, Error, ErrorCode, PluginMetadata};
use super::bindings::{v0_1, v0_2, Contract};
use super::clock::StepClock;
use super::compat_v0_1;
use super::convert::error;
use super::limits::LimitHit;
use super::meta::PluginMeta;
use super::store::new_store;
use super::tool_host::ToolState;
use crate::chat::ToolSpec;
use crate::sandbox::Sandbox;

/// A loaded tool: what it said about itself at load time (its spec is what
/// the model is shown), and its component ready to instantiate per run.
pub struct ToolPlugin {
    pub meta: PluginMeta,
    pub spec: ToolSpec,
    pub pre: ToolPre,
    /// `[plugins] memory_limit` in bytes when it was loaded: each run's
    /// instance of this tool gets a store limited to it.
    pub memory_limit: usize,
}

/// Adds the tool world of every contract version to `linker`.
pub fn link_tool(linker: &mut Linker<ToolState>) -> wasmtime::Result<()> {
    use wasmtime::component::HasSelf;
    v0_2::tool::Tool::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    v0_1::tool::Tool::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    Ok(())
}

/// A tool component, linked and type-checked, ready to instantiate.
pub enum ToolPre {
    V0_1(v0_1::tool::ToolPre<ToolState>),
    V0_2(v0_2::tool::ToolPre<ToolState>),
}

impl ToolPre {
    pub fn new(
        linker: &Linker<ToolState>,
        component: &Component,
        contract: Contract,
    ) -> wasmtime::Result<Self> {
        let pre = linker.instantiate_pre(component)?;
        Ok(match contract {
            Contract::V0_1 => ToolPre::V0_1(v0_1::tool::ToolPre::new(pre)?),
            Contract::V0_2 => ToolPre::V0_2(v0_2::tool::ToolPre::new(pre)?),
        })
    }

    pub fn contract(&self) -> Contract {
        match self {
            ToolPre::V0_1(_) => Contract::V0_1,
            ToolPre::V0_2(_) => Contract::V0_2,
        }
    }

    pub fn engine(&self) -> &Engine {
        match self {
            ToolPre::V0_1(p) => p.engine(),
            ToolPre::V0_2(p) => p.engine(),
        }
    }

    pub async fn instantiate(
        &self,
        store: &mut Store<ToolState>,
    ) -> wasmtime::Result<ToolInstance> {
        Ok(match self {
            ToolPre::V0_1(p) => ToolInstance::V0_1(p.instantiate_async(store).await?),
            ToolPre::V0_2(p) => ToolInstance::V0_2(p.instantiate_async(store).await?),
        })
    }
}

pub enum ToolInstance {
    V0_1(v0_1::tool::Tool),
    V0_2(v0_2::tool::Tool),
}

impl ToolInstance {
    pub async fn metadata(&self, store: &mut Store<ToolState>) -> wasmtime::Result<PluginMetadata> {
        Ok(match self {
            ToolInstance::V0_1(i) => {
                compat_v0_1::metadata(i.agentd_plugin_tool_api().call_metadata(store).await?)
            }
            ToolInstance::V0_2(i) => i.agentd_plugin_tool_api().call_metadata(store).await?,
        })
    }

    pub async fn spec(&self, store: &mut Store<ToolState>) -> wasmtime::Result<wit::ToolSpec> {
        Ok(match self {
            ToolInstance::V0_1(i) => {
                compat_v0_1::spec(i.agentd_plugin_tool_api().call_spec(store).await?)
            }
            ToolInstance::V0_2(i) => i.agentd_plugin_tool_api().call_spec(store).await?,
        })
    }

    pub async fn invoke(
        &self,
        store: &mut Store<ToolState>,
        arguments: &str,
    ) -> wasmtime::Result<Result<String, Error>> {
        Ok(match self {
            ToolInstance::V0_1(i) => i
                .agentd_plugin_tool_api()
                .call_invoke(store, arguments)
                .await?
                .map_err(compat_v0_1::error),
            ToolInstance::V0_2(i) => {
                i.agentd_plugin_tool_api()
                    .call_invoke(store, arguments)
                    .await?
            }
        })
    }
}

/// Why a tool call produced no result.
#[derive(Debug, thiserror::Error)]
pub enum ToolFailure {
    #[error("unknown tool `{0}`")]
    Unknown(String),
    /// The tool reported an error itself.
    #[error("{}", .0.message)]
    Reported(wit::Error),
    /// The tool trapped; its instance is discarded and the next call gets a
    /// fresh one.
    #[error("tool plugin `{plugin}` trapped: {message}")]
    Trapped { plugin: String, message: String },
    /// The tool was stopped by one of the host's limits (memory, stack,
    /// handles); the strategy host ends the run with it. (Too many bytes in
    /// one call is `Trapped`: the model can ask for less.)
    #[error("{0}")]
    Limit(LimitHit),
}

struct LiveTool {
    store: Store<ToolState>,
    instance: ToolInstance,
}

/// The tools of one run. Each tool is instantiated on its first call and then
/// reused for the rest of the run, so a tool may keep state between calls.
pub struct ToolBox {
    plugins: HashMap<String, Arc<ToolPlugin>>,
    live: HashMap<String, LiveTool>,
    sandbox: Arc<dyn Sandbox>,
    clock: Arc<StepClock>,
}

impl ToolBox {
    pub fn new(
        plugins: Vec<Arc<ToolPlugin>>,
        sandbox: Arc<dyn Sandbox>,
        clock: Arc<StepClock>,
    ) -> Self {
        ToolBox {
            clock,
            plugins: plugins
                .into_iter()
                .map(|p| (p.meta.name.clone(), p))
                .collect(),
            live: HashMap::new(),
            sandbox,
        }
    }

    pub async fn invoke(&mut self, name: &str, arguments: &str) -> Result<String, ToolFailure> {
        let Some(plugin) = self.plugins.get(name).cloned() else {
            return Err(ToolFailure::Unknown(name.to_string()));
        };
        if !self.live.contains_key(name) {
            let mut store = new_store(
                plugin.pre.engine(),
                ToolState::new(
                    plugin.meta.name.as_str().into(),
                    self.sandbox.clone(),
                    self.clock.clone(),
                    plugin.memory_limit,
                ),
            );
            let instance = match plugin.pre.instantiate(&mut store).await {
                Ok(i) => i,
                Err(e) => {
                    return Err(match store.data().limit_hit(&e) {
                        Some(hit) => ToolFailure::Limit(hit),
                        None => ToolFailure::Trapped {
                            plugin: name.to_string(),
                            message: format!("cannot instantiate: {e:#}"),
                        },
                    })
                }
            };
            self.live
                .insert(name.to_string(), LiveTool { store, instance });
        }
        let Some(live) = self.live.get_mut(name) else {
            return Err(ToolFailure::Unknown(name.to_string()));
        };
        let result = live.instance.invoke(&mut live.store, arguments).await;
        match result {
            Ok(Ok(text)) => Ok(text),
            Ok(Err(e)) => Err(ToolFailure::Reported(e)),
            Err(trap) => {
                let hit = live.store.data().limit_hit(&trap);
                self.live.remove(name);
                Err(match hit {
                    // Too much data in one call (a result or an argument
                    // over the per-call limit) was refused before the host
                    // allocated it; the model can ask for less, so it sees
                    // the refusal, and the instance is replaced.
                    Some(hit @ LimitHit::HostcallData { .. }) => ToolFailure::Trapped {
                        plugin: name.to_string(),
                        message: hit.to_string(),
                    },
                    Some(hit) => {
                        tracing::warn!(plugin = name, error = %hit, trap = %format!("{trap:#}"), "tool plugin stopped by a limit");
                        ToolFailure::Limit(hit)
                    }
                    None => ToolFailure::Trapped {
                        plugin: name.to_string(),
                        message: format!("{trap:#}"),
                    },
                })
            }
        }
    }
}

impl ToolFailure {
    pub fn into_wit(self) -> wit::Error {
        match self {
            ToolFailure::Unknown(n) => error(ErrorCode::UnknownTool, format!("unknown tool `{n}`")),
            ToolFailure::Reported(e) => e,
            t @ (ToolFailure::Trapped { .. } | ToolFailure::Limit(_)) => {
                error(ErrorCode::Failed, t.to_string())
            }
        }
    }
}
