//! `[mcp.<server>]` as the MCP client uses it: how to reach each server,
//! what of it agents may use, and how long to wait for it. Built by
//! `config` from the file (secrets read there), owned here.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::plugin::Secret;

/// How long a call waits for its answer unless `timeout` says otherwise.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a server may take to start and answer `initialize` and
/// `tools/list` unless `start_timeout` says otherwise (an `npx` server may
/// fetch its package first).
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(30);

/// Every `[mcp.<server>]` table, by server name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct McpSettings {
    /// By server name.
    pub servers: BTreeMap<String, ServerSettings>,
}

/// One `[mcp.<server>]` table.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerSettings {
    /// The table's name: `mcp:<name>/...` in an agent's `tools`.
    pub name: String,
    /// How it is reached.
    pub transport: Transport,
    /// `false` keeps the table but starts nothing; agents naming it fail.
    pub enabled: bool,
    /// How long one `tools/call` may take before it is cancelled.
    pub timeout: Duration,
    /// How long starting (spawn or connect, `initialize`, `tools/list`) may take.
    pub start_timeout: Duration,
    /// The server's tools agents may use; `None` allows all it lists.
    pub tools: Option<Vec<String>>,
    /// A fresh server for each run that uses it (for stateful servers),
    /// stopped when the run ends; otherwise one shared by the daemon's runs.
    pub per_run: bool,
}

/// How a server is reached.
#[derive(Debug, Clone, PartialEq)]
pub enum Transport {
    /// A child process speaking JSON-RPC on its stdin and stdout.
    Stdio {
        /// The program (looked up in the daemon's `PATH` when it has no `/`).
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Its whole environment besides `PATH`: the table's `env` and its
        /// `secrets`, nothing inherited from the daemon.
        env: BTreeMap<String, Secret>,
        /// The folder it starts in; `None`: the daemon's.
        cwd: Option<std::path::PathBuf>,
    },
    /// Streamable HTTP at a URL.
    Http {
        /// `http://` or `https://`.
        url: String,
        /// Sent with every request; values may hold secrets, so all of them
        /// are kept redacted.
        headers: BTreeMap<String, Secret>,
    },
}

impl Transport {
    /// `stdio` or `http`, as `GET /v1/mcp` says.
    pub fn kind(&self) -> &'static str {
        match self {
            Transport::Stdio { .. } => "stdio",
            Transport::Http { .. } => "http",
        }
    }

    /// What `GET /v1/mcp` shows of it: the command line or the URL, never
    /// an environment value or a header.
    pub fn target(&self) -> String {
        match self {
            Transport::Stdio { command, args, .. } => std::iter::once(command.as_str())
                .chain(args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
            Transport::Http { url, .. } => url.clone(),
        }
    }
}

impl ServerSettings {
    /// Whether agents may use the server's tool `tool` (`tools` allow-list).
    pub fn allows(&self, tool: &str) -> bool {
        self.tools
            .as_ref()
            .is_none_or(|allowed| allowed.iter().any(|t| t == tool))
    }
}
