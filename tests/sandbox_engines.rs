//! Many engines (issue 16 §3): a daemon with two real Docker engines, the
//! first this machine's (scripts/ensure-docker.sh) and a second `dockerd`
//! started by `scripts/second-dockerd.sh` with its own data root, exec root,
//! pid file and socket, reached over `tcp://` with TLS (certificates made
//! here), so one test proves placement, failure, rejoining and TLS.
//!
//! Runs here hold their sandbox with a gated command (it waits for a file
//! the test creates in the container), so where each run sits can be read
//! from each engine's containers, without timing.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use agentd::testkit::{FakeLlm, Reply};
use common::daemon::Daemon;
use common::fault::assert_ended_because;
use serde_json::Value;

const AGENTS: &str = "max_concurrent_runs = 64\nstep_timeout = 600\n\n\
[agents.shell]\nstrategy = \"toolcall\"\ntools = [\"bash\", \"terminate\"]\nmax_steps = 5\n";

/// Waits in the container until the test creates /tmp/go.
const GATED: &str = r#"{"command":"while [ ! -e /tmp/go ]; do sleep 0.1; done; hostname"}"#;

/// A second dockerd, stopped and cleaned up on drop.
struct SecondEngine {
    dir: PathBuf,
    tcp: String,
    tls: PathBuf,
}

impl SecondEngine {
    fn start() -> SecondEngine {
        // Short: a unix socket path must fit in 108 bytes.
        let dir = PathBuf::from(format!("/tmp/agentd-e2-{}", std::process::id()));
        let tls = dir.join("tls");
        std::fs::create_dir_all(&tls).expect("engine folder");
        write_pki(&tls);
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let engine = SecondEngine {
            dir,
            tcp: format!("127.0.0.1:{port}"),
            tls,
        };
        engine.script("start");
        engine
    }

    fn script(&self, verb: &str) {
        let out = Command::new(common::repo_root().join("scripts/second-dockerd.sh"))
            .arg(verb)
            .env("AGENTD_DOCKERD2_DIR", &self.dir)
            .env("AGENTD_DOCKERD2_TCP", &self.tcp)
            .env("AGENTD_DOCKERD2_TLS_DIR", &self.tls)
            .output()
            .expect("run scripts/second-dockerd.sh");
        assert!(
            out.status.success(),
            "scripts/second-dockerd.sh {verb} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn host(&self) -> String {
        format!("unix://{}", self.dir.join("docker.sock").display())
    }

    /// The `[[sandbox.engines]]` entry reaching it over TLS.
    fn entry(&self, max: usize) -> String {
        self.entry_trusting(&self.tls.join("ca.pem"), max)
    }

    /// [`Self::entry`] with `ca` as the authority the engine is checked
    /// against.
    fn entry_trusting(&self, ca: &Path, max: usize) -> String {
        format!(
            "\n[[sandbox.engines]]\nname = \"second\"\ndocker_host = \"tcp://{}\"\n\
             tls_ca = \"{}\"\ntls_cert = \"{}\"\ntls_key = \"{}\"\nmax_containers = {max}\n",
            self.tcp,
            ca.display(),
            self.tls.join("cert.pem").display(),
            self.tls.join("key.pem").display(),
        )
    }
}

impl Drop for SecondEngine {
    fn drop(&mut self) {
        let _ = Command::new(common::repo_root().join("scripts/second-dockerd.sh"))
            .arg("stop")
            .env("AGENTD_DOCKERD2_DIR", &self.dir)
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A CA, the engine's server certificate for 127.0.0.1 and this client's.
fn write_pki(dir: &Path) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "agentd engines test CA");
    let ca_cert = ca.self_signed(&ca_key).expect("CA certificate");
    let issuer = Issuer::new(ca, ca_key);
    let leaf = |names: Vec<String>| {
        let key = KeyPair::generate().expect("key");
        let cert = CertificateParams::new(names)
            .expect("params")
            .signed_by(&key, &issuer)
            .expect("certificate");
        (cert.pem(), key.serialize_pem())
    };
    let (server_cert, server_key) = leaf(vec!["127.0.0.1".into(), "localhost".into()]);
    let (client_cert, client_key) = leaf(vec!["agentd-client".into()]);
    for (name, text) in [
        ("ca.pem", ca_cert.pem()),
        ("server-cert.pem", server_cert),
        ("server-key.pem", server_key),
        ("cert.pem", client_cert),
        ("key.pem", client_key),
    ] {
        std::fs::write(dir.join(name), text).expect("write a certificate");
    }
}

/// `docker [-H host] ARGS`, its stdout.
fn docker(host: Option<&str>, args: &[&str]) -> String {
    let mut cmd = Command::new("docker");
    if let Some(h) = host {
        cmd.arg("-H").arg(h);
    }
    let out = cmd.args(args).output().expect("the docker CLI");
    assert!(
        out.status.success(),
        "docker {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The running container of run `id` on the engine at `host`, if any (none
/// on an engine that is down).
fn container_of(host: Option<&str>, id: &str) -> Option<String> {
    let label = format!("label=agentd.run={id}");
    let mut cmd = Command::new("docker");
    if let Some(h) = host {
        cmd.arg("-H").arg(h);
    }
    let out = cmd
        .args(["ps", "-q", "--filter", &label])
        .output()
        .expect("the docker CLI");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .map(str::to_string)
}

/// Waits until every run of `ids` has its container on one of the
/// engines; returns, per run, `Some(true)` for the second engine.
fn wait_placed(second: &str, ids: &[String], d: &Daemon) -> Vec<bool> {
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        let mut on_second = Vec::new();
        for id in ids {
            match (container_of(None, id), container_of(Some(second), id)) {
                (Some(_), None) => on_second.push(false),
                (None, Some(_)) => on_second.push(true),
                (Some(_), Some(_)) => panic!("run {id} has a container on both engines"),
                (None, None) => break,
            }
        }
        if on_second.len() == ids.len() {
            return on_second;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {} runs have a container after 240 s:\n{}",
            on_second.len(),
            ids.len(),
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Lets the gated command of run `id` end.
fn release(host: Option<&str>, id: &str) {
    let c = container_of(host, id).unwrap_or_else(|| panic!("run {id} has no container"));
    docker(host, &["exec", "-u", "0", &c, "touch", "/tmp/go"]);
}

fn engines(d: &Daemon) -> Vec<Value> {
    let (status, v) = d.get("/v1/status");
    assert_eq!(status, 200, "{v}");
    v["engines"].as_array().cloned().unwrap_or_default()
}

fn engine<'a>(list: &'a [Value], name: &str) -> &'a Value {
    list.iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("no engine {name} in {list:?}"))
}

/// Polls status until engine `name` is (un)reachable as wanted.
fn wait_reachable(d: &Daemon, name: &str, want: bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let list = engines(d);
        let e = engine(&list, name).clone();
        if e["reachable"] == want {
            return e;
        }
        assert!(
            Instant::now() < deadline,
            "engine {name} is not reachable={want} after 60 s: {e}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn gated_runs(d: &Daemon, llm: &FakeLlm, tag: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let request = format!("{tag} {i}");
            llm.push_for(&request, [Reply::call("bash", GATED), Reply::terminate()]);
            d.create_run("shell", &request)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_spread_over_two_engines_survive_one_stopping_and_it_rejoins_over_tls() {
    let llm = FakeLlm::start().await.expect("fake llm");
    tokio::task::block_in_place(|| scenario(&llm));
}

fn scenario(llm: &FakeLlm) {
    let second = SecondEngine::start();
    let host2 = second.host();
    let host2 = host2.as_str();
    let mut d = Daemon::unstarted(llm, AGENTS);
    let first_host = std::env::var("DOCKER_HOST")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unix:///var/run/docker.sock".into());
    let mut text = std::fs::read_to_string(&d.config).expect("config");
    text.push_str(&format!(
        "\n[[sandbox.engines]]\nname = \"first\"\ndocker_host = \"{first_host}\"\nmax_containers = 25\n"
    ));
    text.push_str(&second.entry(25));
    std::fs::write(&d.config, text).expect("config");
    d.spawn(&[]);
    wait_reachable(&d, "second", true);

    // TLS is checked, not just spoken: trusting another CA, a daemon finds
    // the same engine unreachable and says why.
    let other = second.dir.join("other-ca");
    std::fs::create_dir_all(&other).expect("folder");
    write_pki(&other);
    let mut wary = Daemon::unstarted(llm, "");
    let mut text = std::fs::read_to_string(&wary.config).expect("config");
    text.push_str(&second.entry_trusting(&other.join("ca.pem"), 1));
    std::fs::write(&wary.config, text).expect("config");
    wary.spawn(&[]);
    let refused = wait_reachable(&wary, "second", false);
    let why = refused["last_error"].as_str().unwrap_or("").to_lowercase();
    assert!(why.contains("certificate"), "{refused}");
    wary.stop();

    // `agentd doctor`, as the daemon runs it, checks the second engine too.
    let (status, report) = d.get("/v1/doctor?agent=shell");
    assert_eq!(status, 200, "{report}");
    let check = report["checks"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == "engine second"))
        .unwrap_or_else(|| panic!("no `engine second` check: {report}"));
    assert_eq!(check["ok"], true, "{check}");

    // 40 runs at once: each engine takes its share, within its 25.
    let ids = gated_runs(&d, llm, "spread", 40);
    let placed = wait_placed(host2, &ids, &d);
    let on_second = placed.iter().filter(|s| **s).count();
    assert_eq!(
        (40 - on_second, on_second),
        (20, 20),
        "equal weights and capacities split the runs evenly"
    );
    let list = engines(&d);
    assert_eq!(engine(&list, "first")["containers"], 20, "{list:?}");
    assert_eq!(engine(&list, "second")["containers"], 20, "{list:?}");
    assert_eq!(engine(&list, "second")["capacity"], 25, "{list:?}");
    assert!(
        engine(&list, "second")["address"]
            .as_str()
            .is_some_and(|a| a.contains("(TLS)")),
        "{list:?}"
    );

    // The second engine stops while its runs are mid-command.
    second.script("stop");
    let down = wait_reachable(&d, "second", false);
    assert!(down["last_error"].is_string(), "{down}");
    for (id, on_second) in ids.iter().zip(&placed) {
        if !on_second {
            release(None, id);
        }
    }
    for (id, on_second) in ids.iter().zip(&placed) {
        let record = d.wait_run(id, Duration::from_secs(180));
        if *on_second {
            assert_ended_because(&record, "error", &["sandbox unavailable: engine second: "]);
        } else {
            assert_eq!(record["outcome"], "finished", "run {id}: {record}");
        }
    }

    // New runs go to the first engine only.
    let later = gated_runs(&d, llm, "while-down", 4);
    let placed = wait_placed(host2, &later, &d);
    assert!(placed.iter().all(|s| !s), "{placed:?}");
    for id in &later {
        release(None, id);
    }
    for id in &later {
        let record = d.wait_run(id, Duration::from_secs(120));
        assert_eq!(record["outcome"], "finished", "run {id}: {record}");
    }

    // It comes back and receives runs again.
    second.script("start");
    wait_reachable(&d, "second", true);
    let back = gated_runs(&d, llm, "rejoined", 4);
    let placed = wait_placed(host2, &back, &d);
    assert_eq!(placed.iter().filter(|s| **s).count(), 2, "{placed:?}");
    for (id, on_second) in back.iter().zip(&placed) {
        release(on_second.then_some(host2), id);
    }
    for id in &back {
        let record = d.wait_run(id, Duration::from_secs(120));
        assert_eq!(record["outcome"], "finished", "run {id}: {record}");
    }
    let list = engines(&d);
    assert_eq!(
        engine(&list, "first")["containers"],
        0,
        "slots freed: {list:?}"
    );
    assert_eq!(
        engine(&list, "second")["containers"],
        0,
        "slots freed: {list:?}"
    );
    d.stop();
}

/// With every engine full a run waits (queued, not failed) and gets the
/// slot the first run frees; a waiting run that is cancelled gives back
/// nothing it did not have. Only this machine's engine is needed.
#[tokio::test(flavor = "multi_thread")]
async fn a_run_that_finds_every_engine_full_waits_for_a_slot() {
    let llm = FakeLlm::start().await.expect("fake llm");
    tokio::task::block_in_place(|| queued(&llm));
}

/// A daemon whose one engine, `only`, is this machine's, bounded at
/// `max` containers, with a warm pool of `pool`.
fn daemon_on_the_first_engine(llm: &FakeLlm, max: usize, pool: usize) -> Daemon {
    let mut d = Daemon::unstarted(llm, AGENTS);
    let first_host = std::env::var("DOCKER_HOST")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unix:///var/run/docker.sock".into());
    let text = std::fs::read_to_string(&d.config)
        .expect("config")
        .replace(common::daemon::POOL_OFF, &format!("pool_size = {pool}"));
    std::fs::write(
        &d.config,
        format!("{text}\n[[sandbox.engines]]\nname = \"only\"\ndocker_host = \"{first_host}\"\nmax_containers = {max}\n"),
    )
    .expect("config");
    d.spawn(&[]);
    d
}

fn queued(llm: &FakeLlm) {
    let mut d = daemon_on_the_first_engine(llm, 1, 0);

    let holder = gated_runs(&d, llm, "holder", 1).remove(0);
    let deadline = Instant::now() + Duration::from_secs(120);
    while container_of(None, &holder).is_none() {
        assert!(
            Instant::now() < deadline,
            "the first run never got its sandbox"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let cancelled = gated_runs(&d, llm, "cancelled", 1).remove(0);
    let waiting = gated_runs(&d, llm, "waiter", 1).remove(0);
    // Both are stuck at their first tool call, waiting for a slot.
    for id in [&cancelled, &waiting] {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !d.events_so_far(id).iter().any(|e| e["type"] == "tool_call") {
            assert!(Instant::now() < deadline, "run {id} never called its tool");
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(
            container_of(None, id).is_none(),
            "run {id} got a sandbox past capacity"
        );
        let (_, run) = d.get(&format!("/v1/runs/{id}"));
        assert_ne!(
            run["state"], "ended",
            "a run waiting for a slot has not failed: {run}"
        );
    }
    let list = engines(&d);
    assert_eq!(engine(&list, "only")["containers"], 1, "{list:?}");

    let (status, v) = d.post(&format!("/v1/runs/{cancelled}/cancel"), "");
    assert_eq!(status, 202, "{v}");
    let record = d.wait_run(&cancelled, Duration::from_secs(60));
    assert_eq!(record["outcome"], "cancelled", "{record}");

    release(None, &holder);
    let record = d.wait_run(&holder, Duration::from_secs(60));
    assert_eq!(record["outcome"], "finished", "{record}");
    // The freed slot goes to the waiter, not to the cancelled run.
    let deadline = Instant::now() + Duration::from_secs(60);
    while container_of(None, &waiting).is_none() {
        assert!(
            Instant::now() < deadline,
            "the waiting run never got the freed slot"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    release(None, &waiting);
    let record = d.wait_run(&waiting, Duration::from_secs(60));
    assert_eq!(record["outcome"], "finished", "{record}");
    let list = engines(&d);
    assert_eq!(
        engine(&list, "only")["containers"],
        0,
        "no slot leaked: {list:?}"
    );
    d.stop();
}

/// The warm pool counts against its engine's `max_containers`: a pool of
/// 2 on an engine of 3 leaves room for one run of its own; three runs take
/// the two pooled containers and make one, the pool cannot grow past the
/// capacity meanwhile, a fourth run waits, and the pool refills once the
/// runs are gone. Only this machine's engine is needed.
#[tokio::test(flavor = "multi_thread")]
async fn the_warm_pool_counts_against_an_engines_capacity() {
    let llm = FakeLlm::start().await.expect("fake llm");
    tokio::task::block_in_place(|| pool_within_capacity(&llm));
}

/// The running container named for run `id` (a pooled container is
/// renamed when taken), if any.
fn named_container(id: &str) -> Option<String> {
    let out = Command::new("docker")
        .args(["ps", "-q", "--filter", &format!("name=^/agentd-{id}$")])
        .output()
        .expect("the docker CLI");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .map(str::to_string)
}

fn wait_engine(d: &Daemon, what: &str, want: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let list = engines(d);
        let e = engine(&list, "only").clone();
        if want(&e) {
            return e;
        }
        assert!(Instant::now() < deadline, "{what}: {e}\n{}", d.log_text());
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn pool_within_capacity(llm: &FakeLlm) {
    let mut d = daemon_on_the_first_engine(llm, 3, 2);
    let e = wait_engine(&d, "the pool never filled", |e| e["pool"]["ready"] == 2);
    assert_eq!(e["containers"], 2, "pooled containers count: {e}");

    let runs = gated_runs(&d, llm, "within", 3);
    let deadline = Instant::now() + Duration::from_secs(120);
    while runs.iter().any(|id| named_container(id).is_none()) {
        assert!(
            Instant::now() < deadline,
            "not every run got a container:\n{}",
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Two or three of them served by the pool (it refills while the
    // engine has room, and a run may take the refilled one).
    let e = wait_engine(&d, "three runs hold the engine", |e| {
        e["containers"] == 3 && e["pool"]["served"].as_u64().is_some_and(|n| n >= 2)
    });
    assert_eq!(e["pool"]["ready"], 0, "{e}");
    assert_eq!(
        e["pool"]["creating"], 0,
        "the pool cannot grow past capacity: {e}"
    );
    // A fourth run waits at its first tool call, with no container.
    let fourth = gated_runs(&d, llm, "beyond", 1).remove(0);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !d
        .events_so_far(&fourth)
        .iter()
        .any(|e| e["type"] == "tool_call")
    {
        assert!(
            Instant::now() < deadline,
            "the fourth run never called its tool"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(700));
    assert!(
        named_container(&fourth).is_none(),
        "a run past capacity got a container"
    );
    let e = engine(&engines(&d), "only").clone();
    assert_eq!(e["containers"], 3, "{e}");
    assert_eq!(e["pool"]["creating"], 0, "{e}");

    for id in runs.iter().chain(std::iter::once(&fourth)) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let c = loop {
            if let Some(c) = named_container(id) {
                break c;
            }
            assert!(Instant::now() < deadline, "run {id} never got a container");
            std::thread::sleep(Duration::from_millis(100));
        };
        docker(None, &["exec", "-u", "0", &c, "touch", "/tmp/go"]);
        let record = d.wait_run(id, Duration::from_secs(60));
        assert_eq!(record["outcome"], "finished", "{record}");
    }
    let e = wait_engine(&d, "the pool refills once the runs are gone", |e| {
        e["pool"]["ready"] == 2 && e["containers"] == 2
    });
    assert_eq!(e["capacity"], 3, "{e}");
    d.stop();
}
