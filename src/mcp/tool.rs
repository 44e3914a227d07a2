//! One MCP tool as a run sees it: a [`HostTool`] whose call is a
//! `tools/call` on its server, bounded by `[mcp.<server>] timeout` and
//! cancelled on the server when the run drops it.

use std::sync::Arc;

use rmcp::model::{CallToolRequestParams, JsonObject};

use super::content::observation;
use super::supervisor::Server;
use crate::chat::ToolSpec;
use crate::plugin::HostTool;

/// A tool of an MCP server, under the name the model is shown.
pub struct McpTool {
    spec: ToolSpec,
    /// The tool's name on its server.
    tool: String,
    /// The server the run started with (kept to its end).
    server: Arc<Server>,
}

impl McpTool {
    /// `tool` of `server`, shown to the model as `spec`.
    pub fn new(spec: ToolSpec, tool: String, server: Arc<Server>) -> Self {
        McpTool { spec, tool, server }
    }
}

/// The model's arguments as the JSON object `tools/call` takes; empty text
/// is no arguments.
fn arguments_of(tool: &str, arguments: &str) -> Result<Option<JsonObject>, String> {
    if arguments.trim().is_empty() {
        return Ok(None);
    }
    match serde_json::from_str::<serde_json::Value>(arguments) {
        Ok(serde_json::Value::Object(map)) => Ok(Some(map)),
        Ok(other) => Err(format!(
            "the arguments of `{tool}` must be a JSON object, not {}",
            match other {
                serde_json::Value::Array(_) => "an array",
                serde_json::Value::String(_) => "a string",
                serde_json::Value::Number(_) => "a number",
                serde_json::Value::Bool(_) => "a boolean",
                _ => "null",
            }
        )),
        Err(e) => Err(format!("the arguments of `{tool}` are not valid JSON: {e}")),
    }
}

#[async_trait::async_trait]
impl HostTool for McpTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, arguments: &str) -> Result<String, String> {
        let args = arguments_of(&self.spec.name, arguments)?;
        let peer = self.server.peer()?;
        let name = self.server.name();
        let limit = self.server.settings.timeout;
        let mut params = CallToolRequestParams::new(self.tool.clone());
        params.arguments = args;
        // rmcp sends `notifications/cancelled` when this future is dropped:
        // on the timeout below, or when the run is cancelled or stopped.
        match tokio::time::timeout(limit, peer.call_tool(params)).await {
            Err(_) => {
                tracing::warn!(mcp_server = name, tool = %self.tool, limit_secs = limit.as_secs_f64(), "MCP tool call timed out; cancelled");
                Err(format!(
                    "MCP server `{name}` did not answer `{}` within {}s ([mcp.{name}] timeout); the call was cancelled",
                    self.tool,
                    limit.as_secs_f64()
                ))
            }
            Ok(Err(e)) => Err(format!(
                "MCP server `{name}` failed on `{}`: {e}",
                self.tool
            )),
            Ok(Ok(result)) => observation(&result),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::arguments_of;

    #[test]
    fn arguments_must_be_an_object() {
        assert_eq!(arguments_of("t", "  "), Ok(None));
        assert!(arguments_of("t", r#"{"a":1}"#).unwrap().is_some());
        assert!(arguments_of("t", "[1]")
            .unwrap_err()
            .contains("not an array"));
        assert!(arguments_of("t", "{")
            .unwrap_err()
            .contains("not valid JSON"));
    }
}
