//! Fault family 3 of issue 11: the sandbox. A real daemon, real Docker,
//! the real `bash` plugin, and the scripted fake LLM playing a model whose
//! commands attack the host through the container: flooding the engine's
//! log pipe, filling the disk, a fork bomb, the container killed under a
//! command, the engine restarted under a run. Each test then asserts the
//! invariants of `common::fault`.
//!
//! Needs a Docker engine (scripts/ensure-docker.sh), the tiny image
//! (scripts/build-images.sh --tiny-only) and root (the engine-restart test
//! starts a private `dockerd`; the log test reads the engine's folder).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agentd::testkit::{FakeLlm, Reply};
use common::daemon::Daemon;
use common::fault::{
    assert_ended_because, assert_no_containers, assert_status_within_a_second, Bystander,
    Committed, BYSTANDER_AGENT,
};
use serde_json::json;

/// The agent whose commands misbehave.
const FAULTY_AGENT: &str = "\n[agents.faulty]\nstrategy = \"toolcall\"\ntools = [\"bash\", \"terminate\"]\nmax_steps = 8\n";

/// A command that waits until the test releases it ([`release`]), so the
/// test can look at the live container between two steps of a run without
/// guessing how long anything takes.
const GATE: &str = "while [ ! -e /tmp/agentd-test-gate ]; do sleep 0.1; done; echo released";

/// Starts `agentd serve` with the bystander and faulty agents and these
/// extra `[sandbox]` keys.
fn start_daemon(llm: &FakeLlm, sandbox_keys: &str) -> Daemon {
    let mut d = Daemon::unstarted(llm, &format!("{BYSTANDER_AGENT}{FAULTY_AGENT}"));
    let text = std::fs::read_to_string(&d.config)
        .expect("read config")
        .replace("[sandbox]\n", &format!("[sandbox]\n{sandbox_keys}\n"));
    std::fs::write(&d.config, text).expect("write config");
    d.spawn(&[]);
    d
}

fn bash(command: &str) -> Reply {
    Reply::call("bash", &json!({ "command": command }).to_string())
}

/// Runs the docker CLI (on `host`, or the default engine) and returns its
/// stdout; panics with its stderr when it fails.
fn docker(host: Option<&str>, args: &[&str]) -> String {
    let mut cmd = Command::new("docker");
    if let Some(h) = host {
        cmd.arg("-H").arg(h);
    }
    let out = cmd
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("docker {args:?}: {e}"));
    assert!(
        out.status.success(),
        "docker {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The ids of the containers of run `id` on `host`.
fn containers_on(host: Option<&str>, run: &str) -> Vec<String> {
    let label = format!("label=agentd.run={run}");
    docker(host, &["ps", "-aq", "--no-trunc", "--filter", &label])
        .lines()
        .map(str::to_string)
        .collect()
}

/// Waits (polling, up to a generous bound) until `cond` holds.
fn wait_until(what: &str, within: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !cond() {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until run `id` has had `n` tool calls and its container exists;
/// returns the container's id.
fn wait_for_calls(d: &Daemon, host: Option<&str>, id: &str, n: usize) -> String {
    let mut found = String::new();
    wait_until(
        "the run's command to start",
        Duration::from_secs(120),
        || {
            let calls = d
                .events_so_far(id)
                .iter()
                .filter(|e| e["type"] == "tool_call")
                .count();
            if calls < n {
                return false;
            }
            match containers_on(host, id).first() {
                Some(c) => {
                    found = c.clone();
                    true
                }
                None => false,
            }
        },
    );
    found
}

/// Waits (up to a minute) until `command` runs in `container`. The call's
/// event and the container come before the container has started and its
/// shell has started the command: a fault injected then is a failed
/// creation or start, not the command's, and ends the run with another
/// error.
fn wait_for_command(host: Option<&str>, container: &str, command: &str) {
    wait_until("the command to run", Duration::from_secs(60), || {
        let mut top = Command::new("docker");
        if let Some(h) = host {
            top.arg("-H").arg(h);
        }
        top.args(["top", container])
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(command))
    });
}

/// Lets a [`GATE`] command in `container` finish.
fn release(host: Option<&str>, container: &str) {
    docker(
        host,
        &[
            "exec",
            "-u",
            "1000:1000",
            container,
            "touch",
            "/tmp/agentd-test-gate",
        ],
    );
}

/// Bytes in the regular files below `dir` (not following links).
fn bytes_below(dir: &Path) -> u64 {
    let entries = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {} (run the tests as root): {e}", dir.display()));
    let mut total = 0;
    for entry in entries.flatten() {
        let Ok(meta) = entry.path().symlink_metadata() else {
            continue;
        };
        if meta.is_dir() {
            total += bytes_below(&entry.path());
        } else if meta.is_file() {
            total += meta.len();
        }
    }
    total
}

/// Starts the failing run and, next to it, a bystander run; the daemon
/// must answer while both are under way.
fn start_next_to_a_bystander(d: &Daemon, llm: &FakeLlm, request: &str) -> (String, Bystander) {
    let id = d.create_run("faulty", request);
    let bystander = Bystander::start(d, llm);
    assert_status_within_a_second(d);
    (id, bystander)
}

/// The invariants after a fault on the default engine: the bystander that
/// ran next to the fault finished normally, nothing is left, nothing
/// committed changed.
async fn after_the_fault(d: &Daemon, failing: &str, bystander: Bystander, committed: &Committed) {
    tokio::task::block_in_place(|| assert_status_within_a_second(d));
    tokio::task::block_in_place(|| bystander.finish(d));
    let ids = [failing, bystander.id.as_str()];
    tokio::task::block_in_place(|| {
        wait_until(
            "the sandboxes to be removed",
            Duration::from_secs(60),
            || ids.iter().all(|id| containers_on(None, id).is_empty()),
        )
    });
    assert_no_containers(&ids).await;
    tokio::task::block_in_place(|| committed.assert_unchanged(d));
}

/// One ended run, so that `Committed` has something to guard.
fn commit_one(d: &Daemon, llm: &FakeLlm) -> Committed {
    Bystander::start(d, llm).finish(d);
    let committed = Committed::take(d);
    assert!(committed.len() >= 1);
    committed
}

/// H3: PID 1's stdout is the pipe to the engine's log copier, and with the
/// default json-file driver whatever a command writes there lands in a file
/// on the host, unbounded. Now logs are off and PID 1 is out of the
/// sandbox user's reach: the engine's folder for the container stays a few
/// kilobytes after a command tried to write 1 GiB there.
#[tokio::test(flavor = "multi_thread")]
async fn a_gigabyte_written_to_pid1_stdout_never_reaches_the_host() {
    let llm = FakeLlm::start().await.expect("fake llm");
    let request = "flood the container log";
    llm.push_for(
        request,
        [
            bash("head -c 1073741824 /dev/zero > /proc/1/fd/1; echo \"rc=$?\""),
            bash(GATE),
            Reply::terminate(),
        ],
    );
    let d = tokio::task::block_in_place(|| start_daemon(&llm, ""));
    let committed = tokio::task::block_in_place(|| commit_one(&d, &llm));
    let (id, bystander) =
        tokio::task::block_in_place(|| start_next_to_a_bystander(&d, &llm, request));
    let container = tokio::task::block_in_place(|| wait_for_calls(&d, None, &id, 2));

    let root = docker(None, &["info", "-f", "{{.DockerRootDir}}"]);
    let folder = PathBuf::from(root).join("containers").join(&container);
    let size = bytes_below(&folder);
    assert!(
        size < 1 << 20,
        "the engine's folder of the container holds {size} bytes"
    );
    let logging = docker(
        None,
        &[
            "inspect",
            "-f",
            "{{.HostConfig.LogConfig.Type}}|{{.LogPath}}",
            &container,
        ],
    );
    assert_eq!(logging, "none|", "logs are off and there is no log file");
    release(None, &container);

    let record = tokio::task::block_in_place(|| d.wait_run(&id, Duration::from_secs(120)));
    assert_eq!(record["outcome"], "finished", "{record}");
    let out = common::fault::tool_contents(&record);
    assert!(
        out[0].contains("Permission denied") && !out[0].contains("rc=0"),
        "the write to PID 1's stdout is refused: {out:?}"
    );
    after_the_fault(&d, &id, bystander, &committed).await;
}

/// H3: filling the work dir (and /tmp) fails inside the container with
/// ENOSPC at `disk_limit`; nothing lands on the host's disk (the root
/// filesystem is read-only, the writable layer stays empty, the work dir
/// is a tmpfs).
#[tokio::test(flavor = "multi_thread")]
async fn filling_the_work_dir_fails_with_enospc_and_spares_the_host_disk() {
    let llm = FakeLlm::start().await.expect("fake llm");
    let request = "fill the disk";
    llm.push_for(
        request,
        [
            bash(
                "dd if=/dev/zero of=/workspace/fill bs=1M count=1024; echo \"dd=$?\"; \
                 echo \"size=$(($(stat -c %s /workspace/fill) >> 20))\"; rm /workspace/fill; \
                 fallocate -l 100M /workspace/fill; echo \"fallocate=$?\"; \
                 fallocate -l 1G /workspace/fill; echo \"big=$?\"; \
                 dd if=/dev/zero of=/tmp/fill bs=1M count=1024; echo \"tmp=$?\"; \
                 dd if=/dev/zero of=/fill bs=1M count=1; echo \"root=$?\"",
            ),
            bash(GATE),
            Reply::terminate(),
        ],
    );
    let d = tokio::task::block_in_place(|| {
        start_daemon(&llm, "disk_limit = \"64m\"\nmemory_limit = \"256m\"")
    });
    let committed = tokio::task::block_in_place(|| commit_one(&d, &llm));
    let (id, bystander) =
        tokio::task::block_in_place(|| start_next_to_a_bystander(&d, &llm, request));
    let container = tokio::task::block_in_place(|| wait_for_calls(&d, None, &id, 2));
    let layer = docker(
        None,
        &["inspect", "--size", "-f", "{{.SizeRw}}", &container],
    );
    let layer: u64 = layer.parse().unwrap_or_else(|_| panic!("SizeRw {layer:?}"));
    assert!(
        layer < 1 << 20,
        "{layer} bytes landed in the container's writable layer on the host"
    );
    release(None, &container);

    let record = tokio::task::block_in_place(|| d.wait_run(&id, Duration::from_secs(120)));
    assert_eq!(record["outcome"], "finished", "{record}");
    let out = &common::fault::tool_contents(&record)[0];
    for want in [
        "No space left on device",
        "dd=1",
        "size=64",
        "fallocate=1",
        "tmp=1",
        "Read-only file system",
        "root=1",
    ] {
        assert!(out.contains(want), "{want:?} not in {out}");
    }
    // Past the fsize ulimit (twice the disk limit) the kernel refuses a
    // file before looking for space (EFBIG, SIGXFSZ): a failure all the same.
    assert!(out.contains("big=") && !out.contains("big=0"), "{out}");
    after_the_fault(&d, &id, bystander, &committed).await;
}

/// A fork bomb meets the pids limit inside its own container: its forks
/// fail, the daemon and another run carry on, and the container goes.
#[tokio::test(flavor = "multi_thread")]
async fn a_fork_bomb_meets_the_pids_limit() {
    let llm = FakeLlm::start().await.expect("fake llm");
    let request = "fork bomb";
    llm.push_for(
        request,
        [
            bash(
                "bomb() { bomb | bomb & }; bomb; \
                 n=0; while [ $n -lt 1000 ]; do /bin/true || break; n=$((n+1)); done; echo end",
            ),
            bash("echo after the bomb"),
            Reply::terminate(),
        ],
    );
    let d = tokio::task::block_in_place(|| start_daemon(&llm, "pids_limit = 64\ntimeout = 30"));
    let committed = tokio::task::block_in_place(|| commit_one(&d, &llm));
    let (id, bystander) =
        tokio::task::block_in_place(|| start_next_to_a_bystander(&d, &llm, request));
    let record = tokio::task::block_in_place(|| d.wait_run(&id, Duration::from_secs(180)));
    assert_eq!(record["outcome"], "finished", "{record}");
    let out = common::fault::tool_contents(&record);
    assert!(
        out.iter()
            .any(|o| o.contains("can't fork") || o.contains("Resource temporarily unavailable")),
        "the forks failed at the pids limit: {out:?}"
    );
    after_the_fault(&d, &id, bystander, &committed).await;
}

/// `docker kill` of the container while a command runs: the run ends
/// `error` naming its sandbox container, at once (not after the
/// command's 600 s), and nothing is left.
#[tokio::test(flavor = "multi_thread")]
async fn docker_kill_mid_command_ends_the_run_with_a_clear_error() {
    let llm = FakeLlm::start().await.expect("fake llm");
    let request = "sleep, to be killed";
    llm.push_for(
        request,
        [bash("sleep 600"), bash("echo again"), Reply::terminate()],
    );
    let d = tokio::task::block_in_place(|| start_daemon(&llm, ""));
    let committed = tokio::task::block_in_place(|| commit_one(&d, &llm));
    let (id, bystander) =
        tokio::task::block_in_place(|| start_next_to_a_bystander(&d, &llm, request));
    tokio::task::block_in_place(|| {
        let container = wait_for_calls(&d, None, &id, 1);
        wait_for_command(None, &container, "sleep 600");
        docker(None, &["kill", &container]);
    });

    let record = tokio::task::block_in_place(|| d.wait_run(&id, Duration::from_secs(120)));
    assert_ended_because(&record, "error", &["sandbox container", "killed"]);
    after_the_fault(&d, &id, bystander, &committed).await;
}

/// A private Docker engine, so that restarting it disturbs no other test.
struct PrivateEngine {
    dir: tempfile::TempDir,
    child: Option<std::process::Child>,
    host: String,
}

impl PrivateEngine {
    fn start() -> PrivateEngine {
        let dir = tempfile::Builder::new()
            .prefix("agentd-engine")
            .tempdir_in("/tmp")
            .expect("tempdir");
        let host = format!("unix://{}/docker2.sock", dir.path().display());
        let mut e = PrivateEngine {
            dir,
            child: None,
            host,
        };
        e.spawn();
        let mut save = Command::new("docker")
            .args(["save", "agentd-sandbox-tiny:latest"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("docker save");
        let load = Command::new("docker")
            .args(["-H", &e.host, "load"])
            .stdin(save.stdout.take().expect("save output"))
            .output()
            .expect("docker load");
        assert!(save.wait().expect("docker save").success(), "docker save");
        assert!(
            load.status.success(),
            "docker load: {}",
            String::from_utf8_lossy(&load.stderr)
        );
        e
    }

    fn spawn(&mut self) {
        let d = self.dir.path();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(d.join("dockerd.log"))
            .expect("engine log");
        let child = Command::new("dockerd")
            .arg("--data-root")
            .arg(d.join("data"))
            .arg("--exec-root")
            .arg(d.join("exec"))
            .arg("--pidfile")
            .arg(d.join("pid"))
            .args(["-H", &self.host])
            .args(["--bridge=none", "--iptables=false", "--ip6tables=false"])
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone().expect("log")))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("start dockerd (the tests run as root)");
        self.child = Some(child);
        let host = self.host.clone();
        let log = d.join("dockerd.log");
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let up = Command::new("docker")
                .args(["-H", &host, "version", "-f", "{{.Server.Version}}"])
                .stderr(Stdio::null())
                .output()
                .is_ok_and(|o| o.status.success());
            if up {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the private engine does not answer:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// SIGTERM, as `systemctl restart docker` does, and wait for it to go.
    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe {
                libc::kill(child.id() as i32, libc::SIGTERM);
            }
            let _ = child.wait();
        }
    }

    fn restart(&mut self) {
        self.stop();
        self.spawn();
    }
}

impl Drop for PrivateEngine {
    fn drop(&mut self) {
        if self.child.is_some() {
            let ids = docker_lines(&self.host, &["ps", "-aq"]);
            if !ids.is_empty() {
                let mut args = vec!["rm", "-fv"];
                args.extend(ids.iter().map(String::as_str));
                let _ = Command::new("docker")
                    .arg("-H")
                    .arg(&self.host)
                    .args(&args)
                    .output();
            }
            self.stop();
        }
    }
}

fn docker_lines(host: &str, args: &[&str]) -> Vec<String> {
    Command::new("docker")
        .arg("-H")
        .arg(host)
        .args(args)
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The engine restarted under a run: the run ends `error` naming its
/// sandbox container; once the engine is back nothing of it is left (no
/// container, no volume), and the same daemon serves runs on the engine
/// again. A private engine: restarting the shared one would break every
/// other test running on it.
#[tokio::test(flavor = "multi_thread")]
async fn an_engine_restart_mid_run_ends_it_and_leaves_nothing() {
    // What each phase took, printed with a failure: the test has failed on
    // CI machines slower than this one and never here.
    let t0 = Instant::now();
    let phase = |what: &str| eprintln!("[{:>7.2?}] {what}", t0.elapsed());
    let mut engine = tokio::task::block_in_place(PrivateEngine::start);
    phase("private engine up");
    let host = engine.host.clone();
    let llm = FakeLlm::start().await.expect("fake llm");
    let request = "sleep through an engine restart";
    llm.push_for(
        request,
        [
            bash("sleep 600"),
            bash("echo again"),
            bash("echo again"),
            Reply::terminate(),
        ],
    );
    let d =
        tokio::task::block_in_place(|| start_daemon(&llm, &format!("docker_host = \"{host}\"")));
    phase("daemon up");
    let committed = tokio::task::block_in_place(|| commit_one(&d, &llm));
    phase("one run committed");
    let id = tokio::task::block_in_place(|| d.create_run("faulty", request));
    tokio::task::block_in_place(|| {
        let container = wait_for_calls(&d, Some(&host), &id, 1);
        wait_for_command(Some(&host), &container, "sleep 600");
    });
    phase("the run's command started");

    tokio::task::block_in_place(|| engine.restart());
    phase("engine restarted");

    let record = tokio::task::block_in_place(|| d.wait_run(&id, Duration::from_secs(180)));
    phase("the run ended");
    assert_ended_because(&record, "error", &["sandbox container"]);
    tokio::task::block_in_place(|| {
        assert_status_within_a_second(&d);
        let bystander = Bystander::start(&d, &llm);
        bystander.finish(&d);
        phase("a bystander run finished");
        assert_nothing_left(&d, &host);
        phase("nothing left on the engine");
        committed.assert_unchanged(&d);
    });
    // And nothing of these runs on the default engine either.
    assert_no_containers(&[&id]).await;
}

/// A run that ends while its engine is away cannot have its container
/// and volumes removed then; once the engine is back they go, while the
/// daemon keeps serving (not only at its next start, when the reaper
/// runs). Here the run is cancelled with the engine stopped.
#[tokio::test(flavor = "multi_thread")]
async fn what_a_run_ending_while_the_engine_is_away_left_goes_once_it_is_back() {
    let mut engine = tokio::task::block_in_place(PrivateEngine::start);
    let host = engine.host.clone();
    let llm = FakeLlm::start().await.expect("fake llm");
    let request = "cancelled while the engine is away";
    llm.push_for(request, [bash("sleep 600"), Reply::terminate()]);
    let d =
        tokio::task::block_in_place(|| start_daemon(&llm, &format!("docker_host = \"{host}\"")));
    let id = tokio::task::block_in_place(|| d.create_run("faulty", request));
    tokio::task::block_in_place(|| {
        let container = wait_for_calls(&d, Some(&host), &id, 1);
        wait_for_command(Some(&host), &container, "sleep 600");
        engine.stop();
        let (status, body) = d.post(&format!("/v1/runs/{id}/cancel"), "");
        assert!(status < 300, "cancel: {status} {body}");
        let record = d.wait_run(&id, Duration::from_secs(120));
        assert_eq!(record["outcome"], "cancelled", "{record}");
        engine.spawn();
        assert_nothing_left(&d, &host);
        // The same daemon serves runs on the engine again.
        Bystander::start(&d, &llm).finish(&d);
        assert_nothing_left(&d, &host);
    });
}

/// A run whose first command comes while its engine restarts (the engine
/// answered when the daemon connected, and is away now) waits for the
/// engine, as a command that loses it mid-way does, and runs once it is
/// back: nothing of the run was lost, so it does not end `error` with
/// "cannot reach the Docker engine". The engine is started again only once
/// the daemon has said it waits (so the test cannot pass by the creation
/// coming after the engine is back).
#[tokio::test(flavor = "multi_thread")]
async fn a_run_starting_while_its_engine_restarts_waits_for_it() {
    let mut engine = tokio::task::block_in_place(PrivateEngine::start);
    let host = engine.host.clone();
    let llm = FakeLlm::start().await.expect("fake llm");
    let request = "first command during an engine restart";
    llm.push_for(
        request,
        [bash("echo made-after-the-restart"), Reply::terminate()],
    );
    let d =
        tokio::task::block_in_place(|| start_daemon(&llm, &format!("docker_host = \"{host}\"")));
    tokio::task::block_in_place(|| {
        // A run first, so that the daemon has met the engine.
        commit_one(&d, &llm);
        engine.stop();
        let id = d.create_run("faulty", request);
        wait_until("the run's first call", Duration::from_secs(60), || {
            d.events_so_far(&id)
                .iter()
                .any(|e| e["type"] == "tool_call")
        });
        // Its container could not be made, and it waits for the engine.
        wait_until(
            "the sandbox to wait for its engine",
            Duration::from_secs(60),
            || {
                d.log_text()
                    .contains("went away while the sandbox container was being made")
            },
        );
        engine.spawn();
        let record = d.wait_run(&id, Duration::from_secs(120));
        assert_eq!(record["outcome"], "finished", "{record}");
        let out = common::fault::tool_contents(&record);
        assert!(
            out.iter().any(|o| o.contains("made-after-the-restart")),
            "the command ran once the engine was back: {out:?}"
        );
        assert_nothing_left(&d, &host);
    });
}

/// Waits (up to a minute) until the engine at `host` holds no container
/// and no volume.
fn assert_nothing_left(d: &Daemon, host: &str) {
    let left = || {
        let mut left = docker_lines(host, &["ps", "-a", "--format", "{{.Names}} {{.Status}}"]);
        left.extend(docker_lines(host, &["volume", "ls", "-q"]));
        left
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !left().is_empty() {
        assert!(
            Instant::now() < deadline,
            "left on the engine: {:?}\n{}",
            left(),
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
