//! The warm pool (`[sandbox] pool_size`) through a real daemon and a real
//! engine: a run's first command is served by a container made before the
//! run, no container ever serves two runs, the pool refills, a restart
//! reaps a dead daemon's pooled containers, and a `[sandbox]` change
//! drains it. Needs a Docker engine (scripts/ensure-docker.sh).

use crate::common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use agentd::testkit::{FakeLlm, Reply};
use bollard::models::ContainerSummary;
use common::daemon::Daemon;
use serde_json::Value;

const AGENTS: &str = "max_concurrent_runs = 16\n\n[agents.shell]\nstrategy = \"toolcall\"\ntools = [\"bash\", \"terminate\"]\nmax_steps = 5\n\n\
    [agents.keeper]\nstrategy = \"toolcall\"\ntools = [\"bash\", \"terminate\"]\nmax_steps = 5\nkeep_files = [\"out/**\"]\n";

/// A daemon keeping `size` containers ready.
fn pooled_daemon(llm: &FakeLlm, size: usize) -> Daemon {
    let mut d = Daemon::unstarted(llm, AGENTS);
    set_sandbox_keys(&d, &format!("pool_size = {size}"));
    d.spawn(&[]);
    d
}

/// Replaces the pool line (`common::daemon::POOL_OFF` at first) and any
/// memory limit of the daemon's `[sandbox]` table with `keys`.
fn set_sandbox_keys(d: &Daemon, keys: &str) {
    let text = std::fs::read_to_string(&d.config).expect("config");
    let start = text.find("[sandbox]").expect("a [sandbox] table");
    let (head, table) = text.split_at(start);
    let table: String = table
        .lines()
        .filter(|l| !l.starts_with("pool_size") && !l.starts_with("memory_limit"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&d.config, format!("{head}{table}{keys}\n")).expect("write config");
}

fn pool_status(d: &Daemon) -> Value {
    let (status, v) = d.get("/v1/status");
    assert_eq!(status, 200, "{v}");
    v["sandbox_engine"]["pool"].clone()
}

/// Waits until the status reports `ready` containers ready.
fn wait_pool_ready(d: &Daemon, ready: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let pool = pool_status(d);
        if pool["ready"] == ready {
            return pool;
        }
        assert!(
            Instant::now() < deadline,
            "the pool never had {ready} ready: {pool}\n{}",
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The pooled containers (waiting for a run) this daemon process made,
/// as the engine lists them.
async fn pooled_of(pid: i32) -> Vec<ContainerSummary> {
    let owner = format!(":{pid}:");
    common::containers_labelled(agentd::sandbox::docker::LABEL_POOL)
        .await
        .into_iter()
        .filter(|c| {
            c.labels
                .as_ref()
                .and_then(|l| l.get(agentd::sandbox::docker::LABEL_OWNER))
                .is_some_and(|o| o.contains(&owner))
        })
        .collect()
}

fn ids(list: &[ContainerSummary]) -> HashSet<String> {
    list.iter().filter_map(|c| c.id.clone()).collect()
}

async fn exists(id: &str) -> bool {
    let docker = bollard::Docker::connect_with_defaults().expect("docker client");
    docker.inspect_container(id, None).await.is_ok()
}

/// The container's hostname (its short id) the run's `hostname` printed.
fn hostname_of(record: &Value) -> String {
    let tool = record["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["role"] == "tool" && m["name"] == "bash")
        .unwrap_or_else(|| panic!("no bash result: {record}"));
    tool["content"]
        .as_str()
        .unwrap_or("")
        .lines()
        .map(str::trim)
        .rfind(|l| l.len() == 12 && l.chars().all(|c| c.is_ascii_hexdigit()))
        .unwrap_or_else(|| panic!("no hostname in {tool}"))
        .to_string()
}

/// Each run prints its container's hostname, then stays a moment so the
/// test can look at its container through the engine while it runs.
fn script_hostname_runs(llm: &FakeLlm, names: &[String]) {
    for name in names {
        llm.push_for(
            name,
            [
                Reply::call("bash", r#"{"command":"hostname; sleep 1"}"#),
                Reply::terminate(),
            ],
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_runs_first_command_is_served_by_a_container_made_before_the_run() {
    let llm = FakeLlm::start().await.expect("fake llm");
    script_hostname_runs(&llm, &["first".to_string()]);
    let d = tokio::task::block_in_place(|| pooled_daemon(&llm, 2));
    let pool = tokio::task::block_in_place(|| wait_pool_ready(&d, 2));
    assert_eq!(pool["target"], 2, "{pool}");
    let before = pooled_of(d.pid()).await;
    assert_eq!(before.len(), 2, "{before:?}");
    for c in &before {
        let labels = c.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get("agentd.managed").map(String::as_str),
            Some("true")
        );
        assert!(labels.contains_key("agentd.owner"), "{labels:?}");
        assert_eq!(
            c.state.as_ref().map(|s| s.to_string()).as_deref(),
            Some("running")
        );
    }

    let record = tokio::task::block_in_place(|| {
        let id = d.create_run("shell", "first");
        d.wait_run(&id, Duration::from_secs(60))
    });
    assert_eq!(record["outcome"], "finished", "{record}");
    let host = hostname_of(&record);
    let used = before
        .iter()
        .find(|c| c.id.as_deref().is_some_and(|id| id.starts_with(&host)))
        .unwrap_or_else(|| {
            panic!("the run's container {host} was not one of the pool's: {before:?}")
        });
    // Made before the run was asked for.
    let created_s = used.created.expect("created");
    let run_created_ms = record["created_at_ms"].as_i64().expect("created_at_ms");
    assert!(
        created_s * 1000 <= run_created_ms,
        "{created_s} vs {run_created_ms}"
    );
    // Removed with its run, like any run's container.
    let used_id = used.id.clone().expect("id");
    let deadline = Instant::now() + Duration::from_secs(30);
    while exists(&used_id).await {
        assert!(Instant::now() < deadline, "the run's container was left");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn no_container_serves_two_runs_and_the_pool_refills() {
    let llm = FakeLlm::start().await.expect("fake llm");
    let names: Vec<String> = (0..8).map(|i| format!("job {i}")).collect();
    script_hostname_runs(&llm, &names);
    let d = tokio::task::block_in_place(|| pooled_daemon(&llm, 2));
    tokio::task::block_in_place(|| wait_pool_ready(&d, 2));

    let mut ever_pooled = ids(&pooled_of(d.pid()).await);
    let mut hosts = Vec::new();
    // Four one after the other (each finds a refilled pool or makes its
    // own), then four at once (two from the pool, two made for them).
    for name in &names[..4] {
        let record = tokio::task::block_in_place(|| {
            let id = d.create_run("shell", name);
            d.wait_run(&id, Duration::from_secs(60))
        });
        assert_eq!(record["outcome"], "finished", "{record}");
        hosts.push(hostname_of(&record));
        ever_pooled.extend(ids(&pooled_of(d.pid()).await));
    }
    let run_ids: Vec<String> = tokio::task::block_in_place(|| {
        names[4..]
            .iter()
            .map(|n| d.create_run("shell", n))
            .collect()
    });
    // Through the engine, while they run: each run's container, found by
    // the run's name (a pooled one is renamed when taken), is its own.
    let docker = bollard::Docker::connect_with_defaults().expect("docker client");
    let mut by_run = std::collections::HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while by_run.len() < run_ids.len() {
        for id in &run_ids {
            if by_run.contains_key(id) {
                continue;
            }
            if let Ok(c) = docker
                .inspect_container(&format!("agentd-{id}"), None)
                .await
            {
                let labels = c.config.and_then(|c| c.labels).unwrap_or_default();
                assert_eq!(
                    labels.get("agentd.managed").map(String::as_str),
                    Some("true")
                );
                by_run.insert(id.clone(), (c.id.unwrap_or_default(), labels));
            }
        }
        assert!(
            Instant::now() < deadline,
            "not every run's container was seen: {by_run:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let containers: HashSet<&String> = by_run.values().map(|(c, _)| c).collect();
    assert_eq!(
        containers.len(),
        run_ids.len(),
        "one container per run: {by_run:?}"
    );
    assert!(
        by_run.values().any(|(_, l)| l.contains_key("agentd.pool")),
        "some came from the pool: {by_run:?}"
    );
    let records = tokio::task::block_in_place(|| {
        run_ids
            .iter()
            .map(|id| d.wait_run(id, Duration::from_secs(60)))
            .collect::<Vec<_>>()
    });
    for r in &records {
        assert_eq!(r["outcome"], "finished", "{r}");
        hosts.push(hostname_of(r));
    }
    let distinct: HashSet<&String> = hosts.iter().collect();
    assert_eq!(
        distinct.len(),
        hosts.len(),
        "a container served two runs: {hosts:?}"
    );
    let from_pool = hosts
        .iter()
        .filter(|h| ever_pooled.iter().any(|id| id.starts_with(h.as_str())))
        .count();
    assert!(
        from_pool >= 2,
        "runs were served from the pool: {hosts:?} vs {ever_pooled:?}"
    );

    // Refilled with fresh containers: none a run has used, and the engine
    // no longer holds any container a run used.
    let pool = tokio::task::block_in_place(|| wait_pool_ready(&d, 2));
    assert_eq!(pool["last_error"], Value::Null, "{pool}");
    let now = pooled_of(d.pid()).await;
    for c in &now {
        let id = c.id.clone().unwrap_or_default();
        assert!(
            !hosts.iter().any(|h| id.starts_with(h)),
            "{id} was used by a run"
        );
    }
    for id in ever_pooled
        .iter()
        .filter(|id| hosts.iter().any(|h| id.starts_with(h)))
    {
        let deadline = Instant::now() + Duration::from_secs(30);
        while exists(id).await {
            assert!(
                Instant::now() < deadline,
                "a used pooled container {id} was left"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restart_reaps_the_pooled_containers_a_dead_daemon_left() {
    let llm = FakeLlm::start().await.expect("fake llm");
    let mut d = tokio::task::block_in_place(|| pooled_daemon(&llm, 2));
    tokio::task::block_in_place(|| wait_pool_ready(&d, 2));
    let old_pid = d.pid();
    let left = ids(&pooled_of(old_pid).await);
    assert_eq!(left.len(), 2);
    // Killed: nothing drains the pool.
    tokio::task::block_in_place(|| d.kill9());
    for id in &left {
        assert!(exists(id).await, "a killed daemon cannot have removed {id}");
    }
    tokio::task::block_in_place(|| d.spawn(&[]));
    // The reaper runs before the socket answers.
    for id in &left {
        assert!(!exists(id).await, "{id} survived the restart's reap");
    }
    tokio::task::block_in_place(|| wait_pool_ready(&d, 2));
    let fresh = ids(&pooled_of(d.pid()).await);
    assert_eq!(fresh.len(), 2);
    assert!(fresh.is_disjoint(&left));
    // A clean stop drains the pool.
    let pid = d.pid();
    tokio::task::block_in_place(|| assert_eq!(d.stop(), Some(0)));
    assert!(
        pooled_of(pid).await.is_empty(),
        "SIGTERM left pooled containers"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sandbox_settings_change_drains_the_pool_and_refills_it_with_the_new_settings() {
    let llm = FakeLlm::start().await.expect("fake llm");
    let d = tokio::task::block_in_place(|| pooled_daemon(&llm, 2));
    tokio::task::block_in_place(|| wait_pool_ready(&d, 2));
    let old = ids(&pooled_of(d.pid()).await);
    assert_eq!(old.len(), 2);

    set_sandbox_keys(&d, "pool_size = 3\nmemory_limit = \"256m\"");
    d.signal(libc::SIGHUP);
    // Listed only once the new pool reports three ready (their shells
    // open): a container still being made is listed by the engine too,
    // and one whose shell fails to start is removed again, so a listing
    // taken earlier may name a container that is gone by its inspection.
    let deadline = Instant::now() + Duration::from_secs(90);
    let fresh = loop {
        let pool = tokio::task::block_in_place(|| pool_status(&d));
        let now = pooled_of(d.pid()).await;
        let now_ids = ids(&now);
        if pool["target"] == 3
            && pool["ready"] == 3
            && now_ids.len() == 3
            && now_ids.is_disjoint(&old)
        {
            break now;
        }
        assert!(
            Instant::now() < deadline,
            "the pool was not remade: old {old:?}, now {now_ids:?}, status {pool}\n{}",
            d.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for id in &old {
        assert!(
            !exists(id).await,
            "{id}, made with the old settings, was kept"
        );
    }
    let docker = bollard::Docker::connect_with_defaults().expect("docker client");
    for c in &fresh {
        let inspect = docker
            .inspect_container(c.id.as_deref().unwrap_or(""), None)
            .await
            .unwrap_or_else(|e| panic!("inspect {:?}: {e}\n{}", c.id, d.log_text()));
        let memory = inspect.host_config.and_then(|h| h.memory);
        assert_eq!(memory, Some(256 << 20), "made with the new memory_limit");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pooled_container_takes_the_runs_files_in_and_gives_the_kept_ones_back() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "copy it",
        [
            Reply::call(
                "bash",
                r#"{"command":"mkdir -p out && cp in.txt out/copy.txt && cat out/copy.txt && echo && hostname"}"#,
            ),
            Reply::terminate(),
        ],
    );
    let d = tokio::task::block_in_place(|| pooled_daemon(&llm, 2));
    tokio::task::block_in_place(|| wait_pool_ready(&d, 2));
    let pooled = ids(&pooled_of(d.pid()).await);
    let record = tokio::task::block_in_place(|| {
        let body = serde_json::json!({
            "agent": "keeper",
            "request": "copy it",
            "files": {"in.txt": "hello from the caller"}
        });
        let (status, v) = d.post("/v1/runs", &body.to_string());
        assert_eq!(status, 201, "{v}");
        d.wait_run(v["id"].as_str().expect("id"), Duration::from_secs(60))
    });
    assert_eq!(record["outcome"], "finished", "{record}");
    let host = hostname_of(&record);
    assert!(
        pooled.iter().any(|id| id.starts_with(&host)),
        "served from the pool: {host} vs {pooled:?}"
    );
    let text = serde_json::to_string(&record["messages"]).unwrap_or_default();
    assert!(text.contains("hello from the caller"), "{text}");
    let kept: Vec<&str> = record["files"]["kept"]
        .as_array()
        .expect("kept files")
        .iter()
        .filter_map(|k| k["path"].as_str())
        .collect();
    assert_eq!(kept, ["out/copy.txt"], "{record}");
    let id = record["id"].as_str().expect("id");
    let (status, body) = common::daemon::raw(
        &d.socket,
        "GET",
        &format!("/v1/runs/{id}/files/out/copy.txt"),
        None,
    )
    .expect("download");
    assert_eq!(status, 200);
    assert_eq!(body, b"hello from the caller");
}
