//! Rust and Python tools side by side: the same tool (`echo`, returning its
//! text) written with the Rust SDK and with the Python SDK (`py_echo`,
//! built by componentize-py), measured through agentd's own engine and
//! plugin host.
//!
//! Prints, for each: the component's size; what it asks of the instance
//! pool (core instances, memories, tables, instance state, initial linear
//! memory); the first compile (cranelift, `Component::new`); a load from the
//! compile cache (`PluginHost::load_dir` on a warm cache: read, SHA-256,
//! deserialize, link, probe); a cold call (a run's first call: store,
//! instantiate, `invoke`); a warm call (the same instance again); and the
//! memory each live instance holds after a call (RSS growth over
//! `LIVE` instances kept alive at once, divided by `LIVE`).
//!
//! Run: `cargo bench --bench plugin_langs` (builds both kinds of plugin
//! first; componentize-py is installed by scripts/ensure-componentize-py.sh).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agentd::plugin::clock::StepClock;
use agentd::plugin::tool::ToolBox;
use agentd::plugin::{EngineLimits, PluginHost};
use agentd::sandbox::{NoSandbox, SandboxProvider};
use agentd::testkit::stats::percentile;
use agentd::testkit::{build_plugins, build_python_plugins};
use wasmtime::component::Component;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// Cold calls measured per language (each a fresh instance).
const COLD: usize = 50;
/// Warm calls measured per language (one instance).
const WARM: usize = 2000;
/// Instances kept alive at once to measure the memory each holds.
const LIVE: usize = 20;

struct Figures {
    size: u64,
    needs: Needs,
    first_compile: Duration,
    cached_load: Duration,
    cold_p50: Duration,
    cold_p99: Duration,
    warm_p50: Duration,
    warm_p99: Duration,
    rss_per_instance: f64,
}

#[derive(Default)]
struct Needs {
    /// Bytes of machine code and metadata (what the compile cache keeps).
    artefact: usize,
    /// `Component::deserialize` of that artefact alone.
    deserialize: Duration,
    core_instances: String,
    memories: usize,
    tables: usize,
    instance_size: String,
    initial_memory: u64,
    initial_table: u64,
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// The figure wasmtime's error names: "... requires N bytes" / "contains N core module instances".
fn number_after(text: &str, marker: &str) -> Option<String> {
    let at = text.find(marker)? + marker.len();
    Some(
        text[at..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect(),
    )
}

/// What the component asks of the pool. Compiled once on an on-demand
/// engine (memories, tables, their initial sizes), then deserialized on
/// pooling engines whose caps are 0, whose refusals name the counts.
fn needs(bytes: &[u8]) -> anyhow::Result<Needs> {
    let mut base = Config::new();
    base.wasm_component_model(true).epoch_interruption(true);
    let on_demand = Engine::new(&base).map_err(anyhow::Error::msg)?;
    let component = Component::new(&on_demand, bytes).map_err(anyhow::Error::msg)?;
    let req = component.resources_required();
    let artefact = component.serialize().map_err(anyhow::Error::msg)?;
    let refused = |pool: PoolingAllocationConfig| -> String {
        let mut config = base.clone();
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        match Engine::new(&config) {
            // SAFETY: the artefact was serialized just above by this process.
            Ok(engine) => match unsafe { Component::deserialize(&engine, &artefact) } {
                Ok(_) => String::new(),
                Err(e) => format!("{e:#}"),
            },
            Err(e) => format!("{e:#}"),
        }
    };
    let mut small = PoolingAllocationConfig::default();
    small
        .total_component_instances(4)
        .total_core_instances(64)
        .total_memories(16)
        .total_tables(16)
        .max_memory_size(1 << 30);
    let mut no_core = small.clone();
    no_core.max_core_instances_per_component(0);
    let mut no_size = small.clone();
    no_size
        .max_core_instances_per_component(64)
        .max_memories_per_component(16)
        .max_tables_per_component(16)
        .max_component_instance_size(0);
    // SAFETY: the artefact was serialized just above by this process.
    let t = Instant::now();
    let again = unsafe { Component::deserialize(&on_demand, &artefact) };
    let deserialize = t.elapsed();
    again.map_err(anyhow::Error::msg)?;
    let core = refused(no_core);
    let size = refused(no_size);
    Ok(Needs {
        artefact: artefact.len(),
        deserialize,
        core_instances: number_after(&core, "transitively contains").unwrap_or(core),
        memories: req.as_ref().map_or(0, |r| r.num_memories as usize),
        tables: req.as_ref().map_or(0, |r| r.num_tables as usize),
        instance_size: number_after(&size, "requires").unwrap_or(size),
        initial_memory: req
            .as_ref()
            .map_or(0, |r| r.max_initial_memory_size.unwrap_or(0))
            * 65536,
        initial_table: req
            .as_ref()
            .map_or(0, |r| r.max_initial_table_size.unwrap_or(0)),
    })
}

async fn measure(file: &Path, tool: &str, text_args: &str) -> anyhow::Result<Figures> {
    let bytes = std::fs::read(file)?;
    let needs = needs(&bytes)?;

    // First compile, through agentd's engine (pool and caps as the daemon has them).
    let plugins = tempfile::tempdir()?;
    std::fs::copy(file, plugins.path().join(format!("{tool}.wasm")))?;
    let cache = tempfile::tempdir()?;
    let limits = EngineLimits {
        max_concurrent_runs: 8,
    };
    let cold_host = PluginHost::new(limits)?.with_cache_dir(cache.path().join("c"))?;
    let t = Instant::now();
    let report = cold_host.load_dir(plugins.path()).await?;
    let first_compile = t.elapsed();
    anyhow::ensure!(report.failed.is_empty(), "{tool}: {:?}", report.failed);
    drop(cold_host);

    // From the compile cache, in a new host (a daemon restart).
    let host = PluginHost::new(limits)?.with_cache_dir(cache.path().join("c"))?;
    let t = Instant::now();
    let report = host.load_dir(plugins.path()).await?;
    let cached_load = t.elapsed();
    anyhow::ensure!(report.failed.is_empty(), "{tool}: {:?}", report.failed);
    anyhow::ensure!(host.cache_hits() == 1, "{tool}: not served from the cache");

    let plugin = host
        .snapshot()
        .tool(tool)
        .ok_or_else(|| anyhow::anyhow!("{tool} not loaded"))?;
    let sandbox = NoSandbox::new("bench").for_run("bench");
    let args = text_args.to_string();

    // In a spawned task, like a run's step loop (calls from the main body
    // itself measured slower).
    let task_plugin = plugin.clone();
    let (cold, warm, rss_per_instance) = tokio::spawn(async move {
        let new_box = || {
            ToolBox::new(
                vec![task_plugin.clone()],
                sandbox.clone(),
                StepClock::new(),
                Default::default(),
                std::sync::Arc::new(agentd::plugin::NoHuman("a benchmark asks no one")),
            )
        };
        let mut cold = Vec::with_capacity(COLD);
        for _ in 0..COLD + 2 {
            let mut tools = new_box();
            let t = Instant::now();
            let out = tools.invoke(&task_plugin.meta.name, &args).await;
            cold.push(t.elapsed());
            anyhow::ensure!(
                matches!(out.as_deref(), Ok("x")),
                "cold call: {:?}",
                out.err()
            );
        }
        cold.drain(..2); // warm-up: lazy init in the pool and the allocator
        let mut tools = new_box();
        let mut warm = Vec::with_capacity(WARM);
        for _ in 0..WARM {
            let t = Instant::now();
            let out = tools.invoke(&task_plugin.meta.name, &args).await;
            warm.push(t.elapsed());
            anyhow::ensure!(
                matches!(out.as_deref(), Ok("x")),
                "warm call: {:?}",
                out.err()
            );
        }
        drop(tools);
        // Memory of instances alive at once, each after one call.
        let before = rss_kib();
        let mut live = Vec::with_capacity(LIVE);
        for _ in 0..LIVE {
            let mut tools = new_box();
            let out = tools.invoke(&task_plugin.meta.name, &args).await;
            anyhow::ensure!(out.is_ok(), "live call: {:?}", out.err());
            live.push(tools);
        }
        let after = rss_kib();
        drop(live);
        anyhow::Ok((
            cold,
            warm,
            after.saturating_sub(before) as f64 / LIVE as f64 / 1024.0,
        ))
    })
    .await??;
    let (mut cold, mut warm) = (cold, warm);
    cold.sort();
    warm.sort();
    Ok(Figures {
        size: bytes.len() as u64,
        needs,
        first_compile,
        cached_load,
        cold_p50: percentile(&cold, 0.5),
        cold_p99: percentile(&cold, 0.99),
        warm_p50: percentile(&warm, 0.5),
        warm_p99: percentile(&warm, 0.99),
        rss_per_instance,
    })
}

fn ms(d: Duration) -> String {
    let v = d.as_secs_f64() * 1e3;
    if v >= 100.0 {
        format!("{v:.0} ms")
    } else if v >= 1.0 {
        format!("{v:.1} ms")
    } else {
        format!("{:.0} µs", v * 1e3)
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let rust = build_plugins(&repo)?.join("echo.wasm");
    let python = build_python_plugins(&repo)?.join("py_echo.wasm");
    let args = r#"{"text":"x"}"#;
    let r = measure(&rust, "echo", args).await?;
    let p = measure(&python, "py_echo", args).await?;

    println!("plugin_langs: the echo tool in Rust (echo) and in Python (py_echo), release build");
    println!("| | Rust | Python |");
    println!("|---|---|---|");
    let row = |what: &str, a: String, b: String| println!("| {what} | {a} | {b} |");
    row(
        "component size",
        format!("{:.0} KiB", r.size as f64 / 1024.0),
        format!("{:.1} MiB", p.size as f64 / 1048576.0),
    );
    row(
        "core instances / memories / tables",
        format!(
            "{} / {} / {}",
            r.needs.core_instances, r.needs.memories, r.needs.tables
        ),
        format!(
            "{} / {} / {}",
            p.needs.core_instances, p.needs.memories, p.needs.tables
        ),
    );
    row(
        "instance state (VMContexts), bytes",
        r.needs.instance_size.clone(),
        p.needs.instance_size.clone(),
    );
    row(
        "initial linear memory / table elements",
        format!(
            "{:.1} MiB / {}",
            r.needs.initial_memory as f64 / 1048576.0,
            r.needs.initial_table
        ),
        format!(
            "{:.1} MiB / {}",
            p.needs.initial_memory as f64 / 1048576.0,
            p.needs.initial_table
        ),
    );
    row(
        "compiled artefact (a compile cache entry)",
        format!("{:.0} KiB", r.needs.artefact as f64 / 1024.0),
        format!("{:.1} MiB", p.needs.artefact as f64 / 1048576.0),
    );
    row(
        "first compile (and probe)",
        ms(r.first_compile),
        ms(p.first_compile),
    );
    row(
        "load from the compile cache (and probe)",
        ms(r.cached_load),
        ms(p.cached_load),
    );
    row(
        "of which deserializing the artefact",
        ms(r.needs.deserialize),
        ms(p.needs.deserialize),
    );
    row(
        &format!("cold call: instantiate + call, p50 / p99 of {COLD}"),
        format!("{} / {}", ms(r.cold_p50), ms(r.cold_p99)),
        format!("{} / {}", ms(p.cold_p50), ms(p.cold_p99)),
    );
    row(
        &format!("warm call, p50 / p99 of {WARM}"),
        format!("{} / {}", ms(r.warm_p50), ms(r.warm_p99)),
        format!("{} / {}", ms(p.warm_p50), ms(p.warm_p99)),
    );
    row(
        &format!("RSS per live instance after a call ({LIVE} alive)"),
        format!("{:.2} MiB", r.rss_per_instance),
        format!("{:.2} MiB", p.rss_per_instance),
    );
    Ok(())
}
