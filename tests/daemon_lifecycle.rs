//! The daemon as a service: systemd's notify protocol and socket
//! activation, SIGHUP, SIGTERM with runs in flight, and `kill -9` followed
//! by a restart. Runs use a real Docker sandbox (scripts/ensure-docker.sh).

use crate::common;

use std::os::unix::net::{UnixDatagram, UnixListener};
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use agentd::testkit::{FakeLlm, Reply};
use common::daemon::{config_text, request, Daemon};

const AGENTS: &str = "\n[agents.shell]\nstrategy = \"toolcall\"\ntools = [\"bash\", \"terminate\"]\nmax_steps = 5\n\n[agents.echoer]\nstrategy = \"toolcall\"\ntools = [\"echo\", \"terminate\"]\n";

/// Containers of any of these runs.
async fn containers_of(runs: &[String]) -> usize {
    let mut n = 0;
    for run in runs {
        n += common::containers_of_run(run).await;
    }
    n
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_then_restart_keeps_history_and_interrupts_the_run_in_flight() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for("done one", [Reply::terminate()]);
    llm.push_for("done two", [Reply::terminate()]);
    llm.push_for(
        "in flight",
        [Reply::call("bash", r#"{"command":"sleep 600"}"#)],
    );
    let mut d = tokio::task::block_in_place(|| Daemon::start(&llm, AGENTS));
    let (finished, in_flight) = tokio::task::block_in_place(|| {
        let a = d.create_run("shell", "done one");
        let b = d.create_run("shell", "done two");
        d.wait_run(&a, Duration::from_secs(60));
        d.wait_run(&b, Duration::from_secs(60));
        let c = d.create_run("shell", "in flight");
        d.wait_for_event(&c, "tool_call");
        (vec![a, b], c)
    });
    // The command is running in its container now.
    let deadline = Instant::now() + Duration::from_secs(30);
    while containers_of(std::slice::from_ref(&in_flight)).await == 0 {
        assert!(Instant::now() < deadline, "the sandbox never appeared");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::task::block_in_place(|| {
        d.kill9();
        d.spawn(&[]);
        for id in &finished {
            let (status, v) = d.get(&format!("/v1/runs/{id}"));
            assert_eq!(status, 200, "{v}");
            assert_eq!(v["outcome"], "finished", "{v}");
            assert!(!v["messages"].as_array().expect("messages").is_empty());
        }
        let (status, v) = d.get(&format!("/v1/runs/{in_flight}"));
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["state"], "ended", "{v}");
        assert_eq!(v["outcome"], "interrupted", "{v}");
        // The messages it had are kept, and its stream ends properly.
        assert!(!v["messages"].as_array().expect("messages").is_empty());
        let events = d.events(&in_flight);
        assert_eq!(events.last().expect("events")["outcome"], "interrupted");
        let (_, list) = d.get("/v1/runs");
        assert_eq!(list["runs"].as_array().expect("runs").len(), 3);
    });
    assert_eq!(
        containers_of(std::slice::from_ref(&in_flight)).await,
        0,
        "the killed daemon's container was removed at start-up"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_gives_runs_their_grace_then_cancels_and_removes_every_sandbox() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for("long", [Reply::call("bash", r#"{"command":"sleep 600"}"#)]);
    let mut d = tokio::task::block_in_place(|| Daemon::start(&llm, AGENTS));
    let id = tokio::task::block_in_place(|| {
        let id = d.create_run("shell", "long");
        d.wait_for_event(&id, "tool_call");
        id
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    while containers_of(std::slice::from_ref(&id)).await == 0 {
        assert!(Instant::now() < deadline, "the sandbox never appeared");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let code = tokio::task::block_in_place(|| {
        d.signal(libc::SIGTERM);
        // New runs are refused while shutting down.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match common::daemon::raw(
                &d.socket,
                "POST",
                "/v1/runs",
                Some(br#"{"agent":"shell","request":"late"}"#),
            ) {
                Ok((503, body)) => {
                    let v: serde_json::Value = serde_json::from_slice(&body).expect("json");
                    assert_eq!(v["error"]["code"], "shutting_down");
                    break;
                }
                Ok(_) | Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                other => panic!("expected 503 while shutting down, got {other:?}"),
            }
        }
        d.wait_exit(Duration::from_secs(60))
    });
    assert_eq!(code, Some(0), "{}", d.log_text());
    assert_eq!(containers_of(std::slice::from_ref(&id)).await, 0);
    // The run's end was recorded before exit.
    tokio::task::block_in_place(|| {
        d.spawn(&[]);
        let (_, v) = d.get(&format!("/v1/runs/{id}"));
        // Cut short by the shutdown, not cancelled by anyone: resumable.
        assert_eq!(v["outcome"], "interrupted", "{v}");
        assert!(
            v["error"].as_str().is_some_and(|e| e.contains("shut down")),
            "{v}"
        );
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn notify_protocol_ready_then_stopping() {
    let llm = FakeLlm::start().await.expect("fake llm");
    let dir = tempfile::tempdir().expect("tempdir");
    let notify_path = dir.path().join("notify.sock");
    let notify = UnixDatagram::bind(&notify_path).expect("bind notify socket");
    notify
        .set_read_timeout(Some(Duration::from_secs(120)))
        .expect("timeout");
    let mut d = tokio::task::block_in_place(|| {
        let mut d = Daemon::start(&llm, AGENTS);
        // Restart under "systemd": with NOTIFY_SOCKET and a watchdog.
        d.signal(libc::SIGTERM);
        d.wait_exit(Duration::from_secs(30));
        d.spawn(&[
            ("NOTIFY_SOCKET", notify_path.to_str().expect("utf-8")),
            ("WATCHDOG_USEC", "200000"),
        ]);
        d
    });
    let messages = tokio::task::block_in_place(|| {
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        // READY=1 (the socket answered before we got here), then pings.
        while !seen.iter().any(|m: &String| m.contains("WATCHDOG=1")) {
            let n = notify.recv(&mut buf).expect("a notify message");
            seen.push(String::from_utf8_lossy(&buf[..n]).to_string());
        }
        d.signal(libc::SIGTERM);
        while !seen.iter().any(|m| m.contains("STOPPING=1")) {
            let n = notify.recv(&mut buf).expect("STOPPING=1");
            seen.push(String::from_utf8_lossy(&buf[..n]).to_string());
        }
        assert_eq!(d.wait_exit(Duration::from_secs(30)), Some(0));
        seen
    });
    let ready = messages
        .iter()
        .position(|m| m.lines().any(|l| l == "READY=1"))
        .expect("READY=1");
    let stopping = messages
        .iter()
        .position(|m| m.lines().any(|l| l == "STOPPING=1"))
        .expect("STOPPING=1");
    assert!(ready < stopping, "{messages:?}");
    assert!(
        messages[ready].contains("STATUS=0 runs active"),
        "{messages:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn socket_activation_serves_on_the_passed_fd() {
    let llm = FakeLlm::start().await.expect("fake llm");
    let dir = tempfile::tempdir().expect("tempdir");
    let plugins = common::plugins_dir(common::daemon::DAEMON_PLUGINS);
    // The configured path is NOT the socket we pass: the daemon must use fd 3.
    let config = dir.path().join("agentd.toml");
    std::fs::write(
        &config,
        config_text(&llm, dir.path(), plugins.path(), AGENTS),
    )
    .expect("config");
    let activated = dir.path().join("activated.sock");
    let listener = UnixListener::bind(&activated).expect("bind");
    let fd = std::os::fd::AsRawFd::as_raw_fd(&listener);
    let mut cmd = std::process::Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(r#"LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" serve --config "$1""#)
        .arg(env!("CARGO_BIN_EXE_agentd"))
        .arg(&config)
        .env_remove("LISTEN_FDS")
        .env_remove("LISTEN_PID")
        .env_remove("NOTIFY_SOCKET")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: dup2 is async-signal-safe; it runs in the child before exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(fd, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("spawn");
    drop(listener);
    llm.push_for("activated", [Reply::terminate()]);
    let result = tokio::task::block_in_place(|| {
        let deadline = Instant::now() + Duration::from_secs(120);
        let (status, v) = loop {
            match common::daemon::raw(&activated, "GET", "/v1/status", None) {
                Ok((status, body)) => {
                    break (
                        status,
                        serde_json::from_slice::<serde_json::Value>(&body).expect("json"),
                    )
                }
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Err(e) => panic!("no answer on the activated socket: {e}"),
            }
        };
        assert_eq!(status, 200, "{v}");
        assert!(
            !dir.path().join("agentd.sock").exists(),
            "bound its own socket"
        );
        let (status, v) = request(
            &activated,
            "POST",
            "/v1/runs",
            Some(br#"{"agent":"echoer","request":"activated"}"#),
        );
        assert_eq!(status, 201, "{v}");
        // SAFETY: kill has no memory-safety preconditions.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGTERM);
        }
        child.wait().expect("wait")
    });
    assert!(result.success());
    // The socket belongs to the (simulated) socket unit: still there.
    assert!(activated.exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn sighup_reloads_agents_and_a_bad_file_keeps_the_old_configuration() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.set_fallback(Reply::terminate());
    let d = tokio::task::block_in_place(|| Daemon::start(&llm, AGENTS));
    let agent_names = |d: &Daemon| -> Vec<String> {
        let (_, v) = d.get("/v1/agents");
        v["agents"]
            .as_array()
            .expect("agents")
            .iter()
            .map(|a| a["name"].as_str().unwrap_or("").to_string())
            .collect()
    };
    let wait_for = |d: &Daemon, name: &str, present: bool| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while agent_names(d).contains(&name.to_string()) != present {
            assert!(Instant::now() < deadline, "agent {name} present={present}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    tokio::task::block_in_place(|| {
        let good = std::fs::read_to_string(&d.config).expect("config");
        // A new agent appears on SIGHUP.
        std::fs::write(
            &d.config,
            format!("{good}\n[agents.added]\nstrategy = \"toolcall\"\ntools = [\"terminate\"]\n"),
        )
        .expect("write");
        d.signal(libc::SIGHUP);
        wait_for(&d, "added", true);
        let id = d.create_run("added", "hello");
        assert_eq!(
            d.wait_run(&id, Duration::from_secs(30))["outcome"],
            "finished"
        );

        // A broken file is refused whole: `added` stays, nothing half-applied.
        std::fs::write(&d.config, format!("{good}\n[agents.broken\n")).expect("write");
        d.signal(libc::SIGHUP);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !d.log_text().contains("configuration reload refused") {
            assert!(Instant::now() < deadline, "{}", d.log_text());
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(
            d.log_text().contains("agentd.toml"),
            "the error names the file"
        );
        assert!(agent_names(&d).contains(&"added".to_string()));
        let id = d.create_run("added", "after the bad reload");
        assert_eq!(
            d.wait_run(&id, Duration::from_secs(30))["outcome"],
            "finished"
        );
    });
}
