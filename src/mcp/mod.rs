//! agentd as an MCP client: the tools of Model Context Protocol servers
//! (`[mcp.<server>]`, stdio or Streamable HTTP, through the official SDK,
//! rmcp) offered to agents next to the tool components. An agent names
//! them in `tools` as `mcp:<server>/<tool>` or `mcp:<server>/*`; a run gets
//! them through [`McpClients`], the loop's
//! [`ToolProvider`](crate::agent::ToolProvider), and calls them through the
//! plugin host's [`HostTool`](crate::plugin::HostTool) door, so events,
//! limits, cut results and cancellation are the same as for components.

pub mod clients;
mod connect;
mod content;
pub mod names;
pub mod settings;
pub mod supervisor;
mod tool;

pub use clients::{McpClients, ServerStatus, ToolStatus};
pub use settings::{McpSettings, ServerSettings, Transport};
pub use supervisor::{Phase, Snapshot};
