//! `GET /metrics` (issue 17 §1): a real daemon with the fake LLM runs a
//! few runs, then its Prometheus exposition is read with a text-format
//! parser (not by substring) and each series is checked for its labels and
//! counts; and `[daemon] metrics_listen` serves `/metrics` over TCP and
//! nothing else.

use crate::common;

use std::collections::BTreeMap;
use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use agentd::testkit::{FakeLlm, Reply};
use common::daemon::{raw, Daemon, DAEMON_PLUGINS};
use prometheus_parse::{Sample, Scrape, Value};

const AGENTS: &str =
    "\n[agents.echoer]\nstrategy = \"toolcall\"\ntools = [\"echo\", \"terminate\"]\nmax_steps = 5\n";

/// Prompt tokens the fake LLM reports on each answer (it always reports 5
/// completion tokens).
const PROMPT_TOKENS: u64 = 37;
const COMPLETION_TOKENS: u64 = 5;

fn scrape_text(text: &str) -> Scrape {
    Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("a valid exposition")
}

fn scrape(d: &Daemon) -> Scrape {
    let (status, body) = raw(&d.socket, "GET", "/metrics", None).expect("GET /metrics");
    let text = String::from_utf8(body).expect("utf-8");
    assert_eq!(status, 200, "{text}");
    scrape_text(&text)
}

/// The samples of `metric` whose labels include every pair of `labels`.
fn find<'a>(s: &'a Scrape, metric: &str, labels: &[(&str, &str)]) -> Vec<&'a Sample> {
    s.samples
        .iter()
        .filter(|x| x.metric == metric && labels.iter().all(|(k, v)| x.labels.get(k) == Some(v)))
        .collect()
}

/// The value of the one counter or gauge `metric` with exactly `labels`.
fn value(s: &Scrape, metric: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<_> = find(s, metric, labels)
        .into_iter()
        .filter(|x| label_count(x) == labels.len())
        .collect();
    assert_eq!(found.len(), 1, "{metric} {labels:?}: {found:?}");
    match found[0].value {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => v,
        ref other => panic!("{metric} is not a single value: {other:?}"),
    }
}

fn label_count(x: &Sample) -> usize {
    // `Labels` derefs to its map.
    x.labels.len()
}

/// `(count, sum, bucket bounds)` of the histogram `metric` with exactly
/// `labels` (the bounds without `+Inf`).
fn histogram(s: &Scrape, metric: &str, labels: &[(&str, &str)]) -> (f64, f64, Vec<f64>) {
    let count = value(s, &format!("{metric}_count"), labels);
    let sum = value(s, &format!("{metric}_sum"), labels);
    let found: Vec<_> = find(s, metric, labels)
        .into_iter()
        .filter(|x| label_count(x) == labels.len())
        .collect();
    assert_eq!(found.len(), 1, "{metric} {labels:?}: {found:?}");
    let Value::Histogram(buckets) = &found[0].value else {
        panic!("{metric} is not a histogram: {:?}", found[0].value);
    };
    let inf = buckets
        .iter()
        .find(|b| b.less_than.is_infinite())
        .expect("+Inf bucket");
    assert_eq!(
        inf.count, count,
        "{metric}: the +Inf bucket holds every sample"
    );
    let bounds = buckets
        .iter()
        .map(|b| b.less_than)
        .filter(|b| b.is_finite())
        .collect();
    (count, sum, bounds)
}

async fn daemon(extra: &str) -> (FakeLlm, Daemon) {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.set_prompt_tokens(PROMPT_TOKENS);
    let extra = format!("{extra}\n{AGENTS}");
    let d = tokio::task::block_in_place(|| Daemon::start(&llm, &extra));
    (llm, d)
}

fn run(d: &Daemon, request: &str) -> serde_json::Value {
    let id = d.create_run("echoer", request);
    d.wait_run(&id, Duration::from_secs(60))
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_count_runs_steps_tokens_tools_and_llm_errors() {
    let (llm, d) = daemon("").await;
    // Finishes in 3 steps: an echo, an echo whose arguments the tool
    // refuses (a tool error), then terminate.
    llm.push_for(
        "echo twice",
        [
            Reply::call("echo", r#"{"text":"hi"}"#),
            Reply::call("echo", "{}"),
            Reply::terminate(),
        ],
    );
    // A 500 (retried), then a 400 (not retried): the LLM call fails and
    // the run ends `error` at its first step.
    llm.push_for(
        "meet a broken model",
        [
            Reply::error(500, "overloaded"),
            Reply::error(400, "bad request"),
        ],
    );
    tokio::task::block_in_place(|| {
        let finished = run(&d, "echo twice");
        assert_eq!(finished["outcome"], "finished", "{finished}");
        assert_eq!(finished["steps"], 3);
        let failed = run(&d, "meet a broken model");
        assert_eq!(failed["outcome"], "error", "{failed}");

        let s = scrape(&d);
        let agent = ("agent", "echoer");

        // Runs.
        assert_eq!(value(&s, "agentd_runs_created_total", &[agent]), 2.0);
        for outcome in ["finished", "error"] {
            assert_eq!(
                value(
                    &s,
                    "agentd_runs_ended_total",
                    &[agent, ("outcome", outcome)]
                ),
                1.0,
                "{outcome}"
            );
        }
        assert!(find(&s, "agentd_runs_ended_total", &[("outcome", "cancelled")]).is_empty());
        for gauge in [
            "agentd_runs_active",
            "agentd_runs_queued",
            "agentd_runs_waiting",
        ] {
            assert_eq!(value(&s, gauge, &[]), 0.0, "{gauge}");
        }

        // Steps: three of the first run, the failed one of the second.
        let (steps, _, bounds) = histogram(&s, "agentd_step_duration_seconds", &[agent]);
        assert_eq!(steps, 4.0);
        assert!(!bounds.is_empty());
        let (plugin_steps, plugin_secs, _) = histogram(&s, "agentd_step_plugin_seconds", &[agent]);
        assert_eq!(plugin_steps, 4.0);
        assert!(plugin_secs > 0.0, "plugin code ran: {plugin_secs}");

        // Tokens: the three answers of the first run, as the fake LLM
        // reported them, under the GenAI names and buckets.
        let genai = |kind| {
            [
                ("gen_ai_token_type", kind),
                ("gen_ai_operation_name", "chat"),
                ("gen_ai_request_model", "fake"),
                agent,
            ]
        };
        let (n, sum, bounds) = histogram(&s, "gen_ai_client_token_usage", &genai("input"));
        assert_eq!((n, sum), (3.0, (3 * PROMPT_TOKENS) as f64));
        assert_eq!(
            bounds,
            [
                1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0,
                4194304.0, 16777216.0, 67108864.0
            ]
        );
        let (n, sum, _) = histogram(&s, "gen_ai_client_token_usage", &genai("output"));
        assert_eq!((n, sum), (3.0, (3 * COMPLETION_TOKENS) as f64));

        // LLM operations: three that succeeded, one that failed with the
        // 400 it ended on; four HTTP attempts; one error of each class.
        let op = [
            ("gen_ai_operation_name", "chat"),
            ("gen_ai_request_model", "fake"),
        ];
        let (ok, _, bounds) = histogram(&s, "gen_ai_client_operation_duration_seconds", &op);
        assert_eq!(ok, 3.0);
        assert_eq!(
            bounds,
            [
                0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96,
                81.92
            ]
        );
        let failed_op = [op[0], op[1], ("error_type", "400")];
        let (failed, _, _) = histogram(&s, "gen_ai_client_operation_duration_seconds", &failed_op);
        assert_eq!(failed, 1.0);
        let model = ("model", "fake");
        let (attempts, _, _) = histogram(&s, "agentd_llm_request_duration_seconds", &[model]);
        assert_eq!(attempts, 5.0);
        for class in ["5xx", "4xx"] {
            assert_eq!(
                value(
                    &s,
                    "agentd_llm_request_errors_total",
                    &[model, ("status_class", class)]
                ),
                1.0,
                "{class}"
            );
        }
        assert!(find(
            &s,
            "agentd_llm_request_errors_total",
            &[("status_class", "timeout")]
        )
        .is_empty());

        // Tools: two calls of echo, one refused by the tool; terminate's one.
        let (echo_calls, _, _) =
            histogram(&s, "agentd_tool_call_duration_seconds", &[("tool", "echo")]);
        assert_eq!(echo_calls, 2.0);
        assert_eq!(
            value(&s, "agentd_tool_call_errors_total", &[("tool", "echo")]),
            1.0
        );
        let (terminate_calls, _, _) = histogram(
            &s,
            "agentd_tool_call_duration_seconds",
            &[("tool", "terminate")],
        );
        assert_eq!(terminate_calls, 1.0);
        assert_eq!(
            value(
                &s,
                "agentd_tool_call_errors_total",
                &[("tool", "terminate")]
            ),
            0.0
        );

        // Plugins: every file of the folder loaded, each through the
        // compile cache (found there or compiled).
        let loads = value(&s, "agentd_plugin_loads_total", &[("result", "ok")]);
        assert_eq!(loads, DAEMON_PLUGINS.len() as f64);
        let hits = value(&s, "agentd_plugin_compile_cache_hits_total", &[]);
        let misses = value(&s, "agentd_plugin_compile_cache_misses_total", &[]);
        assert_eq!(hits + misses, loads);
        assert_eq!(value(&s, "agentd_plugin_rescan_errors_total", &[]), 0.0);

        // The history: its queue is drained (every run ended and was
        // flushed), and each run's creation and ending were committed.
        assert_eq!(value(&s, "agentd_history_queue_depth", &[]), 0.0);
        let (commits, _, _) = histogram(&s, "agentd_history_commit_duration_seconds", &[]);
        assert!(commits >= 4.0, "{commits} commits");

        // Every series is documented and named for Prometheus.
        for sample in &s.samples {
            let name = sample
                .metric
                .trim_end_matches("_count")
                .trim_end_matches("_sum");
            assert!(
                name.starts_with("agentd_") || name.starts_with("gen_ai_client_"),
                "{name}"
            );
            assert!(s.docs.contains_key(name), "no HELP for {name}");
            for (label, v) in sample.labels.iter() {
                assert!(
                    label.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
                    "label {label} of {name}"
                );
                // Bounded labels: never a run id.
                assert_ne!(v, finished["id"].as_str().unwrap_or("-"), "{name}");
            }
        }
    });
}

/// A free port on loopback (bound, then released for the daemon).
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// One HTTP/1.1 request over TCP: the status and the body.
fn http(port: u16, method: &str, path: &str) -> (u16, BTreeMap<String, String>, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
    )
    .expect("send");
    let mut reader = std::io::BufReader::new(stream);
    let mut status = String::new();
    reader.read_line(&mut status).expect("status line");
    let code = status
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status:?}"));
    let mut headers = BTreeMap::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).expect("header");
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let mut body = Vec::new();
    reader.read_to_end(&mut body).expect("body");
    let body = String::from_utf8_lossy(&body).to_string();
    // axum sends a length, not chunks, for a complete body.
    assert!(
        !headers.contains_key("transfer-encoding"),
        "chunked: {headers:?}"
    );
    (code, headers, body)
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_listen_serves_metrics_and_nothing_else() {
    let port = free_port();
    let (llm, d) = daemon(&format!("metrics_listen = \"127.0.0.1:{port}\"")).await;
    llm.push_for("hello", [Reply::terminate()]);
    tokio::task::block_in_place(|| {
        let record = run(&d, "hello");
        assert_eq!(record["outcome"], "finished", "{record}");

        let (status, headers, body) = http(port, "GET", "/metrics");
        assert_eq!(status, 200, "{body}");
        assert!(
            headers
                .get("content-type")
                .is_some_and(|t| t.starts_with("text/plain; version=0.0.4")),
            "{headers:?}"
        );
        let s = scrape_text(&body);
        assert_eq!(
            value(&s, "agentd_runs_created_total", &[("agent", "echoer")]),
            1.0
        );
        // The socket's /metrics tells the same.
        let from_socket = scrape(&d);
        assert_eq!(
            value(
                &from_socket,
                "agentd_runs_created_total",
                &[("agent", "echoer")]
            ),
            1.0
        );

        // Nothing of the API is served there, and nothing is written.
        for path in ["/v1/status", "/v1/runs", "/", "/mcp"] {
            let (status, _, body) = http(port, "GET", path);
            assert_eq!(status, 404, "{path}: {body}");
        }
        let (status, _, _) = http(port, "POST", "/metrics");
        assert_eq!(status, 405);
        let (status, _, _) = http(port, "POST", "/v1/runs");
        assert_eq!(status, 404);
    });
}

/// The run gauges with runs in each state: one running (its model slow),
/// one waiting for a person (active, and waiting), one queued behind them
/// (`max_concurrent_runs = 2`); and back to 0 once they end.
#[tokio::test(flavor = "multi_thread")]
async fn the_run_gauges_count_running_waiting_and_queued_runs() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "ask",
        [
            Reply::call("ask_human", r#"{"inquire":"Which branch?"}"#),
            Reply::terminate(),
        ],
    );
    llm.push_for(
        "think slowly",
        [Reply::Delayed(
            Duration::from_secs(300),
            Box::new(Reply::terminate()),
        )],
    );
    llm.push_for("wait your turn", [Reply::terminate()]);
    let agents = "max_concurrent_runs = 2\n\
        \n[agents.asker]\nstrategy = \"toolcall\"\ntools = [\"ask_human\", \"terminate\"]\nmax_steps = 4\n\
        \n[agents.echoer]\nstrategy = \"toolcall\"\ntools = [\"echo\", \"terminate\"]\nmax_steps = 4\n";
    let plugins = [
        ("toolcall.wasm", "toolcall"),
        ("terminate.wasm", "terminate"),
        ("echo.wasm", "echo"),
        ("ask_human.wasm", "ask_human"),
    ];
    tokio::task::block_in_place(|| {
        let d = Daemon::start_with_plugins(&llm, &plugins, agents);
        let asker = d.create_run("asker", "ask");
        d.wait_state(&asker, "waiting");
        let slow = d.create_run("echoer", "think slowly");
        d.wait_state(&slow, "running");
        let queued = d.create_run("echoer", "wait your turn");
        d.wait_state(&queued, "queued");

        let s = scrape(&d);
        assert_eq!(
            value(&s, "agentd_runs_active", &[]),
            2.0,
            "running and waiting"
        );
        assert_eq!(value(&s, "agentd_runs_waiting", &[]), 1.0);
        assert_eq!(value(&s, "agentd_runs_queued", &[]), 1.0);

        for id in [&asker, &slow, &queued] {
            let (status, v) = d.post(&format!("/v1/runs/{id}/cancel"), "");
            assert!(status == 200 || status == 202, "{status} {v}");
        }
        for id in [&asker, &slow, &queued] {
            d.wait_run(id, Duration::from_secs(60));
        }
        let s = scrape(&d);
        for gauge in [
            "agentd_runs_active",
            "agentd_runs_queued",
            "agentd_runs_waiting",
        ] {
            assert_eq!(value(&s, gauge, &[]), 0.0, "{gauge}");
        }
    });
}

/// The TCP listener keeps the socket's limits: at most 8 connections (a
/// 9th is closed unanswered), and idle ones are closed after
/// `header_timeout`, so whoever reaches the port cannot hold the daemon's
/// descriptors.
#[tokio::test(flavor = "multi_thread")]
async fn metrics_listen_caps_its_connections_and_closes_idle_ones() {
    let port = free_port();
    let (_llm, _d) = daemon(&format!(
        "metrics_listen = \"127.0.0.1:{port}\"\nheader_timeout = 3"
    ))
    .await;
    tokio::task::block_in_place(|| {
        let idle: Vec<TcpStream> = (0..8)
            .map(|_| TcpStream::connect(("127.0.0.1", port)).expect("connect"))
            .collect();
        // The ninth: closed at accept, before it can be answered.
        let mut ninth = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        ninth
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let _ = write!(
            ninth,
            "GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        );
        let mut answer = Vec::new();
        let _ = ninth.read_to_end(&mut answer);
        assert!(
            answer.is_empty(),
            "a ninth connection was served: {}",
            String::from_utf8_lossy(&answer)
        );
        // The idle eight are closed by the header timeout, not held.
        for mut conn in idle {
            conn.set_read_timeout(Some(Duration::from_secs(20)))
                .expect("timeout");
            let mut buf = [0u8; 64];
            match conn.read(&mut buf) {
                Ok(0) => {}
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
                other => panic!("an idle connection was not closed: {other:?}"),
            }
        }
        let (status, _, body) = http(port, "GET", "/metrics");
        assert_eq!(status, 200, "{body}");
    });
}

#[test]
fn a_bad_metrics_listen_stops_start_up_naming_the_key() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let llm = runtime.block_on(FakeLlm::start()).expect("fake llm");
    let d = Daemon::unstarted(&llm, "metrics_listen = \"localhost\"");
    let out = d.command().output().expect("agentd serve");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("[daemon] metrics_listen"), "{stderr}");
    assert!(stderr.contains("127.0.0.1:9464"), "{stderr}");
}

const SHELL_AGENT: &str =
    "\n[agents.shell]\nstrategy = \"toolcall\"\ntools = [\"bash\", \"terminate\"]\nmax_steps = 5\n";

/// Needs a Docker engine (scripts/ensure-docker.sh): a run's container and
/// the warm pool's, timed and counted.
#[tokio::test(flavor = "multi_thread")]
async fn metrics_time_sandboxes_and_show_the_pool() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "say hi in a shell",
        [
            Reply::call("bash", r#"{"command":"echo hi"}"#),
            Reply::terminate(),
        ],
    );
    tokio::task::block_in_place(|| {
        let mut d = Daemon::unstarted(&llm, SHELL_AGENT);
        // A pool of one instead of the test default (no pool).
        let text = std::fs::read_to_string(&d.config).expect("config");
        let text = text.replace(common::daemon::POOL_OFF, "pool_size = 1");
        std::fs::write(&d.config, text).expect("write config");
        d.spawn(&[]);

        let id = d.create_run("shell", "say hi in a shell");
        let record = d.wait_run(&id, Duration::from_secs(120));
        assert_eq!(record["outcome"], "finished", "{record}");

        let (status, v) = d.get("/v1/status");
        assert_eq!(status, 200, "{v}");
        let engine = v["engines"][0]["name"]
            .as_str()
            .expect("an engine name")
            .to_string();

        let s = scrape(&d);
        // The pool's container (taken by the run, or the run's own if it
        // came first) was made; the run's was removed when it ended.
        let (created, _, _) = histogram(
            &s,
            "agentd_sandbox_create_duration_seconds",
            &[("result", "ok")],
        );
        assert!(created >= 1.0, "{created}");
        let (removed, _, _) = histogram(
            &s,
            "agentd_sandbox_remove_duration_seconds",
            &[("result", "ok")],
        );
        assert!(removed >= 1.0, "{removed}");
        assert!(find(
            &s,
            "agentd_sandbox_create_duration_seconds",
            &[("result", "error")]
        )
        .is_empty());

        let e = ("engine", engine.as_str());
        assert_eq!(value(&s, "agentd_sandbox_pool_target", &[e]), 1.0);
        for state in ["ready", "creating"] {
            let n = value(&s, "agentd_sandbox_pool_containers", &[e, ("state", state)]);
            assert!((0.0..=1.0).contains(&n), "{state}: {n}");
        }
        let held = value(&s, "agentd_sandbox_engine_containers", &[e]);
        assert!((0.0..=1.0).contains(&held), "{held}");
        assert_eq!(
            value(&s, "agentd_tool_call_errors_total", &[("tool", "bash")]),
            0.0
        );
    });
}

/// Needs root to act as another user: the socket's `/metrics` is behind
/// the peer check like every route (curl run as `nobody` gets 403).
#[tokio::test(flavor = "multi_thread")]
async fn the_sockets_metrics_are_behind_the_peer_check() {
    let (_llm, d) = daemon("").await;
    tokio::task::block_in_place(|| {
        use std::os::unix::process::CommandExt;
        d.open_socket_to_all();
        let curl = |uid: u32| {
            let out = std::process::Command::new("curl")
                .args([
                    "-s",
                    "-o",
                    "/dev/null",
                    "-w",
                    "%{http_code}",
                    "--unix-socket",
                ])
                .arg(&d.socket)
                .arg("http://agentd/metrics")
                .uid(uid)
                .gid(uid)
                .output()
                .expect("curl (Debian's curl package)");
            String::from_utf8_lossy(&out.stdout).to_string()
        };
        assert_eq!(curl(65534), "403");
        assert_eq!(curl(0), "200");
    });
}
