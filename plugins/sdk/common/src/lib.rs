//! The part of the contract that strategies and tools share: the `types`,
//! `logging`, `config` and `human` interfaces of `agentd:plugin@0.2.4`, and
//! their helpers.
//!
//! Plugins need not depend on this crate: `agentd-strategy-sdk` and
//! `agentd-tool-sdk` map both interfaces here with wit-bindgen's `with:` and
//! re-export what a plugin needs. Generating them once gives both SDKs the
//! same Rust types, so the helpers below (inherent impls, which must live in
//! the crate that defines the type) are written once too.
//!
//! Only these four interfaces are generated, through an inline world that
//! imports nothing else: a component embeds the type section of every world
//! its crates generate, so generating the `strategy` or `tool` world here
//! would give every plugin the other kind's imports (`agent` in tools,
//! `sandbox` in strategies). All four interfaces are already part of both
//! worlds, so this crate's section adds no import to any component.

/// Raw `wit-bindgen` output for `types`, `logging`, `config` and `human`, public for anything
/// the re-exports miss.
pub mod bindings {
    wit_bindgen::generate!({
        inline: "
            package agentd:plugin-types;

            world common {
                import agentd:plugin/types@0.2.4;
                import agentd:plugin/logging@0.2.4;
                import agentd:plugin/config@0.2.4;
                import agentd:plugin/human@0.2.4;
            }
        ",
        path: "../../../wit/since_v0.2.4",
        // The interfaces belong to another package than the inline world,
        // and wit-bindgen only generates those it is told to.
        generate_all,
        // Lets plugin code and tests compare messages and errors.
        additional_derives: [PartialEq],
    });
}

/// `human::ask(question)` asks the run's operator and waits for the answer
/// (`Err` when nobody answered within the agent's `input_timeout`, the run
/// was cancelled, or there is no run to ask in, as under `agentd plugin
/// call`); the wait is not counted against the step deadline.
pub use bindings::agentd::plugin::human;
pub use bindings::agentd::plugin::{config, logging, types};
pub use types::{
    Error, ErrorCode, Message, PluginMetadata as Metadata, Role, ToolCall, ToolChoice, ToolSpec,
    Usage,
};

/// The contract the SDKs build against: the host reports it for each plugin
/// (`agentd plugins`, `GET /v1/plugins`). It is defined here because both
/// SDKs build against the same WIT folder as this crate.
pub const CONTRACT: &str = "agentd:plugin@0.2.4";

impl Error {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Error {
            code,
            message: message.into(),
        }
    }

    pub fn failed(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Failed, message)
    }

    pub fn invalid_input(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidInput, message)
    }
}

impl Metadata {
    /// Pass `env!("CARGO_PKG_VERSION")` as the version: it has to expand in
    /// the plugin's crate to give the plugin's version, not the SDK's.
    pub fn new(
        name: impl Into<String>,
        version: impl Into<String>,
        description: impl Into<String>,
    ) -> Self {
        Metadata {
            name: name.into(),
            version: version.into(),
            description: description.into(),
        }
    }
}

impl ToolSpec {
    /// `parameters` is a JSON Schema object as JSON text; it goes to the
    /// model as is, so it is not checked here.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: impl Into<String>,
    ) -> Self {
        ToolSpec {
            name: name.into(),
            description: description.into(),
            parameters: parameters.into(),
        }
    }
}

/// Constructors for the messages a strategy adds to memory or sends to the
/// model. Only the strategy SDK re-exports `Message`; they are here because
/// an inherent impl must be in the crate that defines the type.
impl Message {
    fn with_role(role: Role, content: Option<String>) -> Self {
        Message {
            role,
            content,
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
        }
    }

    pub fn system(content: impl Into<String>) -> Self {
        Self::with_role(Role::System, Some(content.into()))
    }

    pub fn user(content: impl Into<String>) -> Self {
        Self::with_role(Role::User, Some(content.into()))
    }

    pub fn assistant(content: impl Into<String>) -> Self {
        Self::with_role(Role::Assistant, Some(content.into()))
    }

    /// Models often send no text along with tool calls, hence the optional
    /// content.
    pub fn assistant_with_tools(content: Option<String>, tool_calls: Vec<ToolCall>) -> Self {
        Message {
            tool_calls,
            ..Self::with_role(Role::Assistant, content)
        }
    }

    /// The host refuses a tool message that does not name the call it
    /// answers, so the id is not optional here.
    pub fn tool(
        content: impl Into<String>,
        tool_call_id: impl Into<String>,
        name: impl Into<String>,
    ) -> Self {
        Message {
            tool_call_id: Some(tool_call_id.into()),
            name: Some(name.into()),
            ..Self::with_role(Role::Tool, Some(content.into()))
        }
    }

    /// The content, with "no content" and "empty content" treated alike.
    pub fn text(&self) -> &str {
        self.content.as_deref().unwrap_or("")
    }
}

/// Logging through the host, which tags each line with the plugin's name.
/// Prefer it to stdout/stderr, which the host may not keep.
pub mod log {
    use crate::logging::{self, Level};

    pub fn trace(message: &str) {
        logging::log(Level::Trace, message);
    }

    pub fn debug(message: &str) {
        logging::log(Level::Debug, message);
    }

    pub fn info(message: &str) {
        logging::log(Level::Info, message);
    }

    pub fn warn(message: &str) {
        logging::log(Level::Warn, message);
    }

    pub fn error(message: &str) {
        logging::log(Level::Error, message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contract_names_the_package_the_bindings_come_from() {
        let wit = include_str!("../../../../wit/since_v0.2.4/agentd.wit");
        assert!(wit.contains(&format!("\npackage {CONTRACT};\n")));
    }

    #[test]
    fn tool_messages_name_the_call_they_answer() {
        let message = Message::tool("42", "call-1", "calc");
        assert_eq!(message.role, Role::Tool);
        assert_eq!(message.tool_call_id.as_deref(), Some("call-1"));
        assert_eq!(message.name.as_deref(), Some("calc"));
        assert_eq!(message.text(), "42");
    }

    #[test]
    fn missing_content_reads_as_empty_text() {
        let message = Message::assistant_with_tools(None, Vec::new());
        assert_eq!(message.role, Role::Assistant);
        assert_eq!(message.text(), "");
    }
}
