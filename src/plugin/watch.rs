//! Watching the plugins folder: files dropped, rewritten, renamed in or out,
//! or deleted are picked up without a restart.
//!
//! Why it works this way:
//! - **inotify events are hints, the bytes are the truth.** Events only say
//!   which file to look at; the rescan decides by SHA-256 whether anything
//!   changed, so duplicate or spurious events cost a read and nothing else.
//! - **Debounce per file on quiet time** ([`QUIET`]): a copy arrives as many
//!   writes, so a file is looked at once no event has touched it for a while.
//!   Only that file is rescanned, so a neighbour still being written is not
//!   read half-done. A file that pauses mid-write longer than that fails to
//!   load, keeps the previous version serving, and is retried on its next
//!   event.
//! - **Every kind of event counts except reads.** An atomic rename into the
//!   folder yields only `Modify(Name(To))` (no `Create`), a rename out only
//!   `Name(From)`, so names and removals matter as much as writes; but the
//!   rescan itself opens the files, and counting those `Access` events would
//!   make it chase its own tail.
//! - **Lost events end in a full rescan**: an inotify queue overflow
//!   (`need_rescan`), a watcher error, or an event on the folder itself. So
//!   does the start, for what changed before the watch was set. A full
//!   rescan waits for the whole folder to be quiet.
//! - notify calls back on its own thread; the callback only forwards to a
//!   tokio channel, and the debounce runs as a tokio task so rescans use the
//!   same runtime as everything else. The channel is unbounded because the
//!   task drains it at once; a flood of write events is a few bytes each.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::event::{AccessKind, AccessMode, ModifyKind, RenameMode};
use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::{debug, error, warn};

use super::catalog::{is_plugin_file_name, PluginChange};
use super::error::PluginError;
use super::host::PluginHost;

/// How long a file must go without events before it is loaded. Long enough
/// for `cp` of a plugin (milliseconds) and for a writer's short pauses; short
/// enough that a reload feels immediate.
pub const QUIET: Duration = Duration::from_millis(200);

/// The quiet time after a file was renamed into place. An atomic rename
/// puts a complete file under its name at once (that is why installers and
/// editors use it), so there is nothing to wait for but the burst of events
/// the same move produces; this keeps swap-to-serving well under the
/// 300 ms a user notices, while files written in place still get [`QUIET`].
pub const RENAMED_QUIET: Duration = Duration::from_millis(20);

/// Called once per change a rescan made, on the watcher's task.
pub type OnChange = Arc<dyn Fn(&PluginChange) + Send + Sync>;

/// Watching stops when this is dropped: the inotify watch is removed and the
/// debounce task is aborted (a rescan in progress is abandoned whole, never
/// half-applied).
pub struct PluginWatcher {
    dir: PathBuf,
    _watcher: RecommendedWatcher,
    task: tokio::task::JoinHandle<()>,
}

impl PluginWatcher {
    /// The folder being watched.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for PluginWatcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Watches `dir` (not its subfolders) and keeps `host` in line with it,
/// calling `on_change` for each change. Must be called inside a tokio
/// runtime. It starts with a rescan of the whole folder, so nothing changed
/// between the caller's `load_dir` and the watch being set is missed.
pub fn watch(
    host: Arc<PluginHost>,
    dir: PathBuf,
    on_change: OnChange,
) -> Result<PluginWatcher, PluginError> {
    let fail = |message: String| PluginError::Watch {
        path: dir.clone(),
        message,
    };
    let runtime = tokio::runtime::Handle::try_current()
        .map_err(|e| fail(format!("the watcher needs a tokio runtime: {e}")))?;
    let (tx, rx) = mpsc::unbounded_channel();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<Event>| {
        // The receiver is gone only when the watcher is being dropped.
        let _ = tx.send(event);
    })
    .map_err(|e| fail(format!("cannot start watching: {e}")))?;
    watcher
        .watch(&dir, RecursiveMode::NonRecursive)
        .map_err(|e| fail(format!("cannot watch: {e}")))?;
    let task = runtime.spawn(debounce(host, dir.clone(), rx, on_change));
    Ok(PluginWatcher {
        dir,
        _watcher: watcher,
        task,
    })
}

/// Files waiting for quiet, and whether a full rescan is due.
#[derive(Default)]
struct Pending {
    files: HashMap<PathBuf, Instant>,
    full: Option<Instant>,
}

impl Pending {
    fn next_deadline(&self) -> Option<Instant> {
        self.files.values().copied().chain(self.full).min()
    }

    fn note(&mut self, dir: &Path, event: &Event) {
        let due = Instant::now() + QUIET;
        let renamed_in = matches!(
            event.kind,
            EventKind::Modify(ModifyKind::Name(RenameMode::To | RenameMode::Both))
        );
        if event.need_rescan() || event.paths.is_empty() {
            self.full = Some(due);
            return;
        }
        match event.kind {
            EventKind::Access(AccessKind::Close(AccessMode::Write)) => {}
            EventKind::Access(_) => return,
            _ => {}
        }
        // A pending full rescan waits for the whole folder to be quiet, so it
        // does not read a file in the middle of being written either.
        if self.full.is_some() {
            self.full = Some(due);
        }
        for path in &event.paths {
            if path == dir {
                // The folder itself was removed, moved or remounted.
                self.full = Some(due);
                continue;
            }
            let Some(name) = path.file_name() else {
                continue;
            };
            if is_plugin_file_name(name) {
                // With `Both` (a rename inside the folder) the last path is
                // the new name; the old one is gone and needs no wait either.
                let due = if renamed_in {
                    Instant::now() + RENAMED_QUIET
                } else {
                    due
                };
                // Rebuilt from our own `dir`, so the path matches the host's
                // however notify spelled it.
                self.files.insert(dir.join(name), due);
            }
        }
    }

    /// Takes what is due now: `None` if nothing, `Some(None)` for a full
    /// rescan, `Some(Some(files))` for those files.
    fn take_due(&mut self, now: Instant) -> Option<Option<Vec<PathBuf>>> {
        if self.full.is_some_and(|t| t <= now) {
            self.full = None;
            self.files.clear();
            return Some(None);
        }
        let mut due: Vec<PathBuf> = self
            .files
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(p, _)| p.clone())
            .collect();
        if due.is_empty() {
            return None;
        }
        for p in &due {
            self.files.remove(p);
        }
        due.sort();
        Some(Some(due))
    }
}

async fn debounce(
    host: Arc<PluginHost>,
    dir: PathBuf,
    mut rx: mpsc::UnboundedReceiver<notify::Result<Event>>,
    on_change: OnChange,
) {
    // The first full rescan covers whatever changed before the watch began.
    let mut pending = Pending {
        full: Some(Instant::now() + QUIET),
        ..Pending::default()
    };
    loop {
        let deadline = pending.next_deadline();
        tokio::select! {
            event = rx.recv() => match event {
                None => return,
                Some(Ok(event)) => {
                    debug!(?event, "plugins folder event");
                    pending.note(&dir, &event);
                }
                Some(Err(e)) => {
                    warn!(dir = %dir.display(), error = %e, "plugins folder watch error; rescanning the folder");
                    pending.full = Some(Instant::now() + QUIET);
                }
            },
            _ = sleep_until(deadline), if deadline.is_some() => {
                let Some(due) = pending.take_due(Instant::now()) else { continue };
                let changes = match due {
                    None => host.rescan(&dir).await,
                    Some(files) => host.rescan_files(&dir, &files).await,
                };
                for change in &changes {
                    // A panicking callback must not end the watch.
                    if std::panic::catch_unwind(AssertUnwindSafe(|| on_change(change))).is_err() {
                        error!(plugin = %change.plugin, "the plugin change callback panicked");
                    }
                }
            }
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    if let Some(t) = deadline {
        tokio::time::sleep_until(t).await;
    }
}

#[cfg(test)]
mod tests {
    use notify::event::{CreateKind, ModifyKind, RemoveKind, RenameMode};

    use super::*;

    fn event(kind: EventKind, paths: &[&Path]) -> Event {
        paths
            .iter()
            .fold(Event::new(kind), |e, p| e.add_path(p.to_path_buf()))
    }

    #[test]
    fn renames_writes_and_removals_count_but_reads_and_temp_files_do_not() {
        let dir = Path::new("/plugins");
        let mut p = Pending::default();
        let rename_in = ModifyKind::Name(RenameMode::To);
        p.note(
            dir,
            &event(EventKind::Modify(rename_in), &[&dir.join("a.wasm")]),
        );
        let rename_out = ModifyKind::Name(RenameMode::From);
        p.note(
            dir,
            &event(EventKind::Modify(rename_out), &[&dir.join("b.wasm")]),
        );
        p.note(
            dir,
            &event(EventKind::Remove(RemoveKind::File), &[&dir.join("c.wasm")]),
        );
        let close = EventKind::Access(AccessKind::Close(AccessMode::Write));
        p.note(dir, &event(close, &[&dir.join("d.wasm")]));
        let open = EventKind::Access(AccessKind::Open(AccessMode::Any));
        p.note(dir, &event(open, &[&dir.join("e.wasm")]));
        let create = EventKind::Create(CreateKind::File);
        for temp in [".f.wasm.swp", "f.wasm~", "f.wasm.part", "f.tmp", ".f.wasm"] {
            p.note(dir, &event(create, &[&dir.join(temp)]));
        }
        let mut noted: Vec<_> = p.files.keys().cloned().collect();
        noted.sort();
        let expected: Vec<PathBuf> = ["a", "b", "c", "d"]
            .iter()
            .map(|n| dir.join(format!("{n}.wasm")))
            .collect();
        assert_eq!(noted, expected);
        assert!(p.full.is_none());
    }

    #[test]
    fn a_file_is_due_only_after_quiet_time_since_its_last_event() {
        let dir = Path::new("/plugins");
        let file = dir.join("a.wasm");
        let write = EventKind::Modify(ModifyKind::Any);
        let mut p = Pending::default();
        let start = Instant::now();
        p.note(dir, &event(write, &[&file]));
        assert!(p.take_due(start).is_none());
        p.note(dir, &event(write, &[&file]));
        let due = p.take_due(Instant::now() + QUIET).expect("due");
        assert_eq!(due, Some(vec![file]));
        assert!(p.files.is_empty() && p.next_deadline().is_none());
    }

    #[test]
    fn a_file_renamed_into_place_is_due_almost_at_once() {
        let dir = Path::new("/plugins");
        let file = dir.join("a.wasm");
        let mut p = Pending::default();
        let start = Instant::now();
        let renamed = EventKind::Modify(ModifyKind::Name(RenameMode::To));
        p.note(dir, &event(renamed, &[&file]));
        let due = p.next_deadline().expect("pending");
        assert!(due <= Instant::now() + RENAMED_QUIET);
        assert!(due < start + QUIET);
        // A write after the rename puts the file back on the full wait.
        p.note(dir, &event(EventKind::Modify(ModifyKind::Any), &[&file]));
        assert!(p.next_deadline().expect("pending") > start + RENAMED_QUIET);
    }

    #[test]
    fn lost_events_and_events_on_the_folder_ask_for_a_full_rescan() {
        let dir = Path::new("/plugins");
        let mut p = Pending::default();
        let overflow = Event::new(EventKind::Other).set_flag(notify::event::Flag::Rescan);
        p.note(dir, &overflow);
        assert!(p.full.is_some());
        let mut p = Pending::default();
        p.note(dir, &event(EventKind::Remove(RemoveKind::Folder), &[dir]));
        assert!(p.full.is_some());
        p.note(
            dir,
            &event(EventKind::Modify(ModifyKind::Any), &[&dir.join("a.wasm")]),
        );
        assert_eq!(p.take_due(Instant::now() + QUIET), Some(None));
        assert!(p.files.is_empty(), "a full rescan covers the files too");
    }
}
