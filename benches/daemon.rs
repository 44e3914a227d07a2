//! The daemon under load: 1000 runs at once through `agentd serve`
//! (`max_concurrent_runs = 1000`), each 20 steps, the fake LLM answering
//! after 20 ms, a cheap tool (`echo`) each step and `terminate` at step 20.
//! `AGENTD_BENCH_RUNS` and `AGENTD_BENCH_STEPS` change the two counts.
//! Prints the wall time, the daemon's own CPU time per step (and the part
//! of it the history's writer thread and the runtime's workers took), its peak RSS,
//! and the latency of `GET /v1/runs/{id}` measured while the runs are going.
//!
//! The fake LLM runs in a process of its own (this binary again, with
//! `AGENTD_BENCH_FAKE_LLM` set), as a real endpoint would: its CPU is not
//! the daemon's, and `/proc/<daemon>/stat` then counts the daemon alone.
//!
//! Run: `cargo bench --bench daemon` (or `scripts/bench.sh`). It spawns the
//! agentd binary of the same profile (release under `cargo bench`).

use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentd::testkit::stats::percentile;
use agentd::testkit::{build_plugins, uds_http, FakeLlm, Reply};

/// Runs, all at once, unless `AGENTD_BENCH_RUNS` says otherwise: the CPU
/// per step at another number of runs in flight shows what concurrency
/// itself costs (caches, the history's pages per commit).
const DEFAULT_RUNS: usize = 1000;
/// Steps per run unless `AGENTD_BENCH_STEPS` says otherwise: running the
/// bench at two step counts separates what a run costs once (creation,
/// instantiation, its record) from what each step costs.
const DEFAULT_STEPS: usize = 20;
const LLM_DELAY: Duration = Duration::from_millis(20);
/// Clients creating the runs concurrently.
const CLIENTS: usize = 16;
/// Between two `GET /v1/runs/{id}` of the latency probe.
const PROBE_INTERVAL: Duration = Duration::from_millis(10);
/// Between two `GET /v1/status` polls for the end of the load.
const STATUS_INTERVAL: Duration = Duration::from_millis(20);
/// Override [`DEFAULT_RUNS`] and [`DEFAULT_STEPS`]; the fake LLM child
/// inherits them, so its scripts match.
const RUNS_ENV: &str = "AGENTD_BENCH_RUNS";
const STEPS_ENV: &str = "AGENTD_BENCH_STEPS";
/// Set in the environment of the child that serves the fake LLM.
const FAKE_LLM_ENV: &str = "AGENTD_BENCH_FAKE_LLM";
/// Set (to the fake LLM's base URL) in the environment of the child that
/// sends the same chat requests as the runs, with nothing else around
/// them: the floor, below.
const CLIENT_ONLY_ENV: &str = "AGENTD_BENCH_CLIENT_ONLY";
/// The daemon's `AGENTD_LOG` (default `warn`), e.g. to see a module's
/// debug lines during the load.
const LOG_ENV: &str = "AGENTD_BENCH_LOG";
/// How long after the runs' end the daemon's RSS is read again: what a
/// daemon holds once a burst is over, not at its last moment.
const SETTLE: Duration = Duration::from_secs(2);

/// One request on a fresh connection; the body as text.
fn http(socket: &Path, method: &str, path: &str, body: &str) -> std::io::Result<(u16, String)> {
    let body = (!body.is_empty()).then_some(body.as_bytes());
    let (code, bytes) = uds_http::request(socket, method, path, body)?;
    Ok((code, String::from_utf8_lossy(&bytes).into_owned()))
}

/// `var` if set to a number of at least 1, else `default`.
fn knob(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n >= 1)
        .unwrap_or(default)
}

fn runs() -> usize {
    knob(RUNS_ENV, DEFAULT_RUNS)
}

fn steps_per_run() -> usize {
    knob(STEPS_ENV, DEFAULT_STEPS)
}

fn rss_kib(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// User and system CPU time a process has used so far (`/proc/PID/stat`
/// fields 14 and 15, in clock ticks).
fn cpu_time(pid: u32) -> Duration {
    cpu_time_of(Path::new(&format!("/proc/{pid}/stat")))
}

/// User+sys time from a `stat` file of `/proc` (a process's or a thread's).
fn cpu_time_of(path: &Path) -> Duration {
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    // The command name (field 2) may hold spaces; the fields after it don't.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // After `)`: state is field 3, so utime (14) and stime (15) are at 11 and 12.
    // SAFETY: sysconf has no memory-safety preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_micros((ticks(11) + ticks(12)) * 1_000_000 / hz)
}

/// CPU time of each thread of `pid`, by thread id, with its name: the
/// split between the history's writer thread and the runtime's workers
/// says which of the two a change moved.
fn thread_cpu(pid: u32) -> std::collections::HashMap<String, (String, Duration)> {
    let mut out = std::collections::HashMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for task in tasks.flatten() {
        let tid = task.file_name().to_string_lossy().into_owned();
        let name = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        let cpu = cpu_time_of(&task.path().join("stat"));
        out.insert(tid, (name.trim().to_string(), cpu));
    }
    out
}

/// CPU used between two [`thread_cpu`] readings by the threads whose name
/// starts with `prefix` (threads that ended between them are not counted).
fn threads_used(
    before: &std::collections::HashMap<String, (String, Duration)>,
    after: &std::collections::HashMap<String, (String, Duration)>,
    prefix: &str,
) -> Duration {
    after
        .iter()
        .filter(|(_, (name, _))| name.starts_with(prefix))
        .map(|(tid, (_, cpu))| {
            let was = before.get(tid).map_or(Duration::ZERO, |(_, c)| *c);
            cpu.saturating_sub(was)
        })
        .sum()
}

/// The scripts of every run: `echo` at every step but the last, then
/// `terminate`.
fn scripts() -> impl Iterator<Item = (String, Vec<Reply>)> {
    let steps = steps_per_run();
    (0..runs()).map(move |i| {
        let mut script: Vec<Reply> = (1..steps)
            .map(|s| {
                Reply::Delayed(
                    LLM_DELAY,
                    Box::new(Reply::call("echo", &format!(r#"{{"text":"step {s}"}}"#))),
                )
            })
            .collect();
        script.push(Reply::Delayed(LLM_DELAY, Box::new(Reply::terminate())));
        (format!("bench run {i}"), script)
    })
}

/// The child's side: serves the fake LLM, prints its base URL, and stops
/// when its standard input closes (the parent exited or is done).
async fn serve_fake_llm() -> anyhow::Result<()> {
    let llm = FakeLlm::start().await?;
    llm.set_recording(false);
    for (request, script) in scripts() {
        llm.push_for(&request, script);
    }
    let mut out = std::io::stdout();
    writeln!(out, "{}", llm.base_url())?;
    out.flush()?;
    tokio::task::spawn_blocking(|| {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
    })
    .await?;
    Ok(())
}

/// The floor's child: the same load's chat requests through agentd's own
/// [`LlmClient`] (the daemon's HTTP path), on a runtime like the daemon's,
/// with no daemon around them. Each of the runs sends its steps one after
/// another, its transcript growing as a `toolcall` run's does (the
/// assistant's call, the tool's answer); it prints its own CPU time over
/// the requests, in microseconds, and exits.
fn client_only(base_url: String) -> anyhow::Result<()> {
    use agentd::chat::{Message, ToolCall, ToolChoice, ToolSpec};
    use agentd::llm::{ChatRequest, LlmClient};
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let (runs, steps) = (runs(), steps_per_run());
    let client = Arc::new(LlmClient::new(agentd::testkit::llm_settings(base_url))?);
    let spec = |name: &str, params: &str| ToolSpec {
        name: name.into(),
        description: format!("the {name} tool"),
        parameters: params.into(),
    };
    let tools = Arc::new(vec![
        spec(
            "echo",
            r#"{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}"#,
        ),
        spec(
            "terminate",
            r#"{"type":"object","properties":{"status":{"type":"string","enum":["success","failure"]}},"required":["status"]}"#,
        ),
    ]);
    let self_pid = std::process::id();
    let before = cpu_time(self_pid);
    runtime.block_on(async {
        let tasks: Vec<_> = (0..runs)
            .map(|i| {
                let (client, tools) = (client.clone(), tools.clone());
                tokio::spawn(async move {
                    let mut messages = vec![
                        Message::system("You are a bench agent."),
                        Message::user(format!("bench run {i}")),
                    ];
                    for step in 0..steps {
                        let answer = client
                            .chat(ChatRequest {
                                messages: &messages,
                                tools: &tools,
                                tool_choice: ToolChoice::Auto,
                                run_id: None,
                            })
                            .await?;
                        let call = answer
                            .message
                            .tool_calls
                            .first()
                            .cloned()
                            .unwrap_or(ToolCall {
                                id: format!("call_{step}"),
                                name: "echo".into(),
                                arguments: "{}".into(),
                            });
                        messages.push(answer.message);
                        messages.push(Message::tool(format!("step {step}"), call.id, call.name));
                    }
                    anyhow::Ok(())
                })
            })
            .collect();
        for t in tasks {
            t.await??;
        }
        anyhow::Ok(())
    })?;
    let cpu = cpu_time(self_pid).saturating_sub(before);
    println!("{}", cpu.as_micros());
    Ok(())
}

/// The floor: the runs' chat requests alone, from a process of their own
/// (the child above) against a fresh fake LLM with the same scripts.
/// Returns that process's CPU time over the requests.
fn client_only_cpu() -> anyhow::Result<Duration> {
    let (mut llm, base_url) = spawn_fake_llm()?;
    let out = Command::new(std::env::current_exe()?)
        .env(CLIENT_ONLY_ENV, &base_url)
        .stderr(Stdio::inherit())
        .output()?;
    drop(llm.stdin.take());
    let _ = llm.wait();
    anyhow::ensure!(out.status.success(), "the client-only child failed");
    let micros: u64 = String::from_utf8_lossy(&out.stdout).trim().parse()?;
    Ok(Duration::from_micros(micros))
}

/// The fake LLM in its own process: the child, and its base URL.
fn spawn_fake_llm() -> anyhow::Result<(std::process::Child, String)> {
    let mut child = Command::new(std::env::current_exe()?)
        .env(FAKE_LLM_ENV, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
    let mut line = String::new();
    std::io::BufReader::new(stdout).read_line(&mut line)?;
    anyhow::ensure!(line.starts_with("http://"), "fake LLM did not start");
    Ok((child, line.trim().to_string()))
}

fn main() -> anyhow::Result<()> {
    if let Ok(base_url) = std::env::var(CLIENT_ONLY_ENV) {
        return client_only(base_url);
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(bench())
}

async fn bench() -> anyhow::Result<()> {
    if std::env::var_os(FAKE_LLM_ENV).is_some() {
        return serve_fake_llm().await;
    }
    // `cargo test --all-targets` runs bench binaries too; this one takes
    // minutes and is only meaningful in release, so it runs under
    // `cargo bench` (which passes `--bench`) and nowhere else.
    if !std::env::args().any(|a| a == "--bench") {
        println!("skipped: run it with `cargo bench --bench daemon`");
        return Ok(());
    }
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let (runs, steps) = (runs(), steps_per_run());
    let built = build_plugins(&repo)?;
    let dir = tempfile::tempdir()?;
    let plugins = dir.path().join("plugins");
    std::fs::create_dir_all(&plugins)?;
    for p in ["toolcall", "terminate", "echo"] {
        std::fs::copy(
            built.join(format!("{p}.wasm")),
            plugins.join(format!("{p}.wasm")),
        )?;
    }
    let (mut llm, base_url) = spawn_fake_llm()?;
    let socket = dir.path().join("agentd.sock");
    let config = dir.path().join("agentd.toml");
    std::fs::write(
        &config,
        format!(
            "[llm]\nmodel = \"fake\"\nbase_url = \"{}\"\napi_key = \"k\"\n\n\
             [daemon]\nplugins_dir = \"{}\"\nstate_dir = \"{}\"\nsocket = \"{}\"\nmax_concurrent_runs = {runs}\n\n\
             [agents.bench]\nstrategy = \"toolcall\"\ntools = [\"echo\", \"terminate\"]\nmax_steps = {steps}\nmax_messages = 200\n",
            base_url,
            plugins.display(),
            dir.path().join("state").display(),
            socket.display()
        ),
    )?;
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentd"))
        .args(["serve", "--config"])
        .arg(&config)
        .env(
            "AGENTD_LOG",
            std::env::var(LOG_ENV).unwrap_or_else(|_| "warn".into()),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()?;
    let pid = child.id();
    let ready = Instant::now();
    while http(&socket, "GET", "/v1/status", "").is_err() {
        anyhow::ensure!(
            ready.elapsed() < Duration::from_secs(120),
            "daemon not ready"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let rss_idle = rss_kib(pid, "VmRSS:");
    let (cpu_before, llm_cpu_before) = (cpu_time(pid), cpu_time(llm.id()));
    let threads_before = thread_cpu(pid);
    let llm_pid = llm.id();

    let result = tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
        let start = Instant::now();
        // Created by several clients at once, as scripts driving a busy
        // daemon would: one client in a loop measures creation latency,
        // not the daemon's throughput.
        let creators: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let socket = socket.clone();
                std::thread::spawn(move || -> anyhow::Result<Vec<String>> {
                    let mut ids = Vec::new();
                    for i in (c..runs).step_by(CLIENTS) {
                        let body = format!(r#"{{"agent":"bench","request":"bench run {i}"}}"#);
                        let (code, text) = http(&socket, "POST", "/v1/runs", &body)?;
                        anyhow::ensure!(code == 201, "create failed: {code} {text}");
                        let v: serde_json::Value = serde_json::from_str(&text)?;
                        ids.push(v["id"].as_str().unwrap_or_default().to_string());
                    }
                    Ok(ids)
                })
            })
            .collect();
        let mut ids = Vec::with_capacity(runs);
        for c in creators {
            ids.extend(
                c.join()
                    .map_err(|_| anyhow::anyhow!("creator thread panicked"))??,
            );
        }
        let created = start.elapsed();
        // API latency under load, from a second client, while runs go on.
        let done = Arc::new(AtomicBool::new(false));
        let prober = {
            let (socket, ids, done) = (socket.clone(), ids.clone(), done.clone());
            std::thread::spawn(move || {
                let mut lat = Vec::new();
                let mut i = 0;
                while !done.load(Ordering::SeqCst) {
                    let t = Instant::now();
                    if http(
                        &socket,
                        "GET",
                        &format!("/v1/runs/{}", ids[i % ids.len()]),
                        "",
                    )
                    .is_ok()
                    {
                        lat.push(t.elapsed());
                    }
                    i += 1;
                    // Paced: a monitoring client, not a load generator. Back
                    // to back, the GETs' own cost (each reads an ended run's
                    // transcript from the history) moved the daemon's CPU per
                    // step by as much as the changes being measured.
                    std::thread::sleep(PROBE_INTERVAL);
                }
                lat
            })
        };
        loop {
            let (_, text) = http(&socket, "GET", "/v1/status", "")?;
            let v: serde_json::Value = serde_json::from_str(&text)?;
            if v["runs_active"] == 0 && v["runs_queued"] == 0 {
                break;
            }
            anyhow::ensure!(
                start.elapsed() < Duration::from_secs(600),
                "runs did not finish"
            );
            std::thread::sleep(STATUS_INTERVAL);
        }
        let wall = start.elapsed();
        let cpu = cpu_time(pid).saturating_sub(cpu_before);
        let llm_cpu = cpu_time(llm_pid).saturating_sub(llm_cpu_before);
        let threads_after = thread_cpu(pid);
        done.store(true, Ordering::SeqCst);
        let mut lat = prober.join().unwrap_or_default();
        lat.sort();
        let mut finished = 0;
        for id in &ids {
            let (_, text) = http(&socket, "GET", &format!("/v1/runs/{id}"), "")?;
            let v: serde_json::Value = serde_json::from_str(&text)?;
            if v["outcome"] == "finished" && v["steps"] == steps as u64 {
                finished += 1;
            }
        }
        println!(
            "daemon: {runs} concurrent runs x {steps} steps, LLM answering after {} ms",
            LLM_DELAY.as_millis()
        );
        println!(
            "  all runs created in       {:>8.3} s ({CLIENTS} clients)",
            created.as_secs_f64()
        );
        println!(
            "  wall time (first POST to last end) {:>8.3} s  (ideal {:.1} s)",
            wall.as_secs_f64(),
            (LLM_DELAY * steps as u32).as_secs_f64()
        );
        println!("  runs finished with {steps} steps: {finished}/{runs}");
        let total_steps = (runs * steps) as f64;
        println!(
            "  daemon CPU (user+sys)      {:>8.3} s = {:.1} us per step; fake LLM process {:.3} s",
            cpu.as_secs_f64(),
            cpu.as_secs_f64() * 1e6 / total_steps,
            llm_cpu.as_secs_f64()
        );
        let per_step = |d: Duration| d.as_secs_f64() * 1e6 / total_steps;
        println!(
            "    of which the history writer {:.1} us, the runtime's workers {:.1} us per step",
            per_step(threads_used(
                &threads_before,
                &threads_after,
                "history-writer"
            )),
            per_step(threads_used(
                &threads_before,
                &threads_after,
                "tokio-rt-worker"
            ))
        );
        println!(
            "  GET /v1/runs/{{id}} under load: p50 {:.2} ms, p99 {:.2} ms ({} requests)",
            percentile(&lat, 0.5).as_secs_f64() * 1e3,
            percentile(&lat, 0.99).as_secs_f64() * 1e3,
            lat.len()
        );
        anyhow::ensure!(finished == runs, "not every run finished");
        Ok(())
    })
    .await?;
    let rss_ended = rss_kib(pid, "VmRSS:");
    std::thread::sleep(SETTLE);
    println!(
        "  daemon RSS: {:.1} MiB idle, {:.1} MiB peak, {:.1} MiB once the runs have ended, {:.1} MiB {} s later",
        rss_idle as f64 / 1024.0,
        rss_kib(pid, "VmHWM:") as f64 / 1024.0,
        rss_ended as f64 / 1024.0,
        rss_kib(pid, "VmRSS:") as f64 / 1024.0,
        SETTLE.as_secs()
    );
    // SAFETY: kill has no memory-safety preconditions.
    unsafe {
        libc::kill(pid as i32, libc::SIGTERM);
    }
    let _ = child.wait();
    drop(llm.stdin.take());
    let _ = llm.wait();
    result?;
    // The same requests with no daemon around them: what the HTTP path
    // alone costs at this load, the part of the CPU per step that no change
    // to the daemon's own work can remove.
    let floor = tokio::task::spawn_blocking(client_only_cpu).await??;
    println!(
        "  floor, the same chat requests alone (agentd's LLM client, own process): {:.3} s = {:.1} us per step",
        floor.as_secs_f64(),
        floor.as_secs_f64() * 1e6 / (runs * steps) as f64
    );
    Ok(())
}
