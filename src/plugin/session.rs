//! One run's strategy instance: instantiated once when the run starts, then
//! asked for one step at a time under the step deadline, which counts only
//! plugin time (see [`super::clock`]), and the run's cancel token. The run
//! loop gives it a [`RunHost`] and gets back how each step ended; it never
//! sees a store or a generated binding.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use wasmtime::Store;

use super::clock::StepClock;
use super::grants::Grants;
use super::host_tool::RunTools;
use super::human::AskHuman;
use super::limits::LimitHit;
use super::plan::RunPlan;
use super::run_host::RunHost;
use super::store::new_store;
use super::strategy::{StrategyInstance, StrategyPlugin};
use super::strategy_host::StrategyState;
use super::tool::ToolBox;
use crate::sandbox::Sandbox;

/// How one `step()` ended.
#[derive(Debug, Clone, PartialEq)]
pub enum StepEnd {
    /// The step's result line.
    Done(String),
    /// The strategy reported an error.
    Failed(String),
    /// The strategy trapped; its instance is dead.
    Trapped(String),
    /// The plugin time of the step passed the deadline; `culprit` is the
    /// plugin that was executing (the strategy, or a tool it invoked).
    Overran {
        /// The name of the plugin executing when the deadline passed.
        culprit: String,
    },
    /// A plugin (the strategy, or a tool it invoked) was stopped by one of
    /// the host's limits: memory, stack, handles (and, for the strategy,
    /// bytes per call). Unlike
    /// a tool's ordinary trap this ends the run, since trying again would
    /// hit the same limit; `reason` names the plugin and the limit.
    Stopped {
        /// The plugin stopped (the strategy's or a tool's name).
        plugin: String,
        /// What it passed, naming the plugin and the limit.
        reason: String,
    },
    /// The run's cancel token fired mid-step; the call was dropped.
    Cancelled,
}

/// Why a session could not start.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum SessionError {
    /// Instantiation failed (a trap in its start-up code, or the instance
    /// pool is exhausted); the run ends as `error` with this message.
    #[error("cannot instantiate strategy plugin `{plugin}`: {message}")]
    Instantiate {
        /// The strategy's name.
        plugin: String,
        /// wasmtime's error, with its causes.
        message: String,
    },
    /// Instantiation did not finish within the step deadline.
    #[error("strategy plugin `{plugin}` did not start within {}s", limit.as_secs_f64())]
    Slow {
        /// The strategy's name.
        plugin: String,
        /// The deadline it missed (the run's step timeout).
        limit: Duration,
    },
    /// Instantiating it already passed a limit (its initial memory is
    /// larger than `[plugins] memory_limit`, say).
    #[error("cannot instantiate strategy plugin: {0}")]
    Limit(LimitHit),
}

/// One run's live strategy instance in its own store, with the run's tools
/// and step clock; the loop calls [`StrategySession::step`] once per step.
pub struct StrategySession {
    name: Arc<str>,
    store: Store<StrategyState>,
    instance: StrategyInstance,
    clock: Arc<StepClock>,
}

impl StrategySession {
    /// Instantiates `strategy` for one run, with the run's tools (each
    /// instantiated on its first call) acting on `sandbox`, each plugin
    /// given what `grants` grants it; the strategy's and the tools'
    /// `human.ask` go to `human`, the strategy's `plan` to `plan`.
    /// Instantiation is bounded by `limit`; dropping the future abandons it.
    #[allow(clippy::too_many_arguments)]
    pub async fn start(
        strategy: &StrategyPlugin,
        tools: RunTools,
        sandbox: Arc<dyn Sandbox>,
        host: Arc<dyn RunHost>,
        human: Arc<dyn AskHuman>,
        plan: Arc<dyn RunPlan>,
        grants: Arc<Grants>,
        limit: Duration,
    ) -> Result<Self, SessionError> {
        let name: Arc<str> = strategy.meta.name.as_str().into();
        let clock = StepClock::new();
        let grant = grants.of(&name);
        let memory_limit = grant.memory_limit_or(strategy.memory_limit);
        let tools = ToolBox::new(tools.plugins, sandbox, clock.clone(), grants, human.clone())
            .with_hosted(tools.hosted);
        let mut store = new_store(
            strategy.pre.engine(),
            StrategyState::new(
                name.clone(),
                host,
                human,
                plan,
                tools,
                clock.clone(),
                memory_limit,
                grant,
            ),
        );
        let instance = match tokio::time::timeout(limit, strategy.pre.instantiate(&mut store)).await
        {
            Ok(Ok(i)) => i,
            Ok(Err(e)) => {
                if let Some(hit) = store.data().limit_hit(&e) {
                    return Err(SessionError::Limit(hit));
                }
                return Err(SessionError::Instantiate {
                    plugin: name.to_string(),
                    message: format!("{e:#}"),
                });
            }
            Err(_) => {
                return Err(SessionError::Slow {
                    plugin: name.to_string(),
                    limit,
                })
            }
        };
        Ok(StrategySession {
            name,
            store,
            instance,
            clock,
        })
    }

    /// One `step()` under `limit` of plugin time and `cancel`.
    pub async fn step(&mut self, limit: Duration, cancel: &CancellationToken) -> StepEnd {
        self.clock.start(&self.name);
        let ended = {
            let call = self.instance.step(&mut self.store);
            tokio::pin!(call);
            loop {
                let left = limit.saturating_sub(self.clock.guest_time());
                if left.is_zero() {
                    // Read before the call is dropped: dropping it unwinds the
                    // tool that was running back to the strategy.
                    let culprit = self.clock.running().unwrap_or_else(|| self.name.clone());
                    return StepEnd::Overran {
                        culprit: culprit.to_string(),
                    };
                }
                tokio::select! {
                    biased;
                    _ = cancel.cancelled() => return StepEnd::Cancelled,
                    r = &mut call => break r,
                    // Re-checked rather than trusted: time paused in host waits
                    // is added back, so the deadline moves.
                    _ = tokio::time::sleep(left) => {}
                }
            }
        };
        match ended {
            Ok(Ok(text)) => StepEnd::Done(text),
            Ok(Err(e)) => StepEnd::Failed(e.message),
            Err(trap) => self.trapped(trap),
        }
    }

    /// Plugin time of the step that last ran (the step clock's count,
    /// host waits left out), read as the step returns: the clock keeps
    /// counting until the next step starts it again.
    pub fn plugin_time(&self) -> Duration {
        self.clock.guest_time()
    }

    /// A trap of the step: a limit that stopped a tool the strategy invoked
    /// (raised through `invoke-tool`, see `strategy_host.rs`), a limit that
    /// stopped the strategy itself, or an ordinary trap.
    fn trapped(&self, trap: wasmtime::Error) -> StepEnd {
        let hit = trap
            .downcast_ref::<LimitHit>()
            .cloned()
            .or_else(|| self.store.data().limit_hit(&trap));
        match hit {
            Some(hit) => {
                tracing::warn!(plugin = hit.plugin(), error = %hit, trap = %format!("{trap:#}"), "plugin stopped by a limit");
                StepEnd::Stopped {
                    plugin: hit.plugin().to_string(),
                    reason: hit.to_string(),
                }
            }
            None => StepEnd::Trapped(format!("{trap:#}")),
        }
    }
}
