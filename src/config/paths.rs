//! Where agentd keeps things when the configuration does not say.
//!
//! Root (a system service) gets FHS paths; anyone else gets XDG paths, so a
//! developer can run the daemon without touching /var. systemd's
//! `StateDirectory=` wins over both.

use std::path::PathBuf;

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn env_path(key: &str) -> Option<PathBuf> {
    std::env::var_os(key)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

fn home() -> PathBuf {
    env_path("HOME").unwrap_or_else(|| PathBuf::from("/tmp"))
}

/// A directory systemd made for the service (`StateDirectory=` and the
/// like). It may pass several, colon-separated; the first is ours.
fn systemd_dir(key: &str) -> Option<PathBuf> {
    let dir = env_path(key)?;
    let first = dir.to_string_lossy().split(':').next()?.to_string();
    (!first.is_empty()).then(|| PathBuf::from(first))
}

pub fn default_state_dir() -> PathBuf {
    if let Some(dir) = systemd_dir("STATE_DIRECTORY") {
        return dir;
    }
    if is_root() {
        return PathBuf::from("/var/lib/agentd");
    }
    env_path("XDG_STATE_HOME")
        .unwrap_or_else(|| home().join(".local/state"))
        .join("agentd")
}

/// `$AGENTD_CONFIG`, else the system or user file if it exists.
pub fn default_config_path() -> Option<PathBuf> {
    if let Some(p) = env_path("AGENTD_CONFIG") {
        return Some(p);
    }
    let candidate = if is_root() {
        PathBuf::from("/etc/agentd/agentd.toml")
    } else {
        env_path("XDG_CONFIG_HOME")
            .unwrap_or_else(|| home().join(".config"))
            .join("agentd/agentd.toml")
    };
    candidate.exists().then_some(candidate)
}

/// Where the daemon listens when neither `[daemon] socket` nor
/// `$AGENTD_SOCKET` says: systemd's `RuntimeDirectory=`, else the FHS path
/// for root, else the user's runtime directory.
pub fn default_socket_path() -> PathBuf {
    if let Some(p) = env_path("AGENTD_SOCKET") {
        return p;
    }
    if let Some(dir) = systemd_dir("RUNTIME_DIRECTORY") {
        return dir.join("agentd.sock");
    }
    if is_root() {
        return PathBuf::from(SYSTEM_SOCKET);
    }
    match env_path("XDG_RUNTIME_DIR") {
        Some(dir) => dir.join("agentd.sock"),
        None => PathBuf::from(SYSTEM_SOCKET),
    }
}

/// The system service's socket (`dist/systemd/agentd.socket`).
pub const SYSTEM_SOCKET: &str = "/run/agentd/agentd.sock";

/// Where the CLI looks for a daemon: `$AGENTD_SOCKET`, else the user's own
/// daemon if one has a socket, else the system service's, so a member of the
/// socket group reaches the system daemon without flags.
pub fn client_socket_path() -> PathBuf {
    if let Some(p) = env_path("AGENTD_SOCKET") {
        return p;
    }
    if !is_root() {
        if let Some(dir) = env_path("XDG_RUNTIME_DIR") {
            let mine = dir.join("agentd.sock");
            if mine.exists() {
                return mine;
            }
        }
    }
    PathBuf::from(SYSTEM_SOCKET)
}
