//! The agents agentd ships, so that it works with no configuration file.
//! `toolcall` is the strategy as it comes (its prompts and step limit are
//! the strategy plugin's own defaults); `manus` overrides them with
//! OpenManus's Manus prompts and tools. `react` and `planner` put Manus's
//! tools on the other bundled strategies, with those strategies' own
//! prompts and step limits: `react` for models without tool calling (its
//! prompt lists the tools), `planner` for OpenManus's `PlanningFlow` (it
//! writes each step's prompt from the plan).

use super::AgentConfig;

pub const MANUS_SYSTEM_PROMPT: &str = "You are OpenManus, an all-capable AI assistant, aimed at solving any task presented by the user. You have various tools at your disposal that you can call upon to efficiently complete complex requests. Whether it's programming, information retrieval, file processing, or running commands, you can handle it all: you write and run Python code, create and edit files, and use the shell, all inside your own sandbox.\nThe initial directory is: /workspace";
pub const MANUS_NEXT_STEP_PROMPT: &str = "Based on user needs, proactively select the most appropriate tool or combination of tools. For complex tasks, you can break down the problem and use different tools step by step to solve it. After using each tool, clearly explain the execution results and suggest the next steps.\n\nIf you want to stop the interaction at any point, use the `terminate` tool/function call.";

/// OpenManus's Manus tools: the sandbox tools and `terminate`.
const MANUS_TOOLS: [&str; 4] = ["python_execute", "str_replace_editor", "bash", "terminate"];

pub fn agents() -> Vec<AgentConfig> {
    vec![
        AgentConfig::with_defaults("toolcall"),
        AgentConfig {
            system_prompt: Some(MANUS_SYSTEM_PROMPT.into()),
            next_step_prompt: Some(MANUS_NEXT_STEP_PROMPT.into()),
            max_steps: Some(20),
            ..with_manus_tools("manus", "toolcall")
        },
        with_manus_tools("react", "react"),
        with_manus_tools("planner", "planning"),
    ]
}

/// An agent `name` on `strategy` with Manus's tools and observation cap,
/// and otherwise the strategy's defaults.
fn with_manus_tools(name: &str, strategy: &str) -> AgentConfig {
    AgentConfig {
        strategy: strategy.into(),
        tools: MANUS_TOOLS.iter().map(|tool| tool.to_string()).collect(),
        max_observe: Some(10000),
        ..AgentConfig::with_defaults(name)
    }
}
