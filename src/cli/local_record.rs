//! The record `agentd run --local --json` prints: the same shape as the
//! daemon's `GET /v1/runs/{id}` ([`RunView`]), so a script reads one record
//! whichever way the run was made.
//!
//! It is built the way the daemon builds its own, from the run's event and
//! message sinks as things happen: the transcript is every message the run
//! produced, in order, not the memory window the agent holds at the end
//! (which `max_messages` cuts), and nothing in the agent core changes for it.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::agent::{EventSink, MessageSink, RunEvent, RunRecord};

use crate::api::{RunState, RunSummary, RunView};
use crate::chat::{Kept, Message};
use crate::sync::LockExt;
use crate::time::now_ms;

pub struct LocalRecord {
    summary: Mutex<RunSummary>,
    messages: Mutex<Vec<Message>>,
}

impl LocalRecord {
    /// A record for a run about to be made. `seq` is 0: it orders runs in
    /// the daemon's history, and a local run is in none.
    pub fn new(id: &str, agent: &str, request: &str) -> Arc<Self> {
        Arc::new(LocalRecord {
            summary: Mutex::new(RunSummary::queued(id, 0, agent, request)),
            messages: Mutex::new(Vec::new()),
        })
    }

    fn summary(&self) -> MutexGuard<'_, RunSummary> {
        self.summary.lock_unpoisoned()
    }

    /// The run is about to start (the daemon's moment of leaving the queue).
    pub fn start(&self) {
        let mut s = self.summary();
        s.state = RunState::Running;
        s.started_at_ms = Some(now_ms());
    }

    /// Passes every event on to `then` after noting what the record keeps
    /// of it (the step reached and the step limit, as the daemon does).
    pub fn event_sink(self: &Arc<Self>, then: EventSink) -> EventSink {
        let me = self.clone();
        Arc::new(move |event: &RunEvent| {
            match event {
                RunEvent::RunStarted { max_steps, .. } => me.summary().max_steps = Some(*max_steps),
                RunEvent::StepStarted { step, max_steps } => {
                    let mut s = me.summary();
                    s.steps = *step;
                    s.max_steps = Some(*max_steps);
                }
                _ => {}
            }
            then(event);
        })
    }

    /// Keeps every message as it enters the run's memory, before the
    /// sliding window can drop it.
    pub fn message_sink(self: &Arc<Self>) -> MessageSink {
        let me = self.clone();
        Arc::new(move |message: &Arc<Kept>| {
            me.messages.lock_unpoisoned().push((***message).clone());
        })
    }

    /// The ended run's record, from what the agent returned. The record's
    /// own `messages` (the final window) are not used: the sink has them all.
    pub fn finish(&self, record: &RunRecord) -> RunView {
        let summary = {
            let mut s = self.summary();
            s.end(record);
            s.clone()
        };
        let messages = self.messages.lock_unpoisoned().clone();
        RunView {
            summary,
            plan: record.plan.clone(),
            paging: crate::api::MessagePaging::whole(messages.len()),
            messages,
            files: record.files.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::Outcome;

    #[test]
    fn the_record_keeps_every_message_and_the_run_s_times() {
        let record = LocalRecord::new("r1", "toolcall", "hi");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let seen2 = seen.clone();
        let events = record.event_sink(Arc::new(move |e: &RunEvent| {
            seen2.lock().expect("lock").push(e.clone())
        }));
        let messages = record.message_sink();
        record.start();
        events(&RunEvent::StepStarted {
            step: 1,
            max_steps: 7,
        });
        for text in ["hi", "a", "b"] {
            messages(&Arc::new(Kept::new(Message::user(text))));
        }
        let view = record.finish(&RunRecord {
            id: "r1".into(),
            agent: "toolcall".into(),
            request: "hi".into(),
            outcome: Outcome::MaxSteps,
            steps: 1,
            result: "Step 1: x".into(),
            error: None,
            // The final window: not what the record shows.
            messages: vec![Message::user("b")],
            usage: Default::default(),
            plan: None,
            files: None,
        });
        assert_eq!(seen.lock().expect("lock").len(), 1, "events pass through");
        let s = &view.summary;
        assert_eq!(s.state, RunState::Ended);
        assert_eq!(s.outcome, Some(Outcome::MaxSteps));
        assert_eq!(s.max_steps, Some(7));
        assert_eq!(s.result.as_deref(), Some("Step 1: x"));
        let started = s.started_at_ms.expect("started");
        assert!(s.created_at_ms <= started && started <= s.ended_at_ms.expect("ended"));
        let texts: Vec<_> = view
            .messages
            .iter()
            .map(|m| m.content.clone().unwrap_or_default())
            .collect();
        assert_eq!(texts, ["hi", "a", "b"]);
    }
}
