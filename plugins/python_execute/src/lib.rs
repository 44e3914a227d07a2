//! OpenManus's `python_execute` tool, run with `python3` in the run's
//! sandbox rather than in the daemon's process (OpenManus `exec`s the code
//! in a child of its own interpreter).
//!
//! Each call is a fresh `python3` process (a one-off `run`, not the
//! persistent shell), as in OpenManus, where every call gets a new process
//! and fresh globals. The code goes in on stdin, so it never passes through
//! a shell and needs no temporary file.
//!
//! Departures from OpenManus:
//! - the result is text, not the `{'observation': ..., 'success': ...}`
//!   dict: stdout, then stderr (so a traceback shows in full, where
//!   OpenManus keeps only `str(exception)`), then `[exit code: N]` when the
//!   code failed. A failure is still a successful call, as in OpenManus: the
//!   model reads the traceback and fixes its code;
//! - the time limit is the sandbox's command timeout, not 5 seconds, and
//!   output printed before a timeout is kept (`python3 -u`), where OpenManus
//!   returns only the timeout message.

use agentd_tool_sdk::{
    Command, CommandOutput, Error, Guest, Metadata, ToolSpec, export_tool, parse_args, push_line,
    sandbox,
};
use serde::Deserialize;

const NAME: &str = "python_execute";
const DESCRIPTION: &str = "Executes Python code string. Note: Only print outputs are visible, function return values are not captured. Use print statements to see results.";
const PARAMETERS: &str = r#"{"type":"object","properties":{"code":{"type":"string","description":"The Python code to execute."}},"required":["code"]}"#;

/// `-u`: unbuffered, so what the code printed before a timeout killed it
/// reaches the output; `-`: the program is stdin.
const COMMAND: &str = "python3 -u -";
/// OpenManus says "Execution timeout after {timeout} seconds"; the host's
/// note in stderr already gives the limit it applied.
const TIMED_OUT: &str = "Execution timeout: the code was stopped at the sandbox's time limit.";
/// What `sh` exits with when it cannot find the program.
const NOT_FOUND_EXIT_CODE: i32 = 127;

#[derive(Deserialize)]
struct Args {
    code: String,
}

struct PythonExecute;

impl Guest for PythonExecute {
    fn metadata() -> Metadata {
        Metadata::new(
            NAME,
            env!("CARGO_PKG_VERSION"),
            "OpenManus's python_execute tool: runs Python code with python3 in the run's sandbox.",
        )
    }

    fn spec() -> ToolSpec {
        ToolSpec::new(NAME, DESCRIPTION, PARAMETERS)
    }

    fn invoke(arguments: String) -> Result<String, Error> {
        invoke(&mut Imports, &arguments)
    }
}

export_tool!(PythonExecute);

/// The sandbox as this tool uses it. A trait rather than direct calls so the
/// logic can be tested natively against a fake.
trait Runner {
    fn run(&mut self, command: &Command) -> Result<CommandOutput, Error>;
}

/// The real sandbox, through the component's imports.
struct Imports;

impl Runner for Imports {
    fn run(&mut self, command: &Command) -> Result<CommandOutput, Error> {
        sandbox::run(command)
    }
}

/// Sandbox errors are returned unchanged, their code included.
fn invoke(runner: &mut impl Runner, arguments: &str) -> Result<String, Error> {
    let args: Args = parse_args(arguments)?;
    let command = Command {
        stdin: Some(args.code),
        ..Command::new(COMMAND)
    };
    let output = runner.run(&command)?;
    if output.exit_code == NOT_FOUND_EXIT_CODE && is_python_missing(&output.stderr) {
        // Not the code's fault: an observation would send the model
        // rewriting code that never ran.
        return Err(Error::failed(format!(
            "python3 is not installed in this sandbox ({})",
            output.stderr.trim()
        )));
    }
    let mut text = output.observation();
    if output.timed_out {
        push_line(&mut text, TIMED_OUT);
    }
    Ok(text)
}

/// `sh: python3: not found` (dash, busybox) or `sh: 1: python3: not found`;
/// the code's own exit code 127 prints neither.
fn is_python_missing(stderr: &str) -> bool {
    stderr.lines().any(|line| {
        line.contains("python3: not found") || line.contains("python3: command not found")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentd_tool_sdk::ErrorCode;

    /// A sandbox answering one scripted output and recording the command.
    struct FakeRunner {
        reply: Option<Result<CommandOutput, Error>>,
        commands: Vec<Command>,
    }

    fn fake(stdout: &str, stderr: &str, exit_code: i32, timed_out: bool) -> FakeRunner {
        FakeRunner {
            reply: Some(Ok(CommandOutput {
                stdout: stdout.to_string(),
                stderr: stderr.to_string(),
                exit_code,
                timed_out,
                truncated: false,
            })),
            commands: Vec::new(),
        }
    }

    impl Runner for FakeRunner {
        fn run(&mut self, command: &Command) -> Result<CommandOutput, Error> {
            self.commands.push(command.clone());
            self.reply.take().expect("one call only")
        }
    }

    #[test]
    fn the_code_goes_to_python3_on_stdin() {
        let mut runner = fake("3\n", "", 0, false);
        let code = "x = 'it''s'\nprint(1 + 2)";
        let arguments = format!(r#"{{"code":{code:?}}}"#);
        assert_eq!(invoke(&mut runner, &arguments), Ok("3".to_string()));
        assert_eq!(
            runner.commands,
            [Command {
                command: "python3 -u -".to_string(),
                workdir: None,
                timeout_secs: None,
                stdin: Some(code.to_string()),
            }]
        );
    }

    #[test]
    fn errors_show_the_traceback_and_exit_code() {
        let traceback = "Traceback (most recent call last):\n  File \"<stdin>\", line 2, in <module>\nZeroDivisionError: division by zero\n";
        let mut runner = fake("before\n", traceback, 1, false);
        let result = invoke(&mut runner, r#"{"code":"print('before')\n1/0"}"#);
        assert_eq!(
            result,
            Ok(format!("before\n{}\n[exit code: 1]", traceback.trim_end()))
        );
    }

    #[test]
    fn timeouts_keep_the_output_so_far() {
        let note = "[command timed out after 5s and was killed]";
        let mut runner = fake("tick\n", note, -1, true);
        let result = invoke(&mut runner, r#"{"code":"while True: pass"}"#);
        assert_eq!(result, Ok(format!("tick\n{note}\n{TIMED_OUT}")));
    }

    #[test]
    fn a_missing_python3_is_an_error_not_an_observation() {
        let mut runner = fake("", "sh: python3: not found\n", 127, false);
        let error = invoke(&mut runner, r#"{"code":"print(1)"}"#).err();
        assert_eq!(
            error,
            Some(Error::failed(
                "python3 is not installed in this sandbox (sh: python3: not found)"
            ))
        );

        // The code's own exit code 127 is the code's business.
        let mut runner = fake("", "", 127, false);
        let result = invoke(&mut runner, r#"{"code":"import sys; sys.exit(127)"}"#);
        assert_eq!(result, Ok("[exit code: 127]".to_string()));
    }

    #[test]
    fn sandbox_errors_keep_their_code_and_message() {
        let down = Error::new(ErrorCode::SandboxUnavailable, "no container engine");
        let mut runner = FakeRunner {
            reply: Some(Err(down.clone())),
            commands: Vec::new(),
        };
        assert_eq!(invoke(&mut runner, r#"{"code":"print(1)"}"#), Err(down));
    }

    #[test]
    fn missing_code_is_invalid_input() {
        let mut runner = fake("", "", 0, false);
        for arguments in ["{}", r#"{"code":1}"#] {
            let error = invoke(&mut runner, arguments).err();
            assert!(
                matches!(&error, Some(e) if e.code == ErrorCode::InvalidInput),
                "{arguments}: {error:?}"
            );
        }
        assert!(runner.commands.is_empty());
    }

    #[test]
    fn the_spec_is_openmanus_shaped() {
        let spec = PythonExecute::spec();
        assert_eq!(spec.name, PythonExecute::metadata().name);
        let schema: serde_json::Value =
            serde_json::from_str(&spec.parameters).expect("parameters are JSON");
        assert_eq!(schema["required"], serde_json::json!(["code"]));
        assert_eq!(schema["properties"]["code"]["type"], "string");
    }
}
