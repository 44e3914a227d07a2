//! The authoring kit end to end: `agentd plugin new` writes a project in a
//! temporary folder outside this repository, it is built with its own one
//! command, `plugin check`ed, `plugin call`ed (tools), `plugin install`ed
//! into a running daemon through its API, used by a run with the fake LLM,
//! and `plugin remove`d. Plus the install route's refusals, and `check` on
//! components with several problems.
//!
//! Rust projects build with `CARGO_TARGET_DIR` in this repository's
//! `target/kit-projects`, shared by every test: their dependencies
//! (wit-bindgen) compile once.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use agentd::testkit::{FakeLlm, Reply};
use common::daemon::{request, Daemon};
use serde_json::Value;

fn agentd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agentd"))
        .args(args)
        .env_remove("AGENTD_CONFIG")
        .env_remove("AGENTD_SOCKET")
        .output()
        .expect("run agentd")
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The target folder shared by every kit project these tests build.
fn kit_target() -> PathBuf {
    common::repo_root().join("target/kit-projects")
}

/// `cargo ARGS` in `project`, as an author would run it there.
fn cargo(project: &Path, args: &[&str]) {
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(args)
        .current_dir(project)
        .env("CARGO_TARGET_DIR", kit_target())
        // This test's own flags are for the host crate, not the project.
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .output()
        .expect("run cargo");
    assert!(
        out.status.success(),
        "cargo {args:?} in {}:\n{}",
        project.display(),
        text(&out)
    );
}

/// `agentd plugin new --kind KIND --lang LANG NAME` into `parent/NAME`,
/// which must be outside the repository; returns the project folder.
fn plugin_new(parent: &Path, kind: &str, lang: &str, name: &str) -> PathBuf {
    let project = parent.join(name);
    let out = agentd(&[
        "plugin",
        "new",
        "--kind",
        kind,
        "--lang",
        lang,
        name,
        project.to_str().expect("utf-8 path"),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        !project.starts_with(common::repo_root()),
        "the project must be outside the repository"
    );
    project
}

/// `agentd plugin new`, then the project's build and its native tests;
/// returns the project folder (kept alive by `parent`) and the component.
fn new_rust_project(parent: &Path, kind: &str, name: &str) -> (PathBuf, PathBuf) {
    let project = plugin_new(parent, kind, "rust", name);
    build_rust_project(&project, name)
}

fn build_rust_project(project: &Path, name: &str) -> (PathBuf, PathBuf) {
    cargo(
        project,
        &["build", "--release", "--target", "wasm32-wasip2"],
    );
    let wasm = kit_target().join(format!("wasm32-wasip2/release/{name}.wasm"));
    assert!(wasm.is_file(), "no component at {}", wasm.display());
    // A copy of this build's component: another test's build of the same
    // name cannot change it under this one.
    let copy = project.join(format!("{name}.wasm"));
    std::fs::copy(&wasm, &copy).expect("copy the component");
    (project.to_path_buf(), copy)
}

fn check_json(wasm: &Path) -> (Output, Value) {
    let out = agentd(&["plugin", "check", "--json", wasm.to_str().expect("utf-8")]);
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("check --json is not JSON ({e}):\n{}", text(&out)));
    (out, report)
}

fn socket_arg(d: &Daemon) -> String {
    d.socket.display().to_string()
}

fn plugin_status(d: &Daemon, name: &str) -> Option<Value> {
    let (status, v) = d.get("/v1/plugins");
    assert_eq!(status, 200, "{v}");
    v["plugins"]
        .as_array()
        .expect("plugins")
        .iter()
        .find(|p| p["name"] == name)
        .cloned()
}

/// Installs `wasm` with `agentd plugin install` and checks it serves from
/// `<plugins>/<name>.wasm`, mode 0644.
fn install(d: &Daemon, wasm: &Path, name: &str) {
    let out = agentd(&[
        "plugin",
        "install",
        "--socket",
        &socket_arg(d),
        wasm.to_str().expect("utf-8"),
    ]);
    assert!(out.status.success(), "{}\n{}", text(&out), d.log_text());
    assert!(
        stdout(&out).contains(&format!("installed {name} ")),
        "{}",
        text(&out)
    );
    let status = plugin_status(d, name).expect("listed after install");
    assert_eq!(status["status"], "loaded", "{status}");
    let file = d.plugins.path().join(format!("{name}.wasm"));
    assert_eq!(status["file"], file.display().to_string());
    let mode = std::fs::metadata(&file)
        .expect("installed file")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o644, "{mode:o}");
}

fn remove(d: &Daemon, name: &str) {
    let out = agentd(&["plugin", "remove", "--socket", &socket_arg(d), name]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        plugin_status(d, name).is_none(),
        "still listed after remove"
    );
    assert!(!d.plugins.path().join(format!("{name}.wasm")).exists());
}

fn tool_messages(record: &Value) -> Vec<String> {
    record["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rust_tool_from_new_to_a_run() {
    let parent = tempfile::tempdir().expect("tempdir");
    let (_project, wasm) = tokio::task::block_in_place(|| {
        let built = new_rust_project(parent.path(), "tool", "kit_tool");
        cargo(&built.0, &["test"]);
        built
    });

    let (out, report) = check_json(&wasm);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(report["ok"], true, "{report:#}");
    assert_eq!(report["world"], "tool");
    assert_eq!(report["metadata"]["name"], "kit_tool");
    assert_eq!(report["spec"]["parameters"]["type"], "object");
    assert!(report["problems"].as_array().expect("problems").is_empty());
    let human = agentd(&["plugin", "check", wasm.to_str().expect("utf-8")]);
    assert!(
        stdout(&human).contains("the daemon would load it"),
        "{}",
        text(&human)
    );

    // The author's inner loop: no daemon, no model.
    let file = wasm.to_str().expect("utf-8");
    let called = agentd(&["plugin", "call", file, r#"{"text": "one two three"}"#]);
    assert!(called.status.success(), "{}", text(&called));
    assert_eq!(stdout(&called).trim(), "3 words, 1 lines, 13 characters");
    let refused = agentd(&["plugin", "call", file, r#"{"text": ""}"#]);
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("invalid-input: `text` is empty"),
        "{}",
        text(&refused)
    );

    let llm = FakeLlm::start().await.expect("fake LLM");
    llm.push(Reply::call("kit_tool", r#"{"text": "one two three"}"#));
    llm.push(Reply::terminate());
    let extra = "\n[agents.kit]\nstrategy = \"toolcall\"\ntools = [\"kit_tool\", \"terminate\"]\n";
    let d = tokio::task::block_in_place(|| Daemon::start(&llm, extra));
    tokio::task::block_in_place(|| install(&d, &wasm, "kit_tool"));

    // By name, from the folder the configuration names.
    let by_name = agentd(&[
        "plugin",
        "call",
        "--config",
        d.config.to_str().expect("utf-8"),
        "kit_tool",
        r#"{"text": "a b"}"#,
    ]);
    assert!(by_name.status.success(), "{}", text(&by_name));
    assert_eq!(stdout(&by_name).trim(), "2 words, 1 lines, 3 characters");

    let record = tokio::task::block_in_place(|| {
        let id = d.create_run("kit", "count the words");
        d.wait_run(&id, Duration::from_secs(60))
    });
    assert_eq!(record["outcome"], "finished", "{record:#}");
    let outputs = tool_messages(&record);
    assert!(
        outputs
            .iter()
            .any(|o| o.contains("3 words, 1 lines, 13 characters")),
        "{outputs:?}"
    );
    tokio::task::block_in_place(|| remove(&d, "kit_tool"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rust_strategy_from_new_to_a_run() {
    let parent = tempfile::tempdir().expect("tempdir");
    let (_project, wasm) = tokio::task::block_in_place(|| {
        let built = new_rust_project(parent.path(), "strategy", "kit_strategy");
        cargo(&built.0, &["test"]);
        built
    });
    let (out, report) = check_json(&wasm);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(report["world"], "strategy", "{report:#}");
    assert_eq!(report["defaults"]["max_steps"], 10);
    // A strategy is not called on its own.
    let called = agentd(&["plugin", "call", wasm.to_str().expect("utf-8"), "{}"]);
    assert_eq!(called.status.code(), Some(2), "{}", text(&called));

    let llm = FakeLlm::start().await.expect("fake LLM");
    llm.push(Reply::call("echo", r#"{"text": "echoed by the kit"}"#));
    llm.push(Reply::text("all done"));
    let extra = "\n[agents.kit]\nstrategy = \"kit_strategy\"\ntools = [\"echo\", \"terminate\"]\n";
    let d = tokio::task::block_in_place(|| Daemon::start(&llm, extra));
    tokio::task::block_in_place(|| install(&d, &wasm, "kit_strategy"));
    let record = tokio::task::block_in_place(|| {
        let id = d.create_run("kit", "echo something");
        d.wait_run(&id, Duration::from_secs(60))
    });
    assert_eq!(record["outcome"], "finished", "{record:#}");
    assert_eq!(
        record["result"].as_str().map(|r| r.contains("all done")),
        Some(true),
        "{record:#}"
    );
    assert_eq!(tool_messages(&record), ["echoed by the kit"]);
    tokio::task::block_in_place(|| remove(&d, "kit_strategy"));
}

/// Every refusal of `PUT` and `DELETE /v1/plugins/{name}`, in the API's
/// error shape, and what a success writes.
#[tokio::test(flavor = "multi_thread")]
async fn the_install_route_validates_before_it_writes() {
    let llm = FakeLlm::start().await.expect("fake LLM");
    // A request body limit far below a component, a plugin limit above one.
    let extra = "max_request_bytes = \"16k\"\nmax_plugin_bytes = \"1m\"";
    let d = tokio::task::block_in_place(|| {
        Daemon::start_with_plugins(
            &llm,
            &[
                ("toolcall.wasm", "toolcall"),
                ("terminate.wasm", "terminate"),
            ],
            extra,
        )
    });
    let echo = std::fs::read(common::built_plugins().join("echo.wasm")).expect("echo.wasm");
    assert!(
        echo.len() > 16 << 10,
        "echo.wasm must be larger than max_request_bytes"
    );
    let put = |name: &str, body: &[u8]| {
        request(&d.socket, "PUT", &format!("/v1/plugins/{name}"), Some(body))
    };
    let files = || -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(d.plugins.path())
            .expect("plugins folder")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let before = files();

    let (status, v) = put("echo", b"\x13\x37 certainly not wasm");
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["error"]["code"], "invalid_plugin", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("not a valid WebAssembly component"),
        "{v}"
    );
    let (status, v) = put("other_name", &echo);
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["error"]["code"], "name_mismatch", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("`echo`"),
        "{v}"
    );
    let (status, v) = put("..", &echo);
    assert_eq!(status, 400, "{v}");
    let (status, v) = put("echo", &[0u8; 0]);
    assert_eq!(status, 400, "{v}");
    let (status, v) = put("echo", &vec![0u8; 2 << 20]);
    assert_eq!(status, 413, "{v}");
    assert_eq!(v["error"]["code"], "payload_too_large", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("max_plugin_bytes"),
        "{v}"
    );
    assert_eq!(files(), before, "nothing refused may touch the folder");

    // Installed: written 0644 under its name, loaded before the answer.
    let (status, v) = put("echo", &echo);
    assert_eq!(status, 201, "{v}");
    assert_eq!(v["status"], "loaded", "{v}");
    assert_eq!(v["name"], "echo");
    assert_eq!(v["kind"], "tool");
    let file = d.plugins.path().join("echo.wasm");
    assert_eq!(v["file"], file.display().to_string());
    assert_eq!(std::fs::read(&file).expect("installed"), echo);
    let mode = std::fs::metadata(&file)
        .expect("installed")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o644, "{mode:o}");
    assert_eq!(
        plugin_status(&d, "echo").expect("listed"),
        v,
        "the answer is the listed record"
    );
    // No temp file is left behind.
    assert_eq!(files().len(), before.len() + 1, "{:?}", files());
    // Again: a replacement, 200.
    let (status, v) = put("echo", &echo);
    assert_eq!(status, 200, "{v}");

    // Removed, then the name served from another file: a conflict.
    let (status, v) = request(&d.socket, "DELETE", "/v1/plugins/echo", None);
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["name"], "echo");
    assert!(!file.exists());
    assert!(plugin_status(&d, "echo").is_none());
    let (status, v) = request(&d.socket, "DELETE", "/v1/plugins/echo", None);
    assert_eq!(status, 404, "{v}");
    assert_eq!(v["error"]["code"], "not_found", "{v}");
    std::fs::write(d.plugins.path().join("alias.wasm"), &echo).expect("write alias");
    let (status, v) = d.post("/v1/plugins/reload", "");
    assert_eq!(status, 200, "{v}");
    let (status, v) = put("echo", &echo);
    assert_eq!(status, 409, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("alias.wasm"),
        "{v}"
    );
}

/// `check` lists every problem of a component, not the first, and exits 1.
#[tokio::test(flavor = "multi_thread")]
async fn check_lists_every_problem() {
    let dir = tempfile::tempdir().expect("tempdir");

    // Not wasm at all.
    let junk = dir.path().join("junk.wasm");
    std::fs::write(&junk, b"not wasm").expect("write");
    let (out, report) = check_json(&junk);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(report["problems"][0]
        .as_str()
        .unwrap_or("")
        .contains("not a valid WebAssembly component"));

    // A component that imports what agentd does not provide and exports
    // neither world: both said.
    let foreign = dir.path().join("foreign.wasm");
    let bytes =
        wat::parse_str(r#"(component (import "acme:db/query@1.0.0" (instance)))"#).expect("wat");
    std::fs::write(&foreign, bytes).expect("write");
    let (out, report) = check_json(&foreign);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let problems: Vec<&str> = report["problems"]
        .as_array()
        .expect("problems")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        problems
            .iter()
            .any(|p| p.contains("`acme:db/query@1.0.0`, which agentd does not provide")),
        "{problems:#?}"
    );
    assert!(
        problems.iter().any(|p| p.contains("exports neither")),
        "{problems:#?}"
    );

    // A tool that loads but whose spec is wrong three ways.
    let (project, _) = tokio::task::block_in_place(|| {
        let project = dir.path().join("broken_tool");
        let out = agentd(&[
            "plugin",
            "new",
            "--kind",
            "tool",
            "broken_tool",
            project.to_str().expect("utf-8"),
        ]);
        assert!(out.status.success(), "{}", text(&out));
        let lib = project.join("src/lib.rs");
        let source = std::fs::read_to_string(&lib).expect("lib.rs");
        let start = source.find("const PARAMETERS").expect("PARAMETERS");
        let end = start + source[start..].find("}\"#;").expect("end of PARAMETERS") + 4;
        let source = format!(
            "{}const PARAMETERS: &str = r#\"{{\"type\":\"object\",\"properties\":{{\"text\":{{\"type\":\"strng\"}}}},\"required\":[\"txt\"]}}\"#;{}",
            &source[..start],
            &source[end..]
        )
        .replace(
            "const DESCRIPTION: &str = \"Counts the words, lines and characters of a text.\";",
            "const DESCRIPTION: &str = \"\";",
        );
        std::fs::write(&lib, source).expect("write lib.rs");
        (project.clone(), ())
    });
    let (_, wasm) = tokio::task::block_in_place(|| build_rust_project(&project, "broken_tool"));
    let (out, report) = check_json(&wasm);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let problems: Vec<&str> = report["problems"]
        .as_array()
        .expect("problems")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for want in [
        "`strng` is not a JSON Schema type",
        "`txt` is not among the properties",
        "spec().description is empty",
    ] {
        assert!(
            problems.iter().any(|p| p.contains(want)),
            "{want}: {problems:#?}"
        );
    }
    let human = agentd(&["plugin", "check", wasm.to_str().expect("utf-8")]);
    assert_eq!(human.status.code(), Some(1));
    assert!(
        stdout(&human).contains(&format!("{} problem(s):", problems.len())),
        "{}",
        text(&human)
    );
}

/// `plugin call` has no run, so nobody can answer the bundled `ask_human`:
/// the call fails saying so (rather than waiting), and bad arguments get the
/// tool's own clear refusal.
#[test]
fn call_of_ask_human_says_no_one_can_be_asked() {
    let plugins = common::plugins_dir(&["ask_human"]);
    let wasm = plugins.path().join("ask_human.wasm");
    let file = wasm.to_str().expect("utf-8");
    let asked = agentd(&["plugin", "call", file, r#"{"inquire": "Anyone there?"}"#]);
    assert_eq!(asked.status.code(), Some(1), "{}", text(&asked));
    assert!(
        String::from_utf8_lossy(&asked.stderr)
            .contains("tool `ask_human` failed: failed: `agentd plugin call` has no person to ask"),
        "{}",
        text(&asked)
    );
    let bad = agentd(&["plugin", "call", file, r#"{"question": "Anyone?"}"#]);
    assert_eq!(bad.status.code(), Some(1), "{}", text(&bad));
    assert!(
        String::from_utf8_lossy(&bad.stderr)
            .contains("invalid-input: invalid arguments: missing field `inquire`"),
        "{}",
        text(&bad)
    );
}

#[test]
fn wit_prints_the_contract_or_writes_it_with_its_deps() {
    let out = agentd(&["plugin", "wit"]);
    assert!(out.status.success(), "{}", text(&out));
    let newest = std::fs::read_to_string(common::repo_root().join("wit/since_v0.2.4/agentd.wit"))
        .expect("wit");
    assert_eq!(stdout(&out), newest);
    let dir = tempfile::tempdir().expect("tempdir");
    let out = agentd(&[
        "plugin",
        "wit",
        "--out",
        dir.path().to_str().expect("utf-8"),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("agentd.wit")).expect("written"),
        newest
    );
    assert!(dir.path().join("deps/http.wit").is_file());
    let old = agentd(&["plugin", "wit", "--contract", "0.2.0"]);
    assert!(
        stdout(&old).contains("package agentd:plugin@0.2.0;"),
        "{}",
        text(&old)
    );
    let unknown = agentd(&["plugin", "wit", "--contract", "9.9.9"]);
    assert_eq!(unknown.status.code(), Some(2));
}

#[test]
fn new_refuses_a_folder_in_use_and_names_that_cannot_be_crates() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("keep.txt"), "mine").expect("write");
    let busy = agentd(&[
        "plugin",
        "new",
        "--kind",
        "tool",
        "demo",
        dir.path().to_str().expect("utf-8"),
    ]);
    assert_eq!(busy.status.code(), Some(2), "{}", text(&busy));
    assert!(String::from_utf8_lossy(&busy.stderr).contains("not empty"));
    let bad = agentd(&[
        "plugin",
        "new",
        "--kind",
        "tool",
        "My-Tool",
        dir.path().join("x").to_str().expect("utf-8"),
    ]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
}

/// componentize-py as this repository's own Python plugins get it:
/// pinned, installed on first use by `scripts/ensure-componentize-py.sh`.
fn componentize_py() -> String {
    let script = common::repo_root().join("scripts/ensure-componentize-py.sh");
    let out = Command::new(&script)
        .arg("--print")
        .output()
        .expect("run scripts/ensure-componentize-py.sh");
    assert!(out.status.success(), "{}", text(&out));
    stdout(&out).trim().to_string()
}

/// `agentd plugin new --lang python`, its native tests (`make test`) and
/// its build (`./build.sh`); returns the component.
fn new_python_project(parent: &Path, kind: &str, name: &str, cpy: &str) -> PathBuf {
    let project = plugin_new(parent, kind, "python", name);
    let tests = Command::new("make")
        .arg("test")
        .current_dir(&project)
        .output()
        .expect("make test");
    assert!(tests.status.success(), "make test:\n{}", text(&tests));
    let build = Command::new("./build.sh")
        .current_dir(&project)
        .env("COMPONENTIZE_PY", cpy)
        .output()
        .expect("./build.sh");
    assert!(build.status.success(), "./build.sh:\n{}", text(&build));
    let wasm = project.join(format!("{name}.wasm"));
    assert!(wasm.is_file());
    wasm
}

#[tokio::test(flavor = "multi_thread")]
async fn a_python_tool_from_new_to_a_run() {
    let cpy = componentize_py();
    let parent = tempfile::tempdir().expect("tempdir");
    let wasm = tokio::task::block_in_place(|| {
        new_python_project(parent.path(), "tool", "py_kit_tool", &cpy)
    });
    let (out, report) = check_json(&wasm);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(report["world"], "tool", "{report:#}");
    assert_eq!(
        report["spec"]["parameters"]["properties"]["text"]["type"], "string",
        "{report:#}"
    );
    let file = wasm.to_str().expect("utf-8");
    let called = agentd(&["plugin", "call", file, r#"{"text": "one two three"}"#]);
    assert!(called.status.success(), "{}", text(&called));
    assert_eq!(stdout(&called).trim(), "3 words, 1 lines, 13 characters");
    let refused = agentd(&["plugin", "call", file, r#"{"text": ""}"#]);
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused));

    let llm = FakeLlm::start().await.expect("fake LLM");
    llm.push(Reply::call("py_kit_tool", r#"{"text": "one two three"}"#));
    llm.push(Reply::terminate());
    let extra =
        "\n[agents.kit]\nstrategy = \"toolcall\"\ntools = [\"py_kit_tool\", \"terminate\"]\n";
    let d = tokio::task::block_in_place(|| Daemon::start(&llm, extra));
    tokio::task::block_in_place(|| install(&d, &wasm, "py_kit_tool"));
    let record = tokio::task::block_in_place(|| {
        let id = d.create_run("kit", "count the words");
        d.wait_run(&id, Duration::from_secs(120))
    });
    assert_eq!(record["outcome"], "finished", "{record:#}");
    assert!(
        tool_messages(&record).iter().any(|o| o.contains("3 words")),
        "{record:#}"
    );
    tokio::task::block_in_place(|| remove(&d, "py_kit_tool"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_python_strategy_from_new_to_a_run() {
    let cpy = componentize_py();
    let parent = tempfile::tempdir().expect("tempdir");
    let wasm = tokio::task::block_in_place(|| {
        new_python_project(parent.path(), "strategy", "py_kit_strategy", &cpy)
    });
    let (out, report) = check_json(&wasm);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(report["world"], "strategy", "{report:#}");

    let llm = FakeLlm::start().await.expect("fake LLM");
    llm.push(Reply::call("echo", r#"{"text": "echoed by python"}"#));
    llm.push(Reply::text("all done"));
    let extra =
        "\n[agents.kit]\nstrategy = \"py_kit_strategy\"\ntools = [\"echo\", \"terminate\"]\n";
    let d = tokio::task::block_in_place(|| Daemon::start(&llm, extra));
    tokio::task::block_in_place(|| install(&d, &wasm, "py_kit_strategy"));
    let record = tokio::task::block_in_place(|| {
        let id = d.create_run("kit", "echo something");
        d.wait_run(&id, Duration::from_secs(120))
    });
    assert_eq!(record["outcome"], "finished", "{record:#}");
    assert_eq!(tool_messages(&record), ["echoed by python"]);
    tokio::task::block_in_place(|| remove(&d, "py_kit_strategy"));
}

/// `plugin call` of a tool that uses the sandbox: the container is made for
/// the call (the command runs in it, as the image's `sandbox` user) and
/// removed after it, whether the tool answered or failed. Needs a Docker
/// engine and the sandbox images (scripts/ensure-docker.sh,
/// scripts/build-images.sh).
#[tokio::test(flavor = "multi_thread")]
async fn call_gives_a_sandbox_tool_a_container_and_removes_it() {
    let plugins = common::plugins_dir(&["bash", "str_replace_editor"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("agentd.toml");
    std::fs::write(
        &config,
        format!(
            "[daemon]\nplugins_dir = \"{}\"\nstate_dir = \"{}\"\n\n[sandbox]\nimage = \"agentd-sandbox-tiny:latest\"\n",
            plugins.path().display(),
            dir.path().join("state").display()
        ),
    )
    .expect("write config");
    let config = config.to_str().expect("utf-8");
    let ran = agentd(&[
        "plugin",
        "call",
        "--config",
        config,
        "bash",
        r#"{"command": "echo in the box; whoami"}"#,
    ]);
    assert!(ran.status.success(), "{}", text(&ran));
    assert_eq!(stdout(&ran), "in the box\nsandbox\n");
    let failed = agentd(&[
        "plugin",
        "call",
        "--config",
        config,
        "str_replace_editor",
        r#"{"command": "view", "path": "/nonexistent"}"#,
    ]);
    assert_eq!(failed.status.code(), Some(1), "{}", text(&failed));
    assert!(
        String::from_utf8_lossy(&failed.stderr).contains("does not exist"),
        "{}",
        text(&failed)
    );
    let left: Vec<String> = common::containers_labelled("agentd.managed=true")
        .await
        .into_iter()
        .filter_map(|c| c.labels?.get("agentd.run").cloned())
        .filter(|run| run.starts_with("call-"))
        .collect();
    assert!(
        left.is_empty(),
        "containers left behind by plugin call: {left:?}"
    );
}

/// A socket user who cannot write the plugins folder installs and removes a
/// plugin all the same: the daemon writes the file, as its own user. Needs
/// root, to run the client as `nobody` (allowed on the socket through
/// `socket_group = "nogroup"`, its primary group).
#[tokio::test(flavor = "multi_thread")]
async fn a_user_without_write_access_to_the_folder_installs() {
    use std::os::unix::process::CommandExt;
    // SAFETY: geteuid has no preconditions.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test runs a client as nobody and needs root"
    );
    let llm = FakeLlm::start().await.expect("fake LLM");
    let d = tokio::task::block_in_place(|| {
        Daemon::start_with_plugins(
            &llm,
            &[("toolcall.wasm", "toolcall")],
            "socket_group = \"nogroup\"\n\n[plugins.terminate]\nenv = { MODE = \"x\" }",
        )
    });
    tokio::task::block_in_place(|| {
        let open = |path: &Path, mode: u32| {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod")
        };
        // `nobody` may reach the socket and read what it installs; the
        // plugins folder stays root's, writable by root only.
        open(d.dir.path(), 0o755);
        let client = d.dir.path().join("agentd-client");
        std::fs::copy(env!("CARGO_BIN_EXE_agentd"), &client).expect("copy the client");
        open(&client, 0o755);
        let wasm = d.dir.path().join("echo.wasm");
        std::fs::copy(common::built_plugins().join("echo.wasm"), &wasm).expect("copy echo");
        open(&wasm, 0o644);
        let as_nobody = |args: &[&str]| {
            Command::new(&client)
                .args(args)
                .arg("--socket")
                .arg(&d.socket)
                .uid(65534)
                .gid(65534)
                .env_remove("AGENTD_CONFIG")
                .output()
                .expect("run the client as nobody")
        };
        // nobody cannot write the plugins folder itself.
        let touch = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "touch '{}/planted.wasm'",
                d.plugins.path().display()
            ))
            .uid(65534)
            .gid(65534)
            .output()
            .expect("sh as nobody");
        assert!(
            !touch.status.success(),
            "nobody could write the plugins folder"
        );
        let installed = as_nobody(&["plugin", "install", wasm.to_str().expect("utf-8")]);
        assert!(
            installed.status.success(),
            "{}\n{}",
            text(&installed),
            d.log_text()
        );
        let status = plugin_status(&d, "echo").expect("listed");
        assert_eq!(status["status"], "loaded", "{status}");
        let removed = as_nobody(&["plugin", "remove", "echo"]);
        assert!(removed.status.success(), "{}", text(&removed));
        assert!(plugin_status(&d, "echo").is_none());

        // A name holding grants (here `env`) is the operator's: nobody may
        // not put a component under it, root may.
        let terminate = d.dir.path().join("terminate.wasm");
        std::fs::copy(common::built_plugins().join("terminate.wasm"), &terminate)
            .expect("copy terminate");
        open(&terminate, 0o644);
        let refused = as_nobody(&["plugin", "install", terminate.to_str().expect("utf-8")]);
        assert!(!refused.status.success(), "{}", text(&refused));
        assert!(
            text(&refused).contains("[plugins.terminate]") && text(&refused).contains("env"),
            "{}",
            text(&refused)
        );
        assert!(plugin_status(&d, "terminate").is_none());
        let bytes = std::fs::read(&terminate).expect("read");
        let (code, body) =
            common::daemon::request(&d.socket, "PUT", "/v1/plugins/terminate", Some(&bytes));
        assert_eq!(code, 201, "root installs it: {body}");
    });
}

/// An install on a full disk is `507 insufficient_storage` naming the
/// folder, leaves nothing behind (no temp file, no plugin), and works once
/// there is room. Needs root (a tmpfs is the plugins folder).
#[tokio::test(flavor = "multi_thread")]
async fn an_install_on_a_full_disk_is_507_and_leaves_nothing() {
    let llm = FakeLlm::start().await.expect("fake LLM");
    let mut d = Daemon::unstarted(&llm, "");
    let disk = common::tmpfs::Tmpfs::mount(d.plugins.path(), "1m");
    tokio::task::block_in_place(|| d.spawn(&[]));
    let filler = disk.fill();
    let echo = std::fs::read(common::built_plugins().join("echo.wasm")).expect("echo.wasm");
    let (status, v) = request(&d.socket, "PUT", "/v1/plugins/echo", Some(&echo));
    assert_eq!(status, 507, "{v}");
    assert_eq!(v["error"]["code"], "insufficient_storage", "{v}");
    let message = v["error"]["message"].as_str().unwrap_or("");
    assert!(
        message.contains(&d.plugins.path().display().to_string()) && message.contains("full"),
        "{v}"
    );
    let left: Vec<String> = std::fs::read_dir(d.plugins.path())
        .expect("plugins folder")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["filler"], "nothing but the filler may be left");
    assert!(plugin_status(&d, "echo").is_none());
    std::fs::remove_file(filler).expect("make room");
    let (status, v) = request(&d.socket, "PUT", "/v1/plugins/echo", Some(&echo));
    assert_eq!(status, 201, "{v}");
    drop(d);
}
