//! A human in the loop, through the real daemon over its socket, with real
//! Docker and the scripted fake LLM: runs that ask a person (`ask_human`),
//! tool calls held for approval, and what waiting does to the run's limits,
//! its slot, its sandbox, a cancel and a shutdown.

use crate::common;

use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::Stdio;
use std::time::{Duration, Instant};

use agentd::testkit::{FakeLlm, Reply};
use common::daemon::Daemon;
use common::fault::tool_contents;
use serde_json::Value;

/// `guarded` holds every `bash` call for approval; `asker` may ask a person.
const AGENTS: &str = "\n[agents.guarded]\nstrategy = \"toolcall\"\ntools = [\"bash\", \"terminate\"]\n\
     approve = [\"bash\"]\nmax_steps = 6\n\n\
     [agents.asker]\nstrategy = \"toolcall\"\ntools = [\"ask_human\", \"terminate\"]\nmax_steps = 6\n\n\
     [agents.echoer]\nstrategy = \"toolcall\"\ntools = [\"echo\", \"terminate\"]\nmax_steps = 4\n";

const PLUGINS: &[(&str, &str)] = &[
    ("toolcall.wasm", "toolcall"),
    ("terminate.wasm", "terminate"),
    ("bash.wasm", "bash"),
    ("echo.wasm", "echo"),
    ("ask_human.wasm", "ask_human"),
];

fn start(llm: &FakeLlm, extra: &str) -> Daemon {
    Daemon::start_with_plugins(llm, PLUGINS, &format!("{extra}\n{AGENTS}"))
}

fn my_uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

/// Polls until the run waits, and returns what it waits for.
fn waiting(d: &Daemon, id: &str) -> Value {
    d.wait_state(id, "waiting")["waiting"].clone()
}

fn approve(
    d: &Daemon,
    id: &str,
    call_id: &str,
    decision: &str,
    reason: Option<&str>,
) -> (u16, Value) {
    let body = serde_json::json!({"call_id": call_id, "decision": decision, "reason": reason});
    d.post(&format!("/v1/runs/{id}/approve"), &body.to_string())
}

/// The history's row state of `id` and its stored `input_requested`
/// event, once both are committed (polled for up to 10 s).
fn stored_wait(d: &Daemon, id: &str) -> (String, String) {
    let db = rusqlite::Connection::open(d.state_dir.join("history.db")).expect("open history");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let state: String = db
            .query_row("SELECT state FROM runs WHERE id = ?1", [id], |r| r.get(0))
            .expect("the run's row");
        let asked: Option<String> = db
            .query_row(
                "SELECT event FROM events WHERE run_id = ?1 AND event LIKE '%\"input_requested\"%'",
                [id],
                |r| r.get(0),
            )
            .ok();
        if let (true, Some(asked)) = (state == "waiting", &asked) {
            return (state, asked.clone());
        }
        if Instant::now() > deadline {
            return (state, asked.unwrap_or_default());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approved_call_runs_and_a_denied_one_is_the_models_observation() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "approve me",
        [
            Reply::call("bash", r#"{"command":"echo ran-after-approval"}"#),
            Reply::terminate(),
        ],
    );
    llm.push_for(
        "deny me",
        [
            Reply::call("bash", r#"{"command":"echo must-not-run"}"#),
            Reply::terminate(),
        ],
    );
    tokio::task::block_in_place(|| {
        let d = start(&llm, "");
        let ok = d.create_run("guarded", "approve me");
        let w = waiting(&d, &ok);
        assert_eq!(w["kind"], "approval", "{w}");
        assert_eq!(w["tool"], "bash", "{w}");
        assert!(
            w["arguments"]
                .as_str()
                .unwrap()
                .contains("ran-after-approval"),
            "{w}"
        );
        let call_id = w["call_id"].as_str().expect("call id").to_string();
        // The listing of waiting runs has it, with what it waits for.
        let (_, list) = d.get("/v1/runs?state=waiting");
        assert!(
            list["runs"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["id"] == ok.as_str() && r["waiting"]["call_id"] == call_id.as_str()),
            "{list}"
        );
        // The wrong call, or an answer to a question it did not ask: 409.
        let (status, v) = approve(&d, &ok, "call_other", "approve", None);
        assert_eq!(
            (status, v["error"]["code"].as_str()),
            (409, Some("not_waiting")),
            "{v}"
        );
        let (status, v) = d.post(&format!("/v1/runs/{ok}/input"), r#"{"text":"hi"}"#);
        assert_eq!(
            (status, v["error"]["code"].as_str()),
            (409, Some("not_waiting")),
            "{v}"
        );
        let (status, v) = d.post(
            &format!("/v1/runs/{ok}/approve"),
            r#"{"call_id":"x","decision":"maybe"}"#,
        );
        assert_eq!(status, 400, "{v}");
        let (status, v) = approve(&d, &ok, &call_id, "approve", None);
        assert_eq!(status, 200, "{v}");
        let record = d.wait_run(&ok, Duration::from_secs(60));
        assert_eq!(record["outcome"], "finished", "{record}");
        assert!(
            tool_contents(&record)
                .iter()
                .any(|c| c.contains("ran-after-approval")),
            "{record}"
        );
        let events = d.events(&ok);
        let decided = of_type(&events, "approval_decided");
        assert_eq!(decided.len(), 1, "{events:?}");
        assert_eq!(decided[0]["decision"], "approve");
        assert_eq!(decided[0]["by_uid"], my_uid(), "who decided is recorded");
        assert_eq!(decided[0]["timed_out"], false);
        assert!(decided[0]["at_ms"].as_i64().is_some(), "and when");
        // The history keeps the decision after the run left memory.
        let (_, record) = d.get(&format!("/v1/runs/{ok}"));
        assert_eq!(record["state"], "ended");
        assert!(record.get("waiting").is_none(), "{record}");

        let no = d.create_run("guarded", "deny me");
        let w = waiting(&d, &no);
        let call_id = w["call_id"].as_str().unwrap().to_string();
        let (status, v) = approve(&d, &no, &call_id, "deny", Some("not on a Friday"));
        assert_eq!(status, 200, "{v}");
        let record = d.wait_run(&no, Duration::from_secs(60));
        assert_eq!(record["outcome"], "finished", "{record}");
        let tools = tool_contents(&record);
        assert!(
            tools
                .iter()
                .any(|c| c.contains("denied by the operator: not on a Friday")),
            "{tools:?}"
        );
        assert!(
            !tools.iter().any(|c| c.contains("must-not-run\n")),
            "{tools:?}"
        );
        let events = d.events(&no);
        assert!(
            !of_type(&events, "tool_call")
                .iter()
                .any(|e| e["name"] == "bash"),
            "a denied call never runs: {events:?}"
        );
        let decided = of_type(&events, "approval_decided");
        assert_eq!(decided[0]["decision"], "deny");
        assert_eq!(decided[0]["reason"], "not on a Friday");
        assert_eq!(decided[0]["by_uid"], my_uid());
        // The model saw the denial in its next request.
        let seen = llm.requests().iter().any(|r| {
            r["messages"].as_array().is_some_and(|m| {
                m.iter().any(|m| {
                    m["content"]
                        .as_str()
                        .is_some_and(|c| c.contains("not on a Friday"))
                })
            })
        });
        assert!(seen, "the denial never reached the model");
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn waiting_counts_against_neither_the_step_deadline_nor_the_wall_clock_and_times_out_as_a_denial(
) {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "slow operator",
        [
            Reply::call("bash", r#"{"command":"echo late-but-fine"}"#),
            Reply::terminate(),
        ],
    );
    llm.push_for(
        "absent operator",
        [
            Reply::call("bash", r#"{"command":"echo nobody"}"#),
            Reply::terminate(),
        ],
    );
    // A one-second step deadline and a three-second wall clock; the
    // operator takes longer than both.
    let extra = "step_timeout = 1\nmax_run_time = 3\n\n[agents.hurried]\nstrategy = \"toolcall\"\n\
                 tools = [\"bash\", \"terminate\"]\napprove = [\"bash\"]\napproval_timeout = 0.4\nmax_steps = 4\n";
    tokio::task::block_in_place(|| {
        let d = start(&llm, extra);
        let id = d.create_run("guarded", "slow operator");
        let w = waiting(&d, &id);
        std::thread::sleep(Duration::from_millis(4000));
        let (status, v) = approve(&d, &id, w["call_id"].as_str().unwrap(), "approve", None);
        assert_eq!(status, 200, "{v}");
        let record = d.wait_run(&id, Duration::from_secs(60));
        assert_eq!(record["outcome"], "finished", "{record}");
        assert!(tool_contents(&record)
            .iter()
            .any(|c| c.contains("late-but-fine")));

        // Nobody decides within approval_timeout: a denial, and the run goes on.
        let id = d.create_run("hurried", "absent operator");
        let record = d.wait_run(&id, Duration::from_secs(60));
        assert_eq!(record["outcome"], "finished", "{record}");
        let tools = tool_contents(&record);
        assert!(
            tools.iter().any(|c| c
                .contains("denied by the operator: no decision within 400ms (approval_timeout)")),
            "{tools:?}"
        );
        let events = d.events(&id);
        let decided = of_type(&events, "approval_decided");
        assert_eq!(decided.len(), 1, "{events:?}");
        assert_eq!(decided[0]["decision"], "deny");
        assert_eq!(decided[0]["timed_out"], true);
        assert!(decided[0]["by_uid"].is_null(), "{events:?}");
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelling_a_waiting_run_removes_its_sandbox() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "two calls",
        [
            Reply::call("bash", r#"{"command":"echo first"}"#),
            Reply::call("bash", r#"{"command":"echo second"}"#),
            Reply::terminate(),
        ],
    );
    let d = tokio::task::block_in_place(|| start(&llm, ""));
    let id = tokio::task::block_in_place(|| {
        let id = d.create_run("guarded", "two calls");
        let w = waiting(&d, &id);
        let (status, v) = approve(&d, &id, w["call_id"].as_str().unwrap(), "approve", None);
        assert_eq!(status, 200, "{v}");
        // The first call ran (so the run has a container); the second waits.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let w2 = waiting(&d, &id);
            if w2["call_id"] != w["call_id"] {
                break;
            }
            assert!(Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(20));
        }
        id
    });
    assert_eq!(
        common::containers_of_run(&id).await,
        1,
        "the run's sandbox is kept while it waits"
    );
    tokio::task::block_in_place(|| {
        let (status, v) = d.post(&format!("/v1/runs/{id}/cancel"), "");
        assert_eq!(status, 202, "{v}");
        let record = d.wait_run(&id, Duration::from_secs(60));
        assert_eq!(record["outcome"], "cancelled", "{record}");
    });
    assert_eq!(
        common::containers_of_run(&id).await,
        0,
        "the sandbox went with the cancel"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn twenty_runs_wait_at_once_while_others_finish() {
    let llm = FakeLlm::start().await.expect("fake llm");
    for i in 0..20 {
        llm.push_for(
            &format!("wait {i}"),
            [
                Reply::call("bash", &format!(r#"{{"command":"echo waited-{i}"}}"#)),
                Reply::terminate(),
            ],
        );
    }
    llm.set_fallback(Reply::terminate());
    // Two slots: with release_waiting the twenty waiting runs hold none.
    let extra = "max_concurrent_runs = 2\nrelease_waiting = true";
    tokio::task::block_in_place(|| {
        let d = start(&llm, extra);
        let waiters: Vec<String> = (0..20)
            .map(|i| d.create_run("guarded", &format!("wait {i}")))
            .collect();
        let calls: Vec<String> = waiters
            .iter()
            .map(|id| waiting(&d, id)["call_id"].as_str().unwrap().to_string())
            .collect();
        let (_, status) = d.get("/v1/status");
        assert_eq!(status["runs_waiting"], 20, "{status}");
        let (_, list) = d.get("/v1/runs?state=waiting");
        assert_eq!(list["runs"].as_array().unwrap().len(), 20, "{list}");
        // Meanwhile other runs get the slots and finish.
        let others: Vec<String> = (0..4)
            .map(|i| d.create_run("echoer", &format!("other {i}")))
            .collect();
        for id in &others {
            assert_eq!(
                d.wait_run(id, Duration::from_secs(60))["outcome"],
                "finished"
            );
        }
        // Every waiter is still waiting, then each is decided: two approved,
        // the rest denied, and all of them finish.
        for (i, (id, call)) in waiters.iter().zip(&calls).enumerate() {
            assert_eq!(waiting(&d, id)["call_id"], call.as_str());
            let decision = if i < 2 { "approve" } else { "deny" };
            let (status, v) = approve(&d, id, call, decision, Some("batch"));
            assert_eq!(status, 200, "{v}");
        }
        for (i, id) in waiters.iter().enumerate() {
            let record = d.wait_run(id, Duration::from_secs(120));
            assert_eq!(record["outcome"], "finished", "{record}");
            let tools = tool_contents(&record);
            if i < 2 {
                assert!(
                    tools.iter().any(|c| c.contains(&format!("waited-{i}"))),
                    "{tools:?}"
                );
            } else {
                assert!(
                    tools
                        .iter()
                        .any(|c| c.contains("denied by the operator: batch")),
                    "{tools:?}"
                );
            }
        }
        let (_, status) = d.get("/v1/status");
        assert_eq!(status["runs_waiting"], 0, "{status}");
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn without_release_waiting_a_waiting_run_keeps_its_slot() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "hold the slot",
        [
            Reply::call("bash", r#"{"command":"true"}"#),
            Reply::terminate(),
        ],
    );
    llm.set_fallback(Reply::terminate());
    tokio::task::block_in_place(|| {
        let d = start(&llm, "max_concurrent_runs = 1");
        let holder = d.create_run("guarded", "hold the slot");
        let w = waiting(&d, &holder);
        let other = d.create_run("echoer", "behind it");
        std::thread::sleep(Duration::from_millis(500));
        let (_, v) = d.get(&format!("/v1/runs/{other}"));
        assert_eq!(
            v["state"], "queued",
            "the waiting run holds the only slot: {v}"
        );
        let (status, _) = approve(&d, &holder, w["call_id"].as_str().unwrap(), "deny", None);
        assert_eq!(status, 200);
        assert_eq!(
            d.wait_run(&holder, Duration::from_secs(60))["outcome"],
            "finished"
        );
        assert_eq!(
            d.wait_run(&other, Duration::from_secs(60))["outcome"],
            "finished"
        );
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_interrupts_the_waiting_runs() {
    let llm = FakeLlm::start().await.expect("fake llm");
    for i in 0..3 {
        llm.push_for(
            &format!("left waiting {i}"),
            [Reply::call("bash", r#"{"command":"true"}"#)],
        );
    }
    let d = tokio::task::block_in_place(|| start(&llm, ""));
    let ids = tokio::task::block_in_place(|| {
        let ids: Vec<String> = (0..3)
            .map(|i| d.create_run("guarded", &format!("left waiting {i}")))
            .collect();
        for id in &ids {
            waiting(&d, id);
        }
        ids
    });
    let mut d = d;
    tokio::task::block_in_place(|| {
        let started = Instant::now();
        d.signal(libc::SIGTERM);
        assert_eq!(
            d.wait_exit(Duration::from_secs(60)),
            Some(0),
            "{}",
            d.log_text()
        );
        // Waiting runs are interrupted at once, not after shutdown_grace.
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        d.spawn(&[]);
        for id in &ids {
            let (_, v) = d.get(&format!("/v1/runs/{id}"));
            assert_eq!(v["outcome"], "interrupted", "{v}");
            assert!(
                v["error"].as_str().unwrap().contains("agentd resume"),
                "{v}"
            );
        }
        // After the restart an interrupted run is resumed and ends normally.
        llm.push_for("left waiting 0", [Reply::terminate()]);
        let (status, v) = d.post(&format!("/v1/runs/{}/resume", ids[0]), "");
        assert_eq!(status, 201, "{v}");
        let resumed = v["id"].as_str().expect("the new run's id").to_string();
        assert_eq!(v["resumed_from"], ids[0].as_str(), "{v}");
        let record = d.wait_run(&resumed, Duration::from_secs(60));
        assert_eq!(record["outcome"], "finished", "{record}");
    });
    for id in &ids {
        assert_eq!(common::containers_of_run(id).await, 0);
    }
}

/// A pseudo-terminal: `agentd run` sees a terminal on stdin and stderr.
fn openpty() -> (OwnedFd, OwnedFd) {
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty writes two descriptors it opened into the pointers
    // given; the name, termios and winsize arguments may be null.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both were just opened by openpty and are owned by nobody else.
    unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) }
}

#[tokio::test(flavor = "multi_thread")]
async fn agentd_run_on_a_terminal_asks_y_or_n() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "ask me on the terminal",
        [
            Reply::call("bash", r#"{"command":"echo approved-on-a-tty"}"#),
            Reply::terminate(),
        ],
    );
    tokio::task::block_in_place(|| {
        let d = start(&llm, "");
        let (master, slave) = openpty();
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_agentd"))
            .args([
                "--socket",
                d.socket.to_str().unwrap(),
                "run",
                "guarded",
                "ask me on the terminal",
            ])
            .env("TERM", "dumb")
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave))
            .spawn()
            .expect("agentd run");
        let mut tty = std::fs::File::from(master);
        let mut seen = String::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut buf = [0u8; 4096];
        let mut reader = tty.try_clone().unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        std::thread::spawn(move || {
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0
                    || tx
                        .send(String::from_utf8_lossy(&buf[..n]).into_owned())
                        .is_err()
                {
                    break;
                }
            }
        });
        while !seen.contains("[y/N") {
            assert!(
                Instant::now() < deadline,
                "no prompt on the terminal: {seen}"
            );
            if let Ok(more) = rx.recv_timeout(Duration::from_millis(200)) {
                seen.push_str(&more);
            }
        }
        assert!(
            seen.contains("approved-on-a-tty"),
            "the prompt shows the call: {seen}"
        );
        tty.write_all(b"y\n").unwrap();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "agentd run did not end: {seen}");
            if let Ok(more) = rx.recv_timeout(Duration::from_millis(100)) {
                seen.push_str(&more);
            }
        };
        while let Ok(more) = rx.recv_timeout(Duration::from_millis(200)) {
            seen.push_str(&more);
        }
        assert!(status.success(), "{status}: {seen}");
        let id = d.get("/v1/runs?limit=1").1["runs"][0]["id"]
            .as_str()
            .unwrap()
            .to_string();
        let events = d.events(&id);
        let decided = of_type(&events, "approval_decided");
        assert_eq!(decided[0]["decision"], "approve", "{events:?}");
        assert_eq!(decided[0]["by_uid"], my_uid());
        let record = d.wait_run(&id, Duration::from_secs(10));
        assert!(tool_contents(&record)
            .iter()
            .any(|c| c.contains("approved-on-a-tty")));
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn ask_human_is_answered_through_the_api_and_agentd_reply_or_times_out() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "ask over the api",
        [
            Reply::call("ask_human", r#"{"inquire":"Which branch?"}"#),
            Reply::terminate(),
        ],
    );
    llm.push_for(
        "ask in a pipe",
        [
            Reply::call("ask_human", r#"{"inquire":"Which colour?"}"#),
            Reply::terminate(),
        ],
    );
    llm.push_for(
        "nobody answers",
        [
            Reply::call("ask_human", r#"{"inquire":"Anyone?"}"#),
            Reply::terminate(),
        ],
    );
    let extra =
        "\n[agents.impatient]\nstrategy = \"toolcall\"\ntools = [\"ask_human\", \"terminate\"]\n\
                 input_timeout = 0.3\nmax_steps = 4\n";
    tokio::task::block_in_place(|| {
        let d = start(&llm, extra);
        let id = d.create_run("asker", "ask over the api");
        let w = waiting(&d, &id);
        assert_eq!(w["kind"], "input", "{w}");
        assert_eq!(w["question"], "Which branch?");
        assert_eq!(w["plugin"], "ask_human");
        // A wait may last days: the history has it, with what the step did
        // up to it, while it lasts, not at the step's end.
        let stored = stored_wait(&d, &id);
        assert_eq!(stored.0, "waiting", "{stored:?}");
        assert!(stored.1.contains("Which branch?"), "{stored:?}");
        let (status, v) = d.post(
            &format!("/v1/runs/{id}/approve"),
            r#"{"call_id":"c","decision":"approve"}"#,
        );
        assert_eq!(
            (status, v["error"]["code"].as_str()),
            (409, Some("not_waiting")),
            "{v}"
        );
        let (status, v) = d.post(&format!("/v1/runs/{id}/input"), r#"{"text":"release-2.x"}"#);
        assert_eq!(status, 200, "{v}");
        let record = d.wait_run(&id, Duration::from_secs(60));
        assert_eq!(record["outcome"], "finished", "{record}");
        assert!(
            tool_contents(&record)
                .iter()
                .any(|c| c.contains("release-2.x")),
            "{record}"
        );
        let events = d.events(&id);
        let asked = of_type(&events, "input_requested");
        assert_eq!(asked.len(), 1, "{events:?}");
        let answered = of_type(&events, "input_received");
        assert_eq!(answered[0]["id"], asked[0]["id"]);
        assert_eq!(answered[0]["text"], "release-2.x");
        assert_eq!(answered[0]["by_uid"], my_uid());
        // Answering an ended run is a 409 too.
        let (status, v) = d.post(&format!("/v1/runs/{id}/input"), r#"{"text":"late"}"#);
        assert_eq!(
            (status, v["error"]["code"].as_str()),
            (409, Some("not_waiting")),
            "{v}"
        );

        // `agentd run` in a pipe prints how to answer; `agentd reply` does.
        let mut run = std::process::Command::new(env!("CARGO_BIN_EXE_agentd"))
            .args([
                "--socket",
                d.socket.to_str().unwrap(),
                "run",
                "asker",
                "ask in a pipe",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("agentd run");
        let mut stderr = std::io::BufReader::new(run.stderr.take().unwrap());
        let mut seen = String::new();
        let hint = loop {
            let mut line = String::new();
            let n = std::io::BufRead::read_line(&mut stderr, &mut line).expect("read");
            assert!(n > 0, "agentd run ended without the hint: {seen}");
            seen.push_str(&line);
            if line.contains("agentd reply") {
                break line;
            }
        };
        assert!(
            seen.contains("Which colour?"),
            "the question is shown: {seen}"
        );
        let id = hint
            .split_whitespace()
            .find(|w| w.len() >= 12 && w.chars().all(|c| c.is_ascii_hexdigit()))
            .expect("the run id in the hint")
            .to_string();
        let reply = std::process::Command::new(env!("CARGO_BIN_EXE_agentd"))
            .args([
                "--socket",
                d.socket.to_str().unwrap(),
                "reply",
                &id[..12],
                "teal",
            ])
            .output()
            .expect("agentd reply");
        assert!(reply.status.success(), "{reply:?}");
        let out = run.wait_with_output().expect("agentd run");
        assert!(out.status.success(), "{out:?}");
        let record = d.wait_run(&id, Duration::from_secs(10));
        assert!(
            tool_contents(&record).iter().any(|c| c.contains("teal")),
            "{record}"
        );

        // Nobody answers within input_timeout: the tool says so, the run goes on.
        let id = d.create_run("impatient", "nobody answers");
        let record = d.wait_run(&id, Duration::from_secs(60));
        assert_eq!(record["outcome"], "finished", "{record}");
        let tools = tool_contents(&record);
        assert!(
            tools
                .iter()
                .any(|c| c.contains("no answer within 300ms (input_timeout)")),
            "{tools:?}"
        );
        let events = d.events(&id);
        let answered = of_type(&events, "input_received");
        assert_eq!(answered[0]["timed_out"], true, "{events:?}");
        assert!(answered[0]["text"].is_null());
    });
}
