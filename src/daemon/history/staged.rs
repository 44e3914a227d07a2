//! A live run's writes, held while its step goes on and sent to the writer
//! in as few ops as its promises allow, so that a step's writes share a
//! commit instead of each taking the next one.
//!
//! Why: under load a commit rewrites into the WAL, for every run with a
//! write in it, a leaf of the runs table, of the events index and of the
//! messages index (a run's rows sit together in each). A step's writes went
//! out as they happened: its start (the row's step count, `step_started`)
//! in one commit, the rest (the answer, the tool's call and result, the
//! step's end) 20 ms or more later, when the model had answered, in
//! another, so each step paid for the same leaves twice. Held here, the
//! step's start goes out with the model's answer (the answer's tokens
//! release it, below), and the rest at the step's end: with quick tools
//! both fall in one commit (the writer commits at most every 5 ms while
//! busy); a slow tool's step takes two.
//!
//! What this keeps: a completed step is durable before the next begins
//! (the checkpoint hook releases the step's writes, then flushes), so a
//! daemon that dies loses at most the step it was in, as before. Writes
//! that must not wait for the step's end release what is held at once:
//! an answer's tokens (the daily budgets count them after a restart), a
//! run that starts waiting for a person (that may take days) and the
//! answer it gets, and the run's end. Order is kept: everything a run writes while it is live goes
//! through its `Staged`, which sends in the order it was handed.

use std::sync::Mutex;

use super::write::{RunRow, Write};
use super::History;
use crate::agent::Checkpoint;
use crate::chat::SharedJson;
use crate::sync::LockExt;

/// The writes of one live run not yet sent to the writer.
pub struct Staged {
    history: History,
    run_id: String,
    held: Mutex<Vec<Write>>,
}

impl Staged {
    pub(super) fn new(history: History, run_id: String) -> Staged {
        Staged {
            history,
            run_id,
            held: Mutex::new(Vec::new()),
        }
    }

    fn hold(&self, write: Write) {
        self.held.lock_unpoisoned().push(write);
    }

    /// A change of the run's row (its summary without the request), held.
    pub fn save_run(&self, row: impl Into<RunRow>) {
        self.hold(self.history.row_write(row.into()));
    }

    /// An event already encoded (`json` is the event object alone, without
    /// `seq` and `at_ms`), held.
    pub fn append_event_json(&self, seq: u64, at_ms: i64, json: String) {
        self.hold(Write::Event {
            run_id: self.run_id.clone(),
            seq,
            at_ms,
            json,
        });
    }

    /// [`History::append_message_json`], held.
    pub fn append_message_json(&self, index: u32, json: Result<SharedJson, serde_json::Error>) {
        if let Some(write) = self.history.message_write(&self.run_id, index, json) {
            self.hold(write);
        }
    }

    /// [`History::checkpoint`], held: the step's writes are released right
    /// after it, with it.
    pub fn checkpoint(&self, checkpoint: Checkpoint) {
        self.hold(Write::Checkpoint {
            run_id: self.run_id.clone(),
            checkpoint,
        });
    }

    /// Sends everything held, in order, as one op (a [`History::flush`]
    /// after it waits for all of it).
    pub fn release(&self) {
        // Sent under the lock, so that two releases cannot pass each other.
        let mut held = self.held.lock_unpoisoned();
        if !held.is_empty() {
            self.history.send_writes(std::mem::take(&mut *held));
        }
    }
}

impl Drop for Staged {
    /// A run always releases at its end; this only keeps writes from being
    /// lost if a path forgets to.
    fn drop(&mut self) {
        self.release();
    }
}
