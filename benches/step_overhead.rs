//! Host overhead per step: one agent, 200 steps, the fake LLM answering at
//! once with one call to a cheap tool (`echo`), `terminate` on step 200.
//! Prints µs per step (p50 and mean, including the HTTP round trip to the
//! fake server on loopback) and the process's peak RSS.
//!
//! Run: `cargo bench --bench step_overhead` (or `scripts/bench.sh`).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentd::agent::{Agent, Outcome, RunEvent, RunOptions, Runtime};

use agentd::agent::AgentConfig;
use agentd::chat::Message;
use agentd::chat::{ToolChoice, ToolSpec};
use agentd::llm::{ChatRequest, LlmClient};
use agentd::plugin::{EngineLimits, PluginHost};
use agentd::sandbox::NoSandbox;
use agentd::testkit::stats::percentile;
use agentd::testkit::{build_plugins, FakeLlm, Reply};

const STEPS: usize = 200;
const RUNS: usize = 10;

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let built = build_plugins(&repo)?;
    let dir = tempfile::tempdir()?;
    for p in ["toolcall", "terminate", "echo"] {
        std::fs::copy(
            built.join(format!("{p}.wasm")),
            dir.path().join(format!("{p}.wasm")),
        )?;
    }
    let host = PluginHost::new(EngineLimits {
        max_concurrent_runs: 4,
    })?;
    host.load_dir(dir.path()).await?;
    let runtime_plugins = Arc::new(host);
    let runtime = Arc::new(Runtime {
        plugins: runtime_plugins.clone(),
        sandboxes: Arc::new(NoSandbox::new("benchmark")),
        step_timeout: Duration::from_secs(60),
        limits: agentd::agent::RunLimits::default(),
        tool_provider: Arc::new(agentd::agent::NoToolProvider),
        grants: Default::default(),
    });
    let llm = FakeLlm::start().await?;
    llm.set_recording(false);
    let settings = agentd::testkit::llm_settings(llm.base_url());
    let agent_llm = LlmClient::new(settings.clone())?;
    let agent = Agent::new(
        AgentConfig {
            tools: vec!["echo".into(), "terminate".into()],
            max_steps: Some(STEPS as u32 + 10),
            system_prompt: Some("bench".into()),
            // The window stays small so the figure is the host's overhead,
            // not the cost of re-sending an ever longer conversation.
            max_messages: 20,
            duplicate_threshold: 1000,
            ..AgentConfig::with_defaults("bench")
        },
        LlmClient::new(settings)?,
        runtime,
    );

    let tool_specs: Vec<ToolSpec> = ["echo", "terminate"]
        .iter()
        .filter_map(|n| runtime_plugins.snapshot().tool(n).map(|t| t.spec.clone()))
        .collect();
    let mut record_messages = Vec::new();
    let mut per_step: Vec<Duration> = Vec::new();
    let mut total = Duration::ZERO;
    for run in 0..=RUNS {
        for _ in 0..STEPS - 1 {
            llm.push(Reply::call("echo", r#"{"text":"x"}"#));
        }
        llm.push(Reply::terminate());
        let starts: Arc<Mutex<Vec<Instant>>> = Arc::default();
        let sink = starts.clone();
        let events = Arc::new(move |e: &RunEvent| {
            if matches!(e, RunEvent::StepStarted { .. } | RunEvent::RunEnded { .. }) {
                if let Ok(mut v) = sink.lock() {
                    v.push(Instant::now());
                }
            }
        });
        let began = Instant::now();
        let record = agent
            .run(
                "benchmark",
                RunOptions {
                    events,
                    ..RunOptions::default()
                },
            )
            .await?;
        let elapsed = began.elapsed();
        anyhow::ensure!(
            record.outcome == Outcome::Finished && record.steps as usize == STEPS,
            "unexpected run: {:?} after {} steps ({:?})",
            record.outcome,
            record.steps,
            record.error
        );
        if run == 0 {
            // The window the last request carried, with the system prompt.
            record_messages = std::iter::once(Message::system("bench"))
                .chain(record.messages.iter().cloned())
                .collect();
            continue; // warm-up: connection pool, lazy statics
        }
        total += elapsed;
        let times = starts.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        per_step.extend(times.windows(2).map(|w| w[1] - w[0]));
    }
    per_step.sort();
    let mean = total / (RUNS * STEPS) as u32;

    // The same conversation shape sent straight through the client: the
    // HTTP round trip alone, so the host's own share can be told apart.
    let client = agent_llm;
    let window = record_messages;
    let specs = tool_specs;
    llm.set_fallback(Reply::call("echo", r#"{"text":"x"}"#));
    // In a spawned task, like the step loop: calls from the `main` body
    // itself are measurably slower.
    let mut http = tokio::spawn(async move {
        let mut http = Vec::with_capacity(2000);
        for _ in 0..2000 {
            let t = Instant::now();
            client
                .chat(ChatRequest {
                    messages: &window,
                    tools: &specs,
                    tool_choice: ToolChoice::Auto,
                    run_id: None,
                })
                .await?;
            http.push(t.elapsed());
        }
        anyhow::Ok(http)
    })
    .await??;
    http.sort();
    println!(
        "step_overhead: {RUNS} runs x {STEPS} steps (echo tool each step, terminate at {STEPS})"
    );
    println!(
        "  per step: p50 {:.1} µs, p99 {:.1} µs, mean {:.1} µs (incl. HTTP round trip to the fake LLM)",
        percentile(&per_step, 0.5).as_secs_f64() * 1e6,
        percentile(&per_step, 0.99).as_secs_f64() * 1e6,
        mean.as_secs_f64() * 1e6
    );
    let http_p50 = percentile(&http, 0.5);
    println!(
        "  LLM round trip alone (same request shape): p50 {:.1} µs",
        http_p50.as_secs_f64() * 1e6
    );
    println!(
        "  host overhead per step, excluding the round trip: ~{:.1} µs (p50 difference)",
        (percentile(&per_step, 0.5).as_secs_f64() - http_p50.as_secs_f64()) * 1e6
    );
    println!("  peak RSS: {:.1} MiB", peak_rss_kib() as f64 / 1024.0);
    Ok(())
}
