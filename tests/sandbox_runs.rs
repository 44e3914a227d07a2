//! Whole runs whose tools act in a real Docker sandbox: the tools, the
//! per-run container lifecycle on every kind of ending, and isolation.
//! Needs a Docker engine (scripts/ensure-docker.sh) and the images
//! (scripts/build-images.sh); fails, never skips, without them.

use crate::common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use agentd::agent::AgentConfig;
use agentd::agent::{Outcome, RunOptions};
use agentd::sandbox::docker::DockerSandboxProvider;
use agentd::sandbox::SandboxConfig;
use agentd::sandbox::SandboxProvider;
use agentd::testkit::Reply;
use bollard::Docker;
use common::{tool_outputs, Harness};
use tokio_util::sync::CancellationToken;

const FULL_IMAGE: &str = "agentd-sandbox:latest";
const TINY_IMAGE: &str = "agentd-sandbox-tiny:latest";

fn sandbox_config(image: &str) -> SandboxConfig {
    SandboxConfig {
        image: image.into(),
        timeout: Duration::from_secs(20),
        ..SandboxConfig::default()
    }
}

async fn harness_with(config: SandboxConfig) -> Harness {
    let provider = DockerSandboxProvider::new(&config).expect("sandbox provider");
    provider.ping().await.unwrap_or_else(|e| {
        panic!("these tests need a Docker engine: run scripts/ensure-docker.sh ({e})")
    });
    Harness::build(Duration::from_secs(60), Arc::new(provider)).await
}

fn manus(max_steps: u32) -> AgentConfig {
    AgentConfig {
        name: "manus-test".into(),
        strategy: "toolcall".into(),
        tools: vec![
            "bash".into(),
            "str_replace_editor".into(),
            "python_execute".into(),
            "terminate".into(),
        ],
        max_steps: Some(max_steps),
        ..AgentConfig::with_defaults("manus-test")
    }
}

async fn docker() -> Docker {
    Docker::connect_with_defaults().expect("docker client")
}

async fn containers_of(run: &str) -> usize {
    common::containers_of_run(run).await
}

fn with_id(id: &str) -> RunOptions {
    RunOptions {
        run_id: Some(id.into()),
        ..RunOptions::default()
    }
}

fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

#[tokio::test(flavor = "multi_thread")]
async fn bash_creates_the_editor_edits_python_runs() {
    let h = harness_with(sandbox_config(FULL_IMAGE)).await;
    h.llm.push_all([
        Reply::call(
            "bash",
            r#"{"command":"mkdir -p /workspace/app && cd /workspace/app && printf 'x = 6 * 7\nprint(x)\n' > calc.py && echo created"}"#,
        ),
        Reply::call("bash", r#"{"command":"pwd"}"#),
        Reply::call(
            "str_replace_editor",
            r#"{"command":"str_replace","path":"/workspace/app/calc.py","old_str":"x = 6 * 7","new_str":"x = 6 * 7 + 1"}"#,
        ),
        Reply::call(
            "python_execute",
            r#"{"code":"exec(open('/workspace/app/calc.py').read())"}"#,
        ),
        Reply::terminate(),
    ]);
    let id = unique("e2e");
    let r = h
        .agent(manus(10))
        .run("compute", with_id(&id))
        .await
        .expect("run");
    assert_eq!(r.outcome, Outcome::Finished, "{r:?}");
    let out = tool_outputs(&r);
    assert_eq!(out[0], "Observed output of cmd `bash` executed:\ncreated");
    assert_eq!(
        out[1], "Observed output of cmd `bash` executed:\n/workspace/app",
        "cd carries over between bash calls"
    );
    assert!(
        out[2].contains("The file /workspace/app/calc.py has been edited.")
            && out[2].contains("x = 6 * 7 + 1"),
        "{}",
        out[2]
    );
    assert_eq!(
        out[3].trim_end(),
        "Observed output of cmd `python_execute` executed:\n43"
    );
    assert_eq!(
        containers_of(&id).await,
        0,
        "the sandbox is gone after the run"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_container_is_removed_on_every_ending() {
    let h = harness_with(SandboxConfig {
        create_on_start: true,
        ..sandbox_config(TINY_IMAGE)
    })
    .await;

    // error: the LLM refuses the second request.
    h.llm.push_all([
        Reply::call("bash", r#"{"command":"echo hi"}"#),
        Reply::error(400, "nope"),
    ]);
    let id = unique("error");
    let r = h.agent(manus(5)).run("x", with_id(&id)).await.expect("run");
    assert_eq!(r.outcome, Outcome::Error);
    assert_eq!(containers_of(&id).await, 0, "after an error");

    // max_steps
    h.llm.push_all([
        Reply::call("bash", r#"{"command":"echo 1"}"#),
        Reply::call("bash", r#"{"command":"echo 2"}"#),
    ]);
    let id = unique("limit");
    let r = h.agent(manus(2)).run("x", with_id(&id)).await.expect("run");
    assert_eq!(r.outcome, Outcome::MaxSteps);
    assert_eq!(containers_of(&id).await, 0, "after the step limit");

    // a strategy that traps (the container exists: create_on_start)
    let id = unique("trap");
    let r = h
        .agent(AgentConfig {
            strategy: "misbehave".into(),
            tools: vec![],
            system_prompt: Some("trap".into()),
            ..AgentConfig::with_defaults("trapper")
        })
        .run("x", with_id(&id))
        .await
        .expect("run");
    assert_eq!(r.outcome, Outcome::Error);
    assert!(r.error.as_deref().unwrap_or("").contains("trapped"));
    assert_eq!(containers_of(&id).await, 0, "after a plugin trap");

    // cancel in the middle of a command
    h.llm
        .push(Reply::call("bash", r#"{"command":"sleep 1000"}"#));
    let before = h.llm.requests().len();
    let id = unique("cancel");
    let cancel = CancellationToken::new();
    let agent = h.agent(manus(5));
    let run = agent.run(
        "x",
        RunOptions {
            run_id: Some(id.clone()),
            cancel: cancel.clone(),
            ..RunOptions::default()
        },
    );
    let canceller = async {
        // Wait until the container exists and the command is running.
        let mut started = false;
        for _ in 0..200 {
            if containers_of(&id).await == 1 && h.llm.requests().len() == before + 1 {
                started = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            started,
            "the command never started: the cancel would prove nothing"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        cancel.cancel();
    };
    let (r, ()) = tokio::join!(run, canceller);
    let r = r.expect("run");
    assert_eq!(r.outcome, Outcome::Cancelled);
    assert_eq!(containers_of(&id).await, 0, "after a cancel");
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_runs_get_their_own_sandboxes() {
    let h = harness_with(sandbox_config(TINY_IMAGE)).await;
    // Each run writes a file, then counts the files it can see.
    for request in ["a", "b"] {
        h.llm.push_for(
            request,
            [
                Reply::call(
                    "bash",
                    r#"{"command":"echo $$ > /workspace/mine && sleep 1"}"#,
                ),
                Reply::call("bash", r#"{"command":"ls /workspace | wc -l"}"#),
                Reply::terminate(),
            ],
        );
    }
    let agent_a = h.agent(manus(5));
    let agent_b = h.agent(manus(5));
    let (a, b) = (unique("iso-a"), unique("iso-b"));
    let (ra, rb) = tokio::join!(agent_a.run("a", with_id(&a)), agent_b.run("b", with_id(&b)));
    let (ra, rb) = (ra.expect("run a"), rb.expect("run b"));
    for r in [&ra, &rb] {
        assert_eq!(r.outcome, Outcome::Finished, "{r:?}");
        let out = tool_outputs(r);
        assert_eq!(
            out[1], "Observed output of cmd `bash` executed:\n1",
            "each run sees only its own file"
        );
    }
    assert_eq!(containers_of(&a).await + containers_of(&b).await, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_engine_that_is_down_ends_the_run_with_sandbox_unavailable() {
    let config = SandboxConfig {
        docker_host: Some("unix:///nonexistent/docker.sock".into()),
        ..sandbox_config(TINY_IMAGE)
    };
    let provider = DockerSandboxProvider::new(&config).expect("config is valid");
    let h = Harness::build(Duration::from_secs(30), Arc::new(provider)).await;
    h.llm
        .set_fallback(Reply::call("bash", r#"{"command":"echo hi"}"#));
    let r = h.run(manus(5), "x").await;
    assert_eq!(r.outcome, Outcome::Error);
    let err = r.error.expect("error");
    assert!(err.starts_with("sandbox unavailable: "), "{err}");
    assert_eq!(
        r.steps, 1,
        "the run stops at once, not after the model retries"
    );
    // The same process still serves runs that need no sandbox.
    h.llm.push(Reply::terminate());
    let ok = h.run(common::toolcall_agent(3), "x").await;
    assert_eq!(ok.outcome, Outcome::Finished);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_image_names_the_image_and_the_build_command() {
    let h = harness_with(SandboxConfig {
        create_on_start: true,
        ..sandbox_config("agentd-no-such-image:latest")
    })
    .await;
    let r = h.run(manus(3), "x").await;
    assert_eq!(r.outcome, Outcome::Error);
    let err = r.error.expect("error");
    assert!(
        err.contains("agentd-no-such-image:latest") && err.contains("scripts/build-images.sh"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn orphans_are_reaped_but_live_runs_are_kept() {
    let provider = DockerSandboxProvider::new(&sandbox_config(TINY_IMAGE)).expect("provider");
    let (orphan, live) = (unique("orphan"), unique("live"));
    let leaked = provider.for_run(&orphan);
    let kept = provider.for_run(&live);
    leaked.prepare().await.expect("prepare");
    leaked.shell("true", None).await.expect("create the orphan");
    kept.shell("true", None).await.expect("create the live one");
    // Simulate a crash: the orphan's owner never destroys it.
    drop(leaked);
    let removed = provider
        .reap_orphans(std::slice::from_ref(&live))
        .await
        .expect("reap");
    assert!(removed >= 1);
    assert_eq!(containers_of(&orphan).await, 0);
    assert_eq!(containers_of(&live).await, 1);
    kept.destroy().await;
    assert_eq!(containers_of(&live).await, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn containers_of_a_dead_process_are_reaped_at_start_up() {
    use bollard::models::ContainerCreateBody;
    use bollard::query_parameters::CreateContainerOptionsBuilder;
    // A container as a crashed agentd on this host would have left it: its
    // owner PID does not exist.
    let run = unique("crashed");
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("hostname");
    let labels = HashMap::from([
        ("agentd.managed".to_string(), "true".to_string()),
        ("agentd.run".to_string(), run.clone()),
        (
            "agentd.owner".to_string(),
            format!("{}:4194300:1:deadbeef", host.trim()),
        ),
    ]);
    let d = docker().await;
    d.create_container(
        Some(CreateContainerOptionsBuilder::default().name(&run).build()),
        ContainerCreateBody {
            image: Some(TINY_IMAGE.into()),
            cmd: Some(vec!["sleep".into(), "1000".into()]),
            labels: Some(labels),
            ..Default::default()
        },
    )
    .await
    .expect("create the leftover");
    assert_eq!(containers_of(&run).await, 1);
    let fresh = DockerSandboxProvider::new(&sandbox_config(TINY_IMAGE)).expect("provider");
    let removed = fresh.reap_orphans(&[]).await.expect("reap");
    assert!(removed >= 1);
    assert_eq!(containers_of(&run).await, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_container_removed_from_outside_ends_the_run_cleanly() {
    use bollard::query_parameters::RemoveContainerOptionsBuilder;
    let h = harness_with(sandbox_config(TINY_IMAGE)).await;
    h.llm.push_all([
        Reply::call("bash", r#"{"command":"echo first"}"#),
        // Slow enough for the test to remove the container in between.
        Reply::Delayed(
            Duration::from_millis(1500),
            Box::new(Reply::call("bash", r#"{"command":"echo second"}"#)),
        ),
        Reply::terminate(),
    ]);
    let id = unique("killed");
    let agent = h.agent(manus(5));
    let run = agent.run("x", with_id(&id));
    let killer = async {
        for _ in 0..200 {
            if h.llm.requests().len() == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let d = docker().await;
        for c in common::containers_labelled(&format!("agentd.run={id}")).await {
            d.remove_container(
                c.id.as_deref().expect("id"),
                Some(RemoveContainerOptionsBuilder::default().force(true).build()),
            )
            .await
            .expect("remove from outside");
        }
    };
    let (r, ()) = tokio::join!(run, killer);
    let r = r.expect("run");
    let out = tool_outputs(&r);
    assert_eq!(out[0], "Observed output of cmd `bash` executed:\nfirst");
    assert!(
        out[1].starts_with("Error: ⚠️ Tool 'bash' encountered a problem:"),
        "the tool reports the loss as an observation: {}",
        out[1]
    );
    assert_eq!(r.outcome, Outcome::Error, "{r:?}");
    assert_eq!(containers_of(&id).await, 0, "nothing is left behind");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tcp_engine_works_the_same() {
    // A loopback TCP front for the local engine's socket stands in for a
    // remote engine (`tcp://`).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                if let Ok(mut unix) = tokio::net::UnixStream::connect("/var/run/docker.sock").await
                {
                    let _ = tokio::io::copy_bidirectional(&mut tcp, &mut unix).await;
                }
            });
        }
    });
    let config = SandboxConfig {
        docker_host: Some(format!("tcp://127.0.0.1:{port}")),
        ..sandbox_config(TINY_IMAGE)
    };
    let provider = DockerSandboxProvider::new(&config).expect("provider");
    provider.ping().await.expect("the engine answers over tcp");
    let id = unique("tcp");
    let sb = provider.for_run(&id);
    let out = sb
        .shell("cd /tmp && pwd", None)
        .await
        .expect("shell over tcp");
    assert_eq!(out.stdout.trim(), "/tmp");
    sb.write_file("/workspace/t.txt", b"over tcp")
        .await
        .expect("write");
    assert_eq!(sb.read_file("t.txt").await.expect("read"), b"over tcp");
    sb.destroy().await;
    assert_eq!(containers_of(&id).await, 0);
}
