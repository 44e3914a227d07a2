//! A strategy plugin once loaded: [`StrategyPlugin`] (what the set holds),
//! its component linked and type-checked in whichever contract version it
//! was built against ([`StrategyPre`]), and one instance's exports
//! ([`StrategyInstance`]). The rest of the host prepares, instantiates and
//! calls strategies without caring which version a file speaks. The imports
//! those instances call are served by [`StrategyState`] (`strategy_host.rs`).

use wasmtime::component::{Component, Linker};
use wasmtime::{Engine, Store};

use super::bindings::types::{Error, PluginMetadata};
use super::bindings::{v0_1, v0_2, Contract};
use super::compat_v0_1;
use super::convert::choice_from_wit;
use super::meta::{PluginMeta, StrategyDefaults};
use super::strategy_host::StrategyState;

/// A loaded strategy: what it said about itself at load time, and its
/// component ready to instantiate once per run.
pub struct StrategyPlugin {
    /// What the strategy said about itself at load time.
    pub meta: PluginMeta,
    /// What its `defaults()` returned at load time; each run's settings are
    /// resolved from this copy, without calling the plugin again.
    pub defaults: StrategyDefaults,
    /// The component ready to instantiate; one instance per run.
    pub pre: StrategyPre,
    /// `[plugins] memory_limit` in bytes when it was loaded: each run's
    /// instance gets a store limited to it.
    pub memory_limit: usize,
}

/// Adds the strategy world of every contract version to `linker`.
pub fn link_strategy(linker: &mut Linker<StrategyState>) -> wasmtime::Result<()> {
    use wasmtime::component::HasSelf;
    v0_2::strategy::Strategy::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    v0_1::strategy::Strategy::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    Ok(())
}

/// A strategy component, linked and type-checked, ready to instantiate.
pub enum StrategyPre {
    /// Built against `agentd:plugin@0.1.0`.
    V0_1(v0_1::strategy::StrategyPre<StrategyState>),
    /// Built against `agentd:plugin@0.2.0`, `0.2.1`, `0.2.2`, `0.2.3` or `0.2.4` (the current contract).
    V0_2(v0_2::strategy::StrategyPre<StrategyState>),
}

impl StrategyPre {
    /// Pre-instantiates `component` against `linker` as the given contract
    /// version; fails when the component does not fit that version's world.
    pub fn new(
        linker: &Linker<StrategyState>,
        component: &Component,
        contract: Contract,
    ) -> wasmtime::Result<Self> {
        let pre = linker.instantiate_pre(component)?;
        Ok(match contract {
            Contract::V0_1 => StrategyPre::V0_1(v0_1::strategy::StrategyPre::new(pre)?),
            Contract::V0_2
            | Contract::V0_2_1
            | Contract::V0_2_2
            | Contract::V0_2_3
            | Contract::V0_2_4 => StrategyPre::V0_2(v0_2::strategy::StrategyPre::new(pre)?),
        })
    }

    /// The engine it was compiled for; its stores must be made from it.
    pub fn engine(&self) -> &Engine {
        match self {
            StrategyPre::V0_1(p) => p.engine(),
            StrategyPre::V0_2(p) => p.engine(),
        }
    }

    /// A fresh instance in `store`: one per run, plus one per load-time probe.
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

/// A live strategy instance, in whichever contract version it speaks; its
/// methods answer in the current version's types.
pub enum StrategyInstance {
    /// A 0.1.0 instance; its answers are converted in `compat_v0_1.rs`.
    V0_1(v0_1::strategy::Strategy),
    /// A 0.2.0 instance.
    V0_2(v0_2::strategy::Strategy),
}

impl StrategyInstance {
    /// Its `metadata()`: name, version, description (checked by the probe).
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
