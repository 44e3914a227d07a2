//! What a run reports as it happens. `run --local` prints these; the daemon
//! streams them to followers (`GET /v1/runs/{id}/events`) and stores them in
//! the run history. Their JSON is the `/v1` event format, pinned by the
//! snapshot tests in `api.rs`.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::outcome::Outcome;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RunEvent {
    RunStarted {
        run_id: String,
        agent: String,
        request: String,
        max_steps: u32,
        strategy: String,
        strategy_version: String,
    },
    StepStarted {
        step: u32,
        max_steps: u32,
    },
    AssistantMessage {
        step: u32,
        content: Option<String>,
        tool_calls: Vec<String>,
    },
    ToolCall {
        step: u32,
        id: String,
        name: String,
        arguments: String,
    },
    ToolResult {
        step: u32,
        id: String,
        name: String,
        ok: bool,
        output: String,
    },
    StuckDetected {
        step: u32,
    },
    StepFinished {
        step: u32,
        result: String,
    },
    RunEnded {
        outcome: Outcome,
        steps: u32,
        error: Option<String>,
    },
}

pub type EventSink = Arc<dyn Fn(&RunEvent) + Send + Sync>;

/// Receives every message as it enters the run's memory, before the sliding
/// window can drop it: the daemon stores the whole transcript this way, so a
/// run that dies mid-way still has every message it produced.
pub type MessageSink = Arc<dyn Fn(&crate::chat::Message) + Send + Sync>;

pub fn discard_events() -> EventSink {
    Arc::new(|_| {})
}
