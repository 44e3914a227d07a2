//! Fault family 5, persistence: the daemon killed in the middle of a burst
//! of runs, the state folder's disk filling up (and start-up on it), a
//! compile cache or plugins folder that others can write to, and a link in
//! the plugins folder. Real daemon, real Docker, real wasm, the scripted
//! fake LLM; each test asserts the invariants of `tests/common/fault.rs`.
//!
//! The tmpfs tests mount a file system, so they need root (as the suite
//! runs); the mount is undone by a guard even when a test fails.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentd::testkit::{FakeLlm, Reply};
use common::daemon::Daemon;
use common::fault::{
    assert_no_containers, assert_status_within_a_second, Bystander, Committed, BYSTANDER_AGENT,
};
use common::tmpfs::Tmpfs;
use serde_json::Value;

/// `quick` finishes at its first step without a sandbox; `gated` runs one
/// command that waits until the test creates `/tmp/go` in its container.
const AGENTS: &str = "\n[agents.quick]\nstrategy = \"toolcall\"\ntools = [\"terminate\"]\nmax_steps = 3\n\n[agents.gated]\nstrategy = \"toolcall\"\ntools = [\"bash\", \"terminate\"]\nmax_steps = 5\n";

const GATE_COMMAND: &str = "while [ ! -e /tmp/go ]; do sleep 0.1; done; echo released";

fn agents() -> String {
    format!("{AGENTS}{BYSTANDER_AGENT}")
}

fn body(agent: &str, request: &str) -> String {
    serde_json::json!({"agent": agent, "request": request}).to_string()
}

/// Opens the history read-only, as an operator's tool would, next to the
/// running daemon.
fn open_db(d: &Daemon) -> rusqlite::Connection {
    rusqlite::Connection::open_with_flags(
        d.state_dir.join("history.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .expect("open history.db read-only")
}

fn integrity(d: &Daemon) -> String {
    open_db(d)
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("integrity_check")
}

/// (state, outcome) of a run's row in the database itself.
fn row_of(d: &Daemon, id: &str) -> Option<(String, Option<String>)> {
    use rusqlite::OptionalExtension;
    open_db(d)
        .query_row("SELECT state, outcome FROM runs WHERE id = ?1", [id], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()
        .expect("query runs")
}

/// Waits for the run's command to be running in its container (the
/// container exists and the run asked for the tool).
async fn wait_for_container(d: &Daemon, id: &str) -> String {
    tokio::task::block_in_place(|| d.wait_for_event(id, "tool_call"));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let found = common::containers_labelled(&format!("agentd.run={id}")).await;
        if let Some(c) = found.first().and_then(|c| c.id.clone()) {
            return c;
        }
        assert!(Instant::now() < deadline, "no container for run {id}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Lets a `gated` run's command finish.
fn open_gate(container: &str) {
    let out = std::process::Command::new("docker")
        .args(["exec", container, "touch", "/tmp/go"])
        .output()
        .expect("docker exec");
    assert!(out.status.success(), "docker exec: {out:?}");
}

/// Starts a `gated` run and waits until its command is running.
async fn start_gated(d: &Daemon, llm: &FakeLlm, request: &str) -> (String, String) {
    llm.push_for(
        request,
        [
            Reply::call(
                "bash",
                &serde_json::json!({ "command": GATE_COMMAND }).to_string(),
            ),
            Reply::terminate(),
        ],
    );
    let id = tokio::task::block_in_place(|| d.create_run("gated", request));
    let container = wait_for_container(d, &id).await;
    (id, container)
}

/// POSTs runs until one is refused, asserting the refusal is a clear
/// `503 history_unavailable`: on a full disk the first commit that needs a
/// new page fails (a big request needs hundreds). Returns the runs that
/// were accepted before that (they had room in the WAL; they must be kept).
fn refused_until_full(d: &Daemon) -> (Value, Vec<String>) {
    let big = "x".repeat(900_000);
    let mut accepted = Vec::new();
    for _ in 0..5 {
        let (status, v) = d.post("/v1/runs", &body("quick", &big));
        match status {
            201 => accepted.push(v["id"].as_str().expect("id").to_string()),
            503 => return (v, accepted),
            other => panic!("POST /v1/runs answered {other}: {v}"),
        }
    }
    panic!("no run was refused on a full disk\n{}", d.log_text());
}

fn assert_history_unavailable(v: &Value) {
    assert_eq!(v["error"]["code"], "history_unavailable", "{v}");
    let message = v["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("history.db"), "{message}");
    assert!(message.contains("full"), "{message}");
}

/// Polls until a new run is accepted again (the writer retries every
/// second); returns its id.
fn accepted_again(d: &Daemon) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, v) = d.post("/v1/runs", &body("quick", "after recovery"));
        if status == 201 {
            return v["id"].as_str().expect("id").to_string();
        }
        assert_eq!(status, 503, "{v}");
        assert!(
            Instant::now() < deadline,
            "runs still refused after the disk recovered: {v}\n{}",
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_in_a_burst_of_200_runs_loses_no_run_that_got_201() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.set_fallback(Reply::terminate());
    let mut d = tokio::task::block_in_place(|| Daemon::start(&llm, &agents()));
    let before = tokio::task::block_in_place(|| {
        let id = d.create_run("quick", "before the burst");
        d.wait_run(&id, Duration::from_secs(60));
        Committed::take(&d)
    });
    assert_eq!(before.len(), 1);

    let accepted = Arc::new(Mutex::new(Vec::<String>::new()));
    let answered = Arc::new(AtomicUsize::new(0));
    let socket = d.socket.clone();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let accepted = accepted.clone();
            let answered = answered.clone();
            let socket = socket.clone();
            std::thread::spawn(move || {
                for i in 0..50 {
                    let b = body("quick", &format!("burst {t}-{i}"));
                    match agentd::testkit::uds_http::request(
                        &socket,
                        "POST",
                        "/v1/runs",
                        Some(b.as_bytes()),
                    ) {
                        Ok((201, v)) => {
                            let v: Value = serde_json::from_slice(&v).expect("json");
                            let id = v["id"].as_str().expect("id").to_string();
                            accepted.lock().expect("lock").push(id);
                            answered.fetch_add(1, Ordering::SeqCst);
                        }
                        Ok((status, v)) => panic!(
                            "POST /v1/runs answered {status}: {}",
                            String::from_utf8_lossy(&v)
                        ),
                        // The daemon was killed: the rest are not sent.
                        Err(_) => return,
                    }
                }
            })
        })
        .collect();
    // Killed in the middle: some runs answered, others not yet sent.
    let deadline = Instant::now() + Duration::from_secs(120);
    while answered.load(Ordering::SeqCst) < 80 {
        assert!(Instant::now() < deadline, "the burst stalled");
        std::thread::sleep(Duration::from_millis(2));
    }
    tokio::task::block_in_place(|| d.kill9());
    for t in threads {
        t.join().expect("burst thread");
    }
    let accepted = accepted.lock().expect("lock").clone();
    assert!(
        (80..200).contains(&accepted.len()),
        "killed in the middle: {} runs answered 201",
        accepted.len()
    );

    tokio::task::block_in_place(|| {
        d.spawn(&[]);
        assert_status_within_a_second(&d);
        assert_eq!(integrity(&d), "ok");
        for id in &accepted {
            let (status, v) = d.get(&format!("/v1/runs/{id}"));
            assert_eq!(status, 200, "run {id} got 201 and is gone: {v}");
            assert_eq!(v["state"], "ended", "{v}");
            let outcome = v["outcome"].as_str().unwrap_or("");
            assert!(outcome == "finished" || outcome == "interrupted", "{v}");
        }
        before.assert_unchanged(&d);
    });
    let bystander = tokio::task::block_in_place(|| Bystander::start(&d, &llm));
    tokio::task::block_in_place(|| bystander.finish(&d));
    let mut ids: Vec<&str> = accepted.iter().map(String::as_str).collect();
    ids.push(&bystander.id);
    assert_no_containers(&ids).await;
    tokio::task::block_in_place(|| {
        assert_eq!(d.stop(), Some(0));
        assert_eq!(integrity(&d), "ok");
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn a_full_state_disk_refuses_new_runs_with_503_keeps_runs_in_flight_and_recovers() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.set_fallback(Reply::terminate());
    let mut d = Daemon::unstarted(&llm, &agents());
    let disk = Tmpfs::mount(&d.state_dir, "96m");
    tokio::task::block_in_place(|| d.spawn(&[]));
    let committed = tokio::task::block_in_place(|| {
        let id = d.create_run("quick", "before the disk fills");
        d.wait_run(&id, Duration::from_secs(60));
        Committed::take(&d)
    });
    let (in_flight, container) = start_gated(&d, &llm, "in flight while the disk fills").await;

    let filler = disk.fill();
    let mut kept = tokio::task::block_in_place(|| {
        let (refusal, kept) = refused_until_full(&d);
        assert_history_unavailable(&refusal);
        // Refused at once now, before anything is queued.
        let (status, v) = d.post("/v1/runs", &body("quick", "while full"));
        assert_eq!(status, 503, "{v}");
        assert_history_unavailable(&v);
        assert_status_within_a_second(&d);
        // Reads still work, and what was committed is intact.
        let (status, _) = d.get("/v1/runs");
        assert_eq!(status, 200);
        committed.assert_unchanged(&d);
        kept
    });
    // The run in flight keeps running and ends normally, from memory.
    open_gate(&container);
    let record = tokio::task::block_in_place(|| d.wait_run(&in_flight, Duration::from_secs(120)));
    assert_eq!(record["outcome"], "finished", "{record}");

    std::fs::remove_file(&filler).expect("remove filler");
    tokio::task::block_in_place(|| {
        kept.push(accepted_again(&d));
        // The in-flight run's writes, kept while the disk was full, are
        // committed (the writer commits them before anything newer).
        let deadline = Instant::now() + Duration::from_secs(60);
        while row_of(&d, &in_flight) != Some(("ended".into(), Some("finished".into()))) {
            assert!(
                Instant::now() < deadline,
                "the in-flight run was not flushed: {:?}\n{}",
                row_of(&d, &in_flight),
                d.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let messages: i64 = open_db(&d)
            .query_row(
                "SELECT COUNT(*) FROM messages WHERE run_id = ?1",
                [&in_flight],
                |r| r.get(0),
            )
            .expect("count");
        assert_eq!(
            messages as usize,
            record["messages"].as_array().map_or(0, Vec::len),
            "every message of the in-flight run was written"
        );
        // Refused runs left nothing behind; accepted ones are there.
        let big_rows: i64 = open_db(&d)
            .query_row(
                "SELECT COUNT(*) FROM requests WHERE length(request) > 100000",
                [],
                |r| r.get(0),
            )
            .expect("count");
        assert_eq!(
            big_rows as usize,
            kept.len() - 1,
            "refused runs were recorded"
        );
        for id in &kept {
            assert!(row_of(&d, id).is_some(), "accepted run {id} is missing");
        }
        assert_eq!(integrity(&d), "ok");
        committed.assert_unchanged(&d);
    });
    let bystander = tokio::task::block_in_place(|| Bystander::start(&d, &llm));
    tokio::task::block_in_place(|| bystander.finish(&d));
    assert_no_containers(&[&in_flight, &bystander.id]).await;
    tokio::task::block_in_place(|| {
        assert_eq!(d.stop(), Some(0));
    });
    drop(disk);
}

/// After a crash on a full disk, the daemon must come back (not fail in a
/// restart loop): it serves the history, refuses new runs saying why, and
/// marks the run left in flight `interrupted` once the disk recovers.
#[tokio::test(flavor = "multi_thread")]
async fn start_up_on_a_full_disk_serves_reads_and_refuses_writes_until_it_recovers() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.set_fallback(Reply::terminate());
    let mut d = Daemon::unstarted(&llm, &agents());
    let disk = Tmpfs::mount(&d.state_dir, "96m");
    tokio::task::block_in_place(|| d.spawn(&[]));
    let committed = tokio::task::block_in_place(|| {
        let id = d.create_run("quick", "before the crash");
        d.wait_run(&id, Duration::from_secs(60));
        Committed::take(&d)
    });
    let (in_flight, _container) = start_gated(&d, &llm, "in flight at the crash").await;
    let filler = disk.fill();
    tokio::task::block_in_place(|| {
        d.kill9();
        // Comes up although the interrupt step cannot be written.
        d.spawn(&[]);
        assert_status_within_a_second(&d);
        let (status, list) = d.get("/v1/runs");
        assert_eq!(status, 200, "{list}");
        committed.assert_unchanged(&d);
        let (refusal, _) = refused_until_full(&d);
        assert_history_unavailable(&refusal);
    });
    std::fs::remove_file(&filler).expect("remove filler");
    tokio::task::block_in_place(|| {
        accepted_again(&d);
        let deadline = Instant::now() + Duration::from_secs(60);
        while row_of(&d, &in_flight) != Some(("ended".into(), Some("interrupted".into()))) {
            assert!(
                Instant::now() < deadline,
                "the run left in flight was not interrupted: {:?}",
                row_of(&d, &in_flight)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(integrity(&d), "ok");
        committed.assert_unchanged(&d);
    });
    let bystander = tokio::task::block_in_place(|| Bystander::start(&d, &llm));
    tokio::task::block_in_place(|| bystander.finish(&d));
    // The killed daemon's container was reaped at start-up.
    assert_no_containers(&[&in_flight, &bystander.id]).await;
    tokio::task::block_in_place(|| {
        assert_eq!(d.stop(), Some(0));
    });
    drop(disk);
}

#[tokio::test(flavor = "multi_thread")]
async fn start_up_on_a_full_disk_after_a_clean_stop_serves_reads() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.set_fallback(Reply::terminate());
    let mut d = Daemon::unstarted(&llm, &agents());
    let disk = Tmpfs::mount(&d.state_dir, "96m");
    tokio::task::block_in_place(|| d.spawn(&[]));
    let committed = tokio::task::block_in_place(|| {
        let id = d.create_run("quick", "before the stop");
        d.wait_run(&id, Duration::from_secs(60));
        let committed = Committed::take(&d);
        // SQLite would delete -wal and -shm on this clean close, and could
        // not create them again on the full disk below.
        assert_eq!(d.stop(), Some(0));
        committed
    });
    let filler = disk.fill();
    tokio::task::block_in_place(|| {
        d.spawn(&[]);
        assert_status_within_a_second(&d);
        committed.assert_unchanged(&d);
        let (refusal, _) = refused_until_full(&d);
        assert_history_unavailable(&refusal);
    });
    std::fs::remove_file(&filler).expect("remove filler");
    tokio::task::block_in_place(|| {
        accepted_again(&d);
        assert_eq!(integrity(&d), "ok");
        committed.assert_unchanged(&d);
        assert_eq!(d.stop(), Some(0));
    });
    drop(disk);
}

/// Runs `agentd serve` expecting it to refuse to start; returns its stderr.
/// A daemon that starts instead is killed after a minute and the test
/// fails (rather than waiting for it forever).
fn refused_start(d: &Daemon) -> String {
    let log = d.dir.path().join("refused.log");
    let mut child = d
        .command()
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("run agentd serve");
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        status.is_some_and(|s| !s.success()),
        "agentd started although it should refuse: {stderr}"
    );
    stderr
}

/// Starts the daemon, records a run, stops it; then `open` makes a folder
/// writable by others and start-up must be refused naming `folder` and
/// the fix; after the fix, the daemon starts with its history intact and
/// runs work.
async fn refused_while_open_to_others(folder: impl Fn(&Daemon) -> PathBuf) {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.set_fallback(Reply::terminate());
    let mut d = tokio::task::block_in_place(|| Daemon::start(&llm, &agents()));
    let committed = tokio::task::block_in_place(|| {
        let id = d.create_run("quick", "before the folder opens");
        d.wait_run(&id, Duration::from_secs(60));
        let committed = Committed::take(&d);
        assert_eq!(d.stop(), Some(0));
        committed
    });
    let dir = folder(&d);
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let stderr = tokio::task::block_in_place(|| refused_start(&d));
    assert!(stderr.contains(&dir.display().to_string()), "{stderr}");
    assert!(stderr.contains("writable by everyone"), "{stderr}");
    assert!(stderr.contains("chmod go-w"), "{stderr}");
    let mode = std::fs::metadata(&dir).expect("stat").permissions().mode();
    assert_eq!(mode & 0o777, 0o777, "never re-permissioned by agentd");

    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    tokio::task::block_in_place(|| {
        d.spawn(&[]);
        assert_status_within_a_second(&d);
        committed.assert_unchanged(&d);
    });
    let bystander = tokio::task::block_in_place(|| Bystander::start(&d, &llm));
    tokio::task::block_in_place(|| bystander.finish(&d));
    assert_no_containers(&[&bystander.id]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_world_writable_compile_cache_refuses_start_up_with_the_fix() {
    refused_while_open_to_others(|d| d.state_dir.join("cache")).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_world_writable_plugins_folder_refuses_start_up_with_the_fix() {
    refused_while_open_to_others(|d| d.plugins.path().to_path_buf()).await;
}

/// Made writable while the daemon runs: a reload refuses the folder, so a
/// component dropped there is never loaded, and what serves keeps serving.
#[tokio::test(flavor = "multi_thread")]
async fn a_plugins_folder_opened_while_running_loads_nothing_new() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.set_fallback(Reply::terminate());
    let d = tokio::task::block_in_place(|| Daemon::start(&llm, &agents()));
    let committed = tokio::task::block_in_place(|| Committed::take(&d));
    let dir = d.plugins.path().to_path_buf();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    std::fs::copy(
        common::built_plugins().join("versioned_strategy_v1.wasm"),
        dir.join("versioned_strategy.wasm"),
    )
    .expect("copy");
    tokio::task::block_in_place(|| {
        let (status, v) = d.post("/v1/plugins/reload", "");
        assert_ne!(status, 200, "{v}");
        let message = v["error"]["message"].as_str().unwrap_or("");
        assert!(message.contains(&dir.display().to_string()), "{v}");
        assert!(message.contains("chmod go-w"), "{v}");
        let (_, plugins) = d.get("/v1/plugins");
        let files: Vec<&str> = plugins["plugins"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["file"].as_str())
            .collect();
        assert!(
            !files.iter().any(|f| f.ends_with("versioned_strategy.wasm")),
            "{plugins}"
        );
        assert_status_within_a_second(&d);
        committed.assert_unchanged(&d);
    });
    let bystander = tokio::task::block_in_place(|| Bystander::start(&d, &llm));
    tokio::task::block_in_place(|| bystander.finish(&d));
    assert_no_containers(&[&bystander.id]).await;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
}

/// A link in the plugins folder is reported, not followed; with
/// `follow_symlinks = true` it loads.
#[tokio::test(flavor = "multi_thread")]
async fn a_symlink_in_the_plugins_folder_is_not_followed_unless_allowed() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.set_fallback(Reply::terminate());
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let target = elsewhere.path().join("versioned_strategy.wasm");
    std::fs::copy(
        common::built_plugins().join("versioned_strategy_v1.wasm"),
        &target,
    )
    .expect("copy");
    let extra = format!("{}{}", agents(), common::daemon::VERSIONED_STRATEGY_AGENT);
    let mut d = Daemon::unstarted(&llm, &extra);
    std::os::unix::fs::symlink(&target, d.plugins.path().join("versioned_strategy.wasm"))
        .expect("symlink");
    tokio::task::block_in_place(|| {
        d.spawn(&[]);
        let committed = Committed::take(&d);
        let (_, plugins) = d.get("/v1/plugins");
        let link = plugins["plugins"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| {
                p["file"]
                    .as_str()
                    .is_some_and(|f| f.ends_with("versioned_strategy.wasm"))
            })
            .unwrap_or_else(|| panic!("the link is not listed: {plugins}"))
            .clone();
        assert_eq!(link["status"], "failed", "{link}");
        let error = link["error"].as_str().unwrap_or("");
        assert!(error.contains("symbolic link"), "{link}");
        assert!(error.contains("follow_symlinks"), "{link}");
        // The agent's strategy is not loaded: the run is refused or fails
        // naming it, and never runs the linked code.
        let (status, v) = d.post("/v1/runs", &body("versioned", "through the link"));
        if status == 201 {
            let id = v["id"].as_str().expect("id");
            let record = d.wait_run(id, Duration::from_secs(60));
            assert_eq!(record["outcome"], "error", "{record}");
            assert!(
                record["error"]
                    .as_str()
                    .unwrap_or("")
                    .contains("versioned_strategy"),
                "{record}"
            );
        } else {
            assert!(v.to_string().contains("versioned_strategy"), "{v}");
        }
        assert_status_within_a_second(&d);
        committed.assert_unchanged(&d);
        assert_eq!(d.stop(), Some(0));
    });

    // Allowed: the same link loads.
    let config = std::fs::read_to_string(&d.config).expect("config");
    let config = config.replacen("[daemon]\n", "[daemon]\nfollow_symlinks = true\n", 1);
    std::fs::write(&d.config, config).expect("config");
    tokio::task::block_in_place(|| {
        d.spawn(&[]);
        let id = d.create_run("versioned", "through the link");
        let record = d.wait_run(&id, Duration::from_secs(60));
        assert_eq!(record["outcome"], "finished", "{record}");
    });
    let bystander = tokio::task::block_in_place(|| Bystander::start(&d, &llm));
    tokio::task::block_in_place(|| bystander.finish(&d));
    assert_no_containers(&[&bystander.id]).await;
}
