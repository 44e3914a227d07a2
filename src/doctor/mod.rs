//! The checks behind `agentd doctor` and `GET /v1/doctor`: is everything
//! `agentd run <agent>` needs in place?
//!
//! A new user's first run fails on whichever prerequisite is missing first,
//! with that one's error; the doctor checks them all at once and says, one
//! line each, what is wrong and the command that fixes it (issue 18).
//!
//! The checks, in order, by their stable names (`--json` scripts match on
//! them):
//! - `config`: the configuration file loads, with the loader the daemon
//!   uses (an unknown key is `FILE:LINE` and the key);
//! - `state`: `[daemon] state_dir` is writable, with at least 100 MiB free;
//! - `plugins`: `[daemon] plugins_dir` passes the daemon's trust check and
//!   its components load, the agent's strategy and tools among them (an
//!   empty or missing folder is fine when a bundle will fill it);
//! - `docker`: the engine answers, and with which version;
//! - `image`: `[sandbox] image` is on the engine and has bash and python3
//!   (a throwaway sandbox, made and removed the way runs do);
//! - `llm`: the agent's endpoint answers `GET /models`, accepts the key and
//!   serves the model (when it lists models);
//! - `daemon` (the CLI's own): a daemon answers on the socket.
//!
//! They live below both the CLI and the daemon because the answer depends
//! on who asks: on a system install the daemon runs as `agentd`, owns the
//! state and plugins folders and reads a configuration its CLI users may
//! not, so the CLI asks the running daemon (`GET /v1/doctor`) to run them
//! as itself, and runs them in its own process only when no daemon answers
//! or `--config`/`--local` says to.
//!
//! Nothing is changed on the way but a probe file in the state folder, the
//! probe sandbox (removed at once) and, when the daemon's compile cache is
//! this user's, entries it would have compiled itself.

mod config;
mod llm;
mod plugins;
mod sandbox;
mod state;

use std::time::Duration;

use crate::agent::AgentConfig;
pub use crate::api::{DoctorCheck as Check, DoctorReport as Report};
use crate::config::Config;
pub use config::{check_config, check_loaded_config};

/// How long the endpoint, the engine's version and the daemon may take to
/// answer: a diagnosis should take seconds, not a request timeout.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(5);

/// Appended to every other check's detail when the configuration did not
/// load and the built-in defaults stood in.
pub const DEFAULTS_NOTE: &str =
    " (checked with the built-in defaults: the configuration does not load)";

impl Check {
    /// A check that passed.
    pub fn pass(name: &str, detail: impl Into<String>) -> Self {
        Check {
            name: name.to_string(),
            ok: true,
            detail: detail.into(),
            fix: None,
        }
    }

    /// A check that failed, with the command or change that fixes it.
    pub fn fail(name: &str, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Check {
            name: name.to_string(),
            ok: false,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }

    /// A failure whose message ends with its own `(fix: ...)`, as the trust
    /// check words them: the fix goes to its own line, not twice.
    fn fail_split(name: &str, message: &str, fallback_fix: impl Into<String>) -> Self {
        match message.rsplit_once(" (fix: ") {
            Some((detail, fix)) => Check::fail(name, detail, fix.trim_end_matches(')')),
            None => Check::fail(name, message, fallback_fix),
        }
    }
}

/// Every check after `config`, as `config` sees them: `state`, `plugins`,
/// `docker`, `image` (on the first engine), `engine NAME` for each further
/// `[[sandbox.engines]]` entry, `llm`, in that order. The slow ones
/// (compiling plugins, a sandbox, the network) run at once. `agent` is
/// `None` when the configuration that should define `agent_name` did not
/// load.
pub async fn check(config: &Config, agent_name: &str, agent: Option<&AgentConfig>) -> Vec<Check> {
    let state = state::check_state(&config.daemon.state_dir);
    let (plugins, (docker, image), engines, llm) = tokio::join!(
        plugins::check_plugins(config, agent_name, agent),
        sandbox::check_sandbox(&config.sandbox),
        sandbox::check_other_engines(&config.sandbox),
        llm::check_llm(config, agent_name),
    );
    let mut checks = vec![state, plugins, docker, image];
    checks.extend(engines);
    checks.push(llm);
    checks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_with_its_own_fix_is_split() {
        let c = Check::fail_split(
            "plugins",
            "the plugins folder /p is writable by everyone (mode 0777); refusing (fix: chmod go-w /p, and check what is in it)",
            "unused",
        );
        assert_eq!(
            c.detail,
            "the plugins folder /p is writable by everyone (mode 0777); refusing"
        );
        assert_eq!(
            c.fix.as_deref(),
            Some("chmod go-w /p, and check what is in it")
        );
        let c = Check::fail_split("plugins", "no fix here", "the fallback");
        assert_eq!(c.fix.as_deref(), Some("the fallback"));
    }
}
