//! The catalog: which plugin files the host knows, which file serves each
//! name, the current `Arc<PluginSet>` and each file's status. It rescans the
//! plugins folder and swaps the set; the [`Loader`] it is handed on each
//! scan does the compiling, and the catalog never reaches into it.
//!
//! Why it works this way:
//! - **Content decides, not timestamps.** A file is reloaded only when the
//!   SHA-256 of its bytes changed, so a rescan is idempotent: the watcher may
//!   fire twice for one copy, an API reload may race it, and each change is
//!   still applied (and reported) once.
//! - **Validate everything, then swap once.** Every changed file is compiled
//!   and probed before anything is published; the new `Arc<PluginSet>`
//!   replaces the old one in a single store. Nothing is committed across an
//!   `.await`, so a rescan that is cancelled (its watcher dropped) leaves the
//!   previous state whole.
//! - **A bad file never takes a good plugin down.** When a file that served a
//!   plugin is rewritten with something that does not load (half-copied,
//!   not a component, the wrong world, invalid metadata), the version already
//!   loaded from it keeps serving and the file is reported `failed`. Only
//!   deleting the file unloads the plugin.
//! - **The first claimant keeps a name.** When two files offer the same
//!   plugin (same kind and name) the one already serving stays; the other is
//!   reported `conflict`. If the server goes away the other takes over, in
//!   load order (file name order within one scan).
//! - Runs are never touched: they hold the snapshot they took at start.
//! - **The folder must be trusted** ([`trust::check_dir`]): a plugin runs with
//!   the daemon's authority over its sandboxes, so a folder others can write
//!   to is refused at every scan, and links in it are not followed unless
//!   the operator said so (`[daemon] follow_symlinks`): a link lets whoever
//!   controls its target swap the code. The daemon also has each file
//!   checked ([`Catalog::with_file_checks`]): a file others can write to, or
//!   that someone else owns, is `failed` and never read, while the version
//!   it loaded before (from bytes that were checked then) keeps serving, as
//!   for any file that stops loading.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use super::cache::hex;
use super::error::PluginError;
use super::grants::GrantView;
use super::loader::{read_component, Loader, ReadError, ReadRules};
use super::meta::{PluginKind, PluginMeta};
use super::registry::{LoadedPlugin, PluginSet};
use super::trust;
use crate::sync::RwLockExt;
use crate::time::now_ms;

/// How a plugin file stands after the last scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileStatus {
    /// Its plugin is the one serving under its name.
    Loaded,
    /// Its current bytes did not load; an earlier version may still serve.
    Failed,
    /// It loads, but another file already serves a plugin of that name.
    Conflict,
}

/// One plugin file as the host sees it (`GET /v1/plugins`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PluginStatus {
    /// The plugin's own name; for a file that never loaded, the file stem.
    pub name: String,
    /// `None` for a file that never loaded.
    pub kind: Option<PluginKind>,
    /// Of the file's current content: `None` when that did not load.
    pub version: Option<String>,
    /// The plugin's one-line description from its metadata; `None` when the
    /// current content did not load.
    pub description: Option<String>,
    /// The contract version (`agentd:plugin@X`) the current content was
    /// built against; `None` when it did not load.
    pub contract: Option<String>,
    /// The plugin file, as found in the plugins folder.
    pub file: PathBuf,
    /// Of the file's current bytes, hex; `None` when the file cannot be read.
    pub sha256: Option<String>,
    /// When the current bytes were loaded (or failed to), Unix milliseconds.
    pub loaded_at_ms: i64,
    /// Whether this file's plugin serves, failed to load, or lost its name to
    /// another file.
    pub status: FileStatus,
    /// Why the file failed or conflicts; it names the file.
    pub error: Option<String>,
    /// The version serving under this plugin's name now, from whichever file:
    /// for a failed or conflicting file, what runs get instead of it.
    pub serving_version: Option<String>,
    /// The interfaces the current content imports; empty when it did not load.
    #[serde(default)]
    pub imports: Vec<String>,
    /// The `[plugins.<name>]` keys that would give it something it imports
    /// (`allow_hosts` for HTTP, `env`/`secrets`, `config`).
    #[serde(default)]
    pub grants_needed: Vec<String>,
    /// What the running configuration grants it (secrets by name only); the
    /// catalog leaves it empty and the daemon fills it in.
    #[serde(default)]
    pub grants: GrantView,
}

/// What kind of change a rescan made, as [`PluginChange`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    /// A plugin name that was not served now is.
    Loaded,
    /// A name served before is served by another loaded plugin.
    Replaced,
    /// A file's new bytes did not load (the previous version, if any, stays).
    Failed,
    /// A name is no longer served: its file is gone or now offers another.
    Removed,
    /// A file's new bytes offer a name another file already serves.
    Conflict,
}

/// What one rescan changed, for the log, the API and the watcher's callback.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PluginChange {
    /// What happened.
    pub kind: ChangeKind,
    /// The plugin's name (the file stem for a file that never loaded; empty
    /// when the folder itself could not be read).
    pub plugin: String,
    /// The plugin file concerned (the folder itself when it could not be read).
    pub file: PathBuf,
    /// The version now serving from `file`, if it serves.
    pub version: Option<String>,
    /// The version serving under this name before (`replaced`, `removed`),
    /// or still serving instead of `file` (`failed`, `conflict`).
    pub previous_version: Option<String>,
    /// Why the file failed or conflicts, naming the file; `None` otherwise.
    pub error: Option<String>,
}

/// What [`Catalog::load_dir`] found: the plugins now serving from the
/// folder, and the files that did not load (failed or in conflict), each
/// with an error that names the file. Both in file name order.
#[derive(Debug, Default)]
pub struct LoadReport {
    /// Metadata of every plugin serving from the folder after the scan.
    pub loaded: Vec<PluginMeta>,
    /// Each file that failed or conflicts, with its error.
    pub failed: Vec<(PathBuf, PluginError)>,
}

type Key = (PluginKind, String);

fn key_of(p: &LoadedPlugin) -> Key {
    (p.kind(), p.meta().name.clone())
}

#[derive(Clone)]
struct Offered {
    plugin: LoadedPlugin,
    /// Load order: among files offering one name, the lowest serves when the
    /// name has no server.
    seq: u64,
}

#[derive(Clone)]
struct FileEntry {
    /// `None` when the file could not be read.
    sha256: Option<[u8; 32]>,
    at_ms: i64,
    /// Why the current bytes did not load; `None` when they did.
    error: Option<PluginError>,
    /// The plugin this file offers: its current bytes', or, when those failed,
    /// the last of its versions that loaded.
    offered: Option<Offered>,
}

impl FileEntry {
    fn key(&self) -> Option<Key> {
        self.offered.as_ref().map(|o| key_of(&o.plugin))
    }
}

/// Which files the catalog knows and which file serves each name. Only
/// `scan_locked` changes it, under the catalog's scan lock.
#[derive(Default)]
struct ScanState {
    files: BTreeMap<PathBuf, FileEntry>,
    owners: BTreeMap<Key, PathBuf>,
    next_seq: u64,
}

enum Scope<'a> {
    /// Every plugin file in the folder, and every known file (gone ones are
    /// unloaded).
    All,
    /// Only these paths: the watcher's quiet files, so a file still being
    /// written next to them is not read half-done.
    Files(&'a [PathBuf]),
}

/// The plugin files of one folder and the set they make. Readers
/// ([`snapshot`](Self::snapshot), [`statuses`](Self::statuses)) never wait
/// for a rescan; rescans take turns.
pub struct Catalog {
    /// One rescan at a time (the watcher and an API request may both ask);
    /// an async lock because a rescan awaits compilation while holding it.
    scan: tokio::sync::Mutex<ScanState>,
    /// Swapped whole, never edited: runs hold the `Arc` they took.
    current: RwLock<Arc<PluginSet>>,
    /// Published with the set, so `statuses()` never waits for a rescan.
    statuses: RwLock<Arc<Vec<PluginStatus>>>,
    /// Whether a link in the folder is loaded (its target read) or reported
    /// `failed`, and whether each file's owner and mode are checked.
    rules: ReadRules,
}

impl Default for Catalog {
    fn default() -> Self {
        Self::new()
    }
}

impl Catalog {
    /// An empty catalog: no files known, an empty set serving.
    pub fn new() -> Self {
        Catalog {
            scan: tokio::sync::Mutex::new(ScanState::default()),
            current: RwLock::new(Arc::new(PluginSet::default())),
            statuses: RwLock::new(Arc::new(Vec::new())),
            rules: ReadRules::default(),
        }
    }

    /// Links in the folder are loaded when `follow` is true; otherwise each
    /// is reported `failed` with the reason and never read.
    pub fn with_follow_symlinks(mut self, follow: bool) -> Self {
        self.rules.follow_symlinks = follow;
        self
    }

    /// When `check` is true, a plugin file owned by someone other than this
    /// process's user or root, or writable by its group or everyone, is
    /// reported `failed` naming the file and the fix, and never read (see
    /// [`trust::check_file`]). The daemon turns it on: its plugins serve
    /// every user's runs with the daemon's (root-equivalent) authority, so
    /// whoever can write one file can take them all over. Off by default,
    /// for `run --local`, where the folder is a user's own and its files
    /// are commonly 0664 under user-private groups.
    pub fn with_file_checks(mut self, check: bool) -> Self {
        self.rules.check_files = check;
        self
    }

    /// The file checks judge as `uid` would instead of this process: what
    /// a daemon running as `uid` would load (see `trust::check_dir_as`).
    pub fn with_checks_as(mut self, uid: u32) -> Self {
        self.rules.as_user = Some(uid);
        self
    }

    /// The set a run should use from start to finish.
    pub fn snapshot(&self) -> Arc<PluginSet> {
        self.current.read_unpoisoned().clone()
    }

    /// Loads every plugin file in `dir` and makes them the current set; on a
    /// catalog that already loaded plugins it is a rescan. A file that fails
    /// is reported and skipped; it never stops the others.
    pub async fn load_dir(&self, loader: &Loader, dir: &Path) -> Result<LoadReport, PluginError> {
        let mut state = self.scan.lock().await;
        self.scan_locked(loader, &mut state, dir, Scope::All)
            .await?;
        Ok(state.report())
    }

    /// Brings the set in line with `dir`: loads new files, reloads files whose
    /// bytes changed, unloads plugins whose file is gone, then swaps the set.
    /// When the folder itself cannot be read nothing is unloaded (a folder
    /// briefly missing must not empty the daemon) and the one change returned
    /// is a `failed` one naming the folder.
    pub async fn rescan(&self, loader: &Loader, dir: &Path) -> Vec<PluginChange> {
        match self.try_rescan(loader, dir).await {
            Ok(changes) => changes,
            Err(e) => vec![folder_failed(dir, &e)],
        }
    }

    /// [`rescan`](Self::rescan), with an unreadable folder as an error.
    pub async fn try_rescan(
        &self,
        loader: &Loader,
        dir: &Path,
    ) -> Result<Vec<PluginChange>, PluginError> {
        let mut state = self.scan.lock().await;
        self.scan_locked(loader, &mut state, dir, Scope::All).await
    }

    /// Like [`rescan`](Self::rescan) but looks only at `files` (paths in
    /// `dir`): each is loaded if new or changed, unloaded if gone.
    pub async fn rescan_files(
        &self,
        loader: &Loader,
        dir: &Path,
        files: &[PathBuf],
    ) -> Vec<PluginChange> {
        let mut state = self.scan.lock().await;
        match self
            .scan_locked(loader, &mut state, dir, Scope::Files(files))
            .await
        {
            Ok(changes) => changes,
            Err(e) => vec![folder_failed(dir, &e)],
        }
    }

    /// Every plugin file seen by the last scan, in file name order.
    pub fn statuses(&self) -> Vec<PluginStatus> {
        self.statuses.read_unpoisoned().as_ref().clone()
    }

    async fn scan_locked(
        &self,
        loader: &Loader,
        state: &mut ScanState,
        dir: &Path,
        scope: Scope<'_>,
    ) -> Result<Vec<PluginChange>, PluginError> {
        trust::check_dir_as(
            "plugins folder",
            dir,
            self.rules.as_user.unwrap_or_else(trust::euid),
        )?;
        let listed = list_plugin_files(dir, self.rules.follow_symlinks).await?;
        // Bytes that failed are tried again on a full rescan: the failure may
        // have been the moment's (a probe timing out on a busy machine), not
        // the file's. The watcher's per-file rescans follow real changes only.
        let retry_failed = matches!(scope, Scope::All);
        let targets: BTreeSet<PathBuf> = match scope {
            Scope::All => listed.iter().chain(state.files.keys()).cloned().collect(),
            Scope::Files(files) => files
                .iter()
                .filter(|p| p.file_name().is_some_and(is_plugin_file_name))
                .cloned()
                .collect(),
        };

        // Work on copies (cheap: `Arc`s) and commit at the end, so that a
        // cancellation at any `.await` below leaves `state` untouched.
        let mut files = state.files.clone();
        let mut next_seq = state.next_seq;
        let mut touched = Vec::new();
        for path in targets {
            if !listed.contains(&path) {
                files.remove(&path);
                continue;
            }
            let previous = files.get(&path).cloned();
            let kept = previous.as_ref().and_then(|p| p.offered.clone());
            let at_ms = now_ms();
            let entry = match read_component(&path, self.rules).await {
                Err(ReadError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                    files.remove(&path);
                    continue;
                }
                Err(e) => FileEntry {
                    sha256: None,
                    at_ms,
                    error: Some(e.into_plugin_error(&path)),
                    offered: kept,
                },
                Ok((bytes, sha)) => {
                    let skip = previous.as_ref().is_some_and(|p| {
                        p.sha256 == Some(sha) && !(retry_failed && p.error.is_some())
                    });
                    if skip {
                        continue;
                    }
                    let loaded = loader.load_bytes(&path, bytes, sha).await;
                    super::metrics::plugin_loaded(loaded.is_ok());
                    match loaded {
                        Ok(plugin) => {
                            next_seq += 1;
                            FileEntry {
                                sha256: Some(sha),
                                at_ms,
                                error: None,
                                offered: Some(Offered {
                                    plugin,
                                    seq: next_seq,
                                }),
                            }
                        }
                        Err(error) => FileEntry {
                            sha256: Some(sha),
                            at_ms,
                            error: Some(error),
                            offered: kept,
                        },
                    }
                }
            };
            // The same failure of the same bytes again is not news.
            let repeated = previous.as_ref().is_some_and(|p| {
                p.sha256 == entry.sha256
                    && p.error.is_some()
                    && p.error.as_ref().map(ToString::to_string)
                        == entry.error.as_ref().map(ToString::to_string)
            });
            if repeated {
                continue;
            }
            files.insert(path.clone(), entry);
            touched.push(path);
        }

        let owners = assign_owners(&state.owners, &files);
        let before = serving(&state.owners, &state.files);
        let after = serving(&owners, &files);
        let mut changes = serving_changes(&before, &after);
        let swap = !changes.is_empty();
        for path in &touched {
            if let Some(change) = file_change(path, &files, &owners, &after) {
                changes.push(change);
            }
        }
        changes.sort_by(|a, b| (&a.file, &a.plugin).cmp(&(&b.file, &b.plugin)));
        let statuses = statuses_of(&files, &owners, &after);

        // Commit: no `.await` from here on.
        state.files = files;
        state.owners = owners;
        state.next_seq = next_seq;
        if swap {
            let mut set = PluginSet::default();
            for (_, plugin) in after.into_values() {
                set.insert(plugin);
            }
            *self.current.write_unpoisoned() = Arc::new(set);
        }
        *self.statuses.write_unpoisoned() = Arc::new(statuses);
        for c in &changes {
            log_change(c);
        }
        Ok(changes)
    }
}

impl ScanState {
    fn report(&self) -> LoadReport {
        let mut report = LoadReport::default();
        for (path, entry) in &self.files {
            if let Some(e) = &entry.error {
                report.failed.push((path.clone(), e.clone()));
                continue;
            }
            let Some(offered) = &entry.offered else {
                continue;
            };
            match conflict_with(path, entry, &self.owners) {
                Some(e) => report.failed.push((path.clone(), e)),
                None => report.loaded.push(offered.plugin.meta().clone()),
            }
        }
        report
    }
}

/// A server keeps its name while its file still offers it; free names go
/// to the earliest-loaded claimant.
fn assign_owners(
    old: &BTreeMap<Key, PathBuf>,
    files: &BTreeMap<PathBuf, FileEntry>,
) -> BTreeMap<Key, PathBuf> {
    let mut owners: BTreeMap<Key, PathBuf> = old
        .iter()
        .filter(|(key, path)| files.get(*path).and_then(FileEntry::key).as_ref() == Some(*key))
        .map(|(k, p)| (k.clone(), p.clone()))
        .collect();
    let mut claimants: Vec<(u64, &PathBuf, Key)> = files
        .iter()
        .filter_map(|(path, e)| e.offered.as_ref().map(|o| (o.seq, path, key_of(&o.plugin))))
        .collect();
    claimants.sort();
    for (_, path, key) in claimants {
        owners.entry(key).or_insert_with(|| path.clone());
    }
    owners
}

fn serving(
    owners: &BTreeMap<Key, PathBuf>,
    files: &BTreeMap<PathBuf, FileEntry>,
) -> BTreeMap<Key, (PathBuf, LoadedPlugin)> {
    owners
        .iter()
        .filter_map(|(key, path)| {
            let offered = files.get(path)?.offered.as_ref()?;
            Some((key.clone(), (path.clone(), offered.plugin.clone())))
        })
        .collect()
}

fn serving_changes(
    before: &BTreeMap<Key, (PathBuf, LoadedPlugin)>,
    after: &BTreeMap<Key, (PathBuf, LoadedPlugin)>,
) -> Vec<PluginChange> {
    let mut changes = Vec::new();
    for (key, (path, plugin)) in after {
        let previous = match before.get(key) {
            Some((_, old)) if old.same_as(plugin) => continue,
            Some((_, old)) => Some(old.meta().version.clone()),
            None => None,
        };
        changes.push(PluginChange {
            kind: if previous.is_some() {
                ChangeKind::Replaced
            } else {
                ChangeKind::Loaded
            },
            plugin: key.1.clone(),
            file: path.clone(),
            version: Some(plugin.meta().version.clone()),
            previous_version: previous,
            error: None,
        });
    }
    for (key, (path, old)) in before {
        if !after.contains_key(key) {
            changes.push(PluginChange {
                kind: ChangeKind::Removed,
                plugin: key.1.clone(),
                file: path.clone(),
                version: None,
                previous_version: Some(old.meta().version.clone()),
                error: None,
            });
        }
    }
    changes
}

/// The `failed` or `conflict` change of a file whose bytes were just
/// (re)read; its successes show up as serving changes instead.
fn file_change(
    path: &Path,
    files: &BTreeMap<PathBuf, FileEntry>,
    owners: &BTreeMap<Key, PathBuf>,
    after: &BTreeMap<Key, (PathBuf, LoadedPlugin)>,
) -> Option<PluginChange> {
    let entry = files.get(path)?;
    let key = entry.key();
    let serving_version = key
        .as_ref()
        .and_then(|k| after.get(k))
        .map(|(_, p)| p.meta().version.clone());
    if let Some(error) = &entry.error {
        return Some(PluginChange {
            kind: ChangeKind::Failed,
            plugin: display_name(path, entry),
            file: path.to_path_buf(),
            version: None,
            previous_version: serving_version,
            error: Some(error.to_string()),
        });
    }
    let error = conflict_with(path, entry, owners)?;
    Some(PluginChange {
        kind: ChangeKind::Conflict,
        plugin: display_name(path, entry),
        file: path.to_path_buf(),
        version: entry
            .offered
            .as_ref()
            .map(|o| o.plugin.meta().version.clone()),
        previous_version: serving_version,
        error: Some(error.to_string()),
    })
}

/// The conflict error of a loaded file whose name another file serves.
fn conflict_with(
    path: &Path,
    entry: &FileEntry,
    owners: &BTreeMap<Key, PathBuf>,
) -> Option<PluginError> {
    let key = entry.key()?;
    let owner = owners.get(&key)?;
    (owner != path).then(|| PluginError::Conflict {
        path: path.to_path_buf(),
        name: key.1,
        earlier: owner.clone(),
    })
}

fn statuses_of(
    files: &BTreeMap<PathBuf, FileEntry>,
    owners: &BTreeMap<Key, PathBuf>,
    after: &BTreeMap<Key, (PathBuf, LoadedPlugin)>,
) -> Vec<PluginStatus> {
    files
        .iter()
        .map(|(path, entry)| {
            let key = entry.key();
            let meta = entry.offered.as_ref().map(|o| o.plugin.meta());
            let serving_version = key
                .as_ref()
                .and_then(|k| after.get(k))
                .map(|(_, p)| p.meta().version.clone());
            let (status, error) = match (&entry.error, conflict_with(path, entry, owners)) {
                (Some(e), _) => (FileStatus::Failed, Some(e.to_string())),
                (None, Some(e)) => (FileStatus::Conflict, Some(e.to_string())),
                (None, None) => (FileStatus::Loaded, None),
            };
            let current = if entry.error.is_none() { meta } else { None };
            PluginStatus {
                name: display_name(path, entry),
                kind: key.map(|k| k.0),
                version: current.map(|m| m.version.clone()),
                description: current.map(|m| m.description.clone()),
                contract: current.map(|m| m.contract.as_str().to_string()),
                file: path.clone(),
                sha256: entry.sha256.as_ref().map(hex),
                loaded_at_ms: entry.at_ms,
                status,
                error,
                serving_version,
                imports: current.map(|m| m.imports.clone()).unwrap_or_default(),
                grants_needed: current
                    .map(|m| m.grants_needed().iter().map(|k| k.to_string()).collect())
                    .unwrap_or_default(),
                grants: GrantView::default(),
            }
        })
        .collect()
}

fn display_name(path: &Path, entry: &FileEntry) -> String {
    match &entry.offered {
        Some(o) => o.plugin.meta().name.clone(),
        None => path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
    }
}

fn folder_failed(dir: &Path, e: &PluginError) -> PluginChange {
    super::metrics::rescan_failed();
    warn!(dir = %dir.display(), error = %e, "cannot read the plugins folder; the loaded plugins stay");
    PluginChange {
        kind: ChangeKind::Failed,
        plugin: String::new(),
        file: dir.to_path_buf(),
        version: None,
        previous_version: None,
        error: Some(e.to_string()),
    }
}

fn log_change(c: &PluginChange) {
    let file = c.file.display();
    let version = c.version.as_deref().unwrap_or("-");
    let previous = c.previous_version.as_deref().unwrap_or("-");
    match c.kind {
        ChangeKind::Loaded => info!(plugin = %c.plugin, %version, %file, "plugin now serving"),
        ChangeKind::Replaced => {
            info!(plugin = %c.plugin, %version, %previous, %file, "plugin replaced")
        }
        ChangeKind::Removed => info!(plugin = %c.plugin, %previous, %file, "plugin unloaded"),
        ChangeKind::Failed | ChangeKind::Conflict => warn!(
            plugin = %c.plugin,
            still_serving = %previous,
            error = c.error.as_deref().unwrap_or(""),
            "plugin file not loaded"
        ),
    }
}

/// Whether a directory entry is a plugin file. Only `*.wasm` counts, and not
/// hidden files: that leaves out editors' and downloaders' temp files
/// (`.x.wasm.swp`, `x.wasm~`, `x.wasm.part`, `x.wasm.crdownload`, `x.tmp`)
/// and the `.x.wasm.tmp` that installers write before renaming into place,
/// which would otherwise be loaded half-written. Non-UTF-8 names are skipped.
pub fn is_plugin_file_name(name: &OsStr) -> bool {
    name.to_str()
        .is_some_and(|n| !n.starts_with('.') && n.len() > ".wasm".len() && n.ends_with(".wasm"))
}

/// The plugin files of `dir`. Links are listed either way: followed, a
/// link to a file counts; not followed, every link counts, so that reading
/// it fails and the file is reported with the reason instead of vanishing.
async fn list_plugin_files(dir: &Path, follow: bool) -> Result<BTreeSet<PathBuf>, PluginError> {
    let owned = dir.to_path_buf();
    let listed = tokio::task::spawn_blocking(move || -> std::io::Result<BTreeSet<PathBuf>> {
        let mut files = BTreeSet::new();
        for entry in std::fs::read_dir(&owned)? {
            let Ok(entry) = entry else { continue };
            if !is_plugin_file_name(&entry.file_name()) {
                continue;
            }
            let path = entry.path();
            let is_link = entry.file_type().is_ok_and(|t| t.is_symlink());
            if path.is_file() || (is_link && !follow) {
                files.insert(path);
            }
        }
        Ok(files)
    })
    .await
    .map_err(std::io::Error::other)
    .and_then(|r| r);
    listed.map_err(|e| PluginError::Io {
        path: dir.to_path_buf(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_visible_wasm_files_are_plugins() {
        for yes in ["echo.wasm", "my-tool.v2.wasm", "a.wasm"] {
            assert!(is_plugin_file_name(OsStr::new(yes)), "{yes}");
        }
        for no in [
            ".wasm",
            ".echo.wasm",
            ".echo.wasm.swp",
            "echo.wasm~",
            "echo.wasm.part",
            "echo.wasm.crdownload",
            "echo.wasm.tmp",
            "echo.tmp",
            "echo.WASM",
            "echo",
        ] {
            assert!(!is_plugin_file_name(OsStr::new(no)), "{no}");
        }
    }
}
