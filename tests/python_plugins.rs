//! Plugins written in Python (`plugins/python/`, built by componentize-py
//! with the SDK in `plugins/python/sdk`) in the real daemon, over its
//! socket, with the scripted fake LLM and real Docker sandboxes: the
//! example tools `file_search` and `http_get` built, loaded and listed; a
//! `file_search` call finding a file a previous tool call wrote in the
//! run's sandbox; a Python tool that raises (the model sees the error, the
//! run goes on); one that never returns (the step deadline stops it, the
//! run names it, the daemon keeps serving); a strategy written in Python;
//! 50 concurrent runs on a Python tool; and a Python tool asking a person
//! through `agentd.ask_human`.
//!
//! Python components take 7-17 s each to compile, so the daemons here share
//! one compile cache (`Daemon::start_sharing_compile_cache`): the first
//! compiles them, the others load them from the cache. Needs a Docker
//! engine (scripts/ensure-docker.sh) and the `agentd-sandbox-tiny` image.

use crate::common;

use std::time::Duration;

use agentd::plugin::bindings::types::ErrorCode;
use agentd::plugin::clock::StepClock;
use agentd::plugin::tool::ToolBox;
use agentd::plugin::tool::ToolFailure;
use agentd::plugin::{AskFailure, AskHuman, EngineLimits, NoHuman, PluginHost};
use agentd::sandbox::{NoSandbox, SandboxProvider};
use agentd::testkit::{FakeLlm, Reply};
use common::daemon::Daemon;
use common::fault::{
    assert_ended_because, assert_no_containers, assert_status_within_a_second, tool_contents,
    Bystander, BYSTANDER_AGENT,
};
use serde_json::Value;

/// Every daemon here serves these: the Rust strategy and tools the agents
/// need (`bash` writes files in the sandbox) and every Python plugin.
const PLUGINS: &[(&str, &str)] = &[
    ("toolcall.wasm", "toolcall"),
    ("terminate.wasm", "terminate"),
    ("bash.wasm", "bash"),
    ("file_search.wasm", "file_search"),
    ("http_get.wasm", "http_get"),
    ("py_raise.wasm", "py_raise"),
    ("py_loop.wasm", "py_loop"),
    ("py_echo.wasm", "py_echo"),
    ("py_strategy.wasm", "py_strategy"),
];

/// The Python plugins of [`PLUGINS`]: (name, kind).
const PYTHON: &[(&str, &str)] = &[
    ("file_search", "tool"),
    ("http_get", "tool"),
    ("py_raise", "tool"),
    ("py_loop", "tool"),
    ("py_echo", "tool"),
    ("py_strategy", "strategy"),
];

/// A short step deadline for the endless loop (plugin time only), and the
/// agents: `py` on the Rust `toolcall` strategy with Python tools, and
/// `pystrat` on the Python strategy.
const AGENTS: &str = "step_timeout = 5\nmax_concurrent_runs = 64\n\n\
    [agents.py]\nstrategy = \"toolcall\"\n\
    tools = [\"bash\", \"file_search\", \"py_raise\", \"py_loop\", \"py_echo\", \"terminate\"]\nmax_steps = 6\n\n\
    [agents.pystrat]\nstrategy = \"py_strategy\"\ntools = [\"py_echo\", \"terminate\"]\n";

fn daemon(llm: &FakeLlm) -> Daemon {
    common::built_python_plugins();
    let extra = format!("{AGENTS}{BYSTANDER_AGENT}");
    tokio::task::block_in_place(|| Daemon::start_sharing_compile_cache(llm, PLUGINS, &extra))
}

/// The tool specs the model was shown in the first request that had them.
fn tool_spec(llm: &FakeLlm, name: &str) -> Value {
    llm.requests()
        .iter()
        .filter_map(|r| r["tools"].as_array())
        .flatten()
        .find(|t| t["function"]["name"] == name)
        .map(|t| t["function"].clone())
        .unwrap_or_else(|| panic!("no request showed the tool {name}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn python_plugins_are_built_loaded_and_listed_with_their_contract() {
    let llm = FakeLlm::start().await.expect("fake llm");
    let d = daemon(&llm);
    let (status, list) = tokio::task::block_in_place(|| d.get("/v1/plugins"));
    assert_eq!(status, 200, "{list}");
    let files = list["plugins"].as_array().expect("plugins");
    for (name, kind) in PYTHON {
        let p = files
            .iter()
            .find(|p| p["name"] == *name)
            .unwrap_or_else(|| panic!("{name} is not listed: {list}"));
        assert_eq!(p["status"], "loaded", "{p}");
        assert_eq!(p["kind"], *kind, "{p}");
        assert_eq!(p["version"], "0.1.0", "{p}");
        assert_eq!(p["contract"], "0.2.2", "{p}");
        assert_eq!(p["serving_version"], "0.1.0", "{p}");
        for field in common::PLUGIN_STATUS_FIELDS {
            assert!(p.get(*field).is_some(), "{name} lacks {field}: {p}");
        }
    }
    // The description is the docstring's first paragraph.
    let fs = files
        .iter()
        .find(|p| p["name"] == "file_search")
        .expect("file_search");
    assert!(
        fs["description"]
            .as_str()
            .unwrap_or("")
            .starts_with("Searches the files under a path of the sandbox's work dir"),
        "{fs}"
    );
    // What the components import, and so which grants they could use:
    // http_get (world http-tool) the WASI HTTP client, file_search not.
    let http = files
        .iter()
        .find(|p| p["name"] == "http_get")
        .expect("http_get");
    let imports = http["imports"].to_string();
    assert!(imports.contains("wasi:http/outgoing-handler"), "{http}");
    assert!(
        http["grants_needed"].to_string().contains("allow_hosts"),
        "{http}"
    );
    assert!(!fs["imports"].to_string().contains("wasi:http"), "{fs}");
    assert!(
        !fs["grants_needed"].to_string().contains("allow_hosts"),
        "{fs}"
    );
    // Every Python component came from the shared compile cache or was
    // compiled into it: the next daemon gets them all from the cache.
    let (_, status) = tokio::task::block_in_place(|| d.get("/v1/status"));
    assert_eq!(status["plugin_cache"]["enabled"], true, "{status}");
    drop(d);
    let again = daemon(&llm);
    let (_, status) = tokio::task::block_in_place(|| again.get("/v1/status"));
    assert_eq!(
        status["plugin_cache"]["misses"], 0,
        "a daemon seeded from the shared cache compiled again: {status}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn file_search_finds_the_file_a_previous_tool_call_wrote_in_the_sandbox() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "find the needle",
        [
            Reply::call(
                "bash",
                r#"{"command":"mkdir -p /workspace/notes && printf 'hay\nthe NEEDLE is here\nhay\n' > /workspace/notes/a.txt && echo hay > /workspace/b.txt"}"#,
            ),
            Reply::call(
                "file_search",
                r#"{"pattern":"needle","path":".","ignore_case":true}"#,
            ),
            Reply::call("file_search", r#"{"pattern":"nothing-like-this"}"#),
            Reply::call("file_search", r#"{"pattern":"hay","max_results":2}"#),
            Reply::terminate(),
        ],
    );
    let d = daemon(&llm);
    let (id, record) = tokio::task::block_in_place(|| {
        let id = d.create_run("py", "find the needle");
        let record = d.wait_run(&id, Duration::from_secs(120));
        (id, record)
    });
    assert_eq!(record["outcome"], "finished", "{record}");
    let outputs = tool_contents(&record);
    let found = outputs
        .iter()
        .find(|o| o.contains("NEEDLE"))
        .unwrap_or_else(|| panic!("file_search found nothing: {outputs:#?}"));
    assert!(
        found.contains("notes/a.txt:2:the NEEDLE is here"),
        "{found}"
    );
    assert!(
        outputs
            .iter()
            .any(|o| o.contains("no matches for 'nothing-like-this'")),
        "{outputs:#?}"
    );
    assert!(
        outputs
            .iter()
            .any(|o| o.contains("(more than 2 matches; showing the first 2)")),
        "{outputs:#?}"
    );
    // The schema the model was shown came from the function's annotations
    // and its docstring's Args section.
    let spec = tool_spec(&llm, "file_search");
    let params = &spec["parameters"];
    assert_eq!(params["required"], serde_json::json!(["pattern"]), "{spec}");
    assert_eq!(
        params["properties"]["max_results"]["type"], "integer",
        "{spec}"
    );
    assert_eq!(params["properties"]["max_results"]["default"], 50, "{spec}");
    assert_eq!(
        params["properties"]["ignore_case"]["type"], "boolean",
        "{spec}"
    );
    assert!(
        params["properties"]["path"]["description"]
            .as_str()
            .unwrap_or("")
            .contains("relative to the work dir"),
        "{spec}"
    );
    assert_no_containers(&[&id]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_python_tool_that_raises_reaches_the_model_as_its_error_and_the_run_goes_on() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "raise things",
        [
            Reply::call(
                "py_raise",
                r#"{"mode":"value","text":"the disk is made of cheese"}"#,
            ),
            Reply::call("py_raise", r#"{"mode":"tool","text":"refused on purpose"}"#),
            // Arguments that do not fit the annotations never reach the function.
            Reply::call("py_raise", r#"{"mode":"sideways"}"#),
            Reply::call("py_raise", r#"{"text":7}"#),
            Reply::call("py_raise", r#"{"mode":"ok","text":"still here"}"#),
            Reply::terminate(),
        ],
    );
    let d = daemon(&llm);
    let record = tokio::task::block_in_place(|| {
        let id = d.create_run("py", "raise things");
        d.wait_run(&id, Duration::from_secs(120))
    });
    assert_eq!(record["outcome"], "finished", "{record}");
    let outputs = tool_contents(&record);
    let expect = [
        "the disk is made of cheese",
        "refused on purpose",
        "argument 'mode': \"sideways\" is not one of \"value\", \"tool\", \"ok\"",
        "argument 'text': expected a string, got a number",
    ];
    for (i, words) in expect.iter().enumerate() {
        let o = &outputs[i];
        assert!(o.starts_with("Error"), "call {i} is not an error: {o}");
        assert!(o.contains(words), "call {i}: {o}");
    }
    assert!(outputs[4].contains("ok: still here"), "{outputs:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_python_tool_that_never_returns_is_stopped_at_the_step_deadline() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "spin in python",
        [Reply::call("py_loop", r#"{"n":1}"#), Reply::terminate()],
    );
    llm.push_for(
        "after the spin",
        [
            Reply::call("py_raise", r#"{"mode":"ok","text":"served"}"#),
            Reply::terminate(),
        ],
    );
    let d = daemon(&llm);
    let (ids, record) = tokio::task::block_in_place(|| {
        let id = d.create_run("py", "spin in python");
        let bystander = Bystander::start(&d, &llm);
        assert_status_within_a_second(&d);
        let record = d.wait_run(&id, Duration::from_secs(120));
        bystander.finish(&d);
        assert_status_within_a_second(&d);
        (vec![id, bystander.id], record)
    });
    assert_ended_because(&record, "error", &["plugin `py_loop`", "step deadline"]);
    // The daemon still runs Python tools afterwards.
    let after = tokio::task::block_in_place(|| {
        let id = d.create_run("py", "after the spin");
        d.wait_run(&id, Duration::from_secs(120))
    });
    assert_eq!(after["outcome"], "finished", "{after}");
    assert!(
        tool_contents(&after)
            .iter()
            .any(|o| o.contains("ok: served")),
        "{after}"
    );
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    assert_no_containers(&ids).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_strategy_written_in_python_drives_a_run() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "python thinks",
        [
            Reply::call("py_echo", r#"{"text":"from the python strategy"}"#),
            Reply::terminate(),
        ],
    );
    let d = daemon(&llm);
    let record = tokio::task::block_in_place(|| {
        let id = d.create_run("pystrat", "python thinks");
        d.wait_run(&id, Duration::from_secs(120))
    });
    assert_eq!(record["outcome"], "finished", "{record}");
    assert_eq!(record["steps"], 2, "{record}");
    assert!(
        tool_contents(&record)
            .iter()
            .any(|o| o == "from the python strategy"),
        "{record}"
    );
    // Its defaults: the system prompt it gave reached the model.
    let first = &llm.requests()[0];
    assert_eq!(first["messages"][0]["role"], "system", "{first}");
    assert_eq!(
        first["messages"][0]["content"], "You are a Python strategy.",
        "{first}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn fifty_concurrent_runs_using_a_python_tool_all_finish() {
    const RUNS: usize = 50;
    let llm = FakeLlm::start().await.expect("fake llm");
    for i in 0..RUNS {
        llm.push_for(
            &format!("echo job {i}"),
            [
                Reply::call("py_echo", &format!(r#"{{"text":"job {i} says hello"}}"#)),
                Reply::terminate(),
            ],
        );
    }
    let d = daemon(&llm);
    let records = tokio::task::block_in_place(|| {
        let ids: Vec<String> = (0..RUNS)
            .map(|i| d.create_run("py", &format!("echo job {i}")))
            .collect();
        ids.iter()
            .map(|id| d.wait_run(id, Duration::from_secs(300)))
            .collect::<Vec<_>>()
    });
    for (i, r) in records.iter().enumerate() {
        assert_eq!(r["outcome"], "finished", "run {i}: {r}");
        let outputs = tool_contents(r);
        assert!(
            outputs
                .iter()
                .any(|o| o.ends_with(&format!("executed:\njob {i} says hello"))),
            "run {i} did not get its own echo: {outputs:#?}"
        );
    }
    tokio::task::block_in_place(|| assert_status_within_a_second(&d));
}

/// A run's share of the instance pool (its strategy and eight tools) may be
/// Python instances all at once: the pool's core-instance total is sized
/// for 14 per instance (engine.rs), where the Rust-sized total (four per
/// instance) ran out at the eighth.
#[tokio::test(flavor = "multi_thread")]
async fn a_runs_whole_share_of_the_pool_may_be_python_instances() {
    common::built_python_plugins();
    let dir = common::plugins_dir(&["py_echo"]);
    let host = PluginHost::new(EngineLimits {
        max_concurrent_runs: 1,
    })
    .expect("plugin host")
    .with_cache_dir(common::daemon::shared_compile_cache())
    .expect("compile cache");
    let report = host.load_dir(dir.path()).await.expect("load");
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    let plugin = host.snapshot().tool("py_echo").expect("py_echo");
    let sandbox = NoSandbox::new("no sandbox here").for_run("pool");
    let mut live = Vec::new();
    for i in 0..agentd::plugin::engine::INSTANCES_PER_RUN {
        let mut tools = ToolBox::new(
            vec![plugin.clone()],
            sandbox.clone(),
            StepClock::new(),
            Default::default(),
            std::sync::Arc::new(agentd::plugin::NoHuman("no person here")),
        );
        let text = format!("instance {i}");
        let out = tools
            .invoke("py_echo", &serde_json::json!({ "text": text }).to_string())
            .await;
        assert_eq!(
            out.as_deref().ok(),
            Some(text.as_str()),
            "instance {i}: {:?}",
            out.as_ref().err()
        );
        live.push(tools);
    }
}

/// A loopback HTTP server answering every request with `body` (200,
/// text/plain), for as long as the test runs; returns its port.
fn serve_http(body: Vec<u8>) -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let body = body.clone();
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    match conn.read(&mut byte) {
                        Ok(1) => head.push(byte[0]),
                        _ => return,
                    }
                }
                let _ = write!(
                    conn,
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = conn.write_all(&body);
            });
        }
    });
    port
}

/// The SDK's `agentd.http` over the host's wasi:http: `http_get` reads a
/// response from an allowed loopback server, cut at `max_bytes`; a host
/// the allow-list refuses reaches the model as the host's own message. (The
/// grants themselves are tested with the grant probe tool.)
#[tokio::test(flavor = "multi_thread")]
async fn http_get_reads_an_allowed_host_within_its_size_cap_and_passes_a_refusal_on() {
    let body: Vec<u8> = (0..100_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let port = serve_http(body);
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "fetch it",
        [
            Reply::call(
                "http_get",
                &format!(r#"{{"url":"http://127.0.0.1:{port}/data?x=1","max_bytes":1000}}"#),
            ),
            Reply::call("http_get", r#"{"url":"http://example.invalid/"}"#),
            Reply::call("http_get", r#"{"url":"ftp://127.0.0.1/"}"#),
            Reply::terminate(),
        ],
    );
    common::built_python_plugins();
    let extra = format!(
        "{AGENTS}\n[agents.web]\nstrategy = \"toolcall\"\ntools = [\"http_get\", \"terminate\"]\n\n\
         [plugins.http_get]\nallow_hosts = [\"127.0.0.1:{port}\"]\n"
    );
    let d =
        tokio::task::block_in_place(|| Daemon::start_sharing_compile_cache(&llm, PLUGINS, &extra));
    let record = tokio::task::block_in_place(|| {
        let id = d.create_run("web", "fetch it");
        d.wait_run(&id, Duration::from_secs(120))
    });
    assert_eq!(record["outcome"], "finished", "{record}");
    let outputs = tool_contents(&record);
    assert!(
        outputs[0].contains("HTTP 200 (text/plain, 1000 bytes, cut at 1000)\n\nabcdefghij"),
        "{outputs:#?}"
    );
    let body = outputs[0].rsplit("\n\n").next().unwrap_or("");
    assert_eq!(body.len(), 1000, "the body was not cut at max_bytes");
    assert!(outputs[1].starts_with("Error"), "{outputs:#?}");
    assert!(
        outputs[1].contains("agentd refused the HTTP request to example.invalid:80")
            && outputs[1].contains("[plugins.http_get] allow_hosts"),
        "{outputs:#?}"
    );
    assert!(
        outputs[2].starts_with("Error") && outputs[2].contains("only http:// and https://"),
        "{outputs:#?}"
    );
}

/// `bytes` with a custom section appended: the same component to wasmtime,
/// new bytes (a new SHA-256) to the compile cache, which must compile it.
fn with_custom_section(mut bytes: Vec<u8>, payload: &[u8]) -> Vec<u8> {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let name = b"agentd-test";
    let mut body = Vec::new();
    leb(name.len(), &mut body);
    body.extend_from_slice(name);
    body.extend_from_slice(payload);
    bytes.push(0); // custom section
    leb(body.len(), &mut bytes);
    bytes.extend_from_slice(&body);
    bytes
}

/// Compiling a Python component (7-17 s of cranelift) holds up no run: a
/// run started while the daemon compiles one that was just dropped into its
/// plugins folder ends long before that compile does.
#[tokio::test(flavor = "multi_thread")]
async fn runs_go_on_while_a_new_python_component_compiles() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "during the compile",
        [
            Reply::call("py_raise", r#"{"mode":"ok","text":"not held up"}"#),
            Reply::terminate(),
        ],
    );
    let d = daemon(&llm);
    let built = common::built_python_plugins().join("py_echo.wasm");
    let fresh = with_custom_section(
        std::fs::read(&built).expect("read py_echo"),
        format!("{:?}", std::time::SystemTime::now()).as_bytes(),
    );
    let listed = |d: &Daemon| -> Option<Value> {
        let (_, list) = d.get("/v1/plugins");
        list["plugins"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| {
                p["file"]
                    .as_str()
                    .unwrap_or("")
                    .ends_with("fresh_echo.wasm")
            })
            .cloned()
    };
    let (record, listed_after_run, took) = tokio::task::block_in_place(|| {
        let tmp = d.plugins.path().join(".fresh_echo.wasm.tmp");
        std::fs::write(&tmp, &fresh).expect("write");
        std::fs::rename(&tmp, d.plugins.path().join("fresh_echo.wasm")).expect("rename");
        // The watcher reads a renamed file after 20 ms; give it time to be
        // well into the compile.
        std::thread::sleep(Duration::from_millis(500));
        let started = std::time::Instant::now();
        let id = d.create_run("py", "during the compile");
        let record = d.wait_run(&id, Duration::from_secs(120));
        let took = started.elapsed();
        (record, listed(&d), took)
    });
    assert_eq!(record["outcome"], "finished", "{record}");
    assert!(
        listed_after_run.is_none(),
        "the compile was over before the run ({took:?}), so this proves nothing: {listed_after_run:?}"
    );
    // The compile did happen: the file is listed once it is done (as a
    // conflict: `py_echo` already serves from py_echo.wasm).
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let entry = loop {
        if let Some(p) = tokio::task::block_in_place(|| listed(&d)) {
            break p;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the new file was never loaded"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(entry["status"], "conflict", "{entry}");
    assert!(
        d.log_text().contains("py_echo 0.1.0 loaded (compiled)"),
        "{}",
        d.log_text()
    );
}

/// Answers every question with who asked it and what.
struct Answering;

#[async_trait::async_trait]
impl AskHuman for Answering {
    async fn ask(&self, plugin: &str, question: String) -> Result<String, AskFailure> {
        Ok(format!("main ({plugin} asked {question:?})"))
    }
}

/// `agentd.ask_human` in a real component: the question reaches the run's
/// `AskHuman` under the tool's name and the answer comes back; with no one
/// to ask, the host's reason is the tool's error, code and text kept.
#[tokio::test(flavor = "multi_thread")]
async fn a_python_tool_asks_a_person_through_the_sdk() {
    common::built_python_plugins();
    let dir = common::plugins_dir(&["py_ask"]);
    let host = PluginHost::new(EngineLimits {
        max_concurrent_runs: 1,
    })
    .expect("plugin host")
    .with_cache_dir(common::daemon::shared_compile_cache())
    .expect("compile cache");
    let report = host.load_dir(dir.path()).await.expect("load");
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    let plugin = host.snapshot().tool("py_ask").expect("py_ask");
    assert_eq!(plugin.meta.contract, agentd::plugin::Contract::V0_2_2);
    let sandbox = NoSandbox::new("no sandbox here").for_run("ask");
    let human: [std::sync::Arc<dyn AskHuman>; 2] = [
        std::sync::Arc::new(Answering),
        std::sync::Arc::new(NoHuman("nobody is here to answer")),
    ];
    let [answering, nobody] = human;
    let mut tools = ToolBox::new(
        vec![plugin.clone()],
        sandbox.clone(),
        StepClock::new(),
        Default::default(),
        answering,
    );
    let answer = tools
        .invoke("py_ask", r#"{"question": "Which branch?"}"#)
        .await
        .expect("answered");
    assert_eq!(
        answer,
        r#"the person said: main (py_ask asked "Which branch?")"#
    );
    let mut tools = ToolBox::new(
        vec![plugin],
        sandbox,
        StepClock::new(),
        Default::default(),
        nobody,
    );
    match tools.invoke("py_ask", r#"{"question": "Anyone?"}"#).await {
        Err(ToolFailure::Reported(e)) => {
            assert_eq!(e.code, ErrorCode::Failed, "{e:?}");
            assert_eq!(e.message, "nobody is here to answer");
        }
        other => panic!("{other:?}"),
    }
}
