//! The run loop against real plugin components and the fake LLM: every
//! "keep" and "fix" of the agent contract.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use agentd::agent::stuck::STUCK_PROMPT;
use agentd::agent::AgentConfig;
use agentd::agent::{AgentError, AgentState, Outcome, RunEvent, RunOptions};
use agentd::chat::ToolChoice;
use agentd::cli::exit;
use agentd::testkit::Reply;
use common::{recording, tool_outputs, toolcall_agent, Harness, TOOLCALL_NEXT_STEP_PROMPT};
use tokio_util::sync::CancellationToken;

/// The last user message of each request the fake LLM received.
fn last_user_prompts(requests: &[serde_json::Value]) -> Vec<String> {
    requests
        .iter()
        .map(|r| {
            r["messages"]
                .as_array()
                .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
                .and_then(|m| m["content"].as_str())
                .unwrap_or("")
                .to_string()
        })
        .collect()
}

#[tokio::test]
async fn terminate_finishes_in_one_step() {
    let h = Harness::new().await;
    h.llm.push(Reply::terminate());
    let agent = h.agent(toolcall_agent(10));
    let r = agent
        .run("say hi", RunOptions::default())
        .await
        .expect("run");
    assert_eq!(r.outcome, Outcome::Finished, "{r:?}");
    assert_eq!(r.steps, 1);
    assert_eq!(
        r.result,
        "Step 1: Observed output of cmd `terminate` executed:\nThe interaction has been completed with status: success"
    );
    assert_eq!(agent.state(), AgentState::Idle);
    assert_eq!(agent.last_outcome(), Some(Outcome::Finished));
    // The request went out OpenAI-shaped, with the system prompt first.
    let req = &h.llm.requests()[0];
    assert_eq!(req["messages"][0]["role"], "system");
    assert_eq!(req["messages"][1]["content"], "say hi");
    assert_eq!(req["tool_choice"], "auto");
    assert_eq!(req["tools"][0]["type"], "function");
    assert!(h.llm.rejected().is_empty());
}

#[tokio::test]
async fn text_only_answers_run_to_the_step_limit() {
    let h = Harness::new().await;
    h.llm.set_fallback(Reply::text("still thinking"));
    let r = h.run(toolcall_agent(3), "ponder").await;
    assert_eq!(r.outcome, Outcome::MaxSteps);
    assert_eq!(r.steps, 3);
    assert_eq!(
        r.result,
        "Step 1: still thinking\nStep 2: still thinking\nStep 3: still thinking\nTerminated: Reached max steps (3)"
    );
}

#[tokio::test]
async fn repeated_silent_tool_call_is_stuck_and_warned_once() {
    let h = Harness::new().await;
    let same = Reply::call("echo", r#"{"text":"again"}"#);
    h.llm.push_all([
        same.clone(),
        same.clone(),
        same,
        Reply::call("echo", r#"{"text":"something new"}"#),
        Reply::text("a thought"),
        Reply::terminate(),
    ]);
    let (events, seen) = recording();
    let r = h
        .agent(toolcall_agent(10))
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
    let stuck: Vec<u32> = seen
        .lock()
        .expect("events")
        .iter()
        .filter_map(|e| match e {
            RunEvent::StuckDetected { step } => Some(*step),
            _ => None,
        })
        .collect();
    assert_eq!(stuck, [3], "the third identical call (no content) is stuck");
    let prompts = last_user_prompts(&h.llm.requests());
    assert_eq!(prompts[2], TOOLCALL_NEXT_STEP_PROMPT);
    assert_eq!(
        prompts[3],
        format!("{STUCK_PROMPT}\n{TOOLCALL_NEXT_STEP_PROMPT}"),
        "the step after detection carries the warning once"
    );
    assert_eq!(
        prompts[4], TOOLCALL_NEXT_STEP_PROMPT,
        "the warning is for one step only; the configured prompt never grows"
    );
    for p in &prompts {
        assert!(p.matches(STUCK_PROMPT).count() <= 1, "{p}");
    }
}

#[tokio::test]
async fn a_small_window_never_sends_a_rejected_conversation() {
    let h = Harness::new().await;
    // Two calls per step: the window of 4 falls inside a tool-call group
    // again and again.
    h.llm.set_fallback(Reply::Calls {
        content: None,
        calls: vec![
            ("echo".into(), r#"{"text":"a"}"#.into()),
            ("echo".into(), r#"{"text":"b"}"#.into()),
        ],
    });
    for max_messages in [2, 3, 4, 5] {
        let agent = h.agent(AgentConfig {
            max_messages,
            duplicate_threshold: 100,
            ..toolcall_agent(6)
        });
        let r = agent.run("go", RunOptions::default()).await.expect("run");
        assert_eq!(
            r.outcome,
            Outcome::MaxSteps,
            "max_messages={max_messages}: {r:?}"
        );
        // The window, plus the run's request pinned outside it.
        assert!(r.messages.len() <= max_messages as usize + 1);
        assert_eq!(r.messages[0].content_str(), "go");
    }
    assert!(h.llm.rejected().is_empty(), "{:?}", h.llm.rejected());
    assert!(h.llm.requests().len() >= 24);
}

#[tokio::test]
async fn unknown_tool_and_invalid_json_become_error_observations() {
    let h = Harness::new().await;
    h.llm.push_all([
        Reply::call("nope", "{}"),
        Reply::call("echo", "{not json"),
        Reply::call("fail_tool", "{}"),
        Reply::call("fail_tool", r#"{"trap": true}"#),
        Reply::call("echo", r#"{"text":"still works"}"#),
        Reply::terminate(),
    ]);
    let r = h.run(toolcall_agent(10), "try things").await;
    assert_eq!(r.outcome, Outcome::Finished, "{r:?}");
    let outputs = tool_outputs(&r);
    assert_eq!(outputs[0], "Error: Unknown tool 'nope'");
    assert_eq!(
        outputs[1],
        "Error: Error parsing arguments for echo: Invalid JSON format"
    );
    assert!(
        outputs[2]
            .starts_with("Error: ⚠️ Tool 'fail_tool' encountered a problem: deliberate failure"),
        "{}",
        outputs[2]
    );
    assert!(
        outputs[3].starts_with("Error: ⚠️ Tool 'fail_tool' encountered a problem:")
            && outputs[3].contains("trapped"),
        "a trapping tool is an observation, not a crashed run: {}",
        outputs[3]
    );
    assert_eq!(
        outputs[4], "Observed output of cmd `echo` executed:\nstill works",
        "a fresh instance replaces the trapped one"
    );
    assert!(h.llm.rejected().is_empty());
}

#[tokio::test]
async fn required_tool_choice_without_calls_is_an_error() {
    let h = Harness::new().await;
    h.llm.push(Reply::text("I will not call anything"));
    let r = h
        .run(
            AgentConfig {
                tool_choice: Some(ToolChoice::Required),
                ..toolcall_agent(5)
            },
            "do it",
        )
        .await;
    assert_eq!(r.outcome, Outcome::Error);
    let err = r.error.expect("error message");
    assert!(
        err.contains("Tool calls required but none provided"),
        "{err}"
    );
    assert_eq!(h.llm.requests()[0]["tool_choice"], "required");
}

#[tokio::test]
async fn none_tool_choice_ignores_calls() {
    let h = Harness::new().await;
    h.llm.push(Reply::Calls {
        content: Some("just text".into()),
        calls: vec![("terminate".into(), r#"{"status":"success"}"#.into())],
    });
    let r = h
        .run(
            AgentConfig {
                tool_choice: Some(ToolChoice::None),
                ..toolcall_agent(1)
            },
            "talk",
        )
        .await;
    assert_eq!(r.outcome, Outcome::MaxSteps, "terminate must not have run");
    assert!(tool_outputs(&r).is_empty());
    assert_eq!(
        r.result,
        "Step 1: just text\nTerminated: Reached max steps (1)"
    );
}

#[tokio::test]
async fn server_errors_are_retried_and_client_errors_are_not() {
    let h = Harness::new().await;
    h.llm
        .push_all([Reply::error(500, "overloaded"), Reply::terminate()]);
    let r = h.run(toolcall_agent(3), "retry").await;
    assert_eq!(r.outcome, Outcome::Finished, "{r:?}");
    assert_eq!(h.llm.requests().len(), 2, "one 500, then the retry");

    let h = Harness::new().await;
    h.llm
        .push_all([Reply::error(400, "bad request body"), Reply::terminate()]);
    let r = h.run(toolcall_agent(3), "no retry").await;
    assert_eq!(r.outcome, Outcome::Error);
    let err = r.error.expect("error");
    assert!(
        err.contains("400") && err.contains("bad request body"),
        "{err}"
    );
    assert_eq!(h.llm.requests().len(), 1, "a 400 is never retried");
}

#[tokio::test]
async fn rate_limits_honour_retry_after() {
    let h = Harness::new().await;
    h.llm.push_all([
        Reply::Error {
            status: 429,
            message: "slow down".into(),
            retry_after: Some("0.15".into()),
        },
        Reply::terminate(),
    ]);
    let started = std::time::Instant::now();
    let r = h.run(toolcall_agent(3), "wait").await;
    assert_eq!(r.outcome, Outcome::Finished);
    assert_eq!(h.llm.requests().len(), 2);
    // Lower bound only: the retry must not come before the server asked.
    assert!(started.elapsed() >= Duration::from_millis(150));
}

#[tokio::test]
async fn malformed_llm_output_ends_the_run_with_a_clear_error() {
    let h = Harness::new().await;
    h.llm.push(Reply::Garbage("<html>gateway</html>".into()));
    let r = h.run(toolcall_agent(3), "x").await;
    assert_eq!(r.outcome, Outcome::Error);
    let err = r.error.expect("error");
    assert!(err.contains("malformed"), "{err}");

    // A body without end is cut off, not read into memory.
    h.llm.push(Reply::Garbage("x".repeat(17 << 20)));
    let r = h.run(toolcall_agent(3), "x").await;
    assert_eq!(r.outcome, Outcome::Error);
    let err = r.error.expect("error");
    assert!(err.contains("response larger than"), "{err}");
}

#[tokio::test]
async fn the_token_budget_gives_token_limit() {
    let h = Harness::new().await;
    h.llm
        .set_prompt_tokens(400)
        .set_fallback(Reply::call("echo", r#"{"text":"more"}"#));
    let mut settings = h.settings();
    settings.max_input_tokens = Some(1000);
    let r = h
        .agent_with(toolcall_agent(10), settings)
        .run("spend", RunOptions::default())
        .await
        .expect("run");
    assert_eq!(r.outcome, Outcome::TokenLimit, "{r:?}");
    assert_eq!(
        h.llm.requests().len(),
        2,
        "the third request would exceed 1000"
    );
    assert_eq!(r.usage.prompt_tokens, 800);
    let last = r.messages.last().expect("messages");
    assert!(
        last.content_str()
            .starts_with("Maximum token limit reached, cannot continue execution: "),
        "{last:?}"
    );
    assert_eq!(r.steps, 3);
}

#[tokio::test]
async fn a_second_run_gets_the_full_step_budget() {
    let h = Harness::new().await;
    h.llm.push_all([Reply::text("one"), Reply::terminate()]);
    let agent = h.agent(toolcall_agent(3));
    let first = agent
        .run("first", RunOptions::default())
        .await
        .expect("run");
    assert_eq!(first.outcome, Outcome::Finished);
    assert_eq!(first.steps, 2);
    h.llm.set_fallback(Reply::text("again"));
    let second = agent
        .run("second", RunOptions::default())
        .await
        .expect("run");
    assert_eq!(second.outcome, Outcome::MaxSteps);
    assert_eq!(second.steps, 3, "OpenManus would resume at step 2 here");
    assert!(second.result.starts_with("Step 1: again"));
    assert_eq!(agent.last_outcome(), Some(Outcome::MaxSteps));
    assert_eq!(agent.state(), AgentState::Idle);
}

#[tokio::test]
async fn a_running_agent_refuses_a_second_run() {
    let h = Harness::new().await;
    h.llm.push(Reply::Delayed(
        Duration::from_millis(500),
        Box::new(Reply::terminate()),
    ));
    let agent = Arc::new(h.agent(toolcall_agent(3)));
    let first = tokio::spawn({
        let agent = agent.clone();
        async move { agent.run("slow", RunOptions::default()).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let refused = agent.run("again", RunOptions::default()).await;
    assert_eq!(refused, Err(AgentError::NotIdle(AgentState::Running)));
    assert_eq!(
        refused.map(|_| ()).unwrap_err().to_string(),
        "Cannot run agent from state: Running"
    );
    let r = first.await.expect("join").expect("run");
    assert_eq!(r.outcome, Outcome::Finished);
}

#[tokio::test]
async fn cancel_aborts_a_pending_llm_call() {
    let h = Harness::new().await;
    h.llm.push(Reply::Delayed(
        Duration::from_secs(30),
        Box::new(Reply::terminate()),
    ));
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        trigger.cancel();
    });
    let r = tokio::time::timeout(
        Duration::from_secs(10),
        h.agent(toolcall_agent(3)).run(
            "wait forever",
            RunOptions {
                cancel,
                ..RunOptions::default()
            },
        ),
    )
    .await
    .expect("cancel is prompt")
    .expect("run");
    assert_eq!(r.outcome, Outcome::Cancelled);
    assert_eq!(exit::for_outcome(r.outcome), 5);
}

fn misbehave(prompt: &str) -> AgentConfig {
    AgentConfig {
        name: "bad".into(),
        strategy: "misbehave".into(),
        tools: vec![],
        system_prompt: Some(prompt.into()),
        ..AgentConfig::with_defaults("bad")
    }
}

#[tokio::test]
async fn a_plugin_that_loops_forever_is_stopped_and_the_next_run_works() {
    // Two seconds, not less: the deadline counts the wall time of plugin
    // code, and the second run's first step (instantiating toolcall) must
    // fit in it even on a CI machine whose two cores are busy building.
    let h = Harness::with_step_timeout(Duration::from_secs(2)).await;
    let r = h.run(misbehave("loop-forever"), "spin").await;
    assert_eq!(r.outcome, Outcome::Error);
    let err = r.error.expect("error");
    assert!(
        err.contains("plugin `misbehave` exceeded the step deadline"),
        "{err}"
    );
    h.llm.push(Reply::terminate());
    let next = h.run(toolcall_agent(3), "fine").await;
    assert_eq!(next.outcome, Outcome::Finished, "{next:?}");
}

#[tokio::test]
async fn a_trapping_strategy_ends_the_run_naming_the_plugin() {
    let h = Harness::new().await;
    let r = h.run(misbehave("trap"), "crash").await;
    assert_eq!(r.outcome, Outcome::Error);
    let err = r.error.expect("error");
    assert!(err.contains("strategy plugin `misbehave` trapped"), "{err}");
    let fine = h.run(misbehave("be good"), "again").await;
    assert_eq!(fine.outcome, Outcome::Finished);
    assert_eq!(fine.result, "Step 1: misbehave is fine");
}

#[tokio::test]
async fn step_limits_are_layered() {
    let h = Harness::new().await;
    h.llm.set_fallback(Reply::terminate());
    let (events, seen) = recording();
    let agent = h.agent(AgentConfig {
        max_steps: None,
        ..toolcall_agent(1)
    });
    agent
        .run(
            "x",
            RunOptions {
                events: events.clone(),
                ..RunOptions::default()
            },
        )
        .await
        .expect("run");
    h.agent(misbehave("fine"))
        .run(
            "y",
            RunOptions {
                events,
                ..RunOptions::default()
            },
        )
        .await
        .expect("run");
    let limits: Vec<u32> = seen
        .lock()
        .expect("events")
        .iter()
        .filter_map(|e| match e {
            RunEvent::RunStarted { max_steps, .. } => Some(*max_steps),
            _ => None,
        })
        .collect();
    assert_eq!(
        limits,
        [30, 10],
        "toolcall's own default, then the daemon's"
    );
}

#[tokio::test]
async fn observations_are_truncated_to_max_observe_and_special_tools_match_any_case() {
    let h = Harness::new().await;
    h.llm.push_all([
        Reply::call("echo", r#"{"text":"ééééééééééééééé"}"#),
        Reply::call("echo", r#"{"text":"stop here"}"#),
    ]);
    let r = h
        .run(
            AgentConfig {
                max_observe: Some(40),
                special_tools: Some(vec!["ECHO".into()]),
                ..toolcall_agent(5)
            },
            "x",
        )
        .await;
    assert_eq!(r.outcome, Outcome::Finished, "echo is special here: {r:?}");
    assert_eq!(r.steps, 1);
    let out = &tool_outputs(&r)[0];
    assert_eq!(out.chars().count(), 40, "{out}");
}

#[tokio::test]
async fn a_missing_plugin_is_a_clear_error_and_the_request_is_kept() {
    let h = Harness::new().await;
    let r = h
        .run(
            AgentConfig {
                tools: vec!["web_search".into()],
                ..toolcall_agent(3)
            },
            "need search",
        )
        .await;
    assert_eq!(r.outcome, Outcome::Error);
    assert_eq!(
        r.error.as_deref(),
        Some("tool plugin `web_search` needed by agent `tester` is not loaded")
    );
    assert_eq!(r.messages[0].content_str(), "need search");
    assert!(h.llm.requests().is_empty());
}

#[tokio::test]
async fn a_request_that_hangs_times_out_and_is_retried() {
    let h = Harness::new().await;
    h.llm.push_all([
        Reply::Delayed(Duration::from_secs(5), Box::new(Reply::terminate())),
        Reply::terminate(),
    ]);
    let mut settings = h.settings();
    settings.request_timeout = Duration::from_millis(300);
    let r = h
        .agent_with(toolcall_agent(3), settings.clone())
        .run("x", RunOptions::default())
        .await
        .expect("run");
    assert_eq!(r.outcome, Outcome::Finished, "the retry got through: {r:?}");
    assert_eq!(h.llm.requests().len(), 2);

    h.llm.set_fallback(Reply::Delayed(
        Duration::from_secs(5),
        Box::new(Reply::terminate()),
    ));
    settings.retry.max_retries = 1;
    let r = h
        .agent_with(toolcall_agent(3), settings)
        .run("x", RunOptions::default())
        .await
        .expect("run");
    assert_eq!(r.outcome, Outcome::Error);
    let err = r.error.expect("error");
    assert!(err.contains("timed out"), "{err}");
}

#[tokio::test]
async fn the_deadline_names_a_tool_that_loops_and_excludes_llm_waits() {
    let h = Harness::with_step_timeout(Duration::from_millis(800)).await;
    // A slow model is not a runaway plugin: 1.5 s of waiting for the LLM
    // inside a step with a 0.8 s deadline.
    h.llm.push_all([
        Reply::Delayed(Duration::from_millis(1500), Box::new(Reply::text("slow"))),
        Reply::terminate(),
    ]);
    let r = h.run(toolcall_agent(3), "slow model").await;
    assert_eq!(r.outcome, Outcome::Finished, "{r:?}");

    h.llm.push(Reply::call("fail_tool", r#"{"spin": true}"#));
    let r = h.run(toolcall_agent(3), "spin").await;
    assert_eq!(r.outcome, Outcome::Error);
    let err = r.error.expect("error");
    assert!(
        err.contains("plugin `fail_tool` exceeded the step deadline"),
        "the tool, not the strategy, is named: {err}"
    );
}

#[tokio::test]
async fn plugins_get_no_filesystem_environment_or_arguments() {
    std::env::set_var("AGENTD_TEST_SECRET", "host-only");
    let h = Harness::new().await;
    let r = h.run(misbehave("probe-wasi"), "probe").await;
    assert_eq!(r.outcome, Outcome::Finished, "{r:?}");
    assert_eq!(
        r.result, "Step 1: fs=denied file=denied env=0 args=0",
        "the host environment and filesystem stay invisible"
    );
}

#[tokio::test]
async fn dropping_a_run_cancels_it_and_leaves_the_agent_idle() {
    let h = Harness::new().await;
    h.llm.push(Reply::Delayed(
        Duration::from_secs(30),
        Box::new(Reply::terminate()),
    ));
    let agent = h.agent(toolcall_agent(3));
    let gave_up = tokio::time::timeout(
        Duration::from_millis(300),
        agent.run("abandoned", RunOptions::default()),
    )
    .await;
    assert!(gave_up.is_err(), "the caller gave up");
    assert_eq!(agent.state(), AgentState::Idle, "not stuck in RUNNING");
    h.llm.push(Reply::terminate());
    let r = agent
        .run("again", RunOptions::default())
        .await
        .expect("run");
    assert_eq!(r.outcome, Outcome::Finished);
}

#[tokio::test]
async fn the_fake_server_rejects_broken_conversations_like_real_servers() {
    let h = Harness::new().await;
    h.llm.set_fallback(Reply::text("ok"));
    let client = reqwest::Client::new();
    let url = format!("{}/chat/completions", h.llm.base_url());
    let post = |body: serde_json::Value| {
        let (client, url) = (client.clone(), url.clone());
        async move {
            client
                .post(url)
                .json(&body)
                .send()
                .await
                .expect("post")
                .status()
                .as_u16()
        }
    };
    let call = serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "echo", "arguments": "{}"}}]});
    let answer =
        serde_json::json!({"role": "tool", "tool_call_id": "c1", "name": "echo", "content": "x"});
    let user = serde_json::json!({"role": "user", "content": "hi"});
    assert_eq!(
        post(serde_json::json!({"model": "m", "messages": [user, call, answer]})).await,
        200
    );
    assert_eq!(
        post(serde_json::json!({"model": "m", "messages": [answer, user]})).await,
        400,
        "an orphan tool message"
    );
    assert_eq!(
        post(serde_json::json!({"model": "m", "messages": [user, call, user]})).await,
        400,
        "an unanswered call"
    );
    assert_eq!(h.llm.rejected().len(), 2);
}
