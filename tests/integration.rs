//! agentd's integration tests, one module per file of `tests/`, built as one
//! binary: every test binary links the whole daemon (wasmtime, cranelift,
//! rmcp, bollard, OpenTelemetry), ~75 MB apiece, and one per file filled
//! CI's disk and spent minutes linking. Run one file's tests with
//! `cargo test --test integration daemon_api::`.
//!
//! Tests still run two at a time (the harness's default on this machine's
//! two cores), now across files as well as within one: a test that needs an
//! engine to itself starts a private one (`fault_sandbox.rs`,
//! `sandbox_engines.rs`), and every check of what a run left behind is by
//! its own run's labels.

mod common;

mod budgets;
mod cli;
mod cli_client;
mod contract;
mod daemon_api;
mod daemon_cli;
mod daemon_lifecycle;
mod daemon_reload;
mod daemon_sandbox;
mod doctor;
mod fault_api;
mod fault_llm;
mod fault_model;
mod fault_persistence;
mod fault_plugin;
mod fault_plugin_data;
mod fault_sandbox;
mod first_run;
mod human_loop;
mod install;
mod layering;
mod llm_client;
mod mcp_client;
mod mcp_server;
mod metrics;
mod planning;
mod plugin_grants;
mod plugin_kit;
mod plugin_reload;
mod plugins;
mod python_plugins;
mod react;
mod real_model;
mod run_files;
mod run_limits;
mod run_loop;
mod run_plan;
mod run_resume;
mod sandbox_docker;
mod sandbox_engines;
mod sandbox_pool;
mod sandbox_runs;
mod traces;
