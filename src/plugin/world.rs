//! Which world, and which contract version of it, a component exports,
//! read from its export names before anything is linked; and the messages
//! for a component that exports none this host knows. Linking and calling
//! each world live with that world (`strategy.rs`, `tool.rs`).

use super::bindings::{v0_1, v0_2, Contract};

/// Which world, and which version of it, a component exports; `None` when
/// it exports neither world in any version the host knows.
pub fn detect(exports: &[String]) -> Option<(WorldKind, Contract)> {
    let has = |name: &str| exports.iter().any(|e| e == name);
    let strategies = v0_2::STRATEGY_EXPORTS
        .into_iter()
        .chain([(v0_1::STRATEGY_EXPORT, Contract::V0_1)])
        .map(|(name, c)| (name, WorldKind::Strategy, c));
    let tools = v0_2::TOOL_EXPORTS
        .into_iter()
        .chain([(v0_1::TOOL_EXPORT, Contract::V0_1)])
        .map(|(name, c)| (name, WorldKind::Tool, c));
    strategies
        .chain(tools)
        .find(|(name, ..)| has(name))
        .map(|(_, kind, contract)| (kind, contract))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_version_of_each_world_is_recognised() {
        let one = |s: &str| vec![s.to_string(), "wasi:cli/run@0.2.0".to_string()];
        assert_eq!(
            detect(&one("agentd:plugin/strategy-api@0.2.0")),
            Some((WorldKind::Strategy, Contract::V0_2))
        );
        assert_eq!(
            detect(&one("agentd:plugin/tool-api@0.1.0")),
            Some((WorldKind::Tool, Contract::V0_1))
        );
        assert_eq!(
            detect(&one("agentd:plugin/tool-api@0.2.1")),
            Some((WorldKind::Tool, Contract::V0_2_1))
        );
        assert_eq!(
            detect(&one("agentd:plugin/strategy-api@0.2.2")),
            Some((WorldKind::Strategy, Contract::V0_2_2))
        );
        assert_eq!(
            detect(&one("agentd:plugin/tool-api@0.2.2")),
            Some((WorldKind::Tool, Contract::V0_2_2))
        );
        assert_eq!(
            detect(&one("agentd:plugin/strategy-api@0.2.3")),
            Some((WorldKind::Strategy, Contract::V0_2_3))
        );
        assert_eq!(
            detect(&one("agentd:plugin/tool-api@0.2.3")),
            Some((WorldKind::Tool, Contract::V0_2_3))
        );
        assert_eq!(
            detect(&one("agentd:plugin/strategy-api@0.2.4")),
            Some((WorldKind::Strategy, Contract::V0_2_4))
        );
        assert_eq!(
            detect(&one("agentd:plugin/tool-api@0.2.4")),
            Some((WorldKind::Tool, Contract::V0_2_4))
        );
        let future = one("agentd:plugin/strategy-api@0.3.0");
        assert_eq!(detect(&future), None);
        let message = unknown_version(&future).expect("a version message");
        assert!(
            message.contains("agentd:plugin@0.3.0") && message.contains(SUPPORTED),
            "{message}"
        );
        assert_eq!(unknown_version(&one("other:thing/api@1.0.0")), None);
    }
}

/// The two worlds a plugin component can export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorldKind {
    /// Exports `strategy-api`: a component that decides each step.
    Strategy,
    /// Exports `tool-api`: a component the model can call.
    Tool,
}

/// The contract versions this host serves, for messages.
pub const SUPPORTED: &str = "0.1.0, 0.2.0, 0.2.1, 0.2.2, 0.2.3 and 0.2.4";

/// For a component that exports a plugin world of a contract version this
/// host does not know (built with a newer SDK, say), the message that says
/// so, rather than a generic "exports neither".
pub fn unknown_version(exports: &[String]) -> Option<String> {
    exports.iter().find_map(|e| {
        let rest = e
            .strip_prefix("agentd:plugin/strategy-api@")
            .or_else(|| e.strip_prefix("agentd:plugin/tool-api@"))?;
        Some(format!(
            "is built against agentd:plugin@{rest}; this agentd serves versions {SUPPORTED} (upgrade agentd, or rebuild the plugin with an SDK for one of those)"
        ))
    })
}

/// Every export name the host accepts, for the error about a component that
/// exports none of them.
pub fn known_exports() -> String {
    v0_2::STRATEGY_EXPORTS
        .iter()
        .chain(v0_2::TOOL_EXPORTS.iter())
        .map(|(name, _)| *name)
        .chain([v0_1::STRATEGY_EXPORT, v0_1::TOOL_EXPORT])
        .collect::<Vec<_>>()
        .join(", ")
}
