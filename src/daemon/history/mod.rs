//! The daemon's run history: every run's summary, transcript and events in
//! one SQLite file, `<state_dir>/history.db`, so that `agentd runs` and
//! `GET /v1/runs/...` survive a restart of the daemon.
//!
//! Writes come from the run loop's hot path (an event per tool call, a
//! summary per step), so they never touch the disk on the caller's thread:
//! they are queued to one writer thread that applies everything queued in one
//! transaction. One writer means one order: a run's row is always written
//! before its events, and `flush` is simply "a marker behind everything
//! queued". Reads use their own read-only connections; WAL mode lets them
//! see the last commit while the writer is writing the next one.
//!
//! A write that fails is logged and counted (`write_errors`), never
//! returned: the run it describes must not fail because its record could not
//! be kept. When the disk refuses (full, read-only) the writer keeps what it
//! could not commit (bounded, see `writer`) and retries; meanwhile
//! [`History::unavailable`] says why, and [`History::flush`] fails fast so
//! that `POST /v1/runs` can refuse a run it could not record.
//!
//! Durability: WAL with `synchronous = NORMAL`. A commit that returned
//! survives the death of the daemon (`kill -9`, OOM, a panic), because it is
//! in the WAL file, in the kernel's page cache. Only a power loss or kernel
//! crash can lose the last commits before the next checkpoint; even then the
//! database stays consistent (it rolls back to an earlier commit). `FULL`
//! would add an fsync per batch, to protect runs that the daemon would mark
//! `interrupted` anyway after such a crash.

mod event_rows;
mod pending;
mod read;
mod schema;
mod staged;
mod write;
mod writer;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::mpsc::{self, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;

use tokio::sync::oneshot;

use crate::api::{EventLine, RunList, RunSummary, RunView};
use crate::chat::SharedJson;
use crate::daemon::paging::PageRequest;

pub use pending::MAX_PENDING_BYTES;
use read::Readers;
pub use read::ResumePoint;
pub use staged::Staged;
pub use write::RunRow;
use write::Write;
use writer::{Health, Op};

/// The file name inside the state directory.
pub const FILE_NAME: &str = "history.db";

/// The error of the one thing the history refuses to do silently: open,
/// read or run a maintenance step. Every message names the database file,
/// because the operator's next move is to look at (or move away) that file.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("cannot create the state directory {}: {source}", dir.display())]
    CreateDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot create the run history {}: {source}", path.display())]
    CreateFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot open the run history {}: {source}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error(
        "{} is not an SQLite database, so it cannot hold the run history; \
         it was left untouched: move it away or set another state directory",
        path.display()
    )]
    NotADatabase { path: PathBuf },
    #[error(
        "{} is an SQLite database but not an agentd run history ({reason}); \
         it was left untouched: move it away or set another state directory",
        path.display()
    )]
    Foreign { path: PathBuf, reason: String },
    #[error(
        "the run history {} has schema version {found}, newer than the {supported} \
         this agentd understands (it was written by a newer agentd); it was left untouched",
        path.display()
    )]
    TooNew {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    #[error("cannot upgrade the run history {} to schema version {to}: {source}", path.display())]
    Migrate {
        path: PathBuf,
        to: i64,
        #[source]
        source: rusqlite::Error,
    },
    #[error("run history {}: {source}", path.display())]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("run history {}: a stored row is unreadable: {detail}", path.display())]
    Corrupt { path: PathBuf, detail: String },
    #[error("run history {}: the writer thread has stopped", path.display())]
    WriterGone { path: PathBuf },
    #[error("run history {}: a read task failed: {detail}", path.display())]
    Task { path: PathBuf, detail: String },
    #[error(
        "the run history {} cannot be written: {reason} (new runs are refused until it can; \
         runs in flight keep running and their records are written when it can)",
        path.display()
    )]
    Unavailable { path: PathBuf, reason: String },
}

/// A handle on the run history; clones share the one writer thread.
#[derive(Clone)]
pub struct History {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    /// `None` only while dropping: dropping the sender is what tells the
    /// writer to commit what is left and stop.
    tx: Option<mpsc::SyncSender<Op>>,
    writer: Option<JoinHandle<()>>,
    last_seq: AtomicI64,
    errors: Arc<AtomicU64>,
    health: Arc<Health>,
    readers: Arc<Readers>,
}

impl Drop for Inner {
    /// Waits for the writer so that whatever was queued is committed when the
    /// last handle is gone: the daemon drops its history just before exiting,
    /// and a detached writer would be killed with the process.
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(handle) = self.writer.take() {
            if handle.join().is_err() {
                tracing::error!(db = %self.path.display(), "run history: the writer thread panicked");
            }
        }
    }
}

impl History {
    /// Opens or creates `<state_dir>/history.db` (created `0600` whatever the
    /// umask: it holds every prompt and tool output).
    ///
    /// WAL with `synchronous = NORMAL`: a commit is written to the WAL file
    /// but not fsynced, the checkpoint is. Committed data therefore lives in
    /// the OS's page cache the moment the commit returns, so killing the
    /// process (crash, `kill -9`, OOM) loses nothing committed; only a power
    /// loss or kernel crash can lose the last few commits, and even then the
    /// file stays consistent. That trade is right for a history: `FULL`
    /// would add an fsync to every batch for runs the daemon marks
    /// `interrupted` anyway after such a crash.
    ///
    /// A file that is not an SQLite database, another program's database, or
    /// a history from a newer agentd is refused and never written to.
    pub fn open(state_dir: &Path) -> Result<History, HistoryError> {
        schema::create_state_dir(state_dir)?;
        let path = state_dir.join(FILE_NAME);
        let conn = schema::open_writer(&path)?;
        let last_seq = schema::max_run_seq(&conn, &path)?;
        let errors = Arc::new(AtomicU64::new(0));
        let health = Arc::new(Health::default());
        let (tx, rx) = mpsc::sync_channel(writer::QUEUE_OPS);
        let writer = writer::spawn(conn, path.clone(), rx, errors.clone(), health.clone())?;
        Ok(History {
            inner: Arc::new(Inner {
                readers: Arc::new(Readers::new(path.clone())),
                path,
                tx: Some(tx),
                writer: Some(writer),
                last_seq: AtomicI64::new(last_seq),
                errors,
                health,
            }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Seqs order the run list and page it (`before=`), so one must never
    /// name two runs, even across restarts: the counter starts at the
    /// largest stored seq.
    pub fn next_seq(&self) -> i64 {
        self.inner.last_seq.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// A new run: its row and its request, the one time the request is
    /// written (it is up to `max_request_bytes`; every later change of the
    /// run goes through its [`Staged`] writes, without it).
    pub fn create_run(&self, run: &RunSummary) {
        // A seq chosen elsewhere must not be handed out again by `next_seq`.
        self.inner.last_seq.fetch_max(run.seq, Ordering::SeqCst);
        self.send_write(Write::CreateRun {
            row: Box::new(RunRow::from(run)),
            request: run.request.clone(),
        });
    }

    /// Called on every later change of a run made by [`History::create_run`]
    /// (start, each step, end): the row always holds the latest summary. It
    /// takes the row without the request (a `&RunSummary` converts), so a
    /// step copies no request; a run with no row is not created by this
    /// (the write is counted as failed). Live runs write through their
    /// [`Staged`]; this is the tests' direct way.
    #[cfg(test)]
    pub(crate) fn save_run(&self, run: impl Into<RunRow>) {
        self.send_write(self.row_write(run.into()));
    }

    /// The write of a row update, sent here or held by a [`Staged`]. A seq
    /// written by a row must not be handed out again by `next_seq`.
    fn row_write(&self, row: RunRow) -> Write {
        self.inner.last_seq.fetch_max(row.seq, Ordering::SeqCst);
        Write::SaveRun {
            row: Box::new(row),
            checkpoint: None,
        }
    }

    /// Where a live run's writes wait for the end of its step (see
    /// [`Staged`]): everything the run writes while it is live goes through
    /// it, so its writes keep their order.
    pub fn staged(&self, run_id: &str) -> Staged {
        Staged::new(self.clone(), run_id.to_string())
    }

    #[cfg(test)]
    pub(crate) fn append_event(&self, run_id: &str, line: &EventLine) {
        // Serialised here, not on the writer: the caller owns the event, and
        // the writer is the one shared bottleneck.
        match serde_json::to_string(&line.event) {
            Ok(json) => self.append_event_json(run_id, line.seq, line.at_ms, json),
            Err(e) => self.count_error(format_args!(
                "cannot encode event {} of run {run_id}: {e}",
                line.seq
            )),
        }
    }

    /// The same for an event its caller has already encoded (`json` is the
    /// event object alone, without `seq` and `at_ms`).
    #[cfg(test)]
    pub(crate) fn append_event_json(&self, run_id: &str, seq: u64, at_ms: i64, json: String) {
        self.send_write(Write::Event {
            run_id: run_id.to_string(),
            seq,
            at_ms,
            json,
        });
    }

    /// Tests' shorthand: the daemon always has the message's JSON already
    /// (memory's encoding, or a resumed run's carried transcript encoded
    /// once) and calls [`Self::append_message_json`].
    #[cfg(test)]
    pub(crate) fn append_message(&self, run_id: &str, index: u32, message: &crate::chat::Message) {
        self.append_message_json(run_id, index, crate::chat::encode_shared(message));
    }

    /// Appends message `index` of a run's transcript from its JSON, which
    /// the caller has encoded and may keep (it is shared, not copied); an
    /// encoding that failed is counted as a lost write.
    pub fn append_message_json(
        &self,
        run_id: &str,
        index: u32,
        json: Result<SharedJson, serde_json::Error>,
    ) {
        if let Some(write) = self.message_write(run_id, index, json) {
            self.send_write(write);
        }
    }

    /// The write of a message, sent here or held by a [`Staged`]; `None`,
    /// counted as a lost write, when its encoding failed.
    fn message_write(
        &self,
        run_id: &str,
        index: u32,
        json: Result<SharedJson, serde_json::Error>,
    ) -> Option<Write> {
        match json {
            Ok(json) => Some(Write::Message {
                run_id: run_id.to_string(),
                index,
                json,
            }),
            Err(e) => {
                self.count_error(format_args!(
                    "cannot encode message {index} of run {run_id}: {e}"
                ));
                None
            }
        }
    }

    /// Where the run's last completed step ended: a resumed run's, at its
    /// creation (a live run's go through its [`Staged`] writes).
    pub fn checkpoint(&self, run_id: &str, checkpoint: crate::agent::Checkpoint) {
        self.send_write(Write::Checkpoint {
            run_id: run_id.to_string(),
            checkpoint,
        });
    }

    /// What resuming the run `id` starts from: its summary, its last
    /// checkpoint and its transcript up to it, read in one snapshot.
    pub async fn resume_point(&self, id: &str) -> Result<Option<ResumePoint>, HistoryError> {
        let id = id.to_string();
        self.read(move |r| r.resume_point(&id)).await
    }

    /// Returns once everything queued before it is committed, or at once
    /// with [`HistoryError::Unavailable`] when the history cannot be written
    /// now (those writes stay pending and commit when it can). For callers
    /// that must not go on unless their write is on disk: `POST /v1/runs`.
    pub async fn flush(&self) -> Result<(), HistoryError> {
        let (reply, done) = oneshot::channel();
        if !self.send(Op::Flush(reply)) {
            return Err(self.gone());
        }
        match done.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(reason)) => Err(HistoryError::Unavailable {
                path: self.inner.path.clone(),
                reason,
            }),
            Err(_) => Err(self.gone()),
        }
    }

    /// Returns once everything queued before it is committed, however long
    /// the disk takes to recover (or when the writer is gone). A run's end
    /// waits for this before the run leaves memory, so a run is never in
    /// neither place.
    pub async fn settle(&self) {
        let (reply, done) = oneshot::channel();
        if self.send(Op::Settle(reply)) {
            // An error means the writer is gone; nothing more will commit.
            let _ = done.await;
        }
    }

    /// Why the history cannot be written now (the last failed commit's
    /// error), or `None` when it can.
    pub fn unavailable(&self) -> Option<String> {
        self.inner.health.reason()
    }

    /// A run whose row was queued but whose creation was then refused: its
    /// row must not commit later.
    pub fn forget_run(&self, id: &str) {
        self.send_write(Write::DeleteRun(id.to_string()));
    }

    /// Runs `f` on the writer's connection, in queue order (the writes
    /// before it in its batch are pending, not yet committed).
    #[cfg(test)]
    fn on_writer(&self, f: impl FnOnce(&rusqlite::Connection) + Send + 'static) {
        assert!(self.send(Op::Test(Box::new(f))), "writer gone");
    }

    /// How many writes the writer holds uncommitted, once it has taken
    /// everything queued before this call.
    #[cfg(test)]
    async fn pending_writes(&self) -> usize {
        let (reply, count) = oneshot::channel();
        assert!(self.send(Op::PendingWrites(reply)), "writer gone");
        count.await.expect("writer gone")
    }

    fn gone(&self) -> HistoryError {
        HistoryError::WriterGone {
            path: self.inner.path.clone(),
        }
    }

    pub fn write_errors(&self) -> u64 {
        self.inner.errors.load(Ordering::Relaxed)
    }

    /// The summary plus the first page of the transcript, read in one
    /// snapshot so the two agree.
    pub async fn get(&self, id: &str) -> Result<Option<RunView>, HistoryError> {
        self.get_page(id, PageRequest::first()).await
    }

    /// The summary plus one page of the transcript, in one snapshot.
    pub async fn get_page(
        &self,
        id: &str,
        page: PageRequest,
    ) -> Result<Option<RunView>, HistoryError> {
        let id = id.to_string();
        self.read(move |r| r.get(&id, page)).await
    }

    /// The summary alone (no transcript is read).
    pub async fn summary(&self, id: &str) -> Result<Option<RunSummary>, HistoryError> {
        let id = id.to_string();
        self.read(move |r| r.summary(&id)).await
    }

    /// Up to `limit` events after `after`, each as its NDJSON line (the
    /// stored JSON is not parsed and re-encoded): ended runs are streamed
    /// from here a page at a time.
    pub async fn event_lines(
        &self,
        id: &str,
        after: u64,
        limit: u32,
    ) -> Result<Vec<(u64, Vec<u8>)>, HistoryError> {
        let id = id.to_string();
        self.read(move |r| r.event_lines(&id, after, limit)).await
    }

    /// Tokens per agent of the runs active since `since_ms` (see
    /// `Reader::tokens_since`): the daily budgets' count after a restart.
    pub async fn tokens_since(&self, since_ms: i64) -> Result<Vec<(String, u64)>, HistoryError> {
        self.read(move |r| r.tokens_since(since_ms)).await
    }

    /// Newest first; `before` is the previous page's `next_before`.
    pub async fn list(&self, limit: u32, before: Option<i64>) -> Result<RunList, HistoryError> {
        self.read(move |r| r.list(limit.clamp(1, 1000), before))
            .await
    }

    /// `after` is the last seq the caller has seen (0 for all: event seqs
    /// start at 1).
    pub async fn events(&self, id: &str, after: u64) -> Result<Vec<EventLine>, HistoryError> {
        let id = id.to_string();
        self.read(move |r| r.events(&id, after)).await
    }

    /// Startup recovery: runs left queued or running by a previous process
    /// that died end as `interrupted`, so no run stays "running" forever.
    /// Goes through the writer, behind anything already queued, and returns
    /// once committed. When the history cannot be written (a full disk) it
    /// returns [`HistoryError::Unavailable`] and the step stays queued: it is
    /// committed, before any later write, when the disk recovers.
    pub async fn interrupt_unfinished(&self, now_ms: i64) -> Result<(), HistoryError> {
        self.send_write(Write::Interrupt { now_ms });
        self.flush().await
    }

    /// Deletes ended runs that ended before `cutoff_ms`, with their events
    /// and messages (by cascade). Returns how many runs.
    pub async fn prune(&self, cutoff_ms: i64) -> Result<usize, HistoryError> {
        let (reply, result) = oneshot::channel();
        self.maintenance(Op::Prune { cutoff_ms, reply }, result)
            .await
    }

    async fn maintenance<T>(
        &self,
        op: Op,
        result: oneshot::Receiver<Result<T, HistoryError>>,
    ) -> Result<T, HistoryError> {
        if !self.send(op) {
            return Err(self.gone());
        }
        result.await.unwrap_or_else(|_| Err(self.gone()))
    }

    async fn read<T, F>(&self, f: F) -> Result<T, HistoryError>
    where
        T: Send + 'static,
        F: FnOnce(&mut read::Reader<'_>) -> Result<T, HistoryError> + Send + 'static,
    {
        let readers = self.inner.readers.clone();
        tokio::task::spawn_blocking(move || readers.with(f))
            .await
            .unwrap_or_else(|e| {
                Err(HistoryError::Task {
                    path: self.inner.path.clone(),
                    detail: e.to_string(),
                })
            })
    }

    /// Writes that go in one op, so in one batch, so in one commit.
    fn send_writes(&self, writes: Vec<Write>) {
        let n = writes.len();
        if !self.send(Op::Writes(writes)) {
            // One error per lost write, as `send_write` counts them.
            self.inner
                .errors
                .fetch_add(n.saturating_sub(1) as u64, Ordering::Relaxed);
            self.count_error(format_args!(
                "the writer thread has stopped; {n} writes were lost"
            ));
        }
    }

    fn send_write(&self, write: Write) {
        if !self.send(Op::Write(write)) {
            self.count_error(format_args!(
                "the writer thread has stopped; a write was lost"
            ));
        }
    }

    /// False when the writer is gone (it only stops on drop or a panic).
    /// Waits while the queue is full: the writer drains it without waiting
    /// for the disk, so the wait is one batch at most (backpressure rather
    /// than unbounded memory). Callers are mostly on tokio workers (a run's
    /// event and message sinks), where a plain blocking wait would also
    /// stall every other task of that worker, and with them the runs and
    /// connections they drive: there the wait goes through `block_in_place`,
    /// which hands the worker's tasks to another thread first.
    fn send(&self, op: Op) -> bool {
        let Some(tx) = self.inner.tx.as_ref() else {
            return false;
        };
        self.inner.health.sending();
        let sent = match tx.try_send(op) {
            Ok(()) => true,
            Err(TrySendError::Disconnected(_)) => false,
            Err(TrySendError::Full(op)) => wait_to_send(tx, op),
        };
        if !sent {
            self.inner.health.taken(1);
        }
        sent
    }

    /// Writes and flushes queued for the writer thread and not yet taken
    /// by it (the metrics' `agentd_history_queue_depth`).
    pub fn queue_depth(&self) -> u64 {
        self.inner.health.queued()
    }

    fn count_error(&self, what: std::fmt::Arguments<'_>) {
        self.inner.errors.fetch_add(1, Ordering::Relaxed);
        tracing::error!(db = %self.inner.path.display(), "run history: {what}");
    }
}

/// A blocking send that does not hold up a tokio worker's other tasks.
/// `block_in_place` needs a multi-thread runtime (it panics on a
/// current-thread one, whose only thread has no one to hand its tasks to:
/// there, and outside any runtime, the send simply blocks the thread). On a
/// multi-thread runtime's blocking thread or `block_on` thread it just runs
/// the closure.
fn wait_to_send(tx: &mpsc::SyncSender<Op>, op: Op) -> bool {
    use tokio::runtime::{Handle, RuntimeFlavor};
    let on_multi_thread = Handle::try_current()
        .is_ok_and(|handle| handle.runtime_flavor() == RuntimeFlavor::MultiThread);
    if on_multi_thread {
        tokio::task::block_in_place(|| tx.send(op).is_ok())
    } else {
        tx.send(op).is_ok()
    }
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("History")
            .field("path", &self.inner.path)
            .field("write_errors", &self.write_errors())
            .finish()
    }
}
