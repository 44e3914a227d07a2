//! The events of a run in flight, kept in memory once and shared by every
//! follower, so that any number of clients can follow it, each from
//! wherever it likes (`since`), without touching the database. Once the run
//! has ended and left memory the history serves its events, a page at a
//! time.
//!
//! What a follower costs is bounded whatever it does (security review M3):
//! it holds no copy of the log, only its position and a weak reference; it
//! is handed chunks of at most [`CHUNK_BYTES`] (shared `Bytes` when a line is
//! larger); hyper stops asking for chunks while its write buffer is full; a
//! follower that stops reading altogether is disconnected by the server's
//! write timeout; and one that reads, but falls more than
//! [`MAX_FOLLOWER_LAG`] behind the run after having caught up, gets a final
//! [`StreamError`] line and can reconnect with `since`. A slow follower of a
//! run that has ended does not keep the run's log alive: it continues from
//! the history.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Weak};

use crate::api::{StreamError, StreamErrorType};
use crate::sync::LockExt;
use bytes::Bytes;
use futures::Stream;
use tokio::sync::watch;

use super::history::History;

/// Lines are grouped into chunks up to this size (one larger line is sent
/// alone, without a copy).
pub const CHUNK_BYTES: usize = 64 << 10;

/// How far (in bytes of event lines) a follower that had caught up may fall
/// behind a run before it is dropped.
pub const MAX_FOLLOWER_LAG: u64 = 16 << 20;

/// Events read from the history per query when streaming an ended run.
const HISTORY_PAGE: u32 = 64;

struct Line {
    seq: u64,
    bytes: Bytes,
    /// Bytes of the log up to and including this line.
    end: u64,
}

pub struct EventLog {
    lines: Mutex<Vec<Line>>,
    /// (lines published, closed): followers wake on every change.
    progress: watch::Sender<(usize, bool)>,
}

impl Default for EventLog {
    fn default() -> Self {
        EventLog {
            lines: Mutex::new(Vec::new()),
            progress: watch::channel((0, false)).0,
        }
    }
}

/// A chunk for a follower and where it leaves the follower.
struct Chunk {
    bytes: Bytes,
    last_seq: u64,
    /// Bytes of the log after this chunk.
    rest: u64,
}

impl EventLog {
    /// `line` is one JSON document with its trailing newline; `seq` the
    /// event's, increasing.
    pub fn push(&self, seq: u64, line: Bytes) {
        let mut lines = self.lines.lock_unpoisoned();
        let end = lines.last().map_or(0, |l| l.end) + line.len() as u64;
        lines.push(Line {
            seq,
            bytes: line,
            end,
        });
        let n = lines.len();
        drop(lines);
        self.progress.send_modify(|p| p.0 = n);
    }

    /// No more events: followers get what is left and then the end.
    pub fn close(&self) {
        self.progress.send_modify(|p| p.1 = true);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lines.lock_unpoisoned().len()
    }

    /// The lines after `after`, up to [`CHUNK_BYTES`] (at least one), and
    /// how many bytes of the log were past `after`.
    fn chunk_after(&self, after: u64) -> Option<(Chunk, u64)> {
        let lines = self.lines.lock_unpoisoned();
        let start = lines.partition_point(|l| l.seq <= after);
        let first = lines.get(start)?;
        let total = lines.last().map_or(0, |l| l.end);
        let mut n = 1;
        let mut size = first.bytes.len();
        while let Some(next) = lines.get(start + n) {
            if size + next.bytes.len() > CHUNK_BYTES {
                break;
            }
            size += next.bytes.len();
            n += 1;
        }
        let taken = &lines[start..start + n];
        let last = &taken[n - 1];
        let bytes = if n == 1 {
            first.bytes.clone()
        } else {
            let mut out = Vec::with_capacity(size);
            for l in taken {
                out.extend_from_slice(&l.bytes);
            }
            Bytes::from(out)
        };
        // How far behind the follower was before this chunk.
        let behind = total - (first.end - first.bytes.len() as u64);
        Some((
            Chunk {
                bytes,
                last_seq: last.seq,
                rest: total - last.end,
            },
            behind,
        ))
    }

    fn is_closed(&self) -> bool {
        self.progress.borrow().1
    }
}

/// Where a follower is.
struct Follower {
    run_id: String,
    history: History,
    log: Weak<EventLog>,
    rx: Option<watch::Receiver<(usize, bool)>>,
    /// The seq of the last event sent.
    after: u64,
    follow: bool,
    /// Whether it has ever been handed everything there was.
    caught_up: bool,
    /// Lines read from the history and not yet sent.
    pending: VecDeque<(u64, Vec<u8>)>,
    done: bool,
}

/// The events of run `run_id` after `since` (0: all), then, with `follow`,
/// each new one until the run has ended. `log` is the run's live log while
/// it is in memory; without it (or once it is gone) the history serves.
pub fn follow(
    run_id: String,
    log: Option<&Arc<EventLog>>,
    history: History,
    since: u64,
    follow: bool,
) -> impl Stream<Item = Bytes> + Send {
    let state = Follower {
        run_id,
        history,
        rx: log.map(|l| l.progress.subscribe()),
        log: log.map(Arc::downgrade).unwrap_or_default(),
        after: since,
        follow,
        caught_up: false,
        pending: VecDeque::new(),
        done: false,
    };
    futures::stream::unfold(state, |mut st| async move {
        if st.done {
            return None;
        }
        let chunk = st.next_chunk().await?;
        Some((chunk, st))
    })
}

impl Follower {
    async fn next_chunk(&mut self) -> Option<Bytes> {
        loop {
            if let Some(log) = self.log.upgrade() {
                if let Some(rx) = self.rx.as_mut() {
                    rx.borrow_and_update();
                }
                if let Some((chunk, behind)) = log.chunk_after(self.after) {
                    if self.caught_up && behind > MAX_FOLLOWER_LAG {
                        self.done = true;
                        return Some(self.error_line(
                            "follower_too_slow",
                            format!(
                                "this follower fell more than {} MiB behind the run; reconnect with since={}",
                                MAX_FOLLOWER_LAG >> 20,
                                self.after
                            ),
                        ));
                    }
                    self.after = chunk.last_seq;
                    self.caught_up |= chunk.rest == 0;
                    return Some(chunk.bytes);
                }
                self.caught_up = true;
                if log.is_closed() || !self.follow {
                    return None;
                }
                drop(log);
                let changed = match self.rx.as_mut() {
                    Some(rx) => rx.changed().await.is_ok(),
                    None => false,
                };
                if !changed {
                    // The log is gone: the run ended and is in the history.
                    self.log = Weak::new();
                }
                continue;
            }
            return self.next_from_history().await;
        }
    }

    /// The run has left memory; everything it published is committed.
    async fn next_from_history(&mut self) -> Option<Bytes> {
        if self.pending.is_empty() {
            match self
                .history
                .event_lines(&self.run_id, self.after, HISTORY_PAGE)
                .await
            {
                Ok(lines) => self.pending.extend(lines),
                Err(e) => {
                    tracing::warn!(run_id = %self.run_id, error = %e, "cannot read a run's events");
                    self.done = true;
                    return Some(self.error_line(
                        "history_unavailable",
                        format!("cannot read the run's events: {e}"),
                    ));
                }
            }
        }
        let (seq, first) = self.pending.pop_front()?;
        self.after = seq;
        if first.len() >= CHUNK_BYTES {
            return Some(Bytes::from(first));
        }
        let mut out = first;
        while let Some((seq, line)) = self.pending.front() {
            if out.len() + line.len() > CHUNK_BYTES {
                break;
            }
            out.extend_from_slice(line);
            self.after = *seq;
            self.pending.pop_front();
        }
        Some(Bytes::from(out))
    }

    fn error_line(&self, code: &str, message: String) -> Bytes {
        let line = StreamError {
            kind: StreamErrorType::StreamError,
            code: code.to_string(),
            message,
            resume_since: self.after,
        };
        let mut json = serde_json::to_vec(&line).unwrap_or_default();
        json.push(b'\n');
        Bytes::from(json)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    fn line(seq: u64) -> Bytes {
        Bytes::from(format!("{seq}\n"))
    }

    fn history() -> (tempfile::TempDir, History) {
        let dir = tempfile::tempdir().expect("tempdir");
        let h = History::open(dir.path()).expect("history");
        (dir, h)
    }

    #[tokio::test]
    async fn a_late_follower_gets_every_line_then_the_end() {
        let (_dir, h) = history();
        let log = Arc::new(EventLog::default());
        log.push(1, line(1));
        let early =
            tokio::spawn(follow("r".into(), Some(&log), h.clone(), 0, true).collect::<Vec<_>>());
        log.push(2, line(2));
        let late = follow("r".into(), Some(&log), h.clone(), 0, true);
        let resumed = follow("r".into(), Some(&log), h.clone(), 2, true);
        log.push(3, line(3));
        log.close();
        let late: Vec<_> = late.collect().await;
        let resumed: Vec<_> = resumed.collect().await;
        let early = early.await.expect("follower task");
        assert_eq!(late.concat(), b"1\n2\n3\n");
        assert_eq!(early.concat(), b"1\n2\n3\n");
        assert_eq!(resumed.concat(), b"3\n", "since=2 resumes after 2");
    }

    #[tokio::test]
    async fn without_follow_the_stream_ends_at_the_present() {
        let (_dir, h) = history();
        let log = Arc::new(EventLog::default());
        log.push(1, line(1));
        let got: Vec<_> = follow("r".into(), Some(&log), h, 0, false).collect().await;
        assert_eq!(got.concat(), b"1\n");
        assert_eq!(log.len(), 1);
    }

    #[tokio::test]
    async fn followers_share_lines_and_get_bounded_chunks() {
        let (_dir, h) = history();
        let log = Arc::new(EventLog::default());
        let big = Bytes::from(vec![b'x'; CHUNK_BYTES * 3]);
        log.push(1, big.clone());
        for seq in 2..2000 {
            log.push(seq, Bytes::from(vec![b'y'; 100]));
        }
        log.close();
        let chunks: Vec<Bytes> = follow("r".into(), Some(&log), h, 0, true).collect().await;
        // The large line is the log's own allocation, not a copy.
        assert_eq!(chunks[0].as_ptr(), big.as_ptr());
        assert!(chunks[1..].iter().all(|c| c.len() <= CHUNK_BYTES));
        let total: usize = chunks.iter().map(Bytes::len).sum();
        assert_eq!(total, CHUNK_BYTES * 3 + 1998 * 100);
    }

    #[tokio::test]
    async fn a_follower_that_falls_too_far_behind_gets_a_final_error_line() {
        let (_dir, h) = history();
        let log = Arc::new(EventLog::default());
        log.push(1, line(1));
        let mut f = Box::pin(follow("r".into(), Some(&log), h, 0, true));
        assert_eq!(f.next().await.expect("first").as_ref(), b"1\n");
        // Caught up; now the run races ahead while it does not read.
        let mut seq = 2;
        let mut written = 0u64;
        while written <= MAX_FOLLOWER_LAG {
            log.push(seq, Bytes::from(vec![b'z'; 1 << 20]));
            written += 1 << 20;
            seq += 1;
        }
        let last = f.next().await.expect("error line");
        let e: StreamError = serde_json::from_slice(&last).expect("a StreamError line");
        assert_eq!(e.code, "follower_too_slow");
        assert_eq!(e.resume_since, 1);
        assert!(f.next().await.is_none(), "dropped after the error line");
    }

    #[tokio::test]
    async fn once_the_log_is_gone_the_history_serves_in_pages() {
        let (_dir, h) = history();
        let log = Arc::new(EventLog::default());
        let mut f = Box::pin(follow("r".into(), Some(&log), h.clone(), 0, true));
        h.create_run(&crate::api::RunSummary::queued("r", 1, "a", "x"));
        for seq in 1..=200u64 {
            let json =
                serde_json::to_string(&crate::agent::RunEvent::StuckDetected { step: seq as u32 })
                    .expect("json");
            h.append_event_json("r", seq, 0, json);
        }
        h.flush().await.expect("flush");
        // The run left memory without this follower having read anything.
        drop(log);
        let mut n = 0;
        while let Some(chunk) = f.next().await {
            n += chunk.iter().filter(|b| **b == b'\n').count();
        }
        assert_eq!(n, 200);
    }
}
