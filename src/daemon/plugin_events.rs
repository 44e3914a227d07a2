//! Plugin changes (from the watcher or a manual reload) go to the log and to
//! the daemon-wide event stream, so an operator sees a failed plugin in
//! `journalctl` and a script sees it on `GET /v1/events`.

use tracing::{info, warn};

use super::event_bus::EventBus;
use crate::api::{DaemonEvent, PluginChangeInfo};
use crate::plugin::{ChangeKind, PluginChange};

pub fn report(bus: &EventBus, change: &PluginChange) {
    let info = PluginChangeInfo {
        plugin: change.plugin.clone(),
        file: change.file.display().to_string(),
        version: change.version.clone(),
        previous_version: change.previous_version.clone(),
        error: change.error.clone(),
    };
    let version = change.version.as_deref().unwrap_or("");
    let previous = change.previous_version.as_deref().unwrap_or("");
    let file = change.file.display();
    let error = change.error.as_deref().unwrap_or("");
    let event = match change.kind {
        ChangeKind::Loaded => {
            info!(plugin = %info.plugin, version, %file, "plugin loaded");
            DaemonEvent::PluginLoaded(info)
        }
        ChangeKind::Replaced => {
            info!(plugin = %info.plugin, version, previous, %file, "plugin replaced");
            DaemonEvent::PluginReplaced(info)
        }
        ChangeKind::Removed => {
            info!(plugin = %info.plugin, previous, %file, "plugin removed");
            DaemonEvent::PluginRemoved(info)
        }
        ChangeKind::Failed => {
            warn!(plugin = %info.plugin, still_serving = previous, %file, error, "plugin failed to load");
            DaemonEvent::PluginFailed(info)
        }
        ChangeKind::Conflict => {
            warn!(plugin = %info.plugin, still_serving = previous, %file, error, "plugin conflict");
            DaemonEvent::PluginConflict(info)
        }
    };
    bus.publish(event);
}
