//! The `agentd` binary, spawned: `run --local`, its JSON record, its exit
//! codes and its error messages.

use crate::common;

use std::process::{Command, Output};

use agentd::testkit::{FakeLlm, Reply};
use common::daemon::Daemon;
use common::plugins_dir;

struct Env {
    llm: FakeLlm,
    _plugins: tempfile::TempDir,
    dir: tempfile::TempDir,
    config: std::path::PathBuf,
}

async fn env(extra: &str) -> Env {
    let plugins = plugins_dir(&["toolcall", "terminate", "echo", "misbehave"]);
    let llm = FakeLlm::start().await.expect("fake llm");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("agentd.toml");
    std::fs::write(
        &config,
        format!(
            "[llm]\nmodel = \"fake\"\nbase_url = \"{}\"\napi_key_env = \"AGENTD_TEST_KEY\"\nretry_backoff_ms = 10\n\n[daemon]\nplugins_dir = \"{}\"\nstate_dir = \"{}\"\n{extra}",
            llm.base_url(),
            plugins.path().display(),
            dir.path().display()
        ),
    )
    .expect("write config");
    Env {
        llm,
        _plugins: plugins,
        dir,
        config,
    }
}

fn agentd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agentd"))
        .args(args)
        .env_remove("AGENTD_CONFIG")
        .env("AGENTD_TEST_KEY", "sekrit")
        .output()
        .expect("spawn agentd")
}

/// The blocking child process must not block the fake server's runtime.
async fn agentd_async(args: Vec<String>) -> Output {
    tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        agentd(&refs)
    })
    .await
    .expect("join")
}

#[tokio::test(flavor = "multi_thread")]
async fn run_local_json_prints_the_record_and_exits_0() {
    let e = env("[agents.toolcall]\ntools = [\"echo\", \"terminate\"]\n").await;
    e.llm
        .push_all([Reply::call("echo", r#"{"text":"hi"}"#), Reply::terminate()]);
    let out = agentd_async(vec![
        "run".into(),
        "--local".into(),
        "--json".into(),
        "--config".into(),
        e.config.display().to_string(),
        "toolcall".into(),
        "greet me".into(),
    ])
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    let record: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON record");
    for key in [
        "id",
        "seq",
        "agent",
        "request",
        "state",
        "outcome",
        "steps",
        "max_steps",
        "result",
        "error",
        "messages",
        "usage",
        "created_at_ms",
        "started_at_ms",
        "ended_at_ms",
    ] {
        assert!(record.get(key).is_some(), "missing {key}: {record}");
    }
    assert_eq!(record["outcome"], "finished");
    assert_eq!(record["agent"], "toolcall");
    assert_eq!(record["request"], "greet me");
    assert_eq!(record["usage"]["prompt_tokens"], 20);
    assert_eq!(record["usage"]["completion_tokens"], 10);
    let messages = record["messages"].as_array().expect("messages");
    assert!(messages
        .iter()
        .any(|m| m["role"] == "tool" && m["tool_call_id"].is_string() && m["name"] == "terminate"));
    // Steps are shown on stderr as they happen.
    assert!(stderr.contains("step 1/30"), "{stderr}");
    assert!(stderr.contains("tool echo"), "{stderr}");
    // The API key came from the variable named by api_key_env.
    assert_eq!(
        e.llm.auth_headers(),
        [
            Some("Bearer sekrit".to_string()),
            Some("Bearer sekrit".to_string())
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn exit_codes_follow_the_outcome() {
    let e = env("[agents.toolcall]\nmax_steps = 2\n").await;
    e.llm.set_fallback(Reply::text("hmm"));
    let cfg = e.config.display().to_string();
    let out = agentd_async(vec![
        "run".into(),
        "--local".into(),
        "--config".into(),
        cfg.clone(),
        "toolcall".into(),
        "think".into(),
    ])
    .await;
    assert_eq!(out.status.code(), Some(3), "max_steps");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("Terminated: Reached max steps (2)"),
        "{stdout}"
    );

    let e2 = env("[agents.toolcall]\nmax_steps = 2\n[agents.crash]\nstrategy = \"misbehave\"\ntools = []\nsystem_prompt = \"trap\"\n").await;
    let out = agentd_async(vec![
        "run".into(),
        "--local".into(),
        "--config".into(),
        e2.config.display().to_string(),
        "crash".into(),
        "x".into(),
    ])
    .await;
    assert_eq!(out.status.code(), Some(1), "error");
    drop(e);
}

#[tokio::test(flavor = "multi_thread")]
async fn base_url_and_api_key_fall_back_to_the_openai_variables() {
    let plugins = plugins_dir(&["toolcall", "terminate"]);
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push(Reply::terminate());
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("agentd.toml");
    std::fs::write(
        &config,
        format!(
            "[llm]\nmodel = \"fake\"\n[daemon]\nplugins_dir = \"{}\"\n",
            plugins.path().display()
        ),
    )
    .expect("write");
    let base_url = llm.base_url();
    let config_arg = config.display().to_string();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_agentd"))
            .args(["run", "--local", "--config", &config_arg, "toolcall", "x"])
            .env_remove("AGENTD_CONFIG")
            .env("OPENAI_BASE_URL", base_url)
            .env("OPENAI_API_KEY", "from-env")
            .output()
            .expect("spawn")
    })
    .await
    .expect("join");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(llm.auth_headers(), [Some("Bearer from-env".to_string())]);
}

#[test]
fn bad_usage_and_bad_config_exit_2_with_the_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[llm]\nmodel = \"m\"\n\n[agents.x]\nstrategy = 3\n").expect("write");
    let out = agentd(&[
        "run",
        "--local",
        "--config",
        bad.to_str().expect("utf8"),
        "x",
        "y",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("{}:5", bad.display())), "{stderr}");
    assert!(stderr.contains("invalid type"), "{stderr}");

    let out = agentd(&["run", "--local"]);
    assert_eq!(out.status.code(), Some(2), "missing arguments");

    let good = dir.path().join("good.toml");
    std::fs::write(
        &good,
        format!("[daemon]\nplugins_dir = \"{}\"\n", dir.path().display()),
    )
    .expect("write");
    let out = agentd(&[
        "run",
        "--local",
        "--config",
        good.to_str().expect("utf8"),
        "nobody",
        "y",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unknown agent `nobody`") && stderr.contains("toolcall"),
        "{stderr}"
    );

    // An empty request, refused as the daemon refuses it.
    let out = agentd(&[
        "run",
        "--local",
        "--config",
        good.to_str().expect("utf8"),
        "toolcall",
        " \n",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("must not be empty"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn plugin_output_goes_to_the_log_with_the_plugin_name() {
    let e =
        env("[agents.printer]\nstrategy = \"misbehave\"\ntools = []\nsystem_prompt = \"print\"\n")
            .await;
    let out = agentd_async(vec![
        "run".into(),
        "--local".into(),
        "--config".into(),
        e.config.display().to_string(),
        "printer".into(),
        "x".into(),
    ])
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.contains("hello from stdout"))
        .unwrap_or_else(|| panic!("plugin stdout not logged: {stderr}"));
    assert!(line.contains("misbehave"), "{line}");
    assert!(stderr.contains("hello from stderr"), "{stderr}");
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("hello"),
        "stdout is for the result only"
    );
    drop(e.dir);
}

/// An agent whose memory window (4) is smaller than its transcript.
const SHORT_MEMORY: &str = "\n[agents.echoer]\nstrategy = \"toolcall\"\ntools = [\"echo\", \"terminate\"]\nmax_messages = 4\n";

fn echo_thrice(llm: &FakeLlm) {
    llm.push_all([
        Reply::call("echo", r#"{"text":"one"}"#),
        Reply::call("echo", r#"{"text":"two"}"#),
        Reply::call("echo", r#"{"text":"three"}"#),
        Reply::terminate(),
    ]);
}

/// `run --local --json` prints the daemon's record for the same run: the
/// same keys, the same values but for the run's id and times, and the whole
/// transcript rather than the window the model saw last.
#[tokio::test(flavor = "multi_thread")]
async fn run_local_json_prints_the_daemons_record_with_the_whole_transcript() {
    let e = env(SHORT_MEMORY).await;
    echo_thrice(&e.llm);
    let out = agentd_async(vec![
        "run".into(),
        "--local".into(),
        "--json".into(),
        "--config".into(),
        e.config.display().to_string(),
        "echoer".into(),
        "echo three times".into(),
    ])
    .await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut local: serde_json::Value = serde_json::from_slice(&out.stdout).expect("local record");

    let daemon_llm = FakeLlm::start().await.expect("fake llm");
    echo_thrice(&daemon_llm);
    let d = tokio::task::block_in_place(|| Daemon::start(&daemon_llm, SHORT_MEMORY));
    let out = tokio::task::block_in_place(|| {
        Command::new(env!("CARGO_BIN_EXE_agentd"))
            .arg("--socket")
            .arg(&d.socket)
            .args(["run", "--json", "echoer", "echo three times"])
            .env_remove("AGENTD_CONFIG")
            .env_remove("AGENTD_SOCKET")
            .output()
            .expect("run through the daemon")
    });
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut daemon: serde_json::Value = serde_json::from_slice(&out.stdout).expect("daemon record");

    let keys = |v: &serde_json::Value| -> Vec<String> {
        v.as_object().expect("object").keys().cloned().collect()
    };
    assert_eq!(keys(&local), keys(&daemon));
    assert_eq!(local["state"], "ended");
    assert_eq!(local["max_steps"], 30);
    let (created, started, ended) = (
        local["created_at_ms"].as_i64().expect("created"),
        local["started_at_ms"].as_i64().expect("started"),
        local["ended_at_ms"].as_i64().expect("ended"),
    );
    assert!(created <= started && started <= ended, "{local}");

    let messages = local["messages"].as_array().expect("messages");
    assert_eq!(
        messages[0],
        serde_json::json!({"role": "user", "content": "echo three times"})
    );
    // The request, then per step the assistant's call and the tool's answer
    // (and whatever else the strategy adds): far more than the window of 4.
    let echoes = messages
        .iter()
        .filter(|m| m["role"] == "tool" && m["name"] == "echo")
        .count();
    assert_eq!(echoes, 3, "{local}");
    assert!(messages.len() > 4 + 3, "{local}");

    // Everything else is the daemon's record, value for value, messages
    // included.
    for record in [&mut local, &mut daemon] {
        let o = record.as_object_mut().expect("object");
        for key in ["id", "seq", "created_at_ms", "started_at_ms", "ended_at_ms"] {
            o.remove(key);
        }
    }
    assert_eq!(local, daemon);
}

#[tokio::test(flavor = "multi_thread")]
async fn run_local_prints_each_plan_change_and_its_json_record_has_the_plan() {
    let e = env(
        "[agents.planner]\nstrategy = \"misbehave\"\ntools = []\nsystem_prompt = \"plan-story\"\nmax_steps = 5\n",
    )
    .await;
    let out = agentd_async(vec![
        "run".into(),
        "--local".into(),
        "--json".into(),
        "--config".into(),
        e.config.display().to_string(),
        "planner".into(),
        "greet me".into(),
    ])
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    assert!(
        stderr.contains("step 2/5\n  plan:\n    Greet the user\n      [x] say hi — said hi\n      [ ] say bye\n"),
        "{stderr}"
    );
    assert_eq!(stderr.matches("  plan:\n").count(), 2, "{stderr}");
    let record: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON record");
    assert_eq!(
        record["plan"],
        serde_json::json!({"title": "Greet the user", "steps": [
            {"text": "say hi", "status": "completed", "notes": "said hi"},
            {"text": "say bye", "status": "not_started", "notes": null},
        ]}),
        "{record}"
    );
}
