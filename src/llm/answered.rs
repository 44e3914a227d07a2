//! Which endpoints have answered at least once in this process.
//!
//! A connection that is refused, or a name that does not resolve, before
//! an endpoint ever answered means no server is there (a wrong address, a
//! server not started): the run fails at once with the setup help instead
//! of retrying for seconds. After the endpoint has answered once, the same
//! failure is a flaky or restarting server, and is retried.
//!
//! The memory is per base URL and per process, not per client: the daemon
//! builds new clients on every SIGHUP (one per agent per configuration
//! generation), and a reload must not turn an endpoint that has served for
//! a week into "is the server running?" on its first hiccup. The daemon
//! holds one [`AnsweredEndpoints`] for its life and hands it to every
//! client it builds; a client built on its own gets a fresh one.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use crate::sync::LockExt;

/// A shared set of base URLs that have answered (any HTTP status). Cheap
/// to clone; the clones share the set.
#[derive(Clone, Debug, Default)]
pub struct AnsweredEndpoints(Arc<Mutex<HashSet<String>>>);

impl AnsweredEndpoints {
    /// Whether `base_url` has answered in this process.
    pub fn has_answered(&self, base_url: &str) -> bool {
        self.0.lock_unpoisoned().contains(base_url)
    }

    /// Records that `base_url` answered.
    pub(super) fn mark(&self, base_url: &str) {
        let mut set = self.0.lock_unpoisoned();
        if !set.contains(base_url) {
            set.insert(base_url.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_set_and_urls_are_separate() {
        let a = AnsweredEndpoints::default();
        let b = a.clone();
        assert!(!b.has_answered("http://x/v1"));
        a.mark("http://x/v1");
        assert!(b.has_answered("http://x/v1"));
        assert!(!b.has_answered("http://y/v1"));
    }
}
