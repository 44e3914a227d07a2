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

use std::time::Duration;

use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::error::PluginError;

/// How often the epoch advances. A guest notices a deadline or a cancel
/// within one tick.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// A strategy plus the tools one run may instantiate.
pub const INSTANCES_PER_RUN: u32 = 1 + 8;

/// Instances kept aside for load-time probes (reading plugin metadata).
const SPARE_INSTANCES: u32 = 16;

/// Linear memory a single plugin instance may grow to.
pub const PLUGIN_MEMORY_LIMIT: usize = 256 << 20;

/// What the engine is sized for; its instance pool is reserved up front.
#[derive(Debug, Clone, Copy)]
pub struct EngineLimits {
    /// Runs that may be in flight at once (`[daemon] max_concurrent_runs`;
    /// `run --local` uses 1): the pool holds [`INSTANCES_PER_RUN`] per run.
    pub max_concurrent_runs: u32,
}

/// Builds the process's engine (pooling allocator, epoch interruption) and
/// starts its epoch ticker. Fails with [`PluginError::Engine`] when the
/// pool cannot be reserved.
pub fn build_engine(limits: EngineLimits) -> Result<Engine, PluginError> {
    let instances = limits
        .max_concurrent_runs
        .saturating_mul(INSTANCES_PER_RUN)
        .saturating_add(SPARE_INSTANCES);
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(instances)
        // Rust components carry a main module plus a few shim modules.
        .total_core_instances(instances.saturating_mul(4))
        .total_memories(instances.saturating_mul(2))
        .total_tables(instances.saturating_mul(4))
        .total_stacks(instances)
        .max_memory_size(PLUGIN_MEMORY_LIMIT);

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
