//! `agentd doctor`: is everything `agentd run <agent>` needs in place?
//!
//! The checks themselves are [`crate::doctor`]'s. Whose view they take
//! matters: with no `--config` (and no `--local`), a daemon that answers on
//! the socket runs them as itself (`GET /v1/doctor`), since that daemon,
//! with its user, its configuration and its folders, is what `agentd run`
//! uses; a CLI user on a system install can read neither its configuration
//! nor its state. With `--config` or `--local`, or when no daemon answers,
//! this process checks what a daemon started here with that configuration
//! would find. Either way the `daemon` line is this process's own.
//!
//! The exit status is 0 only when every check passes, 1 otherwise, 2 for
//! bad usage (an agent the configuration does not define).

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::client::{Client, ClientError};
use super::{endpoint, exit, out, sanitize, DoctorArgs};
use crate::api::Status;
use crate::config::client_socket_path;
use crate::doctor::{self, Check, Report, ANSWER_WITHIN, DEFAULTS_NOTE};

/// The daemon's checks make a sandbox and ask the endpoint: seconds, but
/// more than one answer's worth.
const DAEMON_CHECKS_WITHIN: Duration = Duration::from_secs(90);

pub async fn run(args: DoctorArgs, socket: Option<PathBuf>) -> i32 {
    let (config, config_check) = doctor::check_config(args.config.as_deref());
    let loaded = config_check.ok;
    let socket = endpoint::choose(socket, config.daemon.socket.clone(), client_socket_path);
    let mut daemon = check_daemon(&socket).await;
    let ask_daemon = daemon.ok && !args.local && args.config.is_none();
    let daemons_view = if ask_daemon {
        match daemon_checks(&socket, &args.agent).await {
            Ok(report) => Some(report.checks),
            Err(ClientError::Http { code, message, .. }) if code == "unknown_agent" => {
                eprintln!("agentd: {message}");
                return exit::USAGE;
            }
            // A daemon older than the route: this process checks instead.
            Err(ClientError::Http { code, .. }) if code == "not_found" => {
                daemon.detail.push_str(
                    "; it cannot run the checks itself (an older version), so they were run here",
                );
                None
            }
            Err(e) => {
                daemon = Check::fail(
                    "daemon",
                    format!("{}; it did not run the checks: {e}", daemon.detail),
                    "see its log (journalctl -u agentd), or check from here: agentd doctor --local",
                );
                None
            }
        }
    } else {
        None
    };
    let mut checks = match daemons_view {
        Some(checks) => {
            daemon.detail.push_str(
                "; the checks above are the daemon's own (agentd doctor --local runs them here)",
            );
            checks
        }
        None => match local_checks(&config, config_check, &args.agent).await {
            Some(checks) => checks,
            None => return exit::USAGE,
        },
    };
    if !loaded {
        // Its socket, too, came from the defaults.
        daemon.detail.push_str(DEFAULTS_NOTE);
    }
    checks.push(daemon);
    let report = Report {
        ok: checks.iter().all(|c| c.ok),
        checks,
    };
    if args.json {
        if let Err(e) = out::json(&report) {
            eprintln!("agentd: {e}");
            return 1;
        }
    } else {
        out::text(&render(&report.checks, &args.agent));
    }
    if report.ok {
        0
    } else {
        1
    }
}

/// The checks in this process, on `config` (the defaults, and said so on
/// every line, when the file did not load); `None` for an agent a loaded
/// configuration does not define.
async fn local_checks(
    config: &crate::config::Config,
    config_check: Check,
    agent_name: &str,
) -> Option<Vec<Check>> {
    let loaded = config_check.ok;
    let agent = config.agent(agent_name).cloned();
    if agent.is_none() && loaded {
        let known: Vec<_> = config.agents.keys().cloned().collect();
        eprintln!(
            "agentd: unknown agent `{agent_name}` (known: {})",
            known.join(", ")
        );
        return None;
    }
    let mut rest = doctor::check(config, agent_name, agent.as_ref()).await;
    if !loaded {
        for check in &mut rest {
            check.detail.push_str(DEFAULTS_NOTE);
        }
    }
    let mut checks = vec![config_check];
    checks.append(&mut rest);
    Some(checks)
}

/// `GET /v1/doctor?agent=NAME`: the checks as the daemon's own user runs
/// them, on its configuration.
async fn daemon_checks(socket: &Path, agent: &str) -> Result<Report, ClientError> {
    let client = Client::new(socket.to_path_buf());
    let path = format!("/v1/doctor?agent={}", url_escape(agent));
    match tokio::time::timeout(DAEMON_CHECKS_WITHIN, client.get::<Report>(&path)).await {
        Ok(answer) => answer,
        Err(_) => Err(ClientError::Protocol(format!(
            "no answer within {} s",
            DAEMON_CHECKS_WITHIN.as_secs()
        ))),
    }
}

/// Percent-encodes everything but unreserved characters (RFC 3986), for
/// an agent name in a query string.
fn url_escape(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The text report: a line a check (the fix indented under a failing one),
/// then the verdict. Details carry servers' and files' words, so they are
/// made terminal-safe.
fn render(checks: &[Check], agent: &str) -> String {
    let mut text = String::new();
    for c in checks {
        let mark = if c.ok { '✓' } else { '✗' };
        let detail = sanitize::terminal_safe(&c.detail);
        text.push_str(&format!("{mark} {:<7} {detail}\n", c.name));
        if let Some(fix) = &c.fix {
            text.push_str(&format!("  fix: {}\n", sanitize::terminal_safe(fix)));
        }
    }
    match checks.iter().filter(|c| !c.ok).count() {
        0 => text.push_str(&format!("all checks passed: agentd run {agent} is ready\n")),
        1 => text.push_str("1 problem\n"),
        n => text.push_str(&format!("{n} problems\n")),
    }
    text
}

async fn check_daemon(socket: &Path) -> Check {
    let shown = socket.display().to_string();
    let client = Client::new(socket.to_path_buf());
    let answer = tokio::time::timeout(ANSWER_WITHIN, client.get::<Status>("/v1/status")).await;
    let start = "start it: `agentd serve`, or `systemctl start agentd` (`systemctl --user start agentd` for a user install)";
    match answer {
        Ok(Ok(status)) => {
            let mut detail = format!(
                "running at {shown} (version {}, {} runs active)",
                status.version, status.runs_active
            );
            let mine = env!("CARGO_PKG_VERSION");
            if status.version != mine {
                detail.push_str(&format!("; this agentd is version {mine}"));
            }
            Check::pass("daemon", detail)
        }
        Ok(Err(ClientError::Connect { source, .. }))
            if source.kind() == ErrorKind::PermissionDenied =>
        {
            Check::fail(
                "daemon",
                format!("cannot connect to {shown}: permission denied"),
                join_fix(socket),
            )
        }
        Ok(Err(ClientError::Connect { .. })) => {
            Check::fail("daemon", format!("no daemon at {shown}"), start)
        }
        Ok(Err(e)) => Check::fail(
            "daemon",
            format!("the daemon at {shown} did not answer as expected: {e}"),
            "restart it; if it persists, see its log (journalctl -u agentd)",
        ),
        Err(_) => Check::fail(
            "daemon",
            format!(
                "the daemon at {shown} did not answer within {} s",
                ANSWER_WITHIN.as_secs()
            ),
            "restart it; if it persists, see its log (journalctl -u agentd)",
        ),
    }
}

/// The fix for a socket this user may not connect to: join the group the
/// socket file actually has (`agentd-users` on a system install, whatever
/// `[daemon] socket_group` or the socket unit chose elsewhere).
fn join_fix(socket: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    match std::fs::metadata(socket)
        .ok()
        .and_then(|m| group_name(m.gid()))
    {
        Some(group) => format!(
            "join the socket's group: sudo usermod -aG {group} $USER, then log in again (or run as the socket's owner)"
        ),
        None => "join the socket's group (ls -l the socket to see it), then log in again; or run as the socket's owner".into(),
    }
}

/// A group id's name, if the system knows it.
fn group_name(gid: u32) -> Option<String> {
    // SAFETY: group is plain data; all zeroes is a valid value of it.
    let mut group: libc::group = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::group = std::ptr::null_mut();
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: every pointer is valid for the call and buf's length is passed.
    let rc = unsafe { libc::getgrgid_r(gid, &mut group, buf.as_mut_ptr(), buf.len(), &mut result) };
    if rc != 0 || result.is_null() {
        return None;
    }
    // SAFETY: on success gr_name points at a NUL-terminated string in buf.
    let name = unsafe { std::ffi::CStr::from_ptr(group.gr_name) };
    Some(name.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Check> {
        vec![
            Check::pass("config", "/etc/agentd/agentd.toml"),
            Check::fail(
                "llm",
                "http://127.0.0.1:9/v1 is unreachable: connection refused",
                "start the server, or correct [llm] base_url",
            ),
        ]
    }

    #[test]
    fn text_is_a_line_a_check_with_the_fix_under_a_failure() {
        assert_eq!(
            render(&sample(), "manus"),
            "✓ config  /etc/agentd/agentd.toml\n\
             ✗ llm     http://127.0.0.1:9/v1 is unreachable: connection refused\n  \
             fix: start the server, or correct [llm] base_url\n\
             1 problem\n"
        );
        assert!(render(&sample()[..1], "manus")
            .ends_with("all checks passed: agentd run manus is ready\n"));
    }

    #[test]
    fn json_has_ok_and_every_check_with_a_null_fix_when_ok() {
        let v = serde_json::to_value(Report {
            ok: false,
            checks: sample(),
        })
        .expect("json");
        assert_eq!(
            v,
            serde_json::json!({"ok": false, "checks": [
                {"name": "config", "ok": true, "detail": "/etc/agentd/agentd.toml", "fix": null},
                {"name": "llm", "ok": false,
                 "detail": "http://127.0.0.1:9/v1 is unreachable: connection refused",
                 "fix": "start the server, or correct [llm] base_url"},
            ]})
        );
    }

    #[test]
    fn agent_names_are_escaped_for_the_query() {
        assert_eq!(url_escape("manus"), "manus");
        assert_eq!(url_escape("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
    }

    #[test]
    fn the_join_fix_names_the_sockets_own_group() {
        let tmp = tempfile::tempdir().expect("tmp");
        let file = tmp.path().join("sock");
        std::fs::write(&file, "").expect("write");
        use std::os::unix::fs::MetadataExt;
        let gid = std::fs::metadata(&file).expect("stat").gid();
        let name = group_name(gid).expect("the file's group has a name");
        assert!(join_fix(&file).contains(&format!("usermod -aG {name} $USER")));
        assert!(join_fix(&tmp.path().join("missing")).contains("ls -l"));
    }
}
