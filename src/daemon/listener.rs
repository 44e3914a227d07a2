//! The control socket: passed by systemd, or bound here.

use std::io;
use std::os::fd::FromRawFd;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use tokio::net::UnixListener;

use super::systemd;

#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("another agentd is already listening at {0}")]
    InUse(PathBuf),
    #[error("{0} exists and is not a socket; refusing to replace it")]
    NotASocket(PathBuf),
    #[error("cannot listen at {path}: {source}")]
    Bind { path: PathBuf, source: io::Error },
    #[error("the socket passed by systemd (LISTEN_FDS) is unusable: {0}")]
    Activation(io::Error),
}

pub struct Bound {
    pub listener: UnixListener,
    pub path: PathBuf,
    /// Whether we created the file (and so remove it on exit). A socket
    /// from systemd belongs to the `.socket` unit.
    pub owned: bool,
}

/// Uses the socket systemd passed if there is one, else binds `path`.
pub fn listen(path: &Path, group: Option<u32>) -> Result<Bound, ListenError> {
    if let Some(fd) = systemd::activated_socket().map_err(ListenError::Activation)? {
        // SAFETY: systemd hands this fd to us alone (LISTEN_PID matched).
        let std = unsafe { std::os::unix::net::UnixListener::from_raw_fd(fd) };
        std.set_nonblocking(true).map_err(ListenError::Activation)?;
        let path = std
            .local_addr()
            .ok()
            .and_then(|a| a.as_pathname().map(Path::to_path_buf))
            .unwrap_or_else(|| path.to_path_buf());
        let listener = UnixListener::from_std(std).map_err(ListenError::Activation)?;
        return Ok(Bound {
            listener,
            path,
            owned: false,
        });
    }
    clear_stale(path)?;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|source| ListenError::Bind {
            path: path.to_path_buf(),
            source,
        })?;
    }
    let bind_err = |source| ListenError::Bind {
        path: path.to_path_buf(),
        source,
    };
    let listener = UnixListener::bind(path).map_err(bind_err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660)).map_err(bind_err)?;
    if let Some(gid) = group {
        std::os::unix::fs::chown(path, None, Some(gid)).map_err(bind_err)?;
    }
    Ok(Bound {
        listener,
        path: path.to_path_buf(),
        owned: true,
    })
}

/// A socket file nobody answers on is left by a daemon that died; one that
/// answers belongs to a live daemon, and two daemons on one socket would
/// each serve half the requests.
fn clear_stale(path: &Path) -> Result<(), ListenError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(ListenError::Bind {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    if !meta.file_type().is_socket() {
        return Err(ListenError::NotASocket(path.to_path_buf()));
    }
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => Err(ListenError::InUse(path.to_path_buf())),
        Err(_) => {
            tracing::info!(socket = %path.display(), "removing a stale socket");
            std::fs::remove_file(path).map_err(|source| ListenError::Bind {
                path: path.to_path_buf(),
                source,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stale_socket_is_replaced_a_live_one_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("agentd.sock");
        let first = listen(&path, None).expect("first bind");
        let mode = std::fs::metadata(&path)
            .expect("socket")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o660);
        assert!(matches!(listen(&path, None), Err(ListenError::InUse(_))));
        drop(first);
        // The file is still there, but nobody answers.
        assert!(path.exists());
        listen(&path, None).expect("rebind over a stale socket");
    }

    #[test]
    fn a_regular_file_is_never_removed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("agentd.sock");
        std::fs::write(&path, b"data").expect("write");
        assert!(matches!(
            clear_stale(&path),
            Err(ListenError::NotASocket(_))
        ));
        assert_eq!(std::fs::read(&path).expect("still there"), b"data");
    }
}
