//! A tool plugin once loaded: [`ToolPlugin`] (what the set holds), its
//! component linked and type-checked in whichever contract version it was
//! built against ([`ToolPre`]), one instance's exports ([`ToolInstance`]),
//! and a run's tools ([`ToolBox`]). The imports those instances call are
//! served by [`ToolState`] (`tool_host.rs`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::{Component, Linker};
use wasmtime::{Engine, Store};

use super::bindings::types::{self as wit, Error, ErrorCode, PluginMetadata};
use super::bindings::{v0_1, v0_2, Contract};
use super::clock::StepClock;
use super::compat_v0_1;
use super::convert::error;
use super::grants::Grants;
use super::host_tool::HostTool;
use super::human::AskHuman;
use super::limits::LimitHit;
use super::meta::PluginMeta;
use super::store::new_store;
use super::tool_host::ToolState;
use crate::chat::ToolSpec;
use crate::sandbox::Sandbox;

/// A loaded tool: what it said about itself at load time (its spec is what
/// the model is shown), and its component ready to instantiate per run.
pub struct ToolPlugin {
    /// What the tool said about itself at load time.
    pub meta: PluginMeta,
    /// What the model is shown: name (equal to the metadata name, checked at
    /// load), description and JSON Schema parameters.
    pub spec: ToolSpec,
    /// The component ready to instantiate; one instance per run that calls it.
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
    /// Built against `agentd:plugin@0.1.0`.
    V0_1(v0_1::tool::ToolPre<ToolState>),
    /// Built against `agentd:plugin@0.2.0`, `0.2.1`, `0.2.2`, `0.2.3` or `0.2.4` (the current contract).
    V0_2(v0_2::tool::ToolPre<ToolState>),
}

impl ToolPre {
    /// Pre-instantiates `component` against `linker` as the given contract
    /// version; fails when the component does not fit that version's world.
    pub fn new(
        linker: &Linker<ToolState>,
        component: &Component,
        contract: Contract,
    ) -> wasmtime::Result<Self> {
        let pre = linker.instantiate_pre(component)?;
        Ok(match contract {
            Contract::V0_1 => ToolPre::V0_1(v0_1::tool::ToolPre::new(pre)?),
            Contract::V0_2
            | Contract::V0_2_1
            | Contract::V0_2_2
            | Contract::V0_2_3
            | Contract::V0_2_4 => ToolPre::V0_2(v0_2::tool::ToolPre::new(pre)?),
        })
    }

    /// The engine it was compiled for; its stores must be made from it.
    pub fn engine(&self) -> &Engine {
        match self {
            ToolPre::V0_1(p) => p.engine(),
            ToolPre::V0_2(p) => p.engine(),
        }
    }

    /// A fresh instance in `store`: one per run that calls the tool, plus one
    /// per load-time probe.
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

/// A live tool instance, in whichever contract version it speaks; its
/// methods answer in the current version's types.
pub enum ToolInstance {
    /// A 0.1.0 instance; its answers are converted in `compat_v0_1.rs`.
    V0_1(v0_1::tool::Tool),
    /// A 0.2.0 instance.
    V0_2(v0_2::tool::Tool),
}

impl ToolInstance {
    /// Its `metadata()`: name, version, description (checked by the probe).
    pub async fn metadata(&self, store: &mut Store<ToolState>) -> wasmtime::Result<PluginMetadata> {
        Ok(match self {
            ToolInstance::V0_1(i) => {
                compat_v0_1::metadata(i.agentd_plugin_tool_api().call_metadata(store).await?)
            }
            ToolInstance::V0_2(i) => i.agentd_plugin_tool_api().call_metadata(store).await?,
        })
    }

    /// Its `spec()`, read once at load time: what the model is shown.
    pub async fn spec(&self, store: &mut Store<ToolState>) -> wasmtime::Result<wit::ToolSpec> {
        Ok(match self {
            ToolInstance::V0_1(i) => {
                compat_v0_1::spec(i.agentd_plugin_tool_api().call_spec(store).await?)
            }
            ToolInstance::V0_2(i) => i.agentd_plugin_tool_api().call_spec(store).await?,
        })
    }

    /// One `invoke(arguments)`: the outer error is a trap, the inner one the
    /// tool's own. `arguments` is the model's JSON text, passed as is.
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
    /// The model called a tool this run does not have (not among the agent's
    /// `tools`); the message names it.
    #[error("unknown tool `{0}`")]
    Unknown(String),
    /// The tool reported an error itself.
    #[error("{}", .0.message)]
    Reported(wit::Error),
    /// The tool trapped; its instance is discarded and the next call gets a
    /// fresh one.
    #[error("tool plugin `{plugin}` trapped: {message}")]
    Trapped {
        /// The tool's name.
        plugin: String,
        /// The trap, or why the tool could not be instantiated.
        message: String,
    },
    /// One call took longer than the tool's `[plugins.<name>] timeout`; its
    /// instance is discarded and the model sees the failure.
    #[error("tool plugin `{plugin}` did not answer within its timeout of {}s ([plugins.{plugin}] timeout)", limit.as_secs_f64())]
    Timeout {
        /// The tool's name.
        plugin: String,
        /// Its `timeout`.
        limit: Duration,
    },
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

/// The tools of one run. Each tool component is instantiated on its first
/// call and then reused for the rest of the run, so a tool may keep state
/// between calls; host-served tools (MCP) are called through the same door.
pub struct ToolBox {
    plugins: HashMap<String, Arc<ToolPlugin>>,
    hosted: HashMap<String, Arc<dyn HostTool>>,
    live: HashMap<String, LiveTool>,
    sandbox: Arc<dyn Sandbox>,
    clock: Arc<StepClock>,
    /// The grants of the configuration the run was created under.
    grants: Arc<Grants>,
    /// Who answers the tools' `human.ask`: the run, or nobody.
    human: Arc<dyn AskHuman>,
    /// Each called tool's metric handles, made at its first call.
    metrics: super::metrics::ToolMetrics,
}

impl ToolBox {
    /// The tools an agent names, none instantiated yet; they act on `sandbox`,
    /// count their time on the run's `clock`, get what `grants` grants
    /// each of them, and ask `human` their questions.
    pub fn new(
        plugins: Vec<Arc<ToolPlugin>>,
        sandbox: Arc<dyn Sandbox>,
        clock: Arc<StepClock>,
        grants: Arc<Grants>,
        human: Arc<dyn AskHuman>,
    ) -> Self {
        ToolBox {
            clock,
            grants,
            human,
            plugins: plugins
                .into_iter()
                .map(|p| (p.meta.name.clone(), p))
                .collect(),
            hosted: HashMap::new(),
            live: HashMap::new(),
            sandbox,
            metrics: super::metrics::ToolMetrics::default(),
        }
    }

    /// Adds the host-served tools of the run (their names are distinct
    /// from the components', which the run loop checked).
    pub fn with_hosted(mut self, hosted: Vec<Arc<dyn HostTool>>) -> Self {
        self.hosted = hosted
            .into_iter()
            .map(|t| (t.spec().name.clone(), t))
            .collect();
        self
    }

    /// The version tool `name` gave of itself (`None` for a host-served one).
    pub fn version_of(&self, name: &str) -> Option<String> {
        Some(self.plugins.get(name)?.meta.version.clone())
    }

    /// Calls tool `name` with the model's `arguments`, instantiating it on the
    /// first call. A trap discards the instance, so the next call starts fresh.
    /// Recorded as a tool call (`plugin/metrics.rs`), under `unknown` for a
    /// name the run does not have, so the model cannot invent label values.
    pub async fn invoke(&mut self, name: &str, arguments: &str) -> Result<String, ToolFailure> {
        let started = std::time::Instant::now();
        let result = self.invoke_untimed(name, arguments).await;
        let known = self.plugins.contains_key(name) || self.hosted.contains_key(name);
        self.metrics
            .record(known.then_some(name), started.elapsed(), result.is_ok());
        result
    }

    async fn invoke_untimed(&mut self, name: &str, arguments: &str) -> Result<String, ToolFailure> {
        if let Some(tool) = self.hosted.get(name) {
            // A host wait, like a sandbox command: no plugin time passes.
            let _waiting = self.clock.pause();
            return tool
                .call(arguments)
                .await
                .map_err(|message| ToolFailure::Reported(error(ErrorCode::Failed, message)));
        }
        let Some(plugin) = self.plugins.get(name).cloned() else {
            return Err(ToolFailure::Unknown(name.to_string()));
        };
        let grant = self.grants.of(name);
        if !self.live.contains_key(name) {
            let memory_limit = grant.memory_limit_or(plugin.memory_limit);
            let mut store = new_store(
                plugin.pre.engine(),
                ToolState::new(
                    plugin.meta.name.as_str().into(),
                    self.sandbox.clone(),
                    self.clock.clone(),
                    memory_limit,
                    grant.clone(),
                    self.human.clone(),
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
        let result = match grant.timeout {
            None => live.instance.invoke(&mut live.store, arguments).await,
            Some(limit) => {
                let call = live.instance.invoke(&mut live.store, arguments);
                match within_tool_time(&self.clock, limit, call).await {
                    Some(r) => r,
                    None => {
                        // The call was dropped mid-way: its store is in no
                        // state to be called again.
                        self.live.remove(name);
                        tracing::warn!(
                            plugin = name,
                            limit_secs = limit.as_secs_f64(),
                            "tool call passed its [plugins.<name>] timeout"
                        );
                        return Err(ToolFailure::Timeout {
                            plugin: name.to_string(),
                            limit,
                        });
                    }
                }
            }
        };
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

/// Why [`call_once`] produced no result.
#[derive(Debug, thiserror::Error)]
pub enum CallFailure {
    /// The tool's own failure, as a run's model would see it.
    #[error(transparent)]
    Tool(#[from] ToolFailure),
    /// It ran for longer than the deadline it was given, in plugin time.
    #[error("the tool ran for more than [daemon] step_timeout ({} s) of plugin time and was stopped", .0.as_secs_f64())]
    Deadline(Duration),
}

/// One call of `tool` outside any run, in a fresh instance acting on
/// `sandbox` with what `grants` grants it, its questions to a person going
/// to `human` (neither caller has one: a [`super::human::NoHuman`] saying
/// why); its plugin time (sandbox waits do not count, as in a step) bounded
/// by its grant's `timeout`, else `step_timeout`. What `agentd plugin call`
/// and the daemon's MCP server both do: neither has a step to count
/// against. Dropping the future drops the call.
pub async fn call_once(
    tool: Arc<ToolPlugin>,
    sandbox: Arc<dyn Sandbox>,
    grants: Arc<Grants>,
    human: Arc<dyn AskHuman>,
    arguments: &str,
    step_timeout: Duration,
) -> Result<String, CallFailure> {
    let name: Arc<str> = tool.meta.name.as_str().into();
    let deadline = grants.of(&name).timeout.unwrap_or(step_timeout);
    let clock = StepClock::new();
    clock.start(&name);
    let mut tools = ToolBox::new(vec![tool], sandbox, clock.clone(), grants, human);
    let invoke = tools.invoke(&name, arguments);
    tokio::pin!(invoke);
    loop {
        let left = deadline.saturating_sub(clock.guest_time());
        if left.is_zero() {
            return Err(CallFailure::Deadline(deadline));
        }
        tokio::select! {
            result = &mut invoke => return result.map_err(CallFailure::Tool),
            // The clock may have been paused meanwhile (a sandbox wait):
            // look again at how much plugin time is left.
            _ = tokio::time::sleep(left) => {}
        }
    }
}

/// Runs `call` until it has taken `limit` of plugin time on `clock` (time
/// paused in sandbox waits does not count, as for the step deadline);
/// `None` when it took longer, and the call is dropped.
async fn within_tool_time<T>(
    clock: &StepClock,
    limit: Duration,
    call: impl std::future::Future<Output = T>,
) -> Option<T> {
    let start = clock.guest_time();
    tokio::pin!(call);
    loop {
        let used = clock.guest_time().saturating_sub(start);
        let left = limit.saturating_sub(used);
        if left.is_zero() {
            return None;
        }
        tokio::select! {
            biased;
            r = &mut call => return Some(r),
            _ = tokio::time::sleep(left) => {}
        }
    }
}

impl ToolFailure {
    /// The error a strategy sees from `invoke-tool`: the tool's own error as
    /// is, or `unknown-tool` / `failed` with this failure's message.
    pub fn into_wit(self) -> wit::Error {
        match self {
            ToolFailure::Unknown(n) => error(ErrorCode::UnknownTool, format!("unknown tool `{n}`")),
            ToolFailure::Reported(e) => e,
            t @ (ToolFailure::Trapped { .. }
            | ToolFailure::Timeout { .. }
            | ToolFailure::Limit(_)) => error(ErrorCode::Failed, t.to_string()),
        }
    }
}
