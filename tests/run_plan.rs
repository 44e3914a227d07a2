//! The run's plan (contract 0.2.3) at the run level, with real components:
//! the `misbehave` strategy's `plan-story` mode publishes, changes,
//! republishes and overfills a plan, then reads it back; a resumed run
//! starts from its predecessor's plan; a 0.2.2 strategy (no `plan` import)
//! and a 0.2.3 one (no `chat-with-memory`) still run in the 0.2.4 host.

use crate::common;

use std::sync::Arc;

use agentd::agent::{AgentConfig, Outcome, Prior, RunEvent, RunOptions};
use agentd::chat::Message;
use agentd::plan::{Plan, PlanStep, StepStatus};
use agentd::testkit::Reply;
use common::{recording, Harness};

fn plan_story(max_steps: u32) -> AgentConfig {
    AgentConfig {
        name: "planner-test".into(),
        strategy: "misbehave".into(),
        tools: vec![],
        system_prompt: Some("plan-story".into()),
        max_steps: Some(max_steps),
        ..AgentConfig::with_defaults("planner-test")
    }
}

/// The plan `plan-story` publishes at step 1 (`first` = not started) and
/// step 2 (`first` = completed, with notes).
fn greet(done: bool) -> Plan {
    Plan {
        title: "Greet the user".into(),
        steps: vec![
            PlanStep {
                text: "say hi".into(),
                status: if done {
                    StepStatus::Completed
                } else {
                    StepStatus::NotStarted
                },
                notes: done.then(|| "said hi".to_string()),
            },
            PlanStep {
                text: "say bye".into(),
                status: StepStatus::NotStarted,
                notes: None,
            },
        ],
    }
}

/// Each plan change, as `(step, plan)`, in the order emitted.
fn changes(events: &[RunEvent]) -> Vec<(u32, Plan)> {
    events
        .iter()
        .filter_map(|e| match e {
            RunEvent::PlanChanged { step, plan } => Some((*step, plan.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn each_change_of_the_plan_is_one_event_and_the_record_keeps_the_last() {
    let h = Harness::new().await;
    let (events, seen) = recording();
    let record = h
        .agent(plan_story(5))
        .run(
            "greet me",
            RunOptions {
                events,
                ..RunOptions::default()
            },
        )
        .await
        .expect("run");
    assert_eq!(record.outcome, Outcome::Finished, "{record:?}");
    let seen = seen.lock().expect("lock").clone();
    // Two changes: step 3 published the current plan again (no event) and
    // step 4's plan was refused (no event either).
    assert_eq!(changes(&seen), [(1, greet(false)), (2, greet(true))]);
    // Each within its step, after `step_started` and before `step_finished`.
    let order: Vec<String> = seen
        .iter()
        .filter_map(|e| match e {
            RunEvent::StepStarted { step, .. } => Some(format!("started {step}")),
            RunEvent::PlanChanged { step, .. } => Some(format!("plan {step}")),
            RunEvent::StepFinished { step, .. } => Some(format!("finished {step}")),
            _ => None,
        })
        .take(6)
        .collect();
    assert_eq!(
        order,
        [
            "started 1",
            "plan 1",
            "finished 1",
            "started 2",
            "plan 2",
            "finished 2"
        ]
    );
    let lines: Vec<&str> = record.result.lines().collect();
    assert_eq!(lines[2], "Step 3: published the same plan again");
    // The refusal is the contract's: invalid-input naming the strategy
    // and the limit, and the strategy could carry on.
    assert!(
        lines[3].starts_with("Step 4: refused: strategy `misbehave` published a plan that was refused: the plan has 101 steps, more than the 100 a plan may have"),
        "{}",
        record.result
    );
    // `current()` reads back the last plan kept, not the refused one.
    assert_eq!(
        lines[4],
        "Step 5: current plan: Greet the user: say hi (completed: said hi), say bye (not_started)"
    );
    assert_eq!(record.plan, Some(greet(true)));
}

#[tokio::test]
async fn a_run_without_a_plan_has_none_and_records_no_change() {
    let h = Harness::new().await;
    let (events, seen) = recording();
    let mut config = plan_story(5);
    config.system_prompt = Some("fine".into());
    let record = h
        .agent(config)
        .run(
            "hi",
            RunOptions {
                events,
                ..RunOptions::default()
            },
        )
        .await
        .expect("run");
    assert_eq!(record.outcome, Outcome::Finished);
    assert!(changes(&seen.lock().expect("lock")).is_empty());
    assert_eq!(record.plan, None);
}

#[tokio::test]
async fn a_resumed_run_starts_from_its_predecessor_s_plan() {
    let h = Harness::new().await;
    // Resumed after step 4: its step 5 reads `current()`.
    let (events, seen) = recording();
    let record = h
        .agent(plan_story(5))
        .run(
            "greet me",
            RunOptions {
                events,
                prior: Some(Prior {
                    messages: vec![Message::user("greet me")],
                    steps: 4,
                    stuck_warning: false,
                    more_steps: Some(1),
                    plan: Some(greet(true)),
                }),
                ..RunOptions::default()
            },
        )
        .await
        .expect("run");
    assert_eq!(record.outcome, Outcome::Finished, "{record:?}");
    assert_eq!(
        record.result,
        "Step 5: current plan: Greet the user: say hi (completed: said hi), say bye (not_started)"
    );
    // Its own story starts from the plan it carries on with, at the step it
    // resumed after, and its record has it.
    assert_eq!(changes(&seen.lock().expect("lock")), [(4, greet(true))]);
    assert_eq!(record.plan, Some(greet(true)));
}

#[tokio::test]
async fn a_strategy_built_against_0_2_2_still_runs() {
    let h = Harness::new().await;
    let config = AgentConfig {
        strategy: "legacy_v0_2_2_strategy".into(),
        tools: vec![],
        ..AgentConfig::with_defaults("older")
    };
    let record = h.run(config, "hello").await;
    assert_eq!(record.outcome, Outcome::Finished, "{record:?}");
    assert_eq!(record.result, "Step 1: v0.2.2: step 1 of older");
    assert_eq!(record.plan, None);
}

/// A 0.2.3 strategy asks the model the way every strategy did before
/// `chat-with-memory`: its memory copied in, sent back out with `chat`.
#[tokio::test]
async fn a_strategy_built_against_0_2_3_still_runs() {
    let h = Harness::new().await;
    h.llm.push(Reply::text("Hello"));
    let config = AgentConfig {
        strategy: "legacy_v0_2_3_strategy".into(),
        tools: vec![],
        ..AgentConfig::with_defaults("older")
    };
    let record = h.run(config, "greet me").await;
    assert_eq!(record.outcome, Outcome::Finished, "{record:?}");
    assert_eq!(record.result, "Step 1: v0.2.3: step 1 of older: Hello");
    let sent = &h.llm.requests()[0]["messages"];
    assert_eq!(sent[0]["role"], "system", "{sent}");
    assert_eq!(sent[1]["content"], "greet me", "{sent}");
    assert_eq!(record.plan.map(|plan| plan.title).as_deref(), Some("Hello"));
}

#[tokio::test]
async fn a_change_over_the_run_s_byte_budget_is_neither_kept_nor_told() {
    let h = Harness::new().await;
    // The start (about 235 bytes: run_started, the request, step_started)
    // fits; step 1's plan_changed (about 190 more) does not.
    let runtime = agentd::agent::Runtime {
        plugins: h.runtime.plugins.clone(),
        sandboxes: h.runtime.sandboxes.clone(),
        step_timeout: h.runtime.step_timeout,
        grants: h.runtime.grants.clone(),
        limits: agentd::agent::RunLimits {
            max_run_bytes: 300,
            ..agentd::agent::RunLimits::default()
        },
        tool_provider: h.runtime.tool_provider.clone(),
    };
    let agent = agentd::agent::Agent::new(
        plan_story(5),
        agentd::llm::LlmClient::new(h.settings()).expect("llm client"),
        Arc::new(runtime),
    );
    let (events, seen) = recording();
    let record = agent
        .run(
            "greet me",
            RunOptions {
                run_id: Some("r".into()),
                events,
                ..RunOptions::default()
            },
        )
        .await
        .expect("run");
    assert_eq!(record.outcome, Outcome::Error, "{record:?}");
    let error = record.error.clone().unwrap_or_default();
    assert!(error.contains("max_run_bytes"), "{error}");
    let seen = seen.lock().expect("lock").clone();
    assert!(
        seen.iter()
            .any(|e| matches!(e, RunEvent::StepStarted { step: 1, .. })),
        "the start fit: {seen:?}"
    );
    assert!(changes(&seen).is_empty(), "{seen:?}");
    assert_eq!(record.plan, None);
}

#[tokio::test]
async fn a_resumed_run_refused_at_its_start_still_records_the_plan_it_carried() {
    let h = Harness::new().await;
    // `approve` names a tool the run does not have: the run is refused
    // before its first step, after it took over its predecessor's story.
    let config = AgentConfig {
        approve: agentd::agent::Approve::Tools(vec!["bash".into()]),
        ..plan_story(5)
    };
    let (events, seen) = recording();
    let record = h
        .agent(config)
        .run(
            "greet me",
            RunOptions {
                events,
                prior: Some(Prior {
                    messages: vec![Message::user("greet me"), Message::assistant("hi")],
                    steps: 4,
                    stuck_warning: false,
                    more_steps: Some(1),
                    plan: Some(greet(true)),
                }),
                ..RunOptions::default()
            },
        )
        .await
        .expect("run");
    assert_eq!(record.outcome, Outcome::Error, "{record:?}");
    assert!(
        record.error.as_deref().is_some_and(|e| e.contains("bash")),
        "{record:?}"
    );
    assert_eq!(record.plan, Some(greet(true)), "the plan it carried");
    assert_eq!(changes(&seen.lock().expect("lock")), [(4, greet(true))]);
    assert_eq!(
        record.messages.len(),
        2,
        "the transcript it carried: {record:?}"
    );
}
