//! Gives the heap's free pages back to the system once runs have ended.
//!
//! Why: glibc's malloc returns memory to the kernel only from the top of
//! each arena. What a run frees (its transcript, its event log, its
//! plugin instances' host state, its HTTP buffers) mostly lands in holes
//! below memory something else still holds, and those pages stay resident
//! for good: under `cargo bench --bench daemon` (1000 runs at once) the
//! daemon held 199 MiB once every run had ended, against 53 MiB before the
//! burst, although nothing lived in most of it. `malloc_trim` hands the
//! pages of free chunks back (`MADV_DONTNEED`) and leaves the chunks in the
//! allocator's free lists, so a later burst reuses them for the price of a
//! page fault each.
//!
//! When: only after runs have ended (nothing is freed in bulk otherwise),
//! at most once per [`TRIM_EVERY`]. An idle daemon never trims; a busy one
//! trims once a second. A trim walks every arena under its lock, so
//! allocations on the thread it is trimming wait meanwhile (6-11 ms with a
//! thousand runs' worth freed); it runs on the blocking pool, not on a
//! runtime worker. Measured under the bench above: the CPU per step moves
//! by less than the machine's noise, and 2 s after the runs' end the daemon
//! holds 149-160 MiB, not 196-203. The peak is not lowered: at the peak
//! the memory is in use.
//!
//! On a C library other than glibc (musl, say) there is nothing to trim
//! this way and the task is not started.

use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The least time between two trims, and how long a trim waits after the
/// first run end that asks for it, so that the runs ending together are
/// trimmed after once.
pub const TRIM_EVERY: Duration = Duration::from_secs(1);

/// Trims after each batch of run ends (`run_ends`, the event bus's
/// subscription) until `stop`. `trimmed` is told each trim (the tests
/// count them).
pub fn spawn(
    mut run_ends: watch::Receiver<u64>,
    every: Duration,
    stop: CancellationToken,
    trimmed: impl Fn() + Send + 'static,
) -> Option<tokio::task::JoinHandle<()>> {
    if !SUPPORTED {
        return None;
    }
    Some(tokio::spawn(async move {
        loop {
            tokio::select! {
                changed = run_ends.changed() => if changed.is_err() { return },
                () = stop.cancelled() => return,
            }
            // The runs ending meanwhile are trimmed after by this one trim.
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                () = stop.cancelled() => return,
            }
            run_ends.borrow_and_update();
            match tokio::task::spawn_blocking(trim).await {
                Ok(took) => tracing::debug!(took_us = took.as_micros() as u64, "heap trimmed"),
                Err(e) => tracing::warn!(error = %e, "the heap trim failed"),
            }
            trimmed();
        }
    }))
}

/// Whether this build can trim (glibc).
pub const SUPPORTED: bool = cfg!(all(target_os = "linux", target_env = "gnu"));

/// Returns the free pages of every malloc arena to the kernel; how long it
/// took.
pub fn trim() -> Duration {
    let started = std::time::Instant::now();
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only touches the allocator's own state, under
    // its locks; 0 keeps no padding at the top of the main arena.
    unsafe {
        libc::malloc_trim(0);
    }
    started.elapsed()
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;
    use crate::api::DaemonEvent;
    use crate::daemon::event_bus::EventBus;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    /// Resident bytes of this process (`/proc/self/statm`, in pages).
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

    /// What the module is for: memory freed below a live chunk stays
    /// resident until a trim, which gives it back.
    #[test]
    fn a_trim_returns_what_was_freed_below_a_live_chunk() {
        const CHUNK: usize = 16 << 10; // below the mmap threshold: from an arena
        const TOTAL: usize = 96 << 20;
        let (before, after) = std::thread::spawn(|| {
            let mut chunks: Vec<Vec<u8>> =
                (0..TOTAL / CHUNK).map(|i| vec![i as u8; CHUNK]).collect();
            // Held, above the freed chunks, so that free() cannot return
            // them from the arena's top by itself.
            let guard = vec![1u8; CHUNK];
            chunks.clear();
            chunks.shrink_to_fit();
            let before = resident();
            trim();
            let after = resident();
            drop(guard);
            (before, after)
        })
        .join()
        .expect("the allocating thread");
        assert!(
            before.saturating_sub(after) >= (TOTAL / 2) as u64,
            "a trim gave back {} bytes of the {TOTAL} freed (resident {before} -> {after})",
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

    async fn count_after(trims: &AtomicU64, wait: Duration) -> u64 {
        tokio::time::sleep(wait).await;
        trims.load(Ordering::SeqCst)
    }

    /// Trims follow run ends only, and the ends of one batch share a trim.
    #[tokio::test]
    async fn trims_once_per_batch_of_run_ends_and_never_otherwise() {
        let bus = EventBus::default();
        let trims = Arc::new(AtomicU64::new(0));
        let stop = CancellationToken::new();
        let counted = trims.clone();
        let every = Duration::from_millis(100);
        let task = spawn(bus.subscribe_run_ends(), every, stop.clone(), move || {
            counted.fetch_add(1, Ordering::SeqCst);
        })
        .expect("glibc can trim");

        bus.publish(DaemonEvent::RunCreated {
            run_id: "r0".into(),
            agent: "a".into(),
        });
        assert_eq!(count_after(&trims, every * 4).await, 0, "no run ended");

        for i in 0..5 {
            bus.publish(ended(&format!("r{i}")));
        }
        assert_eq!(
            count_after(&trims, every * 4).await,
            1,
            "five ends, one trim"
        );

        bus.publish(ended("r5"));
        assert_eq!(
            count_after(&trims, every * 4).await,
            2,
            "a later end, a later trim"
        );

        stop.cancel();
        task.await.expect("the trim task ends when stopped");
    }
}
