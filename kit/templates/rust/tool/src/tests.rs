//! Native tests: `cargo test` runs them on your machine, no wasm needed.
//! The component's imports only exist inside agentd, so test the logic
//! (here `count`); for a tool that uses the sandbox, put the calls behind a
//! trait and give the test a fake, as agentd's own `str_replace_editor` does.

use super::*;
use agentd_tool_sdk::ErrorCode;

#[test]
fn counts_words_lines_and_characters() {
    assert_eq!(
        count("one two\nthree").unwrap(),
        "3 words, 2 lines, 13 characters"
    );
}

#[test]
fn empty_text_is_invalid_input() {
    let error = count("").unwrap_err();
    assert_eq!(error.code, ErrorCode::InvalidInput);
}

#[test]
fn the_schema_is_json() {
    let schema: serde_json::Value = serde_json::from_str(PARAMETERS).unwrap();
    assert_eq!(schema["type"], "object");
}

#[test]
fn bad_arguments_are_invalid_input() {
    let error = parse_args::<Args>(r#"{"text": 3}"#).err().unwrap();
    assert_eq!(error.code, ErrorCode::InvalidInput);
}
