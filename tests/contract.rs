//! The plugin contract 0.2.x through real runs: strategies own their
//! defaults, the run's request is never forgotten, the host refuses what a
//! real server would refuse before sending it, a cut answer says so, and
//! components built against 0.1.0 still run.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentd::agent::AgentConfig;
use agentd::agent::{Outcome, RunEvent, RunOptions};
use agentd::testkit::Reply;
use common::{
    tool_outputs, toolcall_agent, Harness, TOOLCALL_NEXT_STEP_PROMPT, TOOLCALL_SYSTEM_PROMPT,
};

/// Runs `config` on `request` and returns the record with the run's events.
async fn run_recorded(
    h: &Harness,
    config: AgentConfig,
    request: &str,
) -> (agentd::agent::RunRecord, Vec<RunEvent>) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    let opts = RunOptions {
        events: Arc::new(move |e: &RunEvent| sink.lock().expect("events").push(e.clone())),
        ..RunOptions::default()
    };
    let record = h.agent(config).run(request, opts).await.expect("run");
    let events = events.lock().expect("events").clone();
    (record, events)
}

fn started_max_steps(events: &[RunEvent]) -> Option<u32> {
    events.iter().find_map(|e| match e {
        RunEvent::RunStarted { max_steps, .. } => Some(*max_steps),
        _ => None,
    })
}

#[tokio::test]
async fn an_agent_on_toolcall_gets_the_tool_call_agent_defaults() {
    let h = Harness::new().await;
    h.llm.push(Reply::terminate());
    // No prompts, no step limit: everything comes from the strategy.
    let mine = AgentConfig {
        strategy: "toolcall".into(),
        tools: vec!["terminate".into()],
        ..AgentConfig::with_defaults("mine")
    };
    let (record, events) = run_recorded(&h, mine, "do the thing").await;
    assert_eq!(record.outcome, Outcome::Finished, "{record:?}");
    assert_eq!(
        started_max_steps(&events),
        Some(30),
        "ToolCallAgent.max_steps"
    );
    let first = &h.llm.requests()[0]["messages"];
    assert_eq!(first[0]["role"], "system");
    assert_eq!(first[0]["content"], TOOLCALL_SYSTEM_PROMPT);
    assert_eq!(first[1]["content"], "do the thing");
    assert_eq!(first[2]["role"], "user");
    assert_eq!(first[2]["content"], TOOLCALL_NEXT_STEP_PROMPT);
}

#[tokio::test]
async fn an_empty_prompt_in_the_agent_opts_out_of_the_strategy_default() {
    let h = Harness::new().await;
    h.llm.push(Reply::terminate());
    let quiet = AgentConfig {
        tools: vec!["terminate".into()],
        system_prompt: Some(String::new()),
        next_step_prompt: Some(String::new()),
        max_steps: Some(2),
        ..AgentConfig::with_defaults("quiet")
    };
    let (record, events) = run_recorded(&h, quiet, "just this").await;
    assert_eq!(record.outcome, Outcome::Finished, "{record:?}");
    assert_eq!(started_max_steps(&events), Some(2));
    let first = h.llm.requests()[0]["messages"].clone();
    assert_eq!(
        first,
        serde_json::json!([{"role": "user", "content": "just this"}])
    );
}

#[tokio::test]
async fn the_request_is_in_every_request_of_a_long_run() {
    let h = Harness::new().await;
    // Two parallel calls a step: 3 messages a step, so a window of 5 loses
    // the request after two steps unless it is pinned. No next-step prompt:
    // nothing else would ever add a `user` message.
    let two_calls = |step: usize| Reply::Calls {
        content: None,
        calls: vec![
            ("echo".into(), format!(r#"{{"text":"a{step}"}}"#)),
            ("echo".into(), format!(r#"{{"text":"b{step}"}}"#)),
        ],
    };
    h.llm.push_all((0..12).map(two_calls));
    h.llm.push(Reply::terminate());
    let agent = AgentConfig {
        tools: vec!["echo".into(), "terminate".into()],
        next_step_prompt: Some(String::new()),
        max_messages: 5,
        max_steps: Some(20),
        ..AgentConfig::with_defaults("long")
    };
    let (record, _) = run_recorded(&h, agent, "remember me").await;
    assert_eq!(record.outcome, Outcome::Finished, "{record:?}");
    assert_eq!(record.steps, 13);
    let requests = h.llm.requests();
    assert_eq!(requests.len(), 13);
    // Every request passed the fake server's OpenAI and Qwen-template
    // checks (pairing, a `user` message) ...
    assert!(h.llm.rejected().is_empty(), "{:?}", h.llm.rejected());
    for (i, r) in requests.iter().enumerate() {
        let messages = r["messages"].as_array().expect("messages");
        // ... and carried the system prompt, then the run's request.
        assert_eq!(
            messages[0]["content"], TOOLCALL_SYSTEM_PROMPT,
            "request {i}"
        );
        assert_eq!(messages[1]["role"], "user", "request {i}");
        assert_eq!(messages[1]["content"], "remember me", "request {i}");
        assert!(messages.len() <= 2 + 5, "request {i}: window of 5");
    }
}

#[tokio::test]
async fn a_request_without_a_user_message_is_refused_before_it_is_sent() {
    let h = Harness::new().await;
    let agent = AgentConfig {
        strategy: "misbehave".into(),
        tools: vec![],
        system_prompt: Some("no-user".into()),
        ..AgentConfig::with_defaults("sender")
    };
    let record = h.run(agent, "hello").await;
    assert_eq!(record.outcome, Outcome::Error);
    let error = record.error.unwrap_or_default();
    assert!(
        error.contains("strategy `misbehave`") && error.contains("no `user` message"),
        "{error}"
    );
    assert!(h.llm.requests().is_empty(), "nothing was sent");
}

#[tokio::test]
async fn messages_a_real_server_would_refuse_are_refused_naming_the_strategy() {
    let h = Harness::new().await;
    for (mode, expected) in [
        (
            "empty-assistant",
            "assistant message with no content): an `assistant` message must carry content or tool calls",
        ),
        ("tool-without-name", "must carry the tool's `name`"),
    ] {
        let agent = AgentConfig {
            strategy: "misbehave".into(),
            tools: vec![],
            system_prompt: Some(mode.into()),
            ..AgentConfig::with_defaults("writer")
        };
        let record = h.run(agent, "hello").await;
        assert_eq!(record.outcome, Outcome::Error, "{mode}");
        let error = record.error.unwrap_or_default();
        assert!(
            error.contains("strategy `misbehave` added a message a real server would refuse")
                && error.contains(expected),
            "{mode}: {error}"
        );
        // Nothing refused reached memory: the transcript is the request.
        assert_eq!(record.messages.len(), 1, "{mode}: {:?}", record.messages);
    }
}

#[tokio::test]
async fn a_dropped_run_records_cancelled() {
    let h = Harness::new().await;
    let agent = h.agent(common::toolcall_agent(5));
    h.llm.push(Reply::terminate());
    agent
        .run("first", RunOptions::default())
        .await
        .expect("first run");
    assert_eq!(agent.last_outcome(), Some(Outcome::Finished));
    h.llm.push(Reply::Delayed(
        Duration::from_secs(5),
        Box::new(Reply::terminate()),
    ));
    let dropped = tokio::time::timeout(
        Duration::from_millis(300),
        agent.run("second", RunOptions::default()),
    )
    .await;
    assert!(dropped.is_err(), "the run was still going when dropped");
    assert_eq!(agent.last_outcome(), Some(Outcome::Cancelled));
}

#[tokio::test]
async fn a_cut_tool_call_says_it_hit_max_tokens() {
    let h = Harness::new().await;
    let cut = r#"{"id":"c1","object":"chat.completion","model":"fake","choices":[{"index":0,"finish_reason":"length","message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"echo","arguments":"{\"text\": \"a long te"}}]}}],"usage":{"prompt_tokens":5,"completion_tokens":100}}"#;
    h.llm.push(Reply::Garbage(cut.into()));
    h.llm.push(Reply::terminate());
    let record = h.run(common::toolcall_agent(3), "write a lot").await;
    assert_eq!(record.outcome, Outcome::Finished, "{record:?}");
    let outputs = tool_outputs(&record);
    assert!(
        outputs[0].starts_with("Error: The arguments for echo are incomplete")
            && outputs[0].contains("max_tokens"),
        "{outputs:?}"
    );
    assert!(
        record
            .result
            .lines()
            .any(|l| l.contains("The model's answer was cut")),
        "{}",
        record.result
    );
}

#[tokio::test]
async fn a_tool_built_against_0_2_0_runs_under_a_0_2_1_strategy() {
    let h = Harness::new().await;
    h.llm
        .push(Reply::call("legacy_v0_2_tool", r#"{"text":"older"}"#));
    h.llm.push(Reply::terminate());
    let agent = AgentConfig {
        tools: vec!["legacy_v0_2_tool".into(), "terminate".into()],
        ..toolcall_agent(5)
    };
    let (record, _) = run_recorded(&h, agent, "use the 0.2.0 tool").await;
    assert_eq!(record.outcome, Outcome::Finished, "{record:?}");
    assert_eq!(
        tool_outputs(&record)[0],
        "Observed output of cmd `legacy_v0_2_tool` executed:\nv0.2.0: {\"text\":\"older\"}"
    );
}

#[tokio::test]
async fn a_strategy_and_a_tool_built_against_0_1_0_still_run() {
    let h = Harness::new().await;
    h.llm.push(Reply::call("legacy_tool", r#"{"text":"old"}"#));
    h.llm.push(Reply::terminate());
    let agent = AgentConfig {
        strategy: "legacy_strategy".into(),
        tools: vec!["legacy_tool".into(), "terminate".into()],
        ..AgentConfig::with_defaults("legacy")
    };
    let (record, events) = run_recorded(&h, agent, "use the old tool").await;
    assert_eq!(record.outcome, Outcome::Finished, "{record:?}");
    // Its only default, the step limit, applies; it has no prompts.
    assert_eq!(started_max_steps(&events), Some(7));
    assert_eq!(
        tool_outputs(&record)[0],
        r#"legacy: {"text":"old"}"#,
        "a 0.1.0 tool called by a 0.1.0 strategy"
    );
    assert!(
        record.result.starts_with("Step 1: legacy 0.1.0 step 1"),
        "{}",
        record.result
    );
    let first = &h.llm.requests()[0]["messages"];
    assert_eq!(
        first[0]["role"], "user",
        "no default system prompt in 0.1.0"
    );
    assert_eq!(first[0]["content"], "use the old tool");
}
