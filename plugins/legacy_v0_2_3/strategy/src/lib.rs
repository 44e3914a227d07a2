//! A strategy built against `agentd:plugin@0.2.3` (`wit/since_v0.2.3`),
//! before the additive 0.2.4 (`agent.chat-with-memory`): the host serves it
//! through its 0.2.4 bindings, which wasmtime matches semver-wise. Each step
//! asks the model the way every strategy did before 0.2.4 (its memory
//! copied in with `memory`, sent back out with `chat`), publishes a one-step
//! plan named after the answer (0.2.3's `plan` import), finishes the run and
//! answers `v0.2.3: step N of AGENT: ANSWER`.

wit_bindgen::generate!({
    world: "strategy",
    path: "../../../wit/since_v0.2.3",
});

use agentd::plugin::agent::{self, ChatError, ChatRequest};
use agentd::plugin::plan::{self, Plan, PlanStep, StepStatus};
use agentd::plugin::types::{Error, ErrorCode, Message, PluginMetadata, Role, ToolChoice};
use exports::agentd::plugin::strategy_api::{Guest, StrategyDefaults};

struct LegacyStrategy;

impl Guest for LegacyStrategy {
    fn metadata() -> PluginMetadata {
        PluginMetadata {
            name: "legacy_v0_2_3_strategy".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "Test strategy built against agentd:plugin@0.2.3.".into(),
        }
    }

    fn defaults() -> StrategyDefaults {
        StrategyDefaults {
            system_prompt: None,
            next_step_prompt: None,
            max_steps: Some(3),
            tool_choice: None,
            special_tools: None,
        }
    }

    fn step() -> Result<String, Error> {
        let config = agent::config();
        let mut messages = vec![Message {
            role: Role::System,
            content: Some("Answer in one word.".into()),
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
        }];
        messages.extend(agent::memory());
        let response = agent::chat(&ChatRequest {
            messages,
            tools: Vec::new(),
            tool_choice: ToolChoice::None,
        })
        .map_err(|e| match e {
            ChatError::TokenLimit(message) => Error {
                code: ErrorCode::Failed,
                message,
            },
            ChatError::Failed(error) => error,
        })?;
        agent::add_message(&response.message)?;
        let answer = response.message.content.unwrap_or_default();
        plan::publish(&Plan {
            title: answer.clone(),
            steps: vec![PlanStep {
                text: "answer".into(),
                status: StepStatus::Completed,
                notes: None,
            }],
        })?;
        agent::finish();
        Ok(format!(
            "v0.2.3: step {} of {}: {answer}",
            config.current_step, config.name
        ))
    }
}

export!(LegacyStrategy);
