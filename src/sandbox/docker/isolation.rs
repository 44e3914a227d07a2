//! What the engine says about how well a sandbox is isolated from the host:
//! its security options (seccomp, user namespaces) and the versions of the
//! engine and of runc, each against the advisories that matter for the way
//! agentd drives them (security review M1).
//!
//! agentd feeds the engine's privileged code paths with data the model
//! controls: the archive (tar) API against a file system the model owns, and
//! `docker exec` with working directories under `[sandbox] work_dir`. Engines
//! before 19.03.1 have the `docker cp` symlink race (CVE-2018-15664); runc
//! before 1.1.12 lets a working directory reach the host (CVE-2024-21626).
//!
//! These are warnings, logged when the engine is first reached and shown in
//! `GET /v1/status` (`sandbox_engine.warnings`), never refusals: a
//! distribution often backports the fix without changing the upstream
//! version number (Debian's runc 1.1.5+ds1-1+deb12u1 says 1.1.5), so a
//! version alone cannot prove an engine vulnerable, and agentd's own
//! hardening (no capabilities, no-new-privileges, an unprivileged user, a
//! read-only root, work dirs confined to `work_dir`) holds either way.

use bollard::models::SystemVersion;
use bollard::Docker;

use super::engine::PROBE_TIMEOUT;

/// The first engine release without the `docker cp` symlink race
/// (CVE-2018-15664), which the archive API that moves sandbox files shares.
const ENGINE_FIXED: (u32, u32, u32) = (19, 3, 1);

/// The first runc release without the leaked-descriptor working directory
/// escape (CVE-2024-21626).
const RUNC_FIXED: (u32, u32, u32) = (1, 1, 12);

/// Asks the engine for its version and security options, logs every
/// weakness found, and returns them (the status report shows them). An
/// engine that does not answer these in time gets no warnings: the caller
/// has already reached it, and its failures surface where they happen.
pub(crate) async fn assess(docker: &Docker, engine: &str) -> Vec<String> {
    let mut warnings = Vec::new();
    if let Ok(Ok(version)) = tokio::time::timeout(PROBE_TIMEOUT, docker.version()).await {
        warnings.extend(version_warnings(&version));
    }
    if let Ok(Ok(info)) = tokio::time::timeout(PROBE_TIMEOUT, docker.info()).await {
        warnings.extend(
            option_warnings(&info.security_options.unwrap_or_default())
                .into_iter()
                .map(str::to_string),
        );
    }
    for warning in &warnings {
        tracing::warn!(engine, "{warning}");
    }
    warnings
}

/// The weaknesses `SecurityOptions` (`name=seccomp,profile=default`,
/// `name=userns`, `name=rootless`, ...) show.
fn option_warnings(options: &[String]) -> Vec<&'static str> {
    let has = |name: &str| {
        options
            .iter()
            .any(|o| o.split(',').any(|kv| kv == format!("name={name}")))
    };
    let seccomp_off = !has("seccomp")
        || options
            .iter()
            .any(|o| o.contains("name=seccomp") && o.contains("profile=unconfined"));
    let mut warnings = Vec::new();
    if seccomp_off {
        warnings.push(
            "the Docker engine runs containers without seccomp: the model's commands reach \
             every system call of the host kernel",
        );
    }
    if !has("userns") && !has("rootless") {
        warnings.push(
            "the Docker engine has no user namespace (userns-remap or rootless): a sandbox's \
             uid is the same uid on the host, so a runtime or kernel escape lands as that user",
        );
    }
    warnings
}

/// The engine and runc versions older than the fixes above.
fn version_warnings(version: &SystemVersion) -> Vec<String> {
    let components = version.components.as_deref().unwrap_or_default();
    let component = |name: &str| {
        components
            .iter()
            .find(|c| c.name.eq_ignore_ascii_case(name))
            .map(|c| c.version.as_str())
    };
    let mut warnings = Vec::new();
    let engine = component("Engine").or(version.version.as_deref());
    if let Some(text) = engine {
        if parse_release(text).is_some_and(|v| v < ENGINE_FIXED) {
            warnings.push(format!(
                "the Docker engine is version {text}, older than {}, which fixed the symlink \
                 race of its archive API (CVE-2018-15664) that agentd uses to move sandbox \
                 files: upgrade the engine unless your distribution backported the fix",
                show(ENGINE_FIXED)
            ));
        }
    }
    if let Some(text) = component("runc") {
        if parse_release(text).is_some_and(|v| v < RUNC_FIXED) {
            warnings.push(format!(
                "the engine's runc is version {text}, older than {}, which fixed a container's \
                 working directory reaching the host (CVE-2024-21626): upgrade runc unless your \
                 distribution backported the fix (check its changelog)",
                show(RUNC_FIXED)
            ));
        }
    }
    warnings
}

/// `20.10.24+dfsg1` → (20, 10, 24); `1.1.5+ds1` → (1, 1, 5); `28.0` →
/// (28, 0, 0). `None` for what does not start with a number (a dev build),
/// which is then not judged.
fn parse_release(text: &str) -> Option<(u32, u32, u32)> {
    let numeric: String = text
        .trim()
        .trim_start_matches('v')
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let mut parts = numeric.split('.').filter(|p| !p.is_empty());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next().map_or(Some(0), |p| p.parse().ok())?;
    let patch = parts.next().map_or(Some(0), |p| p.parse().ok())?;
    Some((major, minor, patch))
}

fn show((a, b, c): (u32, u32, u32)) -> String {
    format!("{a}.{b}.{c}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use bollard::models::SystemVersionComponents;

    #[test]
    fn the_engine_s_security_options_name_what_weakens_the_sandbox() {
        let opts = |o: &[&str]| o.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(
            option_warnings(&opts(&["name=seccomp,profile=default", "name=userns"])).is_empty()
        );
        assert!(
            option_warnings(&opts(&["name=seccomp,profile=builtin", "name=rootless"])).is_empty()
        );
        let w = option_warnings(&opts(&["name=seccomp,profile=default"]));
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("user namespace"));
        let w = option_warnings(&opts(&["name=seccomp,profile=unconfined", "name=userns"]));
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("seccomp"));
        assert_eq!(option_warnings(&[]).len(), 2);
    }

    fn version(engine: &str, runc: &str) -> SystemVersion {
        let component = |name: &str, version: &str| SystemVersionComponents {
            name: name.into(),
            version: version.into(),
            ..Default::default()
        };
        SystemVersion {
            version: Some(engine.into()),
            components: Some(vec![
                component("Engine", engine),
                component("containerd", "1.6.20~ds1"),
                component("runc", runc),
            ]),
            ..Default::default()
        }
    }

    #[test]
    fn old_engines_and_runcs_are_named_with_the_advisory() {
        assert!(version_warnings(&version("28.2.2", "1.2.5")).is_empty());
        assert!(version_warnings(&version("19.03.1", "1.1.12")).is_empty());
        let w = version_warnings(&version("18.09.7", "1.0.0-rc10"));
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].contains("18.09.7") && w[0].contains("CVE-2018-15664"),
            "{w:?}"
        );
        assert!(
            w[1].contains("1.0.0-rc10") && w[1].contains("CVE-2024-21626"),
            "{w:?}"
        );
        // Debian bookworm's engine is new enough; its runc number is not.
        let w = version_warnings(&version("20.10.24+dfsg1", "1.1.5+ds1"));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("runc is version 1.1.5+ds1"), "{w:?}");
        assert!(w[0].contains("backported"), "{w:?}");
    }

    #[test]
    fn releases_parse_as_their_leading_numbers() {
        assert_eq!(parse_release("20.10.24+dfsg1"), Some((20, 10, 24)));
        assert_eq!(parse_release("1.1.5+ds1"), Some((1, 1, 5)));
        assert_eq!(parse_release("v1.1.12"), Some((1, 1, 12)));
        assert_eq!(parse_release("28.0"), Some((28, 0, 0)));
        assert_eq!(parse_release("19.03.1"), Some((19, 3, 1)));
        assert_eq!(parse_release("dev"), None);
        assert_eq!(parse_release(""), None);
    }
}
