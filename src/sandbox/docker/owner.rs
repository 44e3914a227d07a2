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
    /// No or unreadable label (made by an older agentd): treated as an orphan.
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
        match start_time(other.pid) {
            Some(start) if start == other.start => Ownership::AliveElsewhere,
            _ => Ownership::Dead,
        }
    }
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
}
