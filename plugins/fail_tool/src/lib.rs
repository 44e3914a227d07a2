//! A tool that fails on purpose, so the host's handling of tool errors and
//! of tool traps can be tested.

use agentd_tool_sdk::{Error, Guest, Metadata, ToolSpec, export_tool, parse_args};
use serde::Deserialize;

const NAME: &str = "fail_tool";
const DESCRIPTION: &str = "Always fails; traps instead when `trap` is true.";
const PARAMETERS: &str = r#"{"type":"object","properties":{"trap":{"type":"boolean"}}}"#;

#[derive(Deserialize)]
struct Args {
    #[serde(default)]
    trap: bool,
    /// Loop forever, for the step deadline's tests.
    #[serde(default)]
    spin: bool,
    /// Recurse without end: the host's stack limit must stop it.
    #[serde(default)]
    recurse: bool,
    /// Allocate until refused: `[plugins] memory_limit` must stop it.
    #[serde(default)]
    grow: bool,
    /// Return 32 MiB: more than one call may hand the host.
    #[serde(default)]
    huge: bool,
}

struct FailTool;

impl Guest for FailTool {
    fn metadata() -> Metadata {
        Metadata::new(NAME, env!("CARGO_PKG_VERSION"), DESCRIPTION)
    }

    fn spec() -> ToolSpec {
        ToolSpec::new(NAME, DESCRIPTION, PARAMETERS)
    }

    fn invoke(arguments: String) -> Result<String, Error> {
        // Arguments that do not parse still get the deliberate failure: the
        // tests want this tool's error, not the SDK's.
        let args = parse_args::<Args>(&arguments).ok();
        if args.as_ref().is_some_and(|a| a.spin) {
            let mut counter: u64 = 0;
            loop {
                counter = core::hint::black_box(counter.wrapping_add(1));
            }
        }
        if args.as_ref().is_some_and(|a| a.recurse) {
            let depth = recurse(core::hint::black_box(0));
            return Ok(format!("recursed {depth} deep unhindered"));
        }
        if args.as_ref().is_some_and(|a| a.huge) {
            return Ok("A".repeat(32 << 20));
        }
        if args.as_ref().is_some_and(|a| a.grow) {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            while hoard.len() <= 1 << 14 {
                let mut chunk = vec![0u8; 1 << 20];
                chunk[0] = 1;
                hoard.push(core::hint::black_box(chunk));
            }
            return Ok(format!("grew to {} MiB unhindered", hoard.len()));
        }
        let trap = args.is_some_and(|a| a.trap);
        if trap {
            // With panic = "abort" this is a wasm trap.
            panic!("fail_tool: deliberate trap");
        }
        Err(Error::failed("deliberate failure"))
    }
}

export_tool!(FailTool);

/// Never returns: each frame keeps a buffer live across the call, so the
/// recursion can be neither turned into a loop nor folded away.
#[allow(unconditional_recursion)] // the point: it must be stopped by the host
fn recurse(depth: u64) -> u64 {
    let frame = core::hint::black_box([depth; 32]);
    let below = recurse(core::hint::black_box(depth + 1));
    below.wrapping_add(frame[(depth % 32) as usize])
}
