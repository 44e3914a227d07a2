//! One MCP server's life: started (spawned or connected, `initialize`,
//! `tools/list`), listed again on `notifications/tools/list_changed`,
//! restarted with backoff when it dies or fails to start, stopped when the
//! last holder lets go. Runs hold the [`Server`] they started with, so a
//! SIGHUP that replaces the table does not touch them: the old server
//! lives until their end.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use rmcp::model::Tool;
use rmcp::service::Peer;
use rmcp::RoleClient;
use tokio::sync::watch;
use tokio_util::sync::{CancellationToken, DropGuard};
use tracing::{info, warn, Instrument};

use super::connect::{connect, Events};
use super::settings::ServerSettings;
use crate::sync::RwLockExt;

/// The longest wait between two attempts to start a server that keeps failing.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A server that stayed up this long is restarted at once when it dies.
const HEALTHY: Duration = Duration::from_secs(30);

/// Where a server is in its life (`GET /v1/mcp`'s `state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Its first start is under way.
    Starting,
    /// Initialized, its tools listed.
    Ready,
    /// It died or failed; a new attempt is under way.
    Restarting,
    /// Its last attempt failed (`error` says why); the next one comes
    /// after a backoff.
    Failed,
    /// Stopped: the table was removed or disabled, or the daemon stops.
    Stopped,
}

struct State {
    phase: Phase,
    /// As listed by the server (before the allow-list).
    tools: Arc<Vec<Tool>>,
    peer: Option<Peer<RoleClient>>,
    pid: Option<u32>,
    error: Option<String>,
    restarts: u32,
    /// When the next attempt starts, while `Failed`.
    retry_at: Option<Instant>,
}

struct Shared {
    name: String,
    state: RwLock<State>,
    /// Bumped on every change of `state`, for those waiting on it.
    changed: watch::Sender<u64>,
}

impl Shared {
    fn update(&self, f: impl FnOnce(&mut State)) {
        f(&mut self.state.write_unpoisoned());
        self.changed.send_modify(|n| *n += 1);
    }
}

/// One server and its supervisor task, which ends when this is dropped.
pub struct Server {
    /// The table it was started from.
    pub settings: ServerSettings,
    shared: Arc<Shared>,
    _stop: DropGuard,
}

/// A snapshot of a server for `GET /v1/mcp`.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Where it is in its life.
    pub phase: Phase,
    /// What it lists, before the allow-list.
    pub tools: Arc<Vec<Tool>>,
    /// A stdio server's process id.
    pub pid: Option<u32>,
    /// Why the last attempt failed or the connection ended.
    pub error: Option<String>,
    /// How many times it was restarted.
    pub restarts: u32,
    /// Milliseconds until the next attempt, while `Failed`.
    pub retry_in_ms: Option<u64>,
}

impl Server {
    /// Starts `settings`' server under a supervisor task (on the current
    /// tokio runtime).
    pub fn start(settings: ServerSettings) -> Arc<Server> {
        let stop = CancellationToken::new();
        let shared = Arc::new(Shared {
            name: settings.name.clone(),
            state: RwLock::new(State {
                phase: if settings.enabled {
                    Phase::Starting
                } else {
                    Phase::Stopped
                },
                tools: Arc::default(),
                peer: None,
                pid: None,
                error: None,
                restarts: 0,
                retry_at: None,
            }),
            changed: watch::channel(0).0,
        });
        if settings.enabled {
            let span = tracing::info_span!("mcp_server", server = %settings.name);
            tokio::spawn(
                supervise(settings.clone(), shared.clone(), stop.clone()).instrument(span),
            );
        }
        Arc::new(Server {
            settings,
            shared,
            _stop: stop.drop_guard(),
        })
    }

    /// What waits for this server to stop once every holder has let go
    /// (the daemon's shutdown).
    pub fn stopped(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let shared = self.shared.clone();
        let enabled = self.settings.enabled;
        async move {
            let mut changes = shared.changed.subscribe();
            while enabled && shared.state.read_unpoisoned().phase != Phase::Stopped {
                if changes.changed().await.is_err() {
                    return;
                }
            }
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Where it is now.
    pub fn snapshot(&self) -> Snapshot {
        let st = self.shared.state.read_unpoisoned();
        Snapshot {
            phase: st.phase,
            tools: st.tools.clone(),
            pid: st.pid,
            error: st.error.clone(),
            restarts: st.restarts,
            retry_in_ms: st
                .retry_at
                .map(|at| at.saturating_duration_since(Instant::now()).as_millis() as u64),
        }
    }

    /// The connection to send a call on, or why there is none (the error
    /// names the server and its state).
    pub fn peer(&self) -> Result<Peer<RoleClient>, String> {
        let st = self.shared.state.read_unpoisoned();
        match (&st.peer, st.phase) {
            (Some(peer), Phase::Ready) => Ok(peer.clone()),
            _ => Err(self.down(&st)),
        }
    }

    fn down(&self, st: &State) -> String {
        let name = self.name();
        match st.phase {
            Phase::Stopped if !self.settings.enabled => {
                format!("MCP server `{name}` is disabled ([mcp.{name}] enabled = false)")
            }
            Phase::Stopped => format!("MCP server `{name}` is stopped"),
            Phase::Starting => format!("MCP server `{name}` is still starting"),
            Phase::Ready => format!("MCP server `{name}` has no connection"),
            Phase::Restarting | Phase::Failed => format!(
                "MCP server `{name}` is down: {}; agentd is restarting it",
                st.error.as_deref().unwrap_or("it stopped")
            ),
        }
    }

    /// Waits until the server is ready, while a start is under way (at
    /// most `start_timeout`); then its tools, or why it cannot serve.
    pub async fn ready(&self) -> Result<Arc<Vec<Tool>>, String> {
        let mut changes = self.shared.changed.subscribe();
        let deadline = tokio::time::Instant::now() + self.settings.start_timeout;
        loop {
            {
                let st = self.shared.state.read_unpoisoned();
                match st.phase {
                    Phase::Ready => return Ok(st.tools.clone()),
                    Phase::Starting | Phase::Restarting => {}
                    Phase::Failed | Phase::Stopped => return Err(self.down(&st)),
                }
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(format!("MCP server `{}` is stopped", self.name())),
                Err(_) => {
                    return Err(format!(
                        "MCP server `{}` did not start within {}s ([mcp.{}] start_timeout)",
                        self.name(),
                        self.settings.start_timeout.as_secs_f64(),
                        self.name()
                    ))
                }
            }
        }
    }
}

/// Starts, watches and restarts the server until `stop`.
async fn supervise(settings: ServerSettings, shared: Arc<Shared>, stop: CancellationToken) {
    let mut backoff = Duration::ZERO;
    let mut attempt = 0u32;
    loop {
        if attempt > 0 {
            shared.update(|st| {
                st.phase = Phase::Restarting;
                st.restarts += 1;
                st.retry_at = None;
            });
        }
        attempt += 1;
        let events = Events::default();
        let started = tokio::select! {
            _ = stop.cancelled() => break,
            r = tokio::time::timeout(settings.start_timeout, start(&settings, events.clone())) => r,
        };
        let error = match started {
            Err(_) => format!(
                "did not start within {}s ([mcp.{}] start_timeout)",
                settings.start_timeout.as_secs_f64(),
                settings.name
            ),
            Ok(Err(e)) => e,
            Ok(Ok((conn, tools))) => {
                let up = Instant::now();
                info!(tools = tools.len(), pid = conn.pid, "MCP server ready");
                let peer = conn.service.peer().clone();
                shared.update(|st| {
                    st.phase = Phase::Ready;
                    st.tools = Arc::new(tools);
                    st.peer = Some(peer.clone());
                    st.pid = conn.pid;
                    st.error = None;
                });
                let ended = serve(&settings, &shared, conn, &events, &peer, &stop).await;
                shared.update(|st| {
                    st.peer = None;
                    st.pid = None;
                });
                let Some(why) = ended else { break };
                if up.elapsed() >= HEALTHY {
                    backoff = Duration::ZERO;
                }
                why
            }
        };
        warn!(error = %error, retry_in_secs = backoff.as_secs_f64(), "MCP server down");
        shared.update(|st| {
            st.phase = Phase::Failed;
            st.error = Some(error);
            st.retry_at = Some(Instant::now() + backoff);
        });
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).clamp(Duration::from_secs(1), MAX_BACKOFF);
    }
    shared.update(|st| {
        st.phase = Phase::Stopped;
        st.peer = None;
        st.pid = None;
        st.retry_at = None;
    });
}

/// One attempt: connect, then list the tools.
async fn start(
    settings: &ServerSettings,
    events: Events,
) -> Result<(super::connect::Connection, Vec<Tool>), String> {
    let conn = connect(&settings.name, &settings.transport, events)
        .await
        .map_err(|e| e.to_string())?;
    let tools = conn
        .service
        .peer()
        .list_all_tools()
        .await
        .map_err(|e| format!("tools/list failed: {e}"))?;
    Ok((conn, tools))
}

/// Serves a live connection until it ends (`Some(why)`) or `stop` (`None`),
/// listing the tools again on each `list_changed`.
async fn serve(
    settings: &ServerSettings,
    shared: &Shared,
    conn: super::connect::Connection,
    events: &Events,
    peer: &Peer<RoleClient>,
    stop: &CancellationToken,
) -> Option<String> {
    let ct = conn.service.cancellation_token();
    let mut done = tokio::spawn(conn.service.waiting());
    loop {
        tokio::select! {
            _ = stop.cancelled() => {
                ct.cancel();
                let _ = done.await;
                info!("MCP server stopped");
                return None;
            }
            r = &mut done => {
                return Some(match (r, conn.pid) {
                    (Err(join), _) => format!("its connection task failed: {join}"),
                    (Ok(_), Some(pid)) => format!("its process ({pid}) closed the connection"),
                    (Ok(_), None) => "it closed the connection".to_string(),
                });
            }
            _ = events.tools_changed.notified() => {
                match tokio::time::timeout(settings.start_timeout, peer.list_all_tools()).await {
                    Ok(Ok(tools)) => {
                        info!(tools = tools.len(), "MCP server's tools changed");
                        shared.update(|st| st.tools = Arc::new(tools));
                    }
                    Ok(Err(e)) => warn!(error = %e, "listing the MCP server's tools again failed"),
                    Err(_) => warn!("listing the MCP server's tools again timed out"),
                }
            }
        }
    }
}
