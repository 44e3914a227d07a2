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

use crate::llm::{LlmSettings, RetryPolicy};

/// Client settings for model `fake` at `base_url`: no key, no sampling
/// settings, a 10 s request timeout and the default retries. Tests and
/// benchmarks override what they are about (`..llm_settings(url)`).
pub fn llm_settings(base_url: String) -> LlmSettings {
    LlmSettings {
        model: "fake".into(),
        base_url,
        api_key: None,
        max_tokens: None,
        temperature: None,
        max_input_tokens: None,
        request_timeout: std::time::Duration::from_secs(10),
        retry: RetryPolicy::default(),
        ca_file: None,
    }
}
