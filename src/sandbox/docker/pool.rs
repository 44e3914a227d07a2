//! The warm pool: containers created and started ahead of runs, each with
//! its shell session open, so a run's first command does not wait ~110 ms
//! for a container and ~60 ms for the shell's exec.
//!
//! Isolation is unchanged: a pooled container is made exactly as a run's
//! would be (image, limits, user, work dir), is handed to one run only, and
//! is removed with that run like any other. It never returns to the pool.
//!
//! One pool per provider configuration: a `[sandbox]` change (SIGHUP)
//! makes a new pool and drains the old one, whose containers were made
//! with the old settings. Pooled containers carry the owner label, so the
//! reaper at the next start removes those a dead daemon left.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::Notify;

use super::container::{self, Container, Made};
use super::exec::Target;
use super::leftovers;
use super::provider::Shared;
use super::shell::Shell;
use crate::sandbox::{PoolStatus, SandboxError};
use crate::sync::LockExt;

/// The first wait after a failed refill; doubled up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// An engine that stays down is retried this often: the pool is back
/// within this long of the engine.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// What bounds a pool by its engine's capacity: the fleet counts pooled
/// containers against `max_containers` with the runs it placed there. The
/// sandbox layer defines what it needs; the fleet implements it.
pub trait PoolRoom: Send + Sync {
    /// Reserves room for one more pooled container; false: the engine is
    /// full (the pool waits and asks again).
    fn reserve(&self) -> bool;
    /// Gives back the room of a pooled container that left the pool: taken
    /// by a run (whose own slot now counts it), removed, or never made.
    fn release(&self);
    /// A pooled container is ready: a run waiting for room may take it.
    fn ready(&self) {}
}

/// How long a pool whose engine is full waits before asking for room
/// again (a freed slot also wakes it through `take` or a drain).
const ROOM_RECHECK: Duration = Duration::from_millis(500);

/// A container waiting for a run, with its shell.
pub(crate) struct Warm {
    pub(crate) container: Container,
    pub(crate) shell: Shell,
}

pub(crate) struct Pool {
    target: usize,
    /// The `agentd.pool` label of this pool's containers.
    pub(crate) id: String,
    ready: Mutex<VecDeque<Warm>>,
    /// Taken out of `ready` with a dead shell: the container may still
    /// run (its PID 1 is the keep-alive, not the shell), so the refill task
    /// removes it.
    dead: Mutex<Vec<Warm>>,
    creating: AtomicUsize,
    /// Containers handed to runs since the pool was made.
    served: std::sync::atomic::AtomicU64,
    /// Set by [`Pool::drain`]: no more containers are made or handed out.
    closed: AtomicBool,
    /// Set once the refill task runs: a provider that is never started
    /// (`run --local`, doctor) has an empty, inert pool.
    started: AtomicBool,
    /// Wakes the refill task: a container was taken, or the pool closed.
    wake: Notify,
    last_error: Mutex<Option<String>>,
    room: Option<Arc<dyn PoolRoom>>,
}

impl Pool {
    pub(crate) fn new(target: usize, room: Option<Arc<dyn PoolRoom>>) -> Pool {
        let id = uuid::Uuid::new_v4().simple().to_string();
        Pool {
            target,
            id: id[..12].to_string(),
            ready: Mutex::new(VecDeque::new()),
            dead: Mutex::new(Vec::new()),
            creating: AtomicUsize::new(0),
            served: std::sync::atomic::AtomicU64::new(0),
            closed: AtomicBool::new(false),
            started: AtomicBool::new(false),
            wake: Notify::new(),
            last_error: Mutex::new(None),
            room,
        }
    }

    fn release_room(&self, n: usize) {
        if let Some(room) = &self.room {
            for _ in 0..n {
                room.release();
            }
        }
    }

    pub(crate) fn status(&self) -> PoolStatus {
        PoolStatus {
            target: if self.started.load(Ordering::Relaxed) {
                self.target
            } else {
                0
            },
            // A dead shell's container cannot serve a run: not `ready`,
            // which placement credits as free.
            ready: self
                .ready
                .lock_unpoisoned()
                .iter()
                .filter(|w| w.shell.is_alive())
                .count(),
            creating: self.creating.load(Ordering::Relaxed),
            served: self.served.load(Ordering::Relaxed),
            last_error: self.last_error.lock_unpoisoned().clone(),
        }
    }

    /// A ready container for a run, if there is one whose shell is still
    /// alive. One whose shell ended (its container killed behind agentd's
    /// back, or just the shell's exec) is set aside for the refill task to
    /// remove, and the next tried.
    pub(crate) fn take(&self) -> Option<Warm> {
        if self.closed.load(Ordering::Acquire) {
            return None;
        }
        let taken = {
            let mut ready = self.ready.lock_unpoisoned();
            loop {
                match ready.pop_front() {
                    None => break None,
                    Some(w) if w.shell.is_alive() => break Some(w),
                    Some(w) => {
                        tracing::warn!(container = %w.container.name, "a pooled container's shell ended while it waited; removing it");
                        self.dead.lock_unpoisoned().push(w);
                    }
                }
            }
        };
        if taken.is_some() {
            self.served.fetch_add(1, Ordering::Relaxed);
            self.release_room(1);
        }
        self.wake.notify_one();
        taken
    }

    /// Starts the task that keeps `target` containers ready. It holds the
    /// provider's state weakly and ends when the pool is drained or the
    /// state dropped. Needs a Tokio runtime.
    pub(crate) fn start(shared: &Arc<Shared>) {
        let pool = shared.pool.clone();
        if pool.target == 0 || pool.started.swap(true, Ordering::AcqRel) {
            return;
        }
        let weak = Arc::downgrade(shared);
        tokio::spawn(refill(weak, pool));
    }

    /// Closes the pool and removes its ready containers. A creation in
    /// flight removes its container itself when it sees the pool closed.
    pub(crate) async fn drain(&self, shared: &Shared) -> usize {
        self.close();
        // A creation in flight removes its container itself once it sees
        // the pool closed; waiting for it means nothing is left running
        // when a stopping daemon's last reap comes next.
        let deadline = tokio::time::Instant::now() + leftovers::REMOVE_TIMEOUT;
        while self.creating.load(Ordering::Acquire) > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let mut warm: Vec<Warm> = self.ready.lock_unpoisoned().drain(..).collect();
        warm.append(&mut self.dead.lock_unpoisoned());
        if warm.is_empty() {
            return 0;
        }
        let Ok(docker) = shared.docker().await else {
            self.release_room(warm.len());
            return 0;
        };
        let mut removed = 0;
        for w in warm {
            w.shell.close();
            if leftovers::remove(&shared.leftovers, &docker, &w.container).await {
                removed += 1;
            }
            // Only once it is gone (or given up on): the engine holds it
            // until then, and a new pool must not take its room before.
            self.release_room(1);
        }
        tracing::info!(pool = %self.id, removed, "drained the warm pool");
        removed
    }

    /// Stops the refill task without removing anything (the state that
    /// owns the pool is going away).
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.wake.notify_one();
    }

    fn is_full(&self) -> bool {
        self.ready.lock_unpoisoned().len() + self.creating.load(Ordering::Acquire) >= self.target
    }

    fn set_error(&self, e: Option<&SandboxError>) {
        let mut last = self.last_error.lock_unpoisoned();
        match (e, last.is_some()) {
            (Some(e), false) => {
                tracing::warn!(pool = %self.id, error = %e, "cannot fill the warm pool; runs create their own containers meanwhile")
            }
            (None, true) => tracing::info!(pool = %self.id, "the warm pool fills again"),
            _ => {}
        }
        *last = e.map(ToString::to_string);
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let left = self.ready.lock_unpoisoned().len();
        if left > 0 {
            tracing::debug!(pool = %self.id, left, "pool dropped undrained; the reaper removes its containers");
        }
    }
}

/// Keeps the pool at its target, one creation at a time (a burst of runs
/// creates its own containers concurrently; the pool only has to be back
/// by the next burst). Failures back off, so an engine that is down costs
/// one probe per [`MAX_BACKOFF`].
async fn refill(shared: Weak<Shared>, pool: Arc<Pool>) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        if pool.closed.load(Ordering::Acquire) {
            return;
        }
        let dead: Vec<Warm> = pool.dead.lock_unpoisoned().drain(..).collect();
        if !dead.is_empty() {
            let s = shared.upgrade();
            let docker = match &s {
                Some(s) => s.docker().await.ok(),
                None => None,
            };
            for w in dead {
                if let (Some(s), Some(docker)) = (&s, &docker) {
                    leftovers::remove(&s.leftovers, docker, &w.container).await;
                }
                pool.release_room(1);
            }
        }
        if pool.is_full() {
            pool.wake.notified().await;
            continue;
        }
        if pool.room.as_ref().is_some_and(|room| !room.reserve()) {
            tokio::select! {
                _ = tokio::time::sleep(ROOM_RECHECK) => {}
                _ = pool.wake.notified() => {}
            }
            continue;
        }
        let Some(s) = shared.upgrade() else {
            pool.release_room(1);
            return;
        };
        pool.creating.fetch_add(1, Ordering::AcqRel);
        // Counted first, then checked: a drain that closed the pool in
        // between either sees this creation and waits for it, or is seen
        // here, and nothing is made after its last look.
        if pool.closed.load(Ordering::Acquire) {
            pool.creating.fetch_sub(1, Ordering::AcqRel);
            pool.release_room(1);
            return;
        }
        let made = warm(&s, &pool).await;
        match made {
            Ok(w) => {
                pool.set_error(None);
                backoff = FIRST_BACKOFF;
                // Pushed under the lock `drain` takes, after checking it has
                // not closed: a container made while draining is removed
                // here, never left in a pool nobody reads.
                let orphan = {
                    let mut ready = pool.ready.lock_unpoisoned();
                    if pool.closed.load(Ordering::Acquire) {
                        Some(w)
                    } else {
                        tracing::debug!(container = %w.container.name, "pooled container ready");
                        ready.push_back(w);
                        None
                    }
                };
                pool.creating.fetch_sub(1, Ordering::AcqRel);
                if orphan.is_none() {
                    if let Some(room) = &pool.room {
                        room.ready();
                    }
                }
                if let Some(w) = orphan {
                    if let Ok(docker) = s.docker().await {
                        leftovers::remove(&s.leftovers, &docker, &w.container).await;
                    }
                    pool.release_room(1);
                }
            }
            Err(e) => {
                pool.creating.fetch_sub(1, Ordering::AcqRel);
                pool.release_room(1);
                pool.set_error(Some(&e));
                drop(s);
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = pool.wake.notified() => {}
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// One container for the pool, started, with its shell open.
async fn warm(s: &Shared, pool: &Pool) -> Result<Warm, SandboxError> {
    let docker = s.docker().await?;
    let ids = s.ids(&docker).await?;
    let slot = format!("pool-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let c = container::create(
        &docker,
        &s.config,
        &s.limits,
        ids,
        Made {
            run_id: &slot,
            owner: &s.owner_label,
            pool: Some(&pool.id),
            engine: &s.engine,
        },
    )
    .await?;
    let t = Target {
        docker: &docker,
        container: &c.id,
        user: &c.exec_user,
    };
    match Shell::started(t, &s.config.work_dir).await {
        Ok(shell) => Ok(Warm {
            container: c,
            shell,
        }),
        Err(e) => {
            leftovers::remove(&s.leftovers, &docker, &c).await;
            let (e, _) = e.classify(&s.engine, &c.name);
            Err(SandboxError::Unavailable(format!(
                "cannot start the shell of a pooled container: {e}"
            )))
        }
    }
}
