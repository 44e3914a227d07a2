//! The run limits of issue 11 in the run loop, against real components and
//! the fake LLM but without the daemon or Docker (the fault tests,
//! `fault_model.rs` and `fault_plugin_data.rs`, prove them end to end): the
//! wall clock over LLM waits and plugin time, the step's call limit, what
//! a strategy returns as its step result.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentd::agent::{AgentConfig, Outcome, RunEvent, RunOptions};
use agentd::testkit::Reply;
use common::{tool_outputs, toolcall_agent, Harness};

fn misbehave(prompt: &str) -> AgentConfig {
    AgentConfig {
        strategy: "misbehave".into(),
        tools: vec![],
        system_prompt: Some(prompt.into()),
        ..AgentConfig::with_defaults("bad")
    }
}

#[tokio::test]
async fn max_run_time_ends_a_run_waiting_on_the_llm() {
    let h = Harness::new().await;
    // The LLM's own timeout (10 s here) and the step deadline (plugin time
    // only) would both let this wait go on.
    h.llm.set_fallback(Reply::Delayed(
        Duration::from_secs(600),
        Box::new(Reply::terminate()),
    ));
    let agent = AgentConfig {
        max_run_time: Some(Duration::from_millis(500)),
        ..toolcall_agent(3)
    };
    let r = h.run(agent, "wait for a slow model").await;
    assert_eq!(r.outcome, Outcome::Error);
    let err = r.error.expect("error");
    assert!(err.contains("max_run_time (0.5s)"), "{err}");
}

#[tokio::test]
async fn max_run_time_ends_a_strategy_that_never_yields_its_step() {
    // A step deadline far away: only the wall clock can end it in time.
    let h = Harness::with_step_timeout(Duration::from_secs(3600)).await;
    let agent = AgentConfig {
        max_run_time: Some(Duration::from_millis(500)),
        ..misbehave("loop-forever")
    };
    let r = h.run(agent, "spin").await;
    assert_eq!(r.outcome, Outcome::Error);
    assert!(r.error.expect("error").contains("max_run_time"));
    // The agent is usable again.
    h.llm.push(Reply::terminate());
    let next = h.run(toolcall_agent(3), "fine").await;
    assert_eq!(next.outcome, Outcome::Finished, "{next:?}");
}

#[tokio::test]
async fn calls_past_max_tool_calls_per_step_get_an_error_observation() {
    let h = Harness::new().await;
    let calls = (0..5)
        .map(|i| ("echo".to_string(), format!(r#"{{"text":"ran-{i}"}}"#)))
        .collect();
    h.llm.push_all([
        Reply::Calls {
            content: None,
            calls,
        },
        Reply::terminate(),
    ]);
    let agent = AgentConfig {
        max_tool_calls_per_step: Some(2),
        ..toolcall_agent(3)
    };
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    let r = h
        .agent(agent)
        .run(
            "five calls",
            RunOptions {
                events: Arc::new(move |e: &RunEvent| sink.lock().expect("events").push(e.clone())),
                ..RunOptions::default()
            },
        )
        .await
        .expect("run");
    assert_eq!(r.outcome, Outcome::Finished, "{r:?}");
    let outputs = tool_outputs(&r);
    assert!(outputs[0].ends_with("ran-0") && outputs[1].ends_with("ran-1"));
    for o in &outputs[2..5] {
        assert!(
            o.starts_with("Error: not run") && o.contains("max_tool_calls_per_step"),
            "{o}"
        );
    }
    // The limit is per step: the next step's `terminate` ran.
    let ran: Vec<String> = events
        .lock()
        .expect("events")
        .iter()
        .filter_map(|e| match e {
            RunEvent::ToolCall { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(ran, ["echo", "echo", "terminate"]);
}

#[tokio::test]
async fn a_10_mib_step_result_is_cut_with_a_note() {
    let h = Harness::new().await;
    let r = h.run(misbehave("step-result-flood"), "say a lot").await;
    assert_eq!(r.outcome, Outcome::Finished, "{r:?}");
    assert!(r.result.len() <= 2 << 20, "{} bytes kept", r.result.len());
    assert!(
        r.result
            .ends_with("bytes: the step's result over 2 MiB (max_message_bytes) ...]"),
        "{}",
        &r.result[r.result.len().saturating_sub(200)..]
    );
}
