//! `notifications/tools/list_changed` for every connected session when a
//! plugin swap changes the tools served. The watcher wakes on each plugin
//! change of the daemon-wide bus (published there right after the catalog
//! swaps its set, by the folder watcher, `POST /v1/plugins/reload` and the
//! install routes alike; never on a run's start or end), compares the tool
//! list it would serve with the last one, and notifies only on a
//! difference: a plugin replaced by a version with the same name,
//! description and schema changes nothing a client could re-read.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use rmcp::{Peer, RoleServer};
use tokio::sync::watch;
use tracing::{debug, info};

use super::McpServer;
use crate::sync::LockExt;

/// A notification a session does not take within this long is dropped
/// (its session is gone or stuck); the others are not held up by it.
const NOTIFY_WITHIN: Duration = Duration::from_secs(5);

/// The peers of the sessions that completed their handshake, by a number
/// each session holds ([`Registration`]) and gives back when it goes.
#[derive(Default)]
pub struct Sessions {
    peers: Mutex<HashMap<u64, Peer<RoleServer>>>,
    next: AtomicU64,
}

/// A session's place in [`Sessions`], removed on drop (when the session's
/// handler is dropped).
pub struct Registration {
    sessions: Weak<Sessions>,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(sessions) = self.sessions.upgrade() {
            sessions.peers.lock_unpoisoned().remove(&self.id);
        }
    }
}

impl Sessions {
    pub fn register(self: &Arc<Self>, peer: Peer<RoleServer>) -> Registration {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.peers.lock_unpoisoned().insert(id, peer);
        Registration {
            sessions: Arc::downgrade(self),
            id,
        }
    }

    fn peers(&self) -> Vec<Peer<RoleServer>> {
        self.peers.lock_unpoisoned().values().cloned().collect()
    }
}

/// Watches for tool list changes until the server is dropped.
pub fn spawn(server: &Arc<McpServer>) {
    let rx = server.daemon.bus.subscribe_plugins();
    let first = server.tool_fingerprint();
    tokio::spawn(watch_tools(Arc::downgrade(server), rx, first));
}

async fn watch_tools(server: Weak<McpServer>, mut rx: watch::Receiver<u64>, mut served: Vec<u8>) {
    while rx.changed().await.is_ok() {
        let Some(server) = server.upgrade() else {
            return;
        };
        let now = server.tool_fingerprint();
        if now == served {
            continue;
        }
        served = now;
        let peers = server.sessions.peers();
        info!(
            sessions = peers.len(),
            "the MCP tool list changed: notifying the connected sessions"
        );
        for peer in peers {
            tokio::spawn(async move {
                match tokio::time::timeout(NOTIFY_WITHIN, peer.notify_tool_list_changed()).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => debug!(error = %e, "a session did not take list_changed"),
                    Err(_) => debug!("a session did not take list_changed in time"),
                }
            });
        }
    }
}
