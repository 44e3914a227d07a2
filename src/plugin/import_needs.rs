//! What each import of a component needs from the operator: which
//! `[plugins.<name>]` grant makes it do something, and whether agentd
//! provides it at all. Read from the import's name alone, so that
//! `agentd plugin check` can tell an author, before any daemon is involved,
//! what an operator will have to grant (deny by default: an import without
//! its grant links, but refuses or sees nothing).

use serde::Serialize;

/// One import of a component and what it needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImportNeed {
    /// The import's name as the component gives it
    /// (`wasi:http/outgoing-handler@0.2.12`).
    pub import: String,
    /// Whether agentd links something for it. `false` means the component
    /// cannot load in this host: the import is not one agentd offers.
    pub provided: bool,
    /// The `[plugins.<name>]` key(s) the operator sets for it to do
    /// anything; `None` when it works without a grant (or never does).
    pub grant: Option<&'static str>,
    /// What the plugin gets through it, in a few words.
    pub note: &'static str,
}

/// What `import` needs. Versions are ignored: the linker decides whether
/// a version fits, this only says what a family of imports is for.
pub fn classify(import: &str) -> ImportNeed {
    let family = import.split('@').next().unwrap_or(import);
    let (provided, grant, note) = match family {
        "agentd:plugin/config" => (
            true,
            Some("config"),
            "the plugin's settings; empty unless [plugins.<name>] config is set",
        ),
        f if f.starts_with("agentd:plugin/") => (true, None, "the agentd contract"),
        "wasi:http/outgoing-handler" | "wasi:http/types" => (
            true,
            Some("allow_hosts"),
            "outgoing HTTP; every request is refused unless its host is in allow_hosts",
        ),
        "wasi:cli/environment" => (
            true,
            Some("env, secrets"),
            "environment variables; empty unless granted",
        ),
        f if f.starts_with("wasi:sockets/") => (
            true,
            None,
            "raw sockets: linked, but every socket is refused (use wasi:http with allow_hosts)",
        ),
        f if f.starts_with("wasi:filesystem/") => (
            true,
            None,
            "files: linked, but nothing is preopened (tools reach files through the sandbox)",
        ),
        f if f.starts_with("wasi:cli/") => (true, None, "stdio (to the log), exit, terminal"),
        f if f.starts_with("wasi:io/")
            || f.starts_with("wasi:clocks/")
            || f.starts_with("wasi:random/") =>
        {
            (true, None, "streams, clocks, randomness")
        }
        _ => (false, None, "not something agentd provides"),
    };
    ImportNeed {
        import: import.to_string(),
        provided,
        grant,
        note,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_are_named_for_the_imports_that_need_them() {
        assert_eq!(
            classify("wasi:http/outgoing-handler@0.2.12").grant,
            Some("allow_hosts")
        );
        assert_eq!(
            classify("wasi:cli/environment@0.2.0").grant,
            Some("env, secrets")
        );
        assert_eq!(classify("agentd:plugin/config@0.2.1").grant, Some("config"));
        let sandbox = classify("agentd:plugin/sandbox@0.2.0");
        assert!(sandbox.provided && sandbox.grant.is_none());
        let sockets = classify("wasi:sockets/tcp@0.2.0");
        assert!(sockets.provided && sockets.grant.is_none());
        let foreign = classify("acme:db/query@1.0.0");
        assert!(!foreign.provided, "{foreign:?}");
    }
}
