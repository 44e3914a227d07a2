//! agentd as an MCP client, through a real daemon: agents call the tools of
//! two third-party MCP servers nobody here wrote, installed pinned by
//! `scripts/ensure-mcp-servers.sh`: `@modelcontextprotocol/server-everything`
//! (npm) over stdio and over Streamable HTTP, and a server written with the
//! Python `mcp` SDK (`tests/mcp/python_server.py`), started by the daemon.

use crate::common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use agentd::testkit::{FakeLlm, Reply};
use common::daemon::Daemon;
use common::fault::tool_contents;
use serde_json::Value;

/// The server-everything entry point and the Python with the MCP SDK.
fn servers() -> &'static (PathBuf, PathBuf) {
    static PATHS: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    PATHS.get_or_init(|| {
        let out = Command::new(common::repo_root().join("scripts/ensure-mcp-servers.sh"))
            .arg("--print")
            .output()
            .expect("run ensure-mcp-servers.sh");
        assert!(
            out.status.success(),
            "ensure-mcp-servers.sh failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let mut lines = text.lines();
        let everything = PathBuf::from(lines.next().expect("everything path"));
        let python = PathBuf::from(lines.next().expect("python path"));
        (everything, python)
    })
}

fn python_server() -> PathBuf {
    common::repo_root().join("tests/mcp/python_server.py")
}

/// `[mcp.<name>]` for the Python server over stdio, with `more` keys.
fn py_table(name: &str, more: &str) -> String {
    format!(
        "\n[mcp.{name}]\ncommand = {:?}\nargs = [{:?}]\n{more}\n",
        servers().1.display().to_string(),
        python_server().display().to_string()
    )
}

/// `[mcp.<name>]` for server-everything over stdio, with `more` keys.
fn everything_table(name: &str, more: &str) -> String {
    format!(
        "\n[mcp.{name}]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n{more}\n",
        servers().0.display().to_string()
    )
}

fn agent(name: &str, tools: &[&str]) -> String {
    let tools: Vec<String> = tools.iter().map(|t| format!("{t:?}")).collect();
    format!(
        "\n[agents.{name}]\nstrategy = \"toolcall\"\ntools = [{}]\nmax_steps = 12\n",
        tools.join(", ")
    )
}

/// Polls `GET /v1/mcp` until `want` holds for server `name`; its view.
fn wait_server(d: &Daemon, name: &str, within: Duration, want: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let (status, v) = d.get("/v1/mcp");
        assert_eq!(status, 200, "{v}");
        let server = v["servers"]
            .as_array()
            .and_then(|a| a.iter().find(|s| s["name"] == name).cloned())
            .unwrap_or(Value::Null);
        if want(&server) {
            return server;
        }
        assert!(
            Instant::now() < deadline,
            "MCP server {name} never got there: {server}\n{}",
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn ready(d: &Daemon, name: &str) -> Value {
    wait_server(d, name, Duration::from_secs(60), |s| s["state"] == "ready")
}

/// The tool-result events of run `id`: `(name, ok, output)`.
fn results(d: &Daemon, id: &str) -> Vec<(String, bool, String)> {
    d.events(id)
        .iter()
        .filter(|e| e["type"] == "tool_result")
        .map(|e| {
            (
                e["name"].as_str().unwrap_or("").to_string(),
                e["ok"].as_bool().unwrap_or(false),
                e["output"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// The tool names the model was offered in the LLM's requests.
fn offered_tools(llm: &FakeLlm) -> Vec<String> {
    let mut names: Vec<String> = llm
        .requests()
        .iter()
        .flat_map(|r| r["tools"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Polls `done` until it holds, failing the test with `what` after `within`.
fn wait_until(within: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Writes the daemon's secrets file (`secrets.env` next to its
/// configuration), 0600 as the daemon requires.
fn write_secrets(d: &Daemon, text: impl AsRef<[u8]>) {
    use std::os::unix::fs::PermissionsExt;
    let path = d.dir.path().join("secrets.env");
    std::fs::write(&path, text).expect("secrets");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
}

fn alive(pid: i64) -> bool {
    // Signal 0: whether the process exists (a zombie counts until reaped).
    let exists = unsafe { libc::kill(pid as i32, 0) == 0 };
    exists
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.split_whitespace().nth(2) == Some("Z"))
}

fn valid_openai_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_calls_server_everything_over_stdio_with_only_its_allowed_tools_and_env() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.set_recording(true);
    llm.push_for(
        "use everything",
        [
            Reply::call("mcp__everything__echo", r#"{"message":"hello mcp"}"#),
            Reply::call("mcp__everything__get-sum", r#"{"a":2,"b":40}"#),
            Reply::call("mcp__everything__get-env", "{}"),
            Reply::terminate(),
        ],
    );
    let extra = format!(
        "{}{}",
        everything_table(
            "everything",
            "env = { GREETING = \"from-the-table\" }\ntools = [\"echo\", \"get-sum\", \"get-env\"]"
        ),
        agent("mcpuser", &["mcp:everything/*", "terminate"])
    );
    tokio::task::block_in_place(|| {
        let mut d = Daemon::unstarted(&llm, &extra);
        d.spawn(&[("AGENTD_TEST_DAEMON_ONLY", "must-not-leak")]);
        let server = ready(&d, "everything");
        assert_eq!(server["transport"], "stdio", "{server}");
        let pid = server["pid"].as_i64().expect("pid");
        assert!(alive(pid), "the server's process {pid} is alive");
        let tools = server["tools"].as_array().expect("tools");
        let allowed = |n: &str| {
            tools
                .iter()
                .find(|t| t["name"] == n)
                .map(|t| t["allowed"].as_bool() == Some(true))
        };
        assert_eq!(allowed("echo"), Some(true), "{server}");
        assert_eq!(
            allowed("get-tiny-image"),
            Some(false),
            "listed, not allowed: {server}"
        );

        let id = d.create_run("mcpuser", "use everything");
        let record = d.wait_run(&id, Duration::from_secs(60));
        assert_eq!(record["outcome"], "finished", "{record}");
        let r = results(&d, &id);
        assert_eq!(r[0].0, "mcp__everything__echo");
        assert!(r[0].1 && r[0].2.contains("hello mcp"), "{:?}", r[0]);
        assert!(r[1].1 && r[1].2.contains("42"), "{:?}", r[1]);
        let env = &r[2].2;
        assert!(
            env.contains("from-the-table"),
            "the table's env reached it: {env}"
        );
        assert!(env.contains("\"PATH\""), "PATH reached it: {env}");
        assert!(
            !env.contains("must-not-leak") && !env.contains("AGENTD_TEST_DAEMON_ONLY"),
            "the daemon's own environment is not inherited: {env}"
        );
        // What the model saw is in the transcript, as for any tool.
        let contents = tool_contents(&record);
        assert!(contents[0].contains("hello mcp"), "{contents:?}");

        let offered = offered_tools(&llm);
        assert!(
            offered.contains(&"mcp__everything__echo".to_string()),
            "{offered:?}"
        );
        assert!(
            !offered.iter().any(|n| n.contains("get-tiny-image")),
            "the allow-list hides a tool from the model: {offered:?}"
        );
        assert!(offered.iter().all(|n| valid_openai_name(n)), "{offered:?}");

        // The CLI shows the same.
        let out = Command::new(env!("CARGO_BIN_EXE_agentd"))
            .args(["--socket", &d.socket.display().to_string(), "mcp", "list"])
            .output()
            .expect("agentd mcp list");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{text}");
        assert!(
            text.contains("everything")
                && text.contains("ready")
                && text.contains(&pid.to_string()),
            "{text}"
        );
        d.stop();
        assert!(!alive(pid), "the server stops with the daemon");
    });
}

/// server-everything over Streamable HTTP on loopback, started by the test.
struct HttpEverything {
    child: Child,
    port: u16,
}

impl HttpEverything {
    fn start() -> HttpEverything {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("addr")
            .port();
        let child = Command::new("node")
            .arg(&servers().0)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start server-everything over HTTP");
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "server-everything did not listen"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        HttpEverything { child, port }
    }
}

impl Drop for HttpEverything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_calls_server_everything_over_streamable_http_and_secrets_stay_out_of_the_api() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "sum over http",
        [
            Reply::call("mcp__web__get-sum", r#"{"a":20,"b":22}"#),
            Reply::call("mcp__web__echo", r#"{"message":"over http"}"#),
            Reply::terminate(),
        ],
    );
    tokio::task::block_in_place(|| {
        let server = HttpEverything::start();
        let token = format!("tok-{}", uuid::Uuid::new_v4().simple());
        let extra = format!(
            "\n[plugins]\nsecrets_file = \"secrets.env\"\n\n[mcp.web]\nurl = \"http://127.0.0.1:{}/mcp\"\nsecrets = [\"WEB_TOKEN\"]\nheaders = {{ Authorization = \"Bearer ${{WEB_TOKEN}}\" }}\n{}",
            server.port,
            agent("webuser", &["mcp:web/get-sum", "mcp:web/echo", "terminate"])
        );
        let mut d = Daemon::unstarted(&llm, &extra);
        write_secrets(&d, format!("WEB_TOKEN={token}\n"));
        d.spawn(&[]);
        let view = ready(&d, "web");
        assert_eq!(view["transport"], "http", "{view}");
        let id = d.create_run("webuser", "sum over http");
        let record = d.wait_run(&id, Duration::from_secs(60));
        assert_eq!(record["outcome"], "finished", "{record}");
        let r = results(&d, &id);
        assert!(r[0].1 && r[0].2.contains("42"), "{:?}", r[0]);
        assert!(r[1].1 && r[1].2.contains("over http"), "{:?}", r[1]);
        let (_, mcp) = d.get("/v1/mcp");
        let (_, run) = d.get(&format!("/v1/runs/{id}"));
        for (what, text) in [
            ("GET /v1/mcp", mcp.to_string()),
            ("the run", run.to_string()),
            ("the log", d.log_text()),
        ] {
            assert!(!text.contains(&token), "the header's secret is in {what}");
        }
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn python_server_results_errors_and_a_name_openai_would_refuse() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.set_recording(true);
    tokio::task::block_in_place(|| {
        let extra = format!(
            "{}{}",
            py_table("py", ""),
            agent("pyuser", &["mcp:py/*", "terminate"])
        );
        let d = Daemon::start(&llm, &extra);
        let view = ready(&d, "py");
        let odd = view["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .find(|t| t["name"] == "files.read/v2 (beta)")
            .expect("the oddly named tool is listed")["model_name"]
            .as_str()
            .expect("model name")
            .to_string();
        assert!(valid_openai_name(&odd), "{odd}");
        assert!(odd.starts_with("mcp__py__files_read_v2__beta_"), "{odd}");
        llm.push_for(
            "try the python server",
            [
                Reply::call("mcp__py__add", r#"{"a":1,"b":2}"#),
                Reply::call("mcp__py__picture", "{}"),
                Reply::call("mcp__py__fail", "{}"),
                Reply::call(&odd, r#"{"path":"/etc/motd"}"#),
                Reply::call("mcp__py__add", "[1, 2]"),
                Reply::terminate(),
            ],
        );
        let id = d.create_run("pyuser", "try the python server");
        let record = d.wait_run(&id, Duration::from_secs(60));
        assert_eq!(record["outcome"], "finished", "{record}");
        let r = results(&d, &id);
        assert!(r[0].1 && r[0].2.trim() == "3", "{:?}", r[0]);
        let picture = &r[1].2;
        assert!(r[1].1, "{:?}", r[1]);
        assert!(
            picture.contains("[image: image/png, 64 bytes]"),
            "{picture}"
        );
        assert!(
            picture.contains("[resource: file:///notes.txt, text/plain")
                && picture.contains("hello notes"),
            "{picture}"
        );
        assert!(
            picture.contains("[resource link: https://example.com/report.pdf, application/pdf"),
            "{picture}"
        );
        // The SDK hides the exception's text behind its own message.
        assert!(
            !r[2].1 && r[2].2.contains("Error executing tool fail"),
            "isError is an error observation: {:?}",
            r[2]
        );
        assert!(r[3].1 && r[3].2.contains("read /etc/motd"), "{:?}", r[3]);
        assert!(
            !r[4].1 && r[4].2.contains("must be a JSON object"),
            "{:?}",
            r[4]
        );
        let offered = offered_tools(&llm);
        assert!(offered.contains(&odd), "{offered:?}");
        assert!(offered.iter().all(|n| valid_openai_name(n)), "{offered:?}");
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_crashes_mid_run_is_an_error_observation_then_restarted() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "crash it",
        [
            Reply::call("mcp__py__whoami", "{}"),
            Reply::call("mcp__py__crash", "{}"),
            Reply::terminate(),
        ],
    );
    llm.push_for(
        "after the crash",
        [Reply::call("mcp__py__whoami", "{}"), Reply::terminate()],
    );
    tokio::task::block_in_place(|| {
        let extra = format!(
            "{}{}",
            py_table("py", ""),
            agent("pyuser", &["mcp:py/*", "terminate"])
        );
        let d = Daemon::start(&llm, &extra);
        let first = ready(&d, "py")["pid"].as_i64().expect("pid");
        let id = d.create_run("pyuser", "crash it");
        let record = d.wait_run(&id, Duration::from_secs(60));
        assert_eq!(record["outcome"], "finished", "the run goes on: {record}");
        let r = results(&d, &id);
        assert!(
            r[0].1 && r[0].2.contains(&format!("pid={first}")),
            "{:?}",
            r[0]
        );
        assert!(!r[1].1, "{:?}", r[1]);
        assert!(
            r[1].2.contains("MCP server `py`"),
            "names the server: {:?}",
            r[1]
        );

        let again = wait_server(&d, "py", Duration::from_secs(30), |s| {
            s["state"] == "ready" && s["pid"].as_i64().is_some_and(|p| p != first)
        });
        assert!(again["restarts"].as_u64() >= Some(1), "{again}");
        let second = again["pid"].as_i64().expect("pid");
        let id = d.create_run("pyuser", "after the crash");
        let record = d.wait_run(&id, Duration::from_secs(60));
        assert_eq!(record["outcome"], "finished", "{record}");
        let r = results(&d, &id);
        assert!(
            r[0].1 && r[0].2.contains(&format!("pid={second}")),
            "{:?}",
            r[0]
        );
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hanging_call_times_out_and_is_cancelled_on_the_server() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "hang",
        [
            Reply::call("mcp__py__hang", "{}"),
            Reply::call("mcp__py__add", r#"{"a":2,"b":2}"#),
            Reply::terminate(),
        ],
    );
    tokio::task::block_in_place(|| {
        let extra = format!(
            "{}{}",
            py_table("py", "timeout = 1"),
            agent("pyuser", &["mcp:py/hang", "mcp:py/add", "terminate"])
        );
        let d = Daemon::start(&llm, &extra);
        ready(&d, "py");
        let id = d.create_run("pyuser", "hang");
        let record = d.wait_run(&id, Duration::from_secs(60));
        assert_eq!(record["outcome"], "finished", "{record}");
        let r = results(&d, &id);
        assert!(!r[0].1, "{:?}", r[0]);
        assert!(
            r[0].2
                .contains("did not answer `hang` within 1s ([mcp.py] timeout)"),
            "{:?}",
            r[0]
        );
        assert!(
            r[1].1 && r[1].2.trim() == "4",
            "the server still serves: {:?}",
            r[1]
        );
        wait_until(
            Duration::from_secs(10),
            "the server saw notifications/cancelled",
            || d.log_text().contains("hang: cancelled by the client"),
        );
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelling_a_run_cancels_its_mcp_call() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for("hang until cancelled", [Reply::call("mcp__py__hang", "{}")]);
    tokio::task::block_in_place(|| {
        let extra = format!(
            "{}{}",
            py_table("py", ""),
            agent("pyuser", &["mcp:py/hang"])
        );
        let d = Daemon::start(&llm, &extra);
        ready(&d, "py");
        let id = d.create_run("pyuser", "hang until cancelled");
        d.wait_for_event(&id, "tool_call");
        let (status, v) = d.post(&format!("/v1/runs/{id}/cancel"), "");
        assert_eq!(status, 202, "{v}");
        let record = d.wait_run(&id, Duration::from_secs(30));
        assert_eq!(record["outcome"], "cancelled", "{record}");
        wait_until(
            Duration::from_secs(10),
            "the server saw notifications/cancelled",
            || d.log_text().contains("hang: cancelled by the client"),
        );
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn list_changed_relists_the_tools_and_new_runs_can_use_them() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "grow",
        [Reply::call("mcp__py__grow", "{}"), Reply::terminate()],
    );
    llm.push_for(
        "use the late tool",
        [Reply::call("mcp__py__late_tool", "{}"), Reply::terminate()],
    );
    tokio::task::block_in_place(|| {
        let extra = format!(
            "{}{}{}",
            py_table("py", ""),
            agent("grower", &["mcp:py/grow", "terminate"]),
            agent("late", &["mcp:py/late_tool", "terminate"])
        );
        let d = Daemon::start(&llm, &extra);
        let view = ready(&d, "py");
        let has_late = |s: &Value| {
            s["tools"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t["name"] == "late_tool"))
        };
        assert!(!has_late(&view), "{view}");
        let (_, agents) = d.get("/v1/agents");
        let late = agents["agents"]
            .as_array()
            .and_then(|a| a.iter().find(|a| a["name"] == "late").cloned())
            .expect("agent late");
        assert_eq!(
            late["missing_plugins"],
            serde_json::json!(["mcp:py/late_tool"]),
            "a tool the server does not list is missing: {late}"
        );
        let id = d.create_run("grower", "grow");
        let record = d.wait_run(&id, Duration::from_secs(60));
        assert_eq!(record["outcome"], "finished", "{record}");
        wait_server(&d, "py", Duration::from_secs(10), has_late);
        let id = d.create_run("late", "use the late tool");
        let record = d.wait_run(&id, Duration::from_secs(60));
        assert_eq!(record["outcome"], "finished", "{record}");
        let r = results(&d, &id);
        assert!(r[0].1 && r[0].2.contains("late tool ran"), "{:?}", r[0]);
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn per_run_servers_are_fresh_for_each_run_and_gone_after_it() {
    let llm = FakeLlm::start().await.expect("fake llm");
    for request in ["first run", "second run"] {
        llm.push_for(
            request,
            [
                Reply::call("mcp__counter__whoami", "{}"),
                Reply::call("mcp__counter__whoami", "{}"),
                Reply::call("mcp__shared__whoami", "{}"),
                Reply::terminate(),
            ],
        );
    }
    tokio::task::block_in_place(|| {
        let extra = format!(
            "{}{}{}",
            py_table("counter", "per_run = true"),
            py_table("shared", ""),
            agent(
                "counting",
                &["mcp:counter/whoami", "mcp:shared/whoami", "terminate"]
            )
        );
        let d = Daemon::start(&llm, &extra);
        let idle = wait_server(&d, "counter", Duration::from_secs(5), |s| {
            s["state"] == "idle"
        });
        assert_eq!(idle["per_run"], true, "{idle}");
        ready(&d, "shared");
        let mut pids = Vec::new();
        let mut shared_calls = Vec::new();
        for request in ["first run", "second run"] {
            let id = d.create_run("counting", request);
            let record = d.wait_run(&id, Duration::from_secs(60));
            assert_eq!(record["outcome"], "finished", "{record}");
            let r = results(&d, &id);
            assert!(r[0].2.contains("calls=1"), "a fresh process: {:?}", r[0]);
            assert!(r[1].2.contains("calls=2"), "kept for the run: {:?}", r[1]);
            let pid: i64 = r[0]
                .2
                .split("pid=")
                .nth(1)
                .and_then(|s| s.split(' ').next())
                .and_then(|s| s.parse().ok())
                .expect("pid");
            assert!(r[1].2.contains(&format!("pid={pid}")), "{:?}", r[1]);
            pids.push(pid);
            shared_calls.push(r[2].2.clone());
            wait_until(
                Duration::from_secs(10),
                "the per-run server ends with its run",
                || !alive(pid),
            );
        }
        assert_ne!(pids[0], pids[1], "each run got its own server");
        assert!(
            shared_calls[0].contains("calls=1") && shared_calls[1].contains("calls=2"),
            "the shared server is one process for both runs: {shared_calls:?}"
        );
        wait_server(&d, "counter", Duration::from_secs(5), |s| {
            s["state"] == "idle" && s["instances"].as_array().is_some_and(|i| i.is_empty())
        });
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_cannot_start_is_named_and_other_runs_go_on() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for("needs the broken one", [Reply::terminate()]);
    llm.push_for(
        "bystander",
        [
            Reply::call("mcp__py__add", r#"{"a":1,"b":1}"#),
            Reply::terminate(),
        ],
    );
    tokio::task::block_in_place(|| {
        let extra = format!(
            "\n[mcp.broken]\ncommand = \"/nonexistent/mcp-server\"\n{}{}{}",
            py_table("py", ""),
            agent("broken", &["mcp:broken/*", "terminate"]),
            agent("fine", &["mcp:py/add", "terminate"])
        );
        let d = Daemon::start(&llm, &extra);
        let view = wait_server(&d, "broken", Duration::from_secs(10), |s| {
            s["state"] == "failed"
        });
        assert!(
            view["error"]
                .as_str()
                .unwrap_or("")
                .contains("cannot start `/nonexistent/mcp-server`"),
            "{view}"
        );
        let (_, agents) = d.get("/v1/agents");
        let broken = agents["agents"]
            .as_array()
            .and_then(|a| a.iter().find(|a| a["name"] == "broken").cloned())
            .expect("agent");
        assert_eq!(
            broken["missing_plugins"],
            serde_json::json!(["mcp:broken/*"]),
            "{broken}"
        );
        let id = d.create_run("broken", "needs the broken one");
        let record = d.wait_run(&id, Duration::from_secs(30));
        common::fault::assert_ended_because(
            &record,
            "error",
            &["mcp:broken/*", "MCP server `broken`"],
        );
        ready(&d, "py");
        let id = d.create_run("fine", "bystander");
        let record = d.wait_run(&id, Duration::from_secs(60));
        assert_eq!(record["outcome"], "finished", "{record}");
        common::fault::assert_status_within_a_second(&d);
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn sighup_applies_mcp_changes_without_touching_runs_in_flight() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "long run",
        [
            Reply::call("mcp__py__whoami", "{}"),
            // The run is in flight, between two calls, while the file changes.
            Reply::Delayed(
                Duration::from_secs(3),
                Box::new(Reply::call("mcp__py__env", r#"{"name":"FLAVOUR"}"#)),
            ),
            Reply::terminate(),
        ],
    );
    llm.push_for(
        "new run",
        [
            Reply::call("mcp__py__env", r#"{"name":"FLAVOUR"}"#),
            Reply::terminate(),
        ],
    );
    tokio::task::block_in_place(|| {
        let agents = agent("pyuser", &["mcp:py/*", "terminate"]);
        let old = format!("{}{agents}", py_table("py", "env = { FLAVOUR = \"old\" }"));
        let d = Daemon::start(&llm, &old);
        let first = ready(&d, "py")["pid"].as_i64().expect("pid");
        let id = d.create_run("pyuser", "long run");
        d.wait_for_event(&id, "tool_result");
        let text = std::fs::read_to_string(&d.config).expect("config");
        let new = text.replace("FLAVOUR = \"old\"", "FLAVOUR = \"new\"");
        std::fs::write(&d.config, new).expect("rewrite config");
        d.signal(libc::SIGHUP);
        let swapped = wait_server(&d, "py", Duration::from_secs(30), |s| {
            s["state"] == "ready" && s["pid"].as_i64().is_some_and(|p| p != first)
        });
        assert!(alive(first), "the old server lives while a run holds it");
        let record = d.wait_run(&id, Duration::from_secs(60));
        assert_eq!(record["outcome"], "finished", "{record}");
        let r = results(&d, &id);
        assert_eq!(
            r[1].2.trim(),
            "old",
            "the run in flight kept its server: {:?}",
            r[1]
        );
        let id = d.create_run("pyuser", "new run");
        let record = d.wait_run(&id, Duration::from_secs(60));
        assert_eq!(record["outcome"], "finished", "{record}");
        assert_eq!(
            results(&d, &id)[0].2.trim(),
            "new",
            "a new run gets the new server"
        );
        wait_until(
            Duration::from_secs(10),
            "the old server ends with its last run",
            || !alive(first),
        );
        assert!(alive(swapped["pid"].as_i64().expect("pid")));
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn an_mcp_wait_is_a_host_wait_and_its_result_is_cut_like_a_tools() {
    // step_timeout counts plugin time only: a 2 s MCP call in a step of at
    // most 1 s of plugin time passes, as a sandbox command does; its result
    // is cut at the agent's max_observe like any tool's. The secret of the
    // table reaches the server's environment.
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "nap",
        [
            Reply::call("mcp__py__nap", r#"{"seconds": 2}"#),
            Reply::call("mcp__py__env", r#"{"name":"PY_SECRET"}"#),
            Reply::terminate(),
        ],
    );
    tokio::task::block_in_place(|| {
        let extra = format!(
            "step_timeout = 1\n\n[plugins]\nsecrets_file = \"secrets.env\"\n{}{}max_observe = 90\n",
            py_table("py", "secrets = [\"PY_SECRET\"]"),
            agent("napper", &["mcp:py/nap", "mcp:py/env", "terminate"])
        );
        let mut d = Daemon::unstarted(&llm, &extra);
        write_secrets(&d, "PY_SECRET=s3cret-for-py\n");
        d.spawn(&[]);
        ready(&d, "py");
        let id = d.create_run("napper", "nap");
        let record = d.wait_run(&id, Duration::from_secs(60));
        assert_eq!(
            record["outcome"], "finished",
            "the MCP wait is not plugin time: {record}"
        );
        let contents = tool_contents(&record);
        assert!(contents[0].contains("slept 2"), "{contents:?}");
        assert!(
            contents[0].chars().count() <= 120 && !contents[0].contains(&"z".repeat(100)),
            "cut at max_observe: {contents:?}"
        );
        assert!(contents[1].contains("s3cret-for-py"), "{contents:?}");
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn a_secret_header_reaches_a_python_sdk_server_over_http() {
    use sha2::{Digest, Sha256};
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "who am I to you",
        [
            Reply::call("mcp__pyweb__auth_digest", "{}"),
            Reply::terminate(),
        ],
    );
    tokio::task::block_in_place(|| {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("addr")
            .port();
        let mut server = Command::new(&servers().1)
            .arg(python_server())
            .args(["http", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the Python server over HTTP");
        wait_until(Duration::from_secs(30), "the Python server listens", || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        let token = format!("tok-{}", uuid::Uuid::new_v4().simple());
        let extra = format!(
            "\n[plugins]\nsecrets_file = \"secrets.env\"\n\n[mcp.pyweb]\nurl = \"http://127.0.0.1:{port}/mcp\"\nsecrets = [\"WEB_TOKEN\"]\nheaders = {{ Authorization = \"Bearer ${{WEB_TOKEN}}\" }}\n{}",
            agent("webuser", &["mcp:pyweb/auth_digest", "terminate"])
        );
        let mut d = Daemon::unstarted(&llm, &extra);
        write_secrets(&d, format!("WEB_TOKEN={token}\n"));
        d.spawn(&[]);
        ready(&d, "pyweb");
        let id = d.create_run("webuser", "who am I to you");
        let record = d.wait_run(&id, Duration::from_secs(60));
        let _ = server.kill();
        let _ = server.wait();
        assert_eq!(record["outcome"], "finished", "{record}");
        let want: String = Sha256::digest(format!("Bearer {token}").as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let r = results(&d, &id);
        assert_eq!(
            r[0].2.trim(),
            want,
            "the server got the header with the secret: {:?}",
            r[0]
        );
        assert!(!record.to_string().contains(&token));
    });
}

/// The `react` strategy calls MCP tools as it calls any tool: they are in
/// its text prompt (name and JSON Schema, no `tools` parameter), a plain
/// `Action:` reply runs one, and its result comes back as an observation.
#[tokio::test(flavor = "multi_thread")]
async fn react_calls_an_mcp_tool_from_plain_text() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.set_recording(true);
    tokio::task::block_in_place(|| {
        let extra = format!(
            "{}\n[agents.texter]\nstrategy = \"react\"\ntools = [\"mcp:py/add\", \"terminate\"]\nmax_steps = 4\n",
            py_table("py", ""),
        );
        let d = Daemon::start_with_plugins(
            &llm,
            &[("react.wasm", "react"), ("terminate.wasm", "terminate")],
            &extra,
        );
        ready(&d, "py");
        llm.push_for(
            "add with the python server",
            [
                Reply::text(
                    "Thought: the server adds.\nAction: mcp__py__add\nAction Input: {'a': 20, 'b': 22,}",
                ),
                Reply::text("Thought: I have it.\nFinal Answer: 42"),
            ],
        );
        let id = d.create_run("texter", "add with the python server");
        let record = d.wait_run(&id, Duration::from_secs(60));
        assert_eq!(record["outcome"], "finished", "{record}");
        assert_eq!(
            record["result"], "Step 1: Observation: 42\nStep 2: 42",
            "{record}"
        );
        let r = results(&d, &id);
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(
            r[0].0 == "mcp__py__add" && r[0].1 && r[0].2.trim() == "42",
            "{r:?}"
        );
        let requests = llm.requests();
        assert!(
            requests.iter().all(|q| q.get("tools").is_none()),
            "no tools parameter: {requests:?}"
        );
        let system = requests[0]["messages"][0]["content"].as_str().unwrap_or("");
        assert!(system.contains("mcp__py__add"), "{system}");
        assert!(system.contains("\"a\""), "the tool's schema: {system}");
        let second = requests[1]["messages"].as_array().expect("messages");
        let last = second.last().expect("a message");
        assert_eq!(last["role"], "user", "{last}");
        assert_eq!(last["content"], "Observation: 42", "{last}");
    });
}
