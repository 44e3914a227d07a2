//! Guest SDK for agentd *tool* plugins.
//!
//! Only the `tool` world is generated here: a component embeds the type
//! section of every world its crates generate, so sharing one crate with the
//! strategy world would give every tool the agent imports too. The `types`
//! and `logging` interfaces, which both worlds import, come from
//! `agentd-plugin-types` (through `with:`), so both SDKs share one copy of
//! them and of their helpers (`Error::new`, `ToolSpec::new`, `log`, ...).

/// Raw `wit-bindgen` output, public for anything the re-exports miss.
/// `types`, `logging`, `config` and `human` are not in it: they are
/// `agentd_plugin_types`'s.
pub mod bindings {
    wit_bindgen::generate!({
        world: "tool",
        path: "../../../wit/since_v0.2.4",
        // Generated once, in agentd-plugin-types, so that both SDKs share
        // these types and the helpers on them.
        with: {
            "agentd:plugin/types@0.2.4": agentd_plugin_types::types,
            "agentd:plugin/logging@0.2.4": agentd_plugin_types::logging,
            "agentd:plugin/config@0.2.4": agentd_plugin_types::config,
            "agentd:plugin/human@0.2.4": agentd_plugin_types::human,
        },
        // Lets plugin code and tests compare this world's records
        // (commands, outputs, entries), as they can messages and errors.
        additional_derives: [PartialEq],
        pub_export_macro: true,
        export_macro_name: "export_tool",
        default_bindings_module: "agentd_tool_sdk::bindings",
    });
}

pub use agentd_plugin_types::{CONTRACT, Error, ErrorCode, Metadata, ToolSpec, config, human, log};
pub use bindings::agentd::plugin::sandbox::{self, Command, CommandOutput, DirEntry};
/// `export_tool!(MyTool)` makes `MyTool` (which implements [`Guest`]) the
/// component's `tool-api` export. Use it exactly once.
pub use bindings::export_tool;
/// The trait a tool implements.
pub use bindings::exports::agentd::plugin::tool_api::Guest;

impl Command {
    /// A command with the sandbox's defaults for everything else.
    pub fn new(command: impl Into<String>) -> Self {
        Command {
            command: command.into(),
            workdir: None,
            timeout_secs: None,
            stdin: None,
        }
    }
}

impl CommandOutput {
    /// The output as a terminal would have shown it: stdout, then stderr,
    /// each without its final newline, then `[exit code: N]` when the
    /// command failed. Tools that run commands return this so the model
    /// sees error messages and failures, not just stdout.
    ///
    /// The exit code is left out when the command timed out: it is then
    /// the code of the kill, which says nothing about the command, and each
    /// tool words the timeout its own way.
    pub fn observation(&self) -> String {
        let mut text = String::new();
        for stream in [&self.stdout, &self.stderr] {
            let stream = stream.strip_suffix('\n').unwrap_or(stream);
            if !stream.is_empty() {
                push_line(&mut text, stream);
            }
        }
        if self.exit_code != 0 && !self.timed_out {
            push_line(&mut text, &format!("[exit code: {}]", self.exit_code));
        }
        text
    }
}

/// Appends `line` to `text`, on a new line unless `text` is empty.
pub fn push_line(text: &mut String, line: &str) {
    if !text.is_empty() {
        text.push('\n');
    }
    text.push_str(line);
}

/// Deserializes a tool's arguments, turning bad input into an
/// `invalid-input` error the model can read and correct.
///
/// The arguments come from the model, so anything may arrive. Empty text
/// counts as `{}`, because models send nothing for tools without parameters.
pub fn parse_args<T: serde::de::DeserializeOwned>(arguments: &str) -> Result<T, Error> {
    let text = if arguments.trim().is_empty() {
        "{}"
    } else {
        arguments
    };
    serde_json::from_str(text).map_err(|e| Error::invalid_input(format!("invalid arguments: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize, Debug, PartialEq)]
    struct Args {
        #[serde(default)]
        text: Option<String>,
    }

    fn output(stdout: &str, stderr: &str, exit_code: i32, timed_out: bool) -> CommandOutput {
        CommandOutput {
            stdout: stdout.to_string(),
            stderr: stderr.to_string(),
            exit_code,
            timed_out,
            truncated: false,
        }
    }

    #[test]
    fn observations_join_the_streams_and_report_failures() {
        assert_eq!(output("", "", 0, false).observation(), "");
        assert_eq!(output("hi\n", "", 0, false).observation(), "hi");
        assert_eq!(output("a\n\n", "", 0, false).observation(), "a\n");
        assert_eq!(
            output("out\n", "err\n", 2, false).observation(),
            "out\nerr\n[exit code: 2]"
        );
        assert_eq!(output("", "", 1, false).observation(), "[exit code: 1]");
        assert_eq!(
            output("", "oops", -1, false).observation(),
            "oops\n[exit code: -1]"
        );
        // A timeout's exit code is the kill's.
        assert_eq!(output("part", "", 137, true).observation(), "part");
    }

    #[test]
    fn empty_arguments_are_an_empty_object() {
        assert_eq!(parse_args::<Args>(""), Ok(Args { text: None }));
        assert_eq!(parse_args::<Args>("  "), Ok(Args { text: None }));
    }

    #[test]
    fn bad_arguments_are_invalid_input() {
        for bad in ["{", "[1]", r#"{"text": 3}"#] {
            let error = parse_args::<Args>(bad).err();
            assert!(
                matches!(&error, Some(e) if e.code == ErrorCode::InvalidInput
                    && e.message.starts_with("invalid arguments: ")),
                "{bad}: {error:?}"
            );
        }
    }
}
