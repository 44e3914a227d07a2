//! `agentd paths`: where a daemon started with this configuration keeps
//! things.
//!
//! Scripts (the installer above all) must not guess the plugins folder from
//! the layout's defaults: an existing configuration may set `[daemon]
//! plugins_dir` or `state_dir`, and the defaults themselves depend on the
//! user, systemd's directories and XDG. The binary that resolves them for
//! the daemon answers, with the same loader, so the two never disagree.
//!
//! The output is one `key=value` line each, in a fixed order (`config`,
//! `state_dir`, `plugins_dir`, `socket`), for `while IFS='=' read -r k v`;
//! `--json` prints the same as an object. Secrets are never read: the
//! question is where, not what.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{out, PathsArgs};
use crate::config::{default_config_path, default_socket_path, Config};

#[derive(Debug, Serialize)]
struct Paths {
    /// The file read, or `None` for the built-in defaults.
    config: Option<PathBuf>,
    state_dir: PathBuf,
    plugins_dir: PathBuf,
    /// Where the daemon listens: `[daemon] socket`, else its default.
    socket: PathBuf,
}

pub fn run(args: PathsArgs) -> i32 {
    let path = args.config.clone().or_else(default_config_path);
    let config = match Config::load(path.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("agentd: {e}");
            return 1;
        }
    };
    let paths = Paths {
        config: path,
        socket: config
            .daemon
            .socket
            .clone()
            .unwrap_or_else(default_socket_path),
        state_dir: config.daemon.state_dir,
        plugins_dir: config.daemon.plugins_dir,
    };
    if args.json {
        if let Err(e) = out::json(&paths) {
            eprintln!("agentd: {e}");
            return 1;
        }
    } else {
        out::text(&lines(&paths));
    }
    0
}

/// `key=value` lines; an absent config file is an empty value.
fn lines(p: &Paths) -> String {
    let show = |p: &Path| p.display().to_string();
    format!(
        "config={}\nstate_dir={}\nplugins_dir={}\nsocket={}\n",
        p.config.as_deref().map(show).unwrap_or_default(),
        show(&p.state_dir),
        show(&p.plugins_dir),
        show(&p.socket),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_in_a_fixed_order_and_keep_spaces() {
        let p = Paths {
            config: None,
            state_dir: "/var/lib/my agentd".into(),
            plugins_dir: "/srv/plug ins".into(),
            socket: "/run/agentd/agentd.sock".into(),
        };
        assert_eq!(
            lines(&p),
            "config=\nstate_dir=/var/lib/my agentd\nplugins_dir=/srv/plug ins\nsocket=/run/agentd/agentd.sock\n"
        );
    }
}
