//! Capability grants (`[plugins.<name>]`) through a real daemon: HTTP to a
//! loopback server through `wasi:http` and the allow-list, environment and
//! secrets visible to their plugin only, `config` settings, and grants that
//! a run keeps across a SIGHUP. The test tools are `grant_probe` and
//! `grant_bystander`, one component built under two names
//! (`plugins/grant_probe`).

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentd::testkit::{FakeLlm, Reply};
use common::daemon::Daemon;
use serde_json::Value;

/// One request the loopback server saw: its request line and its
/// `Authorization` header.
type Seen = (String, Option<String>);

/// A loopback HTTP/1.1 server answering every request `200 hello from
/// loopback`, recording each request's line and `Authorization` header.
struct Loopback {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Loopback {
    fn start() -> Loopback {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let port = listener.local_addr().expect("addr").port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                let mut auth = None;
                loop {
                    let mut header = String::new();
                    if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                        break;
                    }
                    if let Some((name, value)) = header.split_once(':') {
                        if name.eq_ignore_ascii_case("authorization") {
                            auth = Some(value.trim().to_string());
                        }
                    }
                }
                log.lock()
                    .expect("log")
                    .push((line.trim().to_string(), auth));
                let body = "hello from loopback";
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Loopback { port, seen }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("log").clone()
    }
}

const PLUGINS: &[(&str, &str)] = &[
    ("toolcall.wasm", "toolcall"),
    ("terminate.wasm", "terminate"),
    ("grant_probe.wasm", "grant_probe"),
    ("grant_bystander.wasm", "grant_bystander"),
];

const AGENT: &str = "\n[agents.prober]\nstrategy = \"toolcall\"\ntools = [\"grant_probe\", \"grant_bystander\", \"terminate\"]\nmax_steps = 20\n";

fn grants(port: u16, greeting: &str) -> String {
    format!(
        "\n[plugins]\nsecrets_file = \"secrets.env\"\n\n\
         [plugins.grant_probe]\nallow_hosts = [\"127.0.0.1:{port}\"]\nenv = {{ MODE = \"test\" }}\n\
         secrets = [\"PROBE_TOKEN\"]\nconfig = {{ greeting = \"{greeting}\", retries = 3 }}\n{AGENT}"
    )
}

/// The tool results of run `id`, in order: `(tool, ok, output)`.
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

fn write_secrets(d: &Daemon, token: &str) {
    let path = d.dir.path().join("secrets.env");
    std::fs::write(&path, format!("# test secrets\nPROBE_TOKEN={token}\n")).expect("secrets");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
}

fn start(llm: &FakeLlm, extra: &str, token: &str) -> Daemon {
    let mut d = Daemon::unstarted_with_plugins(llm, PLUGINS, extra);
    write_secrets(&d, token);
    d.spawn(&[]);
    d
}

#[tokio::test(flavor = "multi_thread")]
async fn grants_reach_only_their_plugin_and_secrets_appear_nowhere() {
    let server = Loopback::start();
    let port = server.port;
    let llm = FakeLlm::start().await.expect("fake llm");
    let token = format!("tok-{}", uuid::Uuid::new_v4().simple());
    let url = format!("http://127.0.0.1:{port}/api/thing");
    let get = |tool: &str, url: &str, auth: bool| {
        let args = if auth {
            serde_json::json!({"get": url, "auth_env": "PROBE_TOKEN"})
        } else {
            serde_json::json!({"get": url})
        };
        Reply::call(tool, &args.to_string())
    };
    llm.push_for(
        "probe the grants",
        [
            get("grant_probe", &url, true),
            get(
                "grant_probe",
                &format!("http://localhost:{port}/other"),
                false,
            ),
            get("grant_bystander", &url, false),
            Reply::call("grant_probe", r#"{"env":"PROBE_TOKEN"}"#),
            Reply::call("grant_bystander", r#"{"env":"PROBE_TOKEN"}"#),
            Reply::call("grant_probe", r#"{"env":"MODE"}"#),
            Reply::call("grant_bystander", r#"{"env":"MODE"}"#),
            Reply::call("grant_probe", r#"{"config":"greeting"}"#),
            Reply::call("grant_probe", r#"{"config":"retries"}"#),
            Reply::call("grant_bystander", r#"{"config":"greeting"}"#),
            Reply::terminate(),
        ],
    );
    let extra = grants(port, "hello");
    tokio::task::block_in_place(|| {
        let d = start(&llm, &extra, &token);
        let id = d.create_run("prober", "probe the grants");
        let record = d.wait_run(&id, Duration::from_secs(120));
        assert_eq!(record["outcome"], "finished", "{record}");
        let r = results(&d, &id);
        let output = |i: usize| -> &str { &r[i].2 };

        // The allowed host answered, and got the secret as a bearer token.
        assert!(r[0].1, "{:?}", r[0]);
        assert!(
            output(0).contains("status 200: hello from loopback"),
            "{}",
            output(0)
        );
        let seen = server.seen();
        assert_eq!(
            seen.len(),
            1,
            "only the allowed request left the host: {seen:?}"
        );
        assert_eq!(seen[0].0, "GET /api/thing HTTP/1.1");
        assert_eq!(
            seen[0].1.as_deref(),
            Some(format!("Bearer {token}").as_str())
        );

        // A host not listed is refused inside the plugin, naming host and key.
        assert!(!r[1].1, "{:?}", r[1]);
        assert!(
            output(1).contains(&format!("localhost:{port}"))
                && output(1).contains("[plugins.grant_probe] allow_hosts"),
            "{}",
            output(1)
        );
        // A plugin without grants is refused every host.
        assert!(!r[2].1, "{:?}", r[2]);
        assert!(
            output(2).contains("[plugins.grant_bystander] allow_hosts")
                && output(2).contains("no allow_hosts"),
            "{}",
            output(2)
        );
        // Environment and secrets reach their plugin only.
        assert_eq!(
            output(3),
            format!("PROBE_TOKEN is set ({} bytes)", token.len())
        );
        assert_eq!(output(4), "PROBE_TOKEN is not set");
        assert_eq!(output(5), "MODE is set (4 bytes)");
        assert_eq!(output(6), "MODE is not set");
        assert_eq!(output(7), "hello");
        assert_eq!(output(8), "3");
        assert_eq!(output(9), "(unset)");

        // The refusals are logged, naming the plugin.
        let log = d.log_text();
        assert!(
            log.contains("plugin HTTP request refused") && log.contains("grant_bystander"),
            "{log}"
        );

        // The secret is nowhere: the run, its events, the plugin list, the
        // status, the log, the history database.
        let full = d.with_every_message(&id, record.clone()).to_string();
        let events: Vec<String> = d.events(&id).iter().map(Value::to_string).collect();
        let (_, plugins) = d.get("/v1/plugins");
        let (_, status) = d.get("/v1/status");
        let (_, runs) = d.get("/v1/runs");
        for (what, text) in [
            ("the run", full),
            ("its events", events.join("\n")),
            ("GET /v1/plugins", plugins.to_string()),
            ("GET /v1/status", status.to_string()),
            ("GET /v1/runs", runs.to_string()),
            ("the daemon's log", log),
        ] {
            assert!(!text.contains(&token), "the secret is in {what}: {text}");
        }
        let mut d = d;
        d.stop();
        for entry in std::fs::read_dir(&d.state_dir).expect("state dir") {
            let path = entry.expect("entry").path();
            if path.is_file() {
                let bytes = std::fs::read(&path).expect("read state file");
                assert!(
                    !bytes.windows(token.len()).any(|w| w == token.as_bytes()),
                    "the secret is in {}",
                    path.display()
                );
            }
        }

        // What the API shows of the grants: hosts, env, config, secret names.
        let probe = plugins["plugins"]
            .as_array()
            .expect("plugins")
            .iter()
            .find(|p| p["name"] == "grant_probe")
            .expect("grant_probe listed")
            .clone();
        assert_eq!(
            probe["grants"]["allow_hosts"],
            serde_json::json!([format!("127.0.0.1:{port}")])
        );
        assert_eq!(
            probe["grants"]["secrets"],
            serde_json::json!(["PROBE_TOKEN"])
        );
        assert_eq!(probe["grants"]["env"]["MODE"], "test");
        assert_eq!(probe["grants"]["config"]["retries"], "3");
        let needed = probe["grants_needed"].to_string();
        assert!(
            needed.contains("allow_hosts") && needed.contains("config"),
            "{probe}"
        );
        assert!(
            probe["imports"]
                .as_array()
                .expect("imports")
                .iter()
                .any(|i| i
                    .as_str()
                    .is_some_and(|s| s.starts_with("wasi:http/outgoing-handler"))),
            "{probe}"
        );
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_keeps_the_grants_it_started_with_across_a_sighup() {
    let server = Loopback::start();
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "before",
        [
            Reply::call("grant_probe", r#"{"config":"greeting"}"#),
            // Long enough for the test to reload the file meanwhile.
            Reply::Delayed(
                Duration::from_secs(4),
                Box::new(Reply::call("grant_probe", r#"{"config":"greeting"}"#)),
            ),
            Reply::terminate(),
        ],
    );
    llm.push_for(
        "after",
        [
            Reply::call("grant_probe", r#"{"config":"greeting"}"#),
            Reply::terminate(),
        ],
    );
    tokio::task::block_in_place(|| {
        let d = start(&llm, &grants(server.port, "one"), "t");
        let first = d.create_run("prober", "before");
        d.wait_for_event(&first, "tool_result");
        let text = common::daemon::config_text(
            &llm,
            d.dir.path(),
            d.plugins.path(),
            &grants(server.port, "two"),
        );
        std::fs::write(&d.config, text).expect("config");
        d.signal(libc::SIGHUP);
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !d.log_text().contains("configuration reloaded") {
            assert!(std::time::Instant::now() < deadline, "{}", d.log_text());
            std::thread::sleep(Duration::from_millis(50));
        }
        let second = d.create_run("prober", "after");
        let after = d.wait_run(&second, Duration::from_secs(60));
        assert_eq!(after["outcome"], "finished", "{after}");
        let before = d.wait_run(&first, Duration::from_secs(60));
        assert_eq!(before["outcome"], "finished", "{before}");
        let outputs = |id: &str| -> Vec<String> {
            results(&d, id)
                .into_iter()
                .filter(|r| r.0 == "grant_probe")
                .map(|r| r.2)
                .collect()
        };
        assert_eq!(
            outputs(&first),
            ["one", "one"],
            "the run under way kept its grants"
        );
        assert_eq!(outputs(&second), ["two"], "a run created after the reload");
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn a_secret_that_cannot_be_read_refuses_the_configuration_naming_it() {
    let llm = FakeLlm::start().await.expect("fake llm");
    tokio::task::block_in_place(|| {
        let d = Daemon::unstarted_with_plugins(&llm, PLUGINS, &grants(1, "x"));
        let path = d.dir.path().join("secrets.env");
        // Readable by others: refused with the fix, and no value is used.
        std::fs::write(&path, "PROBE_TOKEN=abc\n").expect("secrets");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let out = d.command().output().expect("run agentd serve");
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("[plugins.grant_probe] secrets") && err.contains("chmod 600"),
            "{err}"
        );
        // Missing: refused naming the secret and both places it may be.
        std::fs::write(&path, "OTHER=abc\n").expect("secrets");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let out = d.command().output().expect("run agentd serve");
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("PROBE_TOKEN") && err.contains("CREDENTIALS_DIRECTORY"),
            "{err}"
        );
        assert!(!err.contains("abc"), "{err}");
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_s_own_timeout_and_memory_limit_override_the_defaults() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "spin once",
        [
            Reply::call("misbehave_tool", r#"{"spin":true}"#),
            // A fresh instance after the one stopped mid-call.
            Reply::call("misbehave_tool", r#"{"alloc_mib":4}"#),
            Reply::terminate(),
        ],
    );
    llm.push_for(
        "hoard",
        [
            Reply::call("misbehave_tool", r#"{"alloc_mib":64}"#),
            Reply::terminate(),
        ],
    );
    let extra = "\n[plugins.misbehave_tool]\ntimeout = 1\nmemory_limit = \"16m\"\n\n\
                 [plugins.misbehave]\ntimeout = 1.5\n\n\
                 [agents.tooler]\nstrategy = \"toolcall\"\ntools = [\"misbehave_tool\", \"terminate\"]\nmax_steps = 5\n\n\
                 [agents.spinner]\nstrategy = \"misbehave\"\ntools = []\nsystem_prompt = \"loop-forever\"\n";
    let files = [
        ("toolcall.wasm", "toolcall"),
        ("terminate.wasm", "terminate"),
        ("misbehave.wasm", "misbehave"),
        ("misbehave_tool.wasm", "misbehave_tool"),
    ];
    tokio::task::block_in_place(|| {
        let d = Daemon::start_with_plugins(&llm, &files, extra);
        let spun = d.create_run("tooler", "spin once");
        let record = d.wait_run(&spun, Duration::from_secs(60));
        assert_eq!(record["outcome"], "finished", "{record}");
        let r = results(&d, &spun);
        assert!(!r[0].1, "{r:?}");
        assert!(
            r[0].2.contains(
                "did not answer within its timeout of 1s ([plugins.misbehave_tool] timeout)"
            ),
            "{r:?}"
        );
        assert_eq!(
            r[1],
            ("misbehave_tool".into(), true, "holding 4 MiB".into())
        );

        let hoarded = d.create_run("tooler", "hoard");
        let record = d.wait_run(&hoarded, Duration::from_secs(60));
        assert_eq!(record["outcome"], "error", "{record}");
        let error = record["error"].as_str().unwrap_or("");
        assert!(
            error.contains("plugin `misbehave_tool` reached its memory limit of 16 MiB"),
            "{record}"
        );

        let spinner = d.create_run("spinner", "go");
        let record = d.wait_run(&spinner, Duration::from_secs(60));
        assert_eq!(record["outcome"], "error", "{record}");
        let error = record["error"].as_str().unwrap_or("");
        assert!(error.contains("step deadline of 1.5s"), "{record}");
    });
}
