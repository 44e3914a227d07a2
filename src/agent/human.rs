//! A run that waits for a person: a question (`human.ask`, the bundled
//! `ask_human` tool) or the approval of a tool call (`[agents.X] approve`).
//!
//! OpenManus's `ask_human` is an `input()` on the process's terminal, which
//! a service cannot have. Here the run puts what it waits for on its
//! [`HumanChannel`], and whoever can reach a person answers through the same
//! channel: the daemon's `POST /v1/runs/{id}/input` and `.../approve`
//! (which `agentd run` on a terminal sends for its user). The loop owns the rules (one wait at a time, the timeouts, the
//! events, the clock); the channel only pairs a wait with its answer.
//!
//! A strategy is one wasm call at a time, and so are the tools it invokes,
//! so a run waits for at most one thing at once: the channel holds one
//! pending wait, never a queue.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use crate::sync::LockExt;

/// `[agents.X] input_timeout` when unset: long enough for a person to come
/// back from lunch, short enough that a forgotten run frees its slot.
pub const DEFAULT_INPUT_TIMEOUT: Duration = Duration::from_secs(3600);
/// `[agents.X] approval_timeout` when unset; an unanswered approval is a
/// denial.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(3600);

/// Which tool calls wait for an operator's approval (`[agents.X] approve`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Approve {
    /// None: the default.
    #[default]
    Nothing,
    /// `approve = "all"`: every call.
    All,
    /// `approve = ["bash", ...]`: calls of these tools, by the name the model
    /// calls them (an MCP tool's `mcp__server__tool` included).
    Tools(Vec<String>),
}

impl Approve {
    /// Whether a call of `tool` must be approved first.
    pub fn needs(&self, tool: &str) -> bool {
        match self {
            Approve::Nothing => false,
            Approve::All => true,
            Approve::Tools(names) => names.iter().any(|n| n == tool),
        }
    }
}

/// What a run is waiting for, as `GET /v1/runs/{id}` shows it (`waiting`)
/// and a client needs it to answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Waiting {
    /// A question for a person: answer with `POST /v1/runs/{id}/input`.
    Input {
        /// The request's id, as in its `input_requested` event.
        id: String,
        /// The plugin that asked (`ask_human`, or a strategy).
        plugin: String,
        /// The question, verbatim.
        question: String,
        /// When the wait began (Unix ms).
        since_ms: i64,
        /// When it gives up: `input_timeout` after `since_ms`.
        deadline_ms: i64,
    },
    /// A tool call held for approval: `POST /v1/runs/{id}/approve`.
    Approval {
        /// The model's call id; the approval must name it.
        call_id: String,
        /// The tool, as the model called it.
        tool: String,
        /// The call's arguments as the model sent them.
        arguments: String,
        /// When the wait began (Unix ms).
        since_ms: i64,
        /// When the call is denied unless decided: `approval_timeout` after
        /// `since_ms`.
        deadline_ms: i64,
    },
}

impl Waiting {
    /// A copy with its question or arguments cut to `max` characters, for
    /// list rows (`GET /v1/runs/{id}` has them whole).
    pub fn cut(&self, max: usize) -> Waiting {
        let cut = |t: &str| match t.char_indices().nth(max) {
            Some((at, _)) => t[..at].to_string(),
            None => t.to_string(),
        };
        let mut w = self.clone();
        match &mut w {
            Waiting::Input { question, .. } => *question = cut(question),
            Waiting::Approval { arguments, .. } => *arguments = cut(arguments),
        }
        w
    }
}

/// An operator's decision on a held tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// The call runs.
    Approve,
    /// The call does not run; the model reads "denied by the operator".
    Deny,
}

/// The answer that ends a wait, with who gave it (the peer's uid from the
/// socket's credentials; `None` when the daemon could not read them).
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// The answer to a question.
    Text {
        /// The answer, verbatim.
        text: String,
        /// Who answered.
        by_uid: Option<u32>,
    },
    /// The decision on a held call.
    Decision {
        /// Approve or deny.
        decision: Decision,
        /// Why (a denial's reason is the model's observation).
        reason: Option<String>,
        /// Who decided.
        by_uid: Option<u32>,
    },
}

/// Why an answer was not taken.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReplyError {
    /// Nothing is waiting, or something else is: the message says what.
    #[error("{0}")]
    NotWaiting(String),
}

/// What a run's wait on the channel needs from the one that drives it:
/// with `[daemon] release_waiting`, the daemon gives the run's slot under
/// `max_concurrent_runs` back while it waits and takes one again before it
/// goes on. The default keeps the slot.
#[async_trait::async_trait]
pub trait WaitSlot: Send + Sync {
    /// The wait began.
    fn release(&self);
    /// The wait ended; resolves once the run may go on.
    async fn reacquire(&self);
}

/// Keeps the run's slot while it waits (`release_waiting = false`).
pub struct KeepSlot;

#[async_trait::async_trait]
impl WaitSlot for KeepSlot {
    fn release(&self) {}
    async fn reacquire(&self) {}
}

struct Pending {
    waiting: Waiting,
    reply: oneshot::Sender<Reply>,
}

/// One run's channel to a person: the run's wait on one side, the answer on
/// the other. The daemon keeps one per live run; `run --local` has none
/// (nobody can be asked there).
pub struct HumanChannel {
    pending: Mutex<Option<Pending>>,
    slot: Arc<dyn WaitSlot>,
    next_id: std::sync::atomic::AtomicU64,
}

impl Default for HumanChannel {
    fn default() -> Self {
        Self::new(Arc::new(KeepSlot))
    }
}

impl HumanChannel {
    /// A channel whose waits do what `slot` says with the run's slot.
    pub fn new(slot: Arc<dyn WaitSlot>) -> Self {
        HumanChannel {
            pending: Mutex::new(None),
            slot,
            next_id: std::sync::atomic::AtomicU64::new(1),
        }
    }

    /// What the run is waiting for now, if anything.
    pub fn waiting(&self) -> Option<Waiting> {
        self.pending
            .lock_unpoisoned()
            .as_ref()
            .map(|p| p.waiting.clone())
    }

    /// Answers the question the run is waiting on; with `id`, only if it
    /// is that question (`waiting.id`), so a late answer meant for a
    /// question that timed out never answers the next one.
    pub fn answer(
        &self,
        id: Option<&str>,
        text: String,
        by_uid: Option<u32>,
    ) -> Result<(), ReplyError> {
        self.deliver(
            |w| match w {
                Some(Waiting::Input { id: asked, .. }) if id.is_none_or(|id| id == asked) => Ok(()),
                Some(Waiting::Input { id: asked, .. }) => Err(ReplyError::NotWaiting(format!(
                    "the run waits for an answer to question `{asked}`, not `{}`",
                    id.unwrap_or_default()
                ))),
                other => Err(not_waiting_for("a question", other)),
            },
            Reply::Text { text, by_uid },
        )
    }

    /// Decides on the call `call_id` the run holds for approval.
    pub fn decide(
        &self,
        call_id: &str,
        decision: Decision,
        reason: Option<String>,
        by_uid: Option<u32>,
    ) -> Result<(), ReplyError> {
        self.deliver(
            |w| match w {
                Some(Waiting::Approval { call_id: held, .. }) if held == call_id => Ok(()),
                Some(Waiting::Approval {
                    call_id: held,
                    tool,
                    ..
                }) => Err(ReplyError::NotWaiting(format!(
                    "the run holds call `{held}` of `{tool}` for approval, not `{call_id}`"
                ))),
                other => Err(not_waiting_for("an approval", other)),
            },
            Reply::Decision {
                decision,
                reason,
                by_uid,
            },
        )
    }

    fn deliver(
        &self,
        fits: impl FnOnce(Option<&Waiting>) -> Result<(), ReplyError>,
        reply: Reply,
    ) -> Result<(), ReplyError> {
        let mut pending = self.pending.lock_unpoisoned();
        fits(pending.as_ref().map(|p| &p.waiting))?;
        let Some(p) = pending.take() else {
            return Err(not_waiting_for("an answer", None));
        };
        // The waiter may have given up this very moment (its timeout
        // fired, or the run was cancelled): the answer was then not taken,
        // and the caller must hear so rather than a 200 for nothing.
        p.reply.send(reply).map_err(|_| {
            ReplyError::NotWaiting(
                "the wait ended (timed out or cancelled) as the answer arrived; it was not taken"
                    .into(),
            )
        })
    }

    /// A fresh request id, unique within the run.
    pub(crate) fn next_id(&self) -> String {
        let n = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("input-{n}")
    }

    /// Puts `waiting` on the channel and waits at most `timeout` for its
    /// answer; `None` when nobody answered in time. `announce` runs once the
    /// wait can be answered (the `..._requested` event), so a client that
    /// sees the event can answer at once. Dropping the future (a cancel)
    /// takes the wait off the channel.
    pub(crate) async fn wait(
        &self,
        waiting: Waiting,
        timeout: Duration,
        announce: impl FnOnce(),
    ) -> Option<Reply> {
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = self.pending.lock_unpoisoned();
            *pending = Some(Pending { waiting, reply: tx });
        }
        let _clear = ClearOnDrop(self);
        announce();
        self.slot.release();
        let reply = tokio::time::timeout(timeout, rx)
            .await
            .ok()
            .and_then(Result::ok);
        // Taken off at once: an answer that comes later is refused, not
        // silently lost.
        self.pending.lock_unpoisoned().take();
        reply
    }

    /// After a wait, once its answer is recorded: takes a slot under
    /// `max_concurrent_runs` again if the wait gave it back
    /// (`release_waiting`). Apart from [`Self::wait`] so the decision is
    /// recorded when it was made, not when a slot came free.
    pub(crate) async fn take_slot_back(&self) {
        self.slot.reacquire().await;
    }
}

/// Takes a wait off the channel when its future is dropped mid-wait.
struct ClearOnDrop<'a>(&'a HumanChannel);

impl Drop for ClearOnDrop<'_> {
    fn drop(&mut self) {
        self.0.pending.lock_unpoisoned().take();
    }
}

fn not_waiting_for(what: &str, waiting: Option<&Waiting>) -> ReplyError {
    ReplyError::NotWaiting(match waiting {
        None => format!("the run is not waiting for {what}"),
        Some(Waiting::Input { question, .. }) => format!(
            "the run is waiting for an answer to a question ({}), not for {what}",
            preview(question)
        ),
        Some(Waiting::Approval { call_id, tool, .. }) => format!(
            "the run is waiting for the approval of call `{call_id}` of `{tool}`, not for {what}"
        ),
    })
}

/// The start of a question, for a message about it.
fn preview(text: &str) -> String {
    match text.char_indices().nth(80) {
        Some((at, _)) => format!("\"{}…\"", &text[..at]),
        None => format!("\"{text}\""),
    }
}

/// Formats a duration for "no answer within N" the way the config writes it.
pub fn human_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0 => format!("{}ms", d.as_millis()),
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question() -> Waiting {
        Waiting::Input {
            id: "input-1".into(),
            plugin: "ask_human".into(),
            question: "which file?".into(),
            since_ms: 0,
            deadline_ms: 1,
        }
    }

    #[tokio::test]
    async fn an_answer_ends_the_wait_and_a_second_is_refused() {
        let ch = Arc::new(HumanChannel::default());
        let waiter = {
            let ch = ch.clone();
            tokio::spawn(async move { ch.wait(question(), Duration::from_secs(5), || {}).await })
        };
        while ch.waiting().is_none() {
            tokio::task::yield_now().await;
        }
        assert!(ch.decide("c1", Decision::Approve, None, None).is_err());
        ch.answer(None, "a.txt".into(), Some(1000)).unwrap();
        let got = waiter.await.unwrap();
        assert_eq!(
            got,
            Some(Reply::Text {
                text: "a.txt".into(),
                by_uid: Some(1000)
            })
        );
        let again = ch.answer(None, "b".into(), None).unwrap_err();
        assert!(again.to_string().contains("not waiting"), "{again}");
    }

    #[tokio::test]
    async fn a_timeout_or_a_drop_takes_the_wait_off() {
        let ch = HumanChannel::default();
        assert_eq!(
            ch.wait(question(), Duration::from_millis(10), || {}).await,
            None
        );
        assert!(ch.waiting().is_none());
        {
            let fut = ch.wait(question(), Duration::from_secs(5), || {});
            tokio::pin!(fut);
            assert!(futures::poll!(&mut fut).is_pending());
            assert!(ch.waiting().is_some());
        }
        assert!(
            ch.waiting().is_none(),
            "a dropped wait stays on the channel"
        );
    }

    #[test]
    fn approval_must_name_the_held_call() {
        let ch = HumanChannel::default();
        let (tx, _rx) = oneshot::channel();
        *ch.pending.lock_unpoisoned() = Some(Pending {
            waiting: Waiting::Approval {
                call_id: "c1".into(),
                tool: "bash".into(),
                arguments: "{}".into(),
                since_ms: 0,
                deadline_ms: 1,
            },
            reply: tx,
        });
        let e = ch.decide("c2", Decision::Deny, None, None).unwrap_err();
        assert!(e.to_string().contains("`c1` of `bash`"), "{e}");
        assert!(ch.answer(None, "x".into(), None).is_err());
        ch.decide("c1", Decision::Deny, Some("no".into()), Some(0))
            .unwrap();
    }

    #[test]
    fn approve_matches_names() {
        assert!(!Approve::Nothing.needs("bash"));
        assert!(Approve::All.needs("terminate"));
        let some = Approve::Tools(vec!["bash".into()]);
        assert!(some.needs("bash") && !some.needs("python_execute"));
        assert_eq!(human_duration(Duration::from_secs(3600)), "1h");
        assert_eq!(human_duration(Duration::from_secs(90)), "90s");
        assert_eq!(human_duration(Duration::from_millis(300)), "300ms");
    }
}
