//! A strategy exactly as a third party would have built it against
//! `agentd:plugin@0.1.0` (`wit/since_v0.1.0`): it has no defaults but a
//! step limit, and sees no finish reason. Each step asks the model with the
//! agent's tools, stores the answer, runs the calls it asked for and
//! finishes after `terminate`. It proves that the host keeps serving
//! components built against a released contract.

wit_bindgen::generate!({
    world: "strategy",
    path: "../../../wit/since_v0.1.0",
});

use agentd::plugin::agent::{self, ChatError, ChatRequest, ToolChoice};
use agentd::plugin::types::{Error, ErrorCode, Message, PluginMetadata, Role};
use exports::agentd::plugin::strategy_api::Guest;

struct Legacy;

impl Guest for Legacy {
    fn metadata() -> PluginMetadata {
        PluginMetadata {
            name: "legacy_strategy".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "Test strategy built against agentd:plugin@0.1.0.".into(),
        }
    }

    fn default_max_steps() -> Option<u32> {
        Some(7)
    }

    fn step() -> Result<String, Error> {
        let config = agent::config();
        let mut messages = Vec::new();
        if let Some(system) = config.system_prompt.clone() {
            messages.push(message(Role::System, Some(system)));
        }
        messages.extend(agent::memory());
        let request = ChatRequest {
            messages,
            tools: agent::tools(),
            tool_choice: ToolChoice::Auto,
        };
        let answer = match agent::chat(&request) {
            Ok(response) => response.message,
            Err(ChatError::TokenLimit(m)) => {
                agent::finish();
                return Ok(m);
            }
            Err(ChatError::Failed(e)) => return Err(e),
        };
        let calls = answer.tool_calls.clone();
        agent::add_message(&Message {
            content: answer.content.clone().or(Some(String::new())),
            ..answer
        })?;
        let mut results = Vec::new();
        for call in &calls {
            let output = match agent::invoke_tool(call) {
                Ok(text) => text,
                Err(e) if e.code == ErrorCode::Cancelled => return Err(e),
                Err(e) => format!("Error: {}", e.message),
            };
            agent::add_message(&Message {
                tool_call_id: Some(call.id.clone()),
                name: Some(call.name.clone()),
                ..message(Role::Tool, Some(output.clone()))
            })?;
            results.push(output);
            if call.name.eq_ignore_ascii_case("terminate") {
                agent::finish();
            }
        }
        Ok(format!(
            "legacy 0.1.0 step {}: {}",
            config.current_step,
            results.join(" | ")
        ))
    }
}

fn message(role: Role, content: Option<String>) -> Message {
    Message {
        role,
        content,
        tool_calls: Vec::new(),
        tool_call_id: None,
        name: None,
    }
}

export!(Legacy);
