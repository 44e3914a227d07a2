//! Helpers for testing agents and plugins without a real model: a scripted
//! OpenAI-compatible server on loopback. Used by agentd's own tests and
//! benchmarks, and usable by plugin authors for theirs with the `testkit`
//! feature; without it (the shipped binary) this module is not compiled.

mod fake_llm;
mod plugins;
pub mod stats;
pub mod uds_http;

pub use fake_llm::{FakeLlm, Reply};
pub use plugins::{build_plugins, build_python_plugins};
