use std::time::Duration;

/// Exponential backoff. The defaults suit hosted APIs; tests and local
/// servers can shorten them in `[llm]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 4,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// Delay before retry number `attempt` (0-based). A server's
    /// `Retry-After` wins, capped so a hostile value cannot park a run.
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(after) = retry_after {
            return after.min(self.max_backoff);
        }
        let factor = 2u32.saturating_pow(attempt.min(16));
        self.initial_backoff
            .saturating_mul(factor)
            .min(self.max_backoff)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        let p = RetryPolicy {
            max_retries: 5,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(350),
        };
        assert_eq!(p.delay(0, None), Duration::from_millis(100));
        assert_eq!(p.delay(1, None), Duration::from_millis(200));
        assert_eq!(p.delay(2, None), Duration::from_millis(350));
        assert_eq!(
            p.delay(0, Some(Duration::from_millis(250))),
            Duration::from_millis(250)
        );
        assert_eq!(p.delay(0, Some(Duration::from_secs(99))), p.max_backoff);
    }
}
