//! Chat messages as the run loop, the LLM client and the run record see them.
//!
//! One representation serves all three so that what is stored is exactly what
//! is sent: the OpenAI wire shape is produced by `Serialize`, never by hand.

use std::fmt;
use std::ops::Deref;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MessageError {
    /// OpenManus silently drops messages with an unknown role; a dropped
    /// message changes what the model sees, so agentd refuses instead.
    #[error("unknown message role `{0}` (expected system, user, assistant or tool)")]
    UnknownRole(String),
    #[error("a `tool` message must carry `tool_call_id`")]
    ToolWithoutCallId,
    /// The contract (§3) and several servers require the tool's name.
    #[error("a `tool` message must carry the tool's `name`")]
    ToolWithoutName,
    /// OpenAI answers 400 to `{"role": "assistant", "content": null}`.
    #[error("an `assistant` message must carry content or tool calls (an empty string counts as content)")]
    AssistantWithoutContent,
    /// OpenAI answers 400 to a `user`, `system` or `tool` message whose
    /// content is `null`.
    #[error("a `{0}` message must carry content (an empty string counts)")]
    WithoutContent(Role),
    #[error("only `assistant` messages may carry tool calls, not `{0}`")]
    ToolCallsOnWrongRole(Role),
    /// There is no memory to add to (a plugin probed at load time).
    #[error("{0}")]
    Unavailable(&'static str),
}

impl FromStr for Role {
    type Err = MessageError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "system" => Ok(Role::System),
            "user" => Ok(Role::User),
            "assistant" => Ok(Role::Assistant),
            "tool" => Ok(Role::Tool),
            other => Err(MessageError::UnknownRole(other.to_string())),
        }
    }
}

/// A call the model asked for. `arguments` stays the model's raw string: it
/// may not be valid JSON, and the strategy must be able to say so.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub role: Role,
    pub content: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub tool_call_id: Option<String>,
    pub name: Option<String>,
}

impl Message {
    fn plain(role: Role, content: impl Into<String>) -> Self {
        Message {
            role,
            content: Some(content.into()),
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
        }
    }

    pub fn system(content: impl Into<String>) -> Self {
        Self::plain(Role::System, content)
    }

    pub fn user(content: impl Into<String>) -> Self {
        Self::plain(Role::User, content)
    }

    pub fn assistant(content: impl Into<String>) -> Self {
        Self::plain(Role::Assistant, content)
    }

    pub fn assistant_with_calls(content: Option<String>, tool_calls: Vec<ToolCall>) -> Self {
        Message {
            role: Role::Assistant,
            content,
            tool_calls,
            tool_call_id: None,
            name: None,
        }
    }

    pub fn tool(
        content: impl Into<String>,
        tool_call_id: impl Into<String>,
        name: impl Into<String>,
    ) -> Self {
        Message {
            role: Role::Tool,
            content: Some(content.into()),
            tool_calls: Vec::new(),
            tool_call_id: Some(tool_call_id.into()),
            name: Some(name.into()),
        }
    }

    /// The checks a real server would make on one message in isolation.
    pub fn validate(&self) -> Result<(), MessageError> {
        if self.role == Role::Tool && self.tool_call_id.as_deref().unwrap_or("").is_empty() {
            return Err(MessageError::ToolWithoutCallId);
        }
        if self.role == Role::Tool && self.name.as_deref().unwrap_or("").is_empty() {
            return Err(MessageError::ToolWithoutName);
        }
        if self.role == Role::Assistant && self.content.is_none() && self.tool_calls.is_empty() {
            return Err(MessageError::AssistantWithoutContent);
        }
        if self.role != Role::Assistant && self.content.is_none() {
            return Err(MessageError::WithoutContent(self.role));
        }
        if self.role != Role::Assistant && !self.tool_calls.is_empty() {
            return Err(MessageError::ToolCallsOnWrongRole(self.role));
        }
        Ok(())
    }

    pub fn content_str(&self) -> &str {
        self.content.as_deref().unwrap_or("")
    }

    /// A one-line description for error messages: the role and the start of
    /// the content, so a refused message can be recognised.
    pub fn describe(&self) -> String {
        const MAX: usize = 80;
        let content = match &self.content {
            None => "no content".to_string(),
            Some(c) => {
                let mut short: String = c.chars().take(MAX).collect();
                if c.chars().count() > MAX {
                    short.push('…');
                }
                format!("content {short:?}")
            }
        };
        let calls = if self.tool_calls.is_empty() {
            String::new()
        } else {
            format!(", {} tool call(s)", self.tool_calls.len())
        };
        format!("{} message with {content}{calls}", self.role)
    }
}

/// The OpenAI wire shape. Kept private so nothing else builds JSON by hand.
///
/// Reading is lenient where real servers and proxies differ: `null` stands
/// for "absent" in every optional or defaulted field (LiteLLM sends
/// `"tool_calls": null` on text answers), `content` may be an array of parts,
/// a refusal may come in its own field, and some servers still answer with
/// the legacy `function_call`. Each of these used to end a run `error` or
/// hide the answer, though the server had said something usable.
#[derive(Deserialize)]
struct WireMessage {
    /// Some servers omit the role of the message they answer with, or send
    /// `null`; only an assistant answers, so that is what it means.
    #[serde(default = "assistant_role", deserialize_with = "role_or_assistant")]
    role: String,
    #[serde(default, deserialize_with = "content_as_text")]
    content: Option<String>,
    /// OpenAI's refusal text, sent beside `content: null`. Read only: it is
    /// folded into `content` so the strategy observes it.
    #[serde(default, skip_serializing)]
    refusal: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    tool_calls: Vec<WireToolCall>,
    /// The pre-`tool_calls` form of one call. Read only, and only when
    /// `tool_calls` says nothing: agentd always sends `tool_calls`.
    #[serde(default, skip_serializing)]
    function_call: Option<WireFunction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
}

#[derive(Serialize, Deserialize)]
pub(crate) struct WireToolCall {
    /// Missing, `null` or empty ids are numbered `call_<i>` when read.
    #[serde(default, deserialize_with = "null_as_default")]
    pub id: String,
    #[serde(
        rename = "type",
        default = "function_type",
        deserialize_with = "type_or_function"
    )]
    pub kind: String,
    pub function: WireFunction,
}

fn assistant_role() -> String {
    "assistant".to_string()
}

fn function_type() -> String {
    "function".to_string()
}

/// `null` read as `T::default()`: serde's `default` covers only an absent
/// field, and servers send `null` for "nothing" as often as they omit it.
fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

fn role_or_assistant<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_else(assistant_role))
}

fn type_or_function<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_else(function_type))
}

/// `content` as a string, `null`, or an array of content parts (Mistral's
/// reasoning models, some proxies). Text and refusal parts are the answer and
/// are kept; any other part (an image, a reasoning block) is named on a line
/// of its own, so the transcript shows that something was there.
fn content_as_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    use serde::de::Error;
    match serde_json::Value::deserialize(d)? {
        serde_json::Value::Null => Ok(None),
        serde_json::Value::String(s) => Ok(Some(s)),
        serde_json::Value::Array(parts) => Ok(join_content_parts(&parts)),
        other => Err(D::Error::custom(format!(
            "`content` must be a string, null or an array of content parts, not {}",
            json_kind(&other)
        ))),
    }
}

/// Consecutive text parts are one piece of text split by the server, so they
/// are concatenated; a described part stands on its own line.
fn join_content_parts(parts: &[serde_json::Value]) -> Option<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut text: Option<String> = None;
    for part in parts {
        let kind = part.get("type").and_then(serde_json::Value::as_str);
        let piece = match (part, kind) {
            (serde_json::Value::String(s), _) => Some(s.as_str()),
            (_, Some("text" | "output_text")) => {
                part.get("text").and_then(serde_json::Value::as_str)
            }
            (_, Some("refusal")) => part.get("refusal").and_then(serde_json::Value::as_str),
            _ => None,
        };
        match piece {
            Some(s) => text.get_or_insert_with(String::new).push_str(s),
            None => {
                lines.extend(text.take());
                lines.push(match kind {
                    Some(k) => format!("[{k} part omitted]"),
                    None => format!("[content part omitted: {}]", json_kind(part)),
                });
            }
        }
    }
    lines.extend(text);
    (!lines.is_empty()).then(|| lines.join("\n"))
}

fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

#[derive(Serialize, Deserialize)]
pub(crate) struct WireFunction {
    pub name: String,
    /// Some servers (older Ollama builds) send an object instead of a string;
    /// accept both and keep a string, as the OpenAI format defines.
    #[serde(default, deserialize_with = "arguments_as_string")]
    pub arguments: String,
}

fn arguments_as_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let value = serde_json::Value::deserialize(d)?;
    Ok(match value {
        serde_json::Value::String(s) => s,
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    })
}

/// A message as it is written: [`WireMessage`]'s fields in its order, but
/// borrowed. Every request writes the whole transcript, so copying each of
/// its strings into a `WireMessage` first was a copy of the transcript per
/// request.
#[derive(Serialize)]
struct OutMessage<'a> {
    role: &'static str,
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "OutCalls::is_empty")]
    tool_calls: OutCalls<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
}

/// A message's calls, written as [`WireToolCall`]s without being copied
/// into them.
struct OutCalls<'a>(&'a [ToolCall]);

impl OutCalls<'_> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for OutCalls<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct OutCall<'a> {
            id: &'a str,
            #[serde(rename = "type")]
            kind: &'static str,
            function: OutFunction<'a>,
        }
        #[derive(Serialize)]
        struct OutFunction<'a> {
            name: &'a str,
            arguments: &'a str,
        }
        s.collect_seq(self.0.iter().map(|call| OutCall {
            id: &call.id,
            kind: "function",
            function: OutFunction {
                name: &call.name,
                arguments: &call.arguments,
            },
        }))
    }
}

impl Serialize for Message {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        OutMessage {
            role: self.role.as_str(),
            content: self.content.as_deref(),
            tool_calls: OutCalls(&self.tool_calls),
            tool_call_id: self.tool_call_id.as_deref(),
            name: self.name.as_deref(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let wire = WireMessage::deserialize(d)?;
        let role = wire
            .role
            .parse::<Role>()
            .map_err(serde::de::Error::custom)?;
        // A refusal is the model's answer: stored as its text, the strategy
        // observes it instead of an empty message repeated to `max_steps`.
        let refusal = wire.refusal.filter(|r| !r.is_empty());
        let content = match (wire.content, refusal) {
            (content, None) => content,
            (Some(c), Some(r)) if !c.is_empty() && c != r => Some(format!("{c}\n{r}")),
            (_, Some(r)) => Some(r),
        };
        let tool_calls = if wire.tool_calls.is_empty() {
            wire.function_call
                .into_iter()
                .map(|f| ToolCall {
                    id: "call_0".into(),
                    name: f.name,
                    arguments: f.arguments,
                })
                .collect()
        } else {
            wire.tool_calls
                .into_iter()
                .enumerate()
                .map(|(i, c)| ToolCall {
                    id: if c.id.is_empty() {
                        format!("call_{i}")
                    } else {
                        c.id
                    },
                    name: c.function.name,
                    arguments: c.function.arguments,
                })
                .collect()
        };
        Ok(Message {
            role,
            content,
            tool_calls,
            tool_call_id: wire.tool_call_id,
            name: wire.name,
        })
    }
}

/// A message as a run keeps it: with the JSON it is written as, encoded once
/// when it was added. Every request carries the run's whole memory, so
/// encoding each message at every request was most of writing a request.
/// The JSON is held only for the messages in the memory window (at most
/// `max_messages`), and `max_run_bytes` counts each message once.
///
/// The JSON is shared (`Arc`): a daemon's live transcript and the history's
/// write of the message hold this same allocation rather than a copy each
/// (`shared_json`), so a message's text is in memory twice (the message and
/// its JSON), not three times, for every message of every run in flight.
#[derive(Debug, Clone)]
pub struct Kept {
    message: Message,
    /// `None` only if encoding failed, which a message of strings cannot:
    /// it is then encoded (and fails) where it is written.
    json: Option<SharedJson>,
}

/// A message's JSON, encoded once and shared by everything that keeps it.
pub type SharedJson = Arc<serde_json::value::RawValue>;

/// `message` encoded into a [`SharedJson`]: the one encoding that memory,
/// a live transcript and the history all hold.
pub fn encode_shared(message: &Message) -> serde_json::Result<SharedJson> {
    serde_json::value::to_raw_value(message).map(SharedJson::from)
}

impl Kept {
    pub fn new(message: Message) -> Self {
        let json = encode_shared(&message).ok();
        Kept { message, json }
    }

    /// The message, without its JSON.
    pub fn into_message(self) -> Message {
        self.message
    }

    /// The message's JSON as it was encoded; `None` if that failed.
    pub fn json(&self) -> Option<&str> {
        self.json.as_deref().map(serde_json::value::RawValue::get)
    }

    /// The message's JSON, shared: the encoding kept, else encoded now (and
    /// failing as it did the first time). A daemon keeps a live run's
    /// transcript as this JSON and hands the same allocation to the
    /// history, instead of a clone of each message or a copy of its JSON.
    pub fn shared_json(&self) -> serde_json::Result<SharedJson> {
        match &self.json {
            Some(json) => Ok(json.clone()),
            None => encode_shared(&self.message),
        }
    }
}

impl Deref for Kept {
    type Target = Message;
    fn deref(&self) -> &Message {
        &self.message
    }
}

/// A message a request can carry: owned ([`Message`]), or kept by a run
/// ([`Kept`], shared as `Arc<Kept>`) and written as its JSON was encoded.
pub trait AsMessage: Sync {
    fn message(&self) -> &Message;
    /// Writes the message into a request.
    fn write<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error>;
    /// About how many bytes [`AsMessage::write`] writes, so that a request
    /// is encoded into a buffer of the right size at once instead of one
    /// that doubles (and copies everything written so far) as it grows.
    fn encoded_len_hint(&self) -> usize {
        let m = self.message();
        let calls: usize = m
            .tool_calls
            .iter()
            // The arguments are JSON text: each of their quotes and
            // backslashes is escaped once more inside the string.
            .map(|c| {
                let escaped = c
                    .arguments
                    .bytes()
                    .filter(|b| matches!(b, b'"' | b'\\'))
                    .count();
                c.id.len() + c.name.len() + c.arguments.len() + escaped + 64
            })
            .sum();
        let ids =
            m.tool_call_id.as_deref().map_or(0, str::len) + m.name.as_deref().map_or(0, str::len);
        m.content_str().len() + calls + ids + 64
    }
}

impl AsMessage for Message {
    fn message(&self) -> &Message {
        self
    }
    fn write<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.serialize(s)
    }
}

impl AsMessage for Arc<Kept> {
    fn message(&self) -> &Message {
        &self.message
    }
    fn write<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.json {
            Some(json) => json.serialize(s),
            None => self.message.serialize(s),
        }
    }
    fn encoded_len_hint(&self) -> usize {
        match &self.json {
            Some(json) => json.get().len(),
            None => self.message.encoded_len_hint(),
        }
    }
}

/// Checks what real OpenAI-compatible servers check across a conversation:
/// every `tool` message answers a call of the assistant message just before
/// its group, and every call of an assistant message is answered before the
/// next non-tool message. Used by the host before sending, so a strategy gets
/// a precise error instead of an opaque HTTP 400.
pub fn check_tool_pairing<M: AsMessage>(messages: &[M]) -> Result<(), String> {
    // One list for the whole request, refilled at each assistant message:
    // this runs on every request over the whole transcript, and a new list
    // per assistant message was an allocation per step of the run so far.
    let mut pending: Vec<&str> = Vec::new();
    let mut in_group = false;
    for (i, m) in messages.iter().map(AsMessage::message).enumerate() {
        match m.role {
            Role::Tool => {
                let id = m.tool_call_id.as_deref().unwrap_or("");
                if !in_group {
                    return Err(format!(
                        "message {i}: tool message `{id}` does not follow an assistant message with tool_calls"
                    ));
                }
                match pending.iter().position(|p| *p == id) {
                    Some(pos) => {
                        pending.remove(pos);
                    }
                    None => {
                        return Err(format!(
                            "message {i}: tool message answers `{id}`, which the preceding assistant message did not call"
                        ))
                    }
                }
            }
            _ => {
                if !pending.is_empty() {
                    return Err(format!(
                        "message {i}: tool calls {pending:?} of the preceding assistant message were not answered"
                    ));
                }
                in_group = m.role == Role::Assistant && !m.tool_calls.is_empty();
                if in_group {
                    pending.extend(m.tool_calls.iter().map(|c| c.id.as_str()));
                }
            }
        }
    }
    if pending.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "tool calls {pending:?} of the last assistant message were not answered"
        ))
    }
}

/// Everything a real server checks on a whole request: at least one
/// message, at least one `user` message (Qwen-family chat templates refuse a
/// conversation without one: "No user query found in messages"), every
/// message valid, and tool calls paired with their answers.
pub fn check_request<M: AsMessage>(messages: &[M]) -> Result<(), String> {
    if messages.is_empty() {
        return Err("the request has no messages".into());
    }
    for (i, m) in messages.iter().map(AsMessage::message).enumerate() {
        m.validate()
            .map_err(|e| format!("message {i} ({}): {e}", m.describe()))?;
    }
    if !messages.iter().any(|m| m.message().role == Role::User) {
        return Err(
            "the request has no `user` message (start from the run's memory, which begins with the run's request)"
                .into(),
        );
    }
    check_tool_pairing(messages)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request's buffer is sized from these hints: a kept message's is
    /// its JSON's exact length, a plain message's at least its encoding's
    /// when its text needs no escaping (the calls' arguments, JSON, are
    /// counted with their escapes).
    #[test]
    fn encoded_length_hints_cover_the_encoding() {
        let call = Message::assistant_with_calls(
            Some("let me look".into()),
            vec![ToolCall {
                id: "call_1".into(),
                name: "bash".into(),
                arguments: r#"{"command":"ls -la /tmp","path":"a\\b","n":1}"#.into(),
            }],
        );
        let plain = [
            Message::system("you are a helpful agent"),
            Message::user("list the files"),
            call,
            Message::tool("a b c", "call_1", "bash"),
        ];
        for m in plain {
            let encoded = serde_json::to_string(&m).expect("encode").len();
            assert!(m.encoded_len_hint() >= encoded, "{m:?}: {encoded}");
            let kept = Arc::new(Kept::new(m));
            assert_eq!(kept.encoded_len_hint(), encoded);
        }
    }

    #[test]
    fn unknown_role_is_an_error_not_a_drop() {
        assert_eq!(
            "robot".parse::<Role>(),
            Err(MessageError::UnknownRole("robot".into()))
        );
        let err = serde_json::from_str::<Message>(r#"{"role":"robot","content":"x"}"#)
            .expect_err("unknown role must not parse");
        assert!(err.to_string().contains("unknown message role `robot`"));
    }

    #[test]
    fn wire_shape_is_openai() {
        let m = Message::assistant_with_calls(
            None,
            vec![ToolCall {
                id: "c1".into(),
                name: "bash".into(),
                arguments: "{\"command\":\"ls\"}".into(),
            }],
        );
        let v = serde_json::to_value(&m).expect("serialize");
        assert_eq!(v["tool_calls"][0]["type"], "function");
        assert_eq!(
            v["tool_calls"][0]["function"]["arguments"],
            "{\"command\":\"ls\"}"
        );
        let t = serde_json::to_value(Message::tool("out", "c1", "bash")).expect("serialize");
        assert_eq!(t["tool_call_id"], "c1");
        assert_eq!(t["name"], "bash");
    }

    /// The exact text written, which requests carry and the history keeps:
    /// OpenAI's field order, `content: null` kept (some servers want the
    /// key), empty and absent fields left out; and it reads back the same.
    #[test]
    fn the_written_text_is_exact_and_reads_back() {
        let call = Message::assistant_with_calls(
            None,
            vec![ToolCall {
                id: "c1".into(),
                name: "bash".into(),
                arguments: "{\"command\":\"ls\"}".into(),
            }],
        );
        let cases = [
            (
                call,
                r#"{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}}]}"#,
            ),
            (
                Message::tool("out", "c1", "bash"),
                r#"{"role":"tool","content":"out","tool_call_id":"c1","name":"bash"}"#,
            ),
            (Message::user("hi"), r#"{"role":"user","content":"hi"}"#),
        ];
        for (message, text) in cases {
            assert_eq!(serde_json::to_string(&message).expect("write"), text);
            let back: Message = serde_json::from_str(text).expect("read");
            assert_eq!(back, message);
        }
    }

    #[test]
    fn object_arguments_become_a_string() {
        let m: Message = serde_json::from_str(
            r#"{"role":"assistant","content":null,"tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]}"#,
        )
        .expect("parse");
        assert_eq!(m.tool_calls[0].arguments, r#"{"a":1}"#);
        assert_eq!(m.tool_calls[0].id, "call_0");
    }

    #[test]
    fn a_missing_role_is_an_assistant_answer() {
        let m: Message = serde_json::from_str(r#"{"content":"hi"}"#).expect("parse");
        assert_eq!(m.role, Role::Assistant);
    }

    #[test]
    fn null_reads_as_absent_in_every_optional_field() {
        // LiteLLM's text-only answer; `role: null` as some proxies send it.
        let m: Message = serde_json::from_str(
            r#"{"role":null,"content":"Hello","tool_calls":null,"function_call":null,
                "refusal":null,"tool_call_id":null,"name":null,"audio":null}"#,
        )
        .expect("nulls are absent fields");
        assert_eq!(m, Message::assistant("Hello"));
        let m: Message = serde_json::from_str(
            r#"{"role":"assistant","content":null,"tool_calls":[
                {"id":null,"type":null,"function":{"name":"f","arguments":null}},
                {"id":"","function":{"name":"g","arguments":"{}"}}]}"#,
        )
        .expect("null id and type");
        assert_eq!(m.content, None);
        assert_eq!(m.tool_calls[0].id, "call_0");
        assert_eq!(m.tool_calls[0].arguments, "");
        assert_eq!(m.tool_calls[1].id, "call_1");
        assert_eq!(m.tool_calls[1].name, "g");
    }

    #[test]
    fn content_parts_are_joined_and_other_parts_named() {
        let m: Message = serde_json::from_str(
            r#"{"role":"assistant","content":[
                {"type":"thinking","thinking":[{"type":"text","text":"hmm"}]},
                {"type":"text","text":"The answer "},{"type":"text","text":"is 4."},
                {"type":"image_url","image_url":{"url":"data:..."}},
                {"type":"refusal","refusal":"No more."},
                {"no_type":true}]}"#,
        )
        .expect("content parts");
        assert_eq!(
            m.content_str(),
            "[thinking part omitted]\nThe answer is 4.\n[image_url part omitted]\nNo more.\n[content part omitted: an object]"
        );
        let m: Message =
            serde_json::from_str(r#"{"role":"assistant","content":[]}"#).expect("no parts");
        assert_eq!(m.content, None);
        let err = serde_json::from_str::<Message>(r#"{"role":"assistant","content":{"x":1}}"#)
            .expect_err("an object is not content");
        assert!(
            err.to_string().contains(
                "`content` must be a string, null or an array of content parts, not an object"
            ),
            "{err}"
        );
    }

    #[test]
    fn a_refusal_is_the_assistant_text() {
        let m: Message = serde_json::from_str(
            r#"{"role":"assistant","content":null,"refusal":"I can't help with that."}"#,
        )
        .expect("refusal");
        assert_eq!(m.content_str(), "I can't help with that.");
        let m: Message = serde_json::from_str(
            r#"{"role":"assistant","content":"Partly.","refusal":"Not the rest."}"#,
        )
        .expect("both");
        assert_eq!(m.content_str(), "Partly.\nNot the rest.");
        // What agentd sends never carries the read-only fields.
        let v = serde_json::to_value(&m).expect("serialize");
        assert!(
            v.get("refusal").is_none() && v.get("function_call").is_none(),
            "{v}"
        );
    }

    #[test]
    fn a_legacy_function_call_is_one_tool_call() {
        let m: Message = serde_json::from_str(
            r#"{"role":"assistant","content":null,"tool_calls":null,
                "function_call":{"name":"echo","arguments":"{\"text\":\"hi\"}"}}"#,
        )
        .expect("function_call");
        assert_eq!(
            m.tool_calls,
            vec![ToolCall {
                id: "call_0".into(),
                name: "echo".into(),
                arguments: r#"{"text":"hi"}"#.into(),
            }]
        );
        let m: Message = serde_json::from_str(
            r#"{"role":"assistant","tool_calls":[],"function_call":{"name":"f","arguments":{"a":1}}}"#,
        )
        .expect("empty tool_calls");
        assert_eq!(m.tool_calls[0].arguments, r#"{"a":1}"#);
        // `tool_calls` wins when a server sends both.
        let m: Message = serde_json::from_str(
            r#"{"role":"assistant","tool_calls":[{"id":"c9","function":{"name":"new","arguments":"{}"}}],
                "function_call":{"name":"old","arguments":"{}"}}"#,
        )
        .expect("both forms");
        assert_eq!(m.tool_calls.len(), 1);
        assert_eq!(m.tool_calls[0].name, "new");
    }

    #[test]
    fn tool_message_needs_call_id() {
        let mut t = Message::tool("x", "id", "n");
        t.tool_call_id = None;
        assert_eq!(t.validate(), Err(MessageError::ToolWithoutCallId));
    }

    #[test]
    fn what_a_real_server_refuses_is_refused() {
        let mut t = Message::tool("x", "id", "n");
        t.name = None;
        assert_eq!(t.validate(), Err(MessageError::ToolWithoutName));
        let empty = Message::assistant_with_calls(None, Vec::new());
        assert_eq!(empty.validate(), Err(MessageError::AssistantWithoutContent));
        assert_eq!(
            Message::assistant("").validate(),
            Ok(()),
            "empty text is content"
        );
        let mut user = Message::user("u");
        user.content = None;
        assert_eq!(
            user.validate(),
            Err(MessageError::WithoutContent(Role::User))
        );

        assert!(check_request::<Message>(&[])
            .unwrap_err()
            .contains("no messages"));
        let no_user = [Message::system("s"), Message::assistant("a")];
        assert!(check_request(&no_user)
            .unwrap_err()
            .contains("no `user` message"));
        let bad = [Message::user("u"), empty];
        let err = check_request(&bad).unwrap_err();
        assert!(
            err.contains("message 1 (assistant message with no content)"),
            "{err}"
        );
        assert!(check_request(&[Message::system("s"), Message::user("u")]).is_ok());
    }

    #[test]
    fn pairing_rules() {
        let call = |id: &str| ToolCall {
            id: id.into(),
            name: "t".into(),
            arguments: "{}".into(),
        };
        let a = Message::assistant_with_calls(None, vec![call("1"), call("2")]);
        let ok = vec![
            Message::user("hi"),
            a.clone(),
            Message::tool("r", "1", "t"),
            Message::tool("r", "2", "t"),
            Message::user("next"),
        ];
        assert!(check_tool_pairing(&ok).is_ok());
        assert!(check_tool_pairing(&ok[2..]).is_err(), "orphan tool at head");
        assert!(check_tool_pairing(&ok[..3]).is_err(), "unanswered call");
        let mut missing = ok.clone();
        missing.remove(3);
        assert!(check_tool_pairing(&missing).is_err());
    }

    #[test]
    fn a_kept_messages_json_is_its_encoding() {
        let call = ToolCall {
            id: "call_1".into(),
            name: "echo".into(),
            arguments: r#"{"text":"hi \"there\""}"#.into(),
        };
        for m in [
            Message::user("a \u{1F600} and a \n"),
            Message::assistant_with_calls(Some("thinking".into()), vec![call]),
            Message::tool("out", "call_1", "echo"),
        ] {
            let kept = Kept::new(m.clone());
            assert_eq!(
                kept.json(),
                Some(serde_json::to_string(&m).unwrap().as_str())
            );
        }
    }
}
