//! The one writer thread: it owns the read-write connection and applies the
//! queue in order, one transaction per batch.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;

use rusqlite::{params, Connection, TransactionBehavior};
use tokio::sync::oneshot;

use super::HistoryError;
use crate::agent::{Outcome, RunEvent};
use crate::api::{RunState, RunSummary};

/// Most writes committed together. Bounds how long a `flush` behind a burst
/// waits and how much one failed commit can lose, while keeping commits
/// (the expensive part) rare under a flood of events.
const MAX_BATCH: usize = 8192;

/// The error recorded on runs found in flight at startup.
pub(super) const INTERRUPTED_ERROR: &str = "the daemon stopped while this run was in flight";

pub(super) enum Op {
    Write(Write),
    /// Answered once every op before it is committed (or has failed).
    Flush(oneshot::Sender<()>),
    Interrupt {
        now_ms: i64,
        reply: oneshot::Sender<Result<Vec<String>, HistoryError>>,
    },
    Prune {
        cutoff_ms: i64,
        reply: oneshot::Sender<Result<usize, HistoryError>>,
    },
}

pub(super) enum Write {
    SaveRun(Box<RunSummary>),
    Event {
        run_id: String,
        seq: u64,
        at_ms: i64,
        json: String,
    },
    Message {
        run_id: String,
        index: u32,
        json: String,
    },
}

impl Write {
    fn describe(&self) -> String {
        match self {
            Write::SaveRun(run) => format!("saving run {}", run.id),
            Write::Event { run_id, seq, .. } => format!("appending event {seq} of run {run_id}"),
            Write::Message { run_id, index, .. } => {
                format!("appending message {index} of run {run_id}")
            }
        }
    }
}

pub(super) fn spawn(
    conn: Connection,
    path: PathBuf,
    rx: Receiver<Op>,
    errors: Arc<AtomicU64>,
) -> Result<JoinHandle<()>, HistoryError> {
    let db = path.clone();
    std::thread::Builder::new()
        .name("history-writer".to_string())
        .spawn(move || {
            Writer {
                conn,
                path: db,
                errors,
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
}

impl Writer {
    /// Returns when every sender is gone, after committing what they queued
    /// (a disconnected channel still yields what was sent before).
    fn run(mut self, rx: Receiver<Op>) {
        while let Ok(first) = rx.recv() {
            let mut batch = vec![first];
            while batch.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(op) => batch.push(op),
                    Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
                }
            }
            self.apply(batch);
        }
    }

    fn apply(&mut self, batch: Vec<Op>) {
        let mut flushes = Vec::new();
        let mut tx = self.begin();
        for op in batch {
            match op {
                Op::Write(write) => {
                    if let Err(e) = self.write(&write) {
                        self.fail(1, format_args!("{}: {e}", write.describe()));
                        if tx.open && self.conn.is_autocommit() {
                            // Some errors (disk full, I/O) make SQLite roll the
                            // whole transaction back: what it held is lost too.
                            self.fail(
                                tx.applied,
                                format_args!("the transaction was rolled back by that error"),
                            );
                            tx = self.begin();
                        }
                    } else {
                        tx.applied += 1;
                    }
                }
                Op::Flush(reply) => flushes.push(reply),
                Op::Interrupt { now_ms, reply } => {
                    self.commit(tx);
                    let _ = reply.send(self.transact(|conn| interrupt(conn, now_ms)));
                    tx = self.begin();
                }
                Op::Prune { cutoff_ms, reply } => {
                    self.commit(tx);
                    let _ = reply.send(self.transact(|conn| prune(conn, cutoff_ms)));
                    tx = self.begin();
                }
            }
        }
        self.commit(tx);
        for reply in flushes {
            // The caller may have stopped waiting; that is fine.
            let _ = reply.send(());
        }
    }

    /// A failed BEGIN is logged and the batch continues in autocommit mode:
    /// slower, but nothing is dropped.
    fn begin(&mut self) -> Batch {
        match self.conn.execute_batch("BEGIN IMMEDIATE") {
            Ok(()) => Batch {
                open: true,
                applied: 0,
            },
            Err(e) => {
                tracing::error!(db = %self.path.display(), error = %e,
                    "run history: cannot begin a transaction; writing without one");
                Batch {
                    open: false,
                    applied: 0,
                }
            }
        }
    }

    fn commit(&mut self, tx: Batch) {
        if !tx.open || self.conn.is_autocommit() {
            return;
        }
        if let Err(e) = self.conn.execute_batch("COMMIT") {
            self.fail(tx.applied, format_args!("commit failed: {e}"));
            if !self.conn.is_autocommit() {
                if let Err(e) = self.conn.execute_batch("ROLLBACK") {
                    tracing::error!(db = %self.path.display(), error = %e,
                        "run history: rollback after a failed commit failed");
                }
            }
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
            Write::SaveRun(run) => save_run(&self.conn, run),
            Write::Event {
                run_id,
                seq,
                at_ms,
                json,
            } => {
                let seq = i64::try_from(*seq)
                    .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
                insert_event(&self.conn, run_id, seq, *at_ms, json)
            }
            Write::Message {
                run_id,
                index,
                json,
            } => self
                .conn
                .prepare_cached("INSERT INTO messages (run_id, idx, message) VALUES (?1, ?2, ?3)")?
                .execute(params![run_id, index, json])
                .map(drop),
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

/// What the current batch's transaction holds.
struct Batch {
    open: bool,
    /// Writes applied inside it: lost if it does not commit.
    applied: u64,
}

/// Token counts are u64 in memory and i64 in SQLite; a count past i64::MAX
/// is not a real count, so saturating loses nothing that matters.
fn tokens(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn save_run(conn: &Connection, run: &RunSummary) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO runs (id, seq, agent, request, state, outcome, steps, max_steps, result,
                           error, prompt_tokens, completion_tokens, created_at_ms,
                           started_at_ms, ended_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)
         ON CONFLICT (id) DO UPDATE SET
             seq = excluded.seq, agent = excluded.agent, request = excluded.request,
             state = excluded.state, outcome = excluded.outcome, steps = excluded.steps,
             max_steps = excluded.max_steps, result = excluded.result, error = excluded.error,
             prompt_tokens = excluded.prompt_tokens,
             completion_tokens = excluded.completion_tokens,
             created_at_ms = excluded.created_at_ms, started_at_ms = excluded.started_at_ms,
             ended_at_ms = excluded.ended_at_ms",
    )?
    .execute(params![
        run.id,
        run.seq,
        run.agent,
        run.request,
        run.state.as_str(),
        run.outcome.map(Outcome::as_str),
        run.steps,
        run.max_steps,
        run.result,
        run.error,
        tokens(run.usage.prompt_tokens),
        tokens(run.usage.completion_tokens),
        run.created_at_ms,
        run.started_at_ms,
        run.ended_at_ms,
    ])
    .map(drop)
}

fn insert_event(
    conn: &Connection,
    run_id: &str,
    seq: i64,
    at_ms: i64,
    json: &str,
) -> rusqlite::Result<()> {
    conn.prepare_cached("INSERT INTO events (run_id, seq, at_ms, event) VALUES (?1, ?2, ?3, ?4)")?
        .execute(params![run_id, seq, at_ms, json])
        .map(drop)
}

/// Ends every run left queued or running, with a final `run_ended` event
/// numbered after the run's last one (1 when it has none: seqs start at 1).
fn interrupt(conn: &Connection, now_ms: i64) -> rusqlite::Result<Vec<String>> {
    let unfinished: Vec<(String, u32)> = conn
        .prepare_cached("SELECT id, steps FROM runs WHERE state IN (?1, ?2) ORDER BY seq")?
        .query_map(
            params![RunState::Queued.as_str(), RunState::Running.as_str()],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )?
        .collect::<rusqlite::Result<_>>()?;
    for (id, steps) in &unfinished {
        conn.prepare_cached(
            "UPDATE runs SET state = ?2, outcome = ?3, error = ?4, ended_at_ms = ?5 WHERE id = ?1",
        )?
        .execute(params![
            id,
            RunState::Ended.as_str(),
            Outcome::Interrupted.as_str(),
            INTERRUPTED_ERROR,
            now_ms
        ])?;
        let last: Option<i64> = conn
            .prepare_cached("SELECT MAX(seq) FROM events WHERE run_id = ?1")?
            .query_row([id], |row| row.get(0))?;
        let event = RunEvent::RunEnded {
            outcome: Outcome::Interrupted,
            steps: *steps,
            error: Some(INTERRUPTED_ERROR.to_string()),
        };
        let json = serde_json::to_string(&event)
            .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
        insert_event(conn, id, last.unwrap_or(0).saturating_add(1), now_ms, &json)?;
    }
    Ok(unfinished.into_iter().map(|(id, _)| id).collect())
}

fn prune(conn: &Connection, cutoff_ms: i64) -> rusqlite::Result<usize> {
    conn.prepare_cached("DELETE FROM runs WHERE state = ?1 AND ended_at_ms < ?2")?
        .execute(params![RunState::Ended.as_str(), cutoff_ms])
}
