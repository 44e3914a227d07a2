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

pub fn default_state_dir() -> PathBuf {
    if let Some(dir) = env_path("STATE_DIRECTORY") {
        // systemd may pass several, colon-separated; the first is ours.
        let first = dir
            .to_string_lossy()
            .split(':')
            .next()
            .unwrap_or("")
            .to_string();
        return PathBuf::from(first);
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
