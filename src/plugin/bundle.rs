//! The plugins that ship with agentd, installed beside its binary.
//!
//! A new user's first run must not fail on an empty or missing plugins
//! folder. `scripts/install.sh` puts the bundled components in
//! `<prefix>/lib/agentd/plugins` next to `<prefix>/bin/agentd` (the layout of
//! `/usr/local`, `/usr` and `~/.local` alike), so the binary always finds the
//! set it was built with: a daemon started on an empty folder copies them in
//! (and says so), and `agentd run --local` without a folder loads them where
//! they are. They are looked up rather than embedded so that building agentd
//! never needs the wasm target, and a packager can ship them as files.

use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::trust::{self, TrustError};

/// Overrides where the bundle is looked for (packagers with another layout,
/// tests).
pub const BUNDLE_ENV: &str = "AGENTD_BUNDLED_PLUGINS";

/// Where the bundle is relative to the binary's own folder.
const BESIDE_BINARY: &str = "../lib/agentd/plugins";

/// A folder of bundled plugin components.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bundle {
    dir: PathBuf,
}

impl Bundle {
    /// `$AGENTD_BUNDLED_PLUGINS`, else `<binary's folder>/../lib/agentd/plugins`,
    /// whichever holds at least one component; `None` when neither does.
    pub fn find() -> Option<Bundle> {
        Self::candidates()
            .into_iter()
            .map(|dir| Bundle { dir })
            .find(|b| b.components().is_ok_and(|c| !c.is_empty()))
    }

    /// Where [`Bundle::find`] looks, in order: for messages that say where
    /// nothing was found.
    pub fn candidates() -> Vec<PathBuf> {
        let mut dirs = Vec::new();
        if let Some(dir) = std::env::var_os(BUNDLE_ENV).filter(|v| !v.is_empty()) {
            dirs.push(PathBuf::from(dir));
        }
        if let Some(bin_dir) = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.canonicalize().ok())
            .and_then(|exe| exe.parent().map(Path::to_path_buf))
        {
            let beside = bin_dir.join(BESIDE_BINARY);
            // `..` resolved, so messages show a plain path.
            dirs.push(beside.canonicalize().unwrap_or(beside));
        }
        dirs
    }

    /// A bundle at `dir`, whether or not it holds anything.
    pub fn at(dir: impl Into<PathBuf>) -> Bundle {
        Bundle { dir: dir.into() }
    }

    /// The bundle's folder, for messages and for loading from it in place.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The bundle's components (`*.wasm` files), sorted by name.
    pub fn components(&self) -> io::Result<Vec<PathBuf>> {
        components_in(&self.dir)
    }
}

/// The `*.wasm` files directly in `dir` (not hidden ones, which are
/// half-written copies), sorted by name.
fn components_in(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let visible = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| !n.starts_with('.'));
        if visible && path.extension().is_some_and(|e| e == "wasm") && path.is_file() {
            found.push(path);
        }
    }
    found.sort();
    Ok(found)
}

/// What a plugins folder holds, as the daemon's start-up, `run --local`
/// and the doctor all judge it: one rule, so the three never disagree on
/// whether the bundle stands in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FolderState {
    /// There is no such folder.
    Missing,
    /// The folder holds no component (hidden files, such as a copy left
    /// half-written by a crash, do not count).
    Empty,
    /// The folder holds at least one component: the operator's set.
    HasPlugins,
}

impl FolderState {
    /// "missing" or "empty", for messages; `None` for a folder with plugins.
    pub fn lacking(self) -> Option<&'static str> {
        match self {
            FolderState::Missing => Some("missing"),
            FolderState::Empty => Some("empty"),
            FolderState::HasPlugins => None,
        }
    }
}

/// What `dir` holds; an error for a folder that exists but cannot be read.
pub fn folder_state(dir: &Path) -> io::Result<FolderState> {
    match components_in(dir) {
        Ok(found) if found.is_empty() => Ok(FolderState::Empty),
        Ok(_) => Ok(FolderState::HasPlugins),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(FolderState::Missing),
        Err(e) => Err(e),
    }
}

/// What [`seed_empty_dir`] did, for the daemon's start-up log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seeded {
    /// The folder already had components: left alone.
    HadPlugins,
    /// The folder was empty (or missing) and got the bundle's components.
    Installed {
        /// The bundle's folder.
        from: PathBuf,
        /// How many components were copied.
        count: usize,
    },
    /// The folder is empty and there is no bundle to fill it from.
    NoBundle {
        /// Where the bundle was looked for ([`Bundle::candidates`]).
        looked_in: Vec<PathBuf>,
    },
}

/// Why the bundle could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum SeedError {
    /// The bundle's folder or one of its files is not one the daemon would
    /// load code from (someone else's, or writable by others): copying it
    /// into the trusted folder would launder it.
    #[error(transparent)]
    Untrusted(#[from] TrustError),
    /// Reading the bundle or writing the plugins folder failed.
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// Fills `dir` with the bundle's components when it has none of its own
/// (creating it, mode 0755, if missing). A folder with any component is
/// never touched: the operator's choice of plugins stands. The bundle must
/// pass the same trust check as the plugins folder (its folder, and each
/// file on the descriptor that is copied). Each file is written under a
/// hidden name and renamed, so a watcher never loads half a file; hidden
/// copies a crash left behind are removed first.
pub fn seed_empty_dir(dir: &Path, bundle: Option<&Bundle>) -> Result<Seeded, SeedError> {
    if folder_state(dir)? == FolderState::HasPlugins {
        return Ok(Seeded::HadPlugins);
    }
    let Some(bundle) = bundle else {
        return Ok(Seeded::NoBundle {
            looked_in: Bundle::candidates(),
        });
    };
    trust::check_dir("bundled plugins folder", &bundle.dir)?;
    let sources = bundle.components()?;
    create_private_dir(dir)?;
    for source in &sources {
        let Some(name) = source.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let mut from = std::fs::File::open(source)?;
        trust::check_file(source, &from.metadata()?)?;
        let tmp = dir.join(format!(".{name}.tmp"));
        let _ = std::fs::remove_file(&tmp);
        let mut to = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&tmp)?;
        io::copy(&mut from, &mut to)?;
        to.sync_all()?;
        // The umask may have taken bits the plugin's mode needs; it never
        // adds any, so this only restores 0644.
        set_mode(&tmp, 0o644)?;
        std::fs::rename(&tmp, dir.join(name))?;
    }
    Ok(Seeded::Installed {
        from: bundle.dir.clone(),
        count: sources.len(),
    })
}

/// Creates `dir` and its missing parents with mode 0755, whatever the
/// umask allows beyond it: with the default `create_dir_all` a umask of
/// 002 makes the folder group-writable, and the daemon's own trust check
/// would then refuse the folder it just made.
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)?;
    set_mode(dir, 0o755)
}

/// Plugin files must be writable by their owner alone (the folder check
/// refuses others' writes), whatever mode the bundle's copies have.
fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(dir: &Path, name: &str) {
        std::fs::write(dir.join(name), b"\0asm").expect("write");
    }

    #[test]
    fn an_empty_folder_gets_the_bundle_and_a_full_one_is_left_alone() {
        let tmp = tempfile::tempdir().expect("tmp");
        let bundle_dir = tmp.path().join("bundle");
        std::fs::create_dir(&bundle_dir).expect("mkdir");
        touch(&bundle_dir, "toolcall.wasm");
        touch(&bundle_dir, "bash.wasm");
        touch(&bundle_dir, "README");
        touch(&bundle_dir, ".half.wasm");
        let bundle = Bundle::at(&bundle_dir);

        let target = tmp.path().join("missing/plugins");
        let seeded = seed_empty_dir(&target, Some(&bundle)).expect("seed");
        assert_eq!(
            seeded,
            Seeded::Installed {
                from: bundle_dir.clone(),
                count: 2
            }
        );
        let names: Vec<_> = components_in(&target)
            .expect("list")
            .iter()
            .map(|p| p.file_name().expect("name").to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["bash.wasm", "toolcall.wasm"]);

        // The operator removed one and added their own: nothing is re-added.
        std::fs::remove_file(target.join("bash.wasm")).expect("rm");
        touch(&target, "mine.wasm");
        assert_eq!(
            seed_empty_dir(&target, Some(&bundle)).expect("seed"),
            Seeded::HadPlugins
        );
        assert!(!target.join("bash.wasm").exists());
    }

    #[test]
    fn folder_state_ignores_hidden_leftovers() {
        let tmp = tempfile::tempdir().expect("tmp");
        assert_eq!(
            folder_state(&tmp.path().join("none")).expect("state"),
            FolderState::Missing
        );
        touch(tmp.path(), ".bash.wasm.tmp");
        touch(tmp.path(), ".half.wasm");
        touch(tmp.path(), "notes.txt");
        assert_eq!(folder_state(tmp.path()).expect("state"), FolderState::Empty);
        touch(tmp.path(), "bash.wasm");
        assert_eq!(
            folder_state(tmp.path()).expect("state"),
            FolderState::HasPlugins
        );
    }

    #[test]
    fn a_bundle_others_can_write_is_not_copied() {
        let tmp = tempfile::tempdir().expect("tmp");
        let bundle_dir = tmp.path().join("bundle");
        std::fs::create_dir(&bundle_dir).expect("mkdir");
        touch(&bundle_dir, "bash.wasm");
        set_mode(&bundle_dir, 0o777).expect("chmod");
        let target = tmp.path().join("plugins");
        match seed_empty_dir(&target, Some(&Bundle::at(&bundle_dir))) {
            Err(SeedError::Untrusted(TrustError::Writable { .. })) => {}
            other => panic!("expected an untrusted bundle, got {other:?}"),
        }
        assert!(!target.exists());

        // A file in it others can write: refused too, nothing renamed in.
        set_mode(&bundle_dir, 0o755).expect("chmod");
        set_mode(&bundle_dir.join("bash.wasm"), 0o666).expect("chmod");
        match seed_empty_dir(&target, Some(&Bundle::at(&bundle_dir))) {
            Err(SeedError::Untrusted(TrustError::Writable { .. })) => {}
            other => panic!("expected an untrusted file, got {other:?}"),
        }
        assert_eq!(folder_state(&target).expect("state"), FolderState::Empty);
    }

    #[test]
    fn an_empty_folder_without_a_bundle_says_where_it_looked() {
        let tmp = tempfile::tempdir().expect("tmp");
        match seed_empty_dir(tmp.path(), None).expect("seed") {
            Seeded::NoBundle { looked_in } => assert!(!looked_in.is_empty()),
            other => panic!("expected NoBundle, got {other:?}"),
        }
    }
}
