//! The daemon-wide event stream (`GET /v1/events`): plugin changes and run
//! starts and ends. Unlike a run's events it never ends, so only the most
//! recent ones are kept for replay; a follower that falls further behind
//! than that skips ahead rather than holding memory for it.

use std::collections::VecDeque;
use std::sync::Mutex;

use bytes::Bytes;
use futures::Stream;
use tokio::sync::watch;

use crate::api::{DaemonEvent, DaemonEventLine};
use crate::sync::LockExt;
use crate::time::now_ms;

/// Enough to replay the last few minutes of a busy daemon.
const RETAINED: usize = 1024;

pub struct EventBus {
    lines: Mutex<VecDeque<(u64, Bytes)>>,
    /// The seq of the newest line; followers wake when it moves.
    newest: watch::Sender<u64>,
    /// The seq of the newest plugin change. Kept apart from `newest` for
    /// the watchers that only care about the plugin set (the MCP server's
    /// tool list): woken by every run's start and end they redid their
    /// work, serializing every tool's schema, twice per run (measured
    /// under `cargo bench --bench daemon`: about 1 % of the daemon's CPU
    /// with three plugins, growing with every plugin installed).
    plugins: watch::Sender<u64>,
    /// The seq of the newest run end, for the heap trim (`heap_trim`),
    /// which has work only after runs have freed what they held.
    run_ends: watch::Sender<u64>,
}

impl Default for EventBus {
    fn default() -> Self {
        EventBus {
            lines: Mutex::new(VecDeque::new()),
            newest: watch::channel(0).0,
            plugins: watch::channel(0).0,
            run_ends: watch::channel(0).0,
        }
    }
}

impl EventBus {
    pub fn publish(&self, event: DaemonEvent) {
        let mut lines = self.lines.lock_unpoisoned();
        let seq = lines.back().map_or(1, |(s, _)| s + 1);
        let plugin_change = event.is_plugin_change();
        let run_end = matches!(event, DaemonEvent::RunEnded { .. });
        let line = DaemonEventLine {
            seq,
            at_ms: now_ms(),
            event,
        };
        let Ok(mut json) = serde_json::to_vec(&line) else {
            return;
        };
        json.push(b'\n');
        lines.push_back((seq, Bytes::from(json)));
        if lines.len() > RETAINED {
            lines.pop_front();
        }
        drop(lines);
        self.newest.send_replace(seq);
        if plugin_change {
            self.plugins.send_replace(seq);
        }
        if run_end {
            self.run_ends.send_replace(seq);
        }
    }

    /// Wakes on every plugin change published from now on (its value is
    /// that event's seq), never on a run's start or end.
    pub fn subscribe_plugins(&self) -> watch::Receiver<u64> {
        self.plugins.subscribe()
    }

    /// Wakes on every run end published from now on (its value is that
    /// event's seq), never on anything else.
    pub fn subscribe_run_ends(&self) -> watch::Receiver<u64> {
        self.run_ends.subscribe()
    }

    fn after(&self, seq: u64) -> Vec<(u64, Bytes)> {
        let lines = self.lines.lock_unpoisoned();
        lines.iter().filter(|(s, _)| *s > seq).cloned().collect()
    }

    /// Events after `since` that are still retained (`None`: from now on),
    /// then every new one.
    pub fn follow(self: std::sync::Arc<Self>, since: Option<u64>) -> impl Stream<Item = Bytes> {
        let mut rx = self.newest.subscribe();
        let start = since.unwrap_or(*rx.borrow_and_update());
        futures::stream::unfold((self, rx, start), |(bus, mut rx, seen)| async move {
            loop {
                let batch = bus.after(seen);
                if let Some((last, _)) = batch.last() {
                    let last = *last;
                    let chunk: Vec<u8> = batch.into_iter().flat_map(|(_, b)| b.to_vec()).collect();
                    return Some((Bytes::from(chunk), (bus, rx, last)));
                }
                if rx.changed().await.is_err() {
                    return None;
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::PluginChangeInfo;
    use futures::StreamExt;
    use std::sync::Arc;

    fn created(n: usize) -> DaemonEvent {
        DaemonEvent::RunCreated {
            run_id: n.to_string(),
            agent: "a".into(),
        }
    }

    #[tokio::test]
    async fn replays_what_is_retained_then_follows() {
        let bus = Arc::new(EventBus::default());
        for i in 0..RETAINED + 5 {
            bus.publish(created(i));
        }
        let mut from_start = Box::pin(bus.clone().follow(Some(0)));
        let first = from_start.next().await.expect("replay");
        let lines: Vec<DaemonEventLine> = String::from_utf8_lossy(&first)
            .lines()
            .map(|l| serde_json::from_str(l).expect("json"))
            .collect();
        assert_eq!(lines.len(), RETAINED, "only the retained events");
        assert_eq!(lines[0].seq, 6);
        let mut live = Box::pin(bus.clone().follow(None));
        bus.publish(created(9999));
        let next = live.next().await.expect("live event");
        assert!(String::from_utf8_lossy(&next).contains("\"run_id\":\"9999\""));
    }

    #[test]
    fn plugin_watchers_wake_on_plugin_changes_only() {
        let bus = EventBus::default();
        let mut plugins = bus.subscribe_plugins();
        let mut everything = bus.newest.subscribe();
        bus.publish(created(1));
        bus.publish(DaemonEvent::RunEnded {
            run_id: "1".into(),
            agent: "a".into(),
            outcome: crate::agent::Outcome::Finished,
        });
        assert!(everything.has_changed().expect("open"));
        assert!(
            !plugins.has_changed().expect("open"),
            "a run's start and end are not plugin changes"
        );
        everything.mark_unchanged();
        bus.publish(DaemonEvent::PluginLoaded(PluginChangeInfo {
            plugin: "echo".into(),
            file: "/plugins/echo.wasm".into(),
            version: Some("1.0.0".into()),
            previous_version: None,
            error: None,
        }));
        assert!(plugins.has_changed().expect("open"));
        assert_eq!(*plugins.borrow_and_update(), 3, "the plugin change's seq");
        assert!(everything.has_changed().expect("open"));
    }
}
