//! Tools the host serves itself, next to the tool components: an MCP
//! server's tools. The plugin host defines what it needs of one (a spec and
//! a call) and the layer that owns the servers implements it, so a run's
//! [`ToolBox`](super::tool::ToolBox) calls both kinds through one path: the
//! same events, limits, cut results and cancellation.

use std::sync::Arc;

use crate::chat::ToolSpec;

/// One tool served by the host. The time a call takes is a host wait: the
/// step clock is paused during it, as for a sandbox command, and the run's
/// `max_run_time` bounds it.
#[async_trait::async_trait]
pub trait HostTool: Send + Sync {
    /// What the model is shown; its name is unique among the run's tools.
    fn spec(&self) -> &ToolSpec;
    /// One call with the model's JSON `arguments`: `Ok` is the observation,
    /// `Err` an error observation the model sees (it may try again).
    /// Dropping the future abandons the call; the implementation tells its
    /// server (MCP's `notifications/cancelled`).
    async fn call(&self, arguments: &str) -> Result<String, String>;
}

/// The tools one run may call: its tool components, and the tools the host
/// serves it (resolved once, when the run starts, and kept to its end).
#[derive(Clone, Default)]
pub struct RunTools {
    /// The tool components the agent names.
    pub plugins: Vec<Arc<super::tool::ToolPlugin>>,
    /// The host-served tools the agent names (`mcp:` entries).
    pub hosted: Vec<Arc<dyn HostTool>>,
}

impl RunTools {
    /// What the model is shown: the components' specs, then the hosted ones.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.plugins
            .iter()
            .map(|t| t.spec.clone())
            .chain(self.hosted.iter().map(|t| t.spec().clone()))
            .collect()
    }
}
