//! What the plugin host records through the `metrics` facade: tool calls,
//! plugin loads and the compile cache. The daemon installs the exporter
//! and registers these buckets; without one every record is a no-op.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ::metrics::{counter, histogram, Counter, Histogram, SharedString};

/// Seconds of one tool call (the tool's own time and its sandbox or MCP
/// waits), by `tool`.
pub const TOOL_CALL_DURATION: &str = "agentd_tool_call_duration_seconds";
/// Tool calls that failed (the tool reported an error, trapped, hit a
/// limit or does not exist), by `tool`.
pub const TOOL_CALL_ERRORS: &str = "agentd_tool_call_errors_total";
/// Plugin files loaded (compiled or taken from the cache, then probed), by
/// `result`: `ok` or `error` (a load or reload that failed).
pub const PLUGIN_LOADS: &str = "agentd_plugin_loads_total";
/// Rescans of the plugins folder that could not read it.
pub const PLUGIN_RESCAN_ERRORS: &str = "agentd_plugin_rescan_errors_total";
/// Components found in the compile cache.
pub const CACHE_HITS: &str = "agentd_plugin_compile_cache_hits_total";
/// Components that had to be compiled (absent, stale or unusable entry).
pub const CACHE_MISSES: &str = "agentd_plugin_compile_cache_misses_total";

/// Buckets of [`TOOL_CALL_DURATION`]: from an in-process echo (well under
/// a millisecond) to a long sandbox command.
pub const TOOL_CALL_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// The `tool` label of a call to a name the run does not have.
pub const UNKNOWN_TOOL: &str = "unknown";

/// One run's tool-call handles, made at each tool's first call: later
/// calls look the name up and record, building no label.
#[derive(Default)]
pub struct ToolMetrics {
    tools: HashMap<String, (Histogram, Counter)>,
}

impl ToolMetrics {
    /// A call of `tool` (`None`: a name the run does not have) ended.
    pub fn record(&mut self, tool: Option<&str>, elapsed: Duration, ok: bool) {
        let tool = tool.unwrap_or(UNKNOWN_TOOL);
        let (duration, errors) = match self.tools.get(tool) {
            Some(handles) => handles,
            None => {
                let label = SharedString::from(Arc::<str>::from(tool));
                let handles = (
                    histogram!(TOOL_CALL_DURATION, "tool" => label.clone()),
                    counter!(TOOL_CALL_ERRORS, "tool" => label),
                );
                self.tools.entry(tool.to_string()).or_insert(handles)
            }
        };
        duration.record(elapsed.as_secs_f64());
        if !ok {
            errors.increment(1);
        }
    }
}

/// A plugin file's load ended.
pub(crate) fn plugin_loaded(ok: bool) {
    counter!(PLUGIN_LOADS, "result" => if ok { "ok" } else { "error" }).increment(1);
}

/// A rescan could not read the plugins folder.
pub(crate) fn rescan_failed() {
    counter!(PLUGIN_RESCAN_ERRORS).increment(1);
}

/// A compile-cache lookup ended.
pub(crate) fn cache_lookup(hit: bool) {
    counter!(if hit { CACHE_HITS } else { CACHE_MISSES }).increment(1);
}
