//! OpenManus's `bash` tool: runs commands in the run's persistent sandbox
//! shell, so `cd` and exported variables carry over from one call to the
//! next, as in OpenManus's long-lived bash process.
//!
//! Departures from OpenManus, each because agentd's shell works otherwise:
//! - a command always runs to completion or to its time limit, after which
//!   the host stops it, so there is no "still running, exit code `-1`"
//!   state: the description drops the parts about sending an empty command
//!   to read more logs, text to a running process's stdin, or `ctrl+c`, and
//!   such calls get an explanation instead of being run;
//! - stdout and stderr are both returned (OpenManus shows only stderr, as
//!   `Error: ...`, when there is any), followed by the exit code when it is
//!   not 0, so the model sees what failed and how;
//! - `restart` is in the parameter schema, since a model cannot use a
//!   parameter it is not told about.

use agentd_tool_sdk::{
    CommandOutput, Error, Guest, Metadata, ToolSpec, export_tool, parse_args, push_line, sandbox,
};
use serde::Deserialize;

const NAME: &str = "bash";
const DESCRIPTION: &str = "Execute a bash command in the terminal.
* Long running commands: For commands that may run indefinitely, it should be run in the background and the output should be redirected to a file, e.g. command = `python3 app.py > server.log 2>&1 &`.
* Interactive: Each command runs until it exits; input cannot be sent to a running process, so give programs their input up front (pipes, here-documents, flags such as `-y`).
* Session: The shell session persists across calls, so `cd` and exported variables carry over. Set `restart` to true to start a fresh session.
* Timeout: If a command execution result says \"Command timed out\", the assistant should retry running the command in the background.
";
const PARAMETERS: &str = r#"{"type":"object","properties":{"command":{"type":"string","description":"The bash command to execute."},"restart":{"type":"boolean","description":"Restart the shell session."}},"required":["command"]}"#;

/// OpenManus's answer to a restart.
const RESTARTED: &str = "tool has been restarted.";
/// Starts with the phrase the description tells the model to look for.
const TIMED_OUT: &str = "Command timed out: it was stopped at the sandbox's time limit. Run long-running commands in the background, with their output redirected to a file.";
const NO_COMMAND: &str = "no command provided.";
/// For an empty command, which OpenManus uses to read more output of a
/// command still running.
const NOTHING_RUNNING: &str = "no command provided. There are no additional logs to view: every command runs until it exits or times out, and its output is returned then.";
/// For `ctrl+c`, which OpenManus sends to a command still running.
const NOTHING_TO_INTERRUPT: &str = "There is no running process to interrupt: every command runs until it exits, and one that runs past the time limit is stopped.";

#[derive(Deserialize)]
struct Args {
    /// Optional although the schema requires it: a restart needs none.
    #[serde(default)]
    command: Option<String>,
    /// `null` counts as false: models send it for parameters they mean to
    /// leave out.
    #[serde(default)]
    restart: Option<bool>,
}

struct Bash;

impl Guest for Bash {
    fn metadata() -> Metadata {
        Metadata::new(
            NAME,
            env!("CARGO_PKG_VERSION"),
            "OpenManus's bash tool: runs commands in the run's persistent sandbox shell.",
        )
    }

    fn spec() -> ToolSpec {
        ToolSpec::new(NAME, DESCRIPTION, PARAMETERS)
    }

    fn invoke(arguments: String) -> Result<String, Error> {
        invoke(&mut Imports, &arguments)
    }
}

export_tool!(Bash);

/// The sandbox as this tool uses it. A trait rather than direct calls so the
/// logic can be tested natively against a fake.
trait Shell {
    fn shell(&mut self, command: &str) -> Result<CommandOutput, Error>;
    fn restart_shell(&mut self) -> Result<(), Error>;
}

/// The real sandbox, through the component's imports.
struct Imports;

impl Shell for Imports {
    fn shell(&mut self, command: &str) -> Result<CommandOutput, Error> {
        // The sandbox's configured timeout: the operator chose it.
        sandbox::shell(command, None)
    }

    fn restart_shell(&mut self) -> Result<(), Error> {
        sandbox::restart_shell()
    }
}

/// Sandbox errors are returned unchanged: their code tells the model (and
/// the host's logs) whether the sandbox is down or the operation failed.
fn invoke(shell: &mut impl Shell, arguments: &str) -> Result<String, Error> {
    let args: Args = parse_args(arguments)?;
    if args.restart == Some(true) {
        // As in OpenManus, a restart runs no command, even if given one.
        shell.restart_shell()?;
        return Ok(RESTARTED.to_string());
    }
    let Some(command) = args.command else {
        return Err(Error::invalid_input(NO_COMMAND));
    };
    let trimmed = command.trim();
    if trimmed.is_empty() {
        return Err(Error::invalid_input(NOTHING_RUNNING));
    }
    if trimmed.eq_ignore_ascii_case("ctrl+c") {
        return Ok(NOTHING_TO_INTERRUPT.to_string());
    }

    let output = shell.shell(&command)?;
    let mut text = output.observation();
    if output.timed_out {
        push_line(&mut text, TIMED_OUT);
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentd_tool_sdk::ErrorCode;
    use std::collections::VecDeque;

    /// A shell answering from a script and recording what it was asked.
    #[derive(Default)]
    struct FakeShell {
        replies: VecDeque<Result<CommandOutput, Error>>,
        commands: Vec<String>,
        restarts: usize,
        restart_error: Option<Error>,
    }

    impl FakeShell {
        fn reply(stdout: &str, stderr: &str, exit_code: i32, timed_out: bool) -> Self {
            FakeShell {
                replies: VecDeque::from([Ok(CommandOutput {
                    stdout: stdout.to_string(),
                    stderr: stderr.to_string(),
                    exit_code,
                    timed_out,
                    truncated: false,
                })]),
                ..FakeShell::default()
            }
        }
    }

    impl Shell for FakeShell {
        fn shell(&mut self, command: &str) -> Result<CommandOutput, Error> {
            self.commands.push(command.to_string());
            self.replies.pop_front().expect("no scripted reply")
        }

        fn restart_shell(&mut self) -> Result<(), Error> {
            self.restarts += 1;
            self.restart_error.clone().map_or(Ok(()), Err)
        }
    }

    #[test]
    fn runs_the_command_in_the_persistent_shell() {
        let mut shell = FakeShell::reply("/workspace\n", "", 0, false);
        let result = invoke(&mut shell, r#"{"command":"cd /workspace && pwd"}"#);
        assert_eq!(result, Ok("/workspace".to_string()));
        assert_eq!(shell.commands, ["cd /workspace && pwd"]);
        assert_eq!(shell.restarts, 0);
    }

    #[test]
    fn failures_show_stderr_and_the_exit_code() {
        let mut shell = FakeShell::reply("partial\n", "ls: nope: No such file\n", 2, false);
        assert_eq!(
            invoke(&mut shell, r#"{"command":"ls nope"}"#),
            Ok("partial\nls: nope: No such file\n[exit code: 2]".to_string())
        );

        let mut shell = FakeShell::reply("", "", 1, false);
        assert_eq!(
            invoke(&mut shell, r#"{"command":"false"}"#),
            Ok("[exit code: 1]".to_string())
        );
    }

    #[test]
    fn no_output_is_an_empty_result() {
        let mut shell = FakeShell::reply("", "", 0, false);
        assert_eq!(
            invoke(&mut shell, r#"{"command":"true"}"#),
            Ok(String::new())
        );
    }

    #[test]
    fn timeouts_are_reported_with_the_output_so_far() {
        let note = "command timed out after 2s; it was killed";
        let mut shell = FakeShell::reply("tick\n", note, 137, true);
        let result = invoke(&mut shell, r#"{"command":"sleep 100"}"#);
        assert_eq!(result, Ok(format!("tick\n{note}\n{TIMED_OUT}")));
        assert!(TIMED_OUT.starts_with("Command timed out"));
        assert!(DESCRIPTION.contains("\"Command timed out\""));
    }

    #[test]
    fn restart_restarts_the_shell_and_runs_nothing() {
        let mut shell = FakeShell::default();
        let result = invoke(&mut shell, r#"{"command":"ls","restart":true}"#);
        assert_eq!(result, Ok("tool has been restarted.".to_string()));
        assert_eq!(shell.restarts, 1);
        assert!(shell.commands.is_empty());

        let result = invoke(&mut shell, r#"{"restart":true}"#);
        assert_eq!(result, Ok("tool has been restarted.".to_string()));
        assert_eq!(shell.restarts, 2);
    }

    #[test]
    fn sandbox_errors_keep_their_code_and_message() {
        let down = Error::new(ErrorCode::SandboxUnavailable, "docker is not running");
        let mut shell = FakeShell {
            replies: VecDeque::from([Err(down.clone())]),
            ..FakeShell::default()
        };
        assert_eq!(invoke(&mut shell, r#"{"command":"ls"}"#), Err(down.clone()));

        let mut shell = FakeShell {
            restart_error: Some(down.clone()),
            ..FakeShell::default()
        };
        assert_eq!(invoke(&mut shell, r#"{"restart":true}"#), Err(down));
    }

    #[test]
    fn missing_or_empty_commands_are_refused_without_running() {
        let mut shell = FakeShell::default();
        let nothing = [
            "",
            "{}",
            r#"{"restart":false}"#,
            r#"{"command":null,"restart":null}"#,
        ];
        for arguments in nothing {
            assert_eq!(
                invoke(&mut shell, arguments),
                Err(Error::invalid_input(NO_COMMAND)),
                "{arguments}"
            );
        }
        let result = invoke(&mut shell, r#"{"command":"  "}"#);
        assert_eq!(result, Err(Error::invalid_input(NOTHING_RUNNING)));
        assert!(shell.commands.is_empty());
    }

    #[test]
    fn ctrl_c_is_explained_not_run() {
        let mut shell = FakeShell::default();
        for command in ["ctrl+c", " CTRL+C\n"] {
            let arguments = format!(r#"{{"command":{command:?}}}"#);
            assert_eq!(
                invoke(&mut shell, &arguments),
                Ok(NOTHING_TO_INTERRUPT.to_string())
            );
        }
        assert!(shell.commands.is_empty());
    }

    #[test]
    fn bad_arguments_are_invalid_input() {
        let mut shell = FakeShell::default();
        let error = invoke(&mut shell, r#"{"command":3}"#).err();
        assert!(matches!(error, Some(e) if e.code == ErrorCode::InvalidInput));
    }

    #[test]
    fn the_spec_is_openmanus_shaped() {
        let spec = Bash::spec();
        assert_eq!(spec.name, Bash::metadata().name);
        let schema: serde_json::Value =
            serde_json::from_str(&spec.parameters).expect("parameters are JSON");
        assert_eq!(schema["required"], serde_json::json!(["command"]));
        assert_eq!(schema["properties"]["restart"]["type"], "boolean");
    }
}
