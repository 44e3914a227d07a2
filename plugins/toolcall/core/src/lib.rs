//! OpenManus's `ToolCallAgent` step, the think/act machinery of the
//! bundled `toolcall` strategy, as a library: `toolcall` exports it as its
//! `step()`, and `planning` runs it for each step of its plan (over a host
//! that adds its `planning` tool), so both strategies share one copy.
//!
//! The messages it writes into memory and the step results it returns are
//! OpenManus's, word for word, because prompts written for OpenManus agents
//! rely on them. Departures from OpenManus are marked where they happen.

use agentd_strategy_sdk::host::Host;
use agentd_strategy_sdk::rules::{self, CALL_LIMIT_KEY, CUT_NOTE};
use agentd_strategy_sdk::{
    AgentConfig, ChatError, Error, ErrorCode, FinishReason, MemoryChatRequest, Message, ToolCall,
    ToolChoice, ToolSpec,
};

/// One step of OpenManus's `ToolCallAgent`: think (ask the model, with the
/// host's tools), then act (run the calls it asked for). Returns the step's
/// result line.
pub fn step<H: Host>(host: H) -> Result<String, Error> {
    let mut step = Step::new(host);
    let result = if step.think()? {
        step.act()?
    } else {
        "Thinking complete - no action needed".to_string()
    };
    // Departure from OpenManus, which never looks at `finish_reason`: a cut
    // answer is recorded as cut, so the run's record says why it is short.
    Ok(if step.cut {
        format!("{result}\n{CUT_NOTE}")
    } else {
        result
    })
}

/// What one step needs to carry from think to act. Nothing outlives a step:
/// the host owns memory, and each step starts from it afresh.
struct Step<H> {
    host: H,
    config: AgentConfig,
    tools: Vec<ToolSpec>,
    /// The calls the model asked for in this step's think, still to run.
    tool_calls: Vec<ToolCall>,
    /// The server said the answer stopped at `max_tokens`.
    cut: bool,
    /// Set once the host refused a call for the step's call limit: the
    /// remaining calls get this observation without asking the host again.
    over_call_limit: Option<String>,
}

impl<H: Host> Step<H> {
    fn new(mut host: H) -> Self {
        Step {
            config: host.config(),
            tools: host.tools(),
            host,
            tool_calls: Vec::new(),
            cut: false,
            over_call_limit: None,
        }
    }

    /// Returns whether act has anything to do.
    fn think(&mut self) -> Result<bool, Error> {
        if let Some(prompt) = non_empty(&self.config.next_step_prompt) {
            self.host.add_message(Message::user(prompt))?;
        }

        // The system prompt, the run's memory and the agent's tools, put
        // together by the host: the transcript is not copied in and back.
        let response = self.host.chat_with_memory(&MemoryChatRequest {
            system_prompt: non_empty(&self.config.system_prompt).map(str::to_string),
            agent_tools: true,
            extra_tools: Vec::new(),
            tool_choice: self.config.tool_choice,
        });
        let response = match response {
            Ok(response) => response,
            Err(ChatError::TokenLimit(message)) => {
                rules::token_limit(&mut self.host, &message)?;
                return Ok(false);
            }
            Err(ChatError::Failed(error)) => return Err(error),
        };

        self.cut = response.finish_reason == Some(FinishReason::Length);
        if self.cut {
            self.host
                .warn("the model's answer was cut at max_tokens; it may be incomplete");
        }
        let content = response.message.content.unwrap_or_default();
        let tool_calls = response.message.tool_calls;
        let name = &self.config.name;
        self.host.info(&format!("✨ {name}'s thoughts: {content}"));
        self.host.info(&format!(
            "🛠️ {name} selected {} tools to use",
            tool_calls.len()
        ));
        if let Some(first) = tool_calls.first() {
            let names: Vec<&str> = tool_calls.iter().map(|call| call.name.as_str()).collect();
            self.host
                .info(&format!("🧰 Tools being prepared: {names:?}"));
            self.host
                .info(&format!("🔧 Tool arguments: {}", first.arguments));
        }

        if self.config.tool_choice == ToolChoice::None {
            // OpenManus keeps these calls and runs them in act, which writes
            // tool messages answering an assistant message that never
            // carried the calls. Dropping them keeps memory well-formed.
            if !tool_calls.is_empty() {
                self.host.warn(&format!(
                    "🤔 Hmm, {name} tried to use tools when they weren't available!"
                ));
            }
            if content.is_empty() {
                return Ok(false);
            }
            self.host.add_message(Message::assistant(content))?;
            return Ok(true);
        }

        let has_content = !content.is_empty();
        if tool_calls.is_empty() {
            // Empty text rather than no content, as in OpenManus: chat APIs
            // reject an assistant message with neither text nor tool calls.
            self.host.add_message(Message::assistant(content))?;
            // With `required`, act reports the missing calls.
            return Ok(self.config.tool_choice == ToolChoice::Required || has_content);
        }
        let content = has_content.then_some(content);
        self.host
            .add_message(Message::assistant_with_tools(content, tool_calls.clone()))?;
        self.tool_calls = tool_calls;
        Ok(true)
    }

    fn act(&mut self) -> Result<String, Error> {
        if self.tool_calls.is_empty() {
            if self.config.tool_choice == ToolChoice::Required {
                return Err(Error::failed("Tool calls required but none provided"));
            }
            let last = self.host.memory().pop().and_then(|message| message.content);
            return Ok(last
                .filter(|content| !content.is_empty())
                .unwrap_or_else(|| "No content or commands to execute".to_string()));
        }

        let calls = std::mem::take(&mut self.tool_calls);
        let mut results = Vec::with_capacity(calls.len());
        for call in &calls {
            // Departure from OpenManus, which runs every call: past the
            // host's `max_tool_calls_per_step` each remaining call still
            // gets its observation (a call left unanswered would make the
            // next request invalid), without being sent to the host.
            let mut result = match &self.over_call_limit {
                Some(observation) => observation.clone(),
                None => self.execute_tool(call)?,
            };
            rules::cut_observation(&self.config, &mut result);
            self.host.info(&format!(
                "🎯 Tool '{}' completed its mission! Result: {result}",
                call.name
            ));
            self.host.add_message(Message::tool(
                result.clone(),
                call.id.clone(),
                call.name.clone(),
            ))?;
            results.push(result);
        }
        Ok(results.join("\n\n"))
    }

    /// Returns the observation for the model. Tool failures are
    /// observations too, so the model can correct itself; only a
    /// cancellation is an error, since the run is ending anyway.
    fn execute_tool(&mut self, call: &ToolCall) -> Result<String, Error> {
        let name = &call.name;
        if !self.tools.iter().any(|tool| tool.name == *name) {
            return Ok(format!("Error: Unknown tool '{name}'"));
        }

        // OpenManus parses `arguments or "{}"`: no arguments at all is an
        // empty object, whereas whitespace is invalid JSON.
        let empty;
        let call = if call.arguments.is_empty() {
            empty = ToolCall {
                arguments: "{}".to_string(),
                ..call.clone()
            };
            &empty
        } else {
            call
        };
        if serde_json::from_str::<serde::de::IgnoredAny>(&call.arguments).is_err() {
            if self.cut {
                // Not the model's mistake to fix in its JSON: it ran out of
                // room, and saying so lets it ask for less at once.
                return Ok(format!(
                    "Error: The arguments for {name} are incomplete: the model's output hit the max_tokens limit before they were finished. Produce shorter arguments (for example, write a long file in several steps)."
                ));
            }
            self.host.error(&format!(
                "📝 Oops! The arguments for '{name}' don't make sense - invalid JSON, arguments:{}",
                call.arguments
            ));
            return Ok(format!(
                "Error: Error parsing arguments for {name}: Invalid JSON format"
            ));
        }

        self.host.info(&format!("🔧 Activating tool: '{name}'..."));
        match self.host.invoke_tool(call) {
            Ok(result) => {
                self.handle_special_tool(name);
                Ok(if result.is_empty() {
                    format!("Cmd `{name}` completed with no output")
                } else {
                    format!("Observed output of cmd `{name}` executed:\n{result}")
                })
            }
            Err(error) if error.code == ErrorCode::Cancelled => Err(error),
            Err(error) if rules::is_call_limit(&error) => {
                self.host.warn(&error.message);
                self.over_call_limit = Some(format!(
                    "Error: not run: this step asked for more tool calls than {CALL_LIMIT_KEY} allows. Ask for fewer calls at once."
                ));
                Ok(format!("Error: {}", error.message))
            }
            Err(error) => {
                let message = format!("⚠️ Tool '{name}' encountered a problem: {}", error.message);
                self.host.error(&message);
                Ok(format!("Error: {message}"))
            }
        }
    }

    fn handle_special_tool(&mut self, name: &str) {
        if rules::is_special(&self.config, name) {
            self.host
                .info(&format!("🏁 Special tool '{name}' has completed the task!"));
            self.host.finish();
        }
    }
}

/// OpenManus tests prompts for truthiness, so an empty prompt is no prompt.
fn non_empty(text: &Option<String>) -> Option<&str> {
    text.as_deref().filter(|text| !text.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentd_strategy_sdk::Role;
    use agentd_strategy_sdk::testing::ScriptedHost;

    /// The SDK's scripted host with a next-step prompt, `Terminate` as the
    /// special tool (matched case-insensitively) and this `tool_choice`.
    fn fake_host(tool_choice: ToolChoice) -> ScriptedHost {
        let mut host = ScriptedHost::new();
        host.config.next_step_prompt = Some("next?".to_string());
        host.config.tool_choice = tool_choice;
        host.config.special_tools = vec!["Terminate".to_string()];
        host
    }

    fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: id.to_string(),
            name: name.to_string(),
            arguments: arguments.to_string(),
        }
    }

    const NO_ACTION: &str = "Thinking complete - no action needed";

    #[test]
    fn thinks_then_runs_the_tool_calls() {
        let mut host = fake_host(ToolChoice::Auto)
            .reply(Some("let me echo"), &[("echo", r#"{"text":"hi"}"#)])
            .result("echo", Ok("hi"));
        let result = step(&mut host);

        let expected = "Observed output of cmd `echo` executed:\nhi";
        assert_eq!(result, Ok(expected.to_string()));
        let request = &host.requests[0];
        assert_eq!(request.messages[0], Message::system("be brief"));
        assert_eq!(request.messages[1..], host.memory[..2]);
        assert_eq!(request.tools, host.tools);
        assert_eq!(request.tool_choice, ToolChoice::Auto);
        assert_eq!(
            host.added(),
            [
                Message::user("next?"),
                Message::assistant_with_tools(
                    Some("let me echo".to_string()),
                    vec![call("call_0", "echo", r#"{"text":"hi"}"#)],
                ),
                Message::tool(expected, "call_0", "echo"),
            ]
        );
        assert!(!host.finished);
    }

    #[test]
    fn empty_prompts_are_left_out() {
        let mut host = fake_host(ToolChoice::Auto).reply(Some("done"), &[]);
        host.config.system_prompt = Some(String::new());
        host.config.next_step_prompt = None;
        assert_eq!(step(&mut host), Ok("done".to_string()));
        assert_eq!(host.requests[0].messages, [Message::user("hello")]);
        assert_eq!(host.added(), [Message::assistant("done")]);
    }

    #[test]
    fn tool_failures_become_observations() {
        let mut host = fake_host(ToolChoice::Auto)
            .reply(
                None,
                &[
                    ("nope", "{}"),
                    ("echo", "{not json"),
                    ("echo", ""),
                    ("terminate", "{}"),
                ],
            )
            .result("terminate", Err(Error::failed("bad status")));
        let results = [
            "Error: Unknown tool 'nope'",
            "Error: Error parsing arguments for echo: Invalid JSON format",
            "Cmd `echo` completed with no output",
            "Error: ⚠️ Tool 'terminate' encountered a problem: bad status",
        ];
        assert_eq!(step(&mut host), Ok(results.join("\n\n")));
        // Only valid calls reach the host, and no arguments become `{}`.
        assert_eq!(
            host.invoked,
            [
                call("call_2", "echo", "{}"),
                call("call_3", "terminate", "{}")
            ]
        );
        assert_eq!(host.added()[1].content, None);
        let tool_messages: Vec<_> = host.added()[2..]
            .iter()
            .map(|m| {
                (
                    m.role,
                    m.tool_call_id.as_deref(),
                    m.name.as_deref(),
                    m.text(),
                )
            })
            .collect();
        assert_eq!(
            tool_messages,
            [
                (Role::Tool, Some("call_0"), Some("nope"), results[0]),
                (Role::Tool, Some("call_1"), Some("echo"), results[1]),
                (Role::Tool, Some("call_2"), Some("echo"), results[2]),
                (Role::Tool, Some("call_3"), Some("terminate"), results[3]),
            ]
        );
        // A failed special tool does not end the run.
        assert!(!host.finished);
    }

    #[test]
    fn calls_past_the_hosts_limit_are_answered_without_asking_it_again() {
        let mut host = fake_host(ToolChoice::Auto)
            .reply(None, &[("echo", "{}"); 5])
            .result("echo", Ok("hi"));
        host.max_tool_calls_per_step = Some(2);
        step(&mut host).expect("step");
        // Two ran, the third was refused by the host, the last two never
        // reached it.
        assert_eq!(host.invoked.len(), 3);
        let observations: Vec<_> = host.added()[2..].iter().map(|m| m.text()).collect();
        assert_eq!(observations.len(), 5, "every call is answered");
        assert!(observations[..2].iter().all(|o| o.ends_with("hi")));
        assert!(
            observations[2..]
                .iter()
                .all(|o| o.starts_with("Error: not run") && o.contains(CALL_LIMIT_KEY)),
            "{observations:?}"
        );
    }

    #[test]
    fn special_tools_finish_the_run() {
        let mut host = fake_host(ToolChoice::Auto)
            .reply(None, &[("terminate", r#"{"status":"success"}"#)])
            .result("terminate", Ok("The interaction has been completed"));
        assert!(step(&mut host).is_ok());
        assert!(host.finished);
        let line = "info: 🏁 Special tool 'terminate' has completed the task!";
        assert!(host.logs.iter().any(|l| l == line));
    }

    #[test]
    fn cancellation_is_an_error_not_an_observation() {
        let cancelled = Error::new(ErrorCode::Cancelled, "run cancelled");
        let mut host = fake_host(ToolChoice::Auto)
            .reply(None, &[("echo", "{}")])
            .result("echo", Err(cancelled.clone()));
        assert_eq!(step(&mut host), Err(cancelled));
    }

    #[test]
    fn observations_are_truncated_to_max_observe_characters() {
        let mut host = fake_host(ToolChoice::Auto)
            .reply(None, &[("echo", "{}")])
            .result("echo", Ok("ééééé"));
        let prefix = "Observed output of cmd `echo` executed:\n";
        let limit = prefix.chars().count() + 2;
        host.config.max_observe = Some(limit as u32);
        let expected = format!("{prefix}éé");
        assert_eq!(step(&mut host), Ok(expected.clone()));
        assert_eq!(host.added()[2].content, Some(expected));
    }

    #[test]
    fn token_limit_ends_the_run_with_a_message() {
        let mut host = fake_host(ToolChoice::Auto);
        host.replies
            .push_back(Err(ChatError::TokenLimit("used 100 of 100".to_string())));
        assert_eq!(step(&mut host), Ok(NO_ACTION.to_string()));
        assert_eq!(
            host.added()[1],
            Message::assistant(
                "Maximum token limit reached, cannot continue execution: used 100 of 100"
            )
        );
        assert!(host.finished);
    }

    #[test]
    fn llm_failure_ends_the_step_with_its_error() {
        let error = Error::new(ErrorCode::LlmFailed, "503");
        let mut host = fake_host(ToolChoice::Auto);
        host.replies
            .push_back(Err(ChatError::Failed(error.clone())));
        assert_eq!(step(&mut host), Err(error));
    }

    #[test]
    fn tool_calls_are_dropped_when_tools_are_off() {
        let mut host = fake_host(ToolChoice::None).reply(Some("just text"), &[("echo", "{}")]);
        assert_eq!(step(&mut host), Ok("just text".to_string()));
        assert!(host.invoked.is_empty());
        assert_eq!(host.added()[1], Message::assistant("just text"));
        assert!(host.logs.iter().any(|l| l.starts_with("warn: ")));

        let mut host = fake_host(ToolChoice::None).reply(None, &[("echo", "{}")]);
        assert_eq!(step(&mut host), Ok(NO_ACTION.to_string()));
        assert_eq!(host.added(), [Message::user("next?")]);
    }

    #[test]
    fn required_tool_calls_that_are_missing_fail_the_step() {
        let mut host = fake_host(ToolChoice::Required).reply(None, &[]);
        assert_eq!(
            step(&mut host),
            Err(Error::failed("Tool calls required but none provided"))
        );
        assert_eq!(host.added()[1], Message::assistant(""));
    }

    #[test]
    fn a_reply_with_nothing_in_it_ends_thinking() {
        let mut host = fake_host(ToolChoice::Auto).reply(None, &[]);
        assert_eq!(step(&mut host), Ok(NO_ACTION.to_string()));
    }

    #[test]
    fn arguments_cut_at_max_tokens_say_so() {
        let mut host = fake_host(ToolChoice::Auto)
            .reply(None, &[("echo", r#"{"text": "a very long te"#)])
            .cut();
        let result = step(&mut host).expect("step");
        let observation = host.added()[2].text().to_string();
        assert!(
            observation.starts_with("Error: The arguments for echo are incomplete")
                && observation.contains("max_tokens"),
            "{observation}"
        );
        assert!(host.invoked.is_empty(), "a cut call is not run");
        assert!(result.ends_with(CUT_NOTE), "{result}");
    }

    #[test]
    fn a_cut_text_answer_is_recorded_as_cut() {
        let mut host = fake_host(ToolChoice::Auto)
            .reply(Some("The answer is"), &[])
            .cut();
        assert_eq!(step(&mut host), Ok(format!("The answer is\n{CUT_NOTE}")));
    }

    #[test]
    fn empty_prompts_count_as_none() {
        assert_eq!(non_empty(&None), None);
        assert_eq!(non_empty(&Some(String::new())), None);
        assert_eq!(non_empty(&Some("go".to_string())), Some("go"));
    }
}
