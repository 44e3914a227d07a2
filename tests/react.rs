//! The `react` strategy component in the real run loop, against the fake
//! LLM: tool use in plain text, with no `tools` parameter, observations as
//! `user` messages, and the host's stuck detection, step limit and special
//! tools applying as for `toolcall`.

use crate::common;

use std::sync::Mutex;

use agentd::agent::stuck::STUCK_PROMPT;
use agentd::agent::{AgentConfig, Outcome, RunEvent, RunOptions};
use agentd::chat::{Role, ToolChoice};
use agentd::testkit::Reply;
use common::{recording, Harness};
use serde_json::Value;

/// The strategy's default system prompt, before the tool list it appends
/// at each step.
const REACT_INTRO: &str = "You are an agent that solves the user's task step by step.";

/// An agent on `react` with the test tools; prompts and step limit are the
/// strategy's unless set.
fn react_agent(max_steps: Option<u32>) -> AgentConfig {
    AgentConfig {
        strategy: "react".into(),
        tools: vec!["echo".into(), "fail_tool".into(), "terminate".into()],
        max_steps,
        ..AgentConfig::with_defaults("reactor")
    }
}

fn echo(thought: &str, text: &str) -> Reply {
    Reply::text(format!(
        "Thought: {thought}\nAction: echo\nAction Input: {{\"text\": \"{text}\"}}"
    ))
}

/// The messages of a request the fake LLM received.
fn messages(request: &Value) -> Vec<Value> {
    request["messages"].as_array().cloned().unwrap_or_default()
}

/// The last message of a request.
fn last(request: &Value) -> Value {
    messages(request).last().cloned().unwrap_or_default()
}

fn stuck_steps(seen: &Mutex<Vec<RunEvent>>) -> Vec<u32> {
    seen.lock()
        .expect("events")
        .iter()
        .filter_map(|e| match e {
            RunEvent::StuckDetected { step } => Some(*step),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn the_strategy_declares_its_defaults() {
    let h = Harness::new().await;
    let set = h.runtime.plugins.snapshot();
    let react = set.strategy("react").expect("react strategy");
    let defaults = &react.defaults;
    assert!(
        defaults
            .system_prompt
            .as_deref()
            .is_some_and(|p| p.starts_with(REACT_INTRO)),
        "{defaults:?}"
    );
    assert_eq!(defaults.next_step_prompt, None);
    assert_eq!(defaults.max_steps, Some(20));
    assert_eq!(defaults.tool_choice, Some(ToolChoice::None));
    assert_eq!(defaults.special_tools, Some(vec!["terminate".to_string()]));
}

#[tokio::test]
async fn a_multi_step_task_runs_to_finished_in_plain_text() {
    let h = Harness::new().await;
    h.llm.push_all([
        echo("First the first word.", "one"),
        // Another case for the tool, Python's quotes and a trailing comma,
        // and an observation the model invents, which is cut.
        Reply::text(
            "Thought: Now the second.\nAction: Echo\nAction Input: {'text': 'two',}\nObservation: two\nFinal Answer: one two",
        ),
        Reply::text("Thought: I have both words.\nFinal Answer: one two"),
    ]);
    let r = h.run(react_agent(Some(10)), "echo one, then two").await;
    assert_eq!(r.outcome, Outcome::Finished, "{r:?}");
    assert_eq!(r.steps, 3);
    assert_eq!(
        r.result,
        "Step 1: Observation: one\nStep 2: Observation: two\nStep 3: one two"
    );

    let requests = h.llm.requests();
    assert_eq!(requests.len(), 3);
    for request in &requests {
        assert!(
            request.get("tools").is_none(),
            "no tools parameter: {request}"
        );
        assert!(request.get("tool_choice").is_none(), "{request}");
        let system = &messages(request)[0];
        assert_eq!(system["role"], "system");
        let text = system["content"].as_str().unwrap_or("");
        assert!(text.starts_with(REACT_INTRO), "{text}");
        assert!(
            text.contains("### echo\nReturns the text it is given.\nParameters (JSON Schema): ")
                && text.contains("Action Input:")
                && text.contains("Final Answer:"),
            "the tools and the format are in the system prompt: {text}"
        );
    }
    // Each tool result came back as a user message.
    assert_eq!(last(&requests[1])["role"], "user");
    assert_eq!(last(&requests[1])["content"], "Observation: one");
    assert_eq!(last(&requests[2])["content"], "Observation: two");
    // The model's second reply is kept up to its invented observation.
    let replies: Vec<&str> = r
        .messages
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .map(|m| m.content_str())
        .collect();
    assert_eq!(
        replies[1],
        "Thought: Now the second.\nAction: Echo\nAction Input: {'text': 'two',}"
    );
    let roles: Vec<Role> = r.messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::User,
            Role::Assistant,
            Role::User,
            Role::Assistant,
            Role::User,
            Role::Assistant
        ],
        "turns alternate, with no tool role and no tool calls"
    );
    assert!(r.messages.iter().all(|m| m.tool_calls.is_empty()));
    assert!(h.llm.rejected().is_empty(), "{:?}", h.llm.rejected());
}

#[tokio::test]
async fn malformed_replies_get_a_corrective_observation_and_the_run_recovers() {
    let h = Harness::new().await;
    h.llm.push_all([
        Reply::text("Sure! I would be happy to echo that for you."),
        Reply::text(
            "Thought: echo it\nAction: echo\nAction Input: {\"text\": \"hi\" \"again\": 1}",
        ),
        echo("Properly this time.", "hi"),
        Reply::text("Final Answer: hi"),
    ]);
    let r = h.run(react_agent(Some(10)), "echo hi").await;
    assert_eq!(r.outcome, Outcome::Finished, "{r:?}");
    assert_eq!(r.steps, 4);

    let requests = h.llm.requests();
    let prose = last(&requests[1]);
    assert_eq!(prose["role"], "user");
    let prose = prose["content"].as_str().unwrap_or("");
    assert!(
        prose.starts_with("Observation: Your reply could not be used: it has neither an `Action:` line nor a `Final Answer:` line."),
        "{prose}"
    );
    assert!(
        prose.contains("Action: <one of: echo, fail_tool, terminate>")
            && prose.contains("Final Answer:"),
        "the format is restated: {prose}"
    );
    let broken = last(&requests[2])["content"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(
        broken.contains("the Action Input for `echo` is not valid JSON"),
        "{broken}"
    );
    assert_eq!(last(&requests[3])["content"], "Observation: hi");
}

#[tokio::test]
async fn tool_failures_are_observations_and_terminate_finishes() {
    let h = Harness::new().await;
    h.llm.push_all([
        Reply::text("Action: fail_tool\nAction Input: {}"),
        Reply::text("Action: no_such_tool\nAction Input: {}"),
        Reply::text("Thought: done\nAction: terminate\nAction Input: {\"status\": \"success\"}"),
    ]);
    let r = h.run(react_agent(Some(10)), "fail, then stop").await;
    assert_eq!(r.outcome, Outcome::Finished, "{r:?}");
    assert_eq!(r.steps, 3, "terminate, a special tool, ends the run");
    let requests = h.llm.requests();
    let failed = last(&requests[1])["content"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(
        failed.starts_with("Observation: Error: ") && failed.contains("deliberate failure"),
        "{failed}"
    );
    assert_eq!(
        last(&requests[2])["content"],
        "Observation: Error: there is no tool `no_such_tool`. The tools are: echo, fail_tool, terminate. Use one of these names as the Action, or give the Final Answer."
    );
    assert!(
        r.result.ends_with(
            "Step 3: Observation: The interaction has been completed with status: success"
        ),
        "{}",
        r.result
    );
}

#[tokio::test]
async fn identical_replies_are_stuck_and_the_warning_reaches_the_model() {
    let h = Harness::new().await;
    let same = echo("I will echo again.", "again");
    h.llm.push_all([
        same.clone(),
        same.clone(),
        same,
        echo("Something new.", "new"),
        Reply::text("Final Answer: done"),
    ]);
    let (events, seen) = recording();
    let r = h
        .agent(react_agent(Some(10)))
        .run(
            "loop",
            RunOptions {
                events,
                ..RunOptions::default()
            },
        )
        .await
        .expect("run");
    assert_eq!(r.outcome, Outcome::Finished, "{r:?}");
    assert_eq!(
        stuck_steps(&seen),
        [3],
        "the third identical reply is stuck"
    );
    let requests = h.llm.requests();
    // Step 4 begins with the host's warning as its next-step prompt (the
    // strategy has none of its own), after step 3's observation.
    assert_eq!(last(&requests[3])["role"], "user");
    assert_eq!(last(&requests[3])["content"], STUCK_PROMPT);
    let before = &messages(&requests[3]);
    assert_eq!(before[before.len() - 2]["content"], "Observation: again");
    // Once only.
    assert!(
        messages(&requests[4])
            .iter()
            .filter(|m| m["content"] == STUCK_PROMPT)
            .count()
            == 1,
        "the warning is added once"
    );
}

#[tokio::test]
async fn a_model_that_never_acts_runs_to_the_strategys_step_limit() {
    let h = Harness::new().await;
    h.llm
        .set_fallback(Reply::text("Let me think about this some more."));
    let r = h.run(react_agent(None), "ponder").await;
    assert_eq!(r.outcome, Outcome::MaxSteps, "{r:?}");
    assert_eq!(r.steps, 20, "react's own default");
    assert!(
        r.result.ends_with("Terminated: Reached max steps (20)"),
        "{}",
        r.result
    );
    // Every step told the model how to reply.
    let corrective = r
        .messages
        .iter()
        .filter(|m| {
            m.role == Role::User
                && m.content_str()
                    .starts_with("Observation: Your reply could not be used")
        })
        .count();
    assert!(
        corrective >= 10,
        "{corrective} corrective observations in the window"
    );
}

#[tokio::test]
async fn an_agent_step_limit_wins_over_the_strategys() {
    let h = Harness::new().await;
    h.llm.set_fallback(echo("Again.", "x"));
    let r = h.run(react_agent(Some(3)), "echo forever").await;
    assert_eq!(r.outcome, Outcome::MaxSteps, "{r:?}");
    assert_eq!(r.steps, 3);
    assert_eq!(
        r.result,
        "Step 1: Observation: x\nStep 2: Observation: x\nStep 3: Observation: x\nTerminated: Reached max steps (3)"
    );
}
