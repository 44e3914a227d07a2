//! A test strategy built twice from this one source: `versioned_strategy_v1`
//! and `versioned_strategy_v2` are the same plugin (`versioned_strategy`) at
//! 1.0.0 and 2.0.0, so the daemon's hot reload can be tested by swapping one
//! file for the other while a run is going.
//!
//! Each step asks the model once (so a delayed fake LLM paces the run), keeps
//! the reply's text as an assistant message, then adds the assistant message
//! `strategy versioned_strategy <VERSION> step <N>`: the transcript of a run
//! shows which version executed each of its steps. It finishes at step 3, or
//! earlier when the model answers `done`. Only text-only assistant messages
//! are added, so the conversation is valid whatever the model replies (tool
//! calls in a reply are ignored).

use agentd_strategy_sdk::{
    ChatError, ChatRequest, Defaults, Error, Guest, Message, Metadata, ToolChoice, agent,
    export_strategy,
};

const NAME: &str = "versioned_strategy";
const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The step at which the run finishes on its own.
const LAST_STEP: u32 = 3;

struct VersionedStrategy;

impl Guest for VersionedStrategy {
    fn metadata() -> Metadata {
        Metadata::new(
            NAME,
            VERSION,
            "Test strategy: records its own version in the transcript at every step.",
        )
    }

    fn defaults() -> Defaults {
        Defaults {
            system_prompt: None,
            next_step_prompt: None,
            max_steps: Some(10),
            tool_choice: None,
            special_tools: None,
        }
    }

    fn step() -> Result<String, Error> {
        let config = agent::config();
        let step = config.current_step;
        let mut messages = Vec::new();
        if let Some(prompt) = config.system_prompt.filter(|p| !p.is_empty()) {
            messages.push(Message::system(prompt));
        }
        messages.extend(agent::memory());
        let request = ChatRequest {
            messages,
            tools: Vec::new(),
            tool_choice: ToolChoice::None,
        };
        let reply = match agent::chat(&request) {
            Ok(response) => response.message.text().trim().to_string(),
            // The host ends the run with `token_limit` after this step.
            Err(ChatError::TokenLimit(message)) => {
                agent::finish();
                return Ok(format!("{NAME} {VERSION}: {message}"));
            }
            Err(ChatError::Failed(error)) => return Err(error),
        };
        if !reply.is_empty() {
            agent::add_message(&Message::assistant(reply.clone()))?;
        }
        let marker = format!("strategy {NAME} {VERSION} step {step}");
        agent::add_message(&Message::assistant(marker.clone()))?;
        if step >= LAST_STEP || reply == "done" {
            agent::finish();
        }
        Ok(marker)
    }
}

export_strategy!(VersionedStrategy);
