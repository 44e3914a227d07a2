//! `config`: the file loads with the daemon's own loader.

use std::io::ErrorKind;
use std::path::Path;

use super::Check;
use crate::config::{default_config_path, Config, ConfigError};

/// `--config`, else the default file, loaded with the daemon's own loader
/// (secrets included, as `serve` reads them); on failure, the defaults.
pub fn check_config(flag: Option<&Path>) -> (Config, Check) {
    let path = flag.map(Path::to_path_buf).or_else(default_config_path);
    match Config::load_with_secrets(path.as_deref()) {
        Ok(config) => {
            let detail = match &path {
                Some(p) => p.display().to_string(),
                None => "none: built-in defaults".to_string(),
            };
            (config, Check::pass("config", detail))
        }
        Err(e) => {
            let fix = config_fix(&e);
            (
                Config::defaults(),
                Check::fail("config", e.to_string(), fix),
            )
        }
    }
}

pub(super) fn config_fix(e: &ConfigError) -> String {
    match e {
        ConfigError::Invalid {
            file,
            line: Some(line),
            ..
        } => format!("correct {}:{line}", file.display()),
        ConfigError::Invalid {
            file, line: None, ..
        } => format!("correct {}", file.display()),
        ConfigError::Read { file, source } if source.kind() == ErrorKind::NotFound => format!(
            "create {}, or name an existing file with --config (or $AGENTD_CONFIG)",
            file.display()
        ),
        ConfigError::Read { file, .. } => format!(
            "let this user read {} (chmod, chown), or name another file with --config",
            file.display()
        ),
        ConfigError::KeyFile { path, .. } => format!(
            "put the key in {} and make it readable by this user, or set api_key_env instead",
            path.display()
        ),
    }
}

/// `config` as a running daemon sees it: it runs what it loaded from
/// `source` (at start or the last SIGHUP), so the check is whether the file
/// as it is now would load too; a typo saved since then fails the next
/// reload, and is worth knowing before it does.
pub fn check_loaded_config(source: Option<&Path>) -> Check {
    let Some(path) = source else {
        return Check::pass("config", "none: the daemon runs on the built-in defaults");
    };
    match Config::load_with_secrets(Some(path)) {
        Ok(_) => Check::pass("config", format!("{} (the daemon's)", path.display())),
        Err(e) => Check::fail(
            "config",
            format!(
                "the daemon runs an earlier version of {}; the file as it is now does not load, so a reload or restart would fail: {e}",
                path.display()
            ),
            config_fix(&e),
        ),
    }
}
