//! The bundled `planning` strategy (OpenManus's PlanningFlow) as a run: the
//! real `planning.wasm` and tool components, the run loop, and the scripted
//! fake LLM, which refuses a conversation a real server would refuse.

use crate::common;

use std::sync::{Arc, Mutex};

use agentd::agent::stuck::STUCK_PROMPT;
use agentd::agent::{AgentConfig, Outcome, Prior, RunEvent, RunOptions, RunRecord};
use agentd::plan::{Plan, StepStatus};
use agentd::testkit::Reply;
use common::{tool_outputs, Harness};
use serde_json::{json, Value};

/// An agent on `planning` with the test tools; its prompts are the
/// strategy's defaults.
fn planner(max_steps: u32) -> AgentConfig {
    AgentConfig {
        strategy: "planning".into(),
        tools: vec!["echo".into(), "fail_tool".into(), "terminate".into()],
        max_steps: Some(max_steps),
        ..AgentConfig::with_defaults("planner")
    }
}

/// The model's `create` call for a plan with these steps.
fn create(title: &str, steps: &[&str]) -> Reply {
    Reply::call(
        "planning",
        &json!({"command": "create", "title": title, "steps": steps}).to_string(),
    )
}

/// Runs `config` on `request`, recording its events.
async fn run(h: &Harness, config: AgentConfig, request: &str) -> (RunRecord, Vec<RunEvent>) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    let record = h
        .agent(config)
        .run(
            request,
            RunOptions {
                events: Arc::new(move |e: &RunEvent| sink.lock().expect("events").push(e.clone())),
                ..RunOptions::default()
            },
        )
        .await
        .expect("run");
    let events = events.lock().expect("events").clone();
    (record, events)
}

/// Each `plan_changed` event's step and the plan's statuses.
fn plan_changes(events: &[RunEvent]) -> Vec<(u32, Vec<StepStatus>)> {
    plans(events)
        .into_iter()
        .map(|(step, plan)| (step, plan.steps.iter().map(|s| s.status).collect()))
        .collect()
}

fn plans(events: &[RunEvent]) -> Vec<(u32, Plan)> {
    events
        .iter()
        .filter_map(|e| match e {
            RunEvent::PlanChanged { step, plan } => Some((*step, plan.clone())),
            _ => None,
        })
        .collect()
}

/// The last user message of a request the fake LLM received.
fn last_user_prompt(request: &Value) -> String {
    request["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_string()
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

use StepStatus::{Completed, InProgress, NotStarted};

#[tokio::test]
async fn a_multi_step_plan_runs_to_finished_and_tells_its_story() {
    let h = Harness::new().await;
    h.llm.push_all([
        create("Greet", &["Say hello", "Say goodbye"]),
        Reply::call("echo", r#"{"text":"hello"}"#),
        Reply::text("I said hello."),
        Reply::text("I said goodbye."),
        Reply::text("Both greetings were said."),
    ]);
    let (r, events) = run(&h, planner(10), "greet twice").await;
    assert_eq!(r.outcome, Outcome::Finished, "{r:?}");
    assert_eq!(r.steps, 4);
    assert!(h.llm.rejected().is_empty(), "{:?}", h.llm.rejected());

    // The plan's story: created, each step in progress then completed, the
    // last completion and the summary in the same step.
    assert_eq!(
        plan_changes(&events),
        [
            (1, vec![NotStarted, NotStarted]),
            (2, vec![InProgress, NotStarted]),
            (3, vec![Completed, NotStarted]),
            (4, vec![Completed, InProgress]),
            (4, vec![Completed, Completed]),
        ]
    );
    let last = plans(&events).pop().expect("a plan").1;
    assert_eq!(
        r.plan.as_ref(),
        Some(&last),
        "the record keeps the last plan"
    );
    assert_eq!(last.title, "Greet");
    assert_eq!(last.steps[0].notes.as_deref(), Some("I said hello."));
    assert_eq!(last.steps[1].notes.as_deref(), Some("I said goodbye."));

    // The summary is the last step's result and the transcript's last word.
    assert!(
        r.result.ends_with("\nStep 4: Both greetings were said."),
        "{}",
        r.result
    );
    let finished: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            RunEvent::StepFinished { step, result } => Some((*step, result.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        finished.last(),
        Some(&(4, "Both greetings were said.".to_string()))
    );
    let last_message = r.messages.last().expect("messages");
    assert_eq!(last_message.content_str(), "Both greetings were said.");

    let requests = h.llm.requests();
    assert_eq!(requests.len(), 5);
    // The plan request: OpenManus's planning prompts, only the planning
    // tool, which the model must call.
    assert_eq!(tool_names(&requests[0]), ["planning"]);
    assert_eq!(requests[0]["tool_choice"], "required");
    assert!(requests[0]["messages"][0]["content"]
        .as_str()
        .unwrap_or("")
        .starts_with("You are a planning assistant. Create a concise, actionable plan"));
    assert_eq!(
        last_user_prompt(&requests[0]),
        "Create a reasonable plan with clear steps to accomplish the task: greet twice"
    );
    // The steps: the agent's tools plus planning, OpenManus's step prompt.
    assert_eq!(
        tool_names(&requests[1]),
        ["echo", "fail_tool", "terminate", "planning"]
    );
    let prompt = last_user_prompt(&requests[1]);
    assert!(
        prompt.starts_with("CURRENT PLAN STATUS:\nPlan: Greet\n"),
        "{prompt}"
    );
    assert!(
        prompt.contains("You are now working on step 0: \"Say hello\""),
        "{prompt}"
    );
    assert!(
        last_user_prompt(&requests[3]).contains("You are now working on step 1: \"Say goodbye\""),
        "{}",
        last_user_prompt(&requests[3])
    );
    // The summary: no tools, the final plan.
    assert!(requests[4]
        .get("tools")
        .is_none_or(|t| t.as_array().is_some_and(|t| t.is_empty())));
    let summary = last_user_prompt(&requests[4]);
    assert!(
        summary.starts_with("The plan has been completed. Here is the final plan status:"),
        "{summary}"
    );
    assert!(summary.contains("1. [✓] Say goodbye"), "{summary}");
    assert_eq!(
        tool_outputs(&r)[1],
        "Observed output of cmd `echo` executed:\nhello"
    );
}

#[tokio::test]
async fn malformed_replies_are_observations_and_the_plan_goes_on() {
    let h = Harness::new().await;
    h.llm.push_all([
        create("Fix", &["Do the thing"]),
        Reply::call("planning", r#"{"command":"mark_step","#),
        Reply::call("echo", "{oops"),
        Reply::call(
            "planning",
            r#"{"command":"mark_step","step_index":9,"step_status":"completed"}"#,
        ),
        Reply::text("The thing is done."),
        Reply::text("Done."),
    ]);
    let (r, events) = run(&h, planner(10), "fix it").await;
    assert_eq!(r.outcome, Outcome::Finished, "{r:?}");
    assert!(h.llm.rejected().is_empty(), "{:?}", h.llm.rejected());
    let outputs = tool_outputs(&r);
    assert_eq!(
        outputs[1],
        "Error: Error parsing arguments for planning: Invalid JSON format"
    );
    assert_eq!(
        outputs[2],
        "Error: Error parsing arguments for echo: Invalid JSON format"
    );
    assert_eq!(
        outputs[3],
        "Error: ⚠️ Tool 'planning' encountered a problem: Invalid step_index: 9. Valid indices range from 0 to 0."
    );
    // None of the mistakes changed the plan.
    assert_eq!(
        plan_changes(&events),
        [
            (1, vec![NotStarted]),
            (2, vec![InProgress]),
            (5, vec![Completed]),
        ]
    );
    assert!(r.result.ends_with("Step 5: Done."), "{}", r.result);
}

#[tokio::test]
async fn no_valid_plan_from_the_model_gives_openmanus_default_plan() {
    let h = Harness::new().await;
    h.llm.push_all([
        Reply::call("planning", "{not json"),
        Reply::text("Analysed."),
        Reply::text("Executed."),
        Reply::text("Verified."),
        Reply::text("All three done."),
    ]);
    let (r, events) = run(&h, planner(10), "do it").await;
    assert_eq!(r.outcome, Outcome::Finished, "{r:?}");
    assert!(h.llm.rejected().is_empty(), "{:?}", h.llm.rejected());
    let first = &plans(&events)[0].1;
    assert_eq!(first.title, "Plan for: do it");
    let texts: Vec<_> = first.steps.iter().map(|s| s.text.as_str()).collect();
    assert_eq!(texts, ["Analyze request", "Execute task", "Verify results"]);
    assert!(
        r.result
            .starts_with("Step 1: The model gave no valid plan ("),
        "{}",
        r.result
    );
    assert_eq!(
        tool_outputs(&r)[0],
        "Error: Error parsing arguments for planning: Invalid JSON format",
        "the model's call is answered"
    );
    let statuses: Vec<_> = r
        .plan
        .as_ref()
        .expect("plan")
        .steps
        .iter()
        .map(|s| s.status)
        .collect();
    assert_eq!(statuses, [Completed; 3]);
}

#[tokio::test]
async fn a_repeated_report_is_stuck_and_the_warning_leads_the_step_prompt() {
    let h = Harness::new().await;
    h.llm.push_all([
        create("Chores", &["one", "two", "three", "four"]),
        Reply::text("Working on it."),
        Reply::text("Working on it."),
        Reply::text("Working on it."),
        Reply::text("Four is done."),
        Reply::text("Chores done."),
    ]);
    let (r, events) = run(&h, planner(10), "chores").await;
    assert_eq!(r.outcome, Outcome::Finished, "{r:?}");
    let stuck: Vec<u32> = events
        .iter()
        .filter_map(|e| match e {
            RunEvent::StuckDetected { step } => Some(*step),
            _ => None,
        })
        .collect();
    assert_eq!(stuck, [4], "the third identical answer is stuck");
    let prompts: Vec<String> = h.llm.requests().iter().map(last_user_prompt).collect();
    assert!(
        prompts[4].starts_with(&format!("{STUCK_PROMPT}\nCURRENT PLAN STATUS:\n")),
        "the step after detection: {}",
        prompts[4]
    );
    assert!(
        prompts[4].contains("You are now working on step 3: \"four\""),
        "{}",
        prompts[4]
    );
    for (i, prompt) in prompts.iter().enumerate().filter(|(i, _)| *i != 4) {
        assert!(!prompt.contains(STUCK_PROMPT), "request {i}: {prompt}");
    }
}

#[tokio::test]
async fn max_steps_leaves_the_plan_partly_done_and_a_resumed_run_carries_it_on() {
    let h = Harness::new().await;
    h.llm.push_all([
        create("Long", &["first", "second", "third"]),
        Reply::text("First done."),
        Reply::call("echo", r#"{"text":"working"}"#),
    ]);
    let (r, events) = run(&h, planner(3), "long task").await;
    assert_eq!(r.outcome, Outcome::MaxSteps, "{r:?}");
    assert_eq!(r.steps, 3);
    assert!(
        r.result.ends_with("Terminated: Reached max steps (3)"),
        "{}",
        r.result
    );
    let plan = r.plan.clone().expect("the plan is in the record");
    let statuses: Vec<_> = plan.steps.iter().map(|s| s.status).collect();
    assert_eq!(statuses, [Completed, InProgress, NotStarted]);
    assert_eq!(plans(&events).pop().map(|(_, p)| p), Some(plan.clone()));
    assert_eq!(
        h.llm.requests().len(),
        3,
        "no summary for an unfinished plan"
    );

    // Resumed, the strategy asks for no new plan: it carries on with the
    // step in progress.
    h.llm.push_all([
        Reply::text("Second done."),
        Reply::text("Third done."),
        Reply::text("All three done."),
    ]);
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    let resumed = h
        .agent(planner(3))
        .run(
            "long task",
            RunOptions {
                events: Arc::new(move |e: &RunEvent| sink.lock().expect("events").push(e.clone())),
                prior: Some(Prior {
                    messages: r.messages.clone(),
                    steps: r.steps,
                    stuck_warning: false,
                    more_steps: Some(5),
                    plan: Some(plan),
                }),
                ..RunOptions::default()
            },
        )
        .await
        .expect("resumed run");
    assert_eq!(resumed.outcome, Outcome::Finished, "{resumed:?}");
    assert_eq!(resumed.steps, 5);
    assert!(h.llm.rejected().is_empty(), "{:?}", h.llm.rejected());
    let prompt = last_user_prompt(&h.llm.requests()[3]);
    assert!(
        prompt.starts_with("CURRENT PLAN STATUS:\nPlan: Long\n")
            && prompt.contains("You are now working on step 1: \"second\""),
        "{prompt}"
    );
    assert_eq!(
        plan_changes(&events.lock().expect("events")),
        [
            (3, vec![Completed, InProgress, NotStarted]),
            (4, vec![Completed, Completed, NotStarted]),
            (5, vec![Completed, Completed, InProgress]),
            (5, vec![Completed, Completed, Completed]),
        ]
    );
    assert!(
        resumed.result.ends_with("Step 5: All three done."),
        "{}",
        resumed.result
    );
}

#[tokio::test]
async fn terminate_ends_the_run_before_the_plan_is_done() {
    let h = Harness::new().await;
    h.llm
        .push_all([create("Short", &["a", "b"]), Reply::terminate()]);
    let (r, events) = run(&h, planner(10), "stop early").await;
    assert_eq!(r.outcome, Outcome::Finished, "{r:?}");
    assert_eq!(r.steps, 2);
    assert_eq!(
        plan_changes(&events).pop(),
        Some((2, vec![InProgress, NotStarted]))
    );
    assert_eq!(h.llm.requests().len(), 2, "no summary");
}

/// The bundled `planner` agent, with no `[agents]` table: `agentd run
/// --local` runs it through a plan, shows each change of the plan on stderr
/// and prints the record with the plan.
#[tokio::test(flavor = "multi_thread")]
async fn the_bundled_planner_needs_no_agent_configuration() {
    let plugins = common::plugins_dir(&[
        "planning",
        "terminate",
        "bash",
        "str_replace_editor",
        "python_execute",
    ]);
    let llm = agentd::testkit::FakeLlm::start().await.expect("fake llm");
    llm.push_all([
        create("Greet", &["Say hello"]),
        Reply::text("Hello said."),
        Reply::text("The greeting was said."),
    ]);
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("agentd.toml");
    std::fs::write(
        &config,
        format!(
            "[llm]\nmodel = \"fake\"\nbase_url = \"{}\"\napi_key = \"k\"\n\n[daemon]\nplugins_dir = \"{}\"\nstate_dir = \"{}\"\n",
            llm.base_url(),
            plugins.path().display(),
            dir.path().display()
        ),
    )
    .expect("write config");
    let config = config.display().to_string();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_agentd"))
            .args([
                "run", "--local", "--json", "--config", &config, "planner", "greet",
            ])
            .env_remove("AGENTD_CONFIG")
            .output()
            .expect("spawn agentd")
    })
    .await
    .expect("join");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    let record: Value = serde_json::from_slice(&out.stdout).expect("JSON record");
    assert_eq!(record["outcome"], "finished", "{record}");
    assert_eq!(record["agent"], "planner");
    assert_eq!(record["steps"], 2);
    assert_eq!(
        record["plan"],
        json!({"title": "Greet", "steps": [
            {"text": "Say hello", "status": "completed", "notes": "Hello said."}
        ]})
    );
    assert!(
        record["result"]
            .as_str()
            .unwrap_or("")
            .ends_with("Step 2: The greeting was said."),
        "{record}"
    );
    // The Manus tools and planning, offered to the model.
    assert_eq!(
        tool_names(&llm.requests()[1]),
        [
            "python_execute",
            "str_replace_editor",
            "bash",
            "terminate",
            "planning"
        ]
    );
    assert!(
        stderr.contains("Greet") && stderr.contains("[x]"),
        "the plan's changes are shown: {stderr}"
    );
}
