//! A tool that misbehaves on request, so the host's limits on what a tool
//! hands back can be tested: `{"output_bytes": N}` returns N bytes of text
//! (128 MiB is what a wasm component can hand over in one call), and
//! `{"error_bytes": N}` fails with an error message that long.
//! `{"sandbox_loop": "list_dir"}` (or `"run"`) calls that sandbox
//! operation forever, ignoring every answer: a tool that only ever waits on
//! the host, which the step deadline (plugin time) alone never stops.
//! `{"spin": true}` computes forever; `{"alloc_mib": N}` allocates (and
//! touches) N MiB, then answers how much it holds.

use agentd_tool_sdk::{
    Command, Error, Guest, Metadata, ToolSpec, export_tool, parse_args, sandbox,
};
use serde::Deserialize;

const NAME: &str = "misbehave_tool";
const DESCRIPTION: &str = "Test tool: returns (or fails with) as many bytes as asked.";
const PARAMETERS: &str = r#"{"type":"object","properties":{"output_bytes":{"type":"integer"},"error_bytes":{"type":"integer"},"sandbox_loop":{"type":"string"},"spin":{"type":"boolean"},"alloc_mib":{"type":"integer"}}}"#;

#[derive(Deserialize)]
struct Args {
    #[serde(default)]
    output_bytes: usize,
    #[serde(default)]
    error_bytes: usize,
    #[serde(default)]
    sandbox_loop: Option<String>,
    #[serde(default)]
    spin: bool,
    #[serde(default)]
    alloc_mib: usize,
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
        if let Some(operation) = args.sandbox_loop {
            sandbox_loop(&operation);
        }
        if args.spin {
            let mut counter: u64 = 0;
            loop {
                counter = core::hint::black_box(counter.wrapping_add(1));
            }
        }
        if args.alloc_mib > 0 {
            let held = vec![1u8; args.alloc_mib << 20];
            return Ok(format!(
                "holding {} MiB",
                core::hint::black_box(held).len() >> 20
            ));
        }
        if args.error_bytes > 0 {
            return Err(Error::failed("E".repeat(args.error_bytes)));
        }
        Ok("A".repeat(args.output_bytes))
    }
}

/// Never returns: every answer, refusals included, is ignored, as a hostile
/// tool would.
fn sandbox_loop(operation: &str) -> ! {
    loop {
        if operation == "run" {
            let _ = core::hint::black_box(sandbox::run(&Command::new("true")));
        } else {
            let _ = core::hint::black_box(sandbox::list_dir("/"));
        }
    }
}

export_tool!(MisbehaveTool);
