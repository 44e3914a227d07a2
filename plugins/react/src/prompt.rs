//! The text this strategy puts in front of the model: the system prompt
//! with the tools and the reply format, and the corrective observation.
//!
//! The model gets no `tools` parameter, so the system prompt is the only
//! place it learns the tools. Strategy defaults are read once, when the
//! plugin loads, and an agent's tools are known only in a run, so the tool
//! list and format are not part of the default prompt: each step appends
//! them to the system prompt in effect, the strategy's default or the
//! agent's own. An agent that writes its own prompt therefore keeps the
//! tools and the format without having to restate them.

use agentd_strategy_sdk::ToolSpec;

/// The strategy's default system prompt, before the tools and the format.
pub const INTRO: &str = "You are an agent that solves the user's task step by step. You think about what to do next, use one tool at a time, and read its result before you decide the next step.";

/// The system prompt of a step: `configured` (the agent's, or [`INTRO`])
/// followed by the tools and the format.
pub fn system_prompt(configured: Option<&str>, tools: &[ToolSpec]) -> String {
    let mut prompt = String::new();
    if let Some(configured) = configured.map(str::trim_end).filter(|p| !p.is_empty()) {
        prompt.push_str(configured);
        prompt.push_str("\n\n");
    }
    if tools.is_empty() {
        prompt.push_str(NO_TOOLS);
        return prompt;
    }
    prompt.push_str("You can use these tools:\n\n");
    for tool in tools {
        prompt.push_str(&format!("### {}\n", tool.name));
        if !tool.description.trim().is_empty() {
            prompt.push_str(tool.description.trim());
            prompt.push('\n');
        }
        prompt.push_str(&format!(
            "Parameters (JSON Schema): {}\n\n",
            compact_schema(&tool.parameters)
        ));
    }
    prompt.push_str(&format_block(tools));
    prompt
}

const NO_TOOLS: &str = "You have no tools. Reply in this format:\n\nThought: what you conclude\nFinal Answer: your answer to the user";

/// The reply format, naming the tools.
fn format_block(tools: &[ToolSpec]) -> String {
    format!(
        "To use a tool, reply in exactly this format, then stop and wait:\n\n\
         Thought: what you think about the next step\n\
         Action: the name of one tool, exactly as written above (one of: {names})\n\
         Action Input: the tool's arguments as one JSON object, with double quotes\n\n\
         The tool's result comes back in a message that starts with \"Observation:\". \
         Do not write the Observation yourself. Use one tool per reply.\n\n\
         When you have the answer, or the task is done, reply in this format instead:\n\n\
         Thought: what you conclude\n\
         Final Answer: your answer to the user",
        names = tool_names(tools)
    )
}

/// The tools' names as the model should write them, for the prompt and
/// for observations that name them.
pub fn tool_names(tools: &[ToolSpec]) -> String {
    tools
        .iter()
        .map(|tool| tool.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The schema on one line: schemas arrive pretty-printed from some
/// plugins and MCP servers, and every byte of the prompt is resent at each
/// step. Text that is not JSON goes as it is.
fn compact_schema(parameters: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(parameters) {
        Ok(value) => value.to_string(),
        Err(_) => parameters.trim().to_string(),
    }
}

/// The observation for a reply that could not be read: why, and the
/// format again, short, since small models follow a restated format better
/// than a reference to the system prompt. `cut`: the reply stopped at
/// `max_tokens`, which is not a mistake to fix in the format.
pub fn corrective(why: &str, cut: bool, tools: &[ToolSpec]) -> String {
    let head = if cut {
        format!(
            "Observation: Your reply was cut off at the max_tokens limit before it was complete ({why}). Write a shorter reply: keep the Thought brief, and split long inputs (a long file, for example) over several steps."
        )
    } else {
        format!("Observation: Your reply could not be used: {why}.")
    };
    let action = if tools.is_empty() {
        String::new()
    } else {
        format!(
            "Thought: ...\nAction: <one of: {}>\nAction Input: <the arguments as a JSON object>\n\nor, when you are done:\n\n",
            tool_names(tools)
        )
    };
    format!("{head} Reply in this format:\n\n{action}Thought: ...\nFinal Answer: <your answer>")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools() -> Vec<ToolSpec> {
        vec![
            ToolSpec::new(
                "bash",
                "Runs a command.",
                "{\n  \"type\": \"object\",\n  \"properties\": {\"command\": {\"type\": \"string\"}}\n}",
            ),
            ToolSpec::new("terminate", "", "not json"),
        ]
    }

    #[test]
    fn lists_each_tool_with_its_description_and_schema() {
        let prompt = system_prompt(Some(INTRO), &tools());
        assert!(prompt.starts_with(INTRO), "{prompt}");
        assert!(prompt.contains("### bash\nRuns a command.\nParameters (JSON Schema): {\"properties\":{\"command\":{\"type\":\"string\"}},\"type\":\"object\"}\n"), "{prompt}");
        assert!(
            prompt.contains("### terminate\nParameters (JSON Schema): not json\n"),
            "{prompt}"
        );
        assert!(prompt.contains("(one of: bash, terminate)"), "{prompt}");
        assert!(prompt.contains("Action Input:") && prompt.contains("Final Answer:"));
    }

    #[test]
    fn an_agents_own_prompt_keeps_the_tools_and_format() {
        let prompt = system_prompt(Some("You are a pirate.\n"), &tools());
        assert!(
            prompt.starts_with("You are a pirate.\n\nYou can use these tools:"),
            "{prompt}"
        );
        assert!(!prompt.contains(INTRO));
        let bare = system_prompt(None, &tools());
        assert!(bare.starts_with("You can use these tools:"), "{bare}");
    }

    #[test]
    fn no_tools_asks_only_for_the_answer() {
        let prompt = system_prompt(None, &[]);
        assert!(
            prompt.contains("Final Answer:") && !prompt.contains("Action:"),
            "{prompt}"
        );
        let fix = corrective("it was empty", false, &[]);
        assert!(!fix.contains("Action:"), "{fix}");
    }

    #[test]
    fn the_corrective_observation_restates_the_format() {
        let fix = corrective("it was empty", false, &tools());
        assert!(
            fix.starts_with("Observation: Your reply could not be used: it was empty."),
            "{fix}"
        );
        assert!(
            fix.contains("Action: <one of: bash, terminate>") && fix.contains("Final Answer:"),
            "{fix}"
        );
        let cut = corrective("the JSON is not closed", true, &tools());
        assert!(
            cut.contains("max_tokens") && cut.contains("the JSON is not closed"),
            "{cut}"
        );
    }
}
