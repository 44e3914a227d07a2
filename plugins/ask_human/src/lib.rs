//! OpenManus's `ask_human` tool: the model asks the run's operator a
//! question (`inquire`) and reads the answer as the observation.
//!
//! OpenManus reads the answer with `input()` on its own terminal, which a
//! daemon does not have; here the question goes through the contract's
//! `human` interface (0.2.2), so the run waits for someone to answer
//! through the API or `agentd reply`, without counting the wait against
//! the step deadline. When nobody answers in time, the run is cancelled, or
//! there is no run to ask in (`agentd plugin call`), the host's error is
//! returned as is, so the model reads why (for example "no answer within 1h
//! (input_timeout)") and goes on.

use agentd_tool_sdk::{Error, Guest, Metadata, ToolSpec, export_tool, human, parse_args};
use serde::Deserialize;

const NAME: &str = "ask_human";
const DESCRIPTION: &str = "Use this tool to ask human for help.";
const PARAMETERS: &str = r#"{"type":"object","properties":{"inquire":{"type":"string","description":"The question you want to ask human."}},"required":["inquire"]}"#;

#[derive(Deserialize)]
struct Args {
    inquire: String,
}

struct AskHuman;

impl Guest for AskHuman {
    fn metadata() -> Metadata {
        Metadata::new(NAME, env!("CARGO_PKG_VERSION"), DESCRIPTION)
    }

    fn spec() -> ToolSpec {
        ToolSpec::new(NAME, DESCRIPTION, PARAMETERS)
    }

    fn invoke(arguments: String) -> Result<String, Error> {
        answer(&arguments, human::ask)
    }
}

export_tool!(AskHuman);

/// The tool apart from the import, so `cargo test` runs it natively with a
/// fake `ask`: the question from the model's arguments, asked, and the
/// answer as the observation.
fn answer(
    arguments: &str,
    ask: impl FnOnce(&str) -> Result<String, Error>,
) -> Result<String, Error> {
    let args: Args = parse_args(arguments)?;
    let question = args.inquire.trim();
    if question.is_empty() {
        // A person shown an empty question can only guess what was meant.
        return Err(Error::invalid_input(
            "invalid arguments: `inquire` is empty: write the question you want to ask",
        ));
    }
    ask(question)
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentd_tool_sdk::ErrorCode;

    #[test]
    fn the_answer_is_the_observation() {
        let mut asked = None;
        let got = answer(r#"{"inquire":" Which branch? "}"#, |q| {
            asked = Some(q.to_string());
            Ok("main".into())
        });
        assert_eq!(got, Ok("main".into()));
        assert_eq!(asked.as_deref(), Some("Which branch?"));
    }

    #[test]
    fn the_hosts_error_reaches_the_model_as_is() {
        let timeout = Error::failed("no answer within 1h (input_timeout)");
        assert_eq!(
            answer(r#"{"inquire":"?"}"#, |_| Err(timeout.clone())),
            Err(timeout)
        );
    }

    #[test]
    fn bad_arguments_are_refused_before_anyone_is_asked() {
        for bad in ["{", "{}", r#"{"inquire": 3}"#, r#"{"inquire": "  "}"#] {
            let e = answer(bad, |_| panic!("asked for {bad}")).expect_err(bad);
            assert_eq!(e.code, ErrorCode::InvalidInput, "{bad}: {e:?}");
            assert!(e.message.starts_with("invalid arguments: "), "{bad}: {e:?}");
        }
        let missing = answer("{}", |_| Ok(String::new())).expect_err("missing");
        assert!(missing.message.contains("inquire"), "{missing:?}");
    }
}
