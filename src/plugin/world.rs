//! A component of either world, whichever contract version it was built
//! against, behind one type: the rest of the host prepares, instantiates and
//! calls plugins without caring which version a file speaks.

use wasmtime::component::{Component, Linker};
use wasmtime::{Engine, Store};

use super::bindings::types::{Error, PluginMetadata, ToolSpec};
use super::bindings::{v0_1, v0_2, Contract};
use super::compat_v0_1;
use super::convert::choice_from_wit;
use super::registry::StrategyDefaults;
use super::strategy_host::StrategyState;
use super::tool_host::ToolState;

/// Which world, and which version of it, a component exports; `None` when
/// it exports neither world in any version the host knows.
pub fn detect(exports: &[String]) -> Option<(WorldKind, Contract)> {
    let has = |name: &str| exports.iter().any(|e| e == name);
    [
        (v0_2::STRATEGY_EXPORT, WorldKind::Strategy, Contract::V0_2),
        (v0_1::STRATEGY_EXPORT, WorldKind::Strategy, Contract::V0_1),
        (v0_2::TOOL_EXPORT, WorldKind::Tool, Contract::V0_2),
        (v0_1::TOOL_EXPORT, WorldKind::Tool, Contract::V0_1),
    ]
    .into_iter()
    .find(|(name, ..)| has(name))
    .map(|(_, kind, contract)| (kind, contract))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_version_of_each_world_is_recognised() {
        let one = |s: &str| vec![s.to_string(), "wasi:cli/run@0.2.0".to_string()];
        assert_eq!(
            detect(&one("agentd:plugin/strategy-api@0.2.0")),
            Some((WorldKind::Strategy, Contract::V0_2))
        );
        assert_eq!(
            detect(&one("agentd:plugin/tool-api@0.1.0")),
            Some((WorldKind::Tool, Contract::V0_1))
        );
        let future = one("agentd:plugin/strategy-api@0.3.0");
        assert_eq!(detect(&future), None);
        let message = unknown_version(&future).expect("a version message");
        assert!(
            message.contains("agentd:plugin@0.3.0") && message.contains(SUPPORTED),
            "{message}"
        );
        assert_eq!(unknown_version(&one("other:thing/api@1.0.0")), None);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorldKind {
    Strategy,
    Tool,
}

/// The contract versions this host serves, for messages.
pub const SUPPORTED: &str = "0.1.0 and 0.2.0";

/// For a component that exports a plugin world of a contract version this
/// host does not know (built with a newer SDK, say), the message that says
/// so, rather than a generic "exports neither".
pub fn unknown_version(exports: &[String]) -> Option<String> {
    exports.iter().find_map(|e| {
        let rest = e
            .strip_prefix("agentd:plugin/strategy-api@")
            .or_else(|| e.strip_prefix("agentd:plugin/tool-api@"))?;
        Some(format!(
            "is built against agentd:plugin@{rest}; this agentd serves versions {SUPPORTED} (upgrade agentd, or rebuild the plugin with an SDK for one of those)"
        ))
    })
}

/// Every export name the host accepts, for the error about a component that
/// exports none of them.
pub fn known_exports() -> String {
    [
        v0_2::STRATEGY_EXPORT,
        v0_2::TOOL_EXPORT,
        v0_1::STRATEGY_EXPORT,
        v0_1::TOOL_EXPORT,
    ]
    .join(", ")
}

/// Adds the strategy world of every contract version to `linker`.
pub fn link_strategy(linker: &mut Linker<StrategyState>) -> wasmtime::Result<()> {
    use wasmtime::component::HasSelf;
    v0_2::strategy::Strategy::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    v0_1::strategy::Strategy::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    Ok(())
}

/// Adds the tool world of every contract version to `linker`.
pub fn link_tool(linker: &mut Linker<ToolState>) -> wasmtime::Result<()> {
    use wasmtime::component::HasSelf;
    v0_2::tool::Tool::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    v0_1::tool::Tool::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    Ok(())
}

/// A strategy component, linked and type-checked, ready to instantiate.
pub enum StrategyPre {
    V0_1(v0_1::strategy::StrategyPre<StrategyState>),
    V0_2(v0_2::strategy::StrategyPre<StrategyState>),
}

impl StrategyPre {
    pub fn new(
        linker: &Linker<StrategyState>,
        component: &Component,
        contract: Contract,
    ) -> wasmtime::Result<Self> {
        let pre = linker.instantiate_pre(component)?;
        Ok(match contract {
            Contract::V0_1 => StrategyPre::V0_1(v0_1::strategy::StrategyPre::new(pre)?),
            Contract::V0_2 => StrategyPre::V0_2(v0_2::strategy::StrategyPre::new(pre)?),
        })
    }

    pub fn contract(&self) -> Contract {
        match self {
            StrategyPre::V0_1(_) => Contract::V0_1,
            StrategyPre::V0_2(_) => Contract::V0_2,
        }
    }

    pub fn engine(&self) -> &Engine {
        match self {
            StrategyPre::V0_1(p) => p.engine(),
            StrategyPre::V0_2(p) => p.engine(),
        }
    }

    pub async fn instantiate(
        &self,
        store: &mut Store<StrategyState>,
    ) -> wasmtime::Result<StrategyInstance> {
        Ok(match self {
            StrategyPre::V0_1(p) => StrategyInstance::V0_1(p.instantiate_async(store).await?),
            StrategyPre::V0_2(p) => StrategyInstance::V0_2(p.instantiate_async(store).await?),
        })
    }
}

pub enum StrategyInstance {
    V0_1(v0_1::strategy::Strategy),
    V0_2(v0_2::strategy::Strategy),
}

impl StrategyInstance {
    pub async fn metadata(
        &self,
        store: &mut Store<StrategyState>,
    ) -> wasmtime::Result<PluginMetadata> {
        Ok(match self {
            StrategyInstance::V0_1(i) => {
                compat_v0_1::metadata(i.agentd_plugin_strategy_api().call_metadata(store).await?)
            }
            StrategyInstance::V0_2(i) => {
                i.agentd_plugin_strategy_api().call_metadata(store).await?
            }
        })
    }

    /// What the strategy wants when the agent does not say; a 0.1.0
    /// strategy can only name a step limit.
    pub async fn defaults(
        &self,
        store: &mut Store<StrategyState>,
    ) -> wasmtime::Result<StrategyDefaults> {
        Ok(match self {
            StrategyInstance::V0_1(i) => StrategyDefaults {
                max_steps: i
                    .agentd_plugin_strategy_api()
                    .call_default_max_steps(store)
                    .await?,
                ..StrategyDefaults::default()
            },
            StrategyInstance::V0_2(i) => {
                let d = i.agentd_plugin_strategy_api().call_defaults(store).await?;
                StrategyDefaults {
                    system_prompt: d.system_prompt,
                    next_step_prompt: d.next_step_prompt,
                    max_steps: d.max_steps,
                    tool_choice: d.tool_choice.map(choice_from_wit),
                    special_tools: d.special_tools,
                }
            }
        })
    }

    /// One `step()`: the outer error is a trap, the inner one the
    /// strategy's own.
    pub async fn step(
        &self,
        store: &mut Store<StrategyState>,
    ) -> wasmtime::Result<Result<String, Error>> {
        Ok(match self {
            StrategyInstance::V0_1(i) => i
                .agentd_plugin_strategy_api()
                .call_step(store)
                .await?
                .map_err(compat_v0_1::error),
            StrategyInstance::V0_2(i) => i.agentd_plugin_strategy_api().call_step(store).await?,
        })
    }
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

    pub async fn spec(&self, store: &mut Store<ToolState>) -> wasmtime::Result<ToolSpec> {
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
