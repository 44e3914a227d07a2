//! The Docker sandbox against a real engine, with the tiny busybox image.
//!
//! These tests fail (never skip) when no engine answers: start one with
//! scripts/ensure-docker.sh and build the image with
//! `scripts/build-images.sh --tiny-only`.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentd::sandbox::docker::{DockerSandbox, DockerSandboxProvider, LABEL_MANAGED, LABEL_RUN};
use agentd::sandbox::SandboxConfig;
use agentd::sandbox::{CommandSpec, Sandbox, SandboxError, SandboxProvider};
use bollard::models::ContainerSummary;
use bollard::query_parameters::RemoveContainerOptionsBuilder;

/// The busybox image; `AGENTD_TEST_SANDBOX_IMAGE` runs the suite on
/// another (e.g. `agentd-sandbox:latest`, with bash).
fn image() -> String {
    std::env::var("AGENTD_TEST_SANDBOX_IMAGE")
        .ok()
        .filter(|i| !i.is_empty())
        .unwrap_or_else(|| "agentd-sandbox-tiny:latest".into())
}

fn config() -> SandboxConfig {
    SandboxConfig {
        image: image(),
        memory_limit: "256m".into(),
        timeout: Duration::from_secs(60),
        ..SandboxConfig::default()
    }
}

/// A provider on the engine of `DOCKER_HOST` (or the default socket),
/// failing loudly when it does not answer.
async fn provider_with(cfg: SandboxConfig) -> DockerSandboxProvider {
    let p = DockerSandboxProvider::new(&cfg).expect("valid sandbox config");
    if let Err(e) = p.ping().await {
        panic!(
            "no Docker engine answers ({e}); start one with scripts/ensure-docker.sh \
             and build the test image with scripts/build-images.sh --tiny-only"
        );
    }
    p
}

async fn provider() -> DockerSandboxProvider {
    provider_with(config()).await
}

fn run_id(name: &str) -> String {
    format!(
        "test-{name}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
}

async fn containers_of(run: &str) -> Vec<ContainerSummary> {
    common::containers_labelled(&format!("{LABEL_RUN}={run}")).await
}

/// Removes the container of a sandbox even if a test failed half-way.
struct Cleanup(Arc<DockerSandbox>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let sb = self.0.clone();
        // A fresh runtime: the test's own may be shutting down.
        let _ = std::thread::spawn(move || {
            if let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                rt.block_on(sb.destroy());
            }
        })
        .join();
    }
}

async fn sh(sb: &DockerSandbox, command: &str) -> agentd::sandbox::CommandOutput {
    sb.shell(command, None)
        .await
        .unwrap_or_else(|e| panic!("shell `{command}`: {e}"))
}

#[tokio::test]
async fn container_is_lazy_labelled_confined_and_removed() {
    let p = provider().await;
    let docker = p.docker().await.expect("docker");
    let run = run_id("labels");
    let sb = p.sandbox(&run);
    let _cleanup = Cleanup(sb.clone());

    sb.prepare().await.expect("prepare");
    assert!(
        containers_of(&run).await.is_empty(),
        "no container before first use"
    );
    assert_eq!(sh(&sb, "echo hi").await.stdout, "hi\n");

    let found = containers_of(&run).await;
    assert_eq!(found.len(), 1);
    let labels = found[0].labels.clone().unwrap_or_default();
    assert_eq!(labels.get(LABEL_MANAGED).map(String::as_str), Some("true"));
    assert_eq!(labels.get(LABEL_RUN), Some(&run));
    let name = &found[0].names.clone().unwrap_or_default()[0];
    assert!(name.starts_with("/agentd-test-labels-"), "{name}");

    let info = docker
        .inspect_container(found[0].id.as_deref().expect("id"), None)
        .await
        .expect("inspect");
    let host = info.host_config.expect("host config");
    assert_eq!(host.network_mode.as_deref(), Some("none"));
    assert_eq!(host.cap_drop, Some(vec!["ALL".to_string()]));
    assert_eq!(
        host.security_opt,
        Some(vec!["no-new-privileges".to_string()])
    );
    assert_eq!(host.init, Some(true));
    assert_eq!(host.memory, Some(256 << 20));
    assert_eq!(host.nano_cpus, Some(1_000_000_000));
    assert_eq!(host.pids_limit, Some(256));
    assert_eq!(sh(&sb, "pwd").await.stdout, "/workspace\n");

    sb.destroy().await;
    assert!(containers_of(&run).await.is_empty(), "destroy removes");
    sb.destroy().await; // idempotent
    let err = sb.shell("true", None).await.expect_err("destroyed");
    assert!(matches!(err, SandboxError::Failed(_)), "{err:?}");
}

#[tokio::test]
async fn create_on_start_and_concurrent_first_use_make_one_container() {
    let p = provider_with(SandboxConfig {
        create_on_start: true,
        ..config()
    })
    .await;

    let run = run_id("eager");
    let eager = p.sandbox(&run);
    let _c1 = Cleanup(eager.clone());
    eager.prepare().await.expect("prepare");
    assert_eq!(containers_of(&run).await.len(), 1);
    eager.destroy().await;

    let run = run_id("race");
    let sb: Arc<dyn Sandbox> = p.for_run(&run);
    let calls = (0..4).map(|i| {
        let sb = sb.clone();
        tokio::spawn(async move { sb.shell(&format!("echo {i}"), None).await })
    });
    for (i, call) in calls.enumerate() {
        let out = call.await.expect("join").expect("shell");
        assert_eq!(out.stdout, format!("{i}\n"));
    }
    let writes = (0..4).map(|i| {
        let sb = sb.clone();
        tokio::spawn(async move { sb.write_file(&format!("f{i}"), b"x").await })
    });
    for w in writes {
        w.await.expect("join").expect("write");
    }
    assert_eq!(containers_of(&run).await.len(), 1);
    sb.destroy().await;
    assert!(containers_of(&run).await.is_empty());
}

#[tokio::test]
async fn shell_keeps_state_and_exact_exit_codes() {
    let p = provider().await;
    let sb = p.sandbox(&run_id("shell"));
    let _cleanup = Cleanup(sb.clone());

    sh(&sb, "cd /tmp").await;
    assert_eq!(sh(&sb, "pwd").await.stdout, "/tmp\n");
    sh(&sb, "export X=1").await;
    assert_eq!(sh(&sb, "echo $X").await.stdout, "1\n");
    assert_eq!(sh(&sb, "sh -c 'echo $X'").await.stdout, "1\n", "exported");

    assert_eq!(sh(&sb, "(exit 3)").await.exit_code, 3);
    assert_eq!(sh(&sb, "false").await.exit_code, 1);
    assert_eq!(sh(&sb, "true").await.exit_code, 0);
    assert_eq!(sh(&sb, "sh -c 'exit 255'").await.exit_code, 255);

    let o = sh(&sb, "echo out; echo err >&2; printf 'no newline'").await;
    assert_eq!(o.stdout, "out\nno newline");
    assert_eq!(o.stderr, "err\n");
    assert!(!o.timed_out && !o.truncated);

    // Output that looks like the protocol does not confuse it.
    let o = sh(&sb, "echo '__AGENTD_END_'").await;
    assert_eq!(o.stdout, "__AGENTD_END_\n");
    let fake = "printf '\\n__AGENTD_END_0123456789abcdef0123456789abcdef__0\\n'; echo after; \
                printf '__AGENTD_END_x__\\n' >&2; (exit 4)";
    let o = sh(&sb, fake).await;
    assert_eq!(
        o.stdout,
        "\n__AGENTD_END_0123456789abcdef0123456789abcdef__0\nafter\n"
    );
    assert_eq!(o.stderr, "__AGENTD_END_x__\n");
    assert_eq!(o.exit_code, 4);

    // Quotes, multi-line commands and syntax errors stay inside one call.
    let o = sh(&sb, "echo \"it's\" 'a \"test\"'\necho line2").await;
    assert_eq!(o.stdout, "it's a \"test\"\nline2\n");
    for broken in [
        "echo \"unterminated",
        "echo )",
        "if true; then",
        "{ echo a",
        "echo $(",
    ] {
        let o = sh(&sb, broken).await;
        assert_eq!(o.exit_code, 2, "{broken}: {o:?}");
        let o = sh(&sb, "{ echo a; }; if true; then echo b; fi").await;
        assert_eq!(o.stdout, "a\nb\n", "after {broken}: {o:?}");
    }
    assert_eq!(
        sh(&sb, "echo still here; pwd").await.stdout,
        "still here\n/tmp\n"
    );

    // A command reading stdin gets EOF, not the next command.
    let o = sh(&sb, "cat; read line; echo \"read=$?\"").await;
    assert_eq!(o.stdout, "read=1\n");
    assert_eq!(sh(&sb, "echo next").await.stdout, "next\n");

    // `exit` ends the session; the next call gets a fresh one.
    let o = sh(&sb, "exit 5").await;
    assert_eq!(o.exit_code, 5);
    assert!(o.stderr.contains("fresh shell"), "{o:?}");
    let o = sh(&sb, "pwd; echo \"X=$X\"").await;
    assert_eq!(o.stdout, "/workspace\nX=\n");

    // restart_shell forgets the state too.
    sh(&sb, "cd /tmp").await;
    sb.restart_shell().await.expect("restart");
    assert_eq!(sh(&sb, "pwd").await.stdout, "/workspace\n");
    sb.destroy().await;
}

#[tokio::test]
async fn shell_timeout_kills_the_command_and_keeps_the_session() {
    let p = provider().await;
    let sb = p.sandbox(&run_id("timeout"));
    let _cleanup = Cleanup(sb.clone());

    sh(&sb, "cd /tmp; export KEEP=yes").await;
    sh(&sb, "sleep 300 &").await; // an earlier background job survives
                                  // (start times are known to 10 ms; a model's calls are seconds apart)
    tokio::time::sleep(Duration::from_millis(200)).await;
    let t0 = Instant::now();
    let o = sb
        .shell(
            "echo before; sleep 1000; echo never",
            Some(Duration::from_secs(1)),
        )
        .await
        .expect("shell");
    assert!(o.timed_out, "{o:?}");
    assert_eq!(o.stdout, "before\n");
    assert!(o.stderr.contains("command timed out after 1s"), "{o:?}");
    assert!(t0.elapsed() < Duration::from_secs(6), "{:?}", t0.elapsed());

    let o = sh(&sb, "echo ok; pwd; echo $KEEP").await;
    assert_eq!(o.stdout, "ok\n/tmp\nyes\n", "the session survived");
    let ps = sh(&sb, "ps -o args").await.stdout;
    assert!(!ps.contains("sleep 1000"), "{ps}");
    assert!(ps.contains("sleep 300"), "background job kept: {ps}");

    // A loop in the shell itself is stopped too.
    let o = sb
        .shell(
            "while :; do :; done; echo never",
            Some(Duration::from_millis(500)),
        )
        .await
        .expect("shell");
    assert!(o.timed_out);
    assert_eq!(o.stdout, "");
    assert!(
        o.stderr.contains("timed out after 0.5s; it was killed"),
        "{o:?}"
    );
    assert_eq!(sh(&sb, "echo ok; pwd").await.stdout, "ok\n/tmp\n");

    // A command that disarms the trap costs the session.
    let o = sb
        .shell(
            "trap '' USR1; while :; do :; done",
            Some(Duration::from_millis(500)),
        )
        .await
        .expect("shell");
    assert!(o.timed_out);
    assert!(
        o.stderr.contains("the shell session was restarted"),
        "{o:?}"
    );
    assert_eq!(sh(&sb, "echo ok; pwd").await.stdout, "ok\n/workspace\n");
    let ps = sh(&sb, "ps -o args").await.stdout;
    assert!(!ps.contains("sleep 300"), "old session's jobs gone: {ps}");
    sb.destroy().await;
}

#[tokio::test]
async fn shell_survives_a_cancelled_call() {
    let p = provider().await;
    let sb = p.sandbox(&run_id("cancel"));
    let _cleanup = Cleanup(sb.clone());

    sh(&sb, "cd /tmp").await;
    let cancelled =
        tokio::time::timeout(Duration::from_millis(300), sb.shell("sleep 1000", None)).await;
    assert!(cancelled.is_err(), "the call was cancelled");
    let o = sh(&sb, "echo ok; pwd").await;
    assert_eq!(o.stdout, "ok\n/tmp\n");
    sb.destroy().await;
}

#[tokio::test]
async fn output_is_capped() {
    let p = provider_with(SandboxConfig {
        output_limit: 64 * 1024,
        ..config()
    })
    .await;
    let sb = p.sandbox(&run_id("cap"));
    let _cleanup = Cleanup(sb.clone());

    let five_mib = "head -c 5242880 /dev/zero | tr '\\0' a; echo done >&2";
    let o = sh(&sb, five_mib).await;
    assert!(o.truncated);
    assert_eq!(o.exit_code, 0);
    assert!(o.stdout.starts_with(&"a".repeat(64 * 1024)));
    assert!(
        o.stdout.ends_with(&format!(
            "\n[output truncated: {} bytes over the 65536-byte limit]",
            5242880 - 65536
        )),
        "{}",
        &o.stdout[o.stdout.len() - 100..]
    );
    assert_eq!(o.stderr, "done\n");
    assert_eq!(sh(&sb, "echo small").await.stdout, "small\n");

    let o = sb
        .run(CommandSpec {
            command: five_mib.into(),
            workdir: None,
            timeout: None,
            stdin: None,
        })
        .await
        .expect("run");
    assert!(
        o.truncated && o.stdout.contains("[output truncated: "),
        "{}",
        o.stdout.len()
    );
    assert!(o.stdout.len() < 65536 + 200);

    // Endless output is stopped (at 64 MiB), not read until the timeout.
    let t0 = Instant::now();
    let o = sh(&sb, "yes").await;
    assert!(o.truncated && !o.timed_out, "{:?}", o.stderr);
    assert!(
        o.stderr.contains("printed more than 64 MiB"),
        "{:?}",
        o.stderr
    );
    assert_eq!(sh(&sb, "echo still").await.stdout, "still\n");
    let o = sb
        .run(CommandSpec {
            command: "yes".into(),
            workdir: None,
            timeout: None,
            stdin: None,
        })
        .await
        .expect("run");
    assert!(o.truncated && !o.timed_out, "{:?}", o.stderr);
    assert!(
        o.stderr.contains("printed more than 64 MiB"),
        "{:?}",
        o.stderr
    );
    assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
    sb.destroy().await;
}

#[tokio::test]
async fn run_is_a_one_off_command() {
    let p = provider().await;
    let sb = p.sandbox(&run_id("run"));
    let _cleanup = Cleanup(sb.clone());
    let spec = |command: &str| CommandSpec {
        command: command.into(),
        workdir: None,
        timeout: None,
        stdin: None,
    };

    let o = sb
        .run(spec("echo out; echo err >&2; exit 7"))
        .await
        .expect("run");
    assert_eq!(
        (o.stdout.as_str(), o.stderr.as_str(), o.exit_code),
        ("out\n", "err\n", 7)
    );
    let o = sb.run(spec("pwd")).await.expect("run");
    assert_eq!(o.stdout, "/workspace\n");
    sb.run(spec("mkdir -p sub")).await.expect("mkdir");
    let o = sb
        .run(CommandSpec {
            workdir: Some("sub".into()),
            stdin: Some("hello\nworld".into()),
            ..spec("pwd; cat")
        })
        .await
        .expect("run");
    assert_eq!(o.stdout, "/workspace/sub\nhello\nworld");
    // A plugin cannot run commands outside the work dir.
    for outside in ["/tmp", "/workspace/../etc", "/proc/self/fd/3"] {
        let err = sb
            .run(CommandSpec {
                workdir: Some(outside.into()),
                ..spec("pwd")
            })
            .await
            .expect_err(outside);
        assert!(
            err.to_string()
                .contains("outside the work dir `/workspace`"),
            "{err}"
        );
    }
    let o = sb.run(spec("cat")).await.expect("run without stdin");
    assert_eq!((o.stdout.as_str(), o.exit_code), ("", 0));

    let t0 = Instant::now();
    let o = sb
        .run(CommandSpec {
            timeout: Some(Duration::from_secs(1)),
            ..spec("echo start; sleep 1000 & sleep 1000")
        })
        .await
        .expect("run");
    assert!(o.timed_out, "{o:?}");
    assert_eq!(o.stdout, "start\n");
    assert!(o.stderr.contains("timed out after 1s"), "{o:?}");
    assert!(t0.elapsed() < Duration::from_secs(6), "{:?}", t0.elapsed());
    let ps = sb.run(spec("ps -o args")).await.expect("ps").stdout;
    assert!(!ps.contains("sleep 1000"), "all of it was killed: {ps}");
    sb.destroy().await;
}

/// A plugin asking for a longer timeout than `[sandbox] timeout` gets the
/// configured one (`timeout_secs` is a guest-chosen `u32`: 136 years).
#[tokio::test]
async fn a_timeout_a_plugin_asks_for_is_clamped_to_the_configured_one() {
    let p = provider_with(SandboxConfig {
        timeout: Duration::from_secs(1),
        ..config()
    })
    .await;
    let sb = p.sandbox(&run_id("clamp"));
    let _cleanup = Cleanup(sb.clone());
    let forever = Some(Duration::from_secs(u64::from(u32::MAX)));
    let o = sb
        .run(CommandSpec {
            command: "sleep 1000".into(),
            workdir: None,
            timeout: forever,
            stdin: None,
        })
        .await
        .expect("run");
    assert!(o.timed_out, "{o:?}");
    assert!(o.stderr.contains("timed out after 1s"), "{o:?}");
    let o = sb.shell("sleep 1000", forever).await.expect("shell");
    assert!(o.timed_out, "{o:?}");
    sb.destroy().await;
}

#[tokio::test]
async fn files_roundtrip_as_tar() {
    let p = provider().await;
    let sb = p.sandbox(&run_id("files"));
    let _cleanup = Cleanup(sb.clone());

    let bytes: Vec<u8> = (0..4096u32).map(|i| (i % 256) as u8).collect();
    sb.write_file("nested/dir/data.bin", &bytes)
        .await
        .expect("write");
    assert_eq!(
        sb.read_file("nested/dir/data.bin").await.expect("read"),
        bytes
    );
    assert_eq!(
        sb.read_file("/workspace/nested/dir/data.bin")
            .await
            .expect("read abs"),
        bytes
    );
    let quoted = "it's a \"name\" with $(spaces)";
    sb.write_file(quoted, b"q").await.expect("write odd name");
    assert_eq!(sb.read_file(quoted).await.expect("read odd name"), b"q");
    sb.write_file("nested/dir/data.bin", b"shorter")
        .await
        .expect("overwrite");
    assert_eq!(
        sb.read_file("nested/dir/data.bin").await.expect("read"),
        b"shorter"
    );
    assert_eq!(sh(&sb, "cat nested/dir/data.bin").await.stdout, "shorter");

    sh(&sb, "mkdir -p nested/sub && ln -s dir/data.bin nested/link").await;
    assert_eq!(
        sb.read_file("nested/link").await.expect("via symlink"),
        b"shorter"
    );
    let mut listing = sb.list_dir("nested").await.expect("list");
    listing.sort_by(|a, b| a.name.cmp(&b.name));
    let summary: Vec<(&str, bool)> = listing
        .iter()
        .map(|e| (e.name.as_str(), e.is_dir))
        .collect();
    assert_eq!(
        summary,
        vec![("dir", true), ("link", false), ("sub", true)],
        "{listing:?}"
    );
    let files = sb.list_dir("nested/dir").await.expect("list");
    assert_eq!(files.len(), 1);
    assert_eq!((files[0].name.as_str(), files[0].size), ("data.bin", 7));
    let root = sb.list_dir("").await.expect("list work dir");
    assert!(
        root.iter().any(|e| e.name == quoted && !e.is_dir),
        "{root:?}"
    );

    for bad in ["missing.txt", "nested"] {
        let err = sb.read_file(bad).await.expect_err(bad);
        assert!(matches!(err, SandboxError::Failed(_)), "{err:?}");
    }
    assert!(sb.list_dir("missing").await.is_err());
    assert!(sb.list_dir("nested/dir/data.bin").await.is_err());
    let err = sb
        .write_file("nested/dir", b"x")
        .await
        .expect_err("a directory");
    assert!(err.to_string().contains("directory"), "{err}");
    assert!(sb.list_dir("nested/dir").await.expect("still there").len() == 1);

    // Paths leaving the work dir stay in the container.
    sb.write_file("../../tmp/escaped", b"inside")
        .await
        .expect("write ..");
    assert_eq!(sh(&sb, "cat /tmp/escaped").await.stdout, "inside");
    sb.destroy().await;
}

#[tokio::test]
async fn sandboxes_are_isolated() {
    let p = provider().await;
    let a = p.sandbox(&run_id("iso-a"));
    let b = p.sandbox(&run_id("iso-b"));
    let _ca = Cleanup(a.clone());
    let _cb = Cleanup(b.clone());
    a.write_file("secret.txt", b"a's").await.expect("write");
    assert!(b.read_file("secret.txt").await.is_err());
    assert!(b.list_dir("").await.expect("list").is_empty());
    assert_eq!(sh(&b, "ls /workspace").await.stdout, "");
    a.destroy().await;
    b.destroy().await;
}

#[tokio::test]
async fn container_removed_from_outside_fails_cleanly() {
    let p = provider().await;
    let docker = p.docker().await.expect("docker");
    let run = run_id("killed");
    let sb = p.sandbox(&run);
    let _cleanup = Cleanup(sb.clone());
    sh(&sb, "echo up").await;
    let id = sb.container_id().await.expect("created");
    let force = RemoveContainerOptionsBuilder::default().force(true).build();
    docker
        .remove_container(&id, Some(force))
        .await
        .expect("remove");

    let err = sb.shell("echo x", None).await.expect_err("container gone");
    assert!(matches!(err, SandboxError::Failed(_)), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("gone") || text.contains("not running"),
        "{text}"
    );
    assert_eq!(sb.fatal_error(), Some(err));
    assert!(sb.read_file("x").await.is_err());
    sb.destroy().await;
    sb.destroy().await;
}

#[tokio::test]
async fn missing_image_is_unavailable() {
    let p = provider_with(SandboxConfig {
        image: "agentd-no-such-image:latest".into(),
        ..config()
    })
    .await;
    let sb = p.for_run(&run_id("noimage"));
    assert!(sb.fatal_error().is_none());
    let err = sb.shell("true", None).await.expect_err("no image");
    let SandboxError::Unavailable(msg) = &err else {
        panic!("{err:?}")
    };
    assert!(msg.contains("agentd-no-such-image:latest"), "{msg}");
    assert!(msg.contains("scripts/build-images.sh"), "{msg}");
    assert_eq!(sb.fatal_error(), Some(err.clone()));
    assert_eq!(sb.write_file("x", b"y").await, Err(err));
    sb.destroy().await;
}

#[tokio::test]
async fn engine_down_is_unavailable() {
    let p = DockerSandboxProvider::new(&SandboxConfig {
        docker_host: Some("unix:///nonexistent/agentd-test/docker.sock".into()),
        ..config()
    })
    .expect("constructing does not touch the engine");
    let err = p.ping().await.expect_err("no engine");
    assert!(matches!(err, SandboxError::Unavailable(_)), "{err:?}");
    let sb = p.for_run(&run_id("down"));
    sb.prepare().await.expect("lazy prepare does nothing");
    let err = sb.shell("true", None).await.expect_err("no engine");
    let SandboxError::Unavailable(msg) = &err else {
        panic!("{err:?}")
    };
    assert!(
        msg.contains("cannot reach the Docker engine at unix:///nonexistent"),
        "{msg}"
    );
    assert_eq!(sb.fatal_error(), Some(err));
    sb.destroy().await;

    assert!(DockerSandboxProvider::new(&SandboxConfig {
        memory_limit: "lots".into(),
        ..config()
    })
    .is_err());
}

#[tokio::test]
async fn reap_orphans_removes_only_unknown_runs() {
    let p = provider().await;
    let live = p.sandbox(&run_id("reap-live"));
    let orphan = p.sandbox(&run_id("reap-orphan"));
    let _c1 = Cleanup(live.clone());
    let _c2 = Cleanup(orphan.clone());
    sh(&live, "true").await;
    sh(&orphan, "true").await;

    // Spare every other managed container (other tests, other users of this
    // engine): only the orphan is unknown.
    let all = common::containers_labelled(&format!("{LABEL_MANAGED}=true")).await;
    let keep: Vec<String> = all
        .iter()
        .filter_map(|c| c.labels.as_ref()?.get(LABEL_RUN).cloned())
        .filter(|r| r != orphan.run_id())
        .collect();
    assert!(keep.iter().any(|r| r == live.run_id()));

    let removed = p.reap_orphans(&keep).await.expect("reap");
    assert_eq!(removed, 1);
    assert!(containers_of(orphan.run_id()).await.is_empty());
    assert_eq!(containers_of(live.run_id()).await.len(), 1);
    assert!(orphan.shell("true", None).await.is_err());
    assert_eq!(sh(&live, "echo alive").await.stdout, "alive\n");
    live.destroy().await;
    orphan.destroy().await;
}

#[tokio::test]
async fn shell_round_trip_is_fast() {
    let p = provider().await;
    let sb = p.sandbox(&run_id("latency"));
    let _cleanup = Cleanup(sb.clone());
    sh(&sb, "true").await;
    let mut times: Vec<Duration> = Vec::new();
    for i in 0..200 {
        let t0 = Instant::now();
        let o = sh(&sb, &format!("echo {i}")).await;
        times.push(t0.elapsed());
        assert_eq!(o.stdout, format!("{i}\n"));
    }
    times.sort();
    let p50 = times[times.len() / 2];
    let p99 = times[times.len() * 99 / 100];
    eprintln!("shell round trip: p50 {p50:?}, p99 {p99:?}");
    // An exec per command would cost ~60 ms.
    assert!(p50 < Duration::from_millis(30), "p50 {p50:?}");
    sb.destroy().await;
}

/// Issue 11 (M1, H3): commands run as the unprivileged `sandbox` user
/// (uid 1000) on a read-only root filesystem; the work dir and /tmp are
/// size-limited tmpfs the user owns (work dir) or may write (/tmp); files
/// written through the archive API belong to that user; logs are off and
/// PID 1's stdout (the engine's log pipe) is out of the user's reach.
#[tokio::test]
async fn commands_run_unprivileged_on_a_read_only_root() {
    let p = provider_with(SandboxConfig {
        disk_limit: "32m".into(),
        max_open_files: 512,
        ..config()
    })
    .await;
    let docker = p.docker().await.expect("docker");
    let run = run_id("unpriv");
    let sb = p.sandbox(&run);
    let _cleanup = Cleanup(sb.clone());

    let o = sh(&sb, "id -u; id -g; echo $HOME; ulimit -n").await;
    assert_eq!(o.stdout, "1000\n1000\n/workspace\n512\n", "{o:?}");
    let o = sh(&sb, "touch /etc/x || echo refused").await;
    assert!(o.stdout.contains("refused"), "{o:?}");
    assert!(o.stderr.contains("Read-only file system"), "{o:?}");
    let o = sh(&sb, "echo x > /proc/1/fd/1 || echo refused").await;
    assert!(
        o.stdout.contains("refused"),
        "PID 1's stdout is out of reach: {o:?}"
    );

    // The work dir: a tmpfs the user owns, where programs can be run.
    let o = sh(
        &sb,
        "stat -c '%u:%g %a' /workspace; grep -E ' /(workspace|tmp) ' /proc/mounts | cut -d' ' -f1-3 | sort; \
         printf '#!/bin/sh\\necho ran\\n' > run.sh && chmod +x run.sh && ./run.sh; \
         echo t > /tmp/t && cp run.sh /tmp/ && /tmp/run.sh",
    )
    .await;
    assert_eq!(
        o.stdout, "1000:1000 755\ntmpfs /tmp tmpfs\ntmpfs /workspace tmpfs\nran\nran\n",
        "{o:?}"
    );

    // Uploaded files belong to the sandbox user, who can change them.
    sb.write_file("up/loaded.txt", b"one\n")
        .await
        .expect("write");
    sb.write_file("/tmp/loaded.txt", b"one\n")
        .await
        .expect("write /tmp");
    let o = sh(
        &sb,
        "stat -c '%u:%g' up up/loaded.txt /tmp/loaded.txt; echo two >> up/loaded.txt && cat up/loaded.txt && rm up/loaded.txt /tmp/loaded.txt && echo removed",
    )
    .await;
    assert_eq!(
        o.stdout, "1000:1000\n1000:1000\n1000:1000\none\ntwo\nremoved\n",
        "{o:?}"
    );
    let err = sb.write_file("/etc/agentd", b"x").await.expect_err("ro");
    assert!(err.to_string().contains("read-only"), "{err}");

    let id = sb.container_id().await.expect("created");
    let info = docker.inspect_container(&id, None).await.expect("inspect");
    let host = info.host_config.expect("host config");
    assert_eq!(host.readonly_rootfs, Some(true));
    assert_eq!(
        host.log_config.and_then(|l| l.typ).as_deref(),
        Some("none"),
        "container logs are off"
    );
    assert_eq!(info.log_path.as_deref().unwrap_or(""), "", "no log file");
    let ulimits: Vec<(String, i64)> = host
        .ulimits
        .unwrap_or_default()
        .into_iter()
        .map(|u| (u.name.unwrap_or_default(), u.hard.unwrap_or(0)))
        .collect();
    assert!(ulimits.contains(&("nofile".into(), 512)), "{ulimits:?}");
    assert!(ulimits.contains(&("fsize".into(), 64 << 20)), "{ulimits:?}");
    sb.destroy().await;
    assert!(containers_of(&run).await.is_empty());
}

/// `[sandbox] user`: a numeric uid:gid works without a passwd entry (the
/// way to use an image such as `python:3.12-slim`), `root` must be named,
/// and a user the image lacks is a clear, fatal error naming the key.
#[tokio::test]
async fn the_sandbox_user_is_configurable() {
    for (user, want) in [("1234:1234", "1234:1234"), ("root", "0:0")] {
        let p = provider_with(SandboxConfig {
            user: user.into(),
            ..config()
        })
        .await;
        let sb = p.sandbox(&run_id("user"));
        let _cleanup = Cleanup(sb.clone());
        let o = sh(&sb, "echo $(id -u):$(id -g); stat -c '%u:%g' /workspace").await;
        assert_eq!(o.stdout, format!("{want}\n{want}\n"), "{user}: {o:?}");
        sb.write_file("f", b"x").await.expect("write");
        assert_eq!(
            sh(&sb, "stat -c '%u:%g' f").await.stdout,
            format!("{want}\n")
        );
        sb.destroy().await;
    }

    let p = provider_with(SandboxConfig {
        user: "nosuchuser".into(),
        ..config()
    })
    .await;
    let run = run_id("nouser");
    let sb = p.sandbox(&run);
    let err = sb.shell("true", None).await.expect_err("no such user");
    let msg = err.to_string();
    assert!(msg.contains("[sandbox] user `nosuchuser`"), "{msg}");
    assert!(msg.contains("1000:1000"), "names the numeric way: {msg}");
    assert_eq!(sb.fatal_error(), Some(err));
    assert!(containers_of(&run).await.is_empty());
    let lookups = common::containers_labelled(&format!("{LABEL_RUN}=agentd-user-lookup")).await;
    assert!(
        lookups.is_empty(),
        "the lookup container is removed: {lookups:?}"
    );

    for (cfg, key) in [
        (
            SandboxConfig {
                user: "".into(),
                ..config()
            },
            "[sandbox] user",
        ),
        (
            SandboxConfig {
                disk_limit: "0".into(),
                ..config()
            },
            "[sandbox] disk_limit",
        ),
        (
            SandboxConfig {
                disk_limit: "lots".into(),
                ..config()
            },
            "[sandbox] disk_limit",
        ),
        (
            SandboxConfig {
                max_open_files: 3,
                ..config()
            },
            "[sandbox] max_open_files",
        ),
        (
            SandboxConfig {
                work_dir: "/".into(),
                ..config()
            },
            "[sandbox] work_dir",
        ),
    ] {
        let err = DockerSandboxProvider::new(&cfg).err().expect(key);
        assert!(err.to_string().contains(key), "{err}");
    }
}

/// L9: a file over the read limit, or a folder (whose archive is the whole
/// tree), is refused from the archive's first header, before its bytes are
/// buffered; the error says why.
#[tokio::test]
async fn reads_refuse_large_files_and_folders_from_the_header() {
    let p = provider().await.with_max_read_bytes(1 << 20);
    let sb = p.sandbox(&run_id("bigread"));
    let _cleanup = Cleanup(sb.clone());
    sh(
        &sb,
        "head -c 3145728 /dev/zero > big && mkdir tree && cp big tree/a && cp big tree/b",
    )
    .await;
    let err = sb.read_file("big").await.expect_err("too large");
    assert!(
        err.to_string()
            .contains("it is 3145728 bytes, over the 1048576-byte limit"),
        "{err}"
    );
    let err = sb.read_file("tree").await.expect_err("a folder");
    assert!(err.to_string().contains("it is a directory"), "{err}");
    sb.write_file("small", b"fits").await.expect("write");
    assert_eq!(sb.read_file("small").await.expect("read"), b"fits");
    sb.destroy().await;
}
