//! What the loop records through the `metrics` facade (the daemon installs
//! the exporter and registers these buckets; without one every record is
//! a no-op). One [`RunMetrics`] per run holds its handles, labelled once
//! with the agent and model when the run is made, so a step records into
//! them without building a label.

use std::sync::Arc;
use std::time::Duration;

use ::metrics::{histogram, Histogram, SharedString};

use crate::chat::Usage;
use crate::llm::metrics::{OPERATION_CHAT, TOKEN_USAGE};

/// Wall-clock seconds of one step (`step()` of the strategy, host waits
/// included), by `agent`.
pub const STEP_DURATION: &str = "agentd_step_duration_seconds";
/// Seconds of one step spent in plugin code (the strategy and the tools it
/// invoked, not the LLM or sandbox waits: the step clock's count), by
/// `agent`.
pub const STEP_PLUGIN_TIME: &str = "agentd_step_plugin_seconds";

/// Buckets of [`STEP_DURATION`]: a step is one LLM answer plus its tools,
/// from tens of milliseconds to minutes.
pub const STEP_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];
/// Buckets of [`STEP_PLUGIN_TIME`]: plugin code takes microseconds to
/// milliseconds per step; the step deadline (60 s by default) bounds it.
pub const PLUGIN_TIME_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
    30.0,
];

/// One run's handles.
pub struct RunMetrics {
    step: Histogram,
    plugin: Histogram,
    input_tokens: Histogram,
    output_tokens: Histogram,
}

impl RunMetrics {
    /// `model` is the run's `[llm] model` (its agent's override included).
    pub fn new(agent: &str, model: &str) -> Self {
        let agent = SharedString::from(Arc::<str>::from(agent));
        let model = SharedString::from(Arc::<str>::from(model));
        let tokens = |kind: &'static str| {
            histogram!(
                TOKEN_USAGE,
                "gen_ai_token_type" => kind,
                "gen_ai_operation_name" => OPERATION_CHAT,
                "gen_ai_request_model" => model.clone(),
                "agent" => agent.clone()
            )
        };
        RunMetrics {
            input_tokens: tokens("input"),
            output_tokens: tokens("output"),
            step: histogram!(STEP_DURATION, "agent" => agent.clone()),
            plugin: histogram!(STEP_PLUGIN_TIME, "agent" => agent),
        }
    }

    /// A step ended: its wall clock and its plugin time.
    pub fn step(&self, wall: Duration, plugin: Duration) {
        self.step.record(wall.as_secs_f64());
        self.plugin.record(plugin.as_secs_f64());
    }

    /// One chat answer's usage. A count of 0 is a server that reported
    /// none (no answer has no input), so it is left out rather than filling
    /// the lowest bucket.
    pub fn tokens(&self, usage: Usage) {
        if usage.prompt_tokens > 0 {
            self.input_tokens.record(usage.prompt_tokens as f64);
        }
        if usage.completion_tokens > 0 {
            self.output_tokens.record(usage.completion_tokens as f64);
        }
    }
}
