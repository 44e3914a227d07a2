//! Fault injection, plugin family, wasm level: a component declaring
//! hundreds of core instances (or too many memories or tables), a strategy
//! or a tool growing its memory past `[plugins] memory_limit`, looping
//! forever, recursing without end, holding stdout handles by the hundred,
//! handing the host 32 MiB in one call, and a tool or a strategy that only
//! ever waits on the host (a sandbox operation or `chat` in a loop). Each runs against the real
//! daemon, real wasm built from `plugins/`, real Docker (the bystander's
//! sandbox) and the scripted fake LLM, and proves what `common::fault`
//! asserts: the daemon answers within a second, a bystander run finishes,
//! no container is left, committed runs are unchanged, and the failing run
//! ends `error` naming the plugin and the cause. Needs a Docker engine
//! (scripts/ensure-docker.sh) and the `agentd-sandbox-tiny` image.

use crate::common;

use std::time::Duration;

use agentd::testkit::{FakeLlm, Reply};
use common::daemon::Daemon;
use common::fault::{
    assert_ended_because, assert_no_containers, assert_status_within_a_second, Bystander,
    Committed, BYSTANDER_AGENT,
};
use serde_json::Value;

/// The plugins every test's daemon serves: the bystander's (`toolcall`,
/// `bash`, `terminate`), the hostile strategy and the hostile tool.
const PLUGINS: &[(&str, &str)] = &[
    ("toolcall.wasm", "toolcall"),
    ("terminate.wasm", "terminate"),
    ("bash.wasm", "bash"),
    ("misbehave.wasm", "misbehave"),
    ("fail_tool.wasm", "fail_tool"),
    ("misbehave_tool.wasm", "misbehave_tool"),
];

/// A short step deadline for the infinite loops (plugin time only: the
/// bystander's sandbox waits do not count), and the agents under test.
const AGENTS: &str = "step_timeout = 3\n\n\
    [agents.hostile_tool]\nstrategy = \"toolcall\"\ntools = [\"fail_tool\", \"terminate\"]\nmax_steps = 3\n";

/// A daemon with [`PLUGINS`], the agents, the bystander, and `more`
/// configuration (a `[plugins]` table, the `hostile` agent).
fn daemon(llm: &FakeLlm, more: &str) -> Daemon {
    let extra = format!("{AGENTS}{BYSTANDER_AGENT}{more}");
    tokio::task::block_in_place(|| Daemon::start_with_plugins(llm, PLUGINS, &extra))
}

/// The agent `hostile` on the `misbehave` strategy, whose system prompt
/// picks the misbehaviour.
fn hostile(mode: &str) -> String {
    format!("\n[agents.hostile]\nstrategy = \"misbehave\"\ntools = []\nmax_steps = 2\nsystem_prompt = \"{mode}\"\n")
}

/// The fault's run, started next to a bystander once one run is committed;
/// everything `common::fault` promises is asserted, and the failing run's
/// record returned after `assert_ended_because(record, "error", words)`.
async fn prove(d: &Daemon, llm: &FakeLlm, agent: &str, request: &str, words: &[&str]) -> Value {
    let (first, committed) = tokio::task::block_in_place(|| {
        // One run committed before the fault, so "unchanged" means something.
        let first = Bystander::start(d, llm);
        first.finish(d);
        let committed = Committed::take(d);
        assert!(committed.len() >= 1, "a run was committed before the fault");
        (first, committed)
    });
    let (id, record, bystander) = tokio::task::block_in_place(|| {
        let id = d.create_run(agent, request);
        let bystander = Bystander::start(d, llm);
        assert_status_within_a_second(d);
        let record = d.wait_run(&id, Duration::from_secs(120));
        bystander.finish(d);
        assert_status_within_a_second(d);
        assert_ended_because(&record, "error", words);
        committed.assert_unchanged(d);
        (id, record, bystander)
    });
    assert_no_containers(&[&id, &bystander.id, &first.id]).await;
    record
}

/// A strategy whose own memory hoarding passes `[plugins] memory_limit`
/// (32 MiB here, against the default 256 MiB) is refused more memory; the
/// abort that follows is reported as the limit, naming the plugin.
#[tokio::test(flavor = "multi_thread")]
async fn strategy_growing_past_memory_limit_ends_the_run_naming_it() {
    let llm = FakeLlm::start().await.expect("fake llm");
    let d = daemon(
        &llm,
        &format!(
            "{}\n[plugins]\nmemory_limit = \"32m\"\n",
            hostile("grow-memory")
        ),
    );
    prove(
        &d,
        &llm,
        "hostile",
        "hoard memory",
        &["plugin `misbehave`", "memory limit of 32 MiB", "refused"],
    )
    .await;
}

/// The same limit holds for each tool's store: a tool hoarding memory ends
/// the run (the model retrying it would only take the memory again).
#[tokio::test(flavor = "multi_thread")]
async fn tool_growing_past_memory_limit_ends_the_run_naming_it() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "tool hoards memory",
        [
            Reply::call("fail_tool", r#"{"grow":true}"#),
            Reply::terminate(),
        ],
    );
    let d = daemon(&llm, "\n[plugins]\nmemory_limit = \"32m\"\n");
    prove(
        &d,
        &llm,
        "hostile_tool",
        "tool hoards memory",
        &["plugin `fail_tool`", "memory limit of 32 MiB"],
    )
    .await;
}

/// An infinite loop in a strategy: the step deadline (plugin time) ends
/// the run, naming the plugin; the epoch yields keep the daemon serving.
#[tokio::test(flavor = "multi_thread")]
async fn strategy_infinite_loop_ends_the_run_at_the_step_deadline() {
    let llm = FakeLlm::start().await.expect("fake llm");
    let d = daemon(&llm, &hostile("loop-forever"));
    prove(
        &d,
        &llm,
        "hostile",
        "spin",
        &["plugin `misbehave`", "step deadline"],
    )
    .await;
}

/// An infinite loop in a tool: the same deadline, naming the tool.
#[tokio::test(flavor = "multi_thread")]
async fn tool_infinite_loop_ends_the_run_at_the_step_deadline() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "tool spins",
        [
            Reply::call("fail_tool", r#"{"spin":true}"#),
            Reply::terminate(),
        ],
    );
    let d = daemon(&llm, "");
    prove(
        &d,
        &llm,
        "hostile_tool",
        "tool spins",
        &["plugin `fail_tool`", "step deadline"],
    )
    .await;
}

/// Unbounded recursion in a strategy overflows the wasm stack, which traps
/// (the host's own stack is untouched); the run ends naming the cause.
#[tokio::test(flavor = "multi_thread")]
async fn strategy_deep_recursion_ends_the_run_naming_the_stack() {
    let llm = FakeLlm::start().await.expect("fake llm");
    let d = daemon(&llm, &hostile("deep-recursion"));
    prove(
        &d,
        &llm,
        "hostile",
        "recurse",
        &["plugin `misbehave`", "call stack"],
    )
    .await;
}

/// Unbounded recursion in a tool: before, the trap was an observation and
/// the model was free to call it again; now the run ends naming the tool.
#[tokio::test(flavor = "multi_thread")]
async fn tool_deep_recursion_ends_the_run_naming_the_stack() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "tool recurses",
        [
            Reply::call("fail_tool", r#"{"recurse":true}"#),
            Reply::terminate(),
        ],
    );
    let d = daemon(&llm, "");
    prove(
        &d,
        &llm,
        "hostile_tool",
        "tool recurses",
        &["plugin `fail_tool`", "call stack"],
    )
    .await;
}

/// `get-stdout()` a million times without dropping a handle: each handle is
/// a task in the host, so the plugin is stopped at the handle cap.
#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_stdout_handles_is_stopped_at_the_handle_cap() {
    let llm = FakeLlm::start().await.expect("fake llm");
    let d = daemon(&llm, &hostile("stdout-handles"));
    prove(
        &d,
        &llm,
        "hostile",
        "handles",
        &["plugin `misbehave`", "too many handles", "get-stdout"],
    )
    .await;
}

/// One `logging.log` call handing the host 32 MiB: more than one call may
/// copy out of a plugin, so it traps before the host allocates it.
#[tokio::test(flavor = "multi_thread")]
async fn one_call_passing_32_mib_to_the_host_is_stopped() {
    let llm = FakeLlm::start().await.expect("fake llm");
    let d = daemon(&llm, &hostile("log-flood"));
    let record = prove(
        &d,
        &llm,
        "hostile",
        "flood the log",
        &["plugin `misbehave`", "in one call"],
    )
    .await;
    assert!(
        !d.log_text().contains(&"A".repeat(1 << 20)),
        "no MiB of the message reached the log: {record}"
    );
}

/// A tool returning 32 MiB: refused before the host allocates it (more
/// than one call may hand over), as an observation the model can act on,
/// since asking for less is a fix; the run goes on and finishes.
#[tokio::test(flavor = "multi_thread")]
async fn a_tool_result_over_the_per_call_limit_is_refused_as_an_observation() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "tool returns 32 MiB",
        [
            Reply::call("fail_tool", r#"{"huge":true}"#),
            Reply::terminate(),
        ],
    );
    let d = daemon(&llm, "");
    let (record, bystander, committed) = tokio::task::block_in_place(|| {
        let first = Bystander::start(&d, &llm);
        first.finish(&d);
        let committed = Committed::take(&d);
        let id = d.create_run("hostile_tool", "tool returns 32 MiB");
        let bystander = Bystander::start(&d, &llm);
        assert_status_within_a_second(&d);
        let record = d.wait_run(&id, Duration::from_secs(120));
        bystander.finish(&d);
        assert_status_within_a_second(&d);
        (record, bystander, committed)
    });
    assert_eq!(record["outcome"], "finished", "{record}");
    let observation = record["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string();
    assert!(
        observation
            .contains("plugin `fail_tool` tried to pass more than 16 MiB to the host in one call")
            && observation.len() < 64 << 10,
        "{observation:.500}"
    );
    tokio::task::block_in_place(|| committed.assert_unchanged(&d));
    let id = record["id"].as_str().unwrap_or_default().to_string();
    assert_no_containers(&[&id, &bystander.id]).await;
}

/// A component that is valid wasm but would take a share of the pool no
/// plugin needs: `count` instances of a core module, each with `item` (a
/// memory or a table).
fn hostile_component(count: usize, item: &str) -> Vec<u8> {
    let mut text = format!("(component (core module $m {item})");
    for i in 0..count {
        text.push_str(&format!(" (core instance $i{i} (instantiate $m))"));
    }
    text.push(')');
    wat::parse_str(&text).expect("valid component text")
}

/// Hundreds of core instances (each with a memory), five memories, nine
/// tables: each file is refused when it is loaded, with the cap in the
/// message; the plugins already serving keep serving, and a run asking for
/// such a plugin ends `error` saying it is not loaded.
#[tokio::test(flavor = "multi_thread")]
async fn components_over_the_pool_caps_are_refused_at_load_naming_the_cap() {
    let llm = FakeLlm::start().await.expect("fake llm");
    let d = daemon(
        &llm,
        "\n[agents.greedy]\nstrategy = \"instances\"\ntools = []\nmax_steps = 1\n",
    );
    let files = [
        (
            "instances.wasm",
            hostile_component(500, "(memory 1)"),
            format!(
                "500 core module instances, which exceeds the configured maximum of {}",
                agentd::plugin::engine::MAX_CORE_INSTANCES_PER_COMPONENT
            ),
        ),
        (
            "memories.wasm",
            hostile_component(5, "(memory 1)"),
            "5 Wasm linear memories, which exceeds the configured maximum of 4".to_string(),
        ),
        (
            "tables.wasm",
            hostile_component(9, "(table 1 funcref)"),
            "9 tables, which exceeds the configured maximum of 8".to_string(),
        ),
    ];
    for (name, bytes, _) in &files {
        std::fs::write(d.plugins.path().join(name), bytes).expect("write component");
    }
    let statuses = tokio::task::block_in_place(|| {
        let (status, v) = d.post("/v1/plugins/reload", "");
        assert_eq!(status, 200, "{v}");
        let (status, v) = d.get("/v1/plugins");
        assert_eq!(status, 200, "{v}");
        v["plugins"].as_array().expect("plugins").clone()
    });
    for (name, _, cap) in &files {
        let row = statuses
            .iter()
            .find(|p| p["file"].as_str().is_some_and(|f| f.ends_with(name)))
            .unwrap_or_else(|| panic!("no status for {name}: {statuses:?}"));
        assert_eq!(row["status"], "failed", "{row}");
        let error = row["error"].as_str().unwrap_or("");
        assert!(
            error.contains(name)
                && error.contains("per-component caps")
                && error.contains(cap.as_str()),
            "{name}: {error}"
        );
    }
    for serving in ["toolcall", "bash", "terminate", "misbehave", "fail_tool"] {
        assert!(
            statuses
                .iter()
                .any(|p| p["name"] == serving && p["status"] == "loaded"),
            "{serving} stopped serving: {statuses:?}"
        );
    }
    prove(
        &d,
        &llm,
        "greedy",
        "take the pool",
        &["strategy plugin `instances`", "not loaded"],
    )
    .await;
}

/// The per-agent keys of the host-call tests: a small budget of host calls
/// per step, and a wall clock that tells the old behaviour (a plugin that
/// only waits never reaches the 3 s step deadline, so it ran until
/// `max_run_time`) from the new one, while still ending the test.
const HOST_CALL_BUDGET: &str = "max_host_calls_per_step = 50\nmax_run_time = 60\n";

/// The first user message of a request the fake LLM received.
fn first_user(request: &Value) -> Option<&str> {
    request["messages"]
        .as_array()?
        .iter()
        .find(|m| m["role"] == "user")?["content"]
        .as_str()
}

/// A tool calling `list_dir("/")` in a loop waits on the sandbox all the
/// time, which pauses the step clock: past `max_host_calls_per_step` each
/// call is refused at once, the tool's time counts again, and the step
/// deadline ends the run naming the tool and the budget, instead of the
/// loop hammering the engine until `max_run_time`.
#[tokio::test(flavor = "multi_thread")]
async fn a_tool_looping_a_sandbox_operation_is_refused_past_the_budget_and_stopped() {
    let llm = FakeLlm::start().await.expect("fake llm");
    let request = "tool loops the sandbox";
    llm.push_for(
        request,
        [
            Reply::call("misbehave_tool", r#"{"sandbox_loop":"list_dir"}"#),
            Reply::terminate(),
        ],
    );
    let agent = format!(
        "\n[agents.sandbox_loop]\nstrategy = \"toolcall\"\ntools = [\"misbehave_tool\", \"terminate\"]\nmax_steps = 3\n{HOST_CALL_BUDGET}"
    );
    let d = daemon(&llm, &agent);
    prove(
        &d,
        &llm,
        "sandbox_loop",
        request,
        &[
            "plugin `misbehave_tool`",
            "step deadline",
            "max_host_calls_per_step (50)",
        ],
    )
    .await;
    let warned = d
        .log_text()
        .matches("sandbox operations of this step are refused")
        .count();
    assert_eq!(warned, 1, "one warning for the step\n{}", d.log_text());
}

/// A strategy calling `chat` in a loop, whatever the answer, spends tokens
/// while the step clock is paused: the model sees exactly the budget of
/// requests, the rest are refused without being sent, and the step
/// deadline ends the run naming the strategy and the budget.
#[tokio::test(flavor = "multi_thread")]
async fn a_strategy_looping_chat_is_refused_past_the_budget_and_stopped() {
    let llm = FakeLlm::start().await.expect("fake llm");
    let request = "ask the model forever";
    // More answers than the budget, so nothing is retried for want of one.
    llm.push_for(request, (0..80).map(|i| Reply::text(format!("answer {i}"))));
    let d = daemon(&llm, &format!("{}{HOST_CALL_BUDGET}", hostile("chat-loop")));
    prove(
        &d,
        &llm,
        "hostile",
        request,
        &[
            "plugin `misbehave`",
            "step deadline",
            "max_host_calls_per_step (50)",
        ],
    )
    .await;
    let sent = llm
        .requests()
        .iter()
        .filter(|r| first_user(r) == Some(request))
        .count();
    assert_eq!(sent, 50, "requests the model saw for the looping run");
}
