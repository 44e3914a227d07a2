//! agentd as an MCP server: the real `agentd serve`, spawned, driven by an
//! rmcp client over its Unix socket (`/mcp`) and through `agentd mcp serve`
//! (the stdio bridge, spawned as a child), with the scripted fake LLM
//! behind its agents. The sandbox tests need Docker
//! (scripts/ensure-docker.sh) and the images (scripts/build-images.sh);
//! the 403 test needs root, to run a client as `nobody`.

use crate::common;

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentd::testkit::{FakeLlm, Reply};
use common::daemon::{Daemon, EventStream};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, JsonObject,
    ProgressNotificationParam,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, UnixSocketHttpClient};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const PATIENCE: Duration = Duration::from_secs(60);

/// `chat` calls `echo` once, then `terminate`: two steps. `slow` waits on
/// its model. Both use no sandbox.
const AGENTS: &str =
    "\n[agents.chat]\nstrategy = \"toolcall\"\ntools = [\"echo\", \"terminate\"]\nmax_steps = 5\n\
     \n[agents.slow]\nstrategy = \"toolcall\"\ntools = [\"terminate\"]\nmax_steps = 3\n";

/// What the client was sent besides answers, with when it arrived.
#[derive(Clone, Default)]
struct Recorder {
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    list_changed: Arc<Mutex<Vec<i64>>>,
}

impl ClientHandler for Recorder {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().expect("lock").push(params);
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.list_changed
            .lock()
            .expect("lock")
            .push(agentd::time::now_ms());
    }
}

type Client = RunningService<RoleClient, Recorder>;

/// An rmcp client of `/mcp` on the daemon's socket.
async fn over_socket(socket: &Path) -> Client {
    let uri = "http://localhost/mcp";
    let http = UnixSocketHttpClient::new(socket.to_str().expect("utf-8 socket path"), uri);
    let transport = StreamableHttpClientTransport::with_client(
        http,
        StreamableHttpClientTransportConfig::with_uri(uri),
    );
    Recorder::default()
        .serve(transport)
        .await
        .expect("MCP handshake over the socket")
}

/// `agentd mcp serve --socket SOCKET`, spawned with `env`, its stdin and
/// stdout piped, its log on the test's stderr.
fn spawn_bridge(socket: &Path, env: &[(&str, &str)]) -> tokio::process::Child {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_agentd"))
        .args(["mcp", "serve", "--socket"])
        .arg(socket)
        .env_remove("AGENTD_CONFIG")
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn agentd mcp serve")
}

/// `agentd mcp serve --socket SOCKET`, spawned, and an rmcp client on its
/// stdin and stdout.
async fn over_bridge(socket: &Path) -> (Client, tokio::process::Child) {
    let mut child = spawn_bridge(socket, &[]);
    let stdout = child.stdout.take().expect("stdout");
    let stdin = child.stdin.take().expect("stdin");
    let client = Recorder::default()
        .serve(AsyncRwTransport::new_client(stdout, stdin))
        .await
        .expect("MCP handshake through agentd mcp serve");
    (client, child)
}

fn names(tools: &[rmcp::model::Tool]) -> Vec<String> {
    let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    names
}

fn args(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => panic!("arguments must be an object"),
    }
}

async fn call(client: &Client, tool: &str, arguments: Value) -> CallToolResult {
    client
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args(arguments)))
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Polls `probe` until it returns `Some`, for at most `PATIENCE`.
async fn eventually<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn daemon(llm: &FakeLlm, extra: &str) -> Daemon {
    tokio::task::block_in_place(|| Daemon::start(llm, &format!("{extra}{AGENTS}")))
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

#[tokio::test(flavor = "multi_thread")]
async fn over_the_socket_run_agent_reports_each_step_and_returns_the_result() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "say hi",
        [
            Reply::call("echo", r#"{"text":"hi there"}"#),
            Reply::terminate(),
        ],
    );
    let d = daemon(&llm, "");
    let client = over_socket(&d.socket).await;
    let tools = client.list_all_tools().await.expect("tools/list");
    assert_eq!(
        names(&tools),
        [
            "cancel_run",
            "get_run",
            "list_agents",
            "run_agent",
            "start_run"
        ],
        "agentd's tools, and no plugin without expose_tools"
    );
    let agents = call(&client, "list_agents", json!({})).await;
    let listed = agents.structured_content.expect("structured");
    assert!(
        listed["agents"]
            .as_array()
            .expect("agents")
            .iter()
            .any(|a| a["name"] == "chat" && a["tools"] == json!(["echo", "terminate"])),
        "{listed}"
    );

    let result = call(
        &client,
        "run_agent",
        json!({"agent": "chat", "request": "say hi"}),
    )
    .await;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let record = result
        .structured_content
        .clone()
        .expect("structuredContent");
    assert_eq!(record["outcome"], "finished", "{record}");
    assert_eq!(record["steps"], 2, "{record}");
    assert_eq!(record["error"], Value::Null, "{record}");
    let id = record["run_id"].as_str().expect("run_id").to_string();
    assert!(text_of(&result).contains("Step 1"), "{}", text_of(&result));
    assert_eq!(text_of(&result), record["result"].as_str().expect("result"));
    // One progress notification per step, step / max_steps (each handled
    // in a task of its own by the client, so perhaps after the answer).
    let recorded = client.service().progress.clone();
    let mut progress = eventually("a progress notification per step", || {
        let got = recorded.lock().expect("lock").clone();
        (got.len() >= 2).then_some(got)
    })
    .await;
    progress.sort_by(|a, b| a.progress.total_cmp(&b.progress));
    let steps: Vec<(f64, Option<f64>)> = progress.iter().map(|p| (p.progress, p.total)).collect();
    assert_eq!(steps, [(1.0, Some(5.0)), (2.0, Some(5.0))], "{progress:?}");
    assert!(
        progress[0].message.as_deref().unwrap_or("").contains(&id),
        "{progress:?}"
    );
    // The same run as the API's.
    let (status, run) = tokio::task::block_in_place(|| d.get(&format!("/v1/runs/{id}")));
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["outcome"], "finished", "{run}");
    // start_run / get_run for longer work.
    llm.push_for("again", [Reply::terminate()]);
    let started = call(
        &client,
        "start_run",
        json!({"agent": "chat", "request": "again"}),
    )
    .await;
    let started = started.structured_content.expect("structured");
    let id = started["run_id"].as_str().expect("run_id").to_string();
    let ended = eventually_ended(&client, &id).await;
    assert_eq!(ended["outcome"], "finished", "{ended}");
    // An unknown agent is the tool's error, readable by the model.
    let unknown = call(
        &client,
        "run_agent",
        json!({"agent": "nope", "request": "x"}),
    )
    .await;
    assert_eq!(unknown.is_error, Some(true));
    assert!(
        text_of(&unknown).contains("unknown agent `nope`"),
        "{unknown:?}"
    );
    client.cancel().await.expect("close");
}

async fn eventually_ended(client: &Client, id: &str) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let got = call(client, "get_run", json!({"run_id": id})).await;
        let run = got.structured_content.expect("structured");
        if run["state"] == "ended" {
            return run;
        }
        assert!(Instant::now() < deadline, "run {id} never ended: {run}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs created over MCP are the connection's uid's: its share of the
/// queue counts them, and the refusal names it.
#[tokio::test(flavor = "multi_thread")]
async fn runs_started_over_mcp_count_against_the_callers_queue_share() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.set_fallback(Reply::Delayed(
        Duration::from_secs(30),
        Box::new(Reply::terminate()),
    ));
    let d = daemon(
        &llm,
        "max_concurrent_runs = 1\nmax_queued_runs = 8\nmax_queued_runs_per_user = 1\n",
    );
    let client = over_socket(&d.socket).await;
    let start = |request: &'static str| {
        call(
            &client,
            "start_run",
            json!({"agent": "slow", "request": request}),
        )
    };
    let first = start("one").await;
    assert_ne!(first.is_error, Some(true), "{first:?}");
    // The first holds the only slot once it runs; the second waits.
    let first_id = first.structured_content.expect("s")["run_id"]
        .as_str()
        .expect("id")
        .to_string();
    eventually("the first run to leave the queue", || {
        let (_, run) = tokio::task::block_in_place(|| d.get(&format!("/v1/runs/{first_id}")));
        (run["state"] == "running").then_some(())
    })
    .await;
    let second = start("two").await;
    assert_ne!(second.is_error, Some(true), "{second:?}");
    let third = start("three").await;
    assert_eq!(third.is_error, Some(true), "{third:?}");
    let text = text_of(&third);
    assert!(
        text.contains(&format!("uid {} already has 1 runs waiting", euid()))
            && text.contains("max_queued_runs_per_user"),
        "{text}"
    );
    client.cancel().await.expect("close");
}

/// `agentd mcp serve --socket SOCKET`, spawned, spoken to in raw lines of
/// JSON-RPC as a client that is not rmcp writes them.
struct RawBridge {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl RawBridge {
    fn spawn(socket: &Path, env: &[(&str, &str)]) -> RawBridge {
        let mut child = spawn_bridge(socket, env);
        let stdin = child.stdin.take().expect("stdin");
        let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        RawBridge {
            child,
            stdin,
            lines,
        }
    }

    /// Writes `text` (one or more lines) in one write.
    async fn write(&mut self, text: &str) {
        self.stdin.write_all(text.as_bytes()).await.expect("write");
    }

    async fn send(&mut self, v: Value) {
        self.write(&format!("{v}\n")).await;
    }

    async fn read(&mut self) -> Value {
        let line = tokio::time::timeout(PATIENCE, self.lines.next_line())
            .await
            .expect("an answer in time")
            .expect("read")
            .expect("a line");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON: {line}: {e}"))
    }

    /// Sends `initialize` and reads its answer.
    async fn initialize(&mut self, client: &str) -> Value {
        self.send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": client, "version": "1"}}}),
        )
        .await;
        let init = self.read().await;
        assert_eq!(init["id"], 1, "{init}");
        init
    }

    /// Closes stdin; the bridge must exit 0.
    async fn close(self) {
        let RawBridge {
            mut child, stdin, ..
        } = self;
        drop(stdin);
        let status = tokio::time::timeout(PATIENCE, child.wait())
            .await
            .expect("the bridge exits when stdin closes")
            .expect("wait");
        assert!(status.success(), "{status}");
    }
}

/// Claude Desktop's way: a command speaking newline-delimited JSON-RPC.
/// Without a progress token there is no progress; closing stdin ends the
/// bridge cleanly.
#[tokio::test(flavor = "multi_thread")]
async fn the_stdio_bridge_speaks_newline_delimited_json_rpc() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for("say hi", [Reply::terminate()]);
    let d = daemon(&llm, "");
    let mut bridge = RawBridge::spawn(&d.socket, &[]);
    let init = bridge.initialize("claude-ish").await;
    assert_eq!(init["result"]["serverInfo"]["name"], "agentd", "{init}");
    assert_eq!(
        init["result"]["capabilities"]["tools"]["listChanged"], true,
        "{init}"
    );
    bridge
        .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    bridge
        .send(
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "run_agent", "arguments": {"agent": "slow", "request": "say hi"}}}),
        )
        .await;
    let mut seen = Vec::new();
    let answer = loop {
        let message = bridge.read().await;
        if message["id"] == 2 {
            break message;
        }
        seen.push(message);
    };
    assert_eq!(
        answer["result"]["structuredContent"]["outcome"], "finished",
        "{answer}"
    );
    assert!(
        !seen.iter().any(|m| m["method"] == "notifications/progress"),
        "progress without a token: {seen:?}"
    );
    bridge.close().await;
}

/// A client that writes several lines at once (Claude Desktop sends
/// `notifications/initialized` and its first requests in one burst): the
/// bridge hands them to the daemon in the order they came. Spawned
/// unpolled, the sends raced, and a request that overtook the notification
/// was taken by rmcp's client worker for it: the worker quit ("expect
/// accepted or json, got Sse") and every request was answered "Transport
/// channel closed", the flake this test pins. The race was lost about one
/// session in thirty with many worker threads, so a hundred are run.
#[tokio::test(flavor = "multi_thread")]
async fn the_stdio_bridge_keeps_the_order_of_a_burst_of_lines() {
    let llm = FakeLlm::start().await.expect("fake llm");
    let d = daemon(&llm, "");
    for session in 0..100 {
        burst_through_the_bridge(&d.socket, session).await;
    }
}

/// One session through `agentd mcp serve`: the handshake's answer, then
/// the notification and twenty `tools/list` in one write, each answered.
async fn burst_through_the_bridge(socket: &Path, session: usize) {
    // Many worker threads on two cores: the sends spawned together run on
    // threads the kernel preempts, which is how load lost the race.
    let mut bridge = RawBridge::spawn(socket, &[("TOKIO_WORKER_THREADS", "16")]);
    bridge.initialize("bursty").await;
    let mut burst = format!(
        "{}\n",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    );
    const REQUESTS: i64 = 20;
    for id in 2..2 + REQUESTS {
        burst.push_str(&format!(
            "{}\n",
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"})
        ));
    }
    bridge.write(&burst).await;
    let mut answered = std::collections::BTreeSet::new();
    while answered.len() < REQUESTS as usize {
        let message = bridge.read().await;
        let Some(id) = message["id"].as_i64() else {
            continue;
        };
        assert!(
            message["error"].is_null(),
            "session {session}: request {id} failed: {message}"
        );
        let tools = message["result"]["tools"].as_array().expect("tools");
        assert!(tools.iter().any(|t| t["name"] == "run_agent"), "{message}");
        answered.insert(id);
    }
    assert_eq!(answered, (2..2 + REQUESTS).collect());
    bridge.close().await;
}

/// Cancelling `run_agent` (`notifications/cancelled`) cancels the run,
/// through the bridge.
#[tokio::test(flavor = "multi_thread")]
async fn cancelling_run_agent_through_the_bridge_cancels_the_run() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.set_fallback(Reply::Delayed(
        Duration::from_secs(300),
        Box::new(Reply::terminate()),
    ));
    let d = daemon(&llm, "");
    let (client, mut child) = over_bridge(&d.socket).await;
    assert_eq!(
        names(&client.list_all_tools().await.expect("tools/list")),
        [
            "cancel_run",
            "get_run",
            "list_agents",
            "run_agent",
            "start_run"
        ]
    );
    let handle = client
        .send_cancellable_request(
            ClientRequest::CallToolRequest(CallToolRequest::new(
                CallToolRequestParams::new("run_agent")
                    .with_arguments(args(json!({"agent": "slow", "request": "take your time"}))),
            )),
            PeerRequestOptions::no_options(),
        )
        .await
        .expect("send run_agent");
    // The first step's progress names the run.
    let progress = client.service().progress.clone();
    let message = eventually("the first step's progress", || {
        progress
            .lock()
            .expect("lock")
            .first()
            .and_then(|p| p.message.clone())
    })
    .await;
    let id = message
        .strip_prefix("run ")
        .and_then(|m| m.split(':').next())
        .unwrap_or_else(|| panic!("no run id in {message}"))
        .to_string();
    let (_, run) = tokio::task::block_in_place(|| d.get(&format!("/v1/runs/{id}")));
    assert_eq!(run["state"], "running", "{run}");
    handle
        .cancel(Some("changed my mind".into()))
        .await
        .expect("cancel");
    let record = tokio::task::block_in_place(|| d.wait_run(&id, Duration::from_secs(20)));
    assert_eq!(record["outcome"], "cancelled", "{record}");
    client.cancel().await.expect("close");
    let status = tokio::time::timeout(PATIENCE, child.wait())
        .await
        .expect("the bridge exits")
        .expect("wait");
    assert!(status.success(), "{status}");
}

/// With `expose_tools`, a plugin swap that changes the tool list reaches
/// every connected session (socket and bridge) within 100 ms; a swap to a
/// version with the same spec sends nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_swap_that_changes_the_tools_sends_list_changed_within_100_ms() {
    let llm = FakeLlm::start().await.expect("fake llm");
    let d = tokio::task::block_in_place(|| {
        Daemon::start_with_plugins(
            &llm,
            &[
                ("toolcall.wasm", "toolcall"),
                ("terminate.wasm", "terminate"),
                ("echo.wasm", "echo"),
                ("versioned.wasm", "versioned_v1"),
            ],
            &format!("\n[mcp_server]\nexpose_tools = true\n{AGENTS}"),
        )
    });
    let socket_client = over_socket(&d.socket).await;
    let (bridge_client, _child) = over_bridge(&d.socket).await;
    for client in [&socket_client, &bridge_client] {
        let tools = names(&client.list_all_tools().await.expect("tools/list"));
        assert!(
            tools.contains(&"echo".to_string()) && tools.contains(&"versioned".to_string()),
            "{tools:?}"
        );
    }
    // A plugin tool runs as in a run.
    let echoed = call(&socket_client, "echo", json!({"text": "ping"})).await;
    assert_eq!(text_of(&echoed), "ping", "{echoed:?}");
    // The sessions' standalone streams are open by now.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let built = |name: &str| {
        std::fs::read(common::built_plugins().join(format!("{name}.wasm"))).expect("built plugin")
    };
    let replace = |file: &str, bytes: &[u8]| {
        let temp = d.plugins.path().join(format!(".{file}.tmp"));
        std::fs::write(&temp, bytes).expect("write");
        std::fs::rename(&temp, d.plugins.path().join(file)).expect("rename");
    };
    let mut events = tokio::task::block_in_place(|| EventStream::open(&d.socket, "/v1/events"));

    // The same tool at another version: nothing a client could re-read.
    replace("versioned.wasm", &built("versioned_v2"));
    tokio::task::block_in_place(|| {
        events.wait_for(PATIENCE, |e| {
            e["type"] == "plugin_replaced" && e["plugin"] == "versioned"
        })
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    for client in [&socket_client, &bridge_client] {
        assert!(
            client
                .service()
                .list_changed
                .lock()
                .expect("lock")
                .is_empty(),
            "list_changed for a swap that changed no tool"
        );
    }

    // Another tool under echo's file: echo goes, fail_tool comes.
    replace("echo.wasm", &built("fail_tool"));
    let swapped =
        tokio::task::block_in_place(|| events.wait_for(PATIENCE, |e| e["type"] == "plugin_loaded"));
    let swapped_at = swapped["at_ms"].as_i64().expect("at_ms");
    for client in [&socket_client, &bridge_client] {
        let got = client.service().list_changed.clone();
        let at = eventually("list_changed", || {
            got.lock().expect("lock").first().copied()
        })
        .await;
        assert!(
            at - swapped_at < 100,
            "list_changed {} ms after the swap",
            at - swapped_at
        );
        let tools = names(&client.list_all_tools().await.expect("tools/list"));
        assert!(
            !tools.contains(&"echo".to_string()) && tools.contains(&"fail_tool".to_string()),
            "{tools:?}"
        );
    }
    socket_client.cancel().await.expect("close");
    bridge_client.cancel().await.expect("close");
}

/// The same peer check as `/v1`: `nobody`, not in `socket_group`, gets 403
/// from `/mcp`, and `agentd mcp serve` run as nobody says so and exits 1.
/// Needs root.
#[tokio::test(flavor = "multi_thread")]
async fn a_peer_without_rights_gets_403_from_mcp() {
    let llm = FakeLlm::start().await.expect("fake llm");
    let d = daemon(&llm, "");
    let client = tokio::task::block_in_place(|| {
        d.open_socket_to_all();
        d.client_for_all()
    });
    let mut child = tokio::process::Command::new(&client)
        .args(["mcp", "serve", "--socket"])
        .arg(&d.socket)
        .uid(65534)
        .gid(65534)
        .env_remove("AGENTD_CONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the bridge as nobody");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(
            format!(
                "{}\n",
                json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"}}})
            )
            .as_bytes(),
        )
        .await
        .expect("write initialize");
    let out = tokio::time::timeout(PATIENCE, child.wait_with_output())
        .await
        .expect("the bridge exits")
        .expect("output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("403") && stderr.contains("uid 65534 may not use this socket"),
        "{stderr}"
    );
    let answer: Value = serde_json::from_str(stdout.lines().next().unwrap_or(""))
        .unwrap_or_else(|e| panic!("no JSON-RPC answer on stdout ({e}): {stdout}"));
    assert_eq!(answer["id"], 1, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("403"),
        "{answer}"
    );
    // The daemon's own user is still served.
    let root = over_socket(&d.socket).await;
    assert!(!root.list_all_tools().await.expect("tools").is_empty());
    root.cancel().await.expect("close");
}

/// The labels of the sandbox containers the daemon made for MCP sessions.
async fn mcp_containers(daemon_pid: i32) -> Vec<String> {
    common::containers_labelled("agentd.managed=true")
        .await
        .into_iter()
        .filter_map(|c| {
            let labels = c.labels?;
            let owner = labels.get("agentd.owner")?;
            let pid = owner.rsplit(':').nth(2)?;
            let run = labels.get("agentd.run")?;
            (pid == daemon_pid.to_string() && run.starts_with("mcp-")).then(|| run.clone())
        })
        .collect()
}

async fn wait_containers(pid: i32, want: usize, within: Duration) -> Vec<String> {
    let deadline = Instant::now() + within;
    loop {
        let now = mcp_containers(pid).await;
        if now.len() == want {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "MCP sandboxes: {now:?}, wanted {want}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn shell_daemon(llm: &FakeLlm, idle_timeout: u32) -> Daemon {
    tokio::task::block_in_place(|| {
        Daemon::start(
            llm,
            &format!("\n[mcp_server]\nexpose_tools = true\nidle_timeout = {idle_timeout}\n"),
        )
    })
}

/// Docker: a session's plugin calls share one sandbox, made on first use;
/// closing the session removes it.
#[tokio::test(flavor = "multi_thread")]
async fn the_session_sandbox_is_shared_by_its_calls_and_gone_when_the_session_closes() {
    let llm = FakeLlm::start().await.expect("fake llm");
    let d = shell_daemon(&llm, 600);
    let pid = d.pid();
    let client = over_socket(&d.socket).await;
    assert!(mcp_containers(pid).await.is_empty(), "none before a call");
    let wrote = call(
        &client,
        "bash",
        json!({"command": "echo kept > /workspace/mine && hostname"}),
    )
    .await;
    assert_ne!(wrote.is_error, Some(true), "{wrote:?}");
    let read = call(&client, "bash", json!({"command": "cat /workspace/mine"})).await;
    assert!(
        text_of(&read).contains("kept"),
        "the same sandbox: {read:?}"
    );
    let live = wait_containers(pid, 1, PATIENCE).await;
    assert!(live[0].ends_with("-1"), "{live:?}");
    // A second session gets its own.
    let other = over_socket(&d.socket).await;
    let theirs = call(&other, "bash", json!({"command": "ls /workspace"})).await;
    assert!(!text_of(&theirs).contains("mine"), "{theirs:?}");
    wait_containers(pid, 2, PATIENCE).await;
    client.cancel().await.expect("close");
    other.cancel().await.expect("close");
    wait_containers(pid, 0, Duration::from_secs(30)).await;
}

/// Docker: a sandbox unused for `idle_timeout` is removed while its
/// session stays; the next call gets a new one.
#[tokio::test(flavor = "multi_thread")]
async fn an_idle_session_sandbox_is_removed_and_made_again_on_the_next_call() {
    let llm = FakeLlm::start().await.expect("fake llm");
    let d = shell_daemon(&llm, 2);
    let pid = d.pid();
    let client = over_socket(&d.socket).await;
    let first = call(&client, "bash", json!({"command": "echo one"})).await;
    assert!(text_of(&first).contains("one"), "{first:?}");
    wait_containers(pid, 1, PATIENCE).await;
    // Gone after two idle seconds (and the removal), the session still open.
    wait_containers(pid, 0, Duration::from_secs(30)).await;
    let second = call(&client, "bash", json!({"command": "echo two"})).await;
    assert!(text_of(&second).contains("two"), "{second:?}");
    let live = wait_containers(pid, 1, PATIENCE).await;
    assert!(live[0].ends_with("-2"), "a new sandbox: {live:?}");
    client.cancel().await.expect("close");
    wait_containers(pid, 0, Duration::from_secs(30)).await;
}
