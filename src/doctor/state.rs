//! `state`: the state folder is writable, with room to spare.

use std::ffi::CString;
use std::io::ErrorKind;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::Check;

/// Below this the run history and plugin cache soon fail to write.
const MIN_FREE_BYTES: u64 = 100 << 20;

/// Writable (a probe file created and removed) with room to spare. A
/// folder that does not exist yet is fine when the daemon can create it:
/// its nearest existing parent is checked instead, and nothing is created.
pub(super) fn check_state(dir: &Path) -> Check {
    let shown = dir.display();
    let set_it = "set [daemon] state_dir to a folder this user can write";
    let (measured, detail) = match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => {
            return Check::fail("state", format!("{shown} is not a folder"), set_it)
        }
        Ok(_) => {
            let probe = dir.join(format!(".agentd-doctor-{}", std::process::id()));
            let written = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&probe);
            if let Err(e) = written {
                return Check::fail(
                    "state",
                    format!("{shown} is not writable: {e}"),
                    format!(
                        "chown the folder to the daemon's user (chown $USER {shown}), or {set_it}"
                    ),
                );
            }
            let _ = std::fs::remove_file(&probe);
            (dir.to_path_buf(), shown.to_string())
        }
        Err(e) if e.kind() == ErrorKind::NotFound => {
            let Some(parent) = dir.ancestors().skip(1).find(|a| a.is_dir()) else {
                return Check::fail("state", format!("{shown} cannot be created"), set_it);
            };
            if let Err(e) = writable(parent) {
                return Check::fail(
                    "state",
                    format!("{shown} does not exist and cannot be created in {}: {e}", parent.display()),
                    format!("create it for the daemon's user (mkdir -p {shown}; chown $USER {shown}), or {set_it}"),
                );
            }
            (
                parent.to_path_buf(),
                format!("{shown} (not there yet: the daemon creates it)"),
            )
        }
        Err(e) => return Check::fail("state", format!("cannot inspect {shown}: {e}"), set_it),
    };
    match free_bytes(&measured) {
        Ok(free) if free < MIN_FREE_BYTES => Check::fail(
            "state",
            format!(
                "{detail}: only {} free (agentd needs {})",
                crate::plugin::settings::show_bytes(free),
                crate::plugin::settings::show_bytes(MIN_FREE_BYTES)
            ),
            "free space on that file system, or set [daemon] state_dir to a folder on another",
        ),
        Ok(free) => Check::pass(
            "state",
            format!(
                "{detail}, {} free",
                crate::plugin::settings::show_bytes(free)
            ),
        ),
        Err(e) => Check::fail(
            "state",
            format!("{detail}: cannot tell the free space: {e}"),
            set_it,
        ),
    }
}

fn c_path(path: &Path) -> std::io::Result<CString> {
    Ok(CString::new(path.as_os_str().as_bytes())?)
}

/// Whether this user may create entries in `dir` (`access(2)`, which
/// answers for the real uid as the daemon started by this user would run).
fn writable(dir: &Path) -> std::io::Result<()> {
    let path = c_path(dir)?;
    // SAFETY: `path` is a valid NUL-terminated string for the call's length.
    if unsafe { libc::access(path.as_ptr(), libc::W_OK | libc::X_OK) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Bytes an unprivileged writer may still use on `dir`'s file system.
fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    let path = c_path(dir)?;
    // SAFETY: statvfs is plain data; all zeroes is a valid value of it.
    let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is NUL-terminated and `stats` is a live, writable statvfs.
    if unsafe { libc::statvfs(path.as_ptr(), &mut stats) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    #[allow(clippy::unnecessary_cast)] // the field types differ by platform
    Ok((stats.f_bavail as u64).saturating_mul(stats.f_frsize as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_folder_that_is_missing_is_judged_by_its_parent() {
        let tmp = tempfile::tempdir().expect("tmp");
        let c = check_state(&tmp.path().join("a/b"));
        assert!(c.ok, "{c:?}");
        assert!(c.detail.contains("the daemon creates it"), "{c:?}");
        assert!(!tmp.path().join("a").exists());
        let file = tmp.path().join("file");
        std::fs::write(&file, "x").expect("write");
        assert!(!check_state(&file).ok);
        let c = check_state(tmp.path());
        assert!(c.ok && c.detail.contains("free"), "{c:?}");
        assert_eq!(std::fs::read_dir(tmp.path()).expect("ls").count(), 1);
    }
}
