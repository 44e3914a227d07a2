//! Where a run's tools that are not components come from: the tools of MCP
//! servers, named in an agent's `tools` as `mcp:<server>/<tool>` or
//! `mcp:<server>/*`. The loop asks once, when a run starts, and the run
//! keeps what it got to its end; the layer that owns the servers
//! implements it (the daemon's and `run --local`'s `mcp::McpClients`).

use std::sync::Arc;

use crate::plugin::HostTool;

/// The prefix of an agent's `tools` entries that name MCP tools.
pub const MCP_PREFIX: &str = "mcp:";

/// The tools an agent names that the host serves.
#[async_trait::async_trait]
pub trait ToolProvider: Send + Sync {
    /// Whether `entry` (one of an agent's `tools`) is served here rather
    /// than by a tool component.
    fn serves(&self, entry: &str) -> bool {
        entry.starts_with(MCP_PREFIX)
    }
    /// The tools `entries` name, for run `run_id` (a `per_run` server is
    /// started for it). Dropping them releases what the run held. The
    /// error names the entry and why it cannot be served (server down,
    /// no such tool).
    async fn open(
        &self,
        run_id: &str,
        entries: &[String],
    ) -> Result<Vec<Arc<dyn HostTool>>, String>;
    /// The entries that cannot be served now (an unknown server, one that
    /// is down, a tool it does not list), for `GET /v1/agents`.
    fn missing(&self, entries: &[String]) -> Vec<String>;
}

/// No MCP servers: every `mcp:` entry is refused, naming the section to add.
pub struct NoToolProvider;

#[async_trait::async_trait]
impl ToolProvider for NoToolProvider {
    async fn open(
        &self,
        _run_id: &str,
        entries: &[String],
    ) -> Result<Vec<Arc<dyn HostTool>>, String> {
        match entries.first() {
            None => Ok(Vec::new()),
            Some(entry) => Err(format!(
                "tool `{entry}` names an MCP server, and none is configured here ([mcp.<server>] in the configuration file)"
            )),
        }
    }

    fn missing(&self, entries: &[String]) -> Vec<String> {
        entries.to_vec()
    }
}
