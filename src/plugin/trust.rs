//! Which folders the host may load code from.
//!
//! The plugins folder and the compile cache both hold code the daemon runs:
//! the cache holds native machine code that wasmtime maps executable without
//! checking it, and the daemon's user is root-equivalent (it can reach the
//! Docker socket). So a folder that anyone else can write to, or that
//! someone else owns, is refused with the fix in the message, never
//! re-permissioned quietly: a folder that was ever writable may already
//! hold a planted file, and a silent chmod would hide that it happened.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Why a folder is not trusted. Each message names the folder and the
/// command that fixes it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrustError {
    /// The folder's metadata could not be read (it is missing, or a parent
    /// is not searchable).
    #[error("cannot inspect the {what} {}: {message}", dir.display())]
    Inspect {
        /// Which folder: "plugins folder", "compile cache folder".
        what: &'static str,
        /// The folder.
        dir: PathBuf,
        /// The I/O error.
        message: String,
    },
    #[error(
        "the {what} {} is a symbolic link; refusing to load code through it \
         (point the configuration at the real folder)",
        dir.display()
    )]
    /// The folder itself is a link: its target's permissions are not the
    /// ones checked here.
    Symlink {
        /// Which folder.
        what: &'static str,
        /// The link.
        dir: PathBuf,
    },
    #[error("the {what} {} is not a directory", dir.display())]
    /// The path is a file or something else, not a folder.
    NotADirectory {
        /// Which folder.
        what: &'static str,
        /// The path.
        dir: PathBuf,
    },
    #[error(
        "the {what} {} belongs to uid {owner}, not to this process (uid {me}) or root; \
         refusing to load code from it (fix: chown {me} {})",
        dir.display(),
        dir.display()
    )]
    /// Someone other than this process's user or root owns the folder, so
    /// they could change its mode and write into it at any time.
    Owner {
        /// Which folder.
        what: &'static str,
        /// The folder.
        dir: PathBuf,
        /// The folder's owner.
        owner: u32,
        /// This process's effective uid.
        me: u32,
    },
    #[error(
        "the {what} {} is writable by {who} (mode {mode:04o}); refusing to load code from it, \
         since anyone who could write there could plant code that agentd runs \
         (fix: chmod go-w {}, and check what is in it)",
        dir.display(),
        dir.display()
    )]
    /// The folder is writable by its group or by everyone.
    Writable {
        /// Which folder.
        what: &'static str,
        /// The folder.
        dir: PathBuf,
        /// "its group" or "everyone".
        who: &'static str,
        /// The folder's permission bits.
        mode: u32,
    },
}

/// The process's effective uid.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Checks `dir` itself (not followed if it is a link): a directory owned by
/// this process's user or root, writable by no one else. `what` names it in
/// the message ("plugins folder", "compile cache folder").
pub fn check_dir(what: &'static str, dir: &Path) -> Result<(), TrustError> {
    let meta = std::fs::symlink_metadata(dir).map_err(|e| TrustError::Inspect {
        what,
        dir: dir.to_path_buf(),
        message: e.to_string(),
    })?;
    if meta.file_type().is_symlink() {
        return Err(TrustError::Symlink {
            what,
            dir: dir.to_path_buf(),
        });
    }
    if !meta.is_dir() {
        return Err(TrustError::NotADirectory {
            what,
            dir: dir.to_path_buf(),
        });
    }
    check_meta(what, dir, meta.uid(), meta.mode())
}

/// The owner and mode rule, on values already read (an `fstat`).
pub fn check_meta(what: &'static str, dir: &Path, uid: u32, mode: u32) -> Result<(), TrustError> {
    let me = euid();
    if uid != me && uid != 0 {
        return Err(TrustError::Owner {
            what,
            dir: dir.to_path_buf(),
            owner: uid,
            me,
        });
    }
    // The group is someone else too: the socket group, an operator's
    // convenience group. Only the owner may write.
    let who = match (mode & 0o020 != 0, mode & 0o002 != 0) {
        (_, true) => "everyone",
        (true, false) => "its group",
        (false, false) => return Ok(()),
    };
    Err(TrustError::Writable {
        what,
        dir: dir.to_path_buf(),
        who,
        mode: mode & 0o7777,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn chmod(dir: &Path, mode: u32) {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    #[test]
    fn a_private_folder_is_trusted_and_a_writable_one_refused_with_the_fix() {
        let dir = tempfile::tempdir().expect("tempdir");
        for ok in [0o700, 0o755, 0o750, 0o1755] {
            chmod(dir.path(), ok);
            assert_eq!(check_dir("plugins folder", dir.path()), Ok(()), "{ok:o}");
        }
        for (bad, who) in [
            (0o777, "everyone"),
            (0o775, "its group"),
            (0o1777, "everyone"),
        ] {
            chmod(dir.path(), bad);
            let e = check_dir("plugins folder", dir.path()).expect_err("refused");
            let text = e.to_string();
            assert!(text.contains(&dir.path().display().to_string()), "{text}");
            assert!(text.contains(who), "{text}");
            assert!(text.contains("chmod go-w"), "{text}");
        }
        chmod(dir.path(), 0o700);
    }

    #[test]
    fn a_folder_owned_by_someone_else_or_a_link_is_refused() {
        let e = check_meta(
            "compile cache folder",
            Path::new("/x"),
            euid() + 4242,
            0o700,
        )
        .expect_err("refused");
        assert!(e.to_string().contains("chown"), "{e}");
        let dir = tempfile::tempdir().expect("tempdir");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(dir.path(), &link).expect("symlink");
        assert!(matches!(
            check_dir("plugins folder", &link),
            Err(TrustError::Symlink { .. })
        ));
    }
}
