//! A tool built against `agentd:plugin@0.2.0` (`wit/since_v0.2.0`), before
//! the additive 0.2.1: the host serves it through its 0.2.1 bindings, which
//! wasmtime matches semver-wise (its `tool-api@0.2.0` export and its
//! `logging@0.2.0` import). It answers `v0.2.0: <its arguments>`.

wit_bindgen::generate!({
    world: "tool",
    path: "../../../wit/since_v0.2.0",
});

use agentd::plugin::logging::{self, Level};
use agentd::plugin::types::{Error, PluginMetadata, ToolSpec};
use exports::agentd::plugin::tool_api::Guest;

const NAME: &str = "legacy_v0_2_tool";

struct LegacyTool;

impl Guest for LegacyTool {
    fn metadata() -> PluginMetadata {
        PluginMetadata {
            name: NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "Test tool built against agentd:plugin@0.2.0.".into(),
        }
    }

    fn spec() -> ToolSpec {
        ToolSpec {
            name: NAME.into(),
            description: "Answers with its arguments.".into(),
            parameters: r#"{"type":"object","properties":{"text":{"type":"string"}}}"#.into(),
        }
    }

    fn invoke(arguments: String) -> Result<String, Error> {
        logging::log(Level::Info, "0.2.0 tool invoked");
        Ok(format!("v0.2.0: {arguments}"))
    }
}

export!(LegacyTool);
