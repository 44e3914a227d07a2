//! The loaded tool plugins as MCP tools (`[mcp_server] expose_tools`):
//! listed from the plugin host's current set, each call a fresh instance
//! of the version serving now (as a new run would get it), with what the
//! running configuration grants it, acting in its session's sandbox.

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool};
use tokio_util::sync::CancellationToken;

use super::session_sandbox::SessionSandbox;
use crate::daemon::state::Daemon;
use crate::plugin::tool::call_once;
use crate::plugin::{NoHuman, PluginSet, ToolPlugin};

/// The MCP description of a tool plugin: its spec as the model sees it. A
/// schema that is not a JSON object (the loader checked it is JSON Schema,
/// so this is only a guard) becomes the empty object schema.
pub fn describe(plugin: &ToolPlugin) -> Tool {
    let schema: JsonObject = serde_json::from_str(&plugin.spec.parameters)
        .unwrap_or_else(|_| JsonObject::from_iter([("type".to_string(), "object".into())]));
    Tool::new(
        plugin.spec.name.clone(),
        plugin.spec.description.clone(),
        Arc::new(schema),
    )
}

/// Every tool plugin in `set` whose name is not `reserved` (agentd's own
/// tools win a clash; the plugin is then only reachable through runs).
pub fn list(set: &PluginSet, reserved: &[&str]) -> Vec<Tool> {
    set.tools
        .values()
        .filter(|p| !reserved.contains(&p.spec.name.as_str()))
        .map(|p| describe(p))
        .collect()
}

/// Calls tool plugin `plugin` with `arguments` in `sandbox`'s container
/// for session `session`, until it answers or `cancel` fires. A failure
/// is a tool error (`isError`), as the model in a run would see it.
pub async fn call(
    daemon: &Daemon,
    plugin: Arc<ToolPlugin>,
    sandbox: &Arc<SessionSandbox>,
    session: &str,
    arguments: Option<JsonObject>,
    cancel: &CancellationToken,
) -> CallToolResult {
    let arguments = serde_json::Value::Object(arguments.unwrap_or_default()).to_string();
    let generation = daemon.generation();
    let runtime = &generation.runtime;
    let lease = sandbox.lease(session);
    let call = call_once(
        plugin,
        lease.sandbox.clone(),
        runtime.grants.clone(),
        // The MCP client is a program: its call has no run, and no one
        // waiting on the other end to answer a question.
        Arc::new(NoHuman("an MCP client's tool call has no person to ask")),
        &arguments,
        runtime.step_timeout,
    );
    let result = tokio::select! {
        r = call => r,
        () = cancel.cancelled() => {
            return CallToolResult::error(vec![ContentBlock::text("cancelled by the client")]);
        }
    };
    drop(lease);
    match result {
        Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
        Err(e) => CallToolResult::error(vec![ContentBlock::text(e.to_string())]),
    }
}
