//! The step deadline counts time spent in plugin code, not time spent
//! waiting for the LLM or for a sandbox command: those have their own
//! timeouts (`[llm] timeout` with retries, `[sandbox] timeout`), and a slow
//! model must not be reported as a runaway plugin. Only the host's imports
//! pause it, so it lives with them; it also knows which plugin is running
//! (the strategy, or a tool it invoked), to name the culprit of an overrun.

use crate::sync::LockExt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

#[derive(Default)]
struct State {
    /// The plugin executing now; `None` before the first step.
    running: Option<Arc<str>>,
    started: Option<Instant>,
    /// Nested pauses (a tool's sandbox call inside the strategy's
    /// `invoke-tool` is one level).
    depth: u32,
    paused_since: Option<Instant>,
    paused_total: Duration,
}

/// Measures a step's plugin time, minus host waits, and remembers which
/// plugin is executing; one per run, shared by the strategy's store and its
/// tools' stores.
#[derive(Default)]
pub struct StepClock {
    state: Mutex<State>,
}

impl StepClock {
    /// A stopped clock: [`StepClock::start`] starts it at each step.
    pub fn new() -> Arc<Self> {
        Arc::new(StepClock::default())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock_unpoisoned()
    }

    /// Starts the clock for a new step of `strategy`.
    pub fn start(&self, strategy: &Arc<str>) {
        *self.lock() = State {
            running: Some(strategy.clone()),
            started: Some(Instant::now()),
            ..State::default()
        };
    }

    /// The plugin executing now, to name it when a step overruns.
    pub fn running(&self) -> Option<Arc<str>> {
        self.lock().running.clone()
    }

    /// Marks `plugin` as executing until the guard is dropped (a tool the
    /// strategy invoked); its time still counts.
    pub fn enter(self: &Arc<Self>, plugin: Arc<str>) -> Entered {
        let previous = self.lock().running.replace(plugin);
        Entered {
            clock: self.clone(),
            previous,
        }
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

/// Stops the step clock while alive (from [`StepClock::pause`]); pauses nest,
/// and the time counts again when the outermost guard is dropped.
pub struct Paused(Arc<StepClock>);

/// Restores the plugin that ran before [`StepClock::enter`].
pub struct Entered {
    clock: Arc<StepClock>,
    previous: Option<Arc<str>>,
}

impl Drop for Entered {
    fn drop(&mut self) {
        self.clock.lock().running = self.previous.take();
    }
}

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
        clock.start(&"s".into());
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

    #[test]
    fn the_running_plugin_is_the_innermost_entered() {
        let clock = StepClock::new();
        clock.start(&"strategy".into());
        {
            let _tool = clock.enter("tool".into());
            assert_eq!(clock.running().as_deref(), Some("tool"));
        }
        assert_eq!(clock.running().as_deref(), Some("strategy"));
    }
}
