//! Host bindings for every released version of the contract in `wit/`
//! (one folder per version, `wit/since_vX.Y.Z`). The host serves each
//! version a component may have been built against: `v0_2` is the current
//! one, which the host's own code speaks; `v0_1` is adapted to it (types
//! converted in `compat_v0_1.rs`, imports served beside the current ones in
//! `strategy_host.rs` and `tool_host.rs`). In each version the tool world reuses the strategy
//! world's `types` and `logging`, so both worlds share one set of Rust types.

/// `agentd:plugin@0.2.x`, the current contract, generated from 0.2.4 (which
/// only added to 0.2.3: `agent.chat-with-memory`; 0.2.3 only added to 0.2.2
/// the strategy world's `plan` import; 0.2.2 only added
/// the `human` import to 0.2.1; 0.2.1 only added the `config` import and the
/// `http-tool` world to 0.2.0). wasmtime matches names semver-wise, so a
/// 0.2.0 to 0.2.3 component's imports are served by these 0.2.4 bindings
/// and its `tool-api@0.2.0` export is found under `tool-api@0.2.4`.
pub mod v0_2 {
    // Generated from the WIT by `bindgen!`; the WIT's own comments are the docs.
    #[allow(missing_docs)]
    pub mod strategy {
        wasmtime::component::bindgen!({
            world: "strategy",
            path: "wit/since_v0.2.4",
            imports: { default: async | trappable },
            exports: { default: async },
        });
    }

    // Generated from the WIT by `bindgen!`; the WIT's own comments are the docs.
    #[allow(missing_docs)]
    pub mod tool {
        wasmtime::component::bindgen!({
            world: "tool",
            path: "wit/since_v0.2.4",
            imports: { default: async | trappable },
            exports: { default: async },
            with: {
                "agentd:plugin/types": super::strategy::agentd::plugin::types,
                "agentd:plugin/logging": super::strategy::agentd::plugin::logging,
                "agentd:plugin/config": super::strategy::agentd::plugin::config,
                "agentd:plugin/human": super::strategy::agentd::plugin::human,
            },
        });
    }

    /// The export names that mark a component as a 0.2.x strategy, newest
    /// first; `world.rs` reads them before anything is linked.
    pub const STRATEGY_EXPORTS: [(&str, super::Contract); 5] = [
        ("agentd:plugin/strategy-api@0.2.4", super::Contract::V0_2_4),
        ("agentd:plugin/strategy-api@0.2.3", super::Contract::V0_2_3),
        ("agentd:plugin/strategy-api@0.2.2", super::Contract::V0_2_2),
        ("agentd:plugin/strategy-api@0.2.1", super::Contract::V0_2_1),
        ("agentd:plugin/strategy-api@0.2.0", super::Contract::V0_2),
    ];
    /// The export names that mark a component as a 0.2.x tool, newest first.
    pub const TOOL_EXPORTS: [(&str, super::Contract); 5] = [
        ("agentd:plugin/tool-api@0.2.4", super::Contract::V0_2_4),
        ("agentd:plugin/tool-api@0.2.3", super::Contract::V0_2_3),
        ("agentd:plugin/tool-api@0.2.2", super::Contract::V0_2_2),
        ("agentd:plugin/tool-api@0.2.1", super::Contract::V0_2_1),
        ("agentd:plugin/tool-api@0.2.0", super::Contract::V0_2),
    ];
}

/// `agentd:plugin@0.1.0`: strategies without defaults of their own.
pub mod v0_1 {
    // Generated from the WIT by `bindgen!`; the WIT's own comments are the docs.
    #[allow(missing_docs)]
    pub mod strategy {
        wasmtime::component::bindgen!({
            world: "strategy",
            path: "wit/since_v0.1.0",
            imports: { default: async | trappable },
            exports: { default: async },
        });
    }

    // Generated from the WIT by `bindgen!`; the WIT's own comments are the docs.
    #[allow(missing_docs)]
    pub mod tool {
        wasmtime::component::bindgen!({
            world: "tool",
            path: "wit/since_v0.1.0",
            imports: { default: async | trappable },
            exports: { default: async },
            with: {
                "agentd:plugin/types": super::strategy::agentd::plugin::types,
                "agentd:plugin/logging": super::strategy::agentd::plugin::logging,
            },
        });
    }

    /// The export name that marks a component as a 0.1.0 strategy; `world.rs`
    /// reads it before anything is linked.
    pub const STRATEGY_EXPORT: &str = "agentd:plugin/strategy-api@0.1.0";
    /// The export name that marks a component as a 0.1.0 tool.
    pub const TOOL_EXPORT: &str = "agentd:plugin/tool-api@0.1.0";
}

/// The current contract's shared types, which the rest of the host uses.
pub use v0_2::strategy::agentd::plugin::types;

/// A contract version a loaded component was built against, as
/// `GET /v1/plugins` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Contract {
    /// `agentd:plugin@0.1.0`: served through the adapters in `compat_v0_1.rs`.
    V0_1,
    /// `agentd:plugin@0.2.0`: served by the 0.2.4 bindings (semver-compatible).
    V0_2,
    /// `agentd:plugin@0.2.1`: served by the 0.2.4 bindings (semver-compatible).
    V0_2_1,
    /// `agentd:plugin@0.2.2`: served by the 0.2.4 bindings (semver-compatible).
    V0_2_2,
    /// `agentd:plugin@0.2.3`: served by the 0.2.4 bindings (semver-compatible).
    V0_2_3,
    /// `agentd:plugin@0.2.4`: the version the host's own code speaks.
    V0_2_4,
}

impl Contract {
    /// The newest version, which the host's own code speaks and the SDKs build
    /// against; every other version is adapted to it.
    pub const CURRENT: Contract = Contract::V0_2_4;

    /// The version as `X.Y.Z`, the form `GET /v1/plugins` and messages use.
    pub fn as_str(self) -> &'static str {
        match self {
            Contract::V0_1 => "0.1.0",
            Contract::V0_2 => "0.2.0",
            Contract::V0_2_1 => "0.2.1",
            Contract::V0_2_2 => "0.2.2",
            Contract::V0_2_3 => "0.2.3",
            Contract::V0_2_4 => "0.2.4",
        }
    }
}

impl std::fmt::Display for Contract {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
