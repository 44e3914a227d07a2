//! Which socket the CLI talks to.
//!
//! The daemon listens where its configuration says, so a CLI that reads the
//! same file finds it without flags; `--socket` overrides for a second daemon.

use std::path::{Path, PathBuf};

use crate::config::{client_socket_path, default_config_path, Config, ConfigError};

/// `--socket`, else `[daemon] socket` from the configuration file (`--config`,
/// else the default one if it exists), else `$AGENTD_SOCKET` or the usual
/// places. The file is read only when it can matter.
pub fn socket_path(flag: Option<&Path>, config: Option<&Path>) -> Result<PathBuf, ConfigError> {
    if let Some(p) = flag {
        return Ok(p.to_path_buf());
    }
    let file = config.map(Path::to_path_buf).or_else(default_config_path);
    let configured = match file {
        Some(f) => Config::load(Some(&f))?.daemon.socket,
        None => None,
    };
    Ok(choose(None, configured, client_socket_path))
}

/// `flag`, else `configured`, else the fallback: the order every command
/// finds the socket in.
pub(super) fn choose(
    flag: Option<PathBuf>,
    configured: Option<PathBuf>,
    fallback: impl FnOnce() -> PathBuf,
) -> PathBuf {
    flag.or(configured).unwrap_or_else(fallback)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_then_configuration_then_default() {
        let default = || PathBuf::from("/default.sock");
        assert_eq!(
            choose(
                Some("/flag.sock".into()),
                Some("/conf.sock".into()),
                default
            ),
            PathBuf::from("/flag.sock")
        );
        assert_eq!(
            choose(None, Some("/conf.sock".into()), default),
            PathBuf::from("/conf.sock")
        );
        assert_eq!(choose(None, None, default), PathBuf::from("/default.sock"));
    }

    #[test]
    fn the_flag_wins_without_reading_the_file() {
        let missing = Path::new("/nonexistent/agentd.toml");
        let got = socket_path(Some(Path::new("/flag.sock")), Some(missing)).expect("no read");
        assert_eq!(got, PathBuf::from("/flag.sock"));
    }

    #[test]
    fn the_configured_socket_is_used_and_a_bad_file_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("agentd.toml");
        std::fs::write(&file, "[daemon]\nsocket = \"/srv/agentd.sock\"\n").expect("write");
        assert_eq!(
            socket_path(None, Some(&file)).expect("load"),
            PathBuf::from("/srv/agentd.sock")
        );
        assert!(socket_path(None, Some(Path::new("/nonexistent/agentd.toml"))).is_err());
    }
}
