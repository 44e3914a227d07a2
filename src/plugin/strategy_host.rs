//! The host side of the `strategy` world: the imports a strategy uses to see
//! its agent, talk to the LLM and call tools, all acting on the run's
//! [`RunContext`].

use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings::types::{self as wit, ErrorCode};
use super::bindings::v0_2::strategy::agentd::plugin::{agent, logging};
use super::convert::*;
use super::tool_host::ToolBox;
use super::{plugin_log, sandboxed_wasi};
use crate::agent::context::{ChatFailure, RunContext};
use crate::agent::events::RunEvent;

pub struct StrategyState {
    wasi: WasiCtx,
    table: ResourceTable,
    plugin: Arc<str>,
    /// `None` while probing a plugin at load time, when no run exists.
    run: Option<Arc<RunContext>>,
    tools: ToolBox,
}

impl StrategyState {
    pub fn new(plugin: Arc<str>, run: Arc<RunContext>, tools: ToolBox) -> Self {
        StrategyState {
            wasi: sandboxed_wasi(&plugin),
            table: ResourceTable::new(),
            plugin,
            run: Some(run),
            tools,
        }
    }

    fn run(&self) -> wasmtime::Result<&Arc<RunContext>> {
        self.run.as_ref().ok_or_else(|| {
            wasmtime::format_err!(
                "agent imports are not available while the plugin is being loaded"
            )
        })
    }

    /// For load-time probes (metadata) that must not touch any run.
    pub fn probe(plugin: Arc<str>) -> Self {
        let sandbox = crate::sandbox::NoSandbox::new("load-time probe");
        let sandbox = crate::sandbox::SandboxProvider::for_run(&sandbox, "probe");
        StrategyState {
            wasi: sandboxed_wasi(&plugin),
            table: ResourceTable::new(),
            plugin,
            run: None,
            tools: ToolBox::new(Vec::new(), sandbox, None),
        }
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

impl logging::Host for StrategyState {
    async fn log(&mut self, level: logging::Level, message: String) -> wasmtime::Result<()> {
        plugin_log(&self.plugin, level, &message);
        Ok(())
    }
}

impl agent::Host for StrategyState {
    async fn config(&mut self) -> wasmtime::Result<agent::AgentConfig> {
        let c = self.run()?.step_config();
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
        let messages = self.run()?.lock().memory.messages();
        Ok(messages.into_iter().map(message_to_wit).collect())
    }

    async fn add_message(
        &mut self,
        message: wit::Message,
    ) -> wasmtime::Result<Result<(), wit::Error>> {
        let message = message_from_wit(message);
        let described = message.describe();
        Ok(self.run()?.add_message(message).map_err(|e| {
            // Named here, where it is known who sent it: the strategy sees
            // this error and usually fails the step with it.
            error(
                ErrorCode::InvalidInput,
                format!(
                    "strategy `{}` added a message a real server would refuse ({described}): {e}",
                    self.plugin
                ),
            )
        }))
    }

    async fn chat(
        &mut self,
        request: agent::ChatRequest,
    ) -> wasmtime::Result<Result<agent::ChatResponse, agent::ChatError>> {
        let messages = request.messages.into_iter().map(message_from_wit).collect();
        let tools = request.tools.into_iter().map(spec_from_wit).collect();
        let result = self
            .run()?
            .chat(messages, tools, choice_from_wit(request.tool_choice))
            .await;
        Ok(match result {
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
        })
    }

    async fn tools(&mut self) -> wasmtime::Result<Vec<wit::ToolSpec>> {
        Ok(self
            .run()?
            .tool_specs
            .iter()
            .cloned()
            .map(spec_to_wit)
            .collect())
    }

    async fn invoke_tool(
        &mut self,
        call: wit::ToolCall,
    ) -> wasmtime::Result<Result<String, wit::Error>> {
        let step = {
            let mut st = self.run()?.lock();
            st.current_plugin = call.name.clone();
            st.current_step
        };
        self.run()?.emit(RunEvent::ToolCall {
            step,
            id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
        });
        let result = self.tools.invoke(&call.name, &call.arguments).await;
        self.run()?.lock().current_plugin = self.plugin.to_string();
        let (ok, output) = match &result {
            Ok(text) => (true, text.clone()),
            Err(e) => (false, e.to_string()),
        };
        self.run()?.emit(RunEvent::ToolResult {
            step,
            id: call.id,
            name: call.name,
            ok,
            output,
        });
        Ok(result.map_err(|e| e.into_wit()))
    }

    async fn finish(&mut self) -> wasmtime::Result<()> {
        self.run()?.finish();
        Ok(())
    }
}
