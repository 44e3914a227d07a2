//! The host side of the `strategy` world: the imports a strategy uses to see
//! its agent, talk to the LLM and call tools, all served by the run through
//! [`RunHost`], asks the run's person through `human` ([`AskHuman`]), and
//! reads and publishes the run's plan through `plan` ([`RunPlan`]).
//! Waits on the LLM, on a person and on tools' sandboxes pause the step
//! clock here, where they happen. Every contract version's imports are
//! served here: 0.1.0's by converting to the current ones.

use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings::types::{self as wit, ErrorCode};
use super::bindings::v0_1::strategy::agentd::plugin::{
    agent as old_agent, logging as old_logging, types as old_types,
};
use super::bindings::v0_2::strategy::agentd::plugin::{agent, config, human, logging, plan};
use super::clock::StepClock;
use super::compat_v0_1::{old, Conv};
use super::convert::*;
use super::grants::PluginGrant;
use super::human::{AskHuman, NoHuman};
use super::limits::{LimitHit, StoreLimiter};
use super::log_rate::LogRate;
use super::plan::{plan_from_wit, plan_to_wit, publish_checked, NoPlan, RunPlan};
use super::run_host::{AddMessageError, ChatFailure, ProbeHost, Refused, RunHost};
use super::store::{capped_table, config_get, config_keys, plugin_log, sandboxed_wasi, Limited};
use super::tool::{ToolBox, ToolFailure};
use crate::chat::ToolSpec;
use crate::llm::ChatResponse;

/// The data of a strategy's store: its WASI context and handles, its
/// limiter, the run it serves, whoever answers the run's questions, and the
/// run's tools.
pub struct StrategyState {
    wasi: WasiCtx,
    /// What the operator granted the strategy: its environment and settings.
    grant: Arc<PluginGrant>,
    table: ResourceTable,
    limiter: StoreLimiter,
    plugin: Arc<str>,
    /// The store's log budget, shared with its stdout and stderr.
    log_rate: Arc<LogRate>,
    host: Arc<dyn RunHost>,
    /// Who answers `human.ask`: the run, or a [`NoHuman`].
    human: Arc<dyn AskHuman>,
    /// Who keeps the plan: the run, or a [`NoPlan`].
    plan: Arc<dyn RunPlan>,
    tools: ToolBox,
    clock: Arc<StepClock>,
}

impl StrategyState {
    /// The state of `plugin`'s store for one run, its memories summed
    /// limited to `memory_limit` bytes, with what `grant` grants, its
    /// questions answered by `human` and its plan kept by `plan`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        plugin: Arc<str>,
        host: Arc<dyn RunHost>,
        human: Arc<dyn AskHuman>,
        plan: Arc<dyn RunPlan>,
        tools: ToolBox,
        clock: Arc<StepClock>,
        memory_limit: usize,
        grant: Arc<PluginGrant>,
    ) -> Self {
        let log_rate = LogRate::new(plugin.clone());
        StrategyState {
            wasi: sandboxed_wasi(&log_rate, &grant),
            grant,
            table: capped_table(),
            limiter: StoreLimiter::new(memory_limit),
            plugin,
            log_rate,
            host,
            human,
            plan,
            tools,
            clock,
        }
    }

    /// For load-time probes (metadata, defaults) that must not touch any run.
    pub fn probe(plugin: Arc<str>, memory_limit: usize) -> Self {
        let sandbox = crate::sandbox::NoSandbox::new("load-time probe");
        let sandbox = crate::sandbox::SandboxProvider::for_run(&sandbox, "probe");
        let clock = StepClock::new();
        let human: Arc<dyn AskHuman> = Arc::new(NoHuman::PROBE);
        Self::new(
            plugin,
            Arc::new(ProbeHost),
            human.clone(),
            Arc::new(NoPlan::PROBE),
            ToolBox::new(Vec::new(), sandbox, clock.clone(), Arc::default(), human),
            clock,
            memory_limit,
            Arc::default(),
        )
    }

    /// Why the strategy stopped, if a limit stopped it (see
    /// [`super::limits::classify`]).
    pub(super) fn limit_hit(&self, error: &wasmtime::Error) -> Option<LimitHit> {
        super::limits::classify(error, &self.limiter, &self.plugin)
    }

    /// The model's answer, or why there is none, as the strategy gets it.
    fn answer(
        &self,
        result: Result<ChatResponse, ChatFailure>,
    ) -> Result<agent::ChatResponse, agent::ChatError> {
        match result {
            Ok(r) => Ok(agent::ChatResponse {
                message: message_to_wit(r.message),
                usage: usage_to_wit(r.usage),
                finish_reason: r.finish_reason.map(finish_to_wit),
            }),
            Err(ChatFailure::TokenLimit(m)) => Err(agent::ChatError::TokenLimit(m)),
            Err(ChatFailure::Invalid(m)) => Err(agent::ChatError::Failed(error(
                ErrorCode::InvalidInput,
                format!("strategy `{}`: {m}", self.plugin),
            ))),
            Err(ChatFailure::Failed(m)) => {
                Err(agent::ChatError::Failed(error(ErrorCode::LlmFailed, m)))
            }
        }
    }
}

impl Limited for StrategyState {
    fn limiter(&mut self) -> &mut StoreLimiter {
        &mut self.limiter
    }
}

impl WasiView for StrategyState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl wit::Host for StrategyState {}

impl config::Host for StrategyState {
    async fn get(&mut self, key: String) -> wasmtime::Result<Option<String>> {
        Ok(config_get(&self.grant, &key))
    }

    async fn keys(&mut self) -> wasmtime::Result<Vec<String>> {
        Ok(config_keys(&self.grant))
    }
}

impl logging::Host for StrategyState {
    async fn log(&mut self, level: logging::Level, message: String) -> wasmtime::Result<()> {
        plugin_log(&self.log_rate, level, &message);
        Ok(())
    }
}

impl human::Host for StrategyState {
    async fn ask(&mut self, question: String) -> wasmtime::Result<Result<String, wit::Error>> {
        // A person may take minutes: not plugin time (`input_timeout`
        // bounds the wait, not the step deadline).
        let _paused = self.clock.pause();
        Ok(self
            .human
            .ask(&self.plugin, question)
            .await
            .map_err(|e| e.into_wit()))
    }
}

impl plan::Host for StrategyState {
    async fn current(&mut self) -> wasmtime::Result<Option<plan::Plan>> {
        Ok(self.plan.current().map(plan_to_wit))
    }

    async fn publish(&mut self, plan: plan::Plan) -> wasmtime::Result<Result<(), wit::Error>> {
        // Not counted against `max_host_calls_per_step`: that budget is for
        // calls that wait (and so pause the step clock); a publish does not
        // wait, its time counts as the strategy's, and each change it keeps
        // is charged to `max_run_bytes` by the run.
        Ok(
            publish_checked(self.plan.as_ref(), &self.plugin, plan_from_wit(plan))
                .map_err(|e| e.into_wit()),
        )
    }
}

impl agent::Host for StrategyState {
    async fn config(&mut self) -> wasmtime::Result<agent::AgentConfig> {
        let c = self.host.step_config();
        Ok(agent::AgentConfig {
            name: c.name,
            system_prompt: c.system_prompt,
            next_step_prompt: c.next_step_prompt,
            current_step: c.current_step,
            max_steps: c.max_steps,
            max_observe: c.max_observe,
            tool_choice: choice_to_wit(c.tool_choice),
            special_tools: c.special_tools,
        })
    }

    async fn memory(&mut self) -> wasmtime::Result<Vec<wit::Message>> {
        Ok(self.host.memory().into_iter().map(message_to_wit).collect())
    }

    async fn add_message(
        &mut self,
        message: wit::Message,
    ) -> wasmtime::Result<Result<(), wit::Error>> {
        let message = message_from_wit(message);
        Ok(self.host.add_message(message).map_err(|refused| {
            // Named here, where it is known who sent it: the strategy sees
            // this error and usually fails the step with it.
            let Refused {
                error: e,
                described,
            } = refused;
            let message = match e {
                AddMessageError::Invalid(e) => format!(
                    "strategy `{}` added a message a real server would refuse ({described}): {e}",
                    self.plugin
                ),
                AddMessageError::OverLimit(e) => format!(
                    "strategy `{}` added a message that was refused ({described}): {e}",
                    self.plugin
                ),
            };
            error(ErrorCode::InvalidInput, message)
        }))
    }

    async fn chat(
        &mut self,
        request: agent::ChatRequest,
    ) -> wasmtime::Result<Result<agent::ChatResponse, agent::ChatError>> {
        let messages = request.messages.into_iter().map(message_from_wit).collect();
        let tools = request.tools.into_iter().map(spec_from_wit).collect();
        let result = {
            // Waiting for the model is not plugin time.
            let _paused = self.clock.pause();
            self.host
                .chat(messages, tools, choice_from_wit(request.tool_choice))
                .await
        };
        Ok(self.answer(result))
    }

    async fn chat_with_memory(
        &mut self,
        request: agent::MemoryChatRequest,
    ) -> wasmtime::Result<Result<agent::ChatResponse, agent::ChatError>> {
        let extra: Vec<ToolSpec> = request.extra_tools.into_iter().map(spec_from_wit).collect();
        let own = if request.agent_tools {
            self.host.tool_specs()
        } else {
            Arc::new([])
        };
        // The agent's tools as they are, shared, unless the strategy adds
        // its own; the strategy's tool replaces the agent's of the same name.
        let tools: Arc<[ToolSpec]> = if extra.is_empty() {
            own
        } else {
            let mut tools: Vec<ToolSpec> = own
                .iter()
                .filter(|spec| !extra.iter().any(|e| e.name == spec.name))
                .cloned()
                .collect();
            tools.extend(extra);
            tools.into()
        };
        let result = {
            // Waiting for the model is not plugin time.
            let _paused = self.clock.pause();
            self.host
                .chat_with_memory(
                    request.system_prompt,
                    tools,
                    choice_from_wit(request.tool_choice),
                )
                .await
        };
        Ok(self.answer(result))
    }

    async fn tools(&mut self) -> wasmtime::Result<Vec<wit::ToolSpec>> {
        Ok(self
            .host
            .tool_specs()
            .iter()
            .cloned()
            .map(spec_to_wit)
            .collect())
    }

    async fn invoke_tool(
        &mut self,
        call: wit::ToolCall,
    ) -> wasmtime::Result<Result<String, wit::Error>> {
        let call = call_from_wit(call);
        if let Err(reason) = self.host.admit_tool_call(&call) {
            // Not run, and not reported as run: the strategy gets the
            // reason (toolcall makes it the model's observation).
            return Ok(Err(error(ErrorCode::InvalidInput, reason)));
        }
        let approved = {
            // Waiting for an operator is not plugin time.
            let _paused = self.clock.pause();
            self.host.approve_tool_call(&call).await
        };
        if let Err(observation) = approved {
            // Not run: the strategy gets the operator's refusal as the
            // call's error, which toolcall makes the model's observation.
            return Ok(Err(error(ErrorCode::Failed, observation)));
        }
        self.host.tool_started(&call);
        // `execute_tool {tool}`, when traces are exported (`crate::otel`).
        let trace = crate::otel::execute_tool(&call.name, &call.id, self.host.run_id(), || {
            self.tools.version_of(&call.name)
        });
        let result = {
            // The tool's own time counts, under its name.
            let _running = self.clock.enter(call.name.as_str().into());
            self.tools.invoke(&call.name, &call.arguments).await
        };
        super::trace::tool_ended(&trace, &result);
        // What the tool returned is cut to the run's limit before anything
        // keeps it: the event, the strategy, the transcript.
        match result {
            Ok(text) => Ok(Ok(self.host.tool_finished(&call, true, text))),
            // A tool stopped by a limit ends the run: it is not something the
            // model can fix by trying again (each try would take the same
            // memory, stack or handles), so the strategy is unwound with the
            // cause, which the session reports naming the tool.
            Err(ToolFailure::Limit(hit)) => {
                self.host.tool_finished(&call, false, hit.to_string());
                Err(wasmtime::Error::new(hit))
            }
            Err(e) => {
                let mut e = e.into_wit();
                e.message = self.host.tool_finished(&call, false, e.message);
                Ok(Err(e))
            }
        }
    }

    async fn finish(&mut self) -> wasmtime::Result<()> {
        self.host.finish();
        Ok(())
    }
}

// The 0.1.0 imports: each converts its arguments, calls the current import
// above, and converts the answer back (see `compat_v0_1.rs`).

impl old_types::Host for StrategyState {}

impl old_logging::Host for StrategyState {
    async fn log(&mut self, level: old::Level, message: String) -> wasmtime::Result<()> {
        <Self as logging::Host>::log(self, level.conv(), message).await
    }
}

impl old_agent::Host for StrategyState {
    async fn config(&mut self) -> wasmtime::Result<old::AgentConfig> {
        Ok(<Self as agent::Host>::config(self).await?.conv())
    }

    async fn memory(&mut self) -> wasmtime::Result<Vec<old::Message>> {
        Ok(<Self as agent::Host>::memory(self).await?.conv())
    }

    async fn add_message(
        &mut self,
        message: old::Message,
    ) -> wasmtime::Result<Result<(), old::Error>> {
        Ok(<Self as agent::Host>::add_message(self, message.conv())
            .await?
            .conv())
    }

    async fn chat(
        &mut self,
        request: old::ChatRequest,
    ) -> wasmtime::Result<Result<old::ChatResponse, old::ChatError>> {
        Ok(<Self as agent::Host>::chat(self, request.conv())
            .await?
            .conv())
    }

    async fn tools(&mut self) -> wasmtime::Result<Vec<old::ToolSpec>> {
        Ok(<Self as agent::Host>::tools(self).await?.conv())
    }

    async fn invoke_tool(
        &mut self,
        call: old::ToolCall,
    ) -> wasmtime::Result<Result<String, old::Error>> {
        Ok(<Self as agent::Host>::invoke_tool(self, call.conv())
            .await?
            .conv())
    }

    async fn finish(&mut self) -> wasmtime::Result<()> {
        <Self as agent::Host>::finish(self).await
    }
}
