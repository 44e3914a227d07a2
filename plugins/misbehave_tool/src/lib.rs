//! A tool that misbehaves on request, so the host's limits on what a tool
//! hands back can be tested: `{"output_bytes": N}` returns N bytes of text
//! (128 MiB is what a wasm component can hand over in one call), and
//! `{"error_bytes": N}` fails with an error message that long.

use agentd_tool_sdk::{Error, Guest, Metadata, ToolSpec, export_tool, parse_args};
use serde::Deserialize;

const NAME: &str = "misbehave_tool";
const DESCRIPTION: &str = "Test tool: returns (or fails with) as many bytes as asked.";
const PARAMETERS: &str = r#"{"type":"object","properties":{"output_bytes":{"type":"integer"},"error_bytes":{"type":"integer"}}}"#;

#[derive(Deserialize)]
struct Args {
    #[serde(default)]
    output_bytes: usize,
    #[serde(default)]
    error_bytes: usize,
}

struct MisbehaveTool;

impl Guest for MisbehaveTool {
    fn metadata() -> Metadata {
        Metadata::new(NAME, env!("CARGO_PKG_VERSION"), DESCRIPTION)
    }

    fn spec() -> ToolSpec {
        ToolSpec::new(NAME, DESCRIPTION, PARAMETERS)
    }

    fn invoke(arguments: String) -> Result<String, Error> {
        let args: Args = parse_args(&arguments)?;
        if args.error_bytes > 0 {
            return Err(Error::failed("E".repeat(args.error_bytes)));
        }
        Ok("A".repeat(args.output_bytes))
    }
}

export_tool!(MisbehaveTool);
