//! OpenManus's `terminate` tool. It does nothing itself: listing it in an
//! agent's special tools is what makes a successful call end the run.

use agentd_tool_sdk::{Error, Guest, Metadata, ToolSpec, export_tool, parse_args};
use serde::Deserialize;

const NAME: &str = "terminate";
const DESCRIPTION: &str = "Terminate the interaction when the request is met OR if the assistant cannot proceed further with the task.\nWhen you have finished all the tasks, call this tool to end the work.";
const PARAMETERS: &str = r#"{"type":"object","properties":{"status":{"type":"string","description":"The finish status of the interaction.","enum":["success","failure"]}},"required":["status"]}"#;

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum Status {
    Success,
    Failure,
}

#[derive(Deserialize)]
struct Args {
    status: Status,
}

struct Terminate;

impl Guest for Terminate {
    fn metadata() -> Metadata {
        Metadata::new(NAME, env!("CARGO_PKG_VERSION"), DESCRIPTION)
    }

    fn spec() -> ToolSpec {
        ToolSpec::new(NAME, DESCRIPTION, PARAMETERS)
    }

    fn invoke(arguments: String) -> Result<String, Error> {
        let args: Args = parse_args(&arguments)?;
        let status = match args.status {
            Status::Success => "success",
            Status::Failure => "failure",
        };
        Ok(format!(
            "The interaction has been completed with status: {status}"
        ))
    }
}

export_tool!(Terminate);
