//! What the bundled strategies (`toolcall`, `react`, `planning`) agree on
//! when they tell the model about the host's answers, kept here so that a
//! strategy written on this SDK treats them the same way: special tools,
//! `max_observe`, the per-step call limit, a spent token budget and an
//! answer cut at `max_tokens`. The words are OpenManus's where it has
//! them, because prompts written for OpenManus agents rely on them.

use crate::host::Host;
use crate::{AgentConfig, Error, ErrorCode, Message};

/// The host's setting that its refusal of calls past a step's limit names.
pub const CALL_LIMIT_KEY: &str = "max_tool_calls_per_step";

/// Appended to the result of a step whose answer hit `max_tokens`.
pub const CUT_NOTE: &str = "(The model's answer was cut: it hit the max_tokens limit.)";

/// Whether `name` is one of the agent's special tools, whose successful
/// call finishes the run. Matched case-insensitively, as OpenManus does.
pub fn is_special(config: &AgentConfig, name: &str) -> bool {
    let name = name.to_lowercase();
    config
        .special_tools
        .iter()
        .any(|special| special.to_lowercase() == name)
}

/// Whether the host refused a tool call because the step made more than
/// `max_tool_calls_per_step` of them: the model should ask for fewer.
pub fn is_call_limit(error: &Error) -> bool {
    error.code == ErrorCode::InvalidInput && error.message.contains(CALL_LIMIT_KEY)
}

/// Cuts an observation to the agent's `max_observe` characters. As in
/// OpenManus (`if self.max_observe:`), unset or 0 means no limit.
pub fn cut_observation(config: &AgentConfig, text: &mut String) {
    if let Some(limit) = config.max_observe.filter(|&limit| limit > 0) {
        truncate_chars(text, limit as usize);
    }
}

/// Cuts to `max` characters, as Python's `text[:max]` does; cutting bytes
/// could split a UTF-8 sequence.
pub fn truncate_chars(text: &mut String, max: usize) {
    if let Some((index, _)) = text.char_indices().nth(max) {
        text.truncate(index);
    }
}

/// The run's input-token budget is spent (`ChatError::TokenLimit`):
/// OpenManus's message goes into memory, the run finishes, and the message
/// is returned for the step's result.
pub fn token_limit<H: Host>(host: &mut H, message: &str) -> Result<String, Error> {
    host.error(&format!("🚨 Token limit error: {message}"));
    let text = format!("Maximum token limit reached, cannot continue execution: {message}");
    host.add_message(Message::assistant(text.clone()))?;
    host.finish();
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolChoice;

    fn config(max_observe: Option<u32>) -> AgentConfig {
        AgentConfig {
            name: "a".into(),
            system_prompt: None,
            next_step_prompt: None,
            current_step: 1,
            max_steps: 5,
            max_observe,
            tool_choice: ToolChoice::Auto,
            special_tools: vec!["Terminate".into()],
        }
    }

    #[test]
    fn special_tools_match_in_any_case() {
        assert!(is_special(&config(None), "terminate"));
        assert!(is_special(&config(None), "TERMINATE"));
        assert!(!is_special(&config(None), "bash"));
    }

    #[test]
    fn observations_are_cut_in_characters_and_zero_is_no_limit() {
        let mut text = "héllo".to_string();
        cut_observation(&config(Some(2)), &mut text);
        assert_eq!(text, "hé");
        let mut text = "héllo".to_string();
        cut_observation(&config(Some(0)), &mut text);
        assert_eq!(text, "héllo");
        cut_observation(&config(None), &mut text);
        assert_eq!(text, "héllo");
    }

    #[test]
    fn truncation_counts_characters_not_bytes() {
        let mut text = "héllo wörld".to_string();
        truncate_chars(&mut text, 2);
        assert_eq!(text, "hé");
        let mut text = "⚠️ x".to_string();
        truncate_chars(&mut text, 1);
        assert_eq!(text, "⚠");
    }

    #[test]
    fn truncation_leaves_short_text_alone() {
        let mut text = "abc".to_string();
        truncate_chars(&mut text, 3);
        assert_eq!(text, "abc");
        truncate_chars(&mut text, 10);
        assert_eq!(text, "abc");
    }

    #[test]
    fn only_an_invalid_input_naming_the_key_is_the_call_limit() {
        let refusal = format!("not run: call 33 of step 1, and {CALL_LIMIT_KEY} is 32");
        assert!(is_call_limit(&Error::invalid_input(refusal.clone())));
        assert!(!is_call_limit(&Error::failed(refusal)));
        assert!(!is_call_limit(&Error::invalid_input("bad arguments")));
    }
}
