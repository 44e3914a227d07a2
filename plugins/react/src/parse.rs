//! Reading a model's reply in the ReAct text format.
//!
//! The format asked for is
//!
//! ```text
//! Thought: ...
//! Action: <tool name>
//! Action Input: <JSON object>
//! ```
//!
//! or `Thought: ...` then `Final Answer: ...`. What small local models
//! really write departs from it in ways this parser reads rather than
//! refuses, because each has one meaning: labels in another case, in bold
//! or numbered (`**Action:**`, `Action 1:`), prose before or after, no
//! thought, the input on the line after `Action:` without its label, the
//! input inline (`bash({"command": "ls"})`, `bash(command="ls")`,
//! `Search[query]`), a LangChain JSON blob (`{"action": ..., "action_input":
//! ...}`) or a `{"name": ..., "arguments": ...}` call in place of the
//! lines, reasoning in `<think>` tags, and JSON with Python's habits (see
//! `json_repair`). A model that goes on to write the tool's result itself
//! (`Observation: ...`) is cut there: the host runs the tool and says what
//! it returned. Anything else is [`Reply::Unparsed`], with a reason the
//! model is told.

use std::ops::Range;

use serde_json::{Map, Value};

use crate::json_repair;

/// What a reply asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Run `tool` with `input` (an object, or a string, array, ... that the
    /// step judges against the tool's parameters).
    Action {
        thought: Option<String>,
        tool: String,
        input: Value,
        /// Further actions the reply asked for in the same turn; only the
        /// first is run.
        extra_actions: usize,
    },
    /// The model is done.
    Final {
        thought: Option<String>,
        answer: String,
    },
    /// Neither, and why, in words for the model.
    Unparsed { why: String },
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Label {
    Thought,
    Action,
    ActionInput,
    FinalAnswer,
    Observation,
}

/// One line of the reply.
struct Line {
    /// Byte offset of the line in the text.
    start: usize,
    /// The label the line starts with and the offset of what follows it.
    label: Option<(Label, usize)>,
}

impl Line {
    fn is(&self, label: Label) -> bool {
        self.label.is_some_and(|(l, _)| l == label)
    }

    /// Where the text after the label begins (the line's start if none).
    fn rest(&self) -> usize {
        self.label.map_or(self.start, |(_, rest)| rest)
    }
}

/// Reads `text`, a whole reply.
pub fn parse(text: &str) -> Reply {
    let (body, had_thinking) = without_thinking(text);
    let body = &text[body];
    if body.trim().is_empty() {
        let why = if had_thinking {
            "it has only thinking (in <think> tags), with neither an `Action:` nor a `Final Answer:` after it"
        } else {
            "it was empty"
        };
        return unparsed(why);
    }
    let lines = lines(body);
    let first = |label: Label| lines.iter().position(|line| line.is(label));
    match (first(Label::Action), first(Label::FinalAnswer)) {
        (Some(action), Some(final_at)) if final_at < action => final_reply(body, &lines, final_at),
        (Some(action), _) => action_reply(body, &lines, action),
        (None, Some(final_at)) => final_reply(body, &lines, final_at),
        (None, None) => blob_reply(body).unwrap_or_else(|| unparsed(&no_format(&lines))),
    }
}

/// The part of `text` to keep as the model's message: all of it, unless
/// the model went on after its action to write an `Observation:` of its
/// own (small models invent the tool's result, and often further steps
/// from it): then what it wrote from there is dropped, so that neither the
/// next request nor the transcript holds a result no tool produced.
pub fn kept(text: &str) -> &str {
    let (body, _) = without_thinking(text);
    let offset = body.start;
    let body = &text[body];
    let lines = lines(body);
    let action = lines.iter().position(|line| line.is(Label::Action));
    let final_at = lines.iter().position(|line| line.is(Label::FinalAnswer));
    // After the action, or, for a blob with no labels, after the first
    // line that says anything.
    let after = match (action, final_at) {
        (Some(a), f) if f.is_none_or(|f| a < f) => Some(a),
        (None, None) => lines.iter().position(|line| {
            !body[line.start..]
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .is_empty()
        }),
        _ => None,
    };
    let cut = after.and_then(|a| {
        lines[a + 1..]
            .iter()
            .find(|line| line.is(Label::Observation))
            .map(|line| offset + line.start)
    });
    match cut {
        Some(at) => text[..at].trim(),
        None => text.trim(),
    }
}

fn unparsed(why: &str) -> Reply {
    Reply::Unparsed {
        why: why.to_string(),
    }
}

/// Where the reply is without reasoning models' `<think>...</think>`
/// (which may itself mention actions), and whether there was any: a range
/// of `text`, so offsets found in the body are offsets in `text` too.
fn without_thinking(text: &str) -> (Range<usize>, bool) {
    if let Some(end) = text.rfind("</think>") {
        return (end + "</think>".len()..text.len(), true);
    }
    match text.find("<think>") {
        // Never closed: everything after it is thinking.
        Some(start) => (0..start, true),
        None => (0..text.len(), false),
    }
}

/// The reply's lines with their labels. A line that begins inside a JSON
/// string (code written across lines, raw newlines and all) has no label
/// whatever it says: `# Action: ...` in a Python comment of the input, or
/// `Observation:` in a file's text, is the input's, not the reply's.
fn lines(text: &str) -> Vec<Line> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut json = JsonState::default();
    for raw in text.split_inclusive('\n') {
        let line = raw.trim_end_matches(['\n', '\r']);
        let label = if json.in_string() { None } else { label(line) };
        out.push(Line {
            start,
            label: label.map(|(label, rest)| (label, start + rest)),
        });
        json.feed(raw);
        start += raw.len();
    }
    out
}

/// Just enough of JSON's grammar to know whether a line starts inside a
/// string of an object or array. Quotes count only inside brackets, so the
/// apostrophes of prose do not open strings.
#[derive(Default)]
struct JsonState {
    depth: usize,
    quote: Option<char>,
    escaped: bool,
}

impl JsonState {
    fn in_string(&self) -> bool {
        self.quote.is_some()
    }

    fn feed(&mut self, text: &str) {
        for c in text.chars() {
            if let Some(quote) = self.quote {
                if self.escaped {
                    self.escaped = false;
                } else if c == '\\' {
                    self.escaped = true;
                } else if c == quote {
                    self.quote = None;
                }
                continue;
            }
            match c {
                '{' | '[' => self.depth += 1,
                '}' | ']' => self.depth = self.depth.saturating_sub(1),
                '"' | '\'' if self.depth > 0 => self.quote = Some(c),
                _ => {}
            }
        }
    }
}

/// The label `line` starts with, if any, and the offset of the text after
/// it. Markdown around the label (`**Action:**`, `### Thought:`, `- `) and a
/// step number (`Thought 2:`, as the ReAct paper writes) are allowed.
fn label(line: &str) -> Option<(Label, usize)> {
    let lead = line.len()
        - line
            .trim_start_matches(|c: char| c.is_whitespace() || "#>*-".contains(c))
            .len();
    let text = &line[lead..];
    let colon = text.find(':')?;
    if colon > 24 {
        return None;
    }
    let name = text[..colon]
        .trim_matches(|c: char| c == '*' || c == '_' || c.is_whitespace())
        .trim_end_matches(|c: char| c.is_ascii_digit() || c.is_whitespace())
        .to_lowercase()
        .replace(['_', '-'], " ");
    let label = match name
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .as_str()
    {
        "thought" | "thoughts" => Label::Thought,
        "action" => Label::Action,
        "action input" | "actioninput" | "action inputs" => Label::ActionInput,
        "final answer" | "finalanswer" => Label::FinalAnswer,
        "observation" | "observations" => Label::Observation,
        _ => return None,
    };
    let after = &line[lead + colon + 1..];
    let rest = after.trim_start_matches(|c: char| c == '*' || c.is_whitespace());
    Some((label, lead + colon + 1 + after.len() - rest.len()))
}

/// The thought before line `at`: after the first `Thought:` label, or the
/// prose before `at` when there is none.
fn thought_before(body: &str, lines: &[Line], at: usize) -> Option<String> {
    let end = lines[at].start;
    let start = lines[..at]
        .iter()
        .find(|line| line.is(Label::Thought))
        .map_or(0, Line::rest);
    non_empty(body[start..end].trim())
}

fn non_empty(text: &str) -> Option<String> {
    (!text.is_empty()).then(|| text.to_string())
}

fn final_reply(body: &str, lines: &[Line], at: usize) -> Reply {
    let answer = body[lines[at].rest()..].trim();
    if answer.is_empty() {
        return unparsed("`Final Answer:` is followed by nothing");
    }
    Reply::Final {
        thought: thought_before(body, lines, at),
        answer: answer.to_string(),
    }
}

fn action_reply(body: &str, lines: &[Line], at: usize) -> Reply {
    let thought = thought_before(body, lines, at);
    // The action's block runs to the next label other than its input's.
    let block_end_line = lines[at + 1..]
        .iter()
        .position(|line| line.label.is_some_and(|(l, _)| l != Label::ActionInput))
        .map_or(lines.len(), |p| p + at + 1);
    let block_end = lines
        .get(block_end_line)
        .map_or(body.len(), |line| line.start);
    let input_line = lines[at + 1..block_end_line]
        .iter()
        .find(|line| line.is(Label::ActionInput));
    let name_end = input_line.map_or(block_end, |line| line.start);
    let name_part = body[lines[at].rest()..name_end].trim();
    let input_part = input_line.map(|line| &body[line.rest()..block_end]);
    // Further actions before any observation the model wrote: the ones it
    // asked for at once (after an observation they are its invention).
    let observation = lines[at + 1..]
        .iter()
        .position(|line| line.is(Label::Observation))
        .map_or(lines.len(), |p| p + at + 1);
    let extra_actions = lines[at + 1..observation]
        .iter()
        .filter(|line| line.is(Label::Action))
        .count();

    if starts_blob(name_part) {
        return match blob(name_part) {
            Ok(Some((tool, input))) => action_or_final(thought, tool, input, extra_actions),
            Ok(None) => unparsed("the JSON after `Action:` names no tool"),
            Err(why) => unparsed(&format!("the JSON after `Action:` is not valid: {why}")),
        };
    }
    let (first_line, more) = match name_part.split_once('\n') {
        Some((first, more)) => (first.trim(), more.trim()),
        None => (name_part, ""),
    };
    let (tool, inline) = split_call(first_line);
    if tool.is_empty() {
        return unparsed("`Action:` is not followed by a tool name");
    }
    // Input on the lines after `Action:` without its label counts only
    // when it is JSON: prose there is the model talking.
    let unlabelled = (!more.is_empty() && starts_blob(more)).then_some(more);
    let input = match inline.or(input_part).or(unlabelled) {
        None => Value::Object(Map::new()),
        Some(text) => match json_repair::parse_input(text) {
            Ok(value) => value,
            Err(why) => {
                return unparsed(&format!(
                    "the Action Input for `{tool}` is not valid JSON: {why}"
                ));
            }
        },
    };
    action_or_final(thought, tool.to_string(), input, extra_actions)
}

/// `Action: Final Answer` with the answer as its input, as some models
/// trained on LangChain's JSON agents write it, is an answer.
fn action_or_final(
    thought: Option<String>,
    tool: String,
    input: Value,
    extra_actions: usize,
) -> Reply {
    let name = tool
        .trim_matches(|c: char| c == '`' || c == '"' || c == '\'' || c.is_whitespace())
        .to_lowercase()
        .replace('_', " ");
    if name == "final answer" {
        let answer = match input {
            Value::String(text) => text,
            Value::Object(map) if map.is_empty() => String::new(),
            other => other.to_string(),
        };
        if answer.trim().is_empty() {
            return unparsed("the Final Answer is empty");
        }
        return Reply::Final { thought, answer };
    }
    Reply::Action {
        thought,
        tool,
        input,
        extra_actions,
    }
}

/// `name(args)`, `name[args]` or `name {json}` on the action's line.
fn split_call(line: &str) -> (&str, Option<&str>) {
    let line = line.trim().trim_matches('`').trim();
    for (open, close) in [('(', ')'), ('[', ']')] {
        if let Some(i) = line.find(open)
            && i > 0
            && line.ends_with(close)
        {
            let inner = line[i + 1..line.len() - 1].trim();
            return (line[..i].trim(), (!inner.is_empty()).then_some(inner));
        }
    }
    match line.find('{') {
        Some(i) if i > 0 => (
            line[..i].trim().trim_end_matches(':').trim(),
            Some(&line[i..]),
        ),
        _ => (line, None),
    }
}

fn starts_blob(text: &str) -> bool {
    let text = text.trim_start();
    text.starts_with('{')
        || text.starts_with("```")
        || text.starts_with("`{")
        || text.starts_with("<tool_call>")
}

/// A reply with no labels: a JSON call in place of the lines, fenced or
/// not, maybe with prose around it, as models that were trained on JSON
/// agents or on tool calling write.
fn blob_reply(body: &str) -> Option<Reply> {
    let start = body
        .match_indices(['{', '`', '<'])
        .map(|(i, _)| i)
        .find(|&i| starts_blob(&body[i..]))?;
    let thought = non_empty(body[..start].trim());
    match blob(&body[start..]) {
        Ok(Some((tool, input))) => Some(action_or_final(thought, tool, input, 0)),
        Ok(None) => None,
        // Broken JSON that reads like a call is worth a precise reason;
        // other braces in prose are not a call at all.
        Err(why) if looks_like_call(&body[start..]) => Some(unparsed(&format!(
            "the JSON call in it is not valid: {why}"
        ))),
        Err(_) => None,
    }
}

fn looks_like_call(text: &str) -> bool {
    let text = text.to_lowercase();
    [
        "\"action",
        "'action",
        "\"name",
        "'name",
        "\"function",
        "<tool_call>",
    ]
    .iter()
    .any(|key| text.contains(key))
}

/// The tool and input of a JSON call starting `text`: `Ok(None)` when the
/// JSON names no tool.
fn blob(text: &str) -> Result<Option<(String, Value)>, String> {
    let text = text.trim_start();
    let text = text.strip_prefix("<tool_call>").unwrap_or(text);
    let text = json_repair::open_fence(text.trim_start()).unwrap_or(text);
    let text = text.trim_start().trim_start_matches('`');
    let Some(start) = text.find('{') else {
        return Ok(None);
    };
    let value = json_repair::parse_json_prefix(&text[start..])?;
    Ok(call_in(&value))
}

/// `{"action": ..., "action_input": ...}` (LangChain), `{"name": ...,
/// "arguments": ...}` (OpenAI, Hermes), and OpenAI's `{"function": {...}}`.
fn call_in(value: &Value) -> Option<(String, Value)> {
    let object = value.as_object()?;
    let get = |names: &[&str]| {
        object
            .iter()
            .find(|(key, _)| names.contains(&key.to_lowercase().replace(['_', '-'], " ").as_str()))
            .map(|(_, value)| value)
    };
    let tool = match get(&["action", "tool", "tool name", "name", "function"])? {
        Value::String(name) => name.clone(),
        nested @ Value::Object(_) => return call_in(nested),
        _ => return None,
    };
    let input = get(&[
        "action input",
        "tool input",
        "input",
        "arguments",
        "args",
        "parameters",
        "params",
    ])
    .cloned()
    .unwrap_or_else(|| Value::Object(Map::new()));
    Some((tool, input))
}

/// Why a reply with neither label cannot be read.
fn no_format(lines: &[Line]) -> String {
    if lines.iter().any(|line| line.is(Label::ActionInput)) {
        "it has an `Action Input:` but no `Action:` line naming the tool".to_string()
    } else if lines.iter().any(|line| line.is(Label::Thought)) {
        "it has a `Thought:` but neither an `Action:` nor a `Final Answer:`".to_string()
    } else {
        "it has neither an `Action:` line nor a `Final Answer:` line".to_string()
    }
}
