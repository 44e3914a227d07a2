//! ReAct in plain text, for models without tool calling: the tools and a
//! fixed reply format (Thought / Action / Action Input, or Final Answer)
//! are in the system prompt, no `tools` parameter is sent, the model's
//! text is parsed leniently (`parse`, `json_repair`), and each tool's
//! result goes back as a `user` message starting `Observation:`.
//!
//! It exists because small local models (llama.cpp, Ollama) often have no
//! tool calling, or a chat template without a `tool` role. The host's run
//! loop, stuck detection, special tools and limits apply unchanged: they
//! see assistant messages and tool invocations as from any strategy.

use agentd_strategy_sdk::{Defaults, Error, Guest, Metadata, ToolChoice, export_strategy};

mod json_repair;
mod parse;
mod prompt;
mod step;

struct React;

impl Guest for React {
    fn metadata() -> Metadata {
        Metadata::new(
            "react",
            env!("CARGO_PKG_VERSION"),
            "ReAct in plain text (Thought / Action / Action Input): tool use for models without tool calling.",
        )
    }

    /// No next-step prompt: after each observation (a `user` message) the
    /// model answers, so turns alternate as strict chat templates require;
    /// a prompt added each step would put two `user` messages in a row.
    /// `none`: no tools are ever sent to the server (the step sends none
    /// whatever is configured; this makes the agent listing say so).
    fn defaults() -> Defaults {
        Defaults {
            system_prompt: Some(prompt::INTRO.to_string()),
            next_step_prompt: None,
            max_steps: Some(20),
            tool_choice: Some(ToolChoice::None),
            special_tools: Some(vec!["terminate".to_string()]),
        }
    }

    fn step() -> Result<String, Error> {
        step::step(agentd_strategy_sdk::host::Imports)
    }
}

export_strategy!(React);

#[cfg(test)]
mod tests;
