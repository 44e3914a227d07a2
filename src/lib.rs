//! agentd: a daemon that hosts LLM agents whose `step()` strategies and
//! tools are WebAssembly components. See `ARCHITECTURE.md` for the map.

#[warn(missing_docs)]
pub mod agent;
pub mod api;
pub mod chat;
pub mod cli;
pub mod config;
pub mod daemon;
pub mod doctor;
pub mod llm;
pub mod mcp;
pub mod otel;
#[warn(missing_docs)]
pub mod plan;
#[warn(missing_docs)]
pub mod plugin;
pub mod sandbox;
pub mod size;
pub mod sync;
pub mod time;

/// Test helpers, kept out of the shipped library: see the `testkit` feature
/// in `Cargo.toml`.
#[cfg(any(test, feature = "testkit"))]
pub mod testkit;
