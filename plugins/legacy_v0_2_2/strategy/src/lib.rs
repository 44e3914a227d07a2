//! A strategy built against `agentd:plugin@0.2.2` (`wit/since_v0.2.2`),
//! before the additive 0.2.3 (the `plan` import): the host serves it
//! through its current (0.2.x) bindings, which wasmtime matches semver-wise (its
//! `strategy-api@0.2.2` export and its `agent@0.2.2`, `config@0.2.2` and
//! `logging@0.2.2` imports). Each step reads its agent's configuration and
//! its settings (so the 0.2.2 imports are really called), finishes the run
//! and answers `v0.2.2: step N of AGENT`, with the number of settings when
//! there are any.

wit_bindgen::generate!({
    world: "strategy",
    path: "../../../wit/since_v0.2.2",
});

use agentd::plugin::agent;
use agentd::plugin::config;
use agentd::plugin::logging::{self, Level};
use agentd::plugin::types::{Error, PluginMetadata};
use exports::agentd::plugin::strategy_api::{Guest, StrategyDefaults};

struct LegacyStrategy;

impl Guest for LegacyStrategy {
    fn metadata() -> PluginMetadata {
        PluginMetadata {
            name: "legacy_v0_2_2_strategy".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "Test strategy built against agentd:plugin@0.2.2.".into(),
        }
    }

    fn defaults() -> StrategyDefaults {
        StrategyDefaults {
            system_prompt: None,
            next_step_prompt: None,
            max_steps: Some(3),
            tool_choice: None,
            special_tools: None,
        }
    }

    fn step() -> Result<String, Error> {
        logging::log(Level::Info, "0.2.2 strategy stepping");
        let config = agent::config();
        let keys = config::keys();
        agent::finish();
        let settings = if keys.is_empty() {
            String::new()
        } else {
            format!(" ({} config keys)", keys.len())
        };
        Ok(format!(
            "v0.2.2: step {} of {}{settings}",
            config.current_step, config.name
        ))
    }
}

export!(LegacyStrategy);
