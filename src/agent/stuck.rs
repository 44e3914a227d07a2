//! Stuck detection on the whole action.
//!
//! OpenManus compares message *content* only and treats empty content as "not
//! stuck", so a model that repeats the same tool call with no text is never
//! caught. Here an action is the content plus the tool calls (names and
//! arguments, ignoring the per-call ids, which are fresh every time).

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
pub fn is_stuck(memory: &Memory, step_mark: u64, threshold: usize) -> bool {
    if threshold == 0 {
        return false;
    }
    let Some(last) = memory
        .added_since(step_mark)
        .filter(|m| m.role == Role::Assistant)
        .last()
    else {
        return false;
    };
    let action = Action::of(last);
    if action.is_empty() {
        return false;
    }
    let earlier = memory
        .iter()
        .filter(|m| m.role == Role::Assistant && !std::ptr::eq(*m, last))
        .filter(|m| Action::of(m) == action)
        .count();
    earlier >= threshold
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
    fn warning_does_not_grow() {
        let p = prompt_with_warning(Some("next"));
        assert_eq!(p, format!("{STUCK_PROMPT}\nnext"));
        assert_eq!(prompt_with_warning(None), STUCK_PROMPT);
    }
}
