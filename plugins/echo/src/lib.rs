//! A tool that costs next to nothing, so a benchmark of a step measures the
//! host's overhead rather than the tool's work.

use agentd_tool_sdk::{Error, Guest, Metadata, ToolSpec, export_tool, parse_args};
use serde::Deserialize;

const NAME: &str = "echo";
const DESCRIPTION: &str = "Returns the text it is given.";
const PARAMETERS: &str =
    r#"{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}"#;

#[derive(Deserialize)]
struct Args {
    text: String,
}

struct Echo;

impl Guest for Echo {
    fn metadata() -> Metadata {
        Metadata::new(NAME, env!("CARGO_PKG_VERSION"), DESCRIPTION)
    }

    fn spec() -> ToolSpec {
        ToolSpec::new(NAME, DESCRIPTION, PARAMETERS)
    }

    fn invoke(arguments: String) -> Result<String, Error> {
        let args: Args = parse_args(&arguments)?;
        Ok(args.text)
    }
}

export_tool!(Echo);
