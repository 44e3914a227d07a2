//! Guest SDK for agentd *strategy* plugins.
//!
//! Only the `strategy` world is generated here: a component embeds the type
//! section of every world its crates generate, so sharing one crate with the
//! tool world would give every strategy the sandbox imports too.

/// Raw `wit-bindgen` output, public for anything the re-exports miss.
pub mod bindings {
    wit_bindgen::generate!({
        world: "strategy",
        path: "../../../wit/since_v0.2.0",
        // Lets plugin code and tests compare messages and errors.
        additional_derives: [PartialEq],
        pub_export_macro: true,
        export_macro_name: "export_strategy",
        default_bindings_module: "agentd_strategy_sdk::bindings",
    });
}

/// The contract this SDK builds against: the host reports it for each
/// plugin (`agentd plugins`, `GET /v1/plugins`).
pub const CONTRACT: &str = "agentd:plugin@0.2.0";

pub use bindings::agentd::plugin::agent::{
    self, AgentConfig, ChatError, ChatRequest, ChatResponse, FinishReason,
};
pub use bindings::agentd::plugin::types::{
    Error, ErrorCode, Message, PluginMetadata as Metadata, Role, ToolCall, ToolChoice, ToolSpec,
    Usage,
};
/// `export_strategy!(MyStrategy)` makes `MyStrategy` (which implements
/// [`Guest`]) the component's `strategy-api` export. Use it exactly once.
pub use bindings::export_strategy;
/// The trait a strategy implements.
pub use bindings::exports::agentd::plugin::strategy_api::Guest;
/// What a strategy returns from `Guest::defaults`.
pub use bindings::exports::agentd::plugin::strategy_api::StrategyDefaults as Defaults;

include!("../../common.rs");

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
