//! `llm`: the agent's endpoint answers, accepts the key, serves the model.

use super::config::config_fix;
use super::{Check, ANSWER_WITHIN};
use crate::config::Config;
use crate::llm::{LlmClient, LlmError, ModelList};

pub(super) async fn check_llm(config: &Config, agent: &str) -> Check {
    let settings = config.llm.for_agent(agent);
    let base_url = settings.base_url.clone();
    let model = settings.model.clone();
    if base_url.is_empty() {
        // The same lines a run that needs the endpoint ends with.
        let examples: String = crate::llm::setup::ENDPOINT_EXAMPLES
            .lines()
            .map(|l| format!("\n  {l}"))
            .collect();
        return Check::fail(
            "llm",
            "no LLM endpoint is configured ([llm] base_url, $OPENAI_BASE_URL or an API key)",
            format!(
                "add one of these to the configuration, or set $OPENAI_BASE_URL (and $OPENAI_API_KEY) where agentd runs:{examples}"
            ),
        );
    }
    if let Err(e) = config.llm.check_api_key(agent) {
        return Check::fail("llm", e.to_string(), config_fix(&e));
    }
    let has_key = settings.api_key.as_deref().is_some_and(|k| !k.is_empty());
    let client = match LlmClient::new(settings) {
        Ok(c) => c,
        Err(e) => return Check::fail("llm", e.to_string(), "correct [llm] base_url or ca_file"),
    };
    let reachable_fix = "start the server, or correct [llm] base_url";
    match client.list_models(ANSWER_WITHIN).await {
        Ok(ModelList::Listed(ids)) if ids.contains(&model) => {
            Check::pass("llm", format!("{base_url} serves {model}"))
        }
        Ok(ModelList::Listed(ids)) => {
            const SHOWN: usize = 10;
            let mut has = ids.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(", ");
            if ids.len() > SHOWN {
                has.push_str(&format!(", and {} more", ids.len() - SHOWN));
            }
            Check::fail(
                "llm",
                format!("{base_url}: model {model} is not served (it has: {has})"),
                "set [llm] model to one the server serves",
            )
        }
        Ok(ModelList::Unlisted(why)) => Check::pass(
            "llm",
            format!("{base_url} is reachable; it does not list models ({why}), so model {model} is not checked"),
        ),
        Err(LlmError::Connect { message, .. }) => Check::fail(
            "llm",
            // The innermost cause ("Connection refused") is the news; the
            // layers above it only repeat the URL.
            format!(
                "{base_url} is unreachable: {}",
                message.rsplit(": ").next().unwrap_or(&message)
            ),
            reachable_fix,
        ),
        Err(LlmError::Timeout(t)) => Check::fail(
            "llm",
            format!("{base_url} did not answer within {} s", t.as_secs()),
            reachable_fix,
        ),
        Err(LlmError::Status {
            status: status @ (401 | 403),
            message,
            ..
        }) => Check::fail(
            "llm",
            if has_key {
                format!("{base_url} refused the API key (HTTP {status}: {message})")
            } else {
                format!("{base_url} wants an API key, and none is set (HTTP {status}: {message})")
            },
            "set the key: [llm] api_key, api_key_env or api_key_file, or $OPENAI_API_KEY",
        ),
        Err(e @ LlmError::Certificate { .. }) => Check::fail(
            "llm",
            e.to_string(),
            "add the endpoint's CA to the system trust store, or set [llm] ca_file",
        ),
        Err(e) => Check::fail(
            "llm",
            format!("{base_url}: {e}"),
            "check the server, or correct [llm] base_url",
        ),
    }
}
