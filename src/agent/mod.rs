//! The agent core: the run loop, its memory, stuck detection and outcomes.
//!
//! What it knows of models and tools: it holds the run's LLM client and
//! sends the strategy's chat requests through it, under the run's token
//! budget; it takes the strategy and tool plugins an agent names from the
//! run's plugin snapshot and hands them, with the run's sandbox, to the
//! plugin host's strategy session; and it reports each tool call and
//! result as events. What it does not know: how a step decides (`step()`
//! belongs to the strategy plugin), what a tool does (its plugin's code,
//! run by the host), or wasmtime.

pub mod budget;
pub mod context;
pub mod counted_sandbox;
pub mod events;
pub mod files;
pub mod human;
pub mod limits;
pub mod memory;
pub mod metrics;
pub mod outcome;
pub mod resume;
pub mod run;
pub mod settings;
pub mod stuck;
pub mod tool_provider;

pub use budget::TokenBudget;
pub use events::{EventSink, MessageSink, RunEvent};
pub use files::{InputFile, KeptFile, KeptFiles, MAX_KEEP_LIMIT};
pub use human::{Approve, Decision, HumanChannel, ReplyError, WaitSlot, Waiting};
pub use outcome::{AgentState, Outcome, RunRecord};
pub use resume::{Checkpoint, CheckpointHook, Prior};
pub use run::{Agent, AgentError, RunOptions, Runtime, RUN_SPAN};
pub use settings::{AgentConfig, RunLimits};
pub use tool_provider::{NoToolProvider, ToolProvider, MCP_PREFIX};
