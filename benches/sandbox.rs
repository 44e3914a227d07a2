//! Sandbox figures, side by side in one run: create-to-ready, a command's
//! round trip in the persistent shell against a `docker exec` through bollard
//! and through the CLI, file write+read, removal, a run's time to its first
//! command with and without the warm pool and under a burst of 100 runs,
//! and a leak check after 200 sandboxes. Needs a Docker engine and `agentd-sandbox-tiny:latest`
//! (scripts/ensure-docker.sh, scripts/build-images.sh).
//!
//! Run: `cargo bench --bench sandbox`.

use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, Instant};

use agentd::sandbox::docker::DockerSandboxProvider;
use agentd::sandbox::Sandbox;
use agentd::sandbox::SandboxConfig;
use bollard::exec::{CreateExecOptions, StartExecResults};
use bollard::query_parameters::ListContainersOptionsBuilder;
use futures::StreamExt;

const IMAGE: &str = "agentd-sandbox-tiny:latest";

fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let pick = |p: f64| {
        let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
        samples[i].as_secs_f64() * 1e3
    };
    println!(
        "  {name:<34} p50 {:>8.2} ms   p99 {:>8.2} ms   (n={})",
        pick(0.5),
        pick(0.99),
        samples.len()
    );
}

async fn time<F, Fut, T>(n: usize, mut f: F) -> anyhow::Result<Vec<Duration>>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<T>>,
{
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        f(i).await?;
        out.push(t.elapsed());
    }
    Ok(out)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // `cargo test --all-targets` runs bench binaries too; this one takes
    // minutes and is only meaningful in release, so it runs under
    // `cargo bench` (which passes `--bench`) and nowhere else.
    if !std::env::args().any(|a| a == "--bench") {
        println!("skipped: run it with `cargo bench --bench sandbox`");
        return Ok(());
    }
    let config = SandboxConfig {
        image: IMAGE.into(),
        ..SandboxConfig::default()
    };
    let provider = DockerSandboxProvider::new(&config)?;
    provider.ping().await?;
    let docker = provider.docker().await?;
    let tag = uuid::Uuid::new_v4().simple().to_string();
    println!("sandbox ({IMAGE}, engine {})", provider.engine_address());

    // Create-to-ready and removal.
    let mut create = Vec::new();
    let mut remove = Vec::new();
    for i in 0..20 {
        let sb = provider.sandbox(&format!("bench-{tag}-{i}"));
        let t = Instant::now();
        sb.ensure_container().await?;
        create.push(t.elapsed());
        let t = Instant::now();
        sb.destroy().await;
        remove.push(t.elapsed());
    }
    report("create to ready", create);
    report("removal", remove);

    let sb = provider.sandbox(&format!("bench-{tag}-main"));
    let name = sb.ensure_container().await?;
    sb.shell("true", None).await?; // start the session
    let shell = time(300, |_| {
        let sb = sb.clone();
        async move { Ok(sb.shell("echo hi", None).await?) }
    })
    .await?;
    report("command, persistent shell", shell);

    let exec = time(50, |_| {
        let (docker, name) = (docker.clone(), name.clone());
        async move {
            let created = docker
                .create_exec(
                    &name,
                    CreateExecOptions {
                        cmd: Some(vec!["echo", "hi"]),
                        attach_stdout: Some(true),
                        attach_stderr: Some(true),
                        ..Default::default()
                    },
                )
                .await?;
            if let StartExecResults::Attached { mut output, .. } =
                docker.start_exec(&created.id, None).await?
            {
                while let Some(chunk) = output.next().await {
                    chunk?;
                }
            }
            docker.inspect_exec(&created.id).await?;
            anyhow::Ok(())
        }
    })
    .await?;
    report("command, docker exec via bollard", exec);

    let cli = time(30, |_| {
        let name = name.clone();
        async move {
            let out = tokio::task::spawn_blocking(move || {
                Command::new("docker")
                    .args(["exec", &name, "echo", "hi"])
                    .output()
            })
            .await??;
            anyhow::ensure!(out.status.success(), "docker exec failed");
            Ok(())
        }
    })
    .await?;
    report("command, `docker exec` CLI", cli);

    let payload = vec![b'x'; 1024];
    let files = time(50, |i| {
        let (sb, payload) = (sb.clone(), payload.clone());
        async move {
            let path = format!("/workspace/f{i}.txt");
            sb.write_file(&path, &payload).await?;
            let back = sb.read_file(&path).await?;
            anyhow::ensure!(back == payload, "roundtrip mismatch");
            Ok(())
        }
    })
    .await?;
    report("file write+read (1 KiB, tar)", files);
    sb.destroy().await;

    first_command(&config, &tag).await?;

    // Leak check: 200 sandboxes, two at a time, each used once.
    let t = Instant::now();
    for pair in 0..100 {
        let a = provider.sandbox(&format!("bench-{tag}-leak-{pair}-a"));
        let b = provider.sandbox(&format!("bench-{tag}-leak-{pair}-b"));
        let (ra, rb) = tokio::join!(a.shell("echo a", None), b.shell("echo b", None));
        ra?;
        rb?;
        tokio::join!(a.destroy(), b.destroy());
    }
    let filters = HashMap::from([("label", vec!["agentd.managed=true".to_string()])]);
    let left = docker
        .list_containers(Some(
            ListContainersOptionsBuilder::default()
                .all(true)
                .filters(&filters)
                .build(),
        ))
        .await?
        .into_iter()
        .filter(|c| {
            c.labels
                .as_ref()
                .and_then(|l| l.get("agentd.run"))
                .is_some_and(|r| r.contains(&tag))
        })
        .count();
    println!(
        "  200 sandboxes created, used, removed in {:.1} s; containers left: {left}",
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// A run's time to its first command (`echo hi` in the shell, from the
/// sandbox handle to the answer), with no pool, with a ready pool, and for
/// a burst of 100 runs starting at once with a pool of 2: what the runs
/// beyond the pool wait.
async fn first_command(config: &SandboxConfig, tag: &str) -> anyhow::Result<()> {
    let cold = DockerSandboxProvider::new(&SandboxConfig {
        pool_size: 0,
        ..config.clone()
    })?;
    let mut samples = Vec::new();
    for i in 0..20 {
        let sb = cold.sandbox(&format!("bench-{tag}-cold-{i}"));
        let t = Instant::now();
        sb.shell("echo hi", None).await?;
        samples.push(t.elapsed());
        sb.destroy().await;
    }
    report("first command, no pool", samples);

    let warm = DockerSandboxProvider::new(&SandboxConfig {
        pool_size: 2,
        ..config.clone()
    })?;
    warm.start_pool();
    let mut samples = Vec::new();
    for i in 0..20 {
        wait_ready(&warm, 2).await?;
        let sb = warm.sandbox(&format!("bench-{tag}-warm-{i}"));
        let t = Instant::now();
        sb.shell("echo hi", None).await?;
        samples.push(t.elapsed());
        sb.destroy().await;
    }
    report("first command, ready pool of 2", samples);

    for (name, provider) in [("no pool", &cold), ("pool of 2", &warm)] {
        if name == "pool of 2" {
            wait_ready(provider, 2).await?;
        }
        let served_before = provider.pool_status().served;
        let start = Instant::now();
        let runs: Vec<_> = (0..100)
            .map(|i| {
                let sb = provider.sandbox(&format!("bench-{tag}-burst-{name}-{i}"));
                tokio::spawn(async move {
                    let r = sb.shell("echo hi", None).await;
                    let waited = start.elapsed();
                    sb.destroy().await;
                    r.map(|_| waited)
                })
            })
            .collect();
        let mut waited = Vec::new();
        for r in runs {
            waited.push(r.await??);
        }
        // The pool refills during the burst, so more than its size may be
        // served from it: the count is the pool's own, the fastest that many
        // are shown apart from the rest.
        let pooled = (provider.pool_status().served - served_before) as usize;
        waited.sort();
        let (first, rest) = waited.split_at(pooled.min(waited.len()));
        if !first.is_empty() {
            report(
                &format!("burst of 100, {name}: {pooled} from the pool"),
                first.to_vec(),
            );
        }
        report(&format!("burst of 100, {name}: the others"), rest.to_vec());
    }
    warm.drain_pool().await;
    Ok(())
}

async fn wait_ready(provider: &DockerSandboxProvider, n: usize) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while provider.pool_status().ready < n {
        if let Some(e) = provider.pool_status().last_error {
            anyhow::bail!("the pool cannot fill: {e}");
        }
        anyhow::ensure!(Instant::now() < deadline, "the pool did not fill");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}
