//! Reading the JSON that small models write as a tool's input.
//!
//! Models without tool calling were never trained to emit strict JSON, so
//! their Action Input is often JSON with Python's habits or Markdown around
//! it. What is repaired here is what has exactly one reading:
//!
//! - a Markdown code fence or single backticks around the value;
//! - single-quoted strings (`{'a': 'b'}`), with `\'` inside them;
//! - a trailing comma before `}` or `]`;
//! - unquoted keys (`{command: "ls"}`) and keys given with `=`
//!   (`command="ls"`, Python's keyword-argument habit);
//! - Python's `True`, `False` and `None`;
//! - raw newlines and tabs inside strings (code written across lines), and
//!   escapes JSON does not have (`"\d+"`), read as a literal backslash;
//! - `//` and `/* */` comments.
//!
//! Everything else is refused with a reason rather than guessed: a value
//! that is not closed (the model stopped, or was cut), unquoted text as a
//! value (`{command: ls -la}`: where does the string end?), a double quote
//! inside a double-quoted string that is not escaped, `NaN`, missing commas.
//! Running a tool with arguments the model did not mean is worse than
//! asking it again.

use serde_json::{Map, Value};

/// Reads an Action Input: a JSON value (objects, but also strings and
/// arrays, which the caller judges), possibly fenced, possibly followed by
/// prose; nothing, or `None`/`null`, is an empty object. Text that is not
/// JSON at all comes back as a string: the caller decides whether the tool
/// can take it (a tool with one string parameter can).
pub fn parse_input(text: &str) -> Result<Value, String> {
    let text = text.trim();
    let (fenced, body) = match open_fence(text) {
        Some(rest) => (true, rest.trim_start()),
        None => (false, strip_backticks(text)),
    };
    let body = body.trim();
    if body.is_empty() || body == "```" {
        return Ok(Value::Object(Map::new()));
    }
    match body.chars().next() {
        Some('{' | '[') => parse_json_prefix(body),
        Some('"' | '\'') => {
            let token_end = string_len(body).ok_or_else(|| NOT_CLOSED_STRING.to_string())?;
            let after = body[token_end..].trim_start();
            if after.starts_with(':') {
                // `"text": "hi"`: an object's members without its braces.
                return parse_json(&format!("{{{}}}", until_blank_line(body)));
            }
            parse_json(&body[..token_end])
        }
        _ => {
            let bare = if fenced {
                body.split("```").next().unwrap_or("").trim_end()
            } else {
                until_blank_line(body)
            };
            if matches!(bare, "None" | "null" | "none" | "{}") {
                return Ok(Value::Object(Map::new()));
            }
            if looks_like_members(bare)
                && let Ok(value) = parse_json(&format!("{{{bare}}}"))
            {
                return Ok(value);
            }
            Ok(Value::String(bare.to_string()))
        }
    }
}

/// Reads `text`, JSON as it is or repaired, as one value; nothing may
/// follow it but whitespace.
pub fn parse_json(text: &str) -> Result<Value, String> {
    let text = text.trim();
    match serde_json::from_str(text) {
        Ok(value) => Ok(value),
        Err(original) => {
            let repaired = repair(text)?;
            serde_json::from_str(&repaired).map_err(|after| {
                // The error of the repaired text names what is still wrong,
                // but its position is in text the model never saw.
                if repaired == text {
                    without_position(&original)
                } else {
                    without_position(&after)
                }
            })
        }
    }
}

/// Reads the JSON object or array `text` starts with, ignoring whatever
/// follows it (prose, a closing fence).
pub fn parse_json_prefix(text: &str) -> Result<Value, String> {
    let len = balanced_len(text).ok_or_else(|| NOT_CLOSED.to_string())?;
    parse_json(&text[..len])
}

const NOT_CLOSED: &str = "the JSON is not closed (a `}` or `]` is missing)";
const NOT_CLOSED_STRING: &str = "a string in the JSON is not closed";

/// The text after an opening Markdown fence (```` ```json ````), when
/// `text` starts with one.
pub fn open_fence(text: &str) -> Option<&str> {
    let after = text.strip_prefix("```")?;
    let lang_len = after
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '+')))
        .unwrap_or(after.len());
    Some(&after[lang_len..])
}

/// `` `{"a": 1}` `` written inline, as Markdown code.
fn strip_backticks(text: &str) -> &str {
    match text.strip_prefix('`').and_then(|t| t.strip_suffix('`')) {
        Some(inner) if !inner.contains('`') => inner,
        _ => text,
    }
}

/// Up to the first blank line: a model that writes unquoted input usually
/// goes on with prose after a blank line.
fn until_blank_line(text: &str) -> &str {
    let mut end = text.len();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if offset > 0 && line.trim().is_empty() {
            end = offset;
            break;
        }
        offset += line.len();
    }
    text[..end].trim_end()
}

/// `key: ...` or `key = ...` at the start: members of an object written
/// without braces.
fn looks_like_members(text: &str) -> bool {
    let key_len = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    key_len > 0 && {
        let after = text[key_len..].trim_start_matches([' ', '\t']);
        after.starts_with(':') || (after.starts_with('=') && !after.starts_with("=="))
    }
}

fn without_position(error: &serde_json::Error) -> String {
    let message = error.to_string();
    match message.find(" at line ") {
        Some(at) => message[..at].to_string(),
        None => message,
    }
}

/// The byte length of the object or array `text` starts with, found by
/// matching brackets outside strings (of either quote); `None` when it is
/// never closed.
pub fn balanced_len(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut quote = None;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '"' | '\'' => quote = Some(c),
            '{' | '[' => depth += 1,
            '}' | ']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// The byte length of the quoted string `text` starts with.
fn string_len(text: &str) -> Option<usize> {
    let mut chars = text.char_indices();
    let (_, quote) = chars.next()?;
    let mut escaped = false;
    for (i, c) in chars {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == quote {
            return Some(i + c.len_utf8());
        }
    }
    None
}

/// Rewrites `text` into JSON where only one reading is possible (the
/// module's list), or says why it cannot. The result may still be invalid
/// JSON (a missing comma): the parser has the last word.
pub fn repair(text: &str) -> Result<String, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len() + 16);
    // The open brackets, to know whether a comma starts a key.
    let mut stack: Vec<char> = Vec::new();
    // The next token is an object's key.
    let mut expect_key = false;
    // A key was just read: `:` or `=` may follow.
    let mut after_key = false;
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        match c {
            '"' | '\'' => {
                i = repair_string(&chars, i, &mut out)?;
                after_key = expect_key;
                expect_key = false;
            }
            '{' | '[' => {
                stack.push(c);
                expect_key = c == '{';
                after_key = false;
                out.push(c);
                i += 1;
            }
            '}' | ']' => {
                stack.pop();
                expect_key = false;
                after_key = false;
                out.push(c);
                i += 1;
            }
            ',' => {
                let next = skip_insignificant(&chars, i + 1);
                if !matches!(chars.get(next), Some('}' | ']')) {
                    out.push(',');
                    expect_key = stack.last() == Some(&'{');
                }
                // else: a trailing comma, dropped.
                after_key = false;
                i += 1;
            }
            ':' | '=' if after_key => {
                out.push(':');
                after_key = false;
                i += 1;
            }
            '/' if matches!(chars.get(i + 1), Some('/' | '*')) => {
                i = skip_comment(&chars, i);
            }
            c if c.is_ascii_digit() || c == '-' || c == '+' => {
                while let Some(&d) = chars.get(i) {
                    if d.is_ascii_digit() || matches!(d, '.' | 'e' | 'E' | '+' | '-') {
                        out.push(d);
                        i += 1;
                    } else {
                        break;
                    }
                }
                expect_key = false;
                after_key = false;
            }
            c if c.is_alphabetic() || c == '_' || c == '$' => {
                let start = i;
                while chars
                    .get(i)
                    .is_some_and(|&d| d.is_alphanumeric() || d == '_' || d == '$')
                {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let next = skip_insignificant(&chars, i);
                if expect_key && matches!(chars.get(next), Some(':' | '=')) {
                    out.push('"');
                    out.push_str(&word);
                    out.push_str("\":");
                    i = next + 1;
                    expect_key = false;
                    after_key = false;
                    continue;
                }
                let literal = match word.as_str() {
                    "true" | "True" => "true",
                    "false" | "False" => "false",
                    "null" | "None" => "null",
                    _ => {
                        return Err(format!(
                            "`{word}` is not a JSON value: put text in double quotes"
                        ));
                    }
                };
                out.push_str(literal);
                expect_key = false;
                after_key = false;
            }
            _ => {
                if !c.is_whitespace() {
                    after_key = false;
                }
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(out)
}

/// Copies the string starting at `start` (quoted with `"` or `'`) as a JSON
/// string and returns the index after it.
fn repair_string(chars: &[char], start: usize, out: &mut String) -> Result<usize, String> {
    let quote = chars[start];
    out.push('"');
    let mut i = start + 1;
    loop {
        let Some(&c) = chars.get(i) else {
            return Err(NOT_CLOSED_STRING.to_string());
        };
        match c {
            '\\' => {
                let Some(&next) = chars.get(i + 1) else {
                    return Err(NOT_CLOSED_STRING.to_string());
                };
                match next {
                    '"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't' | 'u' => {
                        out.push('\\');
                        out.push(next);
                    }
                    '\'' => out.push('\''),
                    // Not an escape JSON knows (`\d`, `\.`): in a string a
                    // model wrote, a backslash that means itself.
                    other => {
                        out.push_str("\\\\");
                        push_string_char(out, other);
                    }
                }
                i += 2;
            }
            c if c == quote => {
                out.push('"');
                return Ok(i + 1);
            }
            '"' => {
                out.push_str("\\\"");
                i += 1;
            }
            c => {
                push_string_char(out, c);
                i += 1;
            }
        }
    }
}

/// A character inside a JSON string, control characters escaped.
fn push_string_char(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
        c => out.push(c),
    }
}

/// The index of the next character that is neither whitespace nor inside
/// a comment.
fn skip_insignificant(chars: &[char], mut i: usize) -> usize {
    loop {
        match chars.get(i) {
            Some(c) if c.is_whitespace() => i += 1,
            Some('/') if matches!(chars.get(i + 1), Some('/' | '*')) => i = skip_comment(chars, i),
            _ => return i,
        }
    }
}

/// The index after the `//` or `/* */` comment at `i`.
fn skip_comment(chars: &[char], i: usize) -> usize {
    if chars.get(i + 1) == Some(&'/') {
        let mut j = i + 2;
        while chars.get(j).is_some_and(|&c| c != '\n') {
            j += 1;
        }
        j
    } else {
        let mut j = i + 2;
        while j < chars.len() && !(chars[j] == '*' && chars.get(j + 1) == Some(&'/')) {
            j += 1;
        }
        (j + 2).min(chars.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok(text: &str) -> Value {
        parse_input(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
    }

    #[test]
    fn valid_json_is_read_as_it_is() {
        assert_eq!(
            ok(r#"{"a": 1, "b": [true, null]}"#),
            json!({"a": 1, "b": [true, null]})
        );
    }

    #[test]
    fn single_quotes_become_double_quotes() {
        assert_eq!(
            ok(r#"{'text': 'say "hi"', 'n': 'it\'s'}"#),
            json!({"text": "say \"hi\"", "n": "it's"})
        );
    }

    #[test]
    fn trailing_commas_go() {
        assert_eq!(
            ok(r#"{"a": [1, 2,], "b": 3,}"#),
            json!({"a": [1, 2], "b": 3})
        );
        assert_eq!(ok("{\"a\": 1, // the end\n}"), json!({"a": 1}));
    }

    #[test]
    fn unquoted_and_equals_keys_are_quoted() {
        assert_eq!(
            ok(r#"{command: "ls", restart: False}"#),
            json!({"command": "ls", "restart": false})
        );
        assert_eq!(ok(r#"command="ls -la""#), json!({"command": "ls -la"}));
        assert_eq!(ok(r#""text": "hi""#), json!({"text": "hi"}));
    }

    #[test]
    fn python_literals_become_json() {
        assert_eq!(
            ok("{'a': True, 'b': None, 'c': False}"),
            json!({"a": true, "b": null, "c": false})
        );
        // Inside strings they are text.
        assert_eq!(ok("{'a': 'True'}"), json!({"a": "True"}));
    }

    #[test]
    fn raw_newlines_and_unknown_escapes_in_strings_are_escaped() {
        assert_eq!(
            ok("{\"code\": \"import re\nprint(re.findall('\\d+', 'a1'))\"}"),
            json!({"code": "import re\nprint(re.findall('\\d+', 'a1'))"})
        );
    }

    #[test]
    fn numbers_survive_repair() {
        assert_eq!(ok("{'x': -1.5e3, 'y': 2,}"), json!({"x": -1500.0, "y": 2}));
    }

    #[test]
    fn what_has_two_readings_is_refused() {
        for text in [
            r#"{"command": ls -la}"#,
            r#"{"text": "she said "hi" to me"}"#,
            r#"{"a": NaN}"#,
            r#"{"text": 'it's'}"#,
        ] {
            assert!(parse_input(text).is_err(), "{text} should be refused");
        }
    }

    #[test]
    fn unclosed_json_is_refused_as_not_closed() {
        let error = parse_input(r#"{"command": "ls""#).expect_err("not closed");
        assert!(error.contains("not closed"), "{error}");
    }

    #[test]
    fn errors_carry_no_positions() {
        let error = parse_input(r#"{"a": 1 "b": 2}"#).expect_err("missing comma");
        assert!(!error.contains("line"), "{error}");
        assert!(error.contains("expected"), "{error}");
    }

    #[test]
    fn fences_and_backticks_are_stripped() {
        assert_eq!(ok("```json\n{\"a\": 1}\n```"), json!({"a": 1}));
        assert_eq!(ok("```\n{\"a\": 1}\n```\nNow I wait."), json!({"a": 1}));
        assert_eq!(ok("`{\"a\": 1}`"), json!({"a": 1}));
        assert_eq!(ok("```python\nprint(1)\n```"), json!("print(1)"));
    }

    #[test]
    fn nothing_is_an_empty_object_and_bare_text_a_string() {
        assert_eq!(ok(""), json!({}));
        assert_eq!(ok("None"), json!({}));
        assert_eq!(ok("ls -la\n\nLet me see."), json!("ls -la"));
        assert_eq!(ok("\"ls -la\""), json!("ls -la"));
    }

    #[test]
    fn balanced_len_skips_brackets_in_strings() {
        let text = r#"{"a": "}{", 'b': '"]'} and more"#;
        assert_eq!(balanced_len(text), Some(text.len() - " and more".len()));
        assert_eq!(balanced_len("{\"a\": {}"), None);
    }
}
