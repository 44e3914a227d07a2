//! The `react` strategy against a real small model behind a real server:
//! SmolLM2-135M-Instruct served by llama-cpp-python without function
//! calling. `scripts/real-model-check.sh` installs and starts the server,
//! then runs this test with `--ignored`: it needs that server, so
//! `scripts/test.sh` leaves it out, and `.ci/run` runs the script after
//! the suite (building llama.cpp in the background meanwhile).
//!
//! What is checked is that agentd copes with whatever a tiny model writes:
//! every reply is handled (an action that ran, a final answer, or react's
//! corrective observation), no step fails, and the run ends with an
//! outcome. Whether the model solves the task is not checked: at 135M
//! parameters it often does not.

use crate::common;

use std::time::Duration;

use common::daemon::Daemon;
use serde_json::Value;

#[test]
#[ignore = "needs a real model server: run scripts/real-model-check.sh"]
fn react_handles_every_reply_of_a_real_small_model() {
    let url = std::env::var("AGENTD_REAL_MODEL_URL")
        .expect("AGENTD_REAL_MODEL_URL (set by scripts/real-model-check.sh)");
    let model = std::env::var("AGENTD_REAL_MODEL").unwrap_or_else(|_| "smollm2".to_string());
    let d = Daemon::start_against(
        &url,
        &model,
        &[
            ("react.wasm", "react"),
            ("python_execute.wasm", "python_execute"),
            ("str_replace_editor.wasm", "str_replace_editor"),
            ("bash.wasm", "bash"),
            ("terminate.wasm", "terminate"),
        ],
        // A tiny model on two cores: short answers, and room for its pace.
        "step_timeout = 300\n\n[llm.react]\nmax_tokens = 256\ntemperature = 0.0\n\n\
         [agents.react]\nmax_steps = 6\n",
    );
    let id = d.create_run(
        "react",
        "What is 17 + 25? Use the python_execute tool to compute it, then give the final answer.",
    );
    let record = d.wait_run(&id, Duration::from_secs(1800));
    let events = d.events(&id);
    eprintln!(
        "real model run {id}: outcome {}, {} steps",
        record["outcome"], record["steps"]
    );

    let outcome = record["outcome"].as_str().unwrap_or_default();
    assert!(
        ["finished", "max_steps"].contains(&outcome),
        "the run ended {outcome}, not with an outcome of the model's doing: {record}\n{}",
        d.log_text()
    );

    // Every step that started finished: no reply made a step fail.
    let started = count(&events, "step_started");
    let finished = count(&events, "step_finished");
    assert!(started > 0, "no step ran: {events:?}");
    assert_eq!(started, finished, "a step failed: {events:?}");

    // Every reply was handled: each assistant message is answered by an
    // observation (the tool's result, or react's correction), except a last
    // one that ended the run (a final answer, or terminate).
    let messages = record["messages"].as_array().expect("messages");
    for (i, message) in messages.iter().enumerate() {
        if message["role"] != "assistant" {
            continue;
        }
        eprintln!("reply {i}: {}", message["content"]);
        match messages.get(i + 1) {
            Some(next) => {
                let text = next["content"].as_str().unwrap_or_default();
                assert!(
                    next["role"] == "user" && text.starts_with("Observation:"),
                    "reply {i} was not answered with an observation: {message} -> {next}"
                );
            }
            None => assert!(
                outcome == "finished" || outcome == "max_steps",
                "the last reply left the run {outcome}"
            ),
        }
    }
}

fn count(events: &[Value], kind: &str) -> usize {
    events.iter().filter(|e| e["type"] == kind).count()
}
