//! The `agentd` binary as the daemon's client, against a fake daemon served
//! by this test on a Unix socket: what each command prints, its exit
//! status, and what it asked the daemon.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentd::agent::{Outcome, RunEvent};

use agentd::api::{
    CacheStatus, CreateRun, EngineStatus, ErrorBody, ErrorDetail, EventLine, MessagePaging,
    RunList, RunState, RunSummary, RunView, Status,
};
use agentd::chat::Message;
use agentd::chat::Usage;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};

const RESULT: &str = "Step 1: Observed output of cmd `terminate` executed:\nThe interaction has been completed with status: success\nTerminated: Reached max steps (1)";

#[derive(Default)]
struct Seen {
    created: Mutex<Vec<CreateRun>>,
    hosts: Mutex<Vec<String>>,
    event_requests: AtomicUsize,
    slow_following: AtomicBool,
    cancels: AtomicUsize,
    cancelled: tokio::sync::Notify,
    slow_ended: AtomicBool,
    /// The `since` of each events request, in order.
    event_since: Mutex<Vec<Option<u64>>>,
}

struct FakeDaemon {
    dir: tempfile::TempDir,
    socket: PathBuf,
    seen: Arc<Seen>,
}

async fn fake_daemon() -> FakeDaemon {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("agentd.sock");
    let listener = tokio::net::UnixListener::bind(&socket).expect("bind");
    let seen = Arc::new(Seen::default());
    let app = Router::new()
        .route("/v1/status", get(status))
        .route("/v1/runs", get(list_runs).post(create_run))
        .route("/v1/runs/{id}", get(show_run))
        .route("/v1/runs/{id}/events", get(events))
        .route("/v1/runs/{id}/cancel", post(cancel_run))
        .with_state(seen.clone());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    FakeDaemon { dir, socket, seen }
}

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    let body = ErrorBody {
        error: ErrorDetail {
            code: code.into(),
            message: message.into(),
        },
    };
    (status, Json(body)).into_response()
}

fn run(id: &str, state: RunState, outcome: Option<Outcome>) -> RunView {
    RunView {
        summary: RunSummary {
            id: id.into(),
            seq: 1,
            agent: "toolcall".into(),
            request: "hi".into(),
            request_truncated: false,
            result_truncated: false,
            state,
            waiting: None,
            outcome,
            steps: 1,
            max_steps: Some(30),
            result: outcome.map(|_| RESULT.to_string()),
            error: None,
            usage: Usage {
                prompt_tokens: 20,
                completion_tokens: 10,
            },
            cost: None,
            created_at_ms: 1_700_000_000_000,
            started_at_ms: Some(1_700_000_000_100),
            ended_at_ms: outcome.map(|_| 1_700_000_001_000),
            resume: Default::default(),
        },
        plan: None,
        messages: vec![Message::user("hi")],
        paging: Default::default(),
        files: None,
    }
}

#[derive(serde::Deserialize)]
struct PageQuery {
    messages_from: Option<u32>,
}

fn known_run(seen: &Seen, id: &str) -> Option<RunView> {
    match id {
        "run-1" => Some(run(id, RunState::Ended, Some(Outcome::MaxSteps))),
        "run-broken" => Some(run(id, RunState::Ended, Some(Outcome::Interrupted))),
        "run-slow" if seen.slow_ended.load(Ordering::SeqCst) => {
            Some(run(id, RunState::Ended, Some(Outcome::Cancelled)))
        }
        "run-slow" => Some(run(id, RunState::Running, None)),
        "run-dropped" => Some(run(id, RunState::Running, None)),
        _ => None,
    }
}

async fn status(State(seen): State<Arc<Seen>>, headers: HeaderMap) -> Json<Status> {
    record_host(&seen, &headers);
    Json(Status {
        version: "0.1.0-fake".into(),
        uptime_s: 65.0,
        runs_active: 1,
        runs_waiting: 0,
        runs_queued: 2,
        plugins_loaded: 4,
        sandbox_engine: EngineStatus {
            reachable: true,
            address: "unix:///var/run/docker.sock".into(),
            error: None,
            warnings: Vec::new(),
            pool: Default::default(),
        },
        engines: Vec::new(),
        socket: "/run/agentd/agentd.sock".into(),
        state_dir: "/var/lib/agentd".into(),
        accepting_runs: true,
        plugin_cache: CacheStatus {
            enabled: true,
            hits: 5,
            misses: 0,
        },
        token_budgets: Default::default(),
    })
}

fn record_host(seen: &Seen, headers: &HeaderMap) {
    let host = headers
        .get("host")
        .and_then(|h| h.to_str().ok())
        .unwrap_or("")
        .to_string();
    seen.hosts.lock().expect("lock").push(host);
}

async fn list_runs(State(seen): State<Arc<Seen>>) -> Json<RunList> {
    let runs = ["run-1", "run-broken", "run-slow"]
        .iter()
        .filter_map(|id| known_run(&seen, id))
        .map(|v| v.summary)
        .collect();
    Json(RunList {
        runs,
        next_before: None,
    })
}

async fn create_run(
    State(seen): State<Arc<Seen>>,
    headers: HeaderMap,
    Json(body): Json<CreateRun>,
) -> Response {
    record_host(&seen, &headers);
    let id =
        match body.agent.as_str() {
            "toolcall" => "run-1",
            "slow" => "run-slow",
            "broken" => "run-broken",
            "unusable" => return error(
                StatusCode::BAD_REQUEST,
                "bad_request",
                "agent `unusable` cannot run: no base_url: set [llm] base_url or $OPENAI_BASE_URL",
            ),
            "closing" => {
                return error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "shutting_down",
                    "agentd is shutting down and accepts no new runs",
                )
            }
            other => {
                return error(
                    StatusCode::NOT_FOUND,
                    "unknown_agent",
                    &format!("unknown agent `{other}`"),
                )
            }
        };
    seen.created.lock().expect("lock").push(body);
    (StatusCode::CREATED, Json(run(id, RunState::Queued, None))).into_response()
}

async fn show_run(
    State(seen): State<Arc<Seen>>,
    Path(id): Path<String>,
    Query(page): Query<PageQuery>,
) -> Response {
    if id == "run-paged" {
        // Three messages, served one per page as a daemon does for a long
        // transcript.
        let from = page.messages_from.unwrap_or(0);
        let mut v = run(&id, RunState::Ended, Some(Outcome::MaxSteps));
        v.messages = vec![Message::user(format!("page message {from}"))];
        v.paging = MessagePaging {
            messages_total: Some(3),
            messages_from: (from > 0).then_some(from),
            next_messages_from: (from < 2).then_some(from + 1),
        };
        return Json(v).into_response();
    }
    match known_run(&seen, &id) {
        Some(v) => Json(v).into_response(),
        None => error(
            StatusCode::NOT_FOUND,
            "not_found",
            &format!("no run `{id}`"),
        ),
    }
}

async fn cancel_run(State(seen): State<Arc<Seen>>, Path(id): Path<String>) -> Response {
    match id.as_str() {
        "run-slow" => {
            seen.cancels.fetch_add(1, Ordering::SeqCst);
            seen.cancelled.notify_one();
            (
                StatusCode::ACCEPTED,
                Json(run(&id, RunState::Running, None)),
            )
                .into_response()
        }
        "run-1" | "run-broken" => error(
            StatusCode::CONFLICT,
            "conflict",
            &format!("run {id} has already ended"),
        ),
        _ => error(
            StatusCode::NOT_FOUND,
            "not_found",
            &format!("no run `{id}`"),
        ),
    }
}

fn line(seq: u64, event: RunEvent) -> String {
    let mut s = serde_json::to_string(&EventLine {
        seq,
        at_ms: 1_700_000_000_100 + seq as i64 * 10,
        event,
    })
    .expect("encode");
    s.push('\n');
    s
}

fn started(id: &str) -> String {
    line(
        1,
        RunEvent::RunStarted {
            run_id: id.into(),
            agent: "toolcall".into(),
            request: "hi".into(),
            max_steps: 30,
            strategy: "toolcall".into(),
            strategy_version: "0.1.0".into(),
        },
    ) + &line(
        2,
        RunEvent::StepStarted {
            step: 1,
            max_steps: 30,
        },
    )
}

fn ended(seq: u64, outcome: Outcome) -> String {
    line(
        seq,
        RunEvent::RunEnded {
            outcome,
            steps: 1,
            error: None,
        },
    )
}

/// Sends `text` in small chunks that cut lines (and JSON) anywhere.
async fn send_cut(
    tx: &futures::channel::mpsc::UnboundedSender<std::io::Result<Bytes>>,
    text: &str,
) {
    for chunk in text.as_bytes().chunks(37) {
        let _ = tx.unbounded_send(Ok(Bytes::copy_from_slice(chunk)));
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[derive(serde::Deserialize)]
struct EventsQuery {
    since: Option<u64>,
}

async fn events(
    State(seen): State<Arc<Seen>>,
    Path(id): Path<String>,
    Query(q): Query<EventsQuery>,
) -> Response {
    seen.event_requests.fetch_add(1, Ordering::SeqCst);
    seen.event_since.lock().expect("lock").push(q.since);
    if known_run(&seen, &id).is_none() {
        return error(
            StatusCode::NOT_FOUND,
            "not_found",
            &format!("no run `{id}`"),
        );
    }
    let (tx, rx) = futures::channel::mpsc::unbounded();
    let seen = seen.clone();
    tokio::spawn(async move {
        match id.as_str() {
            "run-1" => {
                let text = started(&id)
                    + &line(
                        3,
                        RunEvent::ToolCall {
                            step: 1,
                            id: "c1".into(),
                            name: "terminate".into(),
                            arguments: r#"{"status":"success"}"#.into(),
                        },
                    )
                    + &line(
                        4,
                        RunEvent::ToolResult {
                            step: 1,
                            id: "c1".into(),
                            name: "terminate".into(),
                            ok: true,
                            output: "done".into(),
                        },
                    )
                    + &ended(5, Outcome::MaxSteps);
                send_cut(&tx, &text).await;
            }
            "run-slow" => {
                send_cut(&tx, &started(&id)).await;
                seen.slow_following.store(true, Ordering::SeqCst);
                seen.cancelled.notified().await;
                seen.slow_ended.store(true, Ordering::SeqCst);
                send_cut(&tx, &ended(3, Outcome::Cancelled)).await;
                // A daemon ends the stream after run_ended; this one keeps it
                // open to show the client stops reading there.
                tokio::time::sleep(Duration::from_secs(30)).await;
            }
            // Dropped as a follower too far behind: a stream_error line
            // says where to resume; the resumed stream has the rest.
            "run-dropped" if q.since.is_none() => {
                let dropped = r#"{"type":"stream_error","code":"follower_too_slow","message":"reconnect with since=2","resume_since":2}"#;
                send_cut(&tx, &format!("{}{dropped}\n", started(&id))).await;
            }
            "run-dropped" => send_cut(&tx, &ended(3, Outcome::Finished)).await,
            // Ends mid-run, as when the daemon restarts.
            _ => send_cut(&tx, &started(&id)).await,
        }
    });
    Response::builder()
        .header("content-type", "application/x-ndjson")
        .body(Body::from_stream(rx))
        .expect("response")
}

fn agentd_command(socket: &std::path::Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentd"));
    cmd.arg("--socket")
        .arg(socket)
        .args(args)
        .env_remove("AGENTD_CONFIG")
        .env_remove("AGENTD_SOCKET");
    cmd
}

/// Blocking, so off the runtime that serves the fake daemon.
async fn agentd(socket: &std::path::Path, args: &[&str]) -> Output {
    let mut cmd = agentd_command(socket, args);
    tokio::task::spawn_blocking(move || cmd.output().expect("spawn agentd"))
        .await
        .expect("join")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn status_prints_the_daemons_fields() {
    let d = fake_daemon().await;
    let out = agentd(&d.socket, &["status"]).await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    for expected in [
        "version    0.1.0-fake\n",
        "uptime     1m05s\n",
        "runs       1 running, 2 queued\n",
        "plugins    4 loaded (5 from the compile cache, 0 compiled)\n",
        "sandbox    unix:///var/run/docker.sock (reachable)\n",
    ] {
        assert!(stdout.contains(expected), "{expected:?} in {stdout}");
    }
    let out = agentd(&d.socket, &["status", "--json"]).await;
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(json["runs_queued"], 2);
    assert_eq!(*d.seen.hosts.lock().expect("lock"), ["agentd", "agentd"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn run_follows_the_events_and_exits_with_the_outcome() {
    let d = fake_daemon().await;
    let out = agentd(&d.socket, &["run", "toolcall", "hi"]).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "max_steps: {stderr}");
    assert_eq!(text(&out.stdout), format!("{RESULT}\n"));
    for expected in [
        "step 1/30\n",
        "  tool terminate {\"status\":\"success\"}\n",
        "  result terminate: done\n",
        "run ended: max_steps after 1 steps\n",
    ] {
        assert!(stderr.contains(expected), "{expected:?} in {stderr}");
    }
    {
        let created = d.seen.created.lock().expect("lock");
        assert_eq!(
            (created[0].agent.as_str(), created[0].request.as_str()),
            ("toolcall", "hi")
        );
    }

    let out = agentd(&d.socket, &["run", "--json", "toolcall", "hi"]).await;
    assert_eq!(out.status.code(), Some(3));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(json["outcome"], "max_steps");
    assert_eq!(json["messages"][0]["role"], "user");
}

#[tokio::test(flavor = "multi_thread")]
async fn detach_prints_the_id_and_leaves_at_once() {
    let d = fake_daemon().await;
    let out = agentd(&d.socket, &["run", "--detach", "toolcall", "hi"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "run-1\n");
    assert_eq!(d.seen.event_requests.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_daemons_refusals_print_its_message_and_exit_by_its_code() {
    let d = fake_daemon().await;
    let out = agentd(&d.socket, &["show", "nope"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stderr), "agentd: no run `nope`\n");

    // A run the daemon will not make because of what it was asked is bad
    // usage or configuration: 2, as with --local.
    let out = agentd(&d.socket, &["run", "nobody", "hi"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(text(&out.stderr), "agentd: unknown agent `nobody`\n");
    let out = agentd(&d.socket, &["run", "--json", "unusable", "hi"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "agentd: agent `unusable` cannot run: no base_url: set [llm] base_url or $OPENAI_BASE_URL\n"
    );
    assert_eq!(text(&out.stdout), "");
    // A daemon that cannot take runs now is not the user's mistake.
    let out = agentd(&d.socket, &["run", "closing", "hi"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("shutting down"));

    let out = agentd(&d.socket, &["cancel", "run-1"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "agentd: run run-1 already ended (max_steps)\n"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn no_daemon_at_the_socket_exits_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("none.sock");
    for args in [&["status"][..], &["run", "toolcall", "hi"], &["runs"]] {
        let out = agentd(&socket, args).await;
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(
            text(&out.stderr),
            format!(
                "agentd: cannot connect to agentd at {}: is the service running?\n",
                socket.display()
            )
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_cancels_the_run_once_and_waits_for_its_end() {
    let d = fake_daemon().await;
    let mut cmd = agentd_command(&d.socket, &["run", "slow", "x"]);
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id() as libc::pid_t;
    let waiting = tokio::time::timeout(Duration::from_secs(30), async {
        while !d.seen.slow_following.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(waiting.is_ok(), "agentd never followed the run");
    // The handler is installed before the stream is opened.
    // SAFETY: kill has no memory preconditions; pid is our child.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().expect("wait"))
        .await
        .expect("join");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "cancelled: {stderr}");
    assert!(
        stderr.contains("agentd: cancelling run run-slow"),
        "{stderr}"
    );
    assert!(stderr.contains("run ended: cancelled"), "{stderr}");
    assert_eq!(d.seen.cancels.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broken_stream_falls_back_to_the_runs_record() {
    let d = fake_daemon().await;
    let out = agentd(&d.socket, &["run", "broken", "x"]).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "interrupted: {stderr}");
    assert!(
        stderr.contains(
            "lost the event stream of run run-broken; its record says it ended: interrupted"
        ),
        "{stderr}"
    );
    drop(d.dir);
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_show_and_logs_read_the_history() {
    let d = fake_daemon().await;
    let out = agentd(&d.socket, &["runs"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("ID  "), "{stdout}");
    assert!(
        lines[1].starts_with("run-1       ended    max_steps    toolcall  1/30"),
        "{stdout}"
    );
    assert_eq!(lines.len(), 4, "{stdout}");

    // A unique prefix names the run, as the ids `runs` shows are cut.
    let out = agentd(&d.socket, &["show", "run-b"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("run      run-broken\n"), "{stdout}");
    assert!(
        stdout.contains("state    ended (interrupted)\n"),
        "{stdout}"
    );
    assert!(stdout.contains("\n[user]\nhi\n"), "{stdout}");
    assert!(
        stdout.ends_with(&format!("[result]\n{RESULT}\n")),
        "{stdout}"
    );

    let out = agentd(&d.socket, &["logs", "run-1"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("   +0.0s  agent toolcall"), "{stdout}");
    assert!(stdout.contains("  step 1/30\n"), "{stdout}");

    let out = agentd(&d.socket, &["logs", "--json", "run-1"]).await;
    let stdout = text(&out.stdout);
    let events: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON event per line"))
        .collect();
    assert_eq!(events.len(), 5);
    assert_eq!(events[4]["type"], "run_ended");
}

#[tokio::test(flavor = "multi_thread")]
async fn show_pages_through_a_long_transcript() {
    let d = fake_daemon().await;
    let out = agentd(&d.socket, &["show", "run-paged"]).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let at = |needle: &str| {
        stdout
            .find(needle)
            .unwrap_or_else(|| panic!("{needle:?} missing: {stdout}"))
    };
    assert!(at("page message 0") < at("page message 1"));
    assert!(at("page message 1") < at("page message 2"));
    assert!(at("page message 2") < at("[result]"), "{stdout}");

    let out = agentd(&d.socket, &["show", "run-paged", "--json"]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let messages: Vec<&str> = v["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["content"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        messages,
        ["page message 0", "page message 1", "page message 2"]
    );
    assert!(v.get("next_messages_from").is_none(), "{v}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dropped_follower_resumes_with_since() {
    let d = fake_daemon().await;
    let out = agentd(&d.socket, &["logs", "-f", "--json", "run-dropped"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let seqs: Vec<u64> = text(&out.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("one JSON event per line");
            v["seq"]
                .as_u64()
                .expect("an event line, not the stream_error")
        })
        .collect();
    assert_eq!(seqs, [1, 2, 3], "every event once, in order");
    assert_eq!(*d.seen.event_since.lock().expect("lock"), [None, Some(2)]);
}
