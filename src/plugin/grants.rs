//! What the operator grants one plugin (`[plugins.<name>]`), deny by
//! default: the hosts its HTTP requests may reach, the environment it sees
//! (plain `env` and `secrets`), the settings its `config` import reads, and
//! overrides of the memory and time it may take.
//!
//! Owned here and built by `config` (which parses the file and reads the
//! secret values), like [`PluginSettings`](super::settings::PluginSettings).
//! A run takes the [`Grants`] of the configuration it was created under and
//! keeps them to its end: a SIGHUP that changes a grant changes the runs
//! created after it, never one under way.
//!
//! Secret values live only here and in the plugin's WASI environment: the
//! `Debug` of a grant shows their names, never their values, and nothing
//! that is logged, stored or served reads them.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Every plugin's grants, by plugin name. A plugin without an entry has
/// none: no hosts, no environment, no settings, the default limits.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Grants {
    by_plugin: BTreeMap<String, Arc<PluginGrant>>,
    /// What a plugin without an entry gets, shared: [`Grants::of`] is on
    /// every tool call's path.
    none: Arc<PluginGrant>,
}

impl Grants {
    /// The grants of `plugins`, by name.
    pub fn new(plugins: BTreeMap<String, PluginGrant>) -> Self {
        Grants {
            by_plugin: plugins
                .into_iter()
                .map(|(name, grant)| (name, Arc::new(grant)))
                .collect(),
            none: Arc::default(),
        }
    }

    /// What `plugin` was granted; the empty grant when it has no entry.
    pub fn of(&self, plugin: &str) -> Arc<PluginGrant> {
        self.by_plugin.get(plugin).unwrap_or(&self.none).clone()
    }

    /// Whether `plugin` has an entry of its own.
    pub fn has(&self, plugin: &str) -> bool {
        self.by_plugin.contains_key(plugin)
    }

    /// Names with an entry, sorted (for warnings about grants to plugins
    /// that are not loaded).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.by_plugin.keys().map(String::as_str)
    }

    /// Whether every `memory_limit` fits in `pool_max`, the per-instance
    /// memory the running engine's pool was sized for: a SIGHUP can bring a
    /// larger `[plugins] memory_limit` than the pool has, which only a
    /// restart applies.
    pub fn check_memory_limits(&self, pool_max: u64) -> Result<(), String> {
        match self
            .by_plugin
            .iter()
            .find(|(_, g)| g.memory_limit.is_some_and(|m| m > pool_max))
        {
            None => Ok(()),
            Some((name, g)) => Err(format!(
                "[plugins.{name}] memory_limit ({}) is more than the running daemon's [plugins] memory_limit ({}), which sizes its instance pool until a restart",
                super::settings::show_bytes(g.memory_limit.unwrap_or(0)),
                super::settings::show_bytes(pool_max)
            )),
        }
    }
}

/// `[plugins.<name>]`: what one plugin may use beyond its own memory.
#[derive(Clone, Default, PartialEq)]
pub struct PluginGrant {
    /// Hosts its outgoing HTTP requests may reach (`allow_hosts`).
    pub allow_hosts: AllowList,
    /// Plain environment variables (`env`), shown by the API.
    pub env: BTreeMap<String, String>,
    /// Secret environment variables (`secrets`): names with the values read
    /// from the secrets file or systemd credentials. Never shown.
    pub secrets: BTreeMap<String, Secret>,
    /// Plain settings its `config` import reads (`config`).
    pub config: BTreeMap<String, String>,
    /// Bytes of linear memory one instance may hold, instead of
    /// `[plugins] memory_limit` (at most that: the pool's slots are sized
    /// from it).
    pub memory_limit: Option<u64>,
    /// For a strategy: the step deadline instead of `[daemon] step_timeout`.
    /// For a tool: the longest one call of it may take (its own time, not
    /// the sandbox commands it waits for).
    pub timeout: Option<Duration>,
}

impl PluginGrant {
    /// The bytes one instance may hold: its own `memory_limit`, else
    /// `default` (`[plugins] memory_limit` as the plugin was loaded with).
    pub fn memory_limit_or(&self, default: usize) -> usize {
        self.memory_limit
            .map_or(default, |m| usize::try_from(m).unwrap_or(usize::MAX))
    }

    /// The environment its WASI context is given: `env`, then `secrets`
    /// (a name in both takes the secret; `config` refuses that anyway).
    pub fn environment(&self) -> Vec<(String, String)> {
        self.env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .chain(self.secrets.iter().map(|(k, v)| (k.clone(), v.0.clone())))
            .collect()
    }

    /// What `GET /v1/plugins` shows of it: everything but secret values.
    pub fn public(&self) -> GrantView {
        GrantView {
            allow_hosts: self.allow_hosts.entries().map(|h| h.to_string()).collect(),
            env: self.env.clone(),
            secrets: self.secrets.keys().cloned().collect(),
            config: self.config.clone(),
            memory_limit: self.memory_limit,
            timeout_secs: self.timeout.map(|t| t.as_secs_f64()),
        }
    }
}

impl fmt::Debug for PluginGrant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PluginGrant")
            .field("allow_hosts", &self.allow_hosts)
            .field("env", &self.env)
            .field("secrets", &self.secrets.keys().collect::<Vec<_>>())
            .field("config", &self.config)
            .field("memory_limit", &self.memory_limit)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// A grant as the API shows it: secrets by name only.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GrantView {
    /// `allow_hosts` as written.
    #[serde(default)]
    pub allow_hosts: Vec<String>,
    /// `env`, names and values.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The names in `secrets`.
    #[serde(default)]
    pub secrets: Vec<String>,
    /// `config`, keys and values.
    #[serde(default)]
    pub config: BTreeMap<String, String>,
    /// `memory_limit` in bytes, when overridden.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit: Option<u64>,
    /// `timeout` in seconds, when overridden.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<f64>,
}

/// A secret's value. Its `Debug` says `<redacted>` and it has no
/// `Display`, so a grant can be logged without leaking it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value read from the secrets file or a credential.
    pub fn new(value: String) -> Self {
        Secret(value)
    }

    /// The value, for the plugin's environment only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// `allow_hosts`: the hosts (and ports) a plugin's HTTP requests may reach.
/// Empty denies every request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowList(Vec<HostPattern>);

impl AllowList {
    /// Parses every entry; the first bad one is the error (the caller names
    /// the key).
    pub fn parse<'a>(entries: impl IntoIterator<Item = &'a str>) -> Result<Self, String> {
        entries
            .into_iter()
            .map(HostPattern::parse)
            .collect::<Result<Vec<_>, _>>()
            .map(AllowList)
    }

    /// Whether a request to `host`:`port` may go out. `host` is compared
    /// without case and without a trailing dot; IPv6 literals without
    /// brackets.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        let host = normalise_host(host);
        self.0.iter().any(|p| p.matches(&host, port))
    }

    /// Whether nothing is allowed.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The entries, as written (normalised).
    pub fn entries(&self) -> impl Iterator<Item = &HostPattern> {
        self.0.iter()
    }
}

/// One `allow_hosts` entry: `api.github.com` (any port), `*.example.com:443`
/// (subdomains only, that port), `127.0.0.1:8080`, `[::1]:8080`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    host: HostMatch,
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostMatch {
    /// Exactly this host name or address.
    Exact(String),
    /// Any name ending in `.` + this suffix; not the suffix itself.
    Subdomains(String),
}

impl HostPattern {
    /// Parses one entry: a host name, IPv4 address or bracketed IPv6
    /// address, optionally `*.` in front of a name and `:port` after.
    /// No scheme, path, user or wildcard elsewhere.
    pub fn parse(entry: &str) -> Result<Self, String> {
        let bad = |why: &str| {
            format!("{entry:?} is not a host pattern: {why} (write `api.example.com`, `*.example.com:443` or `127.0.0.1:8080`)")
        };
        let text = entry.trim();
        if text.is_empty() {
            return Err(bad("it is empty"));
        }
        if text.contains("://") || text.contains('/') || text.contains('@') {
            return Err(bad("give the host only, without scheme, path or user"));
        }
        let (host, port) = if let Some(rest) = text.strip_prefix('[') {
            let Some((inside, after)) = rest.split_once(']') else {
                return Err(bad("an IPv6 address needs its closing `]`"));
            };
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':').ok_or_else(|| bad("junk after `]`"))?),
            };
            if inside.parse::<std::net::Ipv6Addr>().is_err() {
                return Err(bad("not an IPv6 address inside `[]`"));
            }
            (inside.to_string(), port)
        } else {
            match text.rsplit_once(':') {
                Some((h, p)) if !h.contains(':') => (h.to_string(), Some(p)),
                Some(_) => return Err(bad("put an IPv6 address in brackets: `[::1]:8080`")),
                None => (text.to_string(), None),
            }
        };
        let port = match port {
            None => None,
            Some(p) => match p.parse::<u16>() {
                Ok(0) | Err(_) => return Err(bad("the port must be a number from 1 to 65535")),
                Ok(n) => Some(n),
            },
        };
        let host = normalise_host(&host);
        let host = if let Some(suffix) = host.strip_prefix("*.") {
            check_name(suffix).map_err(|why| bad(&why))?;
            HostMatch::Subdomains(suffix.to_string())
        } else {
            if host.contains('*') {
                return Err(bad("`*` may only start the pattern, as `*.`"));
            }
            if host.parse::<std::net::IpAddr>().is_err() {
                check_name(&host).map_err(|why| bad(&why))?;
            }
            HostMatch::Exact(host)
        };
        Ok(HostPattern { host, port })
    }

    fn matches(&self, host: &str, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        match &self.host {
            HostMatch::Exact(h) => h == host,
            HostMatch::Subdomains(suffix) => host
                .strip_suffix(suffix.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
        }
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            HostMatch::Exact(h) if h.contains(':') => write!(f, "[{h}]")?,
            HostMatch::Exact(h) => f.write_str(h)?,
            HostMatch::Subdomains(s) => write!(f, "*.{s}")?,
        }
        if let Some(p) = self.port {
            write!(f, ":{p}")?;
        }
        Ok(())
    }
}

/// Lower case, no trailing dot, no IPv6 brackets: the form patterns and
/// request hosts are compared in.
fn normalise_host(host: &str) -> String {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// A DNS name of letters, digits, `-` and dots, no empty label.
fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 253 {
        return Err("the host name is empty or too long".into());
    }
    let ok = name.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= 63
            && label
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    });
    if ok {
        Ok(())
    } else {
        Err("a host name is letters, digits, `-` and dots".into())
    }
}

/// The message a plugin gets (and the log shows) when a request to
/// `host`:`port` is refused: which host, and which key to change.
pub fn denial_message(plugin: &str, host: &str, port: u16, allow: &AllowList) -> String {
    let now = if allow.is_empty() {
        "it has no allow_hosts, so every request is refused".to_string()
    } else {
        format!(
            "it may reach only {}",
            allow
                .entries()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let shown = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    };
    format!(
        "agentd refused the HTTP request to {shown}:{port}: {now}; to allow it, add \"{shown}:{port}\" (or \"{shown}\") to [plugins.{plugin}] allow_hosts in the daemon's config file"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[&str]) -> AllowList {
        AllowList::parse(entries.iter().copied()).expect("valid patterns")
    }

    #[test]
    fn exact_hosts_match_any_port_unless_one_is_given() {
        let l = list(&["api.github.com", "127.0.0.1:8080", "[::1]:9000"]);
        assert!(l.allows("api.github.com", 443));
        assert!(l.allows("API.GitHub.com.", 80));
        assert!(!l.allows("github.com", 443));
        assert!(!l.allows("evil.api.github.com", 443));
        assert!(l.allows("127.0.0.1", 8080));
        assert!(!l.allows("127.0.0.1", 8081));
        assert!(l.allows("::1", 9000));
        assert!(l.allows("[::1]", 9000));
    }

    #[test]
    fn a_star_matches_subdomains_only() {
        let l = list(&["*.example.com:443"]);
        assert!(l.allows("api.example.com", 443));
        assert!(l.allows("a.b.example.com", 443));
        assert!(!l.allows("example.com", 443));
        assert!(!l.allows("badexample.com", 443));
        assert!(!l.allows("api.example.com", 80));
    }

    #[test]
    fn an_empty_list_denies_everything() {
        let l = AllowList::default();
        assert!(!l.allows("localhost", 80));
        let m = denial_message("http_get", "localhost", 80, &l);
        assert!(m.contains("[plugins.http_get] allow_hosts"), "{m}");
        assert!(m.contains("localhost:80"), "{m}");
    }

    #[test]
    fn bad_patterns_are_refused_with_the_reason() {
        for bad in [
            "",
            "https://api.github.com",
            "api.github.com/x",
            "a*.example.com",
            "*.",
            "host:0",
            "host:99999",
            "::1",
            "[::1",
            "user@host",
        ] {
            let e = HostPattern::parse(bad).expect_err(bad);
            assert!(e.contains("not a host pattern"), "{bad}: {e}");
        }
    }

    #[test]
    fn secrets_never_show_in_debug_or_the_public_view() {
        let mut g = PluginGrant::default();
        g.secrets
            .insert("GITHUB_TOKEN".into(), Secret::new("s3cr3t-value".into()));
        g.env.insert("MODE".into(), "fast".into());
        let debug = format!("{g:?}");
        assert!(!debug.contains("s3cr3t-value") && debug.contains("GITHUB_TOKEN"));
        let view = serde_json::to_string(&g.public()).expect("json");
        assert!(!view.contains("s3cr3t-value") && view.contains("GITHUB_TOKEN"));
        assert!(g
            .environment()
            .contains(&("GITHUB_TOKEN".into(), "s3cr3t-value".into())));
    }
}
