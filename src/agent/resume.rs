//! Starting a run from where an earlier one stopped, and the checkpoint
//! that says where that is.
//!
//! The loop knows nothing of where a run is kept: it reports the end of each
//! completed step as a [`Checkpoint`] to a hook its caller supplies (the
//! daemon makes the step durable there), and it starts from a [`Prior`]
//! when its caller gives one (the daemon reads it from the history). A step
//! that had not completed is not part of a checkpoint, so its messages (an
//! assistant message whose tool calls have no answers yet, say) are never
//! carried over: a real server would refuse them.

use std::sync::Arc;

use futures::future::BoxFuture;

use crate::chat::Message;

/// Where a resumed run starts: the earlier run's transcript up to the end of
/// its last completed step, and what its loop had decided by then.
#[derive(Debug, Clone, PartialEq)]
pub struct Prior {
    /// The earlier run's transcript up to its last checkpoint, oldest
    /// first. The first message is the run's request (a `user` message):
    /// it is pinned outside the window, as in any run; the others go
    /// through the memory window in order, so the window is the one the
    /// earlier run had at that point.
    pub messages: Vec<Message>,
    /// Steps the earlier run completed: this run's first step is
    /// `steps + 1`, so events and `Step k:` lines continue its numbering.
    pub steps: u32,
    /// The earlier run's last completed step repeated an action: the next
    /// step's prompt carries the stuck warning, as it would have.
    pub stuck_warning: bool,
    /// Steps this run may take after `steps`; its step limit is `steps +
    /// more_steps`. `None`: what is left of the agent's resolved step limit
    /// (`max_steps - steps`), at least 1.
    pub more_steps: Option<u32>,
    /// The earlier run's plan at that point (the last one published up to
    /// its last completed step): this run's `plan.current()` until its
    /// strategy publishes another, as the contract promises.
    pub plan: Option<crate::plan::Plan>,
}

impl Prior {
    /// The step limit of the resumed run, given the agent's resolved
    /// `max_steps`.
    pub fn step_limit(&self, max_steps: u32) -> u32 {
        let more = self
            .more_steps
            .unwrap_or_else(|| max_steps.saturating_sub(self.steps))
            .max(1);
        self.steps.saturating_add(more)
    }
}

/// The end of a completed step: what a later run needs to resume after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Checkpoint {
    /// Steps completed so far (the number of the step that just ended).
    pub steps: u32,
    /// Messages of the transcript up to the end of that step, counted from
    /// the run's first message (a resumed run's include the ones it
    /// started from): a resumed run carries exactly these.
    pub messages: u32,
    /// The step repeated an action: the next step's prompt carries the
    /// stuck warning.
    pub stuck_warning: bool,
}

/// Called at the end of each completed step, before the next step begins;
/// the loop awaits it. The daemon makes the step durable here (its messages
/// and the checkpoint committed), so a daemon killed during the next step
/// loses no completed step. It must not fail the run: a hook that cannot
/// make the step durable (a full disk) says so in the log and returns.
pub type CheckpointHook = Arc<dyn Fn(Checkpoint) -> BoxFuture<'static, ()> + Send + Sync>;

#[cfg(test)]
mod tests {
    use super::*;

    fn prior(steps: u32, more_steps: Option<u32>) -> Prior {
        Prior {
            messages: vec![Message::user("task")],
            steps,
            stuck_warning: false,
            more_steps,
            plan: None,
        }
    }

    #[test]
    fn the_default_budget_is_what_is_left_and_at_least_one_step() {
        assert_eq!(prior(3, None).step_limit(10), 10);
        assert_eq!(prior(10, None).step_limit(10), 11);
        assert_eq!(prior(12, None).step_limit(10), 13);
        assert_eq!(prior(3, Some(2)).step_limit(10), 5);
        assert_eq!(prior(3, Some(0)).step_limit(10), 4);
        assert_eq!(prior(u32::MAX, Some(5)).step_limit(10), u32::MAX);
    }
}
