//! Files a run starts with and files it leaves behind.
//!
//! The caller (the daemon) gives a run its input files and the folder its
//! kept files go to ([`super::RunOptions`]); the run loop writes the first
//! into the sandbox's work dir before the first step and has the sandbox
//! copy the second out before it is removed, on every ending. The agent
//! layer knows no state dir: only the folder it is handed.

use std::path::{Component, Path, PathBuf};

pub use crate::sandbox::{KeptFile, KeptFiles};

/// `[agents.X] keep_limit` when unset: a run's artifacts are results
/// (reports, scripts, small data), not the work dir's whole tmpfs.
pub const DEFAULT_KEEP_LIMIT: u64 = 100 << 20;
/// The largest `keep_limit`: a resumed run carries its predecessor's kept
/// files in memory until they are written into its sandbox, and a sandbox's
/// work dir holds no more than `[sandbox] disk_limit` (1 GiB by default).
pub const MAX_KEEP_LIMIT: u64 = 1 << 30;

/// A file written into the run's work dir before its first step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputFile {
    /// Relative to the work dir, checked by [`check_relative`].
    pub path: String,
    /// The file's bytes, as written.
    pub contents: Vec<u8>,
}

impl InputFile {
    /// Refuses a path that is absolute, empty, or goes up (`..`): input
    /// files land in the work dir, nowhere else.
    pub fn new(path: &str, contents: Vec<u8>) -> Result<Self, String> {
        check_relative(path)?;
        Ok(InputFile {
            path: path.to_string(),
            contents,
        })
    }
}

/// `path` as a plain relative path (`a/b.txt`): no leading `/`, no `..`,
/// not empty. What input files and kept files are named by, so neither
/// can name anything outside its folder.
pub fn check_relative(path: &str) -> Result<PathBuf, String> {
    let p = Path::new(path);
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                return Err(format!("file path `{path}` goes up with `..`"));
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(format!(
                    "file path `{path}` is absolute; paths are relative to the work dir"
                ));
            }
        }
    }
    if out.as_os_str().is_empty() || path.ends_with('/') {
        return Err(format!("file path `{path}` does not name a file"));
    }
    Ok(out)
}

/// What a run keeps when it ends: `[agents.X] keep_files` and
/// `keep_limit`, and where the caller wants them.
#[derive(Debug, Clone)]
pub(crate) struct KeepSpec {
    pub patterns: Vec<String>,
    pub limit: u64,
    pub dest: PathBuf,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_relative_paths() {
        assert!(check_relative("a/b.txt").is_ok());
        assert!(check_relative("./a").is_ok());
        for bad in ["/etc/passwd", "../x", "a/../../x", "", ".", "a/"] {
            assert!(check_relative(bad).is_err(), "{bad}");
        }
    }
}
