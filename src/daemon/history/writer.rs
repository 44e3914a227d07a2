//! The one writer thread: it owns the read-write connection and applies the
//! queue in order, one transaction per batch.
//!
//! Why it is built this way:
//! - **The queue is bounded** ([`QUEUE_OPS`]): a producer that finds it full
//!   waits for the writer (backpressure; on a tokio worker it waits through
//!   `block_in_place`, so the other tasks of that worker keep running, see
//!   `History::send`). That wait is short, because the writer never waits
//!   for the disk while ops are queued: what it cannot commit goes to its
//!   own pending list and it keeps draining the queue.
//! - **A batch that does not commit is kept, not dropped.** When the disk is
//!   full or the file read-only, every write not yet committed stays in
//!   `pending` (in order, see `pending` for how a run's row writes are
//!   coalesced into one) and the whole list is tried again every
//!   [`RETRY_EVERY`], so a transcript gets no holes when the disk recovers.
//!   Pending writes are bounded by [`MAX_PENDING_BYTES`]; past that, new
//!   events and messages are dropped and counted (`write_errors`) until the
//!   disk recovers, while runs' rows are still kept, so that no run stays
//!   `running` because its end was dropped. While anything is pending the
//!   history reports itself unavailable, so the API refuses new runs
//!   (`503 history_unavailable`) instead of accepting runs it cannot record.
//! - **A write that is wrong by itself** (a constraint it breaks) is dropped
//!   and counted, and the rest of its batch still commits: retrying it could
//!   never succeed.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::{params, Connection, ErrorCode, OptionalExtension, TransactionBehavior};
use tokio::sync::oneshot;

use super::event_rows::{insert_one, EventRows};
use super::pending::{Pending, Push, MAX_PENDING_BYTES};
use super::write::{RunRow, Write};
use super::HistoryError;
use crate::agent::{Checkpoint, Outcome, RunEvent};
use crate::api::RunState;
use crate::sync::LockExt;

/// Most writes taken from the queue into one batch. Bounds how long a
/// `flush` behind a burst waits, while keeping commits (the expensive part)
/// rare under a flood of events.
const MAX_BATCH: usize = 8192;

/// Ops the queue between the daemon and the writer holds. Past it a
/// producer waits for the writer to take the next batch.
pub(super) const QUEUE_OPS: usize = 16_384;

/// While the writer is busy, commits start at most this often: the ops
/// that arrive in between wait in the queue and go in the next batch.
/// Each commit rewrites into the WAL every page it touches (under load, a
/// leaf of each table and index per run in the batch, 4 KiB each), so the
/// number of commits, not of rows, is what the history costs: measured under
/// `cargo bench --bench daemon`, committing every 1 ms put a quarter of the
/// daemon's CPU in the writer. This bounds the extra wait of a `flush` (a
/// step's checkpoint, a run's creation) to a few milliseconds, which a step
/// waiting on a model does not notice; an idle daemon commits at once.
const COMMIT_INTERVAL: Duration = Duration::from_millis(5);

/// How often pending writes are tried again while the disk refuses them.
pub(super) const RETRY_EVERY: Duration = Duration::from_secs(1);

/// The error recorded on runs found in flight at startup.
pub(super) const INTERRUPTED_ERROR: &str = "the daemon stopped while this run was in flight";

pub(super) enum Op {
    Write(Write),
    /// A live run's step, sent at once (`Staged`).
    Writes(Vec<Write>),
    /// Answered once every op before it is committed, or at once with why
    /// not (the history cannot be written now): the caller decides.
    Flush(oneshot::Sender<Result<(), String>>),
    /// Answered once every op before it is committed, however long the disk
    /// takes (or dropped if the daemon exits first).
    Settle(oneshot::Sender<()>),
    Prune {
        cutoff_ms: i64,
        reply: oneshot::Sender<Result<usize, HistoryError>>,
    },
    /// Tests change the writer's connection (e.g. `max_page_count`, to make
    /// SQLite answer "database or disk is full" without filling a disk).
    #[cfg(test)]
    Test(Box<dyn FnOnce(&Connection) + Send>),
    /// Tests ask how many writes are pending (to see them coalesced).
    #[cfg(test)]
    PendingWrites(oneshot::Sender<usize>),
}

/// Whether the history can be written now; shared by the writer (which
/// sets it) and the API (which refuses new runs while it cannot).
#[derive(Default)]
pub(super) struct Health {
    unavailable: Mutex<Option<String>>,
    /// Ops sent and not yet taken by the writer (the queue's depth, which
    /// `std::sync::mpsc` does not tell), for the metrics.
    queued: AtomicU64,
    /// Commits made, for tests that count them.
    #[cfg(test)]
    commits: AtomicU64,
}

impl Health {
    pub(super) fn queued(&self) -> u64 {
        self.queued.load(Ordering::Relaxed)
    }

    pub(super) fn sending(&self) {
        self.queued.fetch_add(1, Ordering::Relaxed);
    }

    /// `n` ops left the queue (taken by the writer, or never sent).
    pub(super) fn taken(&self, n: usize) {
        self.queued.fetch_sub(n as u64, Ordering::Relaxed);
    }

    #[cfg(test)]
    pub(super) fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    pub(super) fn reason(&self) -> Option<String> {
        self.unavailable.lock_unpoisoned().clone()
    }

    fn set(&self, reason: Option<String>) {
        *self.unavailable.lock_unpoisoned() = reason;
    }
}

pub(super) fn spawn(
    conn: Connection,
    path: PathBuf,
    rx: Receiver<Op>,
    errors: Arc<AtomicU64>,
    health: Arc<Health>,
) -> Result<JoinHandle<()>, HistoryError> {
    let db = path.clone();
    std::thread::Builder::new()
        .name("history-writer".to_string())
        .spawn(move || {
            Writer {
                conn,
                path: db,
                errors,
                health,
                pending: Pending::default(),
                settles: Vec::new(),
                last_attempt: None,
                dropped: 0,
                last_commit: Instant::now() - COMMIT_INTERVAL,
            }
            .run(rx)
        })
        .map_err(|e| HistoryError::Task {
            path,
            detail: format!("cannot start the writer thread: {e}"),
        })
}

struct Writer {
    conn: Connection,
    path: PathBuf,
    errors: Arc<AtomicU64>,
    health: Arc<Health>,
    /// Writes received and not yet committed.
    pending: Pending,
    /// `Settle`s waiting for `pending` to commit.
    settles: Vec<oneshot::Sender<()>>,
    /// When the last commit attempt failed; `None` while all is well.
    last_attempt: Option<Instant>,
    /// Events and messages dropped past [`MAX_PENDING_BYTES`] since the
    /// disk failed.
    dropped: u64,
    /// When the last commit began: the next one waits until
    /// [`COMMIT_INTERVAL`] has passed since.
    last_commit: Instant,
}

/// Errors that say the storage refused (full, read-only, locked, failing),
/// as opposed to one write being wrong: only these are worth retrying.
fn is_storage_error(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(
            ErrorCode::DiskFull
                | ErrorCode::SystemIoFailure
                | ErrorCode::ReadOnly
                | ErrorCode::CannotOpen
                | ErrorCode::DatabaseBusy
                | ErrorCode::DatabaseLocked
                | ErrorCode::FileLockingProtocolFailed
                | ErrorCode::OutOfMemory
                | ErrorCode::DatabaseCorrupt
                | ErrorCode::PermissionDenied
        )
    )
}

impl Writer {
    /// Returns when every sender is gone, after committing what they queued
    /// (a disconnected channel still yields what was sent before).
    fn run(mut self, rx: Receiver<Op>) {
        loop {
            let first = if self.pending.is_empty() {
                match rx.recv() {
                    Ok(op) => Some(op),
                    Err(_) => return,
                }
            } else {
                match rx.recv_timeout(RETRY_EVERY) {
                    Ok(op) => Some(op),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => {
                        self.attempt();
                        self.give_up();
                        return;
                    }
                }
            };
            // Group commit: while the writer is busy (it committed moments
            // ago), the batch waits for the ops right behind it, so that one
            // commit carries many runs' steps instead of one each. Sleeping
            // rather than waiting on the queue means a producer's send wakes
            // nobody meanwhile. An idle daemon commits at once.
            if first.is_some() {
                if let Some(wait) = COMMIT_INTERVAL.checked_sub(self.last_commit.elapsed()) {
                    std::thread::sleep(wait);
                }
            }
            let mut batch: Vec<Op> = first.into_iter().collect();
            while batch.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(op) => batch.push(op),
                    Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
                }
            }
            self.health.taken(batch.len());
            self.apply(batch);
        }
    }

    fn apply(&mut self, batch: Vec<Op>) {
        let mut flushes = Vec::new();
        let mut prunes = Vec::new();
        for op in batch {
            match op {
                Op::Write(write) => self.keep(write),
                Op::Writes(writes) => writes.into_iter().for_each(|w| self.keep(w)),
                Op::Flush(reply) => flushes.push(reply),
                Op::Settle(reply) => self.settles.push(reply),
                Op::Prune { cutoff_ms, reply } => prunes.push((cutoff_ms, reply)),
                #[cfg(test)]
                Op::Test(f) => {
                    f(&self.conn);
                    // A test that fixed the disk wants the retry now.
                    self.last_attempt = self.last_attempt.map(|_| Instant::now() - RETRY_EVERY);
                }
                #[cfg(test)]
                Op::PendingWrites(reply) => {
                    let _ = reply.send(self.pending.len());
                }
            }
        }
        // While the disk refuses, new ops do not each retry the whole
        // pending list (that could be 64 MiB per event): the timer does.
        let due = self
            .last_attempt
            .is_none_or(|at| at.elapsed() >= RETRY_EVERY);
        if !self.pending.is_empty() && due {
            self.attempt();
        }
        if self.pending.is_empty() {
            for reply in self.settles.drain(..) {
                let _ = reply.send(());
            }
        }
        let reason = self.health.reason();
        for reply in flushes {
            // The caller may have stopped waiting; that is fine.
            let _ = reply.send(match (&reason, self.pending.is_empty()) {
                (_, true) => Ok(()),
                (Some(r), false) => Err(r.clone()),
                (None, false) => Err("the writes before it are not committed yet".into()),
            });
        }
        for (cutoff_ms, reply) in prunes {
            let result = if self.pending.is_empty() {
                self.transact(|conn| prune(conn, cutoff_ms))
            } else {
                Err(HistoryError::Unavailable {
                    path: self.path.clone(),
                    reason: reason.clone().unwrap_or_default(),
                })
            };
            let _ = reply.send(result);
        }
    }

    /// Adds a write to `pending` (coalesced with its run's pending row
    /// write, or dropped past the pending bound while the disk refuses).
    fn keep(&mut self, write: Write) {
        let refusing = self.last_attempt.is_some();
        if self.pending.push(write, refusing) == Push::Dropped {
            self.count_dropped(1);
        }
    }

    /// Counts events and messages the pending bound dropped, and says so
    /// once per outage.
    fn count_dropped(&mut self, n: u64) {
        if n == 0 {
            return;
        }
        if self.dropped == 0 {
            tracing::error!(db = %self.path.display(), limit = MAX_PENDING_BYTES,
                pending_bytes = self.pending.bytes(),
                "run history: the writes waiting for the disk reached their limit; \
                 further events and messages are dropped until it can be written \
                 again (runs' rows are kept)");
        }
        self.dropped += n;
        self.errors.fetch_add(n, Ordering::Relaxed);
    }

    /// One transaction over everything pending. On success `pending` is
    /// empty and the history healthy; on a storage error everything stays
    /// pending and the history is unavailable, with the reason.
    fn attempt(&mut self) {
        let writes = self.pending.take();
        let mut bad = vec![false; writes.len()];
        let started = Instant::now();
        self.last_commit = started;
        let outcome = (|| -> rusqlite::Result<()> {
            self.conn.execute_batch("BEGIN IMMEDIATE")?;
            // A run's events go in as few rows as their seqs allow
            // (`event_rows`), after the other writes: within one
            // transaction the order between tables is not seen, and a run's
            // row is written by then. A write that reads or deletes events
            // (start-up recovery, a refused run) goes after the events
            // before it, as it always did.
            let mut events = EventRows::default();
            for (i, write) in writes.iter().enumerate() {
                if let Write::Event {
                    run_id,
                    seq,
                    at_ms,
                    json,
                } = write
                {
                    let seq = i64::try_from(*seq);
                    if seq.is_ok_and(|seq| events.gather(i, run_id, seq, *at_ms, json)) {
                        continue;
                    }
                } else if matches!(write, Write::Interrupt { .. } | Write::DeleteRun(_)) {
                    self.store_events(std::mem::take(&mut events), &mut bad)?;
                }
                match self.write(write) {
                    Ok(()) => {}
                    // Some errors (disk full, I/O) make SQLite roll the whole
                    // transaction back: then the batch is retried whole.
                    Err(e) if is_storage_error(&e) || self.conn.is_autocommit() => return Err(e),
                    Err(e) => {
                        bad[i] = true;
                        self.fail(1, format_args!("{}: {e}", write.describe()));
                    }
                }
            }
            self.store_events(events, &mut bad)?;
            self.conn.execute_batch("COMMIT")
        })();
        match outcome {
            Ok(()) => {
                crate::daemon::metrics::history_committed(started.elapsed());
                #[cfg(test)]
                self.health.commits.fetch_add(1, Ordering::Relaxed);
                if self.last_attempt.take().is_some() {
                    tracing::info!(db = %self.path.display(), committed = writes.len(),
                        dropped = self.dropped,
                        "run history: writable again; the writes kept meanwhile are committed");
                }
                self.dropped = 0;
                self.health.set(None);
            }
            Err(e) => {
                if !self.conn.is_autocommit() {
                    if let Err(e) = self.conn.execute_batch("ROLLBACK") {
                        tracing::error!(db = %self.path.display(), error = %e,
                            "run history: rollback after a failed commit failed");
                    }
                }
                if self.last_attempt.is_none() {
                    tracing::error!(db = %self.path.display(), error = %e,
                        pending = writes.len(),
                        "run history: cannot write; new runs are refused and the writes \
                         of runs in flight are kept until it can");
                }
                self.last_attempt = Some(Instant::now());
                self.health.set(Some(e.to_string()));
                let dropped = self.pending.restore(
                    writes
                        .into_iter()
                        .zip(bad)
                        .filter_map(|(w, bad)| (!bad).then_some(w))
                        .collect(),
                );
                self.count_dropped(dropped);
            }
        }
    }

    /// Inserts the rows of `events`. A row refused by itself (a
    /// constraint) is tried again one event a row, so that only the events
    /// wrong by themselves are marked in `bad` and counted, as any other
    /// write. `Err`: the storage refused, and the transaction is to be
    /// retried whole.
    fn store_events(&self, events: EventRows<'_>, bad: &mut [bool]) -> rusqlite::Result<()> {
        for row in events.rows() {
            let refused = match row.insert(&self.conn) {
                Ok(()) => continue,
                Err(e) if is_storage_error(&e) || self.conn.is_autocommit() => return Err(e),
                Err(e) => e,
            };
            if row.len() == 1 {
                row.writes().for_each(|i| bad[i] = true);
                self.fail(1, format_args!("{}: {refused}", row.describe()));
                continue;
            }
            for (i, seq, inserted) in row.insert_each(&self.conn) {
                match inserted {
                    Ok(()) => {}
                    Err(e) if is_storage_error(&e) || self.conn.is_autocommit() => return Err(e),
                    Err(e) => {
                        bad[i] = true;
                        self.fail(
                            1,
                            format_args!("appending event {seq} of run {}: {e}", row.run_id),
                        );
                    }
                }
            }
        }
        Ok(())
    }

    /// The daemon is exiting and the disk still refuses: what is pending is
    /// lost, and said so.
    fn give_up(&mut self) {
        if !self.pending.is_empty() {
            let lost = self.pending.len() as u64;
            self.fail(
                lost,
                format_args!("the daemon is exiting and these writes could not be committed"),
            );
        }
    }

    fn transact<T>(
        &mut self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, HistoryError> {
        let result = (|| {
            let tx = self
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let value = f(&tx)?;
            tx.commit()?;
            Ok(value)
        })();
        result.map_err(|source| HistoryError::Sqlite {
            path: self.path.clone(),
            source,
        })
    }

    fn write(&self, write: &Write) -> rusqlite::Result<()> {
        match write {
            Write::CreateRun { row, request } => create_run(&self.conn, row, request),
            Write::SaveRun { row, checkpoint } => save_run(&self.conn, row, checkpoint.as_ref()),
            Write::Event {
                run_id,
                seq,
                at_ms,
                json,
            } => {
                let seq = i64::try_from(*seq)
                    .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
                insert_one(&self.conn, run_id, seq, *at_ms, json)
            }
            Write::Message {
                run_id,
                index,
                json,
            } => self
                .conn
                .prepare_cached("INSERT INTO messages (run_id, idx, message) VALUES (?1, ?2, ?3)")?
                .execute(params![run_id, index, json.get()])
                .map(drop),
            Write::Checkpoint { run_id, checkpoint } => self
                .conn
                .prepare_cached(
                    "UPDATE runs SET checkpoint_steps = ?2, checkpoint_messages = ?3,
                         checkpoint_stuck = ?4
                     WHERE id = ?1",
                )?
                .execute(params![
                    run_id,
                    checkpoint.steps,
                    checkpoint.messages,
                    checkpoint.stuck_warning
                ])
                .map(drop),
            Write::DeleteRun(id) => self
                .conn
                .prepare_cached("DELETE FROM runs WHERE id = ?1")?
                .execute([id])
                .map(drop),
            Write::Interrupt { now_ms } => {
                let ids = interrupt(&self.conn, *now_ms)?;
                if !ids.is_empty() {
                    tracing::warn!(db = %self.path.display(), runs = ids.len(),
                        "marking runs left in flight by a previous daemon as interrupted");
                }
                Ok(())
            }
        }
    }

    fn fail(&self, count: u64, what: std::fmt::Arguments<'_>) {
        if count == 0 {
            return;
        }
        self.errors.fetch_add(count, Ordering::Relaxed);
        tracing::error!(db = %self.path.display(), lost_writes = count, "run history: {what}");
    }
}

/// Token counts are u64 in memory and i64 in SQLite; a count past i64::MAX
/// is not a real count, so saturating loses nothing that matters.
fn tokens(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The row's outcome and token counts as the `runs` columns hold them, for
/// both the creation and the saves.
fn stored_counters(row: &RunRow) -> (Option<&'static str>, i64, i64) {
    (
        row.outcome.map(Outcome::as_str),
        tokens(row.usage.prompt_tokens),
        tokens(row.usage.completion_tokens),
    )
}

/// The row, then the request, once: a run's later writes carry the row
/// alone. Both in the writer's transaction; the request cannot fail on its
/// own (its one constraint is the row just written).
fn create_run(conn: &Connection, row: &RunRow, request: &str) -> rusqlite::Result<()> {
    // A run made by this agentd has a checkpoint from the start (none of
    // its steps completed yet; a resumed run's own follows as a write of
    // its own), and its link if it resumes another: in the one INSERT, so
    // a link the unique index refuses leaves no row behind.
    let r = &row.resume;
    let mut insert = conn.prepare_cached(
        "INSERT INTO runs (id, seq, agent, state, outcome, steps, max_steps, result, error,
                           prompt_tokens, completion_tokens, created_at_ms, started_at_ms,
                           ended_at_ms, cost, checkpoint_steps, checkpoint_messages,
                           checkpoint_stuck, resumed_from, resumed_at_step, resumed_messages)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, 0, 0, 0,
                 ?16, ?17, ?18)",
    )?;
    let (outcome, prompt, completion) = stored_counters(row);
    insert.execute(params![
        row.id,
        row.seq,
        row.agent,
        row.state.as_str(),
        outcome,
        row.steps,
        row.max_steps,
        row.result,
        row.error,
        prompt,
        completion,
        row.created_at_ms,
        row.started_at_ms,
        row.ended_at_ms,
        row.cost,
        r.resumed_from,
        r.resumed_at_step,
        r.resumed_messages
    ])?;
    conn.prepare_cached("INSERT INTO requests (run_id, request) VALUES (?1, ?2)")?
        .execute(params![row.id, request])
        .map(drop)
}

/// Updates the row of a run created before (its request is another table's
/// row, untouched). A run with no row is an error: its creation was refused
/// and deleted, and an update must not bring back a run without a request.
///
/// Why two statements: SQLite rewrites an index entry whenever its column is
/// in an `UPDATE`'s `SET`, even to the same value, and each rewritten entry
/// is another 4 KiB page in the WAL at the next commit. A run's row is saved
/// at every step, but only its counters change then: the first statement
/// sets the columns no index covers; the second sets `state` and
/// `ended_at_ms` (indexed) only in the few saves that change them. `seq`,
/// `agent` and `created_at_ms` never change after creation and are not
/// written again. Under `cargo bench --bench daemon` this took a WAL page
/// (of about five and a half) off each step. A checkpoint folded into the
/// save (`pending`) goes in the first statement; without one its columns
/// keep their values (`COALESCE` with `NULL`).
fn save_run(
    conn: &Connection,
    row: &RunRow,
    checkpoint: Option<&Checkpoint>,
) -> rusqlite::Result<()> {
    let (outcome, prompt, completion) = stored_counters(row);
    let changed = conn
        .prepare_cached(
            "UPDATE runs SET outcome = ?2, steps = ?3, max_steps = ?4, result = ?5,
                 error = ?6, prompt_tokens = ?7, completion_tokens = ?8,
                 started_at_ms = ?9, cost = ?10,
                 checkpoint_steps = COALESCE(?11, checkpoint_steps),
                 checkpoint_messages = COALESCE(?12, checkpoint_messages),
                 checkpoint_stuck = COALESCE(?13, checkpoint_stuck)
             WHERE id = ?1",
        )?
        .execute(params![
            row.id,
            outcome,
            row.steps,
            row.max_steps,
            row.result,
            row.error,
            prompt,
            completion,
            row.started_at_ms,
            row.cost,
            checkpoint.map(|c| c.steps),
            checkpoint.map(|c| c.messages),
            checkpoint.map(|c| c.stuck_warning)
        ])?;
    if changed == 0 {
        // The one rusqlite error that carries an error of ours; it is not a
        // storage error, so the write is counted and the batch goes on.
        return Err(rusqlite::Error::ToSqlConversionFailure(Box::new(NoSuchRun)));
    }
    conn.prepare_cached(
        "UPDATE runs SET state = ?2, ended_at_ms = ?3
         WHERE id = ?1 AND (state IS NOT ?2 OR ended_at_ms IS NOT ?3)",
    )?
    .execute(params![row.id, row.state.as_str(), row.ended_at_ms])
    .map(drop)
}

#[derive(Debug, thiserror::Error)]
#[error("there is no such run (its creation was refused, or it was never created)")]
struct NoSuchRun;

/// Ends every run left unended (queued, running, waiting), with a final `run_ended` event
/// numbered after the run's last one (1 when it has none: seqs start at 1).
fn interrupt(conn: &Connection, now_ms: i64) -> rusqlite::Result<Vec<String>> {
    let unfinished: Vec<(String, u32)> = conn
        .prepare_cached("SELECT id, steps FROM runs WHERE state != ?1 ORDER BY seq")?
        .query_map(params![RunState::Ended.as_str()], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })?
        .collect::<rusqlite::Result<_>>()?;
    for (id, steps) in &unfinished {
        // Rows never overlap: the last event is in the row with the
        // highest `seq`, found by a seek (`MAX` over `last_seq`, a column
        // after the row's events, would read every row whole).
        let last: Option<i64> = conn
            .prepare_cached(
                "SELECT COALESCE(last_seq, seq) FROM events WHERE run_id = ?1
                 ORDER BY seq DESC LIMIT 1",
            )?
            .query_row([id], |row| row.get(0))
            .optional()?;
        let last_at: Option<i64> = conn
            .prepare_cached("SELECT MAX(at_ms) FROM events WHERE run_id = ?1")?
            .query_row([id], |row| row.get(0))?;
        // The run ended when the daemon running it did: at its last sign
        // of life (its last event, else its start or creation), not now. A
        // run orphaned last week is not a run of today: the daily budgets'
        // count at start-up (`tokens_since`) goes by this time, and so does
        // its duration in `agentd show`.
        let ended_at: i64 = conn
            .prepare_cached(
                "SELECT MIN(?2, MAX(COALESCE(?3, 0), COALESCE(started_at_ms, 0), created_at_ms))
                 FROM runs WHERE id = ?1",
            )?
            .query_row(params![id, now_ms, last_at], |row| row.get(0))?;
        conn.prepare_cached(
            "UPDATE runs SET state = ?2, outcome = ?3, error = ?4, ended_at_ms = ?5 WHERE id = ?1",
        )?
        .execute(params![
            id,
            RunState::Ended.as_str(),
            Outcome::Interrupted.as_str(),
            INTERRUPTED_ERROR,
            ended_at
        ])?;
        let event = RunEvent::RunEnded {
            outcome: Outcome::Interrupted,
            steps: *steps,
            error: Some(INTERRUPTED_ERROR.to_string()),
        };
        let json = serde_json::to_string(&event)
            .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
        insert_one(
            conn,
            id,
            last.unwrap_or(0).saturating_add(1),
            ended_at,
            &json,
        )?;
    }
    Ok(unfinished.into_iter().map(|(id, _)| id).collect())
}

fn prune(conn: &Connection, cutoff_ms: i64) -> rusqlite::Result<usize> {
    conn.prepare_cached("DELETE FROM runs WHERE state = ?1 AND ended_at_ms < ?2")?
        .execute(params![RunState::Ended.as_str(), cutoff_ms])
}
