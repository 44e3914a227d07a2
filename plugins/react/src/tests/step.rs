//! The step against a fake host: what it sends, what it writes to memory,
//! which tool it runs and how it ends.

use agentd_strategy_sdk::testing::ScriptedHost;
use agentd_strategy_sdk::{
    ChatError, Error, ErrorCode, FinishReason, Guest, Message, Role, ToolCall, ToolChoice, ToolSpec,
};

use crate::prompt::INTRO;
use crate::step::step;
use agentd_strategy_sdk::rules::CUT_NOTE;

/// The SDK's scripted host as react's tests use it: the agent at step 3
/// on react's own prompt with tools off, `Terminate` its special tool, and
/// tools with real schemas (they are described to the model in the prompt).
fn fake_host() -> ScriptedHost {
    let mut host = ScriptedHost::new();
    host.config.system_prompt = Some(INTRO.to_string());
    host.config.current_step = 3;
    host.config.tool_choice = ToolChoice::None;
    host.config.special_tools = vec!["Terminate".to_string()];
    host.tools = vec![
        ToolSpec::new(
            "echo",
            "Returns the text it is given.",
            r#"{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}"#,
        ),
        ToolSpec::new(
            "str_replace_editor",
            "Edits files.",
            r#"{"type":"object","properties":{"command":{"type":"string"},"path":{"type":"string"}},"required":["command","path"]}"#,
        ),
        ToolSpec::new(
            "terminate",
            "Ends the run.",
            r#"{"type":"object","properties":{"status":{"type":"string","enum":["success","failure"]}},"required":["status"]}"#,
        ),
    ];
    host
}

trait Observed {
    /// The text of the last message added: the observation.
    fn observation(&self) -> &str;
}

impl Observed for ScriptedHost {
    fn observation(&self) -> &str {
        self.memory.last().map_or("", Message::text)
    }
}

fn call(name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: "react-3".to_string(),
        name: name.to_string(),
        arguments: arguments.to_string(),
    }
}

const ECHO_HI: &str = "Thought: I'll echo it.\nAction: echo\nAction Input: {\"text\": \"hi\"}";

#[test]
fn an_action_runs_its_tool_and_the_result_comes_back_as_a_user_observation() {
    let mut host = fake_host().text(ECHO_HI).result("echo", Ok("hi"));
    assert_eq!(step(&mut host), Ok("Observation: hi".to_string()));

    let request = &host.requests[0];
    assert!(request.tools.is_empty(), "no tools parameter");
    assert_eq!(request.tool_choice, ToolChoice::None);
    assert_eq!(request.messages[0].role, Role::System);
    let system = request.messages[0].text();
    assert!(system.starts_with(INTRO), "{system}");
    for name in ["### echo", "### str_replace_editor", "### terminate"] {
        assert!(system.contains(name), "{name} in {system}");
    }
    assert_eq!(request.messages[1..], [Message::user("hello")]);

    assert_eq!(host.invoked, [call("echo", r#"{"text":"hi"}"#)]);
    assert_eq!(
        host.added(),
        [
            Message::assistant(ECHO_HI),
            Message::user("Observation: hi")
        ]
    );
    assert!(
        host.memory
            .iter()
            .all(|m| m.role != Role::Tool && m.tool_calls.is_empty()),
        "memory stays plain text"
    );
    assert!(!host.finished);
}

#[test]
fn an_agents_own_system_prompt_still_carries_the_tools() {
    let mut host = fake_host().text(ECHO_HI);
    host.config.system_prompt = Some("You are terse.".to_string());
    step(&mut host).expect("step");
    let system = host.requests[0].messages[0].text().to_string();
    assert!(
        system.starts_with("You are terse.\n\nYou can use these tools:"),
        "{system}"
    );
    assert!(system.contains("Action Input:"), "{system}");
}

#[test]
fn a_next_step_prompt_is_added_as_a_user_message_first() {
    let mut host = fake_host().text(ECHO_HI);
    host.config.next_step_prompt = Some("Observed duplicate responses.".to_string());
    step(&mut host).expect("step");
    assert_eq!(
        host.added()[0],
        Message::user("Observed duplicate responses.")
    );
    assert_eq!(
        host.requests[0].messages.last(),
        Some(&Message::user("Observed duplicate responses."))
    );
}

#[test]
fn a_final_answer_finishes_the_run_with_the_answer() {
    let text = "Thought: I know it.\nFinal Answer: 42";
    let mut host = fake_host().text(text);
    assert_eq!(step(&mut host), Ok("42".to_string()));
    assert!(host.finished);
    assert!(host.invoked.is_empty());
    assert_eq!(host.added(), [Message::assistant(text)]);
}

#[test]
fn an_unreadable_reply_gets_a_corrective_observation() {
    let mut host = fake_host().text("Sure, I can help with that!");
    let result = step(&mut host).expect("step");
    let observation = host.observation().to_string();
    assert_eq!(result, observation);
    assert!(
        observation.starts_with("Observation: Your reply could not be used: it has neither"),
        "{observation}"
    );
    assert!(
        observation.contains("Action: <one of: echo, str_replace_editor, terminate>")
            && observation.contains("Final Answer:"),
        "{observation}"
    );
    assert_eq!(
        host.added()[0],
        Message::assistant("Sure, I can help with that!")
    );
    assert_eq!(host.added()[1].role, Role::User);
    assert!(host.invoked.is_empty() && !host.finished);
}

#[test]
fn an_empty_reply_is_stored_empty_and_corrected() {
    let mut host = fake_host().text("");
    step(&mut host).expect("step");
    assert_eq!(host.added()[0], Message::assistant(""));
    assert!(
        host.observation().contains("it was empty"),
        "{}",
        host.observation()
    );
}

#[test]
fn a_reply_cut_at_max_tokens_is_told_it_was_cut() {
    let mut host = fake_host()
        .text("Thought: write it\nAction: echo\nAction Input: {\"text\": \"a very long te")
        .cut();
    let result = step(&mut host).expect("step");
    let observation = host.observation();
    assert!(
        observation.contains("cut off at the max_tokens limit")
            && observation.contains("not closed"),
        "{observation}"
    );
    assert!(host.invoked.is_empty(), "a cut action is not run");
    assert!(result.ends_with(CUT_NOTE), "{result}");
}

#[test]
fn an_invented_observation_is_cut_from_the_stored_reply() {
    let text = format!("{ECHO_HI}\nObservation: hi\nThought: done\nFinal Answer: hi");
    let mut host = fake_host().text(&text).result("echo", Ok("hi"));
    step(&mut host).expect("step");
    assert_eq!(host.added()[0], Message::assistant(ECHO_HI));
    assert_eq!(host.invoked.len(), 1);
    assert!(
        !host.finished,
        "the invented final answer does not end the run"
    );
}

#[test]
fn tool_names_are_matched_leniently() {
    for written in ["ECHO", "`echo`", "echo()", "functions.echo", "\"Echo\""] {
        let text = format!("Action: {written}\nAction Input: {{\"text\": \"x\"}}");
        let mut host = fake_host().text(&text);
        step(&mut host).expect("step");
        assert_eq!(host.invoked, [call("echo", r#"{"text":"x"}"#)], "{written}");
    }
    let mut host = fake_host()
        .text("Action: str-replace-editor\nAction Input: {\"command\": \"view\", \"path\": \"/\"}");
    step(&mut host).expect("step");
    assert_eq!(host.invoked[0].name, "str_replace_editor");
    // Not a tool, and no panic on a name whose bytes straddle a prefix's
    // length.
    let mut host = fake_host().text("Action: functionéé\nAction Input: {}");
    step(&mut host).expect("step");
    assert!(host.invoked.is_empty());
    assert!(host.observation().contains("no tool `functionéé`"));
}

#[test]
fn an_unknown_tool_is_an_observation_listing_the_tools() {
    let mut host = fake_host().text("Action: google_search\nAction Input: {\"query\": \"x\"}");
    step(&mut host).expect("step");
    assert_eq!(
        host.observation(),
        "Observation: Error: there is no tool `google_search`. The tools are: echo, str_replace_editor, terminate. Use one of these names as the Action, or give the Final Answer."
    );
    assert!(host.invoked.is_empty());
}

#[test]
fn plain_text_input_fills_a_sole_string_parameter() {
    let mut host = fake_host().text("Action: echo\nAction Input: hello there");
    step(&mut host).expect("step");
    assert_eq!(host.invoked, [call("echo", r#"{"text":"hello there"}"#)]);

    let mut host = fake_host().text("Action: echo\nAction Input: text: hello");
    step(&mut host).expect("step");
    assert_eq!(host.invoked, [call("echo", r#"{"text":"hello"}"#)]);
}

#[test]
fn plain_text_for_a_tool_of_several_parameters_is_refused() {
    let mut host = fake_host().text("Action: str_replace_editor\nAction Input: view /workspace");
    step(&mut host).expect("step");
    let observation = host.observation();
    assert!(
        observation.starts_with(
            "Observation: Error: the Action Input for `str_replace_editor` must be a JSON object"
        ),
        "{observation}"
    );
    assert!(host.invoked.is_empty());
}

#[test]
fn an_object_sent_as_a_json_string_is_read_as_the_object() {
    let mut host = fake_host().text("Action: echo\nAction Input: \"{\\\"text\\\": \\\"x\\\"}\"");
    step(&mut host).expect("step");
    assert_eq!(host.invoked, [call("echo", r#"{"text":"x"}"#)]);
}

#[test]
fn observations_are_truncated_to_max_observe_characters() {
    let mut host = fake_host().text(ECHO_HI).result("echo", Ok("ééééé"));
    host.config.max_observe = Some(2);
    assert_eq!(step(&mut host), Ok("Observation: éé".to_string()));
    // 0 is no limit, as in OpenManus.
    let mut host = fake_host().text(ECHO_HI).result("echo", Ok("ééééé"));
    host.config.max_observe = Some(0);
    assert_eq!(step(&mut host), Ok("Observation: ééééé".to_string()));
}

#[test]
fn a_tool_error_is_cut_at_max_observe_too() {
    let mut host = fake_host()
        .text(ECHO_HI)
        .result("echo", Err(Error::failed("x".repeat(100))));
    host.config.max_observe = Some(10);
    assert_eq!(step(&mut host), Ok("Observation: Error: xxx".to_string()));
}

#[test]
fn an_empty_result_says_so() {
    let mut host = fake_host().text(ECHO_HI).result("echo", Ok(""));
    step(&mut host).expect("step");
    assert_eq!(
        host.observation(),
        "Observation: (`echo` returned no output)"
    );
}

#[test]
fn tool_errors_are_observations() {
    let mut host = fake_host()
        .text(ECHO_HI)
        .result("echo", Err(Error::invalid_input("missing field `text`")));
    step(&mut host).expect("step");
    assert_eq!(
        host.observation(),
        "Observation: Error: missing field `text`"
    );
    assert!(host.logs.iter().any(|l| l.starts_with("error: ")));
}

#[test]
fn the_hosts_call_limit_is_an_observation() {
    let refusal = "not run: this is tool call 1 of step 3, and max_tool_calls_per_step is 0. Ask for fewer calls at once.";
    let mut host = fake_host()
        .text(ECHO_HI)
        .result("echo", Err(Error::invalid_input(refusal)));
    step(&mut host).expect("step");
    assert_eq!(host.observation(), format!("Observation: Error: {refusal}"));
    assert!(host.logs.iter().any(|l| l.starts_with("warn: ")));
}

#[test]
fn cancellation_is_an_error_not_an_observation() {
    let cancelled = Error::new(ErrorCode::Cancelled, "run cancelled");
    let mut host = fake_host()
        .text(ECHO_HI)
        .result("echo", Err(cancelled.clone()));
    assert_eq!(step(&mut host), Err(cancelled));
}

#[test]
fn special_tools_finish_the_run_after_they_succeed() {
    let text = "Thought: done\nAction: terminate\nAction Input: {\"status\": \"success\"}";
    let mut host = fake_host().text(text).result(
        "terminate",
        Ok("The interaction has been completed with status: success"),
    );
    step(&mut host).expect("step");
    assert!(
        host.finished,
        "terminate matches the special tool `Terminate`"
    );
    assert_eq!(host.invoked, [call("terminate", r#"{"status":"success"}"#)]);

    let mut host = fake_host()
        .text(text)
        .result("terminate", Err(Error::failed("bad status")));
    step(&mut host).expect("step");
    assert!(!host.finished, "a failed special tool does not end the run");
}

#[test]
fn several_actions_run_only_the_first_and_say_so() {
    let text = "Action: echo\nAction Input: {\"text\": \"one\"}\nAction: echo\nAction Input: {\"text\": \"two\"}";
    let mut host = fake_host().text(text).result("echo", Ok("one"));
    step(&mut host).expect("step");
    assert_eq!(host.invoked, [call("echo", r#"{"text":"one"}"#)]);
    let observation = host.observation();
    assert!(
        observation.starts_with(
            "Observation: one\n\n(Your reply asked for 2 actions; only the first was run."
        ),
        "{observation}"
    );
}

#[test]
fn a_native_tool_call_is_run_and_stored_as_text() {
    let mut host = fake_host();
    host.replies.push_back(Ok(Message::assistant_with_tools(
        None,
        vec![ToolCall {
            id: "call_1".to_string(),
            name: "echo".to_string(),
            arguments: r#"{"text":"hi"}"#.to_string(),
        }],
    )));
    host.finish_reasons.push_back(Some(FinishReason::ToolCalls));
    step(&mut host).expect("step");
    assert_eq!(host.invoked, [call("echo", r#"{"text":"hi"}"#)]);
    assert_eq!(
        host.added()[0],
        Message::assistant("Action: echo\nAction Input: {\"text\":\"hi\"}")
    );
}

#[test]
fn token_limit_ends_the_run_with_a_message() {
    let mut host = fake_host();
    host.replies
        .push_back(Err(ChatError::TokenLimit("used 100 of 100".to_string())));
    host.finish_reasons.push_back(None);
    let text = "Maximum token limit reached, cannot continue execution: used 100 of 100";
    assert_eq!(step(&mut host), Ok(text.to_string()));
    assert_eq!(host.added(), [Message::assistant(text)]);
    assert!(host.finished);
}

#[test]
fn llm_failure_ends_the_step_with_its_error() {
    let error = Error::new(ErrorCode::LlmFailed, "503");
    let mut host = fake_host();
    host.replies
        .push_back(Err(ChatError::Failed(error.clone())));
    host.finish_reasons.push_back(None);
    assert_eq!(step(&mut host), Err(error));
}

#[test]
fn the_tool_call_id_names_the_step() {
    let mut host = fake_host().text(ECHO_HI);
    host.config.current_step = 7;
    step(&mut host).expect("step");
    assert_eq!(host.invoked[0].id, "react-7");
}

#[test]
fn defaults_send_no_tools_and_no_next_step_prompt() {
    let d = <crate::React as Guest>::defaults();
    assert_eq!(d.system_prompt.as_deref(), Some(INTRO));
    assert_eq!(d.next_step_prompt, None);
    assert_eq!(d.max_steps, Some(20));
    assert_eq!(d.tool_choice, Some(ToolChoice::None));
    assert_eq!(d.special_tools, Some(vec!["terminate".to_string()]));
}
