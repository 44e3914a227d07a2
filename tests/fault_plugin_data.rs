//! Fault injection, plugins (data): a plugin must not make the daemon keep
//! more than its limits, whatever it sends. The real daemon, real Docker,
//! real components built from `plugins/` (`misbehave`, `misbehave_tool`)
//! and the scripted fake LLM; each test asserts the invariants of
//! `common::fault`. Needs a Docker engine (scripts/ensure-docker.sh).

use crate::common;

use std::time::Duration;

use agentd::testkit::{FakeLlm, Reply};
use common::daemon::{Daemon, DAEMON_PLUGINS};
use common::fault::{
    assert_ended_because, assert_no_containers, assert_status_within_a_second, Bystander,
    Committed, BYSTANDER_AGENT,
};
use serde_json::Value;

fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

/// Starts the daemon with the usual plugins and `misbehave_tool`, and lets
/// one normal run end, so that there is a committed run for the fault to
/// (not) damage. `daemon_keys` go in `[daemon]`, `agents` after.
fn start(llm: &FakeLlm, daemon_keys: &str, agents: &str) -> (Daemon, Committed) {
    let files: Vec<(String, &str)> = DAEMON_PLUGINS
        .iter()
        .chain(&["misbehave_tool"])
        .map(|p| (format!("{p}.wasm"), *p))
        .collect();
    let files: Vec<(&str, &str)> = files.iter().map(|(f, p)| (f.as_str(), *p)).collect();
    let d = Daemon::start_with_plugins(
        llm,
        &files,
        &format!("{daemon_keys}\n{BYSTANDER_AGENT}{agents}"),
    );
    Bystander::start(&d, llm).finish(&d);
    let committed = Committed::take(&d);
    assert!(committed.len() >= 1, "no committed run to watch");
    (d, committed)
}

/// The daemon's peak resident memory (`VmHWM`), in bytes.
fn peak_rss(d: &Daemon) -> u64 {
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", d.pid())).expect("daemon status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .expect("VmHWM")
}

/// The bytes of message content a run record holds.
fn content_bytes(record: &Value) -> usize {
    record["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| m["content"].as_str().map_or(0, str::len))
        .sum()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_strategy_adding_100_mib_messages_in_a_loop_is_refused_and_stopped() {
    let llm = FakeLlm::start().await.expect("fake llm");
    let agents = "\n[agents.flood]\nstrategy = \"misbehave\"\ntools = []\nsystem_prompt = \"add-message-flood 100\"\nmax_steps = 3\n\
                  \n[agents.flood3]\nstrategy = \"misbehave\"\ntools = []\nsystem_prompt = \"add-message-flood 3\"\nmax_steps = 3\n";
    let (d, committed) = blocking(|| start(&llm, "", agents));
    let id = blocking(|| d.create_run("flood", "flood the host"));
    let small = blocking(|| d.create_run("flood3", "flood the host with less"));
    let bystander = blocking(|| Bystander::start(&d, &llm));
    blocking(|| assert_status_within_a_second(&d));
    let record = blocking(|| d.wait_run(&id, Duration::from_secs(120)));
    let record3 = blocking(|| d.wait_run(&small, Duration::from_secs(120)));

    // Stopped at the first refusal, naming the strategy and the key, not
    // at the step deadline a minute later. 3 MiB is over the message limit
    // (2 MiB) but under any sensible hostcall fuel: the run limit refuses it.
    assert_ended_because(
        &record3,
        "error",
        &["misbehave", "max_message_bytes", "3145728 bytes"],
    );
    // 100 MiB is refused by the message limit, or, when the store's
    // hostcall fuel (16 MiB per call) is below it, by wasmtime before the host
    // sees it: "tried to pass more than 16 MiB to the host in one call".
    assert_ended_because(&record, "error", &["misbehave"]);
    let error = record["error"].as_str().unwrap_or("");
    assert!(
        error.contains("max_message_bytes") || error.contains("in one call"),
        "the error names the cause: {error}"
    );
    for r in [&record, &record3] {
        let kept = content_bytes(r);
        assert!(kept < 1 << 20, "the transcript holds {kept} bytes");
    }
    // Each refused call still lifts 100 MiB out of the guest, once; none
    // is copied on or kept. Kept, a few calls would pass a gigabyte.
    let peak = peak_rss(&d);
    assert!(peak < 1 << 30, "the daemon's peak RSS is {peak} bytes");

    blocking(|| bystander.finish(&d));
    blocking(|| assert_status_within_a_second(&d));
    assert_no_containers(&[&id, &small, &bystander.id]).await;
    blocking(|| committed.assert_unchanged(&d));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_returning_128_mib_is_truncated_before_anything_keeps_it() {
    let llm = FakeLlm::start().await.expect("fake llm");
    let agent = "\n[agents.big]\nstrategy = \"toolcall\"\ntools = [\"misbehave_tool\", \"terminate\"]\nmax_steps = 3\n";
    let (d, committed) = blocking(|| start(&llm, "", agent));
    let request = "return too much";
    let args = |key: &str, bytes: usize| {
        (
            "misbehave_tool".to_string(),
            serde_json::json!({ key: bytes }).to_string(),
        )
    };
    llm.push_for(
        request,
        [
            Reply::Calls {
                content: None,
                // 3 MiB: over max_tool_result_bytes, under any sensible
                // hostcall fuel, so the run limit is what cuts it.
                calls: vec![
                    args("output_bytes", 3 << 20),
                    args("error_bytes", 3 << 20),
                    args("output_bytes", 128 << 20),
                ],
            },
            Reply::terminate(),
        ],
    );
    let id = blocking(|| d.create_run("big", request));
    let bystander = blocking(|| Bystander::start(&d, &llm));
    blocking(|| assert_status_within_a_second(&d));
    let record = blocking(|| d.wait_run(&id, Duration::from_secs(120)));

    // The run goes on with the results cut, with a note, to
    // max_tool_result_bytes (here the default: `output_limit`, 1 MiB).
    assert_eq!(record["outcome"], "finished", "{}", record["error"]);
    let tools = common::fault::tool_contents(&record);
    let tail = |t: &str| t[t.floor_char_boundary(t.len().saturating_sub(200))..].to_string();
    for t in &tools[..3] {
        assert!(
            t.len() <= (1 << 20) + 4096,
            "a tool message of {} bytes",
            t.len()
        );
    }
    for (t, what) in tools.iter().zip(["tool result", "tool error"]) {
        assert!(
            t.contains(&format!(
                "bytes: {what} over 1 MiB (max_tool_result_bytes) ...]"
            )),
            "the note is missing: {}",
            tail(t)
        );
    }
    // 128 MiB: cut the same way, or refused by wasmtime when the store's
    // hostcall fuel (16 MiB per call) is below it: the tool is reported as
    // trapped "in one call".
    assert!(
        tools[2].contains("(max_tool_result_bytes)") || tools[2].contains("in one call"),
        "{}",
        tail(&tools[2])
    );
    // What followers were sent (and the history stored) is cut too.
    let events = blocking(|| d.events(&id));
    let results: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_result" && e["name"] == "misbehave_tool")
        .collect();
    assert_eq!(results.len(), 3);
    for e in &results[..2] {
        let out = e["output"].as_str().unwrap_or("");
        assert!(out.len() <= 1 << 20, "an event of {} bytes", out.len());
        assert!(
            out.contains("(max_tool_result_bytes)"),
            "no note in the event"
        );
    }
    let out = results[2]["output"].as_str().unwrap_or("");
    assert!(out.len() <= 1 << 20, "an event of {} bytes", out.len());

    blocking(|| bystander.finish(&d));
    blocking(|| assert_status_within_a_second(&d));
    assert_no_containers(&[&id, &bystander.id]).await;
    blocking(|| committed.assert_unchanged(&d));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_over_max_run_bytes_ends_error_saying_so() {
    let llm = FakeLlm::start().await.expect("fake llm");
    // 4 MiB for the test; each call keeps about 1 MiB twice (the tool
    // message and the tool_result event), all within the per-item limits.
    let agent = "\n[agents.hoard]\nstrategy = \"toolcall\"\ntools = [\"misbehave_tool\", \"terminate\"]\nmax_steps = 20\n";
    let (d, committed) = blocking(|| start(&llm, "max_run_bytes = 4194304", agent));
    let request = "hoard bytes";
    let call = Reply::call(
        "misbehave_tool",
        &serde_json::json!({ "output_bytes": 1_000_000 }).to_string(),
    );
    llm.push_for(request, std::iter::repeat_n(call, 20));
    let id = blocking(|| d.create_run("hoard", request));
    let bystander = blocking(|| Bystander::start(&d, &llm));
    blocking(|| assert_status_within_a_second(&d));
    let record = blocking(|| d.wait_run(&id, Duration::from_secs(120)));

    assert_ended_because(&record, "error", &["max_run_bytes", "4 MiB"]);
    assert!(
        record["steps"].as_u64().unwrap_or(0) < 20,
        "the budget ended it, not the step limit: {record}"
    );
    let events = blocking(|| d.events(&id));
    let kept: usize = events.iter().map(|e| e.to_string().len()).sum::<usize>()
        + serde_json::to_string(&record["messages"])
            .expect("json")
            .len();
    assert!(kept < 6 << 20, "the run kept {kept} bytes");

    blocking(|| bystander.finish(&d));
    blocking(|| assert_status_within_a_second(&d));
    assert_no_containers(&[&id, &bystander.id]).await;
    blocking(|| committed.assert_unchanged(&d));
}

/// The numbers of every "plugin `misbehave`: N log lines dropped (rate
/// limit)" line of the daemon's log.
fn dropped_reports(log: &str) -> Vec<u64> {
    log.lines()
        .filter_map(|l| l.split("plugin `misbehave`: ").nth(1))
        .filter_map(|rest| {
            let (n, rest) = rest.split_once(' ')?;
            rest.starts_with("log lines dropped (rate limit)")
                .then(|| n.parse().ok())?
        })
        .collect()
}

/// A strategy logging 50,000 lines through `logging.log` and 50,000 on
/// stdout, as fast as it can: the journal gets the burst and the sustained
/// rate over the run's life, no more, and every other line is counted in a
/// "dropped" line, so the operator learns how much was lost.
#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_logging_in_a_loop_is_rate_limited_and_the_dropped_lines_counted() {
    use agentd::plugin::log_rate::{LOG_BURST, LOG_LINES_PER_SEC};
    const LINES: u64 = 2 * 50_000;
    let llm = FakeLlm::start().await.expect("fake llm");
    let agents = "\n[agents.chatty]\nstrategy = \"misbehave\"\ntools = []\nsystem_prompt = \"log-lines 50000\"\nmax_steps = 2\n";
    let (d, committed) = blocking(|| start(&llm, "", agents));
    let id = blocking(|| d.create_run("chatty", "log a lot"));
    let bystander = blocking(|| Bystander::start(&d, &llm));
    blocking(|| assert_status_within_a_second(&d));
    let record = blocking(|| d.wait_run(&id, Duration::from_secs(120)));
    assert_eq!(record["outcome"], "finished", "{record}");

    let is_flood =
        |l: &&str| l.contains("misbehave log line ") || l.contains("misbehave stdout line ");
    // The last count is logged when the plugin's store (and its stdout
    // writers) go away, which may be just after the run ended.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let (logged, reports) = loop {
        let log = d.log_text();
        let logged = log.lines().filter(is_flood).count() as u64;
        let reports = dropped_reports(&log);
        if logged + reports.iter().sum::<u64>() >= LINES || std::time::Instant::now() > deadline {
            break (logged, reports);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let lived_ms =
        record["ended_at_ms"].as_i64().unwrap_or(0) - record["started_at_ms"].as_i64().unwrap_or(0);
    let lived_s = u64::try_from(lived_ms).unwrap_or(0) / 1000 + 1;
    let most = u64::from(LOG_BURST) + u64::from(LOG_LINES_PER_SEC) * lived_s;
    assert!(logged >= 1, "some lines are logged");
    assert!(
        logged <= most,
        "{logged} of the plugin's lines reached the log, more than {most} in {lived_ms} ms"
    );
    assert!(!reports.is_empty(), "no dropped-lines report");
    assert!(
        reports.len() as u64 <= lived_s + 1,
        "at most one report a second: {reports:?}"
    );
    assert_eq!(
        logged + reports.iter().sum::<u64>(),
        LINES,
        "every line is logged or counted as dropped: {reports:?}"
    );

    blocking(|| bystander.finish(&d));
    blocking(|| assert_status_within_a_second(&d));
    assert_no_containers(&[&id, &bystander.id]).await;
    blocking(|| committed.assert_unchanged(&d));
}
