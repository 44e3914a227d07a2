//! A tool built against `agentd:plugin@0.2.1` (`wit/since_v0.2.1`), before
//! the additive 0.2.2: the host serves it through its 0.2.2 bindings, which
//! wasmtime matches semver-wise (its `tool-api@0.2.1` export and its
//! `logging@0.2.1` and `config@0.2.1` imports). It answers
//! `v0.2.1: <its arguments>`, after `config.keys()` (so the 0.2.1 import is
//! really called), with the number of keys when there are any.

wit_bindgen::generate!({
    world: "tool",
    path: "../../../wit/since_v0.2.1",
});

use agentd::plugin::config;
use agentd::plugin::logging::{self, Level};
use agentd::plugin::types::{Error, PluginMetadata, ToolSpec};
use exports::agentd::plugin::tool_api::Guest;

const NAME: &str = "legacy_v0_2_1_tool";

struct LegacyTool;

impl Guest for LegacyTool {
    fn metadata() -> PluginMetadata {
        PluginMetadata {
            name: NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "Test tool built against agentd:plugin@0.2.1.".into(),
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
        logging::log(Level::Info, "0.2.1 tool invoked");
        let keys = config::keys();
        if keys.is_empty() {
            Ok(format!("v0.2.1: {arguments}"))
        } else {
            Ok(format!("v0.2.1 ({} config keys): {arguments}", keys.len()))
        }
    }
}

export!(LegacyTool);
