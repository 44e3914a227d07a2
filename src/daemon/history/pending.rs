//! The writes the writer has received and not committed yet: in queue
//! order, one row write per run, and bounded while the disk refuses them.
//!
//! - **Coalescing.** A row update for a run that already has a row write
//!   pending (its creation or an earlier update) replaces that write's row in
//!   place: the newest summary wins, at the earlier position. That position
//!   is before every event and message of the run queued since, so the
//!   foreign keys still find the row; and all pending writes commit in one
//!   transaction, so nothing observes the order in between. Under load this
//!   turns a batch's many step saves of one run into one `UPDATE`, and on a
//!   full disk it keeps a run's row writes at one, however long it runs.
//!   A checkpoint is folded into the run's pending update the same way
//!   (the newest wins): a step's end saves the row, then its checkpoint,
//!   and the two become one `UPDATE`.
//! - **Barriers.** A deletion ends coalescing for its run and an interrupt
//!   for every run: a later update must not move before them, or the
//!   deletion would lose it or the interrupt would end a run that was
//!   created (in queue order) after it.
//! - **The bound** ([`MAX_PENDING_BYTES`]) drops events and messages only.
//!   Row writes are always kept: coalesced they are a few per live run, and
//!   dropping one could leave a run `running` (its end lost) until the next
//!   start.

use std::collections::HashMap;

use super::write::{RunRow, Write};
use crate::agent::Checkpoint;

/// Bytes of writes kept in memory while the history cannot be written (disk
/// full, read-only). Past it, further events and messages are dropped and
/// counted; runs' rows are still kept.
pub const MAX_PENDING_BYTES: usize = 64 << 20;

/// What [`Pending::push`] did with a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Push {
    Appended,
    /// A row update that replaced the run's pending row write, or a
    /// checkpoint folded into it.
    Coalesced,
    /// An event or message past the bound: not kept.
    Dropped,
}

#[derive(Default)]
pub(super) struct Pending {
    writes: Vec<Write>,
    /// The sum of `writes`' [`Write::size`].
    bytes: usize,
    /// Each run with a row write in `writes` since the last barrier, and
    /// that write's index.
    rows: HashMap<String, usize>,
}

impl Pending {
    pub(super) fn len(&self) -> usize {
        self.writes.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }

    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    #[cfg(test)]
    pub(super) fn writes(&self) -> &[Write] {
        &self.writes
    }

    /// Adds a write. `bounded` is whether the bound applies: only while the
    /// disk refuses. Until then `pending` is only the batch being committed,
    /// already in memory (it came through the queue), and dropping from it
    /// would lose writes a healthy disk takes.
    pub(super) fn push(&mut self, write: Write, bounded: bool) -> Push {
        match write {
            Write::SaveRun { row, checkpoint } => match self.replace_row(row, checkpoint) {
                Ok(()) => Push::Coalesced,
                Err(row) => {
                    let id = row.id.clone();
                    self.append(Write::SaveRun { row, checkpoint });
                    self.rows.insert(id, self.writes.len() - 1);
                    Push::Appended
                }
            },
            Write::CreateRun { row, request } => {
                let id = row.id.clone();
                self.append(Write::CreateRun { row, request });
                self.rows.insert(id, self.writes.len() - 1);
                Push::Appended
            }
            Write::DeleteRun(id) => {
                // A refused creation still pending (the disk failed as it
                // was flushed): its request, up to 1 MiB, is let go now
                // rather than kept until the disk recovers. The row stays,
                // so the deletion after it still applies in order.
                if let Some(at) = self.rows.remove(&id) {
                    if let Some(Write::CreateRun { request, .. }) = self.writes.get_mut(at) {
                        self.bytes = self.bytes.saturating_sub(request.len());
                        *request = String::new();
                    }
                }
                self.append(Write::DeleteRun(id));
                Push::Appended
            }
            Write::Checkpoint { run_id, checkpoint } => {
                // Folded into the run's pending row update when there is
                // one (the step's end saved the row moments before);
                // otherwise on its own. Small, one per step, and never
                // dropped (see `Write`).
                if let Some(Write::SaveRun {
                    checkpoint: pending,
                    ..
                }) = self.row_write(&run_id)
                {
                    *pending = Some(checkpoint);
                    return Push::Coalesced;
                }
                self.append(Write::Checkpoint { run_id, checkpoint });
                Push::Appended
            }
            Write::Interrupt { now_ms } => {
                self.rows.clear();
                self.append(Write::Interrupt { now_ms });
                Push::Appended
            }
            write @ (Write::Event { .. } | Write::Message { .. }) => {
                let over = self.bytes.saturating_add(write.size()) > MAX_PENDING_BYTES;
                if bounded && !self.writes.is_empty() && over {
                    Push::Dropped
                } else {
                    self.append(write);
                    Push::Appended
                }
            }
        }
    }

    /// Everything pending, in order, leaving this empty (for a commit).
    pub(super) fn take(&mut self) -> Vec<Write> {
        self.rows.clear();
        self.bytes = 0;
        std::mem::take(&mut self.writes)
    }

    /// Puts back, in order, the writes of a commit that failed, now under
    /// the bound: the first failed batch was taken unbounded (the disk was
    /// fine until then), so its events and messages past the bound are
    /// dropped here. Returns how many were.
    pub(super) fn restore(&mut self, writes: Vec<Write>) -> u64 {
        self.take();
        let mut dropped = 0;
        for write in writes {
            if self.push(write, true) == Push::Dropped {
                dropped += 1;
            }
        }
        dropped
    }

    fn append(&mut self, write: Write) {
        self.bytes = self.bytes.saturating_add(write.size());
        self.writes.push(write);
    }

    /// Puts `row` in place of the run's pending row write, or hands it back
    /// when there is none (or the pending write is the run's creation and
    /// `checkpoint` must be written too). The newest checkpoint wins; an
    /// update without one keeps the pending write's.
    fn replace_row(
        &mut self,
        row: Box<RunRow>,
        checkpoint: Option<Checkpoint>,
    ) -> Result<(), Box<RunRow>> {
        let Some(slot) = self.row_write(&row.id) else {
            return Err(row);
        };
        let before = slot.size();
        match slot {
            Write::CreateRun { row: old, .. } if checkpoint.is_none() => *old = row,
            Write::SaveRun {
                row: old,
                checkpoint: kept,
            } => {
                *old = row;
                *kept = checkpoint.or(*kept);
            }
            // `rows` only ever points at row writes; were it not so, the
            // update goes to the end like any other.
            _ => return Err(row),
        }
        let after = slot.size();
        self.bytes = self.bytes.saturating_sub(before).saturating_add(after);
        Ok(())
    }

    /// The run's pending row write (its creation or an update) since the
    /// last barrier, if any.
    fn row_write(&mut self, run_id: &str) -> Option<&mut Write> {
        let at = *self.rows.get(run_id)?;
        self.writes.get_mut(at)
    }
}
