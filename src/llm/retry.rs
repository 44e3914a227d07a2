//! When a failed chat request is tried again, and after how long.
//!
//! Two budgets, because the failures differ in cost: a connection error or an
//! overloaded server (408, 409, 429, 5xx) costs the server nothing, so it is
//! retried up to `max_retries` times; a request timeout may mean the server
//! generated for the whole `timeout` and will do so again, so it is retried
//! only `timeout_retries` times.

use std::time::{Duration, SystemTime};

use super::error::LlmError;

/// Exponential backoff with full jitter. The defaults suit hosted APIs;
/// tests and local servers can shorten them in `[llm]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt, for connection errors and retryable
    /// statuses.
    pub max_retries: u32,
    /// Retries after a request timed out, counted apart from `max_retries`.
    pub timeout_retries: u32,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// The longest `Retry-After` honoured (`[llm] retry_max_wait`). A server
    /// asking for more fails the request rather than being retried early.
    pub max_wait: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 4,
            timeout_retries: 1,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            max_wait: Duration::from_secs(120),
        }
    }
}

/// Retries spent so far on one request, per budget.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Attempts {
    pub retries: u32,
    pub timeouts: u32,
}

/// What to do after a failed attempt.
#[derive(Debug)]
pub(crate) enum Next {
    Retry { delay: Duration, error: LlmError },
    Fail(LlmError),
}

impl RetryPolicy {
    /// The upper bound of the delay before retry number `attempt` (0-based):
    /// `initial_backoff * 2^attempt`, capped at `max_backoff`.
    pub fn backoff_ceiling(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.min(16));
        self.initial_backoff
            .saturating_mul(factor)
            .min(self.max_backoff)
    }

    /// A delay drawn uniformly from `[0, backoff_ceiling(attempt)]` ("full
    /// jitter"): runs that failed together, as 64 runs hit by one 429 do,
    /// spread their retries instead of coming back in lockstep.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let ceiling = u64::try_from(self.backoff_ceiling(attempt).as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(fastrand::u64(0..=ceiling))
    }

    /// Whether `error` is retried given the retries already spent, and after
    /// how long. A server's `Retry-After` is honoured (it knows when it will
    /// have room) as long as it is within `max_wait`, plus a random spread of
    /// up to one backoff step: runs refused by one 429 together must not all
    /// come back at the same instant.
    pub(crate) fn next(&self, error: LlmError, spent: &mut Attempts) -> Next {
        if !error.is_retryable() {
            return Next::Fail(error);
        }
        let attempt = spent.retries + spent.timeouts;
        if matches!(error, LlmError::Timeout(_)) {
            if spent.timeouts >= self.timeout_retries {
                return Next::Fail(error);
            }
            spent.timeouts += 1;
            return Next::Retry {
                delay: self.backoff(attempt),
                error,
            };
        }
        if spent.retries >= self.max_retries {
            return Next::Fail(error);
        }
        let delay = match error.retry_after() {
            Some(asked) if asked > self.max_wait => {
                return Next::Fail(match error {
                    LlmError::Status {
                        status, message, ..
                    } => LlmError::RetryAfterTooLong {
                        status,
                        message,
                        asked,
                        max_wait: self.max_wait,
                    },
                    other => other,
                })
            }
            Some(asked) => {
                let spread = self.backoff(attempt);
                asked.saturating_add(spread).min(self.max_wait.max(asked))
            }
            None => self.backoff(attempt),
        };
        spent.retries += 1;
        Next::Retry { delay, error }
    }
}

/// A `Retry-After` header value: delta-seconds (`120`; fractions, as some
/// servers send, are accepted) or an HTTP-date, read relative to `now`. A
/// date in the past means "now". Anything else is ignored, as if absent.
pub(crate) fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds).ok();
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_retries: 3,
            timeout_retries: 1,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(350),
            max_wait: Duration::from_secs(5),
        }
    }

    fn status(code: u16, retry_after: Option<Duration>) -> LlmError {
        LlmError::Status {
            status: code,
            message: "busy".into(),
            retry_after,
        }
    }

    #[test]
    fn the_backoff_ceiling_doubles_and_caps() {
        let p = policy();
        assert_eq!(p.backoff_ceiling(0), Duration::from_millis(100));
        assert_eq!(p.backoff_ceiling(1), Duration::from_millis(200));
        assert_eq!(p.backoff_ceiling(2), Duration::from_millis(350));
        assert_eq!(p.backoff_ceiling(u32::MAX), Duration::from_millis(350));
    }

    #[test]
    fn backoff_has_full_jitter() {
        let p = policy();
        for attempt in 0..4 {
            let draws: Vec<Duration> = (0..200).map(|_| p.backoff(attempt)).collect();
            assert!(
                draws.iter().all(|d| *d <= p.backoff_ceiling(attempt)),
                "attempt {attempt}: a delay above the ceiling"
            );
            let first = draws[0];
            assert!(
                draws.iter().any(|d| *d != first),
                "attempt {attempt}: 200 equal delays are lockstep, not jitter"
            );
            // Full jitter spreads over the whole range, not just near the top.
            let half = p.backoff_ceiling(attempt) / 2;
            assert!(draws.iter().any(|d| *d < half), "attempt {attempt}");
        }
    }

    #[test]
    fn retryable_statuses() {
        for code in [408, 409, 429, 500, 502, 503, 504] {
            assert!(status(code, None).is_retryable(), "{code}");
        }
        for code in [400, 401, 403, 404, 413, 422] {
            assert!(!status(code, None).is_retryable(), "{code}");
        }
    }

    #[test]
    fn retries_stop_after_max_retries() {
        let p = policy();
        let mut spent = Attempts::default();
        for _ in 0..3 {
            assert!(matches!(
                p.next(status(503, None), &mut spent),
                Next::Retry { .. }
            ));
        }
        assert!(matches!(
            p.next(status(503, None), &mut spent),
            Next::Fail(_)
        ));
        assert!(matches!(
            p.next(status(400, None), &mut Attempts::default()),
            Next::Fail(_)
        ));
    }

    #[test]
    fn timeouts_have_their_own_budget() {
        let p = policy();
        let timeout = || LlmError::Timeout(Duration::from_secs(1));
        let mut spent = Attempts::default();
        assert!(matches!(p.next(timeout(), &mut spent), Next::Retry { .. }));
        assert!(
            matches!(
                p.next(timeout(), &mut spent),
                Next::Fail(LlmError::Timeout(_))
            ),
            "one timeout retry, not max_retries"
        );
        // Other failures still have their whole budget.
        assert!(matches!(
            p.next(status(500, None), &mut spent),
            Next::Retry { .. }
        ));
        assert_eq!(
            spent,
            Attempts {
                retries: 1,
                timeouts: 1
            }
        );
        let none = RetryPolicy {
            timeout_retries: 0,
            ..p
        };
        assert!(matches!(
            none.next(timeout(), &mut Attempts::default()),
            Next::Fail(_)
        ));
    }

    #[test]
    fn retry_after_is_honoured_up_to_max_wait() {
        let p = policy();
        let asked = Duration::from_secs(4);
        let mut delays = Vec::new();
        for _ in 0..50 {
            match p.next(status(429, Some(asked)), &mut Attempts::default()) {
                Next::Retry { delay, .. } => delays.push(delay),
                other => panic!("expected a retry, got {other:?}"),
            }
        }
        // Never earlier than asked, never past max_wait, and spread: runs
        // refused together do not come back together.
        assert!(
            delays.iter().all(|d| *d >= asked && *d <= p.max_wait),
            "{delays:?}"
        );
        assert!(delays.iter().any(|d| *d != delays[0]), "{delays:?}");
        match p.next(
            status(429, Some(Duration::from_secs(6))),
            &mut Attempts::default(),
        ) {
            Next::Fail(e @ LlmError::RetryAfterTooLong { .. }) => {
                assert!(!e.is_retryable());
                let msg = e.to_string();
                assert!(msg.contains("HTTP 429: busy"), "{msg}");
                assert!(msg.contains("after 6 s"), "{msg}");
                assert!(msg.contains("[llm] retry_max_wait (5 s)"), "{msg}");
            }
            other => panic!("expected a failure, got {other:?}"),
        }
    }

    #[test]
    fn retry_after_in_seconds_or_http_date() {
        let now = httpdate::parse_http_date("Wed, 21 Oct 2015 07:28:00 GMT").expect("date");
        assert_eq!(
            parse_retry_after("120", now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            parse_retry_after(" 0.5 ", now),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:02 GMT", now),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:27:00 GMT", now),
            Some(Duration::ZERO),
            "a date in the past means now"
        );
        assert_eq!(parse_retry_after("-3", now), None);
        assert_eq!(parse_retry_after("soon", now), None);
    }
}
