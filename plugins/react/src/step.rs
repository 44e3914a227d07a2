//! One step: ask the model in text, read its reply, run at most one tool,
//! and give the result back as a `user` message starting `Observation:`.
//!
//! No `tool` role and no tool calls ever reach memory: the chat templates
//! of many local models have no `tool` role, and a model without tool
//! calling cannot read calls. So memory is plain `user` / `assistant`
//! text, and it alternates (when the agent sets no next-step prompt, as
//! this strategy's defaults do not), which the strictest templates demand.

use agentd_strategy_sdk::host::Host;
use agentd_strategy_sdk::rules::{self, CUT_NOTE};
use agentd_strategy_sdk::{
    ChatError, Error, ErrorCode, FinishReason, MemoryChatRequest, Message, ToolCall, ToolChoice,
    ToolSpec,
};
use serde_json::Value;

use crate::json_repair;
use crate::parse::{self, Reply};
use crate::prompt;

pub fn step<H: Host>(mut host: H) -> Result<String, Error> {
    let config = host.config();
    let tools = host.tools();
    if let Some(prompt) = config.next_step_prompt.as_deref().filter(|p| !p.is_empty()) {
        host.add_message(Message::user(prompt))?;
    }

    // Whatever the agent's `tool_choice`: the model is told the tools in
    // the prompt, and a server asked for tools would refuse (or template
    // them into a prompt that already lists them). The host puts the
    // request together from its memory: the transcript is not copied in.
    let request = MemoryChatRequest {
        system_prompt: Some(prompt::system_prompt(
            config.system_prompt.as_deref(),
            &tools,
        )),
        agent_tools: false,
        extra_tools: Vec::new(),
        tool_choice: ToolChoice::None,
    };
    let response = match host.chat_with_memory(&request) {
        Ok(response) => response,
        Err(ChatError::TokenLimit(message)) => return rules::token_limit(&mut host, &message),
        Err(ChatError::Failed(error)) => return Err(error),
    };

    let cut = response.finish_reason == Some(FinishReason::Length);
    if cut {
        host.warn("the model's answer was cut at max_tokens; it may be incomplete");
    }
    let text = response.message.content.unwrap_or_default();
    let native_call = response.message.tool_calls.into_iter().next();
    let kept = parse::kept(&text);
    let mut reply = parse::parse(kept);
    // A server that returned a tool call anyway (one that turns text into
    // calls itself): the call is what the model meant. It is stored as the
    // text format, so memory stays text and a repeat is seen as stuck.
    let stored = match native_call {
        Some(call) if !matches!(reply, Reply::Action { .. } | Reply::Final { .. }) => {
            let input = json_repair::parse_json(&call.arguments)
                .unwrap_or(Value::String(call.arguments.clone()));
            let stored = format!(
                "{kept}\nAction: {}\nAction Input: {}",
                call.name, call.arguments
            );
            reply = Reply::Action {
                thought: None,
                tool: call.name,
                input,
                extra_actions: 0,
            };
            stored.trim().to_string()
        }
        _ => kept.to_string(),
    };
    host.info(&format!("✨ {}'s reply: {stored}", config.name));
    // An empty string is content: chat APIs accept it, and it keeps the
    // turns alternating before the corrective observation.
    host.add_message(Message::assistant(stored))?;

    let result = match reply {
        Reply::Final { answer, .. } => {
            host.info(&format!("🏁 {} gave its final answer", config.name));
            host.finish();
            answer
        }
        Reply::Unparsed { why } => {
            host.warn(&format!("the model's reply could not be read: {why}"));
            let observation = prompt::corrective(&why, cut, &tools);
            host.add_message(Message::user(observation.clone()))?;
            observation
        }
        Reply::Action {
            tool,
            input,
            extra_actions,
            ..
        } => {
            let mut observation = act(&mut host, &config, &tools, &tool, input)?;
            if extra_actions > 0 {
                observation.push_str(&format!(
                    "\n\n(Your reply asked for {} actions; only the first was run. Write one Action per reply and wait for its Observation.)",
                    extra_actions + 1
                ));
            }
            host.add_message(Message::user(observation.clone()))?;
            observation
        }
    };
    Ok(if cut {
        format!("{result}\n{CUT_NOTE}")
    } else {
        result
    })
}

/// Runs the action and returns its observation. Every failure the model
/// can correct is an observation; only a cancellation is an error, since
/// the run is ending anyway.
fn act<H: Host>(
    host: &mut H,
    config: &agentd_strategy_sdk::AgentConfig,
    tools: &[ToolSpec],
    tool: &str,
    input: Value,
) -> Result<String, Error> {
    let Some(spec) = find_tool(tools, tool) else {
        let names = prompt::tool_names(tools);
        let known = if names.is_empty() {
            "There are no tools: give the Final Answer.".to_string()
        } else {
            format!(
                "The tools are: {names}. Use one of these names as the Action, or give the Final Answer."
            )
        };
        return Ok(format!(
            "Observation: Error: there is no tool `{}`. {known}",
            tool.trim()
        ));
    };
    let name = spec.name.clone();
    let arguments = match arguments(spec, input) {
        Ok(arguments) => arguments,
        Err(why) => return Ok(format!("Observation: Error: {why}")),
    };
    let call = ToolCall {
        id: format!("react-{}", config.current_step),
        name: name.clone(),
        arguments,
    };
    host.info(&format!(
        "🔧 Activating tool: '{name}' with {}",
        call.arguments
    ));
    let mut text = match host.invoke_tool(&call) {
        Ok(result) => {
            if rules::is_special(config, &name) {
                host.info(&format!("🏁 Special tool '{name}' has completed the task!"));
                host.finish();
            }
            if result.is_empty() {
                return Ok(format!("Observation: (`{name}` returned no output)"));
            }
            result
        }
        Err(error) if error.code == ErrorCode::Cancelled => return Err(error),
        Err(error) if rules::is_call_limit(&error) => {
            host.warn(&error.message);
            format!("Error: {}", error.message)
        }
        Err(error) => {
            host.error(&format!(
                "⚠️ Tool '{name}' encountered a problem: {}",
                error.message
            ));
            format!("Error: {}", error.message)
        }
    };
    // Whichever way the call went: a tool's error as long as a result
    // would cost as much in every later request.
    rules::cut_observation(config, &mut text);
    Ok(format!("Observation: {text}"))
}

/// The tool the model named, read leniently: case, Markdown and quotes
/// around it, a `()` after it, a `functions.` prefix (from models trained
/// on OpenAI's format) do not matter, nor `-` or spaces for `_` when that
/// leaves only one tool it can be.
fn find_tool<'a>(tools: &'a [ToolSpec], written: &str) -> Option<&'a ToolSpec> {
    let name = normalize_tool(written);
    if let Some(tool) = tools.iter().find(|tool| tool.name.to_lowercase() == name) {
        return Some(tool);
    }
    let fold = |s: &str| s.to_lowercase().replace(['-', ' '], "_");
    let folded = fold(&name);
    let mut candidates = tools.iter().filter(|tool| fold(&tool.name) == folded);
    match (candidates.next(), candidates.next()) {
        (Some(tool), None) => Some(tool),
        _ => None,
    }
}

fn normalize_tool(written: &str) -> String {
    let mut name = written.trim();
    loop {
        let before = name;
        name = name.trim_matches(|c: char| {
            c.is_whitespace() || matches!(c, '`' | '"' | '\'' | '*' | ':' | '.' | ',')
        });
        name = name.strip_suffix("()").unwrap_or(name);
        for prefix in ["functions.", "function.", "tools.", "tool."] {
            if name.len() > prefix.len()
                && name
                    .get(..prefix.len())
                    .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
            {
                name = &name[prefix.len()..];
            }
        }
        if name == before {
            return name.to_lowercase();
        }
    }
}

/// The input as the tool's arguments (JSON object text), or why not.
fn arguments(spec: &ToolSpec, input: Value) -> Result<String, String> {
    let not_object = || {
        format!(
            "the Action Input for `{}` must be a JSON object of its parameters: {}",
            spec.name, spec.parameters
        )
    };
    match input {
        Value::Object(_) => Ok(input.to_string()),
        Value::Null => Ok("{}".to_string()),
        Value::String(text) => {
            // An object sent as a JSON string has one reading.
            if text.trim_start().starts_with('{')
                && let Ok(object @ Value::Object(_)) = json_repair::parse_json(&text)
            {
                return Ok(object.to_string());
            }
            // A tool with one string parameter can take plain text: what
            // `python_execute` or `bash` get from a model that writes the
            // code or command without JSON around it.
            let param = sole_string_parameter(&spec.parameters).ok_or_else(not_object)?;
            let text = strip_param_prefix(&text, &param);
            Ok(serde_json::json!({ param: text }).to_string())
        }
        _ => Err(not_object()),
    }
}

/// `command: ls` written for the parameter `command`: the name is not part
/// of the value.
fn strip_param_prefix<'a>(text: &'a str, param: &str) -> &'a str {
    let trimmed = text.trim_start();
    match trimmed.get(..param.len()) {
        Some(head) if head.eq_ignore_ascii_case(param) => {
            let after = trimmed[param.len()..].trim_start();
            match after.strip_prefix(':').or_else(|| after.strip_prefix('=')) {
                Some(value) => value.trim(),
                None => text,
            }
        }
        _ => text,
    }
}

/// The parameter plain text can fill: the only required one, or the only
/// one, when it is a string.
fn sole_string_parameter(schema: &str) -> Option<String> {
    let schema: Value = serde_json::from_str(schema).ok()?;
    let properties = schema.get("properties")?.as_object()?;
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let name = match (required.as_slice(), properties.len()) {
        ([only], _) => only.to_string(),
        ([], 1) => properties.keys().next()?.clone(),
        _ => return None,
    };
    let kind = properties.get(&name)?.get("type");
    match kind {
        None => Some(name),
        Some(Value::String(kind)) if kind == "string" => Some(name),
        _ => None,
    }
}
