//! `[[sandbox.engines]]` as the fleet uses it, and the rules an engine
//! list must follow. `config` only parses the file and calls [`check`].

use std::path::PathBuf;

/// The name of the one engine a `[sandbox]` without `[[sandbox.engines]]`
/// uses: `docker_host`, else `DOCKER_HOST`, else the default socket.
pub const DEFAULT_ENGINE_NAME: &str = "local";

/// The client certificate and the authority a `tcp://` engine is reached
/// with (Docker's `--tlsverify`): all three or none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The CA that signed the engine's server certificate.
    pub ca: PathBuf,
    /// This client's certificate, which the engine checks against its CA.
    pub cert: PathBuf,
    /// This client's private key.
    pub key: PathBuf,
}

/// One Docker engine runs may be placed on.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineConfig {
    /// Unique; shown in status and in `engine NAME: ...` errors.
    pub name: String,
    /// `unix://`, `tcp://` (with [`Self::tls`] for TLS) or `ssh://`;
    /// `None` (the default engine only) means `DOCKER_HOST`, then the
    /// default socket.
    pub docker_host: Option<String>,
    pub tls: Option<TlsFiles>,
    /// Sandboxes placed on it at once; `None` (the default engine only):
    /// no bound but the daemon's own `max_concurrent_runs`.
    pub max_containers: Option<usize>,
    /// How much a free slot here counts against a free slot elsewhere.
    pub weight: f64,
}

impl EngineConfig {
    /// The engine used when `[[sandbox.engines]]` is absent, so a daemon
    /// configured before engines existed behaves as it did.
    pub fn default_engine(docker_host: Option<String>) -> Self {
        EngineConfig {
            name: DEFAULT_ENGINE_NAME.into(),
            docker_host,
            tls: None,
            max_containers: None,
            weight: 1.0,
        }
    }
}

/// Checks one engine; the message names the key. `seen` are the names of
/// the engines before it.
pub fn check(engine: &EngineConfig, seen: &[&str]) -> Result<(), String> {
    let name = &engine.name;
    if name.trim().is_empty() {
        return Err("[[sandbox.engines]] name must not be empty".into());
    }
    if seen.contains(&name.as_str()) {
        return Err(format!(
            "[[sandbox.engines]] name `{name}` is used by two engines; each needs its own"
        ));
    }
    let host = engine.docker_host.as_deref().map(str::trim).unwrap_or("");
    if host.is_empty() {
        return Err(format!(
            "[[sandbox.engines]] `{name}`: docker_host is required (unix://, tcp:// or ssh://)"
        ));
    }
    if engine.max_containers == Some(0) {
        return Err(format!(
            "[[sandbox.engines]] `{name}`: max_containers must be at least 1"
        ));
    }
    if !(engine.weight.is_finite() && engine.weight > 0.0) {
        return Err(format!(
            "[[sandbox.engines]] `{name}`: weight must be a number above 0, not {}",
            engine.weight
        ));
    }
    let tcp = host.starts_with("tcp://") || host.starts_with("https://");
    if engine.tls.is_some() && !tcp {
        return Err(format!(
            "[[sandbox.engines]] `{name}`: tls_ca, tls_cert and tls_key apply to tcp:// engines \
             only, not `{host}`"
        ));
    }
    if host.starts_with("https://") && engine.tls.is_none() {
        return Err(format!(
            "[[sandbox.engines]] `{name}`: `{host}` needs tls_ca, tls_cert and tls_key"
        ));
    }
    Ok(())
}

/// The three TLS keys as given: all or none.
pub fn tls_files(
    name: &str,
    ca: Option<PathBuf>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
) -> Result<Option<TlsFiles>, String> {
    match (ca, cert, key) {
        (None, None, None) => Ok(None),
        (Some(ca), Some(cert), Some(key)) => Ok(Some(TlsFiles { ca, cert, key })),
        (ca, cert, key) => {
            let missing: Vec<&str> = [
                ("tls_ca", ca.is_none()),
                ("tls_cert", cert.is_none()),
                ("tls_key", key.is_none()),
            ]
            .into_iter()
            .filter_map(|(k, missing)| missing.then_some(k))
            .collect();
            Err(format!(
                "[[sandbox.engines]] `{name}`: tls_ca, tls_cert and tls_key go together; {} missing",
                missing.join(" and ")
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine(name: &str, host: &str) -> EngineConfig {
        EngineConfig {
            name: name.into(),
            docker_host: Some(host.into()),
            tls: None,
            max_containers: Some(4),
            weight: 1.0,
        }
    }

    #[test]
    fn a_valid_engine_passes() {
        assert_eq!(check(&engine("a", "unix:///x.sock"), &[]), Ok(()));
        let mut tls = engine("t", "tcp://127.0.0.1:2376");
        tls.tls = Some(TlsFiles {
            ca: "ca.pem".into(),
            cert: "cert.pem".into(),
            key: "key.pem".into(),
        });
        assert_eq!(check(&tls, &["a"]), Ok(()));
    }

    #[test]
    fn names_must_be_unique_and_present() {
        let e = check(&engine("a", "unix:///x"), &["a"]).expect_err("dup");
        assert!(e.contains("`a` is used by two engines"), "{e}");
        let e = check(&engine(" ", "unix:///x"), &[]).expect_err("empty");
        assert!(e.contains("name must not be empty"), "{e}");
    }

    #[test]
    fn capacity_weight_and_host_are_checked() {
        let mut e = engine("a", "unix:///x");
        e.max_containers = Some(0);
        assert!(check(&e, &[])
            .expect_err("0")
            .contains("max_containers must be at least 1"));
        let mut e = engine("a", "unix:///x");
        e.weight = 0.0;
        assert!(check(&e, &[])
            .expect_err("w")
            .contains("weight must be a number above 0"));
        e.weight = f64::NAN;
        assert!(check(&e, &[]).is_err());
        let mut e = engine("a", "");
        e.docker_host = None;
        assert!(check(&e, &[])
            .expect_err("host")
            .contains("docker_host is required"));
    }

    #[test]
    fn tls_is_all_or_nothing_and_for_tcp_only() {
        let e = tls_files("t", Some("ca".into()), None, Some("k".into())).expect_err("partial");
        assert!(e.contains("tls_cert missing"), "{e}");
        assert_eq!(tls_files("t", None, None, None), Ok(None));
        let mut e = engine("u", "unix:///x");
        e.tls = tls_files("u", Some("a".into()), Some("b".into()), Some("c".into())).expect("all");
        assert!(check(&e, &[])
            .expect_err("unix")
            .contains("tcp:// engines only"));
        let e = engine("h", "https://h:2376");
        assert!(check(&e, &[]).expect_err("https").contains("needs tls_ca"));
    }
}
