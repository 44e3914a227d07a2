//! Hot reload in the running daemon: `agentd serve`, spawned, with plugin
//! files swapped, broken, written slowly and deleted under it, observed
//! through `GET /v1/plugins`, `GET /v1/events`, `POST /v1/plugins/reload`,
//! `GET /v1/status` (the compile cache) and the transcripts of runs.
//!
//! The agent `versioned` runs the test strategy `versioned_strategy`
//! (`plugins/versioned_strategy`, built as `versioned_strategy_v1` and
//! `versioned_strategy_v2`): every step it writes `strategy
//! versioned_strategy <VERSION> step <N>` into the transcript, so a run's
//! record says which version executed each of its steps.
//!
//! Nothing here sleeps to let the daemon catch up: every wait polls with a
//! generous deadline, so a loaded machine makes the tests slower, not red.

use crate::common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agentd::testkit::{FakeLlm, Reply};
use common::daemon::{Daemon, EventStream, VERSIONED_STRATEGY_AGENT};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The plugin file every test swaps.
const FILE: &str = "versioned_strategy.wasm";
const PLUGIN: &str = "versioned_strategy";
const AGENT: &str = "versioned";
const V1: &str = "versioned_strategy_v1";
const V2: &str = "versioned_strategy_v2";
/// How long any wait on the daemon may take before the test fails: far
/// beyond what it needs, so only a real hang fails.
const PATIENCE: Duration = Duration::from_secs(60);
/// After the event a test waits for, how long it keeps listening for a
/// duplicate.
const QUIET: Duration = Duration::from_millis(1500);

async fn daemon(files: &[(&str, &str)]) -> (FakeLlm, Daemon) {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.set_fallback(Reply::text("ok"));
    let d = tokio::task::block_in_place(|| {
        Daemon::start_with_plugins(&llm, files, VERSIONED_STRATEGY_AGENT)
    });
    (llm, d)
}

fn built(component: &str) -> Vec<u8> {
    let path = common::built_plugins().join(format!("{component}.wasm"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Writes `bytes` next to `file` under a hidden name (which the daemon
/// ignores), then renames it over `file`: the daemon only ever sees whole
/// files.
fn replace_atomically(dir: &Path, file: &str, bytes: &[u8]) {
    let temp = dir.join(format!(".{file}.tmp"));
    std::fs::write(&temp, bytes).expect("write temp file");
    std::fs::rename(&temp, dir.join(file)).expect("rename into place");
}

/// Polls `probe` until it returns `Some`, for at most `PATIENCE`.
fn poll<T>(what: &str, d: &Daemon, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "waited {PATIENCE:?} for {what}\n/v1/plugins: {}\n{}",
            d.get("/v1/plugins").1,
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn plugin_rows(d: &Daemon) -> Vec<Value> {
    let (status, v) = d.get("/v1/plugins");
    assert_eq!(status, 200, "{v}");
    v["plugins"].as_array().expect("plugins").clone()
}

/// The `/v1/plugins` row of a file in the plugins folder.
fn row(d: &Daemon, file: &str) -> Option<Value> {
    plugin_rows(d).into_iter().find(|p| {
        p["file"]
            .as_str()
            .is_some_and(|f| Path::new(f).file_name().is_some_and(|n| n == file))
    })
}

/// Waits until `file` loaded with `version` and that version serves.
fn wait_serving(d: &Daemon, file: &str, version: &str) -> Value {
    poll(&format!("{file} serving {version}"), d, || {
        row(d, file).filter(|r| {
            r["status"] == "loaded" && r["version"] == version && r["serving_version"] == version
        })
    })
}

/// `(version, step)` of each `strategy versioned_strategy <V> step <N>`
/// message of a run record, in order.
fn markers(record: &Value) -> Vec<(String, u32)> {
    record["messages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|m| {
            let text = m["content"].as_str()?;
            let rest = text.strip_prefix("strategy versioned_strategy ")?;
            let (version, step) = rest.split_once(" step ")?;
            assert_eq!(m["role"], "assistant", "{m}");
            Some((version.to_string(), step.parse().ok()?))
        })
        .collect()
}

/// What a run of `versioned_strategy` at `version` leaves in its transcript.
fn three_steps_of(version: &str) -> Vec<(String, u32)> {
    (1..=3).map(|n| (version.to_string(), n)).collect()
}

/// Runs the agent to its end and checks that `version` executed every step.
fn run_shows(d: &Daemon, request: &str, version: &str) -> Value {
    let id = d.create_run(AGENT, request);
    let record = d.wait_run(&id, PATIENCE);
    assert_eq!(record["outcome"], "finished", "{record}");
    assert_eq!(markers(&record), three_steps_of(version), "{record}");
    record
}

fn is_serving_event(e: &Value) -> bool {
    e["plugin"] == PLUGIN && (e["type"] == "plugin_loaded" || e["type"] == "plugin_replaced")
}

fn serving_events(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| is_serving_event(e))
        .cloned()
        .collect()
}

fn cache_entries(d: &Daemon) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(d.state_dir.join("cache"))
        .expect("read the cache folder")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "cwasm"))
        .collect();
    entries.sort();
    entries
}

/// `(enabled, hits, misses)` of the compile cache in `GET /v1/status`.
fn cache_counts(d: &Daemon) -> (bool, u64, u64) {
    let (status, v) = d.get("/v1/status");
    assert_eq!(status, 200, "{v}");
    let c = &v["plugin_cache"];
    (
        c["enabled"].as_bool().unwrap_or_else(|| panic!("{v}")),
        c["hits"].as_u64().unwrap_or_else(|| panic!("{v}")),
        c["misses"].as_u64().unwrap_or_else(|| panic!("{v}")),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_in_flight_keeps_its_strategy_version_while_new_runs_get_the_new_one() {
    let (llm, d) = daemon(&[(FILE, V1)]).await;
    // Step 1 answers quickly; steps 2 and 3 leave seconds for the swap to
    // land while the run is still going.
    let delayed = |ms: u64| Reply::Delayed(Duration::from_millis(ms), Box::new(Reply::text("ok")));
    llm.push_for("in flight", [delayed(500), delayed(3000), delayed(3000)]);
    tokio::task::block_in_place(|| {
        wait_serving(&d, FILE, "1.0.0");
        let id = d.create_run(AGENT, "in flight");
        poll("the first step of the run", &d, || {
            let (_, v) = d.get(&format!("/v1/runs/{id}"));
            (!markers(&v).is_empty()).then_some(())
        });

        replace_atomically(d.plugins.path(), FILE, &built(V2));
        let serving = wait_serving(&d, FILE, "2.0.0");
        assert_eq!(serving["name"], PLUGIN, "{serving}");
        assert_eq!(serving["kind"], "strategy", "{serving}");
        assert_eq!(serving["sha256"], sha256_hex(&built(V2)).as_str());
        for key in common::PLUGIN_STATUS_FIELDS {
            assert!(serving.get(key).is_some(), "{key} missing: {serving}");
        }
        assert!(
            serving["loaded_at_ms"].as_i64().is_some_and(|t| t > 0),
            "{serving}"
        );

        let (_, mid) = d.get(&format!("/v1/runs/{id}"));
        assert_eq!(
            mid["state"], "running",
            "the swap must land while the run is in flight: {mid}"
        );
        assert!(markers(&mid).len() < 3, "{mid}");
        let after = d.create_run(AGENT, "after the swap");

        let old = d.wait_run(&id, PATIENCE);
        assert_eq!(old["outcome"], "finished", "{old}");
        assert_eq!(
            markers(&old),
            three_steps_of("1.0.0"),
            "the run keeps the version it started with: {old}"
        );
        let new = d.wait_run(&after, PATIENCE);
        assert_eq!(new["outcome"], "finished", "{new}");
        assert_eq!(markers(&new), three_steps_of("2.0.0"), "{new}");
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_rewrite_keeps_the_old_version_serving_and_says_why() {
    let (_llm, d) = daemon(&[(FILE, V1)]).await;
    tokio::task::block_in_place(|| {
        wait_serving(&d, FILE, "1.0.0");
        let mut events = EventStream::open(&d.socket, "/v1/events?since=0");
        // The replay of start-up is not what this test is about.
        events.drain_for(QUIET);
        let baseline = events.seen.len();
        let v2 = built(V2);
        let bad = common::bad_plugin_files(&v2);
        for (i, (what, bytes, reason)) in bad.into_iter().enumerate() {
            // In place, as a careless copy would do it.
            std::fs::write(d.plugins.path().join(FILE), &bytes).expect("write");
            let sha = sha256_hex(&bytes);
            let failed = poll(&format!("{what}: status failed"), &d, || {
                row(&d, FILE).filter(|r| r["status"] == "failed" && r["sha256"] == sha.as_str())
            });
            assert_eq!(failed["name"], PLUGIN, "{what}: {failed}");
            assert_eq!(failed["version"], Value::Null, "{what}: {failed}");
            assert_eq!(failed["serving_version"], "1.0.0", "{what}: {failed}");
            let error = failed["error"].as_str().unwrap_or_default();
            assert!(error.contains(FILE), "{what}: names the file: {failed}");
            assert!(error.contains(reason), "{what}: says why: {failed}");

            let event = events.wait_for(PATIENCE, |e| {
                e["type"] == "plugin_failed"
                    && e["file"].as_str().is_some_and(|f| f.ends_with(FILE))
            });
            assert_eq!(event["plugin"], PLUGIN, "{what}: {event}");
            assert_eq!(event["previous_version"], "1.0.0", "{what}: {event}");
            assert!(
                event["error"].as_str().is_some_and(|e| e.contains(FILE)),
                "{what}: {event}"
            );

            run_shows(&d, &format!("still served after {what} ({i})"), "1.0.0");
            let (_, agents) = d.get("/v1/agents");
            let agent = agents["agents"]
                .as_array()
                .expect("agents")
                .iter()
                .find(|a| a["name"] == AGENT)
                .cloned()
                .expect("the agent");
            assert_eq!(agent["missing_plugins"], serde_json::json!([]), "{agent}");
        }
        assert_eq!(
            serving_events(&events.seen[baseline..]),
            Vec::<Value>::new(),
            "nothing bad was loaded"
        );

        // A good file afterwards is picked up as usual.
        replace_atomically(d.plugins.path(), FILE, &v2);
        wait_serving(&d, FILE, "2.0.0");
        run_shows(&d, "after the repair", "2.0.0");
    });
}

/// A tool component written over the strategy's file is not a broken
/// strategy but a working tool: plugins are known by the name in their
/// metadata, never by their file name, so the file now serves the tool
/// `echo` and no longer serves `versioned_strategy`
/// (`src/plugin/catalog.rs`: "a name is no longer served: its file is gone or
/// now offers another").
#[tokio::test(flavor = "multi_thread")]
async fn a_tool_written_over_the_strategy_file_serves_that_tool_instead() {
    let (_llm, d) = daemon(&[(FILE, V1)]).await;
    tokio::task::block_in_place(|| {
        wait_serving(&d, FILE, "1.0.0");
        let mut events = EventStream::open(&d.socket, "/v1/events?since=0");
        replace_atomically(d.plugins.path(), FILE, &built("echo"));
        let now = poll("the file to hold the echo tool", &d, || {
            row(&d, FILE).filter(|r| r["name"] == "echo" && r["status"] == "loaded")
        });
        assert_eq!(now["kind"], "tool", "{now}");
        let removed = events.wait_for(PATIENCE, |e| {
            e["type"] == "plugin_removed" && e["plugin"] == PLUGIN
        });
        assert_eq!(removed["previous_version"], "1.0.0", "{removed}");
        let id = d.create_run(AGENT, "strategy gone");
        let record = d.wait_run(&id, PATIENCE);
        assert_eq!(record["outcome"], "error", "{record}");
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn each_new_file_is_picked_up_exactly_once() {
    let (_llm, d) = daemon(&[(FILE, V1)]).await;
    tokio::task::block_in_place(|| {
        wait_serving(&d, FILE, "1.0.0");
        let mut events = EventStream::open(&d.socket, "/v1/events?since=0");
        // Whatever start-up left in the replay is not counted.
        events.drain_for(QUIET);
        let mut counted = events.seen.len();

        let mut expect_once =
            |events: &mut EventStream, how: &str, version: &str, previous: &str| {
                let event =
                    events.wait_for(PATIENCE, |e| is_serving_event(e) && e["version"] == version);
                events.drain_for(QUIET);
                let serving = serving_events(&events.seen[counted..]);
                assert_eq!(serving.len(), 1, "{how}: applied once: {serving:#?}");
                assert_eq!(event["type"], "plugin_replaced", "{how}: {event}");
                assert_eq!(event["previous_version"], previous, "{how}: {event}");
                assert!(
                    event["file"].as_str().is_some_and(|f| f.ends_with(FILE)),
                    "{how}: {event}"
                );
                assert!(event["seq"].as_u64().is_some(), "{how}: {event}");
                assert!(
                    event["at_ms"].as_i64().is_some_and(|t| t > 0),
                    "{how}: {event}"
                );
                counted = events.seen.len();
            };

        // 1. Staged outside the folder, renamed in.
        let staging =
            tempfile::tempdir_in(d.plugins.path().parent().expect("parent")).expect("staging dir");
        let staged = staging.path().join(FILE);
        std::fs::write(&staged, built(V2)).expect("stage");
        std::fs::rename(&staged, d.plugins.path().join(FILE)).expect("rename in");
        expect_once(&mut events, "atomic rename from outside", "2.0.0", "1.0.0");
        wait_serving(&d, FILE, "2.0.0");

        // 2. Written in place, slowly: three chunks 150 ms apart.
        let v1 = built(V1);
        let third = v1.len() / 3;
        let mut f = std::fs::File::create(d.plugins.path().join(FILE)).expect("create");
        for chunk in [&v1[..third], &v1[third..2 * third], &v1[2 * third..]] {
            f.write_all(chunk).expect("write");
            f.flush().expect("flush");
            std::thread::sleep(Duration::from_millis(150));
        }
        drop(f);
        expect_once(&mut events, "slow write in place", "1.0.0", "2.0.0");
        wait_serving(&d, FILE, "1.0.0");

        // 3. Staged under a hidden name inside the folder, renamed over.
        replace_atomically(d.plugins.path(), FILE, &built(V2));
        expect_once(&mut events, "hidden temp file renamed", "2.0.0", "1.0.0");
        wait_serving(&d, FILE, "2.0.0");
        assert_eq!(
            plugin_rows(&d).len(),
            1,
            "the hidden temp file is no plugin"
        );

        let seqs: Vec<u64> = events
            .seen
            .iter()
            .filter_map(|e| e["seq"].as_u64())
            .collect();
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "seq increases: {seqs:?}"
        );
        run_shows(&d, "after three swaps", "2.0.0");
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn deleting_the_file_unloads_the_plugin_and_its_agent_says_what_is_missing() {
    let (_llm, d) = daemon(&[(FILE, V1)]).await;
    tokio::task::block_in_place(|| {
        wait_serving(&d, FILE, "1.0.0");
        let mut events = EventStream::open(&d.socket, "/v1/events?since=0");
        std::fs::remove_file(d.plugins.path().join(FILE)).expect("rm");
        poll("the plugin to be gone from /v1/plugins", &d, || {
            plugin_rows(&d)
                .iter()
                .all(|r| r["name"] != PLUGIN)
                .then_some(())
        });
        assert_eq!(row(&d, FILE), None);
        let removed = events.wait_for(PATIENCE, |e| {
            e["type"] == "plugin_removed" && e["plugin"] == PLUGIN
        });
        assert_eq!(removed["previous_version"], "1.0.0", "{removed}");
        assert!(
            removed["file"].as_str().is_some_and(|f| f.ends_with(FILE)),
            "{removed}"
        );

        let missing = |d: &Daemon| {
            let (status, agents) = d.get("/v1/agents");
            assert_eq!(status, 200, "{agents}");
            agents["agents"]
                .as_array()
                .expect("agents")
                .iter()
                .find(|a| a["name"] == AGENT)
                .unwrap_or_else(|| panic!("no agent {AGENT}: {agents}"))["missing_plugins"]
                .clone()
        };
        assert_eq!(missing(&d), serde_json::json!([PLUGIN]));

        let id = d.create_run(AGENT, "no strategy");
        let record = d.wait_run(&id, PATIENCE);
        assert_eq!(record["outcome"], "error", "{record}");
        let error = record["error"].as_str().unwrap_or_default();
        assert!(
            error.contains(
                "strategy plugin `versioned_strategy` needed by agent `versioned` is not loaded"
            ),
            "{record}"
        );
        let created = events.wait_for(PATIENCE, |e| {
            e["type"] == "run_created" && e["run_id"] == id.as_str()
        });
        assert_eq!(created["agent"], AGENT, "{created}");
        let ended = events.wait_for(PATIENCE, |e| {
            e["type"] == "run_ended" && e["run_id"] == id.as_str()
        });
        assert_eq!(ended["outcome"], "error", "{ended}");
        assert_eq!(ended["agent"], AGENT, "{ended}");

        // Put back, it serves again.
        replace_atomically(d.plugins.path(), FILE, &built(V1));
        wait_serving(&d, FILE, "1.0.0");
        let loaded = events.wait_for(PATIENCE, is_serving_event);
        assert_eq!(loaded["type"], "plugin_loaded", "{loaded}");
        assert_eq!(missing(&d), serde_json::json!([]));
        run_shows(&d, "back again", "1.0.0");
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restart_loads_every_plugin_from_the_cache_and_rebuilds_a_corrupt_entry() {
    let (_llm, mut d) = daemon(&[
        ("toolcall.wasm", "toolcall"),
        ("terminate.wasm", "terminate"),
        ("echo.wasm", "echo"),
    ])
    .await;
    tokio::task::block_in_place(|| {
        assert_eq!(cache_counts(&d), (true, 0, 3), "a fresh state dir");
        let before = cache_entries(&d);
        assert_eq!(before.len(), 3, "{before:?}");

        // Added while running, so its cache entry is the one that appears.
        replace_atomically(d.plugins.path(), FILE, &built(V1));
        wait_serving(&d, FILE, "1.0.0");
        let entry = poll("the new plugin's cache entry", &d, || {
            let now = cache_entries(&d);
            (now.len() == 4).then(|| {
                now.into_iter()
                    .find(|e| !before.contains(e))
                    .expect("one new entry")
            })
        });
        assert_eq!(cache_counts(&d), (true, 0, 4));
        let n = plugin_rows(&d).len() as u64;
        assert_eq!(n, 4);

        assert_eq!(d.stop(), Some(0), "{}", d.log_text());
        d.spawn(&[]);
        assert_eq!(
            cache_counts(&d),
            (true, n, 0),
            "every plugin from the cache"
        );
        run_shows(&d, "after a restart", "1.0.0");

        assert_eq!(d.stop(), Some(0), "{}", d.log_text());
        let mut bytes = std::fs::read(&entry).expect("read entry");
        let middle = bytes.len() / 2;
        for b in &mut bytes[middle..middle + 64] {
            *b ^= 0xff;
        }
        std::fs::write(&entry, &bytes).expect("corrupt the entry");
        d.spawn(&[]);
        assert_eq!(
            cache_counts(&d),
            (true, n - 1, 1),
            "the corrupt entry is compiled again"
        );
        wait_serving(&d, FILE, "1.0.0");
        run_shows(&d, "after a corrupt cache entry", "1.0.0");
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn a_manual_reload_returns_what_changed() {
    let (_llm, d) = daemon(&[(FILE, V1)]).await;
    tokio::task::block_in_place(|| {
        wait_serving(&d, FILE, "1.0.0");
        let (status, v) = d.post("/v1/plugins/reload", "");
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["changes"], serde_json::json!([]), "nothing changed: {v}");

        // The watcher may apply a change before the request does (then the
        // request has nothing left to report): swap again until the request
        // wins the race, which it nearly always does at the first try.
        let mut reported = None;
        for attempt in 0..6 {
            let (component, version, previous) = if attempt % 2 == 0 {
                (V2, "2.0.0", "1.0.0")
            } else {
                (V1, "1.0.0", "2.0.0")
            };
            replace_atomically(d.plugins.path(), FILE, &built(component));
            let (status, v) = d.post("/v1/plugins/reload", "");
            assert_eq!(status, 200, "{v}");
            let changes = v["changes"].as_array().expect("changes").clone();
            wait_serving(&d, FILE, version);
            if changes.is_empty() {
                continue;
            }
            assert_eq!(changes.len(), 1, "{v}");
            let change = &changes[0];
            assert_eq!(change["kind"], "replaced", "{change}");
            assert_eq!(change["plugin"], PLUGIN, "{change}");
            assert_eq!(change["version"], version, "{change}");
            assert_eq!(change["previous_version"], previous, "{change}");
            assert!(
                change["file"].as_str().is_some_and(|f| f.ends_with(FILE)),
                "{change}"
            );
            reported = Some(version);
            break;
        }
        let version = reported.expect("the reload request reported the change");
        let (_, v) = d.post("/v1/plugins/reload", "");
        assert_eq!(v["changes"], serde_json::json!([]), "applied once: {v}");
        run_shows(&d, "after a manual reload", version);
    });
}
