//! The agents agentd ships, so that it works with no configuration file.
//! `toolcall` is the strategy as it comes (its prompts and step limit are
//! the strategy plugin's own defaults); `manus` overrides them with
//! OpenManus's Manus prompts and tools; `planner` is OpenManus's
//! `PlanningFlow` over Manus's tools (the `planning` strategy's prompts
//! and step limit, which plan each step themselves).

use super::AgentConfig;

pub const MANUS_SYSTEM_PROMPT: &str = "You are OpenManus, an all-capable AI assistant, aimed at solving any task presented by the user. You have various tools at your disposal that you can call upon to efficiently complete complex requests. Whether it's programming, information retrieval, file processing, or running commands, you can handle it all: you write and run Python code, create and edit files, and use the shell, all inside your own sandbox.\nThe initial directory is: /workspace";
pub const MANUS_NEXT_STEP_PROMPT: &str = "Based on user needs, proactively select the most appropriate tool or combination of tools. For complex tasks, you can break down the problem and use different tools step by step to solve it. After using each tool, clearly explain the execution results and suggest the next steps.\n\nIf you want to stop the interaction at any point, use the `terminate` tool/function call.";

pub fn agents() -> Vec<AgentConfig> {
    vec![
        AgentConfig::with_defaults("toolcall"),
        AgentConfig {
            tools: vec![
                "python_execute".into(),
                "str_replace_editor".into(),
                "bash".into(),
                "terminate".into(),
            ],
            system_prompt: Some(MANUS_SYSTEM_PROMPT.into()),
            next_step_prompt: Some(MANUS_NEXT_STEP_PROMPT.into()),
            max_steps: Some(20),
            max_observe: Some(10000),
            ..AgentConfig::with_defaults("manus")
        },
        AgentConfig {
            strategy: "planning".into(),
            tools: vec![
                "python_execute".into(),
                "str_replace_editor".into(),
                "bash".into(),
                "terminate".into(),
            ],
            max_observe: Some(10000),
            ..AgentConfig::with_defaults("planner")
        },
    ]
}
