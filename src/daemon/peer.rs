//! Who may use the socket. The file mode (0660) is the first gate; checking
//! each connection's kernel-reported credentials (`SO_PEERCRED`) is the
//! second, which still holds when the socket was passed by systemd with a
//! looser mode or a directory's permissions are wrong.

use std::ffi::CString;

use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;
use tokio::net::UnixListener;

/// The credentials of the process at the other end of a connection.
#[derive(Debug, Clone, Copy)]
pub struct Peer {
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub pid: Option<i32>,
}

impl Connected<IncomingStream<'_, UnixListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, UnixListener>) -> Self {
        match stream.io().peer_cred() {
            Ok(cred) => Peer {
                uid: Some(cred.uid()),
                gid: Some(cred.gid()),
                pid: cred.pid(),
            },
            // Unknown credentials are never let in.
            Err(_) => Peer {
                uid: None,
                gid: None,
                pid: None,
            },
        }
    }
}

/// The rule: root, the daemon's own user, and members of `socket_group`.
#[derive(Debug, Clone)]
pub struct AccessPolicy {
    own_uid: u32,
    group: Option<u32>,
}

impl AccessPolicy {
    pub fn new(group: Option<u32>) -> Self {
        AccessPolicy {
            // SAFETY: geteuid has no preconditions and cannot fail.
            own_uid: unsafe { libc::geteuid() },
            group,
        }
    }

    pub fn allows(&self, peer: &Peer) -> bool {
        let Some(uid) = peer.uid else {
            return false;
        };
        if uid == 0 || uid == self.own_uid {
            return true;
        }
        let Some(group) = self.group else {
            return false;
        };
        if peer.gid == Some(group) {
            return true;
        }
        // The supplementary groups of the connecting process itself, as
        // the kernel has them; the group database could be newer or older.
        peer.pid
            .and_then(|pid| std::fs::read_to_string(format!("/proc/{pid}/status")).ok())
            .is_some_and(|status| supplementary_groups(&status).contains(&group))
    }
}

fn supplementary_groups(proc_status: &str) -> Vec<u32> {
    proc_status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .map(|rest| {
            rest.split_whitespace()
                .filter_map(|g| g.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// A group name (or a numeric id) to its id.
pub fn resolve_group(name: &str) -> Result<u32, String> {
    if let Ok(id) = name.parse::<u32>() {
        return Ok(id);
    }
    let cname = CString::new(name).map_err(|_| format!("invalid group name `{name}`"))?;
    let mut group: libc::group = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::group = std::ptr::null_mut();
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: every pointer is valid for the call and buf's length is passed.
    let rc = unsafe {
        libc::getgrnam_r(
            cname.as_ptr(),
            &mut group,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        )
    };
    if rc != 0 || result.is_null() {
        return Err(format!("[daemon] socket_group: no group named `{name}`"));
    }
    Ok(group.gr_gid)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(uid: u32, gid: u32) -> Peer {
        Peer {
            uid: Some(uid),
            gid: Some(gid),
            pid: None,
        }
    }

    #[test]
    fn root_and_own_user_are_allowed_others_are_not() {
        let policy = AccessPolicy {
            own_uid: 1000,
            group: None,
        };
        assert!(policy.allows(&peer(0, 0)));
        assert!(policy.allows(&peer(1000, 1000)));
        assert!(!policy.allows(&peer(1001, 1001)));
        assert!(!policy.allows(&Peer {
            uid: None,
            gid: None,
            pid: None
        }));
    }

    #[test]
    fn members_of_the_socket_group_are_allowed() {
        let policy = AccessPolicy {
            own_uid: 1000,
            group: Some(555),
        };
        assert!(policy.allows(&peer(1001, 555)));
        assert!(!policy.allows(&peer(1001, 1001)));
        assert_eq!(
            supplementary_groups("Name:\tx\nGroups:\t4 24 555 \nNgid: 0\n"),
            vec![4, 24, 555]
        );
    }

    #[test]
    fn group_names_resolve() {
        assert_eq!(resolve_group("0"), Ok(0));
        assert_eq!(resolve_group("root"), Ok(0));
        assert!(resolve_group("no-such-group-agentd").is_err());
    }
}
