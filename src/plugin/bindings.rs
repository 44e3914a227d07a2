//! Host bindings for the two worlds of `wit/agentd.wit`. The tool world
//! reuses the strategy world's `types` and `logging` so both share one set of
//! Rust types.

pub mod strategy {
    wasmtime::component::bindgen!({
        world: "strategy",
        path: "wit",
        imports: { default: async | trappable },
        exports: { default: async },
    });
}

pub mod tool {
    wasmtime::component::bindgen!({
        world: "tool",
        path: "wit",
        imports: { default: async | trappable },
        exports: { default: async },
        with: {
            "agentd:plugin/types": super::strategy::agentd::plugin::types,
            "agentd:plugin/logging": super::strategy::agentd::plugin::logging,
        },
    });
}

pub use strategy::agentd::plugin::types;

/// The export names that tell which world a component implements.
pub const STRATEGY_EXPORT: &str = "agentd:plugin/strategy-api@0.1.0";
pub const TOOL_EXPORT: &str = "agentd:plugin/tool-api@0.1.0";
