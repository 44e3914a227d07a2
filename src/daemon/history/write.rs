//! What the writer thread writes: one [`Write`] per change, and the run's
//! row without its request ([`RunRow`]).
//!
//! The request (up to `[daemon] max_request_bytes`, 1 MiB by default) is
//! written once, when the run is created ([`Write::CreateRun`]), into its own
//! table. Every later change of the run (start, each step, the end) carries
//! only the row, so neither SQLite (which rewrites a whole row on update,
//! overflow pages included) nor the queue copies the request again.

use crate::agent::{Checkpoint, Outcome};
use crate::api::{ResumeLinks, RunState, RunSummary};
use crate::chat::Usage;

/// A run's summary as its `runs` row holds it: everything but the request.
/// Built under the live run's lock at each change; cloning it costs the
/// small fields and the result (only set at the end), never the request.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRow {
    pub id: String,
    pub seq: i64,
    pub agent: String,
    pub state: RunState,
    pub outcome: Option<Outcome>,
    pub steps: u32,
    pub max_steps: Option<u32>,
    pub result: Option<String>,
    pub error: Option<String>,
    pub usage: Usage,
    /// At the prices in force for the run; `None` without a price.
    pub cost: Option<f64>,
    pub created_at_ms: i64,
    pub started_at_ms: Option<i64>,
    pub ended_at_ms: Option<i64>,
    /// The run it resumed; written once, at creation (`resumed_by` is read
    /// from the other run's row, never stored).
    pub resume: ResumeLinks,
}

impl From<&RunSummary> for RunRow {
    fn from(run: &RunSummary) -> Self {
        RunRow {
            id: run.id.clone(),
            seq: run.seq,
            agent: run.agent.clone(),
            state: run.state,
            outcome: run.outcome,
            steps: run.steps,
            max_steps: run.max_steps,
            result: run.result.clone(),
            error: run.error.clone(),
            usage: run.usage,
            cost: run.cost,
            created_at_ms: run.created_at_ms,
            started_at_ms: run.started_at_ms,
            ended_at_ms: run.ended_at_ms,
            resume: ResumeLinks {
                resumed_by: None,
                ..run.resume.clone()
            },
        }
    }
}

impl RunRow {
    /// About what it holds in memory, for the pending bound.
    fn size(&self) -> usize {
        self.id.len()
            + self.agent.len()
            + self.result.as_ref().map_or(0, String::len)
            + self.error.as_ref().map_or(0, String::len)
            + self.resume.resumed_from.as_ref().map_or(0, String::len)
    }
}

pub(super) enum Write {
    /// A new run: its row and, the one time it is written, its request.
    CreateRun { row: Box<RunRow>, request: String },
    /// A change of a run created before: the row alone, and the checkpoint
    /// of a step that ended in the same batch, if any. A step's end saves
    /// the row (the answer's tokens) and then its checkpoint, both within
    /// one batch under load: folded into one `UPDATE` (see `pending`), the
    /// row is found and rewritten once instead of twice.
    SaveRun {
        row: Box<RunRow>,
        checkpoint: Option<Checkpoint>,
    },
    Event {
        run_id: String,
        seq: u64,
        at_ms: i64,
        json: String,
    },
    Message {
        run_id: String,
        index: u32,
        /// Shared with the live run's memory and transcript, which hold the
        /// same JSON.
        json: crate::chat::SharedJson,
    },
    /// Where the run's last completed step ended. Like a row write, never
    /// dropped past the pending bound: a checkpoint that claims messages
    /// the bound dropped is caught when the run is resumed (the transcript
    /// has holes), while a lost checkpoint would silently resume from an
    /// earlier one.
    Checkpoint {
        run_id: String,
        checkpoint: Checkpoint,
    },
    /// A run whose creation was refused after its row was queued: it must
    /// not appear later, when the queued row finally commits.
    DeleteRun(String),
    /// Start-up recovery: runs left queued or running end `interrupted`. A
    /// write like the others, so that on a full disk it waits in order
    /// before every later run's rows.
    Interrupt { now_ms: i64 },
}

impl Write {
    pub(super) fn describe(&self) -> String {
        match self {
            Write::CreateRun { row, .. } => format!("creating run {}", row.id),
            Write::SaveRun { row, .. } => format!("saving run {}", row.id),
            Write::Event { run_id, seq, .. } => format!("appending event {seq} of run {run_id}"),
            Write::Message { run_id, index, .. } => {
                format!("appending message {index} of run {run_id}")
            }
            Write::Checkpoint { run_id, checkpoint } => format!(
                "saving the checkpoint of run {run_id} at step {}",
                checkpoint.steps
            ),
            Write::DeleteRun(id) => format!("deleting the refused run {id}"),
            Write::Interrupt { .. } => "marking runs left in flight as interrupted".into(),
        }
    }

    /// About what it holds in memory, for the pending bound.
    pub(super) fn size(&self) -> usize {
        let fixed = 64;
        fixed
            + match self {
                Write::CreateRun { row, request } => row.size() + request.len(),
                Write::SaveRun { row, .. } => row.size(),
                Write::Event { json, .. } => json.len(),
                Write::Message { json, .. } => json.get().len(),
                Write::DeleteRun(id) | Write::Checkpoint { run_id: id, .. } => id.len(),
                Write::Interrupt { .. } => 0,
            }
    }
}
