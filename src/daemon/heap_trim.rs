//! Gives the heap's free pages back to the system once runs have ended.
//!
//! Why: glibc's malloc returns memory to the kernel only from the top of
//! each arena. What a run frees (its transcript, its event log, its
//! plugin instances' host state, its HTTP buffers) mostly lands in holes
//! below memory something else still holds, and those pages stay resident
//! for good: under `cargo bench --bench daemon` (1000 runs at once) the
//! daemon held 196-203 MiB once every run had ended, against 53 MiB before the
//! burst, although nothing lived in most of it. `malloc_trim` hands the
//! pages of free chunks back (`MADV_DONTNEED`) and leaves the chunks in the
//! allocator's free lists, so a later burst reuses them for the price of a
//! page fault each.
//!
//! When: only after runs have ended, at most once per [`TRIM_EVERY`]: a
//! run's end is when most of what it held is freed at once. An idle daemon
//! never trims; a busy one trims once a second. (What other work frees,
//! a burst of `GET`s of ended runs say, waits for the next run's end.) A
//! trim takes each arena's lock in turn, so any thread allocating from the
//! arena being trimmed waits for that arena's share of it, the runtime's
//! workers included; with a thousand runs' worth freed a whole trim took
//! 6-11 ms. It runs on the blocking pool, so no worker is held for all of
//! it. Measured under the bench above: the CPU per step moves by less than
//! the machine's noise, and 2 s after the runs' end the daemon holds
//! 149-160 MiB, not 196-203. The peak is not lowered: at the peak the
//! memory is in use.
//!
//! On a C library other than glibc (musl, say) there is nothing to trim
//! this way ([`SUPPORTED`]) and the daemon does not start the task.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The least time between two trims, and how long a trim waits after the
/// first run end that asks for it, so that the runs ending together are
/// trimmed after once.
pub const TRIM_EVERY: Duration = Duration::from_secs(1);

/// Whether this build can trim (glibc).
pub const SUPPORTED: bool = cfg!(all(target_os = "linux", target_env = "gnu"));

/// What one trim did.
#[derive(Debug, Clone, Copy)]
pub struct Trimmed {
    pub took: Duration,
    /// Whether any memory went back to the system.
    pub released: bool,
}

/// Calls `trim` (the daemon: [`trim`]) on the blocking pool after each
/// batch of run ends (`run_ends`, the event bus's subscription), at most
/// once per `every`, until `stop`.
pub fn spawn(
    mut run_ends: watch::Receiver<u64>,
    every: Duration,
    stop: CancellationToken,
    trim: impl Fn() -> Trimmed + Send + Sync + 'static,
) -> tokio::task::JoinHandle<()> {
    let trim = Arc::new(trim);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                changed = run_ends.changed() => if changed.is_err() { return },
                () = stop.cancelled() => return,
            }
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                () = stop.cancelled() => return,
            }
            // The runs that ended during the wait are trimmed after by
            // this trim: marked seen, they do not ask for another.
            run_ends.borrow_and_update();
            let trim = trim.clone();
            match tokio::task::spawn_blocking(move || trim()).await {
                Ok(t) => tracing::debug!(
                    took_us = t.took.as_micros() as u64,
                    released = t.released,
                    "heap trimmed"
                ),
                Err(e) => tracing::warn!(error = %e, "the heap trim failed"),
            }
        }
    })
}

/// Returns the free pages of every malloc arena to the kernel (nothing
/// where [`SUPPORTED`] is false).
pub fn trim() -> Trimmed {
    let started = std::time::Instant::now();
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only touches the allocator's own state, under
    // its locks; 0 keeps no padding at the top of the main arena.
    let released = unsafe { libc::malloc_trim(0) } == 1;
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let released = false;
    Trimmed {
        took: started.elapsed(),
        released,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::DaemonEvent;
    use crate::daemon::event_bus::EventBus;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Instant;

    /// Resident bytes of this process (`/proc/self/statm`, in pages).
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn resident() -> u64 {
        let statm = std::fs::read_to_string("/proc/self/statm").expect("statm");
        let pages: u64 = statm
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse().ok())
            .expect("resident pages");
        // SAFETY: sysconf has no preconditions.
        pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64
    }

    /// What the module is for: memory freed between chunks still held
    /// stays resident (free() can return only an arena's top), until a
    /// trim gives its whole pages back. Every other chunk is freed, so the
    /// holes stay holes whatever state the arena was in (other tests share
    /// the process and its arenas). The process's RSS is read while other
    /// tests run: the margin is a third of what was freed, of which a trim
    /// can return three pages in four (a hole's fourth holds its header).
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn a_trim_returns_what_was_freed_between_live_chunks() {
        const CHUNK: usize = 16 << 10; // below the mmap threshold: from an arena
        const FREED: usize = 64 << 20;
        let (before, after, trimmed) = std::thread::spawn(|| {
            let mut chunks: Vec<Option<Vec<u8>>> = (0..2 * FREED / CHUNK)
                .map(|i| Some(vec![i as u8 | 1; CHUNK]))
                .collect();
            for chunk in chunks.iter_mut().step_by(2) {
                *chunk = None;
            }
            let before = resident();
            let trimmed = trim();
            let after = resident();
            drop(chunks);
            (before, after, trimmed)
        })
        .join()
        .expect("the allocating thread");
        assert!(trimmed.released, "{trimmed:?}");
        assert!(
            before.saturating_sub(after) >= (FREED / 3) as u64,
            "a trim gave back {} bytes of the {FREED} freed (resident {before} -> {after})",
            before.saturating_sub(after)
        );
    }

    fn ended(id: &str) -> DaemonEvent {
        DaemonEvent::RunEnded {
            run_id: id.into(),
            agent: "a".into(),
            outcome: crate::agent::Outcome::Finished,
        }
    }

    /// Waits (up to 10 s, for a loaded machine) until `trims` reaches `n`.
    async fn reaches(trims: &AtomicU64, n: u64) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while trims.load(Ordering::SeqCst) < n {
            assert!(
                Instant::now() < deadline,
                "{} trims, not {n}",
                trims.load(Ordering::SeqCst)
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Trims follow run ends only; the ends of one batch share a trim,
    /// those that come while it waits included; a later end gets a later
    /// trim.
    #[tokio::test]
    async fn trims_once_per_batch_of_run_ends_and_never_otherwise() {
        let bus = EventBus::default();
        let trims = Arc::new(AtomicU64::new(0));
        let stop = CancellationToken::new();
        let counted = trims.clone();
        let every = Duration::from_millis(200);
        let task = spawn(bus.subscribe_run_ends(), every, stop.clone(), move || {
            counted.fetch_add(1, Ordering::SeqCst);
            Trimmed {
                took: Duration::ZERO,
                released: true,
            }
        });

        bus.publish(DaemonEvent::RunCreated {
            run_id: "r0".into(),
            agent: "a".into(),
        });
        tokio::time::sleep(every * 3).await;
        assert_eq!(trims.load(Ordering::SeqCst), 0, "no run ended");

        bus.publish(ended("r1"));
        bus.publish(ended("r2"));
        // While the task waits to trim: the same trim covers it.
        tokio::time::sleep(every / 2).await;
        bus.publish(ended("r3"));
        reaches(&trims, 1).await;
        tokio::time::sleep(every * 3).await;
        assert_eq!(trims.load(Ordering::SeqCst), 1, "three ends, one trim");

        bus.publish(ended("r4"));
        reaches(&trims, 2).await;

        stop.cancel();
        task.await.expect("the trim task ends when stopped");
    }
}
