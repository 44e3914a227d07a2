//! A tool built against `agentd:plugin@0.1.0` (`wit/since_v0.1.0`): it
//! answers `legacy: <its arguments>`, and logs through the 0.1.0 logging
//! import, so the host's adaptation of that version is exercised.

wit_bindgen::generate!({
    world: "tool",
    path: "../../../wit/since_v0.1.0",
});

use agentd::plugin::logging::{self, Level};
use agentd::plugin::types::{Error, PluginMetadata, ToolSpec};
use exports::agentd::plugin::tool_api::Guest;

const NAME: &str = "legacy_tool";

struct LegacyTool;

impl Guest for LegacyTool {
    fn metadata() -> PluginMetadata {
        PluginMetadata {
            name: NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "Test tool built against agentd:plugin@0.1.0.".into(),
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
        logging::log(Level::Info, "legacy tool invoked");
        Ok(format!("legacy: {arguments}"))
    }
}

export!(LegacyTool);
