//! `GET /v1/mcp`: the MCP client's servers in the API's types.

use crate::api::{McpInstance, McpList, McpServerView, McpState, McpToolView};
use crate::mcp::{McpClients, Phase, ServerStatus};

fn state_of(phase: Phase) -> McpState {
    match phase {
        Phase::Starting => McpState::Starting,
        Phase::Ready => McpState::Ready,
        Phase::Restarting => McpState::Restarting,
        Phase::Failed => McpState::Failed,
        Phase::Stopped => McpState::Stopped,
    }
}

fn view(s: ServerStatus) -> McpServerView {
    let settings = &s.settings;
    let (state, error, pid, restarts, retry_in_ms) = match (&s.shared, settings.per_run) {
        (Some(snap), _) => (
            state_of(snap.phase),
            snap.error.clone(),
            snap.pid,
            snap.restarts,
            snap.retry_in_ms,
        ),
        (None, true) if !settings.enabled => (McpState::Stopped, None, None, 0, None),
        (None, true) if s.per_run.is_empty() => (McpState::Idle, None, None, 0, None),
        (None, true) => (McpState::PerRun, None, None, 0, None),
        (None, false) => (McpState::Stopped, None, None, 0, None),
    };
    McpServerView {
        name: settings.name.clone(),
        transport: settings.transport.kind().to_string(),
        target: settings.transport.target(),
        enabled: settings.enabled,
        per_run: settings.per_run,
        state,
        error,
        pid,
        restarts,
        retry_in_ms,
        tools: s
            .tools
            .into_iter()
            .map(|t| McpToolView {
                name: t.name,
                model_name: t.model_name,
                description: t.description,
                allowed: t.allowed,
            })
            .collect(),
        instances: s
            .per_run
            .into_iter()
            .map(|(run_id, snap)| McpInstance {
                run_id,
                state: state_of(snap.phase),
                pid: snap.pid,
                error: snap.error,
            })
            .collect(),
    }
}

/// Every server of `clients`, as `GET /v1/mcp` answers.
pub fn list(clients: &McpClients) -> McpList {
    McpList {
        servers: clients.statuses().into_iter().map(view).collect(),
    }
}
