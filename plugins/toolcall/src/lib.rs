//! OpenManus's `ToolCallAgent` as an agentd strategy: each step asks the
//! model what to do (think), then runs the tool calls it asked for (act).
//!
//! The step itself is `toolcall-core` (`core/`), which the `planning`
//! strategy shares; this crate is the component: its metadata, OpenManus's
//! `ToolCallAgent` defaults, and that step over the real host.

use agentd_strategy_sdk::host::Imports;
use agentd_strategy_sdk::{Defaults, Error, Guest, Metadata, ToolChoice, export_strategy};

/// OpenManus's `ToolCallAgent.system_prompt`.
pub const SYSTEM_PROMPT: &str = "You are an agent that can execute tool calls";
/// OpenManus's `ToolCallAgent.next_step_prompt`.
pub const NEXT_STEP_PROMPT: &str =
    "If you want to stop interaction, use `terminate` tool/function call.";

struct ToolCallAgent;

impl Guest for ToolCallAgent {
    fn metadata() -> Metadata {
        Metadata::new(
            "toolcall",
            env!("CARGO_PKG_VERSION"),
            "OpenManus's ToolCallAgent: asks the model which tools to call, then calls them.",
        )
    }

    /// OpenManus's `ToolCallAgent` class defaults: any agent built on this
    /// strategy behaves like a `ToolCallAgent` unless configured otherwise.
    fn defaults() -> Defaults {
        Defaults {
            system_prompt: Some(SYSTEM_PROMPT.to_string()),
            next_step_prompt: Some(NEXT_STEP_PROMPT.to_string()),
            max_steps: Some(30),
            tool_choice: Some(ToolChoice::Auto),
            special_tools: Some(vec!["terminate".to_string()]),
        }
    }

    fn step() -> Result<String, Error> {
        toolcall_core::step(Imports)
    }
}

export_strategy!(ToolCallAgent);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_toolcall_agents() {
        let d = <ToolCallAgent as Guest>::defaults();
        assert_eq!(
            d.system_prompt.as_deref(),
            Some("You are an agent that can execute tool calls")
        );
        assert_eq!(
            d.next_step_prompt.as_deref(),
            Some("If you want to stop interaction, use `terminate` tool/function call.")
        );
        assert_eq!(d.max_steps, Some(30));
        assert_eq!(d.special_tools, Some(vec!["terminate".to_string()]));
    }
}
