//! `GET {base_url}/models`: which models an endpoint serves.
//!
//! `agentd doctor` asks it to tell "the server is down" from "the key is
//! refused" from "the model is misspelt" before a run finds out at its
//! first step. Listing is optional for OpenAI-compatible servers (some
//! proxies and small servers have no such route), so only an answer that
//! is a list says anything about the model; anything else that is an HTTP
//! answer at all still proves the endpoint is reachable.

use std::time::Duration;

use serde::Deserialize;

use super::client::{error_message, read_capped, transport_error};
use super::{LlmClient, LlmError};

/// What an endpoint answered when asked for its models.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelList {
    /// The ids it lists, as it sent them (never empty).
    Listed(Vec<String>),
    /// It answered, but lists nothing to check against; the reason, for
    /// people (no such route, an empty list, a body that is not a list).
    Unlisted(String),
}

/// OpenAI's shape (`{"object":"list","data":[{"id":...}]}`), which Ollama,
/// vLLM and llama.cpp answer too; other fields are ignored.
#[derive(Deserialize)]
struct ListBody {
    data: Vec<Entry>,
}

#[derive(Deserialize)]
struct Entry {
    id: String,
}

impl LlmClient {
    /// Asks the endpoint for its models, with the configured key, giving up
    /// after `timeout` (a diagnosis must not wait as long as a chat
    /// request may). A refused key is `Err(LlmError::Status)` with 401 or
    /// 403; a missing route (404, 405) is `Ok(Unlisted)`.
    pub async fn list_models(&self, timeout: Duration) -> Result<ModelList, LlmError> {
        let url = format!("{}/models", self.settings().base_url.trim_end_matches('/'));
        let resp = self
            .get(&url)
            .timeout(timeout)
            .send()
            .await
            .map_err(|e| transport_error(e, &url, timeout))?;
        let status = resp.status();
        let bytes = read_capped(resp)
            .await
            .map_err(|e| e.unwrap_or_else(|e| transport_error(e, &url, timeout)))?;
        if matches!(status.as_u16(), 404 | 405) {
            return Ok(ModelList::Unlisted(format!(
                "it has no /models route (HTTP {})",
                status.as_u16()
            )));
        }
        if !status.is_success() {
            return Err(LlmError::Status {
                status: status.as_u16(),
                message: error_message(&bytes),
                retry_after: None,
            });
        }
        Ok(parse_list(&bytes))
    }
}

fn parse_list(bytes: &[u8]) -> ModelList {
    match serde_json::from_slice::<ListBody>(bytes) {
        Ok(list) if !list.data.is_empty() => {
            ModelList::Listed(list.data.into_iter().map(|e| e.id).collect())
        }
        // An empty list is what some proxies answer while serving models
        // they do not enumerate: it cannot show the model is missing.
        Ok(_) => ModelList::Unlisted("its model list is empty".into()),
        Err(_) => ModelList::Unlisted("its /models answer is not a model list".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_lists_are_read_and_anything_else_lists_nothing() {
        assert_eq!(
            parse_list(br#"{"object":"list","data":[{"id":"a","object":"model","owned_by":"x"},{"id":"b"}]}"#),
            ModelList::Listed(vec!["a".into(), "b".into()])
        );
        assert!(matches!(
            parse_list(br#"{"object":"list","data":[]}"#),
            ModelList::Unlisted(_)
        ));
        assert!(matches!(parse_list(b"<html>"), ModelList::Unlisted(_)));
        assert!(matches!(
            parse_list(br#"{"models":["a"]}"#),
            ModelList::Unlisted(_)
        ));
    }
}
