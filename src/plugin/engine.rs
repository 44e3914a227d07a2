//! The one wasmtime `Engine` of the process and its epoch ticker.
//!
//! Choices, and why:
//! - **Pooling allocator.** A run instantiates its strategy and each tool it
//!   uses in fresh stores; pooling makes that ~2x cheaper than on-demand
//!   allocation. Its slots are reserved up front, so the pool is sized from
//!   `max_concurrent_runs` and failure to reserve is reported plainly.
//! - **Epoch interruption, yielding.** Every store yields to tokio at each
//!   tick, so `tokio::time::timeout` and cancellation can stop a guest that
//!   never returns (an infinite loop) without a thread per run.
//! - **No `concurrency_support`.** WASI 0.3 async components are not used and
//!   the feature made calls 2-4x slower.
//! - **Caps per component.** The pool's totals are shared by every run, so a
//!   single component declaring hundreds of core instances (each with its
//!   own memory) could take most of the slots and grow each memory to the
//!   per-memory maximum. Each component is therefore capped in core
//!   instances, memories, tables and instance size; wasmtime checks these
//!   when the component is compiled, so such a file is refused at load with
//!   the cap in the message, and the plugins already serving are untouched.
//!   No memory may be larger than `[plugins] memory_limit`, which the
//!   per-store limiter (`limits.rs`) applies to the sum of all of them.
//! - **Sized for Python components too.** A component built by
//!   componentize-py 0.25.1 (the Python SDK's, `plugins/python/`) carries
//!   CPython, libc and the WASI adapter as separate modules. Measured
//!   (`cargo bench --bench plugin_langs`, README "Benchmarks"), against a
//!   Rust tool:
//!
//!   | | Rust tool | Python tool |
//!   |---|---|---|
//!   | core instances | 3 | 14 |
//!   | memories / tables | 1 / 2 | 1 / 2 |
//!   | instance state (VMContexts) | 6 KB | 400 KB |
//!   | initial linear memory | 1.1 MiB | 13.2 MiB |
//!   | resident after a call | 0.06 MiB | 6.7 MiB |
//!
//!   So only one total had to change: core instances. At four per instance
//!   on average (sized for Rust), Python instances (14 each) ran the pool
//!   out long before its instance count: one run's share (nine instances)
//!   held two Python tools, and 64 runs with three Python tools each
//!   exhausted the pool of `max_concurrent_runs = 64`, so tools failed to
//!   instantiate with wasmtime's "limit reached". The total is now the per-component cap times the
//!   instances, which no mix of components can exhaust before the instance
//!   count itself; that costs nothing up front, since wasmtime reserves no
//!   memory per core instance (a core instance's state is allocated when it
//!   is instantiated: 400 KB for a Python component). Memories and tables,
//!   which *are* reserved up front (a memory slot is 4 GiB of address
//!   space plus guards), stay at their Rust-sized averages: a Python
//!   component has no more of them than a Rust one. The per-component caps
//!   stay tight where Rust and Python agree (memories, tables, instance
//!   state: 1 MiB is 2.5 times Python's) and leave Python a margin on core
//!   instances (20 for its 14, room for a componentize-py that splits out
//!   another module), so one component still cannot declare hundreds. A
//!   Python instance needs `[plugins] memory_limit` of at least 14 MiB (its
//!   initial memory; the default is 256 MiB).

use std::time::Duration;

use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::error::PluginError;
use super::settings::PluginSettings;

/// How often the epoch advances. A guest notices a deadline or a cancel
/// within one tick.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// A strategy plus the tools one run may instantiate.
pub const INSTANCES_PER_RUN: u32 = 1 + 8;

/// Instances kept aside for load-time probes (reading plugin metadata).
const SPARE_INSTANCES: u32 = 16;

/// Core instances one component may contain: a Rust component has a main
/// module and a few shims (wasi adapters, fixups), 3 for a tool of the SDK;
/// a Python one (componentize-py 0.25.1) has 14: CPython, libc, the WASI
/// adapter, the bindings and their shims. 20 leaves room for a compiler
/// version that splits out one more module without letting a component
/// declare hundreds.
pub const MAX_CORE_INSTANCES_PER_COMPONENT: u32 = 20;

/// Linear memories one component may contain: a Rust component has one or
/// two (its own and an adapter's); a Python component has one.
pub const MAX_MEMORIES_PER_COMPONENT: u32 = 4;

/// Tables one component may contain: two for both Rust and Python tools.
pub const MAX_TABLES_PER_COMPONENT: u32 = 8;

/// Bytes of instance metadata (`VMComponentContext` and its core instances'
/// `VMContext`s) one component may need: a Rust plugin a few KiB, a Python
/// one about 400 KB (CPython's module has thousands of functions and
/// globals).
pub const MAX_COMPONENT_INSTANCE_SIZE: usize = 1 << 20;

/// How many plugin instances the engine's pool is sized for.
#[derive(Debug, Clone, Copy)]
pub struct EngineLimits {
    /// Runs that may hold a strategy and tools at the same time.
    pub max_concurrent_runs: u32,
}

/// The engine with the default [`PluginSettings`].
pub fn build_engine(limits: EngineLimits) -> Result<Engine, PluginError> {
    build_engine_with(limits, &PluginSettings::default())
}

/// The engine, its pool sized by `limits` and capped per component, no
/// memory larger than `settings.memory_limit`.
pub fn build_engine_with(
    limits: EngineLimits,
    settings: &PluginSettings,
) -> Result<Engine, PluginError> {
    let instances = limits
        .max_concurrent_runs
        .saturating_mul(INSTANCES_PER_RUN)
        .saturating_add(SPARE_INSTANCES);
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(instances)
        // Every instance may be a Python one (14 core instances): reserved
        // nothing up front, so sized to the per-component cap (see above).
        .total_core_instances(instances.saturating_mul(MAX_CORE_INSTANCES_PER_COMPONENT))
        // Reserved up front (address space): the average of one or two a
        // Rust or Python component has.
        .total_memories(instances.saturating_mul(2))
        .total_tables(instances.saturating_mul(4))
        .total_stacks(instances)
        .max_memory_size(settings.memory_limit_bytes())
        .max_core_instances_per_component(MAX_CORE_INSTANCES_PER_COMPONENT)
        .max_memories_per_component(MAX_MEMORIES_PER_COMPONENT)
        .max_tables_per_component(MAX_TABLES_PER_COMPONENT)
        .max_component_instance_size(MAX_COMPONENT_INSTANCE_SIZE);

    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .epoch_interruption(true)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));

    let engine = Engine::new(&config).map_err(|e| PluginError::Engine(format!(
        "cannot reserve the plugin instance pool ({instances} instances for max_concurrent_runs = {}): {e}; lower [daemon] max_concurrent_runs",
        limits.max_concurrent_runs
    )))?;
    spawn_epoch_ticker(&engine);
    Ok(engine)
}

/// A plain thread, not a tokio task: it must keep ticking even when every
/// runtime worker is busy inside a guest. It holds only a weak handle, so it
/// ends with the engine.
fn spawn_epoch_ticker(engine: &Engine) {
    let weak = engine.weak();
    let spawned = std::thread::Builder::new()
        .name("agentd-epoch".into())
        .spawn(move || loop {
            std::thread::sleep(EPOCH_TICK);
            match weak.upgrade() {
                Some(engine) => engine.increment_epoch(),
                None => return,
            }
        });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "cannot start the epoch ticker: plugin deadlines will not fire");
    }
}
