//! Guest SDK for agentd *strategy* plugins.
//!
//! Only the `strategy` world is generated here: a component embeds the type
//! section of every world its crates generate, so sharing one crate with the
//! tool world would give every strategy the sandbox imports too. The
//! `types` and `logging` interfaces, which both worlds import, come from
//! `agentd-plugin-types` (through `with:`), so both SDKs share one copy of
//! them and of their helpers (`Error::new`, `Message::user`, `log`, ...).

/// Raw `wit-bindgen` output, public for anything the re-exports miss.
/// `types`, `logging`, `config` and `human` are not in it: they are
/// `agentd_plugin_types`'s.
pub mod bindings {
    wit_bindgen::generate!({
        world: "strategy",
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
        // (requests, responses, configs), as they can messages and errors.
        additional_derives: [PartialEq],
        pub_export_macro: true,
        export_macro_name: "export_strategy",
        default_bindings_module: "agentd_strategy_sdk::bindings",
    });
}

/// The host as a trait (`Host`) and its real implementation (`Imports`),
/// so a strategy's step can be tested natively and wrapped.
pub mod host;

/// What the bundled strategies agree on when they tell the model about the
/// host's answers: special tools, `max_observe`, the call limit, a spent
/// token budget, a cut answer.
pub mod rules;

/// A scripted host for native tests of a strategy's step: replies from a
/// script, tool results from a table, everything the step did recorded.
pub mod testing;

pub use agentd_plugin_types::{
    CONTRACT, Error, ErrorCode, Message, Metadata, Role, ToolCall, ToolChoice, ToolSpec, Usage,
    config, human, log,
};
pub use bindings::agentd::plugin::agent::{
    self, AgentConfig, ChatError, ChatRequest, ChatResponse, FinishReason, MemoryChatRequest,
};
/// The run's plan (contract 0.2.3): `plan::current()` and
/// `plan::publish(&plan)`; the host records each change as a `plan_changed`
/// event and keeps the latest in the run record.
pub use bindings::agentd::plugin::plan::{self, Plan, PlanStep, StepStatus};
/// `export_strategy!(MyStrategy)` makes `MyStrategy` (which implements
/// [`Guest`]) the component's `strategy-api` export. Use it exactly once.
pub use bindings::export_strategy;
/// The trait a strategy implements.
pub use bindings::exports::agentd::plugin::strategy_api::Guest;
/// What a strategy returns from `Guest::defaults`.
pub use bindings::exports::agentd::plugin::strategy_api::StrategyDefaults as Defaults;
