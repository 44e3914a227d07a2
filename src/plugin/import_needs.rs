//! What each import of a component needs from the operator: which
//! `[plugins.<name>]` grant makes it do something, and whether agentd
//! provides it at all. Read from the import's name alone, so that
//! `agentd plugin check` can tell an author, before any daemon is involved,
//! what an operator will have to grant (deny by default: an import without
//! its grant links, but refuses or sees nothing). Which key a grant is comes
//! from [`grants_for`], the daemon's own rule; this adds whether agentd
//! provides the import and what it gives.

use serde::Serialize;

use super::meta::grants_for;

/// One import of a component and what it needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImportNeed {
    /// The import's name as the component gives it
    /// (`wasi:http/outgoing-handler@0.2.12`).
    pub import: String,
    /// Whether agentd links something for it. `false` means the component
    /// cannot load in this host: the import is not one agentd offers.
    pub provided: bool,
    /// The `[plugins.<name>]` keys the operator sets for it to do
    /// anything ([`grants_for`], the rule `GET /v1/plugins` uses too);
    /// empty when it works without a grant (or never does).
    pub grants: Vec<&'static str>,
    /// What the plugin gets through it, in a few words.
    pub note: &'static str,
}

/// What `import` needs. Versions are ignored: the linker decides whether
/// a version fits, this only says what a family of imports is for.
pub fn classify(import: &str) -> ImportNeed {
    let family = import.split('@').next().unwrap_or(import);
    let (provided, note) = match family {
        "agentd:plugin/config" => (
            true,
            "the plugin's settings; empty unless [plugins.<name>] config is set",
        ),
        "agentd:plugin/human" => (
            true,
            "asks the run's operator a question and waits; needs no grant (fails outside a run)",
        ),
        "agentd:plugin/plan" => (
            true,
            "reads and publishes the run's plan, which the run's events and record show; needs no grant (a strategy's own record)",
        ),
        f if f.starts_with("agentd:plugin/") => (true, "the agentd contract"),
        "wasi:http/outgoing-handler" => (
            true,
            "outgoing HTTP; every request is refused unless its host is in allow_hosts",
        ),
        "wasi:http/types" => (true, "HTTP's types"),
        "wasi:cli/environment" => (true, "environment variables; empty unless granted"),
        f if f.starts_with("wasi:sockets/") => (
            true,
            "raw sockets: linked, but every socket is refused (use wasi:http with allow_hosts)",
        ),
        f if f.starts_with("wasi:filesystem/") => (
            true,
            "files: linked, but nothing is preopened (tools reach files through the sandbox)",
        ),
        f if f.starts_with("wasi:cli/") => (true, "stdio (to the log), exit, terminal"),
        f if f.starts_with("wasi:io/")
            || f.starts_with("wasi:clocks/")
            || f.starts_with("wasi:random/") =>
        {
            (true, "streams, clocks, randomness")
        }
        _ => (false, "not something agentd provides"),
    };
    ImportNeed {
        import: import.to_string(),
        provided,
        grants: grants_for(&[import.to_string()]),
        note,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_are_named_for_the_imports_that_need_them() {
        assert_eq!(
            classify("wasi:http/outgoing-handler@0.2.12").grants,
            ["allow_hosts"]
        );
        assert_eq!(
            classify("wasi:cli/environment@0.2.0").grants,
            ["env", "secrets"]
        );
        assert_eq!(classify("agentd:plugin/config@0.2.1").grants, ["config"]);
        // Asking a person needs no grant: the person is the run's operator,
        // who sees every question.
        let human = classify("agentd:plugin/human@0.2.2");
        assert!(human.provided && human.grants.is_empty(), "{human:?}");
        assert!(human.note.contains("operator"), "{human:?}");
        // The plan is the strategy's own part of the run's record: no grant.
        let plan = classify("agentd:plugin/plan@0.2.3");
        assert!(plan.provided && plan.grants.is_empty(), "{plan:?}");
        assert!(plan.note.contains("plan"), "{plan:?}");
        let sandbox = classify("agentd:plugin/sandbox@0.2.0");
        assert!(sandbox.provided && sandbox.grants.is_empty());
        let sockets = classify("wasi:sockets/tcp@0.2.0");
        assert!(sockets.provided && sockets.grants.is_empty());
        let foreign = classify("acme:db/query@1.0.0");
        assert!(!foreign.provided, "{foreign:?}");
    }
}
