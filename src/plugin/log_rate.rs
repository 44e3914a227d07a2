//! How fast one plugin instance may write to the daemon's log. Each line is
//! already capped in size (`limits::MAX_LOG_MESSAGE`, `stdio`'s line cap),
//! but a plugin logging in a loop would still flood the journal: fill the
//! disk it lives on, rotate away every other line the operator needs, and
//! cost the daemon a write per line. So every plugin store (a run's
//! strategy, each tool of the run) gets a token bucket shared by its
//! `logging.log` and its stdout and stderr. Past it, lines are dropped and
//! counted, and one line saying how many were dropped is logged with the
//! plugin's next line a second or more after the first drop (so at most
//! once a second while the flood goes on), and when the store goes away.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::sync::LockExt;

/// Lines a plugin may log at once after a quiet spell: enough for a
/// chatty strategy's start-up, or a tool dumping a short backtrace.
pub const LOG_BURST: u32 = 100;
/// Lines per second a plugin may keep logging: far above what a step
/// (seconds, each a few log lines) needs, far below a loop's millions.
pub const LOG_LINES_PER_SEC: u32 = 20;
/// How often, at most, the "N log lines dropped" line is logged while a
/// plugin keeps logging past its rate: it must not become a flood itself.
pub const DROPPED_REPORT_EVERY: Duration = Duration::from_secs(1);

/// The bucket, with the time passed in, so it can be tested without sleeps.
struct Bucket {
    tokens: f64,
    refilled: Instant,
    /// Lines dropped since the last report.
    dropped: u64,
    /// When the first of them was dropped: the report is due a second
    /// later, so reports are at least a second apart.
    dropping_since: Option<Instant>,
}

impl Bucket {
    fn new(now: Instant) -> Self {
        Bucket {
            tokens: f64::from(LOG_BURST),
            refilled: now,
            dropped: 0,
            dropping_since: None,
        }
    }

    /// Whether a line arriving at `now` is logged, and how many dropped
    /// lines to report first (due [`DROPPED_REPORT_EVERY`] after the first
    /// of them was dropped).
    fn take(&mut self, now: Instant) -> (bool, Option<u64>) {
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.tokens =
            (self.tokens + elapsed * f64::from(LOG_LINES_PER_SEC)).min(f64::from(LOG_BURST));
        self.refilled = now;
        let logged = self.tokens >= 1.0;
        if logged {
            self.tokens -= 1.0;
        } else {
            self.dropped += 1;
            self.dropping_since.get_or_insert(now);
        }
        let due = self
            .dropping_since
            .is_some_and(|since| now.saturating_duration_since(since) >= DROPPED_REPORT_EVERY);
        let report = due.then(|| {
            self.dropping_since = None;
            std::mem::take(&mut self.dropped)
        });
        (logged, report)
    }
}

/// One plugin store's log budget, shared by its `logging.log` import and
/// its stdout and stderr streams.
pub struct LogRate {
    plugin: Arc<str>,
    bucket: Mutex<Bucket>,
}

impl LogRate {
    /// A full bucket for `plugin`'s new store.
    pub fn new(plugin: Arc<str>) -> Arc<Self> {
        Arc::new(LogRate {
            plugin,
            bucket: Mutex::new(Bucket::new(Instant::now())),
        })
    }

    /// The plugin whose lines these are.
    pub fn plugin(&self) -> &Arc<str> {
        &self.plugin
    }

    /// Whether one more line of the plugin's may be logged now; logs the
    /// count of dropped lines first when it is due.
    pub fn admit(&self) -> bool {
        let (logged, report) = self.bucket.lock_unpoisoned().take(Instant::now());
        if let Some(n) = report {
            self.report(n);
        }
        logged
    }

    fn report(&self, n: u64) {
        tracing::warn!(
            plugin = %self.plugin,
            dropped = n,
            "plugin `{}`: {n} log lines dropped (rate limit)",
            self.plugin
        );
    }
}

impl Drop for LogRate {
    /// Lines dropped since the last report are reported when the store
    /// ends, so a flood at the end of a run is not silent.
    fn drop(&mut self) {
        let dropped = self.bucket.lock_unpoisoned().dropped;
        if dropped > 0 {
            self.report(dropped);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logged(bucket: &mut Bucket, now: Instant, lines: u32) -> (u32, Vec<u64>) {
        let mut n = 0;
        let mut reports = Vec::new();
        for _ in 0..lines {
            let (ok, report) = bucket.take(now);
            n += u32::from(ok);
            reports.extend(report);
        }
        (n, reports)
    }

    #[test]
    fn a_burst_passes_then_lines_are_dropped_and_counted_once_a_second() {
        let t0 = Instant::now();
        let mut b = Bucket::new(t0);
        let (n, reports) = logged(&mut b, t0, 100_000);
        assert_eq!(n, LOG_BURST, "the burst, then nothing");
        assert!(reports.is_empty(), "no report within the first second");
        // A second later: a second's worth of lines, and one report of all
        // that was dropped before the first of them.
        let t1 = t0 + Duration::from_secs(1);
        let (ok, report) = b.take(t1);
        assert!(ok);
        assert_eq!(report, Some(100_000 - u64::from(LOG_BURST)));
        let (n, reports) = logged(&mut b, t1, 1000);
        assert_eq!(n, LOG_LINES_PER_SEC - 1);
        assert!(reports.is_empty(), "at most one report a second");
    }

    #[test]
    fn a_sustained_flood_logs_the_rate_and_one_report_a_second() {
        let t0 = Instant::now();
        let mut b = Bucket::new(t0);
        let (mut total, mut reports) = (0, Vec::new());
        // 1000 lines a second for 10 seconds, 1 ms apart.
        for ms in 0..10_000u64 {
            let (ok, report) = b.take(t0 + Duration::from_millis(ms));
            total += u32::from(ok);
            reports.extend(report);
        }
        let most = LOG_BURST + 10 * LOG_LINES_PER_SEC;
        assert!(total <= most && total >= most - 2, "{total}");
        assert!(reports.len() <= 10, "{reports:?}");
        let dropped: u64 = reports.iter().sum::<u64>() + b.dropped;
        assert_eq!(
            dropped,
            10_000 - u64::from(total),
            "every dropped line is counted"
        );
    }

    #[test]
    fn a_plugin_within_the_rate_loses_nothing_and_a_pause_refills_the_burst() {
        let t0 = Instant::now();
        let mut b = Bucket::new(t0);
        for i in 0..600u64 {
            // 10 lines a second for a minute.
            let (ok, report) = b.take(t0 + Duration::from_millis(100 * i));
            assert!(ok && report.is_none(), "line {i}");
        }
        let later = t0 + Duration::from_secs(600);
        let (n, _) = logged(&mut b, later, LOG_BURST);
        assert_eq!(n, LOG_BURST);
        // After dropping, the next line after a quiet spell reports first.
        let (ok, _) = b.take(later);
        assert!(!ok);
        let (ok, report) = b.take(later + Duration::from_secs(5));
        assert!(ok);
        assert_eq!(report, Some(1));
    }
}
