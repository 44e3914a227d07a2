//! Stuck detection on the whole action.
//!
//! OpenManus compares message *content* only and treats empty content as "not
//! stuck", so a model that repeats the same tool call with no text is never
//! caught. Here an action is the content plus the tool calls (names and
//! arguments, ignoring the per-call ids, which are fresh every time).

use std::hash::{Hash, Hasher};

use super::memory::Memory;
use crate::chat::{Message, Role};

/// The warning put in front of the next step's prompt after a repeat
/// (OpenManus's wording).
pub const STUCK_PROMPT: &str = "Observed duplicate responses. Consider new strategies and avoid repeating ineffective paths already attempted.";

/// How many earlier copies of an action make a step stuck when the agent
/// sets no `duplicate_threshold`: the third identical action is flagged.
pub const DEFAULT_DUPLICATE_THRESHOLD: usize = 2;

/// The comparable part of an assistant message.
#[derive(PartialEq, Debug)]
struct Action<'a> {
    content: &'a str,
    calls: Vec<(&'a str, ArgKey)>,
}

/// Arguments compare as JSON values when they parse, so `{"a": 1}` and
/// `{"a":1}` are the same action; otherwise as raw text.
#[derive(PartialEq, Debug)]
enum ArgKey {
    Json(serde_json::Value),
    Raw(String),
}

impl<'a> Action<'a> {
    fn of(m: &'a Message) -> Self {
        Action {
            content: m.content_str().trim(),
            calls: m
                .tool_calls
                .iter()
                .map(|c| {
                    let key = serde_json::from_str(&c.arguments)
                        .map(ArgKey::Json)
                        .unwrap_or_else(|_| ArgKey::Raw(c.arguments.clone()));
                    (c.name.as_str(), key)
                })
                .collect(),
        }
    }

    fn is_empty(&self) -> bool {
        self.content.is_empty() && self.calls.is_empty()
    }
}

/// Whether the step that began at `step_mark` repeated an earlier action at
/// least `threshold` times. Only an assistant message added by this step
/// counts, so a step that said nothing cannot re-trigger on an old message.
///
/// Runs at every step over the whole window, so it compares the
/// fingerprints memory took when each message was added ([`fingerprint`]),
/// and parses arguments only when at least `threshold` earlier fingerprints
/// match the step's (to confirm them): parsing every earlier message's
/// arguments at every step made a run's detection quadratic (2.5 % of the
/// daemon's CPU under `cargo bench --bench daemon`).
pub fn is_stuck(memory: &Memory, step_mark: u64, threshold: usize) -> bool {
    if threshold == 0 {
        return false;
    }
    let Some((serial, last, key)) = memory
        .entries_since(step_mark)
        .filter(|(_, m, _)| m.role == Role::Assistant)
        .last()
    else {
        return false;
    };
    // No fingerprint: the action is empty (no text, no calls).
    let Some(key) = key else {
        return false;
    };
    let matches = || {
        memory
            .entries_since(0)
            .filter(move |(s, _, k)| *s != serial && *k == Some(key))
    };
    // Fewer matching fingerprints than the threshold: not stuck, and
    // nothing to parse.
    if matches().count() < threshold {
        return false;
    }
    let action = Action::of(last);
    matches()
        .filter(|(_, m, _)| Action::of(m) == action)
        .count()
        >= threshold
}

/// A hash of an assistant message's action, equal for equal actions (as
/// [`Action`] compares them: arguments as JSON values, whatever their key
/// order or spacing); `None` for other roles and for an empty action. Two
/// different actions may share one, so a match is confirmed by comparing
/// the actions themselves.
pub fn fingerprint(m: &Message) -> Option<u64> {
    if m.role != Role::Assistant {
        return None;
    }
    let action = Action::of(m);
    if action.is_empty() {
        return None;
    }
    let mut h = std::hash::DefaultHasher::new();
    action.content.hash(&mut h);
    // serde_json's `Value` hashes consistently with its `==`: `0.0` and
    // `-0.0` alike, objects whatever their keys' order.
    for (name, key) in &action.calls {
        name.hash(&mut h);
        match key {
            ArgKey::Json(v) => (0u8, v).hash(&mut h),
            ArgKey::Raw(raw) => (1u8, raw).hash(&mut h),
        }
    }
    Some(h.finish())
}

/// The prompt for the step after a detection: the warning once, in front of
/// the configured prompt, which itself never changes.
pub fn prompt_with_warning(configured: Option<&str>) -> String {
    match configured {
        Some(p) if !p.is_empty() => format!("{STUCK_PROMPT}\n{p}"),
        _ => STUCK_PROMPT.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::ToolCall;

    fn step_with_call(m: &mut Memory, id: &str, args: &str) -> u64 {
        let mark = m.mark();
        m.add(Message::assistant_with_calls(
            None,
            vec![ToolCall {
                id: id.into(),
                name: "bash".into(),
                arguments: args.into(),
            }],
        ))
        .expect("add");
        m.add(Message::tool("same output", id, "bash"))
            .expect("add");
        mark
    }

    #[test]
    fn repeated_tool_call_with_empty_content_is_stuck() {
        let mut m = Memory::new(100);
        m.add(Message::user("go")).expect("add");
        let mark = step_with_call(&mut m, "1", r#"{"command":"ls"}"#);
        assert!(!is_stuck(&m, mark, 2));
        let mark = step_with_call(&mut m, "2", r#"{"command": "ls"}"#);
        assert!(!is_stuck(&m, mark, 2));
        let mark = step_with_call(&mut m, "3", r#"{"command":"ls"}"#);
        assert!(is_stuck(&m, mark, 2), "third identical call is stuck");
    }

    #[test]
    fn different_arguments_are_not_stuck() {
        let mut m = Memory::new(100);
        step_with_call(&mut m, "1", r#"{"command":"ls"}"#);
        step_with_call(&mut m, "2", r#"{"command":"ls"}"#);
        let mark = step_with_call(&mut m, "3", r#"{"command":"pwd"}"#);
        assert!(!is_stuck(&m, mark, 2));
    }

    #[test]
    fn repeated_text_is_stuck_and_a_silent_step_is_not() {
        let mut m = Memory::new(100);
        for _ in 0..3 {
            m.add(Message::assistant("same")).expect("add");
        }
        assert!(is_stuck(&m, m.mark() - 1, 2));
        assert!(!is_stuck(&m, m.mark(), 2), "a step that added nothing");
    }

    #[test]
    fn fingerprints_follow_the_actions_equality() {
        let call = |args: &str| {
            Message::assistant_with_calls(
                Some("run it".into()),
                vec![ToolCall {
                    id: "x".into(),
                    name: "bash".into(),
                    arguments: args.into(),
                }],
            )
        };
        let a = fingerprint(&call(r#"{"a": 1, "b": [true, null, "s"]}"#));
        assert!(a.is_some());
        assert_eq!(a, fingerprint(&call(r#"{"b":[true,null,"s"],"a":1}"#)));
        assert_ne!(
            a,
            fingerprint(&call(r#"{"a": 1.0, "b": [true, null, "s"]}"#))
        );
        assert_ne!(a, fingerprint(&call("not json")));
        // Equal as values, so the same action.
        assert_eq!(
            fingerprint(&call(r#"{"n": -0.0}"#)),
            fingerprint(&call(r#"{"n": 0.0}"#))
        );
        assert_eq!(
            fingerprint(&call("not json")),
            fingerprint(&call("not json"))
        );
        assert_eq!(
            fingerprint(&Message::assistant("")),
            None,
            "an empty action"
        );
        assert_eq!(fingerprint(&Message::user("same")), None, "not an action");
    }

    #[test]
    fn warning_does_not_grow() {
        let p = prompt_with_warning(Some("next"));
        assert_eq!(p, format!("{STUCK_PROMPT}\nnext"));
        assert_eq!(prompt_with_warning(None), STUCK_PROMPT);
    }
}
