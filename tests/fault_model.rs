//! Fault injection, model output: what a model (or whoever answers as the
//! LLM endpoint) can send must not take the daemon or the host down. The
//! real daemon, real Docker, the real `toolcall` and `bash` components and
//! the scripted fake LLM; each test asserts the invariants of
//! `common::fault`. Needs a Docker engine (scripts/ensure-docker.sh).

use crate::common;

use std::time::Duration;

use agentd::testkit::{FakeLlm, Reply};
use common::daemon::Daemon;
use common::fault::{
    assert_ended_because, assert_no_containers, assert_status_within_a_second, Bystander,
    Committed, BYSTANDER_AGENT,
};

/// An agent on `toolcall` with the sandbox's `bash`.
fn shell_agent(name: &str, extra_keys: &str) -> String {
    format!(
        "\n[agents.{name}]\nstrategy = \"toolcall\"\ntools = [\"bash\", \"terminate\"]\nmax_steps = 4\n{extra_keys}\n"
    )
}

fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

/// Starts the daemon and lets one normal run end, so that there is a
/// committed run for the fault to (not) damage.
fn start_with_a_committed_run(llm: &FakeLlm, extra: &str) -> (Daemon, Committed) {
    let d = Daemon::start(llm, &format!("{BYSTANDER_AGENT}{extra}"));
    Bystander::start(&d, llm).finish(&d);
    let committed = Committed::take(&d);
    assert!(committed.len() >= 1, "no committed run to watch");
    (d, committed)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reply_with_1000_tool_calls_runs_only_max_tool_calls_per_step() {
    let llm = FakeLlm::start().await.expect("fake llm");
    let (d, committed) = blocking(|| start_with_a_committed_run(&llm, &shell_agent("many", "")));
    let request = "call a thousand tools";
    let calls: Vec<(String, String)> = (0..1000)
        .map(|i| {
            let args = serde_json::json!({ "command": format!("echo ran-{i}") });
            ("bash".to_string(), args.to_string())
        })
        .collect();
    llm.push_for(
        request,
        [
            Reply::Calls {
                content: None,
                calls,
            },
            Reply::terminate(),
        ],
    );
    let id = blocking(|| d.create_run("many", request));
    let bystander = blocking(|| Bystander::start(&d, &llm));
    blocking(|| d.wait_for_event(&id, "tool_result"));
    blocking(|| assert_status_within_a_second(&d));
    let record = blocking(|| d.wait_run(&id, Duration::from_secs(300)));

    // The run goes on: every call is answered (the next request would be
    // refused otherwise), only the first 32 ran.
    assert_eq!(record["outcome"], "finished", "{}", record["error"]);
    let tools = common::fault::tool_contents(&record);
    let answers: Vec<&String> = tools.iter().take(1000).collect();
    assert_eq!(answers.len(), 1000, "every call gets an observation");
    let ran = answers.iter().filter(|t| t.contains("ran-")).count();
    assert_eq!(ran, 32, "calls past max_tool_calls_per_step must not run");
    for t in &answers[32..] {
        assert!(
            t.starts_with("Error: not run") && t.contains("max_tool_calls_per_step"),
            "a refused call's observation names the limit: {t}"
        );
    }
    let events = blocking(|| d.events(&id));
    let executed = events.iter().filter(|e| e["type"] == "tool_call").count();
    // The 32 `bash` calls, then the `terminate` of the next step.
    assert_eq!(executed, 33, "tool calls that reached a tool");

    blocking(|| bystander.finish(&d));
    blocking(|| assert_status_within_a_second(&d));
    assert_no_containers(&[&id, &bystander.id]).await;
    blocking(|| committed.assert_unchanged(&d));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_call_with_10_mib_of_arguments_is_refused_and_never_kept() {
    let llm = FakeLlm::start().await.expect("fake llm");
    let (d, committed) = blocking(|| start_with_a_committed_run(&llm, &shell_agent("huge", "")));
    let request = "write a huge command";
    let args = serde_json::json!({ "command": format!("echo {}", "A".repeat(10 << 20)) });
    llm.push_for(
        request,
        [Reply::call("bash", &args.to_string()), Reply::terminate()],
    );
    let id = blocking(|| d.create_run("huge", request));
    let bystander = blocking(|| Bystander::start(&d, &llm));
    blocking(|| assert_status_within_a_second(&d));
    let record = blocking(|| d.wait_run(&id, Duration::from_secs(120)));

    // The model is told why, and the run goes on to its `terminate`.
    assert_eq!(record["outcome"], "finished", "{}", record["error"]);
    let messages = record["messages"].as_array().expect("messages");
    let assistant = messages
        .iter()
        .find(|m| m["role"] == "assistant" && m["tool_calls"][0]["function"]["name"] == "bash")
        .expect("the assistant message with the call");
    let kept = assistant["tool_calls"][0]["function"]["arguments"]
        .as_str()
        .unwrap_or("");
    assert!(
        kept.len() < 4096 && kept.contains("max_tool_arguments_bytes"),
        "the stored call keeps a placeholder, not 10 MiB ({} bytes)",
        kept.len()
    );
    let tools = common::fault::tool_contents(&record);
    assert!(
        tools[0].contains("max_tool_arguments_bytes") && tools[0].contains("did not run"),
        "the observation says why: {}",
        tools[0]
    );
    let text = serde_json::to_string(&record).expect("json");
    assert!(text.len() < 1 << 20, "the record is {} bytes", text.len());
    let events = blocking(|| d.events(&id));
    assert!(
        !events
            .iter()
            .any(|e| e["type"] == "tool_call" && e["name"] == "bash"),
        "the refused call was not run"
    );
    let event_bytes: usize = events.iter().map(|e| e.to_string().len()).sum();
    assert!(event_bytes < 1 << 20, "events hold {event_bytes} bytes");

    blocking(|| bystander.finish(&d));
    blocking(|| assert_status_within_a_second(&d));
    assert_no_containers(&[&id, &bystander.id]).await;
    blocking(|| committed.assert_unchanged(&d));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_model_that_keeps_calling_sleep_1000_is_ended_by_max_run_time() {
    let llm = FakeLlm::start().await.expect("fake llm");
    // Low for the test, per agent: the daemon's default (an hour) stays.
    let (d, committed) =
        blocking(|| start_with_a_committed_run(&llm, &shell_agent("sleeper", "max_run_time = 3")));
    let request = "sleep for ever";
    let sleep = Reply::call("bash", r#"{"command":"sleep 1000"}"#);
    llm.push_for(request, std::iter::repeat_n(sleep, 10));
    let id = blocking(|| d.create_run("sleeper", request));
    let bystander = blocking(|| Bystander::start(&d, &llm));
    blocking(|| d.wait_for_event(&id, "tool_call"));
    blocking(|| assert_status_within_a_second(&d));
    // `[sandbox] timeout` is 300 s: only the run's wall clock ends it in
    // time for this wait.
    let record = blocking(|| d.wait_run(&id, Duration::from_secs(120)));

    assert_ended_because(&record, "error", &["max_run_time", "3s"]);
    blocking(|| bystander.finish(&d));
    blocking(|| assert_status_within_a_second(&d));
    assert_no_containers(&[&id, &bystander.id]).await;
    blocking(|| committed.assert_unchanged(&d));
}
