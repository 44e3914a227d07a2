//! Request and response bodies of `POST /chat/completions`. Response types
//! default every field they can: servers differ in what they omit and add.

use serde::{Deserialize, Serialize};

use crate::agent::message::Message;

#[derive(Serialize)]
pub(super) struct RequestBody<'a> {
    pub model: &'a str,
    pub messages: &'a [Message],
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolParam<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
}

#[derive(Serialize)]
pub(super) struct ToolParam<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub function: FunctionParam<'a>,
}

#[derive(Serialize)]
pub(super) struct FunctionParam<'a> {
    pub name: &'a str,
    pub description: &'a str,
    pub parameters: serde_json::Value,
}

#[derive(Deserialize)]
pub(super) struct ResponseBody {
    #[serde(default)]
    pub choices: Vec<Choice>,
    #[serde(default)]
    pub usage: Option<WireUsage>,
}

#[derive(Deserialize)]
pub(super) struct Choice {
    pub message: Message,
}

/// Counts may be missing or `null` (some local servers send either).
#[derive(Deserialize, Default)]
pub(super) struct WireUsage {
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    #[serde(default)]
    pub completion_tokens: Option<u64>,
}

#[derive(Deserialize)]
pub(super) struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Deserialize)]
pub(super) struct ErrorDetail {
    #[serde(default)]
    pub message: String,
}
