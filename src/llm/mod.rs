//! A thin client for OpenAI-compatible chat completions (OpenAI, Ollama,
//! vLLM, llama.cpp): serde types that tolerate unknown fields, retries where
//! retrying is safe, and nothing else; and `GET /models` (`models`), which
//! `agentd doctor` asks.

mod answered;
mod client;
mod direct;
mod error;
pub mod metrics;
mod models;
mod price;
mod retry;
pub mod setup;
mod trace;
mod wire;

pub use answered::AnsweredEndpoints;
pub use client::{
    check_base_url, estimate_tokens, load_ca_file, ChatRequest, ChatResponse, FinishReason,
    LlmClient, LlmSettings,
};
pub use error::LlmError;
pub use models::ModelList;
pub use price::{check_price, Price};
pub use retry::RetryPolicy;
