//! Which engine a run's sandbox goes to, and the slots that bound each
//! engine: the reachable engine with the most free capacity, weighted,
//! wins; a run finding every reachable engine full waits until a slot is
//! freed or an engine rejoins.
//!
//! A [`Slot`] is only ever made under the board's lock and gives itself
//! back on drop, so a run cancelled while it waits (its future dropped)
//! or ended without `destroy` cannot leak one.

use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{watch, Notify};

use crate::sync::LockExt;

/// One engine's line on the board.
#[derive(Debug)]
pub(crate) struct Seat {
    /// `None`: unbounded (the default engine).
    pub(crate) capacity: Option<usize>,
    pub(crate) weight: f64,
    /// Sandboxes placed here and not yet freed.
    pub(crate) placed: usize,
    /// Containers the engine's warm pool holds or is making for no run
    /// yet: they count against `capacity` too.
    pub(crate) pooled: usize,
    pub(crate) reachable: bool,
    /// Whether `reachable` decides placement: false for the implicit single
    /// engine, whose runs meet a down engine at first use as they always
    /// did (and wait for a restarting one), rather than being refused on a
    /// probe up to two seconds old.
    follow_health: bool,
    /// What the last failed probe said; kept after the engine rejoins, for
    /// status.
    pub(crate) last_error: Option<String>,
}

impl Seat {
    pub(crate) fn new(capacity: Option<usize>, weight: f64, follow_health: bool) -> Self {
        Seat {
            capacity,
            weight,
            follow_health,
            placed: 0,
            pooled: 0,
            // Until the first probe says otherwise: a run placed on an
            // engine that turns out to be down gets its error at first use,
            // as with a single engine.
            reachable: true,
            last_error: None,
        }
    }

    fn placeable(&self) -> bool {
        self.reachable || !self.follow_health
    }

    /// Free slots times weight; `None` when the engine cannot take a run.
    /// `ready` pooled containers count as free for a run (it takes one,
    /// and the engine holds no more than before).
    fn score(&self, ready: usize) -> Option<f64> {
        if !self.placeable() {
            return None;
        }
        let free = match self.capacity {
            None => f64::from(u32::MAX),
            Some(c) => {
                // `c + ready - placed - pooled`: a take moves one container
                // from pooled to placed and one ready away, leaving this as
                // it was, so a ready container is credited to one run only
                // even while runs placed on it have not taken it yet.
                let held = self.placed + self.pooled;
                let free = (c + ready.min(self.pooled)).saturating_sub(held);
                if free == 0 {
                    return None;
                }
                free as f64
            }
        };
        Some(free * self.weight)
    }
}

/// The index of the engine a new run goes to: the highest score, the
/// earliest listed on a tie. `ready[i]`: pooled containers ready on engine
/// `i` (missing: none).
pub(crate) fn choose(seats: &[Seat], ready: &[usize]) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (i, seat) in seats.iter().enumerate() {
        if let Some(score) = seat.score(ready.get(i).copied().unwrap_or(0)) {
            if best.is_none_or(|(_, b)| score > b) {
                best = Some((i, score));
            }
        }
    }
    best.map(|(i, _)| i)
}

/// Why a run could not be placed and will not wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NoEngine(pub(crate) String);

/// The engines' seats, shared by the fleet, its health task and every
/// sandbox it made.
pub(crate) struct Board {
    seats: Mutex<Vec<Seat>>,
    names: Vec<String>,
    /// Woken when a slot is freed, an engine rejoins or a pooled container
    /// is ready.
    changed: Notify,
    /// Runs waiting for a slot: while there are any, pools do not grow
    /// (runs come first).
    waiting: std::sync::atomic::AtomicUsize,
    /// Per engine: whether it is reachable, for sandboxes racing a call
    /// against their engine failing.
    up: Vec<watch::Sender<bool>>,
}

impl Board {
    pub(crate) fn new(names: Vec<String>, seats: Vec<Seat>) -> Arc<Self> {
        let up = seats
            .iter()
            .map(|s| watch::channel(s.reachable).0)
            .collect();
        Arc::new(Board {
            seats: Mutex::new(seats),
            names,
            changed: Notify::new(),
            waiting: std::sync::atomic::AtomicUsize::new(0),
            up,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Seat>> {
        // A panic while holding this lock leaves plain counters behind;
        // they are still the best account there is.
        self.seats.lock_unpoisoned()
    }

    pub(crate) fn name(&self, index: usize) -> &str {
        self.names.get(index).map_or("?", String::as_str)
    }

    /// A slot now, `Ok(None)` when every reachable engine is full, or why
    /// no engine can take it at all.
    pub(crate) fn try_place(self: &Arc<Self>, ready: &[usize]) -> Result<Option<Slot>, NoEngine> {
        let mut seats = self.lock();
        if let Some(index) = choose(&seats, ready) {
            seats[index].placed += 1;
            return Ok(Some(Slot {
                board: self.clone(),
                index,
            }));
        }
        if seats.iter().any(Seat::placeable) {
            return Ok(None);
        }
        let why: Vec<String> = seats
            .iter()
            .enumerate()
            .map(|(i, s)| {
                format!(
                    "engine {}: {}",
                    self.name(i),
                    s.last_error.as_deref().unwrap_or("unreachable")
                )
            })
            .collect();
        Err(NoEngine(format!(
            "no engine is reachable ({})",
            why.join("; ")
        )))
    }

    /// A slot, waiting while every reachable engine is full. Dropping the
    /// future gives nothing back because it holds nothing.
    pub(crate) async fn place(
        self: &Arc<Self>,
        ready: impl Fn() -> Vec<usize>,
    ) -> Result<Slot, NoEngine> {
        let mut logged = false;
        let mut waiter: Option<Waiting<'_>> = None;
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before looking, so a slot freed in between wakes us.
            changed.as_mut().enable();
            if let Some(slot) = self.try_place(&ready())? {
                return Ok(slot);
            }
            waiter.get_or_insert_with(|| Waiting::new(&self.waiting));
            if !logged {
                tracing::info!(
                    "every reachable engine is full; the run's sandbox waits for a slot"
                );
                logged = true;
            }
            changed.await;
        }
    }

    /// Records a probe's answer; returns whether reachability changed.
    pub(crate) fn set_health(&self, index: usize, probe: Result<(), String>) -> bool {
        let mut seats = self.lock();
        let Some(seat) = seats.get_mut(index) else {
            return false;
        };
        let was = seat.reachable;
        seat.reachable = probe.is_ok();
        if let Err(e) = probe {
            seat.last_error = Some(e);
        }
        let now = seat.reachable;
        drop(seats);
        if was != now {
            if let Some(up) = self.up.get(index) {
                up.send_replace(now);
            }
            // A rejoined engine has room; a lost one may leave waiters with
            // no reachable engine at all, who must hear it too.
            self.changed.notify_waiters();
        }
        was != now
    }

    pub(crate) fn reachable(&self, index: usize) -> bool {
        self.lock().get(index).is_some_and(|s| s.reachable)
    }

    pub(crate) fn last_error(&self, index: usize) -> Option<String> {
        self.lock().get(index).and_then(|s| s.last_error.clone())
    }

    /// Resolves once engine `index` is marked unreachable.
    pub(crate) async fn went_down(&self, index: usize) {
        let Some(up) = self.up.get(index) else {
            return std::future::pending().await;
        };
        let mut rx = up.subscribe();
        if rx.wait_for(|up| !*up).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// (containers: placed and pooled, capacity, reachable, last error)
    /// per engine, for status.
    pub(crate) fn snapshot(&self) -> Vec<(usize, Option<usize>, bool, Option<String>)> {
        self.lock()
            .iter()
            .map(|s| {
                (
                    s.placed + s.pooled,
                    s.capacity,
                    s.reachable,
                    s.last_error.clone(),
                )
            })
            .collect()
    }

    /// Reserves room for a pooled container on engine `index`; none while
    /// a run waits for a slot.
    fn reserve_pooled(&self, index: usize) -> bool {
        if self.waiting.load(std::sync::atomic::Ordering::Acquire) > 0 {
            return false;
        }
        let mut seats = self.lock();
        let Some(seat) = seats.get_mut(index) else {
            return false;
        };
        if seat
            .capacity
            .is_some_and(|c| seat.placed + seat.pooled >= c)
        {
            return false;
        }
        seat.pooled += 1;
        true
    }

    fn release_pooled(&self, index: usize) {
        self.give_back(index, |seat| &mut seat.pooled);
    }

    fn free(&self, index: usize) {
        self.give_back(index, |seat| &mut seat.placed);
    }

    /// One less of what `count` picks on engine `index`; waiters hear of
    /// the room.
    fn give_back(&self, index: usize, count: impl FnOnce(&mut Seat) -> &mut usize) {
        if let Some(seat) = self.lock().get_mut(index) {
            let n = count(seat);
            *n = n.saturating_sub(1);
        }
        self.changed.notify_waiters();
    }
}

/// Counts a run among the waiters while it waits; a dropped (cancelled)
/// waiter stops counting.
struct Waiting<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(count: &'a std::sync::atomic::AtomicUsize) -> Self {
        count.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Waiting(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// Engine `index`'s room for its warm pool: pooled containers count
/// against `max_containers` with the runs placed there.
pub(crate) struct EngineRoom {
    pub(crate) board: Arc<Board>,
    pub(crate) index: usize,
}

impl crate::sandbox::docker::PoolRoom for EngineRoom {
    fn reserve(&self) -> bool {
        self.board.reserve_pooled(self.index)
    }

    fn release(&self) {
        self.board.release_pooled(self.index);
    }

    fn ready(&self) {
        self.board.changed.notify_waiters();
    }
}

/// One run's place on one engine; freed when dropped.
pub(crate) struct Slot {
    board: Arc<Board>,
    index: usize,
}

impl Slot {
    pub(crate) fn index(&self) -> usize {
        self.index
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.board.free(self.index);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn board(seats: &[(usize, f64)]) -> Arc<Board> {
        Board::new(
            (0..seats.len()).map(|i| format!("e{i}")).collect(),
            seats
                .iter()
                .map(|&(c, w)| Seat::new(Some(c), w, true))
                .collect(),
        )
    }

    fn placed(b: &Board) -> Vec<usize> {
        b.snapshot().iter().map(|s| s.0).collect()
    }

    #[test]
    fn the_most_free_capacity_wins_weighted() {
        let b = board(&[(2, 1.0), (4, 1.0)]);
        let mut slots = Vec::new();
        for _ in 0..6 {
            slots.push(b.try_place(&[]).expect("reachable").expect("room"));
        }
        assert_eq!(placed(&b), vec![2, 4]);
        assert!(b.try_place(&[]).expect("reachable").is_none(), "all full");

        // Weight 3 on the smaller engine: 2 free * 3 beats 4 free * 1.
        let b = board(&[(2, 3.0), (4, 1.0)]);
        let first = b.try_place(&[]).expect("reachable").expect("room");
        assert_eq!(first.index(), 0);
        let second = b.try_place(&[]).expect("reachable").expect("room");
        assert_eq!(second.index(), 1, "1 free * 3 < 4 free * 1");
        drop((first, second));
        assert_eq!(placed(&b), vec![0, 0], "slots freed on drop");
    }

    #[test]
    fn an_unreachable_engine_takes_nothing_and_rejoins() {
        let b = board(&[(4, 1.0), (4, 1.0)]);
        assert!(b.set_health(1, Err("connection refused".into())));
        let s: Vec<_> = (0..4)
            .map(|_| b.try_place(&[]).expect("one reachable").expect("room"))
            .collect();
        assert!(s.iter().all(|s| s.index() == 0));
        assert!(b.try_place(&[]).expect("one reachable").is_none());
        assert!(b.set_health(1, Ok(())));
        assert_eq!(b.try_place(&[]).expect("ok").expect("room").index(), 1);
        assert_eq!(b.last_error(1).as_deref(), Some("connection refused"));

        b.set_health(0, Err("gone".into()));
        b.set_health(1, Err("down".into()));
        let e = b.try_place(&[]).err().expect("nothing reachable");
        assert!(
            e.0.contains("engine e0: gone") && e.0.contains("engine e1: down"),
            "{e:?}"
        );
    }

    #[tokio::test]
    async fn a_run_waits_for_a_freed_slot() {
        let b = board(&[(1, 1.0)]);
        let held = b.try_place(&[]).expect("ok").expect("room");
        let waiter = tokio::spawn({
            let b = b.clone();
            async move { b.place(Vec::new).await.map(|s| s.index()) }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "the engine is full");
        drop(held);
        let got = tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("woken by the freed slot")
            .expect("task");
        assert_eq!(got, Ok(0));
        assert_eq!(placed(&b), vec![0], "the waiter's slot was dropped with it");
    }

    #[tokio::test]
    async fn a_cancelled_waiter_leaks_no_slot() {
        let b = board(&[(1, 1.0)]);
        let held = b.try_place(&[]).expect("ok").expect("room");
        let waiting = tokio::time::timeout(Duration::from_millis(50), b.place(Vec::new)).await;
        assert!(waiting.is_err(), "it had to wait, and was dropped");
        drop(held);
        assert_eq!(placed(&b), vec![0]);
        let again = b.try_place(&[]).expect("ok").expect("the one slot is free");
        assert_eq!(again.index(), 0);
    }

    #[test]
    fn the_implicit_engine_is_placed_on_even_when_a_probe_failed() {
        let b = Board::new(vec!["local".into()], vec![Seat::new(None, 1.0, false)]);
        b.set_health(0, Err("restarting".into()));
        assert_eq!(
            b.try_place(&[]).expect("placeable").expect("room").index(),
            0
        );
    }

    #[tokio::test]
    async fn a_rejoining_engine_wakes_waiters() {
        let b = board(&[(1, 1.0), (1, 1.0)]);
        b.set_health(1, Err("down".into()));
        let _held = b.try_place(&[]).expect("ok").expect("room");
        let waiter = tokio::spawn({
            let b = b.clone();
            async move { b.place(Vec::new).await.map(|s| s.index()) }
        });
        tokio::task::yield_now().await;
        b.set_health(1, Ok(()));
        let got = tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("woken by the rejoin")
            .expect("task");
        assert_eq!(got, Ok(1));
    }

    #[test]
    fn a_ready_pooled_container_is_credited_to_one_run_only() {
        // An engine of 2 holding a pool of 2, both ready: two runs fit
        // (each takes one), a third placed before they took theirs must
        // wait rather than make a third container.
        let b = board(&[(2, 1.0)]);
        assert!(b.reserve_pooled(0) && b.reserve_pooled(0));
        assert!(!b.reserve_pooled(0), "the pool cannot pass the capacity");
        let first = b.try_place(&[2]).expect("reachable").expect("room");
        let second = b.try_place(&[2]).expect("reachable").expect("room");
        assert!(
            b.try_place(&[2]).expect("reachable").is_none(),
            "a third would be over"
        );
        // They take theirs: the pool gives its room to the runs.
        b.release_pooled(0);
        b.release_pooled(0);
        assert!(b.try_place(&[0]).expect("reachable").is_none());
        assert_eq!(b.snapshot()[0].0, 2, "two containers held");
        drop(first);
        assert!(
            b.reserve_pooled(0),
            "a freed slot is room for the pool again"
        );
        drop(second);
    }

    #[tokio::test]
    async fn a_waiting_run_comes_before_the_pool() {
        let b = board(&[(1, 1.0)]);
        let held = b.try_place(&[]).expect("ok").expect("room");
        let waiter = tokio::spawn({
            let b = b.clone();
            async move { b.place(Vec::new).await.map(|s| s.index()) }
        });
        while b.waiting.load(std::sync::atomic::Ordering::Acquire) == 0 {
            tokio::task::yield_now().await;
        }
        // One thread: the waiter cannot run between these two lines, so
        // the slot is free and a run is still waiting for it.
        drop(held);
        assert!(!b.reserve_pooled(0), "the pool took the waiting run's slot");
        assert_eq!(waiter.await.expect("join").expect("placed"), 0);
        assert_eq!(b.waiting.load(std::sync::atomic::Ordering::Acquire), 0);
    }
}
