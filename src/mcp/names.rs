//! The names of MCP tools: the entries agents write (`mcp:<server>/<tool>`,
//! `mcp:<server>/*`), and the names the model is shown, which every
//! OpenAI-compatible server accepts (`^[a-zA-Z0-9_-]{1,64}$`).
//!
//! The model sees `mcp__<server>__<tool>` (the scheme Claude Code uses).
//! When that is not a valid name as is (a character outside `[A-Za-z0-9_-]`,
//! or longer than 64), each such character becomes `_` and the name is cut
//! to 55 characters followed by `_` and 8 hex digits of the SHA-256 of
//! `<server>/<tool>`: stable from run to run and daemon to daemon, and
//! unique, since two tools that map to the same readable part differ in
//! the digest.

use sha2::{Digest, Sha256};

/// The longest name OpenAI accepts for a function.
pub const MAX_NAME: usize = 64;

/// What an agent's `mcp:` entry selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector<'a> {
    /// The `[mcp.<server>]` table.
    pub server: &'a str,
    /// One tool, or `None` for `*` (every tool the server lists and allows).
    pub tool: Option<&'a str>,
}

/// Reads `mcp:<server>/<tool>` or `mcp:<server>/*`; the error says what an
/// entry must look like.
pub fn parse_entry(entry: &str) -> Result<Selector<'_>, String> {
    let bad = || {
        format!("tool `{entry}`: an MCP tool is named `mcp:<server>/<tool>` or `mcp:<server>/*`")
    };
    let rest = entry
        .strip_prefix(crate::agent::MCP_PREFIX)
        .ok_or_else(bad)?;
    let (server, tool) = rest.split_once('/').ok_or_else(bad)?;
    if server.is_empty() || tool.is_empty() {
        return Err(bad());
    }
    Ok(Selector {
        server,
        tool: (tool != "*").then_some(tool),
    })
}

/// Whether `name` is a valid server name (`[A-Za-z0-9_-]`, at most 32, no
/// `__`): the first `__` after `mcp__` in a model name then always ends the
/// server's part, so two (server, tool) pairs cannot share a plain name.
pub fn is_valid_server_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && !name.contains("__")
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn is_model_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// The name the model is shown for `tool` of `server` (see the module doc).
pub fn model_name(server: &str, tool: &str) -> String {
    let plain = format!("mcp__{server}__{tool}");
    if plain.len() <= MAX_NAME && plain.chars().all(is_model_char) {
        return plain;
    }
    let readable: String = plain
        .chars()
        .map(|c| if is_model_char(c) { c } else { '_' })
        .take(MAX_NAME - 9)
        .collect();
    let digest = Sha256::digest(format!("{server}/{tool}").as_bytes());
    let hex: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    format!("{readable}_{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(name: &str) -> bool {
        (1..=MAX_NAME).contains(&name.len()) && name.chars().all(is_model_char)
    }

    #[test]
    fn plain_names_are_kept() {
        assert_eq!(model_name("everything", "echo"), "mcp__everything__echo");
        assert_eq!(model_name("gh", "get-sum"), "mcp__gh__get-sum");
    }

    #[test]
    fn invalid_names_are_mapped_stably_and_uniquely() {
        let a = model_name("py", "files.read/v2 (beta)");
        let b = model_name("py", "files.read/v2 [beta]");
        assert!(valid(&a) && valid(&b), "{a} {b}");
        assert!(a.starts_with("mcp__py__files_read_v2__beta_"), "{a}");
        assert_ne!(a, b, "same readable part, different digests");
        assert_eq!(a, model_name("py", "files.read/v2 (beta)"), "stable");
        let long = model_name("server", &"x".repeat(100));
        assert!(valid(&long) && long.len() == MAX_NAME, "{long}");
        assert_ne!(long, model_name("server", &"x".repeat(101)));
    }

    #[test]
    fn entries_parse() {
        assert_eq!(
            parse_entry("mcp:gh/*"),
            Ok(Selector {
                server: "gh",
                tool: None
            })
        );
        assert_eq!(
            parse_entry("mcp:gh/a/b"),
            Ok(Selector {
                server: "gh",
                tool: Some("a/b")
            })
        );
        assert!(is_valid_server_name("my-server_1"));
        assert!(
            !is_valid_server_name("a__b"),
            "would make mcp__a__b__c ambiguous"
        );
        for bad in ["mcp:gh", "mcp:/x", "mcp:gh/", "gh/x"] {
            assert!(parse_entry(bad).is_err(), "{bad}");
        }
    }
}
