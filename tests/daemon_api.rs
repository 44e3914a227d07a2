//! `agentd serve`, spawned, driven over its Unix socket with raw HTTP/1.1:
//! runs end to end, following, the queue, cancelling, and every error the
//! API promises.

use crate::common;

use std::time::Duration;

use agentd::testkit::{FakeLlm, Reply};
use common::daemon::{raw, request, Daemon};
use serde_json::Value;

const AGENTS: &str = "\n[agents.echoer]\nstrategy = \"toolcall\"\ntools = [\"echo\", \"terminate\"]\nmax_steps = 5\n";

fn types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("?").to_string())
        .collect()
}

async fn daemon(extra: &str) -> (FakeLlm, Daemon) {
    let llm = FakeLlm::start().await.expect("fake llm");
    let extra = format!("{extra}\n{AGENTS}");
    let d = tokio::task::block_in_place(|| Daemon::start(&llm, &extra));
    (llm, d)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_end_to_end_over_raw_http() {
    let (llm, d) = daemon("").await;
    llm.push_for(
        "say hi",
        [
            Reply::call("echo", r#"{"text":"hi there"}"#),
            Reply::terminate(),
        ],
    );
    tokio::task::block_in_place(|| {
        let body = r#"{"agent": "echoer", "request": "say hi"}"#;
        let (status, created) = d.post("/v1/runs", body);
        assert_eq!(status, 201, "{created}");
        let id = created["id"].as_str().expect("id").to_string();
        assert!(
            ["queued", "running"].contains(&created["state"].as_str().unwrap_or("")),
            "{created}"
        );
        assert!(created.get("outcome").is_none(), "no outcome while running");

        let events = d.events(&id);
        let kinds = types(&events);
        for expected in [
            "run_started",
            "step_started",
            "assistant_message",
            "tool_call",
            "tool_result",
            "step_finished",
            "run_ended",
        ] {
            assert!(kinds.contains(&expected.to_string()), "{kinds:?}");
        }
        assert_eq!(kinds.last().map(String::as_str), Some("run_ended"));
        let seqs: Vec<u64> = events.iter().filter_map(|e| e["seq"].as_u64()).collect();
        assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
        let echo = events
            .iter()
            .find(|e| e["type"] == "tool_result" && e["name"] == "echo")
            .expect("echo result");
        assert!(echo["output"].as_str().unwrap_or("").contains("hi there"));

        let record = d.wait_run(&id, Duration::from_secs(30));
        assert_eq!(record["outcome"], "finished", "{record}");
        assert_eq!(record["steps"], 2);
        assert_eq!(record["agent"], "echoer");
        let roles: Vec<_> = record["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .map(|m| m["role"].as_str().unwrap_or("").to_string())
            .collect();
        assert_eq!(roles.first().map(String::as_str), Some("user"));
        assert!(roles.contains(&"tool".to_string()), "{roles:?}");

        let (status, list) = d.get("/v1/runs");
        assert_eq!(status, 200);
        assert_eq!(list["runs"][0]["id"], id.as_str());
        assert!(list["runs"][0].get("messages").is_none());

        let (status, st) = d.get("/v1/status");
        assert_eq!(status, 200);
        assert_eq!(st["version"], env!("CARGO_PKG_VERSION"));
        assert!(st["plugins_loaded"].as_u64().unwrap_or(0) >= 5, "{st}");
        assert_eq!(st["runs_active"], 0);

        let (status, agents) = d.get("/v1/agents");
        assert_eq!(status, 200);
        let names: Vec<_> = agents["agents"]
            .as_array()
            .expect("agents")
            .iter()
            .map(|a| a["name"].as_str().unwrap_or("").to_string())
            .collect();
        assert!(names.contains(&"echoer".to_string()), "{names:?}");
        // Each agent says where its prompts and step limit come from: a
        // custom agent on `toolcall` gets the strategy's prompts, `manus`
        // its own.
        let agent = |name: &str| {
            agents["agents"]
                .as_array()
                .and_then(|a| a.iter().find(|a| a["name"] == name))
                .cloned()
                .unwrap_or_default()
        };
        let echoer = agent("echoer");
        assert_eq!(echoer["system_prompt_source"], "strategy", "{echoer}");
        assert_eq!(
            echoer["system_prompt"],
            common::TOOLCALL_SYSTEM_PROMPT,
            "{echoer}"
        );
        assert_eq!(echoer["next_step_prompt_source"], "strategy", "{echoer}");
        assert_eq!(echoer["max_steps"], 5);
        assert_eq!(echoer["max_steps_source"], "agent");
        let toolcall = agent("toolcall");
        assert_eq!(toolcall["max_steps"], 30, "{toolcall}");
        assert_eq!(toolcall["max_steps_source"], "strategy");
        let manus = agent("manus");
        assert_eq!(manus["system_prompt_source"], "agent", "{manus}");
        assert!(manus["system_prompt"]
            .as_str()
            .unwrap_or("")
            .starts_with("You are OpenManus"));
        let (status, plugins) = d.get("/v1/plugins");
        assert_eq!(status, 200);
        assert!(plugins["plugins"]
            .as_array()
            .expect("plugins")
            .iter()
            .any(|p| p["name"] == "echo" && p["kind"] == "tool" && p["contract"] == "0.2.4"));
    });
}

/// The bundled `react` agent, with no `[agents]` table in the file: listed
/// with the `react` strategy's prompt and step limit, and runnable once its
/// plugins are in the folder, sending no `tools` parameter and the tools in
/// its system prompt instead.
#[tokio::test(flavor = "multi_thread")]
async fn the_bundled_react_agent_is_listed_and_runs_with_no_agents_configured() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "what is 6 times 7?",
        [Reply::text("Thought: I know this.\nFinal Answer: 42")],
    );
    let tools = ["python_execute", "str_replace_editor", "bash", "terminate"];
    let mut files: Vec<(String, &str)> = vec![("react.wasm".into(), "react")];
    files.extend(tools.iter().map(|t| (format!("{t}.wasm"), *t)));
    let files: Vec<(&str, &str)> = files.iter().map(|(f, c)| (f.as_str(), *c)).collect();
    let d = tokio::task::block_in_place(|| Daemon::start_with_plugins(&llm, &files, ""));
    tokio::task::block_in_place(|| {
        let (status, agents) = d.get("/v1/agents");
        assert_eq!(status, 200, "{agents}");
        let react = agents["agents"]
            .as_array()
            .and_then(|a| a.iter().find(|a| a["name"] == "react"))
            .cloned()
            .unwrap_or_default();
        assert_eq!(react["strategy"], "react", "{react}");
        assert_eq!(react["tools"], serde_json::json!(tools), "{react}");
        assert_eq!(react["missing_plugins"], serde_json::json!([]), "{react}");
        assert_eq!(react["system_prompt_source"], "strategy", "{react}");
        assert!(
            react["system_prompt"]
                .as_str()
                .unwrap_or("")
                .starts_with("You are an agent that solves the user's task step by step."),
            "{react}"
        );
        assert_eq!(
            (&react["max_steps"], &react["max_steps_source"]),
            (&serde_json::json!(20), &serde_json::json!("strategy")),
            "{react}"
        );

        let id = d.create_run("react", "what is 6 times 7?");
        let record = d.wait_run(&id, Duration::from_secs(30));
        assert_eq!(record["outcome"], "finished", "{record}");
        assert_eq!(record["result"], "Step 1: 42", "{record}");
        let request = &llm.requests()[0];
        assert!(request.get("tools").is_none(), "{request}");
        let system = request["messages"][0]["content"].as_str().unwrap_or("");
        for tool in tools {
            assert!(
                system.contains(&format!("### {tool}\n")),
                "{tool} in {system}"
            );
        }
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn two_clients_follow_one_run_and_a_late_one_sees_it_all() {
    let (llm, d) = daemon("").await;
    let slow = |r: Reply| Reply::Delayed(Duration::from_millis(400), Box::new(r));
    llm.push_for(
        "follow me",
        [
            slow(Reply::call("echo", r#"{"text":"one"}"#)),
            slow(Reply::call("echo", r#"{"text":"two"}"#)),
            slow(Reply::terminate()),
        ],
    );
    tokio::task::block_in_place(|| {
        let id = d.create_run("echoer", "follow me");
        let socket = d.socket.clone();
        let path = format!("/v1/runs/{id}/events");
        let first = {
            let (socket, path) = (socket.clone(), path.clone());
            std::thread::spawn(move || raw(&socket, "GET", &path, None))
        };
        // The second attaches once the run is well under way.
        std::thread::sleep(Duration::from_millis(700));
        let second = std::thread::spawn(move || raw(&socket, "GET", &path, None));
        let (s1, b1) = first.join().expect("join").expect("first follower");
        let (s2, b2) = second.join().expect("join").expect("second follower");
        assert_eq!((s1, s2), (200, 200));
        let e1 = common::daemon::ndjson(&b1);
        let e2 = common::daemon::ndjson(&b2);
        assert_eq!(e1, e2, "both followers see the same events");
        assert_eq!(e1[0]["type"], "run_started");
        assert_eq!(e1.last().expect("events")["type"], "run_ended");
        // After the end the history serves the same events.
        assert_eq!(d.events(&id), e1);
        // follow=false returns at once with what exists.
        let (status, body) = raw(
            &d.socket,
            "GET",
            &format!("/v1/runs/{id}/events?follow=false"),
            None,
        )
        .expect("events");
        assert_eq!(status, 200);
        assert_eq!(common::daemon::ndjson(&body), e1);
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_beyond_the_limit_wait_queued_and_cancel_works_in_the_queue() {
    let (llm, d) = daemon("max_concurrent_runs = 1").await;
    // Long enough that the two POSTs and the GET below come before the
    // first run ends even on a loaded CI machine (1.5 s once was not).
    llm.push_for(
        "first",
        [Reply::Delayed(
            Duration::from_secs(6),
            Box::new(Reply::terminate()),
        )],
    );
    llm.push_for("second", [Reply::terminate()]);
    llm.push_for("third", [Reply::terminate()]);
    tokio::task::block_in_place(|| {
        let first = d.create_run("echoer", "first");
        let second = d.create_run("echoer", "second");
        let third = d.create_run("echoer", "third");
        let (_, v) = d.get(&format!("/v1/runs/{second}"));
        assert_eq!(v["state"], "queued", "{v}");
        let (_, st) = d.get("/v1/status");
        assert_eq!(st["runs_queued"], 2, "{st}");
        assert_eq!(st["runs_active"], 1, "{st}");

        let (status, v) = d.post(&format!("/v1/runs/{third}/cancel"), "");
        assert_eq!(status, 202, "{v}");
        let third = d.wait_run(&third, Duration::from_secs(10));
        assert_eq!(third["outcome"], "cancelled");
        assert_eq!(third["steps"], 0);

        assert_eq!(
            d.wait_run(&first, Duration::from_secs(30))["outcome"],
            "finished"
        );
        let second = d.wait_run(&second, Duration::from_secs(30));
        assert_eq!(second["outcome"], "finished");
        assert!(second["started_at_ms"].as_i64() > Some(0));

        // Cancelling a run that has ended is a conflict.
        let (status, v) = d.post(&format!("/v1/runs/{first}/cancel"), "");
        assert_eq!(status, 409, "{v}");
        assert_eq!(v["error"]["code"], "conflict");
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_requests_get_json_errors_and_the_daemon_keeps_serving() {
    let (llm, d) = daemon("max_request_bytes = 4096").await;
    llm.push_for("still fine", [Reply::terminate()]);
    tokio::task::block_in_place(|| {
        let check = |(status, v): (u16, Value), want_status: u16, want_code: &str| {
            assert_eq!(status, want_status, "{v}");
            assert_eq!(v["error"]["code"], want_code, "{v}");
            assert!(!v["error"]["message"].as_str().unwrap_or("").is_empty());
        };
        check(d.post("/v1/runs", "{not json"), 400, "bad_request");
        check(
            d.post("/v1/runs", r#"{"agent": "echoer"}"#),
            400,
            "bad_request",
        );
        check(
            d.post(
                "/v1/runs",
                r#"{"agent": "echoer", "request": "x", "typo": 1}"#,
            ),
            400,
            "bad_request",
        );
        check(
            d.post("/v1/runs", r#"{"agent": "nobody", "request": "x"}"#),
            404,
            "unknown_agent",
        );
        let huge = format!(
            r#"{{"agent": "echoer", "request": "{}"}}"#,
            "x".repeat(10_000)
        );
        check(d.post("/v1/runs", &huge), 413, "payload_too_large");
        check(d.get("/v1/nothing/here"), 404, "not_found");
        check(d.get("/v1/runs/0123456789abcdef"), 404, "not_found");
        check(d.get("/v1/runs/0123456789abcdef/events"), 404, "not_found");
        check(
            d.post("/v1/runs/0123456789abcdef/cancel", ""),
            404,
            "not_found",
        );
        check(
            request(&d.socket, "DELETE", "/v1/status", None),
            405,
            "method_not_allowed",
        );
        check(d.get("/v1/runs?limit=abc"), 400, "bad_request");

        let id = d.create_run("echoer", "still fine");
        assert_eq!(
            d.wait_run(&id, Duration::from_secs(30))["outcome"],
            "finished"
        );
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_are_listed_newest_first_page_by_page() {
    let (llm, d) = daemon("").await;
    llm.set_fallback(Reply::terminate());
    tokio::task::block_in_place(|| {
        let ids: Vec<String> = (0..5)
            .map(|i| d.create_run("echoer", &format!("run {i}")))
            .collect();
        for id in &ids {
            d.wait_run(id, Duration::from_secs(30));
        }
        let (status, page1) = d.get("/v1/runs?limit=3");
        assert_eq!(status, 200);
        let got: Vec<_> = page1["runs"]
            .as_array()
            .expect("runs")
            .iter()
            .map(|r| r["id"].as_str().unwrap_or("").to_string())
            .collect();
        assert_eq!(got, vec![ids[4].clone(), ids[3].clone(), ids[2].clone()]);
        let before = page1["next_before"].as_i64().expect("next page");
        let (_, page2) = d.get(&format!("/v1/runs?limit=3&before={before}"));
        let got: Vec<_> = page2["runs"]
            .as_array()
            .expect("runs")
            .iter()
            .map(|r| r["id"].as_str().unwrap_or("").to_string())
            .collect();
        assert_eq!(got, vec![ids[1].clone(), ids[0].clone()]);
        assert!(page2.get("next_before").is_none(), "{page2}");
    });
}

/// Needs root to act as another user.
#[tokio::test(flavor = "multi_thread")]
async fn a_user_who_is_not_allowed_gets_403() {
    let (_llm, d) = daemon("").await;
    tokio::task::block_in_place(|| {
        use std::os::unix::process::CommandExt;
        d.open_socket_to_all();
        let client = d.client_for_all();
        let out = std::process::Command::new(&client)
            .args(["status", "--json", "--socket"])
            .arg(&d.socket)
            .uid(65534)
            .gid(65534)
            .env_remove("AGENTD_CONFIG")
            .output()
            .expect("run the client as nobody");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains("uid 65534 may not use this socket"),
            "{stderr}"
        );
        // Root (our own user) is still served.
        assert_eq!(d.get("/v1/status").0, 200);
    });
}

/// The daemon trims its heap after runs end (`daemon::heap_trim`), and
/// not before any has: the trim's debug line is the witness.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[tokio::test(flavor = "multi_thread")]
async fn the_heap_is_trimmed_after_a_run_ends() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for("then trim", [Reply::terminate()]);
    tokio::task::block_in_place(|| {
        let mut d = Daemon::unstarted(&llm, AGENTS);
        d.spawn(&[("AGENTD_LOG", "info,agentd::daemon::heap_trim=debug")]);
        std::thread::sleep(Duration::from_millis(1500));
        assert!(
            !d.log_text().contains("heap trimmed"),
            "no run has ended yet: {}",
            d.log_text()
        );
        let id = d.create_run("echoer", "then trim");
        let run = d.wait_run(&id, Duration::from_secs(60));
        assert_eq!(run["outcome"], "finished", "{run}");
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        while !d.log_text().contains("heap trimmed") {
            assert!(
                std::time::Instant::now() < deadline,
                "no trim after the run's end: {}",
                d.log_text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    });
}
