//! Helpers for testing agents and plugins without a real model: a scripted
//! OpenAI-compatible server on loopback. Used by agentd's own tests and
//! benchmarks, and usable by plugin authors for theirs.

mod fake_llm;

pub use fake_llm::{FakeLlm, Reply};
