//! Which folders, and which files in them, the host may load code from.
//!
//! The plugins folder and the compile cache both hold code the daemon runs:
//! the cache holds native machine code that wasmtime maps executable without
//! checking it, and the daemon's user is root-equivalent (it can reach the
//! Docker socket). So a folder that anyone else can write to, or that
//! someone else owns, is refused with the fix in the message, never
//! re-permissioned quietly: a folder that was ever writable may already
//! hold a planted file, and a silent chmod would hide that it happened.
//!
//! The folder's mode alone is not enough for the plugins folder: a file in
//! a private folder can still be group-writable (an operator's `cp -p`, a
//! umask of 002, an installer running as another user), and whoever can
//! write the file can replace the code every run of every user gets. So
//! the daemon checks each plugin file too ([`check_file`]), on the very
//! descriptor it then reads, so the file cannot be swapped between the
//! check and the read.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Why a folder or a plugin file is not trusted. Each message names it and
/// the command that fixes it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrustError {
    /// The folder's metadata could not be read (it is missing, or a parent
    /// is not searchable).
    #[error("cannot inspect the {what} {}: {message}", path.display())]
    Inspect {
        /// What it is: "plugins folder", "compile cache folder", "plugin file".
        what: &'static str,
        /// The folder or file.
        path: PathBuf,
        /// The I/O error.
        message: String,
    },
    #[error(
        "the {what} {} is a symbolic link; refusing to load code through it \
         (point the configuration at the real folder)",
        path.display()
    )]
    /// The folder itself is a link: its target's permissions are not the
    /// ones checked here.
    Symlink {
        /// Which folder.
        what: &'static str,
        /// The link.
        path: PathBuf,
    },
    #[error("the {what} {} is not a directory", path.display())]
    /// The path is a file or something else, not a folder.
    NotADirectory {
        /// Which folder.
        what: &'static str,
        /// The path.
        path: PathBuf,
    },
    #[error(
        "the {what} {} belongs to uid {owner}, not to this process (uid {me}) or root; \
         refusing to load code from it (fix: chown {me} {})",
        path.display(),
        path.display()
    )]
    /// Someone other than this process's user or root owns the folder (or
    /// file), so they could change its mode and write into it at any time.
    Owner {
        /// What it is.
        what: &'static str,
        /// The folder or file.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// This process's effective uid.
        me: u32,
    },
    #[error(
        "the {what} {} is writable by {who} (mode {mode:04o}); refusing to load code from it, \
         since anyone who could write there could plant code that agentd runs \
         (fix: chmod go-w {}, and check what is in it)",
        path.display(),
        path.display()
    )]
    /// The folder (or file) is writable by its group or by everyone.
    Writable {
        /// What it is.
        what: &'static str,
        /// The folder or file.
        path: PathBuf,
        /// "its group" or "everyone".
        who: &'static str,
        /// Its permission bits.
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
    check_dir_as(what, dir, euid())
}

/// [`check_dir`] judged for `user` instead of this process: what a daemon
/// running as `user` would decide. `agentd doctor` run by root on a system
/// install checks the folders as the service's user, who owns them.
pub fn check_dir_as(what: &'static str, dir: &Path, user: u32) -> Result<(), TrustError> {
    let meta = std::fs::symlink_metadata(dir).map_err(|e| TrustError::Inspect {
        what,
        path: dir.to_path_buf(),
        message: e.to_string(),
    })?;
    if meta.file_type().is_symlink() {
        return Err(TrustError::Symlink {
            what,
            path: dir.to_path_buf(),
        });
    }
    if !meta.is_dir() {
        return Err(TrustError::NotADirectory {
            what,
            path: dir.to_path_buf(),
        });
    }
    check_meta_as(what, dir, meta.uid(), meta.mode(), user)
}

/// Checks a plugin file already opened at `path`, from `meta`, the
/// metadata of that open descriptor (`File::metadata` is an `fstat`): owned
/// by this process's user or root, writable by no one else. Checking the
/// descriptor that is then read, not the name, means a file swapped in
/// after the check is never the one read.
pub fn check_file(path: &Path, meta: &std::fs::Metadata) -> Result<(), TrustError> {
    check_file_as(path, meta, euid())
}

/// [`check_file`] judged for `user` (see [`check_dir_as`]).
pub fn check_file_as(path: &Path, meta: &std::fs::Metadata, user: u32) -> Result<(), TrustError> {
    check_meta_as("plugin file", path, meta.uid(), meta.mode(), user)
}

/// The owner and mode rule, on values already read (an `fstat`).
pub fn check_meta(what: &'static str, path: &Path, uid: u32, mode: u32) -> Result<(), TrustError> {
    check_meta_as(what, path, uid, mode, euid())
}

/// [`check_meta`] judged for the user `me`.
fn check_meta_as(
    what: &'static str,
    path: &Path,
    uid: u32,
    mode: u32,
    me: u32,
) -> Result<(), TrustError> {
    if uid != me && uid != 0 {
        return Err(TrustError::Owner {
            what,
            path: path.to_path_buf(),
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
        path: path.to_path_buf(),
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
    fn a_plugin_file_writable_by_others_is_refused_naming_it_and_the_fix() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("tool.wasm");
        std::fs::write(&file, b"x").expect("write");
        let check = |mode| {
            chmod(&file, mode);
            let opened = std::fs::File::open(&file).expect("open");
            check_file(&file, &opened.metadata().expect("fstat"))
        };
        for ok in [0o600, 0o644, 0o444, 0o755] {
            assert_eq!(check(ok), Ok(()), "{ok:o}");
        }
        for (bad, who) in [
            (0o664, "its group"),
            (0o666, "everyone"),
            (0o646, "everyone"),
        ] {
            let text = check(bad).expect_err("refused").to_string();
            assert!(text.contains("plugin file"), "{text}");
            assert!(text.contains(&file.display().to_string()), "{text}");
            assert!(text.contains(who), "{text}");
            assert!(text.contains("chmod go-w"), "{text}");
        }
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
