//! Which process owns a sandbox container, so that reaping orphans never
//! removes the container of a run that is still alive elsewhere: another
//! `agentd run --local`, another daemon on the same engine, or a test.
//!
//! The owner label is `host:pid:start-time:instance`. The start time (from
//! `/proc/<pid>/stat`) guards against a recycled PID; the instance tells two
//! providers of one process apart.

use std::fmt;

pub const LABEL_OWNER: &str = "agentd.owner";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    host: String,
    pid: u32,
    start: u64,
    instance: String,
}

/// What a container's owner label says about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ownership {
    /// Made by this provider.
    Ours,
    /// Made by a process on this host that is still running.
    AliveElsewhere,
    /// Made by a process that is gone: an orphan.
    Dead,
    /// Made on another host (a shared remote engine): nothing can be known.
    OtherHost,
    /// Made on this host by a process that exists but whose `/proc` entry
    /// this process cannot read (`hidepid`, `ProtectProc=invisible`), so
    /// whether it is the same process cannot be told: left alone, since
    /// removing a live run's sandbox is worse than leaving an orphan.
    Unverifiable,
    /// No or unreadable label: not made by this agentd (or by one before
    /// owner labels), so it is left alone and reported, never removed.
    Unlabelled,
}

impl Owner {
    pub fn current() -> Self {
        let pid = std::process::id();
        Owner {
            host: hostname(),
            pid,
            start: start_time(pid).unwrap_or(0),
            instance: uuid::Uuid::new_v4().simple().to_string(),
        }
    }

    fn parse(label: &str) -> Option<Self> {
        let mut parts = label.rsplitn(4, ':');
        let instance = parts.next()?.to_string();
        let start = parts.next()?.parse().ok()?;
        let pid = parts.next()?.parse().ok()?;
        let host = parts.next()?.to_string();
        Some(Owner {
            host,
            pid,
            start,
            instance,
        })
    }

    pub fn classify(&self, label: Option<&str>) -> Ownership {
        let Some(other) = label.and_then(Owner::parse) else {
            return Ownership::Unlabelled;
        };
        if other == *self {
            return Ownership::Ours;
        }
        if other.host != self.host {
            return Ownership::OtherHost;
        }
        judge(&other, start_time(other.pid), || pid_exists(other.pid))
    }
}

/// Decides from what `/proc` showed (`seen`: the start time of the process
/// now holding the pid, if readable) and, when `/proc` showed nothing,
/// whether a process with that pid exists at all (`kill(pid, 0)` works
/// where `/proc` is hidden).
fn judge(owner: &Owner, seen: Option<u64>, exists: impl FnOnce() -> bool) -> Ownership {
    match seen {
        Some(start) if start == owner.start => Ownership::AliveElsewhere,
        // The pid was recycled by another process: the owner is gone.
        Some(_) => Ownership::Dead,
        None if exists() => Ownership::Unverifiable,
        None => Ownership::Dead,
    }
}

/// Whether any process has this pid: `kill(pid, 0)` succeeds, or fails with
/// `EPERM` for another user's process; only `ESRCH` means there is none.
fn pid_exists(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 sends nothing; kill has no memory-safety preconditions.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}:{}",
            self.host, self.pid, self.start, self.instance
        )
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().replace(':', "_"))
        .unwrap_or_else(|_| "unknown".into())
}

/// Field 22 of `/proc/<pid>/stat`, read after the command name, which may
/// itself contain spaces and parentheses.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_comm = &stat[stat.rfind(')')? + 1..];
    after_comm.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_owners() {
        let me = Owner::current();
        assert_ne!(me.start, 0, "start time is readable");
        assert_eq!(me.classify(Some(&me.to_string())), Ownership::Ours);
        let sibling = Owner {
            instance: "other".into(),
            ..me.clone()
        };
        assert_eq!(
            me.classify(Some(&sibling.to_string())),
            Ownership::AliveElsewhere
        );
        let recycled = Owner {
            start: me.start + 1,
            ..sibling.clone()
        };
        assert_eq!(me.classify(Some(&recycled.to_string())), Ownership::Dead);
        let gone = Owner {
            pid: u32::MAX - 1,
            ..sibling.clone()
        };
        assert_eq!(me.classify(Some(&gone.to_string())), Ownership::Dead);
        let remote = Owner {
            host: "elsewhere".into(),
            ..sibling
        };
        assert_eq!(me.classify(Some(&remote.to_string())), Ownership::OtherHost);
        assert_eq!(me.classify(None), Ownership::Unlabelled);
        assert_eq!(me.classify(Some("garbage")), Ownership::Unlabelled);
    }

    #[test]
    fn an_owner_hidden_from_proc_is_left_alone_unless_its_pid_is_free() {
        let me = Owner::current();
        // `/proc/<pid>` unreadable (hidepid) but the pid is taken: cannot
        // be told from the owner, so it is not an orphan.
        assert_eq!(judge(&me, None, || true), Ownership::Unverifiable);
        assert_eq!(judge(&me, None, || false), Ownership::Dead);
        assert_eq!(
            judge(&me, Some(me.start), || false),
            Ownership::AliveElsewhere
        );
        assert_eq!(judge(&me, Some(me.start + 1), || true), Ownership::Dead);
        assert!(pid_exists(std::process::id()));
        assert!(!pid_exists(4_194_300));
    }
}
