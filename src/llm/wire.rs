//! Request and response bodies of `POST /chat/completions`. Response types
//! default every field they can: servers differ in what they omit and add.

use serde::{Deserialize, Serialize};

use super::FinishReason;
use crate::chat::{AsMessage, Message};

/// The request's messages, owned or shared, written one by one as they are.
pub(super) struct Transcript<'a, M>(pub &'a [M]);

impl<M: AsMessage> Serialize for Transcript<'_, M> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct One<'a, M>(&'a M);
        impl<M: AsMessage> Serialize for One<'_, M> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                self.0.write(s)
            }
        }
        s.collect_seq(self.0.iter().map(One))
    }
}

#[derive(Serialize)]
#[serde(bound = "M: AsMessage")]
pub(super) struct RequestBody<'a, M: AsMessage> {
    pub model: &'a str,
    pub messages: Transcript<'a, M>,
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
    /// The plugin's schema text as it is: checked to be JSON, never parsed
    /// into a tree and written out again on every request.
    pub parameters: &'a serde_json::value::RawValue,
}

/// `null` counts as absent everywhere here (proxies send both), so only a
/// body that says nothing usable is refused.
#[derive(Deserialize)]
pub(super) struct ResponseBody {
    #[serde(default, deserialize_with = "null_as_default")]
    pub choices: Vec<Choice>,
    #[serde(default)]
    pub usage: Option<WireUsage>,
    /// The model that answered (`gen_ai.response.model` on the trace).
    #[serde(default)]
    pub model: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct Choice {
    #[serde(default)]
    pub message: Option<Message>,
    #[serde(default)]
    pub finish_reason: Option<FinishReason>,
}

/// Counts may be missing or `null` (some local servers send either).
#[derive(Deserialize, Default)]
pub(super) struct WireUsage {
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    #[serde(default)]
    pub completion_tokens: Option<u64>,
}

fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::Role;

    #[test]
    fn nulls_in_the_envelope_are_absent() {
        let body: ResponseBody = serde_json::from_str(
            r#"{"id":null,"choices":[{"index":0,"message":{"role":"assistant","content":null,
                "tool_calls":null},"finish_reason":null,"logprobs":null}],"usage":null}"#,
        )
        .expect("nulls");
        let choice = &body.choices[0];
        assert_eq!(choice.finish_reason, None);
        assert_eq!(
            choice.message.as_ref().map(|m| m.role),
            Some(Role::Assistant)
        );
        assert!(body.usage.is_none());
        let body: ResponseBody = serde_json::from_str(
            r#"{"choices":null,"usage":{"prompt_tokens":null,"completion_tokens":3}}"#,
        )
        .expect("null choices");
        assert!(body.choices.is_empty());
        let usage = body.usage.expect("usage");
        assert_eq!(
            (usage.prompt_tokens, usage.completion_tokens),
            (None, Some(3))
        );
    }

    #[test]
    fn finish_reasons_are_read() {
        let reason = |s: &str| {
            let body: ResponseBody = serde_json::from_str(&format!(
                r#"{{"choices":[{{"message":{{"content":"x"}},"finish_reason":{s}}}]}}"#
            ))
            .expect("finish_reason");
            body.choices
                .into_iter()
                .next()
                .and_then(|c| c.finish_reason)
        };
        assert_eq!(reason(r#""stop""#), Some(FinishReason::Stop));
        assert_eq!(reason(r#""length""#), Some(FinishReason::Length));
        assert_eq!(reason(r#""tool_calls""#), Some(FinishReason::ToolCalls));
        assert_eq!(reason(r#""function_call""#), Some(FinishReason::ToolCalls));
        assert_eq!(
            reason(r#""content_filter""#),
            Some(FinishReason::ContentFilter)
        );
        assert_eq!(reason(r#""eos""#), Some(FinishReason::Other("eos".into())));
        assert_eq!(reason("null"), None);
    }

    /// A request written from a run's kept messages (their JSON encoded
    /// once, when added) is the very request written from the messages.
    #[test]
    fn kept_messages_are_written_as_the_messages_themselves() {
        use crate::chat::{Kept, ToolCall};
        use std::sync::Arc;
        let messages = vec![
            Message::system("be brief"),
            Message::user("list the files \"here\"\n"),
            Message::assistant_with_calls(
                None,
                vec![ToolCall {
                    id: "c1".into(),
                    name: "bash".into(),
                    arguments: "{\"command\":\"ls\"}".into(),
                }],
            ),
            Message::tool("a.txt", "c1", "bash"),
        ];
        let kept: Vec<Arc<Kept>> = messages
            .iter()
            .cloned()
            .map(|m| Arc::new(Kept::new(m)))
            .collect();
        let owned = serde_json::to_string(&Transcript(&messages)).expect("owned");
        let shared = serde_json::to_string(&Transcript(&kept)).expect("kept");
        assert_eq!(owned, shared);
        let back: Vec<Message> = serde_json::from_str(&shared).expect("reads back");
        assert_eq!(back, messages);
    }
}
