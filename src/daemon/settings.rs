//! The daemon's own settings (`[daemon]`), owned here and built by
//! `config`, which only parses the file.

use std::path::PathBuf;
use std::time::Duration;

use crate::agent::RunLimits;

pub const DEFAULT_STEP_TIMEOUT: Duration = Duration::from_secs(60);
pub const DEFAULT_MAX_CONCURRENT_RUNS: u32 = 64;
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// A month of history is enough to debug last week's runs without letting
/// the database grow forever on a busy server.
pub const DEFAULT_HISTORY_DAYS: u32 = 30;
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 1 << 20;
/// A component uploaded to `PUT /v1/plugins/{name}`: a Rust plugin is tens
/// of kilobytes, a Python one (an interpreter compiled to wasm) about
/// 40 MB, so three times that leaves room without inviting the loader's
/// 256 MiB ceiling ([`crate::plugin::MAX_COMPONENT_BYTES`]), which caps it.
pub const DEFAULT_MAX_PLUGIN_BYTES: usize = 128 << 20;
/// Far above what the CLI and a few scripts need, far below the 65536
/// descriptors the unit allows: a flood of connections is refused long
/// before the daemon runs out of descriptors for Docker, SQLite and the LLM.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
/// A quarter of the global cap: the CLI uses one connection per command
/// and a follower one per run, so 64 is plenty for one user, and three
/// other users (root's `agentd cancel` among them) still find room.
pub const DEFAULT_MAX_CONNECTIONS_PER_USER: usize = 64;
/// Each queued run holds its request (up to `max_request_bytes`) and a task.
pub const DEFAULT_MAX_QUEUED_RUNS: usize = 1024;
/// Half the queue: one user cannot take all of it, and another always finds
/// room, while a single user's batch of hundreds still queues.
pub const DEFAULT_MAX_QUEUED_RUNS_PER_USER: usize = 512;
/// A local client sends a request's headers in microseconds; ten seconds
/// is generous for a person typing into `socat` and short for a slowloris.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// A request body is at most `max_request_bytes` (1 MiB) from a local
/// client: milliseconds of work, so ten seconds only ever cuts off a drip.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a response may wait for the client to take any of its bytes.
pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, PartialEq)]
pub struct DaemonConfig {
    pub plugins_dir: PathBuf,
    pub state_dir: PathBuf,
    pub socket: Option<PathBuf>,
    pub step_timeout: Duration,
    pub max_concurrent_runs: u32,
    pub socket_group: Option<String>,
    pub shutdown_grace: Duration,
    /// 0 keeps every run.
    pub history_days: u32,
    pub max_request_bytes: usize,
    /// The largest body `PUT /v1/plugins/{name}` accepts (a component's
    /// bytes); other routes keep `max_request_bytes`. At most the loader's
    /// ceiling.
    pub max_plugin_bytes: usize,
    /// The limits of each run (`max_run_time`, `max_run_bytes`,
    /// `max_tool_calls_per_step`, `max_host_calls_per_step`, `max_message_bytes`,
    /// `max_tool_arguments_bytes`, `max_tool_result_bytes`), owned by the
    /// agent layer that enforces them.
    pub run_limits: RunLimits,
    /// Connections open at once; past it new ones get a 503 and are closed.
    pub max_connections: usize,
    /// Connections one uid (`SO_PEERCRED`) may have open at once; past it
    /// its new ones get a 503 and are closed. At least 1, at most
    /// `max_connections` (a larger value is clamped to it).
    pub max_connections_per_user: usize,
    /// Runs waiting for a slot (a run holds its place from creation until
    /// it gets one); past it `POST /v1/runs` answers 429. At least 1.
    pub max_queued_runs: usize,
    /// Queued runs one uid may have; past it its `POST /v1/runs` answers
    /// 429. At least 1, at most `max_queued_runs` (clamped).
    pub max_queued_runs_per_user: usize,
    /// Time to send a request's headers, counted from the connection's
    /// start or the end of the previous response, so it is also the
    /// keep-alive idle timeout (hyper has one timer for both).
    pub header_timeout: Duration,
    /// Time to receive a request's whole body, from the end of its
    /// headers; past it the answer is 408 and the connection is closed.
    pub body_timeout: Duration,
    /// A connection whose client takes none of a response's bytes for this
    /// long is closed (a follower that stopped reading).
    pub write_timeout: Duration,
    /// Whether a run waiting for a person (a question, an approval) gives
    /// its `max_concurrent_runs` slot back while it waits, and waits for a
    /// slot again once answered. Off by default: a waiting run keeps its
    /// sandbox (and its memory) either way, so releasing the slot lets more
    /// sandboxes exist than `max_concurrent_runs`, and an answered run may
    /// wait behind queued ones before it goes on.
    pub release_waiting: bool,
    /// Whether a symbolic link in the plugins folder is loaded. Off by
    /// default: a link lets whoever controls its target change the code the
    /// daemon runs, outside the folder whose permissions are checked.
    pub follow_symlinks: bool,
    /// A TCP address serving `GET /metrics` alone (the Prometheus text
    /// format, read-only); `None` (the default): metrics only on the socket.
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Tokens (input plus output) all runs together may use per UTC day
    /// (`daemon::budget`); `None`: no daemon-wide budget.
    pub daily_token_budget: Option<u64>,
}

/// How long an MCP session's sandbox may sit unused before it is removed
/// (the next tool call makes a new one): ten minutes keeps a conversation's
/// files between a person's questions without keeping a container per idle
/// IDE window all day.
pub const DEFAULT_MCP_IDLE_TIMEOUT: Duration = Duration::from_secs(600);

/// `[mcp_server]`: agentd as an MCP server at `/mcp` on its socket.
#[derive(Debug, Clone, PartialEq)]
pub struct McpServerConfig {
    /// Whether `/mcp` is served at all (default true: it is behind the same
    /// socket and peer check as the `/v1` API, so it grants nothing new).
    pub enabled: bool,
    /// Whether the loaded tool plugins are offered as MCP tools too, each
    /// call in a sandbox of the MCP session (default false: a client then
    /// runs commands without an agent in between).
    pub expose_tools: bool,
    /// An MCP session's sandbox is removed after this long without a tool
    /// call; the session itself after this long without any message (but
    /// never while a call it made is running).
    pub idle_timeout: Duration,
}

impl Default for McpServerConfig {
    fn default() -> Self {
        McpServerConfig {
            enabled: true,
            expose_tools: false,
            idle_timeout: DEFAULT_MCP_IDLE_TIMEOUT,
        }
    }
}
