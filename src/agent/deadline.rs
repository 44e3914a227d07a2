//! The step deadline counts time spent in plugin code, not time spent
//! waiting for the LLM or for a sandbox command: those have their own
//! timeouts (`[llm] timeout` with retries, `[sandbox] timeout`), and a slow
//! model must not be reported as a runaway plugin.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

#[derive(Default)]
struct State {
    started: Option<Instant>,
    /// Nested pauses (a tool's sandbox call inside the strategy's
    /// `invoke-tool` is one level).
    depth: u32,
    paused_since: Option<Instant>,
    paused_total: Duration,
}

#[derive(Default)]
pub struct StepClock {
    state: Mutex<State>,
}

impl StepClock {
    pub fn new() -> Arc<Self> {
        Arc::new(StepClock::default())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts the clock for a new step.
    pub fn start(&self) {
        *self.lock() = State {
            started: Some(Instant::now()),
            ..State::default()
        };
    }

    /// Time spent outside host waits since [`StepClock::start`].
    pub fn guest_time(&self) -> Duration {
        let st = self.lock();
        let now = Instant::now();
        let Some(started) = st.started else {
            return Duration::ZERO;
        };
        let current_pause = st.paused_since.map_or(Duration::ZERO, |p| now - p);
        (now - started).saturating_sub(st.paused_total + current_pause)
    }

    /// Stops the clock until the guard is dropped (also when the future
    /// holding it is dropped).
    pub fn pause(self: &Arc<Self>) -> Paused {
        let mut st = self.lock();
        if st.depth == 0 {
            st.paused_since = Some(Instant::now());
        }
        st.depth += 1;
        Paused(self.clone())
    }
}

pub struct Paused(Arc<StepClock>);

impl Drop for Paused {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        st.depth = st.depth.saturating_sub(1);
        if st.depth == 0 {
            if let Some(since) = st.paused_since.take() {
                st.paused_total += since.elapsed();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paused_time_does_not_count() {
        let clock = StepClock::new();
        clock.start();
        {
            let _outer = clock.pause();
            let _inner = clock.pause();
            std::thread::sleep(Duration::from_millis(60));
        }
        std::thread::sleep(Duration::from_millis(20));
        let t = clock.guest_time();
        assert!(t >= Duration::from_millis(20), "{t:?}");
        assert!(t < Duration::from_millis(60), "{t:?}");
    }
}
