//! Hot reload and start-up of `agentd serve`:
//!
//! 1. **Swap to serving.** A new `toolcall.wasm` is renamed into the plugins
//!    folder of a running daemon (written under a hidden name first, as an
//!    installer does), 20 times per series. Measured from the rename: until
//!    `GET /v1/plugins` shows the new file's SHA-256 loaded ("visible"), and
//!    until a run created right after is running ("first run started on it";
//!    a run takes the plugin set current when it starts). Two series:
//!    *new bytes* (the real `toolcall.wasm` with a custom section holding a
//!    counter appended, so every swap is a component never seen before and
//!    is compiled), and *seen bytes* (alternating between the real
//!    `toolcall.wasm` and one such copy, so every swap after the second
//!    comes from the compile cache).
//! 2. **Start-up.** Process spawn to the first 200 on `GET /v1/status`, with
//!    the bundled plugins (toolcall, terminate, bash, str_replace_editor,
//!    python_execute): cold (an empty state dir, so every plugin is
//!    compiled) and warm (the compile cache filled by an earlier start).
//!    Start-up includes the Docker engine check and orphan reaping when an
//!    engine answers; the output says whether one did.
//!
//! Run: `cargo bench --bench reload`. It spawns the agentd binary of the
//! same profile (release under `cargo bench`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agentd::testkit::stats::percentile;
use agentd::testkit::{build_plugins, uds_http, FakeLlm, Reply};
use anyhow::Context;
use sha2::{Digest, Sha256};

const SWAPS: usize = 20;
const STARTS: usize = 5;
const BUNDLED: &[&str] = &[
    "toolcall",
    "terminate",
    "bash",
    "str_replace_editor",
    "python_execute",
];
const SWAP_TARGET: Duration = Duration::from_millis(300);
const WARM_START_TARGET: Duration = Duration::from_millis(100);
/// How long any single wait may take before the bench gives up.
const PATIENCE: Duration = Duration::from_secs(120);

/// One request on a fresh connection; the body as text.
fn http(socket: &Path, method: &str, path: &str, body: &str) -> std::io::Result<(u16, String)> {
    let body = (!body.is_empty()).then_some(body.as_bytes());
    let (code, bytes) = uds_http::request(socket, method, path, body)?;
    Ok((code, String::from_utf8_lossy(&bytes).into_owned()))
}

fn json(socket: &Path, method: &str, path: &str, body: &str) -> anyhow::Result<serde_json::Value> {
    let (code, text) = http(socket, method, path, body)?;
    anyhow::ensure!((200..300).contains(&code), "{method} {path}: {code} {text}");
    Ok(serde_json::from_str(&text)?)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn leb128(mut n: usize, out: &mut Vec<u8>) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// `component` with a custom section appended: the same plugin, other bytes.
fn with_custom_section(component: &[u8], payload: &str) -> Vec<u8> {
    let name = b"agentd-bench";
    let mut body = Vec::new();
    leb128(name.len(), &mut body);
    body.extend_from_slice(name);
    body.extend_from_slice(payload.as_bytes());
    let mut out = component.to_vec();
    out.push(0); // custom section id
    leb128(body.len(), &mut out);
    out.extend_from_slice(&body);
    out
}

struct Daemon {
    child: Child,
    socket: PathBuf,
}

impl Daemon {
    /// Spawns `agentd serve` and returns it with the time until the first
    /// 200 on `/v1/status`.
    fn start(config: &Path, socket: &Path) -> anyhow::Result<(Daemon, Duration)> {
        let started = Instant::now();
        let child = Command::new(env!("CARGO_BIN_EXE_agentd"))
            .args(["serve", "--config"])
            .arg(config)
            .env_remove("AGENTD_CONFIG")
            .env_remove("AGENTD_SOCKET")
            .env_remove("NOTIFY_SOCKET")
            .env_remove("LISTEN_FDS")
            .env_remove("LISTEN_PID")
            .env("AGENTD_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?;
        let mut d = Daemon {
            child,
            socket: socket.to_path_buf(),
        };
        loop {
            if let Ok((200, _)) = http(socket, "GET", "/v1/status", "") {
                return Ok((d, started.elapsed()));
            }
            if let Some(status) = d.child.try_wait()? {
                anyhow::bail!("agentd serve exited during start-up ({status})");
            }
            anyhow::ensure!(started.elapsed() < PATIENCE, "daemon not ready");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn status(&self) -> anyhow::Result<serde_json::Value> {
        json(&self.socket, "GET", "/v1/status", "")
    }

    /// SIGTERM and wait. Returns whether the daemon shut down cleanly;
    /// `false` when the signal killed it outright, which happens when it
    /// arrives after the socket answers but before the daemon installed its
    /// signal handlers (a start-up race in the daemon, reported, not fatal
    /// here).
    fn stop(mut self) -> anyhow::Result<bool> {
        use std::os::unix::process::ExitStatusExt;
        // SAFETY: kill has no memory-safety preconditions.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let status = self.child.wait()?;
        if status.signal() == Some(libc::SIGTERM) {
            return Ok(false);
        }
        anyhow::ensure!(status.success(), "agentd serve exited with {status}");
        Ok(true)
    }
}

fn config_text(llm: &FakeLlm, plugins: &Path, state: &Path, socket: &Path) -> String {
    format!(
        "[llm]\nmodel = \"fake\"\nbase_url = \"{}\"\napi_key = \"k\"\n\n\
         [daemon]\nplugins_dir = \"{}\"\nstate_dir = \"{}\"\nsocket = \"{}\"\nshutdown_grace = 5\n\n\
         [agents.bench]\nstrategy = \"toolcall\"\ntools = [\"terminate\"]\nmax_steps = 5\n",
        llm.base_url(),
        plugins.display(),
        state.display(),
        socket.display()
    )
}

fn copy_plugins(built: &Path, names: &[&str], to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to)?;
    for p in names {
        std::fs::copy(
            built.join(format!("{p}.wasm")),
            to.join(format!("{p}.wasm")),
        )
        .with_context(|| format!("copy {p}.wasm"))?;
    }
    Ok(())
}

/// The toolcall row of `/v1/plugins` when its file holds `sha` and loaded.
fn toolcall_serving(socket: &Path, sha: &str) -> anyhow::Result<bool> {
    let v = json(socket, "GET", "/v1/plugins", "")?;
    let row = v["plugins"].as_array().into_iter().flatten().find(|p| {
        p["file"]
            .as_str()
            .is_some_and(|f| f.ends_with("/toolcall.wasm"))
    });
    let Some(row) = row else {
        return Ok(false);
    };
    if row["sha256"] != sha {
        return Ok(false);
    }
    anyhow::ensure!(
        row["status"] == "loaded",
        "the swapped file did not load: {row}"
    );
    Ok(true)
}

struct Swap {
    visible: Duration,
    run_started: Duration,
}

/// Renames `bytes` into place as `toolcall.wasm` and times it (see the
/// module comment).
fn swap(socket: &Path, plugins: &Path, bytes: &[u8], n: usize) -> anyhow::Result<Swap> {
    let sha = sha256_hex(bytes);
    let temp = plugins.join(".toolcall.wasm.tmp");
    std::fs::write(&temp, bytes)?;
    let t0 = Instant::now();
    std::fs::rename(&temp, plugins.join("toolcall.wasm"))?;
    while !toolcall_serving(socket, &sha)? {
        anyhow::ensure!(t0.elapsed() < PATIENCE, "swap {n} never became visible");
        std::thread::sleep(Duration::from_millis(1));
    }
    let visible = t0.elapsed();
    let body = format!(r#"{{"agent":"bench","request":"swap {n}"}}"#);
    let created = json(socket, "POST", "/v1/runs", &body)?;
    let id = created["id"].as_str().context("run id")?.to_string();
    let mut state = created["state"].as_str().unwrap_or("").to_string();
    while state == "queued" {
        anyhow::ensure!(t0.elapsed() < PATIENCE, "run {id} never started");
        std::thread::sleep(Duration::from_millis(1));
        let v = json(socket, "GET", &format!("/v1/runs/{id}"), "")?;
        state = v["state"].as_str().unwrap_or("").to_string();
    }
    let run_started = t0.elapsed();
    // Let it end so the next swap measures a quiet daemon.
    loop {
        let v = json(socket, "GET", &format!("/v1/runs/{id}"), "")?;
        if v["state"] == "ended" {
            anyhow::ensure!(v["outcome"] == "finished", "run {id}: {v}");
            break;
        }
        anyhow::ensure!(t0.elapsed() < PATIENCE, "run {id} never ended");
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok(Swap {
        visible,
        run_started,
    })
}

fn verdict(value: Duration, target: Duration) -> &'static str {
    if value < target {
        "ok"
    } else {
        "MISSED"
    }
}

fn report_swaps(label: &str, swaps: &[Swap]) {
    let mut visible: Vec<Duration> = swaps.iter().map(|s| s.visible).collect();
    let mut started: Vec<Duration> = swaps.iter().map(|s| s.run_started).collect();
    visible.sort();
    started.sort();
    println!("  {label} ({} swaps):", swaps.len());
    println!(
        "    visible in /v1/plugins      p50 {:>7.1} ms  p99 {:>7.1} ms   target p50 < {} ms: {}",
        ms(percentile(&visible, 0.5)),
        ms(percentile(&visible, 0.99)),
        SWAP_TARGET.as_millis(),
        verdict(percentile(&visible, 0.5), SWAP_TARGET)
    );
    println!(
        "    first run started on it     p50 {:>7.1} ms  p99 {:>7.1} ms",
        ms(percentile(&started, 0.5)),
        ms(percentile(&started, 0.99)),
    );
}

fn bench_swaps(built: &Path, llm: &FakeLlm) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let plugins = dir.path().join("plugins");
    copy_plugins(built, BUNDLED, &plugins)?;
    let socket = dir.path().join("agentd.sock");
    let config = dir.path().join("agentd.toml");
    std::fs::write(
        &config,
        config_text(llm, &plugins, &dir.path().join("state"), &socket),
    )?;
    let (daemon, _) = Daemon::start(&config, &socket)?;
    let real = std::fs::read(built.join("toolcall.wasm"))?;

    println!("hot reload: toolcall.wasm renamed into the folder of a running daemon");
    let mut fresh = Vec::with_capacity(SWAPS);
    for n in 0..SWAPS {
        let bytes = with_custom_section(&real, &format!("new bytes, swap {n}"));
        fresh.push(swap(&socket, &plugins, &bytes, n)?);
    }
    report_swaps(
        "new bytes each swap: toolcall.wasm + a custom section with a counter (compiled)",
        &fresh,
    );

    let other = with_custom_section(&real, "seen bytes");
    let mut seen = Vec::with_capacity(SWAPS);
    for n in 0..SWAPS {
        let bytes = if n % 2 == 0 { &other } else { &real };
        seen.push(swap(&socket, &plugins, bytes, SWAPS + n)?);
    }
    report_swaps(
        "seen bytes: alternating toolcall.wasm and one copy with a custom section (compile cache)",
        &seen,
    );
    let st = daemon.status()?;
    println!(
        "    compile cache over the whole series: {} hits, {} misses",
        st["plugin_cache"]["hits"], st["plugin_cache"]["misses"]
    );
    daemon.stop()?;
    Ok(())
}

fn bench_startup(built: &Path, llm: &FakeLlm) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let plugins = dir.path().join("plugins");
    copy_plugins(built, BUNDLED, &plugins)?;
    let socket = dir.path().join("agentd.sock");
    let killed = std::cell::Cell::new(0);

    let start_in = |state: &Path, name: &str| -> anyhow::Result<(Duration, serde_json::Value)> {
        let config = dir.path().join(format!("{name}.toml"));
        std::fs::write(&config, config_text(llm, &plugins, state, &socket))?;
        let (daemon, took) = Daemon::start(&config, &socket)?;
        let status = daemon.status()?;
        if !daemon.stop()? {
            killed.set(killed.get() + 1);
        }
        Ok((took, status))
    };

    let mut cold = Vec::with_capacity(STARTS);
    let mut cold_status = serde_json::Value::Null;
    for n in 0..STARTS {
        let state = dir.path().join(format!("cold-state-{n}"));
        let (took, status) = start_in(&state, "cold")?;
        cold.push(took);
        cold_status = status;
    }
    let warm_state = dir.path().join("warm-state");
    start_in(&warm_state, "warm")?; // fills the cache; not measured
    let mut warm = Vec::with_capacity(STARTS);
    let mut warm_status = serde_json::Value::Null;
    for _ in 0..STARTS {
        let (took, status) = start_in(&warm_state, "warm")?;
        warm.push(took);
        warm_status = status;
    }
    cold.sort();
    warm.sort();

    println!(
        "start-up: spawn to the first 200 on /v1/status, {} plugins ({}), {STARTS} starts each",
        BUNDLED.len(),
        BUNDLED.join(", ")
    );
    let engine = &warm_status["sandbox_engine"];
    println!(
        "  Docker engine reachable: {} ({}), checked and reaped during start-up",
        engine["reachable"], engine["address"]
    );
    let cache = |s: &serde_json::Value| {
        format!(
            "cache {} hits / {} misses",
            s["plugin_cache"]["hits"], s["plugin_cache"]["misses"]
        )
    };
    println!(
        "  cold (empty state dir)  p50 {:>7.1} ms  (min {:.1}, max {:.1}; {})",
        ms(percentile(&cold, 0.5)),
        ms(cold[0]),
        ms(cold[cold.len() - 1]),
        cache(&cold_status)
    );
    println!(
        "  warm (cache filled)     p50 {:>7.1} ms  (min {:.1}, max {:.1}; {})   target p50 < {} ms: {}",
        ms(percentile(&warm, 0.5)),
        ms(warm[0]),
        ms(warm[warm.len() - 1]),
        cache(&warm_status),
        WARM_START_TARGET.as_millis(),
        verdict(percentile(&warm, 0.5), WARM_START_TARGET)
    );
    if killed.get() > 0 {
        println!(
            "  note: {} of {} daemons were killed by SIGTERM sent right after their first 200 \
             instead of shutting down (signal handlers are installed after the socket answers)",
            killed.get(),
            2 * STARTS + 1
        );
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // `cargo test --all-targets` runs bench binaries too; this one takes
    // minutes and is only meaningful in release, so it runs under
    // `cargo bench` (which passes `--bench`) and nowhere else.
    if !std::env::args().any(|a| a == "--bench") {
        println!("skipped: run it with `cargo bench --bench reload`");
        return Ok(());
    }
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let built = build_plugins(&repo)?;
    let llm = FakeLlm::start().await?;
    llm.set_recording(false);
    llm.set_fallback(Reply::terminate());
    tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
        bench_swaps(&built, &llm)?;
        println!();
        bench_startup(&built, &llm)
    })
    .await?
}
