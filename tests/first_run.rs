//! A new user's first runs: no LLM endpoint configured, an endpoint with no
//! server behind it, and no plugins installed. Each must end at once with
//! the fix, or work from the plugins shipped beside the binary, instead of
//! failing after seconds of retries.

use crate::common;

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use agentd::testkit::{FakeLlm, Reply};
use common::daemon::Daemon;
use common::plugins_dir;
use serde_json::Value;

/// `agentd` with nothing of the caller's environment that could configure
/// an endpoint or a bundle, plus `env`.
fn agentd(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = common::scrubbed(env!("CARGO_BIN_EXE_agentd"));
    cmd.args(args).env("AGENTD_LOG", "warn");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("spawn agentd")
}

/// `run --local --json` of the `toolcall` agent on `config`, and how long
/// it took.
fn run_local(config: &Path, env: &[(&str, &str)]) -> (Output, Value, Duration) {
    let started = Instant::now();
    let config = config.display().to_string();
    let out = agentd(
        &[
            "run",
            "--local",
            "--json",
            "--config",
            &config,
            "toolcall",
            "Say hello",
        ],
        env,
    );
    let took = started.elapsed();
    let record = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out, record, took)
}

/// A loopback port nothing listens on: bound, then closed.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

fn write_config(dir: &Path, plugins: &Path, llm: &str) -> std::path::PathBuf {
    let config = dir.join("agentd.toml");
    std::fs::write(
        &config,
        format!(
            "{llm}\n[daemon]\nplugins_dir = \"{}\"\nstate_dir = \"{}\"\n",
            plugins.display(),
            dir.display()
        ),
    )
    .expect("write config");
    config
}

/// The run's own clock (the record's start and end), so the time it took
/// the process to start and load plugins does not count.
fn assert_ended_within_a_second(record: &Value, took: Duration) {
    let started = record["started_at_ms"].as_u64().expect("started_at_ms");
    let ended = record["ended_at_ms"].as_u64().expect("ended_at_ms");
    assert!(
        ended - started < 1000,
        "the run took {} ms (the process {took:?}): {record}",
        ended - started
    );
}

fn assert_has_the_three_examples(text: &str) {
    for needle in [
        "https://api.openai.com/v1",
        "http://127.0.0.1:11434/v1",
        "http://127.0.0.1:8080/v1",
        "base_url = ",
        "model = ",
    ] {
        assert!(text.contains(needle), "no `{needle}` in: {text}");
    }
}

#[test]
fn with_no_endpoint_configured_a_run_ends_error_at_once_with_the_examples() {
    let plugins = plugins_dir(&["toolcall", "terminate"]);
    let dir = tempfile::tempdir().expect("tempdir");
    // No [llm] at all, no $OPENAI_BASE_URL, no key.
    let config = write_config(dir.path(), plugins.path(), "");
    let (out, record, took) = run_local(&config, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert_eq!(record["outcome"], "error", "{record}");
    let error = record["error"].as_str().expect("error text");
    assert!(
        error.contains("LLM is not configured: no endpoint is set"),
        "error: {error}"
    );
    assert_has_the_three_examples(error);
    // Nothing was tried, so nothing was retried.
    assert!(!stderr.contains("retrying"), "stderr: {stderr}");
    assert_ended_within_a_second(&record, took);
}

#[test]
fn an_endpoint_that_refuses_connections_fails_the_first_step_with_help() {
    let plugins = plugins_dir(&["toolcall", "terminate"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("http://127.0.0.1:{}/v1", closed_port());
    // Retries configured generously: none may be spent on a missing server.
    let config = write_config(
        dir.path(),
        plugins.path(),
        &format!("[llm]\nmodel = \"m\"\nbase_url = \"{url}\"\nmax_retries = 4\nretry_backoff_ms = 1000\n"),
    );
    let (out, record, took) = run_local(&config, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert_eq!(record["outcome"], "error", "{record}");
    assert_eq!(record["steps"], 1, "{record}");
    let error = record["error"].as_str().expect("error text");
    assert!(error.contains("is unreachable"), "error: {error}");
    assert!(error.contains("is the server running?"), "error: {error}");
    assert!(error.contains(&url), "error: {error}");
    assert_has_the_three_examples(error);
    assert!(!stderr.contains("retrying"), "stderr: {stderr}");
    // With these retry settings, retrying would take seconds.
    assert_ended_within_a_second(&record, took);

    // A name that does not resolve is the same kind of mistake.
    let config = write_config(
        dir.path(),
        plugins.path(),
        "[llm]\nmodel = \"m\"\nbase_url = \"http://no-such-host.invalid/v1\"\nretry_backoff_ms = 1000\n",
    );
    let (out, record, _) = run_local(&config, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(record["outcome"], "error", "{record}\n{stderr}");
    let error = record["error"].as_str().expect("error text");
    assert!(error.contains("is the server running?"), "error: {error}");
    assert!(!stderr.contains("retrying"), "stderr: {stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_daemon_fails_a_missing_endpoint_at_once_and_retries_one_that_answered() {
    // No endpoint at all: the run is created and ends `error` with the help.
    let llm = FakeLlm::start().await.expect("fake llm");
    let mut d = Daemon::unstarted(&llm, "");
    let text = std::fs::read_to_string(&d.config).expect("config");
    let text: String = text
        .lines()
        .filter(|l| !l.starts_with("base_url") && !l.starts_with("api_key"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&d.config, text).expect("config");
    tokio::task::block_in_place(|| d.spawn(&[]));
    let id = d.create_run("toolcall", "Say hello");
    let record = tokio::task::block_in_place(|| d.wait_run(&id, Duration::from_secs(30)));
    assert_eq!(record["outcome"], "error", "{record}");
    let error = record["error"].as_str().expect("error");
    assert!(
        error.contains("LLM is not configured: no endpoint is set"),
        "{error}"
    );
    assert_has_the_three_examples(error);
    assert_ended_within_a_second(&record, Duration::ZERO);
    assert!(llm.requests().is_empty());
    d.stop();

    // An endpoint that answered once and then goes away is a flaky server:
    // the next run's request is retried before it fails.
    let llm = FakeLlm::start().await.expect("fake llm");
    let d = Daemon::start(&llm, "");
    llm.push(Reply::terminate());
    let id = d.create_run("toolcall", "first");
    let record = tokio::task::block_in_place(|| d.wait_run(&id, Duration::from_secs(30)));
    assert_eq!(record["outcome"], "finished", "{record}");
    drop(llm);
    let id = d.create_run("toolcall", "second");
    let record = tokio::task::block_in_place(|| d.wait_run(&id, Duration::from_secs(60)));
    assert_eq!(record["outcome"], "error", "{record}");
    let error = record["error"].as_str().expect("error");
    assert!(error.contains("is unreachable"), "{error}");
    assert!(!error.contains("is the server running?"), "{error}");
    assert!(
        d.log_text().contains("LLM request failed; retrying"),
        "{}",
        d.log_text()
    );
}

/// Whether the endpoint has answered is the daemon's memory, per address,
/// not each configuration's: after a SIGHUP builds new clients, an endpoint
/// that answered before and now refuses is a flaky server (retried), not a
/// missing one ("is the server running?" at once).
#[tokio::test(flavor = "multi_thread")]
async fn a_reload_keeps_knowing_that_the_endpoint_answered() {
    let llm = FakeLlm::start().await.expect("fake llm");
    let d = Daemon::start(&llm, "");
    llm.push(Reply::terminate());
    let id = d.create_run("toolcall", "first");
    let record = tokio::task::block_in_place(|| d.wait_run(&id, Duration::from_secs(30)));
    assert_eq!(record["outcome"], "finished", "{record}");
    // The same file again, as an operator's `systemctl reload` does.
    d.signal(libc::SIGHUP);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !d.log_text().contains("configuration reloaded") {
        assert!(std::time::Instant::now() < deadline, "{}", d.log_text());
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(llm);
    let id = d.create_run("toolcall", "second");
    let record = tokio::task::block_in_place(|| d.wait_run(&id, Duration::from_secs(60)));
    assert_eq!(record["outcome"], "error", "{record}");
    let error = record["error"].as_str().expect("error");
    assert!(error.contains("is unreachable"), "{error}");
    assert!(!error.contains("is the server running?"), "{error}");
    assert!(d.log_text().contains("LLM request failed; retrying"));
}

#[tokio::test(flavor = "multi_thread")]
async fn run_local_without_a_plugins_folder_uses_the_bundled_plugins() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push(Reply::terminate());
    let bundle = plugins_dir(&["toolcall", "terminate"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("no-such-folder");
    let config = write_config(
        dir.path(),
        &missing,
        &format!(
            "[llm]\nmodel = \"fake\"\nbase_url = \"{}\"\napi_key = \"k\"\n",
            llm.base_url()
        ),
    );
    let bundle_dir = bundle.path().display().to_string();
    let (out, record, _) = tokio::task::block_in_place(|| {
        run_local(&config, &[("AGENTD_BUNDLED_PLUGINS", &bundle_dir)])
    });
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    assert_eq!(record["outcome"], "finished", "{record}");
    assert!(
        stderr.contains(&format!("using the bundled plugins in {bundle_dir}")),
        "stderr: {stderr}"
    );
    // A local run leaves the folder to the daemon.
    assert!(!missing.exists());

    // With no bundle either, it says where it looked and what to run.
    let (out, _, _) = tokio::task::block_in_place(|| run_local(&config, &[]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    assert!(
        stderr.contains("no bundled plugins beside the binary"),
        "{stderr}"
    );
    assert!(stderr.contains("scripts/install.sh"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_daemon_on_an_empty_plugins_folder_installs_the_bundle_and_says_so() {
    let llm = FakeLlm::start().await.expect("fake llm");
    let bundle = plugins_dir(&["toolcall", "terminate"]);
    let mut d = Daemon::unstarted_with_plugins(&llm, &[], "");
    let bundle_dir = bundle.path().display().to_string();
    tokio::task::block_in_place(|| d.spawn(&[("AGENTD_BUNDLED_PLUGINS", &bundle_dir)]));
    let log = d.log_text();
    assert!(
        log.contains("the plugins folder was empty: installed the bundled plugins"),
        "{log}"
    );
    assert!(log.contains(&bundle_dir), "{log}");
    for name in ["toolcall.wasm", "terminate.wasm"] {
        assert!(
            d.plugins.path().join(name).is_file(),
            "{name} not installed"
        );
    }
    llm.push(Reply::terminate());
    let id = d.create_run("toolcall", "Say hello");
    let record = tokio::task::block_in_place(|| d.wait_run(&id, Duration::from_secs(30)));
    assert_eq!(record["outcome"], "finished", "{record}");
    d.stop();

    // Without a bundle, the daemon still serves and says what is missing.
    let mut d = Daemon::unstarted_with_plugins(&llm, &[], "");
    tokio::task::block_in_place(|| d.spawn(&[]));
    let log = d.log_text();
    assert!(
        log.contains("the plugins folder is empty and no bundled plugins were found"),
        "{log}"
    );
    assert!(log.contains("scripts/install.sh"), "{log}");
    let (status, _) = d.get("/v1/status");
    assert_eq!(status, 200);
}

/// A missing plugins folder is created 0755 whatever the daemon's umask: a
/// umask of 002 (common for service accounts with a group of their own)
/// would make it group-writable, and the daemon's own trust check would
/// then refuse the folder it had just made and filled.
#[tokio::test(flavor = "multi_thread")]
async fn a_missing_plugins_folder_is_made_trusted_under_a_loose_umask() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let llm = FakeLlm::start().await.expect("fake llm");
    let bundle = plugins_dir(&["toolcall", "terminate"]);
    let mut d = Daemon::unstarted_with_plugins(&llm, &[], "");
    std::fs::remove_dir(d.plugins.path()).expect("rmdir");
    let bundle_dir = bundle.path().display().to_string();
    tokio::task::block_in_place(|| {
        d.spawn_with(&[("AGENTD_BUNDLED_PLUGINS", &bundle_dir)], |cmd| {
            // SAFETY: umask is async-signal-safe and cannot fail.
            unsafe {
                cmd.pre_exec(|| {
                    libc::umask(0o002);
                    Ok(())
                });
            }
        })
    });
    let mode = std::fs::metadata(d.plugins.path())
        .expect("created")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o755, "{}", d.log_text());
    assert!(
        d.log_text()
            .contains("the plugins folder was empty: installed the bundled plugins"),
        "{}",
        d.log_text()
    );
    llm.push(Reply::terminate());
    let id = d.create_run("toolcall", "Say hello");
    let record = tokio::task::block_in_place(|| d.wait_run(&id, Duration::from_secs(30)));
    assert_eq!(record["outcome"], "finished", "{record}");
}

/// `agentd paths`: the folders a daemon with this configuration would use,
/// as `key=value` lines scripts read (a path with spaces intact), or the
/// loader's `FILE:LINE` when the file does not load.
#[test]
fn paths_prints_where_a_daemon_with_this_configuration_keeps_things() {
    let dir = tempfile::tempdir().expect("tmp");
    let state = dir.path().join("my state");
    let plugins = dir.path().join("plug ins");
    let config = dir.path().join("agentd.toml");
    std::fs::write(
        &config,
        format!(
            "[daemon]\nstate_dir = \"{}\"\nplugins_dir = \"{}\"\nsocket = \"/tmp/x.sock\"\n",
            state.display(),
            plugins.display()
        ),
    )
    .expect("config");
    let shown = config.display().to_string();
    let out = agentd(&["paths", "--config", &shown], &[]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!(
            "config={shown}\nstate_dir={}\nplugins_dir={}\nsocket=/tmp/x.sock\n",
            state.display(),
            plugins.display()
        )
    );
    let out = agentd(&["paths", "--json", "--config", &shown], &[]);
    let json: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(json["plugins_dir"], plugins.display().to_string());

    // Without plugins_dir, it is the state folder's `plugins`.
    std::fs::write(
        &config,
        format!("[daemon]\nstate_dir = \"{}\"\n", state.display()),
    )
    .expect("config");
    let out = agentd(&["paths", "--config", &shown], &[]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains(&format!(
            "plugins_dir={}\n",
            state.join("plugins").display()
        )),
        "{text}"
    );

    std::fs::write(&config, "[daemon]\nstate_dri = \"/x\"\n").expect("config");
    let out = agentd(&["paths", "--config", &shown], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("{shown}:2")), "{stderr}");
}
