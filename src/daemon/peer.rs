//! Who may use the socket. The file mode (0660) is the first gate; checking
//! each connection's kernel-reported credentials (`SO_PEERCRED`,
//! `SO_PEERGROUPS`) is the second, which still holds when the socket was
//! passed by systemd with a looser mode or a directory's permissions are
//! wrong. Both are read once, at accept: the kernel recorded them at
//! `connect()`, so they cannot race with pid reuse the way reading
//! `/proc/<pid>/status` later could, and they need no access to `/proc`
//! (so `ProtectProc=invisible` or `hidepid` do not lock members out).

use std::ffi::CString;
use std::os::fd::AsRawFd;

use tokio::net::UnixStream;

/// Who sent a request: the uid of its connection's peer, read at accept
/// and put in every request's extensions by the accept loop. Handlers use
/// it for per-user shares (`max_queued_runs_per_user`); it is `None` when
/// the kernel gave no credentials (and for requests not served by the
/// accept loop).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Caller {
    pub uid: Option<u32>,
}

/// The credentials of the process at the other end of a connection, as the
/// kernel recorded them when it connected.
#[derive(Debug, Clone, Default)]
pub struct Peer {
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub pid: Option<i32>,
    /// Its supplementary groups (`SO_PEERGROUPS`); `None` on kernels older
    /// than 4.13, where `/proc` is the fallback.
    pub groups: Option<Vec<u32>>,
}

impl Peer {
    /// Unknown credentials (the calls failed) are never let in.
    pub fn of(stream: &UnixStream) -> Peer {
        match stream.peer_cred() {
            Ok(cred) => Peer {
                uid: Some(cred.uid()),
                gid: Some(cred.gid()),
                pid: cred.pid(),
                groups: peer_groups(stream),
            },
            Err(_) => Peer::default(),
        }
    }
}

/// `SO_PEERGROUPS`: the connecting process's supplementary groups at
/// `connect()` time.
fn peer_groups(stream: &UnixStream) -> Option<Vec<u32>> {
    let fd = stream.as_raw_fd();
    // NGROUPS_MAX is 65536; start small and grow to what the kernel asks.
    let mut groups: Vec<libc::gid_t> = vec![0; 64];
    for _ in 0..2 {
        let mut len = (groups.len() * std::mem::size_of::<libc::gid_t>()) as libc::socklen_t;
        // SAFETY: the buffer is valid for `len` bytes and `len` is a valid
        // pointer; the kernel writes at most `len` bytes.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_PEERGROUPS,
                groups.as_mut_ptr().cast(),
                &mut len,
            )
        };
        let n = len as usize / std::mem::size_of::<libc::gid_t>();
        if rc == 0 {
            groups.truncate(n);
            return Some(groups);
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::ERANGE) {
            return None;
        }
        groups.resize(n.max(groups.len() * 2), 0);
    }
    None
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
        if let Some(groups) = &peer.groups {
            return groups.contains(&group);
        }
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
            groups: Some(vec![gid]),
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
        assert!(!policy.allows(&Peer::default()));
    }

    #[test]
    fn members_of_the_socket_group_are_allowed() {
        let policy = AccessPolicy {
            own_uid: 1000,
            group: Some(555),
        };
        assert!(policy.allows(&peer(1001, 555)));
        assert!(!policy.allows(&peer(1001, 1001)));
        let member = Peer {
            groups: Some(vec![4, 555]),
            ..peer(1001, 1001)
        };
        assert!(policy.allows(&member), "a supplementary group counts");
        assert_eq!(
            supplementary_groups("Name:\tx\nGroups:\t4 24 555 \nNgid: 0\n"),
            vec![4, 24, 555]
        );
    }

    #[tokio::test]
    async fn credentials_are_read_from_the_socket() {
        let (a, _b) = UnixStream::pair().expect("socketpair");
        let p = Peer::of(&a);
        // SAFETY: no preconditions.
        assert_eq!(p.uid, Some(unsafe { libc::geteuid() }));
        let groups = p.groups.expect("SO_PEERGROUPS (Linux >= 4.13)");
        // SAFETY: a null list with size 0 only counts.
        let n = unsafe { libc::getgroups(0, std::ptr::null_mut()) };
        assert_eq!(groups.len(), n as usize, "{groups:?}");
    }

    #[test]
    fn group_names_resolve() {
        assert_eq!(resolve_group("0"), Ok(0));
        assert_eq!(resolve_group("root"), Ok(0));
        assert!(resolve_group("no-such-group-agentd").is_err());
    }
}
