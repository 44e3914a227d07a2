//! Shares per user, counted by the peer's uid from `SO_PEERCRED` at accept:
//! the connections one user has open (`max_connections_per_user`) and the
//! runs one user has waiting in the queue (`max_queued_runs_per_user`).
//! A global cap alone lets one socket user take all of it, and then nobody
//! else, root's `agentd cancel` included, gets in (or gets a run queued);
//! with a per-user cap below it, one user (root too: a root script can leak
//! connections or flood the queue like any other) takes at most its share
//! and the rest stays open to others.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::sync::LockExt;

/// The open connections of each uid (`None`: credentials the kernel would
/// not give, all counted together; such peers are refused anyway, but they
/// hold a slot for the moment their `403` takes).
#[derive(Debug, Clone)]
pub struct UserSlots {
    max_per_user: usize,
    open: Arc<Mutex<HashMap<Option<u32>, usize>>>,
}

impl UserSlots {
    pub fn new(max_per_user: usize) -> Self {
        UserSlots {
            max_per_user: max_per_user.max(1),
            open: Arc::default(),
        }
    }

    pub fn max_per_user(&self) -> usize {
        self.max_per_user
    }

    /// One more connection for `uid`, or `None` when it already has
    /// `max_per_user` open. The slot is given back when the guard drops,
    /// however the connection ends.
    pub fn try_acquire(&self, uid: Option<u32>) -> Option<UserSlot> {
        let mut open = self.open.lock_unpoisoned();
        let count = open.entry(uid).or_insert(0);
        if *count >= self.max_per_user {
            return None;
        }
        *count += 1;
        Some(UserSlot {
            uid,
            open: self.open.clone(),
        })
    }

    /// How many connections `uid` has open now.
    #[cfg(test)]
    pub fn open_for(&self, uid: Option<u32>) -> usize {
        self.open.lock_unpoisoned().get(&uid).copied().unwrap_or(0)
    }

    /// How many uids have a connection open: entries are removed at zero,
    /// so a stream of one-off clients with different uids leaves nothing.
    #[cfg(test)]
    pub fn users(&self) -> usize {
        self.open.lock_unpoisoned().len()
    }
}

/// One open connection of one uid; dropping it releases the slot.
#[derive(Debug)]
pub struct UserSlot {
    uid: Option<u32>,
    open: Arc<Mutex<HashMap<Option<u32>, usize>>>,
}

impl Drop for UserSlot {
    fn drop(&mut self) {
        let mut open = self.open.lock_unpoisoned();
        if let Some(count) = open.get_mut(&self.uid) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&self.uid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_gets_at_most_its_share_and_others_are_not_counted_with_it() {
        let slots = UserSlots::new(2);
        let a1 = slots.try_acquire(Some(0)).expect("first");
        let _a2 = slots.try_acquire(Some(0)).expect("second");
        assert!(slots.try_acquire(Some(0)).is_none(), "third of uid 0");
        let _b = slots.try_acquire(Some(1000)).expect("another uid");
        assert_eq!(slots.open_for(Some(0)), 2);
        drop(a1);
        assert_eq!(slots.open_for(Some(0)), 1);
        let _a3 = slots.try_acquire(Some(0)).expect("a slot came free");
    }

    #[test]
    fn dropping_every_slot_releases_the_user_entirely() {
        let slots = UserSlots::new(3);
        let held: Vec<_> = (0..3)
            .map(|_| slots.try_acquire(Some(65534)).expect("slot"))
            .collect();
        let unknown = slots.try_acquire(None).expect("unknown peer");
        assert_eq!(slots.users(), 2);
        drop(held);
        drop(unknown);
        assert_eq!(slots.open_for(Some(65534)), 0);
        assert_eq!(
            slots.users(),
            0,
            "no entry is kept for a user with none open"
        );
    }

    #[test]
    fn a_slot_dropped_in_another_task_is_released() {
        let slots = UserSlots::new(1);
        let slot = slots.try_acquire(Some(7)).expect("slot");
        std::thread::spawn(move || drop(slot)).join().expect("join");
        assert!(slots.try_acquire(Some(7)).is_some());
    }
}
