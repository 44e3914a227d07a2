//! Runs through the daemon whose tools act in real Docker sandboxes:
//! cancelling a command mid-way, and many runs at once, each in its own
//! container. Needs a Docker engine (scripts/ensure-docker.sh).

use crate::common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use agentd::testkit::{FakeLlm, Reply};
use common::daemon::Daemon;

const AGENTS: &str = "max_concurrent_runs = 64\n\n[agents.shell]\nstrategy = \"toolcall\"\ntools = [\"bash\", \"terminate\"]\nmax_steps = 5\n";

async fn containers(label: &str) -> usize {
    common::containers_labelled(label).await.len()
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_mid_command_kills_it_removes_the_sandbox_and_ends_cancelled() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "sleep a lot",
        [Reply::call("bash", r#"{"command":"sleep 600"}"#)],
    );
    let d = tokio::task::block_in_place(|| Daemon::start(&llm, AGENTS));
    let id = tokio::task::block_in_place(|| d.create_run("shell", "sleep a lot"));
    let label = format!("agentd.run={id}");
    let deadline = Instant::now() + Duration::from_secs(60);
    // Wait until the command is running inside its container.
    loop {
        let called = tokio::task::block_in_place(|| d.events_so_far(&id))
            .iter()
            .any(|e| e["type"] == "tool_call");
        if called && containers(&label).await == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "the command never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let record = tokio::task::block_in_place(|| {
        let (status, v) = d.post(&format!("/v1/runs/{id}/cancel"), "");
        assert_eq!(status, 202, "{v}");
        // Promptly: far sooner than the command's 600 s.
        d.wait_run(&id, Duration::from_secs(20))
    });
    assert_eq!(record["outcome"], "cancelled", "{record}");
    assert_eq!(containers(&label).await, 0, "the sandbox is gone");
    let events = tokio::task::block_in_place(|| d.events(&id));
    assert_eq!(events.last().expect("events")["type"], "run_ended");
    assert_eq!(events.last().expect("events")["outcome"], "cancelled");
}

#[tokio::test(flavor = "multi_thread")]
async fn fifty_concurrent_runs_finish_each_in_its_own_sandbox() {
    const RUNS: usize = 50;
    let llm = FakeLlm::start().await.expect("fake llm");
    for i in 0..RUNS {
        llm.push_for(
            &format!("job {i}"),
            [
                // Each run writes its own marker, then reads the folder and
                // the container's name: another run's file or container
                // would show.
                Reply::call(
                    "bash",
                    &format!(r#"{{"command":"echo {i} > /workspace/mine && ls /workspace | wc -l && cat /workspace/mine && hostname"}}"#),
                ),
                Reply::terminate(),
            ],
        );
    }
    let d = tokio::task::block_in_place(|| Daemon::start(&llm, AGENTS));
    let records = tokio::task::block_in_place(|| {
        let ids: Vec<String> = (0..RUNS)
            .map(|i| d.create_run("shell", &format!("job {i}")))
            .collect();
        ids.iter()
            .map(|id| d.wait_run(id, Duration::from_secs(300)))
            .collect::<Vec<_>>()
    });
    let mut hosts = HashSet::new();
    for (i, r) in records.iter().enumerate() {
        assert_eq!(r["outcome"], "finished", "run {i}: {r}");
        let tool = r["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .find(|m| m["role"] == "tool" && m["name"] == "bash")
            .unwrap_or_else(|| panic!("run {i} has no bash result: {r}"));
        let output = tool["content"].as_str().unwrap_or("");
        // After the tool's header line, the command's own output.
        let lines: Vec<&str> = output
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with("Observed output"))
            .collect();
        assert_eq!(lines.len(), 3, "run {i}: {output}");
        assert_eq!(lines[0].trim(), "1", "only its own file: {output}");
        assert_eq!(lines[1].trim(), i.to_string(), "run {i}: {output}");
        hosts.insert(lines[2].trim().to_string());
    }
    assert_eq!(hosts.len(), RUNS, "every run had its own container");
    let deadline = Instant::now() + Duration::from_secs(30);
    while containers_of_daemon(&d).await > 0 {
        assert!(Instant::now() < deadline, "sandboxes left behind");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Containers of this daemon's runs that are still there.
async fn containers_of_daemon(d: &Daemon) -> usize {
    let (_, list) = tokio::task::block_in_place(|| d.get("/v1/runs?limit=1000"));
    let mut n = 0;
    for run in list["runs"].as_array().expect("runs") {
        let id = run["id"].as_str().unwrap_or("");
        n += containers(&format!("agentd.run={id}")).await;
    }
    n
}

/// `GET /v1/status` names what weakens the sandbox on this engine, as
/// `docker info` and `docker version` show it: the warnings come from the
/// real engine, not from a fixture.
#[tokio::test(flavor = "multi_thread")]
async fn status_names_what_weakens_the_engine_s_isolation() {
    let llm = FakeLlm::start().await.expect("fake llm");
    let d = tokio::task::block_in_place(|| Daemon::start(&llm, AGENTS));
    let (status, v) = tokio::task::block_in_place(|| d.get("/v1/status"));
    assert_eq!(status, 200, "{v}");
    let engine = &v["sandbox_engine"];
    assert_eq!(engine["reachable"], true, "{v}");
    let warnings: Vec<String> = engine["warnings"]
        .as_array()
        .expect("warnings is a list")
        .iter()
        .map(|w| w.as_str().expect("text").to_string())
        .collect();
    let docker = |format: &str| {
        let out = std::process::Command::new("docker")
            .args(["info", "--format", format])
            .output()
            .expect("docker info");
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let options = docker("{{json .SecurityOptions}}");
    let has_userns = options.contains("name=userns") || options.contains("name=rootless");
    assert_eq!(
        warnings.iter().any(|w| w.contains("no user namespace")),
        !has_userns,
        "security options {options}: {warnings:?}"
    );
    let version = std::process::Command::new("docker")
        .args(["version", "--format", "{{json .Server.Components}}"])
        .output()
        .expect("docker version");
    let components: serde_json::Value =
        serde_json::from_slice(&version.stdout).expect("components json");
    let runc = components
        .as_array()
        .and_then(|c| c.iter().find(|c| c["Name"] == "runc"))
        .and_then(|c| c["Version"].as_str())
        .unwrap_or_default()
        .to_string();
    let numbers: Vec<u32> = runc
        .split(|c: char| !c.is_ascii_digit())
        .take(3)
        .map(|n| n.parse().unwrap_or(0))
        .collect();
    let old_runc = !runc.is_empty() && numbers < vec![1, 1, 12];
    assert_eq!(
        warnings
            .iter()
            .any(|w| w.contains(&format!("runc is version {runc}"))),
        old_runc,
        "runc {runc}: {warnings:?}"
    );
}
