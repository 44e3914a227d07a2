//! Locks that outlive a panic of their holder.
//!
//! A `std::sync` lock is poisoned when a thread panics while holding it, and
//! every later `lock()` then returns an error. agentd turns a panic inside a
//! run into the outcome `error` and goes on serving (`ARCHITECTURE.md`, "What
//! happens on each failure"), so a poisoned lock must not spread: the run
//! table, the event logs and the plugin set are shared by every run, and a
//! failed run's own state is still read to record how it ended. Propagating
//! the poison would turn one failed run into a daemon whose later requests
//! all fail. The sections these locks guard are short and hold no `.await`;
//! what a panicking holder can leave is one half-made update of the value it
//! held, a smaller harm than refusing every later caller. So agentd takes
//! the guard either way, through these helpers.

use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// `Mutex::lock`, recovering the guard from a poisoned lock.
pub trait LockExt<T: ?Sized> {
    /// The guard, whether or not a previous holder panicked.
    fn lock_unpoisoned(&self) -> MutexGuard<'_, T>;
}

impl<T: ?Sized> LockExt<T> for Mutex<T> {
    fn lock_unpoisoned(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// `RwLock::read` and `RwLock::write`, recovering the guard from a poisoned
/// lock.
pub trait RwLockExt<T: ?Sized> {
    /// The read guard, whether or not a previous writer panicked.
    fn read_unpoisoned(&self) -> RwLockReadGuard<'_, T>;
    /// The write guard, whether or not a previous writer panicked.
    fn write_unpoisoned(&self) -> RwLockWriteGuard<'_, T>;
}

impl<T: ?Sized> RwLockExt<T> for RwLock<T> {
    fn read_unpoisoned(&self) -> RwLockReadGuard<'_, T> {
        self.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write_unpoisoned(&self) -> RwLockWriteGuard<'_, T> {
        self.write().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_still_gives_its_guard() {
        let m = Mutex::new(1);
        let rw = RwLock::new(1);
        let _ = std::panic::catch_unwind(|| {
            let _m = m.lock_unpoisoned();
            let _rw = rw.write_unpoisoned();
            panic!("holder panics");
        });
        assert!(m.is_poisoned() && rw.is_poisoned());
        *m.lock_unpoisoned() += 1;
        *rw.write_unpoisoned() += 1;
        assert_eq!(*m.lock_unpoisoned(), 2);
        assert_eq!(*rw.read_unpoisoned(), 2);
    }
}
