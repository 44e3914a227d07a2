//! `agentd mcp`: the MCP servers the daemon uses (`list`), and the stdio
//! bridge to the daemon's own MCP server (`serve`, in `mcp_serve.rs`).

use std::path::PathBuf;

use super::client::{from_value, Client, ClientError};
use super::out;
use super::sanitize::terminal_safe;
use super::table::Table;
use crate::api::{McpList, McpState};

/// `agentd mcp` and its subcommands.
#[derive(clap::Args, Debug)]
pub struct McpArgs {
    #[command(subcommand)]
    pub command: McpCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum McpCommand {
    /// List the MCP servers of `[mcp.<server>]`: state, process, tools.
    List(super::JsonArgs),
    /// Serve the daemon's MCP tools on stdin/stdout, for MCP clients that
    /// start a command (Claude Desktop, IDEs, goose): a bridge to `/mcp` on
    /// the daemon's socket.
    Serve(McpServeArgs),
}

#[derive(clap::Args, Debug)]
pub struct McpServeArgs {
    /// Configuration file, read for `[daemon] socket`.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

fn state_text(state: McpState) -> &'static str {
    match state {
        McpState::Starting => "starting",
        McpState::Ready => "ready",
        McpState::Restarting => "restarting",
        McpState::Failed => "failed",
        McpState::Stopped => "stopped",
        McpState::Idle => "idle (per run)",
        McpState::PerRun => "per run",
    }
}

/// `agentd mcp list`.
pub async fn list(client: &Client, json: bool) -> Result<i32, ClientError> {
    let value: serde_json::Value = client.get("/v1/mcp").await?;
    if json {
        out::json(&value)?;
        return Ok(0);
    }
    let list: McpList = from_value("/v1/mcp", &value)?;
    out::text(&table(&list));
    Ok(0)
}

fn table(list: &McpList) -> String {
    if list.servers.is_empty() {
        return "no MCP servers configured ([mcp.<server>] in the configuration file)\n".into();
    }
    let mut table = Table::new(["NAME", "TRANSPORT", "STATE", "PID", "TOOLS", "TARGET"]);
    let mut notes = Vec::new();
    for s in &list.servers {
        let allowed: Vec<&str> = s
            .tools
            .iter()
            .filter(|t| t.allowed)
            .map(|t| t.name.as_str())
            .collect();
        let pids: Vec<String> = s
            .pid
            .into_iter()
            .chain(s.instances.iter().filter_map(|i| i.pid))
            .map(|p| p.to_string())
            .collect();
        table.row(vec![
            s.name.clone(),
            s.transport.clone(),
            state_text(s.state).to_string(),
            if pids.is_empty() {
                "-".into()
            } else {
                pids.join(",")
            },
            allowed.len().to_string(),
            terminal_safe(&s.target).into_owned(),
        ]);
        if let Some(e) = &s.error {
            notes.push(format!("  {}: {}", s.name, terminal_safe(e)));
        }
        if !allowed.is_empty() {
            notes.push(format!(
                "  {} tools: {}",
                s.name,
                terminal_safe(&allowed.join(", "))
            ));
        }
    }
    let mut text = table.render();
    for n in notes {
        text.push_str(&n);
        text.push('\n');
    }
    text
}
