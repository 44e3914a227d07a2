//! The events of a run in flight, kept in memory so that any number of
//! clients can follow it, each from the first event, without touching the
//! database. Once the run has ended the history serves its events.

use std::sync::{Arc, Mutex};

use crate::sync::LockExt;
use bytes::Bytes;
use futures::Stream;
use tokio::sync::watch;

pub struct EventLog {
    lines: Mutex<Vec<Bytes>>,
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

impl EventLog {
    /// `line` is one JSON document with its trailing newline.
    pub fn push(&self, line: Bytes) {
        let mut lines = self.lines.lock_unpoisoned();
        lines.push(line);
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

    fn batch(&self, from: usize) -> Vec<Bytes> {
        let lines = self.lines.lock_unpoisoned();
        lines.get(from..).map(<[Bytes]>::to_vec).unwrap_or_default()
    }

    /// Every event from the first, then each new one as it is pushed, until
    /// the log is closed. With `follow` false, only what is there now.
    pub fn follow(self: Arc<Self>, follow: bool) -> impl Stream<Item = Bytes> + Send {
        let rx = self.progress.subscribe();
        let state = (self, rx, 0usize, false);
        futures::stream::unfold(state, move |(log, mut rx, next, done)| async move {
            if done {
                return None;
            }
            loop {
                let (published, closed) = *rx.borrow_and_update();
                if published > next {
                    let batch = log.batch(next);
                    let next = next + batch.len();
                    let chunk = Bytes::from(batch.concat());
                    return Some((chunk, (log, rx, next, false)));
                }
                if closed || !follow {
                    return None;
                }
                if rx.changed().await.is_err() {
                    return None;
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    #[tokio::test]
    async fn a_late_follower_gets_every_line_then_the_end() {
        let log = Arc::new(EventLog::default());
        log.push(Bytes::from_static(b"1\n"));
        let early = tokio::spawn(log.clone().follow(true).collect::<Vec<_>>());
        log.push(Bytes::from_static(b"2\n"));
        let late = log.clone().follow(true);
        log.push(Bytes::from_static(b"3\n"));
        log.close();
        let late: Vec<_> = late.collect().await;
        let early = early.await.expect("follower task");
        assert_eq!(late.concat(), b"1\n2\n3\n");
        assert_eq!(early.concat(), b"1\n2\n3\n");
    }

    #[tokio::test]
    async fn without_follow_the_stream_ends_at_the_present() {
        let log = Arc::new(EventLog::default());
        log.push(Bytes::from_static(b"1\n"));
        let got: Vec<_> = log.clone().follow(false).collect().await;
        assert_eq!(got.concat(), b"1\n");
        assert_eq!(log.len(), 1);
    }
}
