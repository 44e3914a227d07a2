//! The runs the daemon hosts: creation, the queue under
//! `max_concurrent_runs`, following, cancelling, and shutting down.
//!
//! A run in flight lives here, in memory, so following it never waits on the
//! database; every change also goes to the history, held in the run's
//! `Staged` writes until the step ends (or sooner, see `history::staged`).
//! Its end is made durable (flushed) before the run leaves memory, so there
//! is no moment at which a run is in neither place.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn, Instrument};

use super::event_bus::EventBus;
use super::event_log::EventLog;
use super::history::{History, RunRow, Staged};
use super::paging::PageRequest;
use super::user_slots::{UserSlot, UserSlots};
use crate::agent::human::WaitSlot;
use crate::agent::{
    Agent, Checkpoint, CheckpointHook, HumanChannel, InputFile, MessageSink, Outcome, Prior,
    RunEvent, RunOptions, RunRecord,
};
use crate::api::{DaemonEvent, ResumeLinks, RunState, RunSummary, RunView};
use crate::chat::{Kept, Message, SharedJson};
use crate::plan::Plan;
use crate::sync::LockExt;
use crate::time::now_ms;

/// A run that has not left memory yet.
pub struct LiveRun {
    pub id: String,
    summary: Mutex<RunSummary>,
    /// The transcript, each message as its JSON: the allocation the run's
    /// memory encoded (`Kept`) and the history is handed too, shared, where
    /// a clone of each message beside it cost a deep copy per message. A
    /// `GET` decodes the page it answers. `None`: a message that could not
    /// be encoded keeps its place, so the ones after it keep their indexes;
    /// the history counts the error, the view skips it.
    messages: Mutex<Vec<Option<SharedJson>>>,
    /// The plan of the last `plan_changed` event, for the run's view.
    plan: Mutex<Option<Plan>>,
    pub events: Arc<EventLog>,
    cancel: CancellationToken,
    next_event: AtomicU64,
    publishing: Mutex<()>,
    /// Where the run's questions and held calls wait for an answer from
    /// `POST /v1/runs/{id}/input` and `.../approve`.
    human: Arc<HumanChannel>,
    /// The run's slot under `max_concurrent_runs`, once it has one.
    slot: Arc<RunSlot>,
    /// Set by a shutdown before it cancels the run: the run then ends
    /// `interrupted` (it can be resumed), not `cancelled`.
    interrupted: AtomicBool,
    /// The prices in force when the run was created: its cost.
    price: crate::llm::Price,
    /// Its history writes once it is under way, held until its step ends
    /// (`history::staged`).
    writes: Staged,
}

/// A live transcript's entry for a message's encoding (see
/// `LiveRun::messages`).
fn transcript_entry(json: &serde_json::Result<SharedJson>) -> Option<SharedJson> {
    json.as_ref().ok().cloned()
}

impl LiveRun {
    pub fn summary(&self) -> RunSummary {
        self.summary.lock_unpoisoned().clone()
    }

    /// Without cloning the summary: status polls read this for every run.
    pub fn state(&self) -> RunState {
        self.summary.lock_unpoisoned().state
    }

    /// One page of the transcript: never the whole of a long one, so a
    /// `GET` costs a bounded copy whatever the run has said.
    pub fn view(&self, page: PageRequest) -> RunView {
        let summary = self.summary();
        // Sized by their JSON, as the history's pages are; the page's
        // JSON is copied out under the lock and decoded after it.
        let (page_json, total) = {
            let messages = self.messages.lock_unpoisoned();
            let rest = messages.get(page.from as usize..).unwrap_or_default();
            let n = page.take(
                rest.iter()
                    .map(|json| json.as_ref().map_or(0, |j| j.get().len())),
            );
            (rest[..n].to_vec(), messages.len())
        };
        let paging = page.paging(page_json.len(), total);
        let messages = (page.from..)
            .zip(&page_json)
            .filter_map(|(index, json)| {
                // A message that could not be encoded (the history counted
                // the error) has no JSON.
                let Some(json) = json else {
                    warn!(run_id = %self.id, index,
                        "a message of the live transcript could not be encoded and is not shown");
                    return None;
                };
                match serde_json::from_str::<Message>(json.get()) {
                    Ok(message) => Some(message),
                    Err(e) => {
                        warn!(run_id = %self.id, index, error = %e,
                        "a message of the live transcript cannot be shown");
                        None
                    }
                }
            })
            .collect();
        RunView {
            summary,
            plan: self.plan.lock_unpoisoned().clone(),
            messages,
            paging,
            files: None,
        }
    }

    /// What `POST /v1/runs` answers: the first page (empty so far).
    pub fn first_view(&self) -> RunView {
        self.view(PageRequest::first())
    }

    /// A row of `GET /v1/runs`: the request cut as in the history's rows,
    /// without copying all of it first.
    pub fn list_row(&self) -> RunSummary {
        self.summary.lock_unpoisoned().list_row()
    }

    /// The run's channel to a person: `POST .../input` and `.../approve`
    /// answer through it.
    pub fn human(&self) -> &HumanChannel {
        &self.human
    }

    /// Sets the summary's cost from its usage, at the run's prices: the one
    /// place a run is costed.
    fn reprice(&self, s: &mut RunSummary) {
        s.cost = self.price.cost(s.usage);
    }

    /// Changes the summary and returns its row for the history: without
    /// the request (up to 1 MiB), which is not copied at every step.
    fn update(&self, f: impl FnOnce(&mut RunSummary)) -> RunRow {
        let mut s = self.summary.lock_unpoisoned();
        f(&mut s);
        RunRow::from(&*s)
    }
}

/// What a run's LLM answers cost: asked before each request (the daily
/// budgets, when the daemon has them) and told of each answer's usage,
/// which the run's summary counts as it goes (`show` of a running run).
/// Its row is saved with each answer's tokens: a daemon killed before the
/// next step still has them in the history, so the daily budgets count
/// them after the restart. So the save releases the run's held writes at
/// once (its step so far goes with it); row saves of one run coalesce in
/// the writer's queue.
struct RunUsage {
    daily: Option<Arc<dyn crate::agent::TokenBudget>>,
    run: Arc<LiveRun>,
}

impl crate::agent::TokenBudget for RunUsage {
    fn admit(&self) -> Result<(), String> {
        self.daily.as_ref().map_or(Ok(()), |d| d.admit())
    }

    fn charge(&self, usage: crate::chat::Usage) {
        if let Some(daily) = &self.daily {
            daily.charge(usage);
        }
        let row = self.run.update(|s| {
            s.usage += usage;
            self.run.reprice(s);
        });
        // Not held to the step's end: the tokens must survive a daemon
        // that dies during the tool calls that follow.
        self.run.writes.save_run(row);
        self.run.writes.release();
    }
}

/// A run's slot under `max_concurrent_runs`. With `[daemon]
/// release_waiting` a run waiting for a person gives it back, so runs
/// queued behind it can start, and takes one again (waiting like a queued
/// run) once answered.
struct RunSlot {
    slots: Arc<Semaphore>,
    permit: Mutex<Option<OwnedSemaphorePermit>>,
    release_waiting: bool,
}

#[async_trait::async_trait]
impl WaitSlot for RunSlot {
    fn release(&self) {
        if self.release_waiting {
            self.permit.lock_unpoisoned().take();
        }
    }

    async fn reacquire(&self) {
        if !self.release_waiting || self.permit.lock_unpoisoned().is_some() {
            return;
        }
        // Closed only never: the semaphore lives as long as the manager.
        let permit = self.slots.clone().acquire_owned().await.ok();
        *self.permit.lock_unpoisoned() = permit;
    }
}

/// How many live runs are in each state, for `GET /v1/status`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunCounts {
    pub queued: usize,
    /// Running, waiting included: both have started and hold a sandbox.
    pub active: usize,
    /// Of `active`, those waiting for a person.
    pub waiting: usize,
}

/// Why `POST /v1/runs` did not create a run.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error("agentd is shutting down and accepts no new runs")]
    ShuttingDown,
    #[error("{max} runs are already waiting for a slot ([daemon] max_queued_runs); try again when some have started")]
    QueueFull { max: usize },
    #[error("uid {} already has {max} runs waiting for a slot, the most one user may ([daemon] max_queued_runs_per_user); try again when some have started", uid.map_or_else(|| "unknown".to_string(), |u| u.to_string()))]
    UserQueueFull { max: usize, uid: Option<u32> },
    /// The run could not be recorded, so it was not started: a `201` promises
    /// that the run is on disk.
    #[error("{0}")]
    HistoryUnavailable(#[source] super::history::HistoryError),
    /// Today's tokens are at a daily budget (`daemon::budget`).
    #[error("{0}")]
    BudgetExhausted(#[source] super::budget::Exhausted),
}

#[derive(Debug, thiserror::Error)]
pub enum CancelError {
    #[error("run `{id}` already ended ({outcome})")]
    Ended { id: String, outcome: String },
}

pub struct RunManager {
    live: Mutex<HashMap<String, Arc<LiveRun>>>,
    slots: Arc<Semaphore>,
    history: History,
    tasks: TaskTracker,
    accepting: AtomicBool,
    bus: Arc<EventBus>,
    /// Runs created and not yet holding a slot. Counted apart from the
    /// `live` map so that the cap is checked and taken in one atomic step
    /// (concurrent `POST`s cannot overshoot it) without scanning the map.
    queued: Arc<AtomicUsize>,
    max_queued: usize,
    /// The same per uid of the client that created the run, so that one
    /// user (or one runaway script) cannot fill the queue for everyone.
    queued_by_user: UserSlots,
    /// `[daemon] release_waiting`.
    release_waiting: bool,
    /// Runs being resumed right now, each with the id of the run resuming
    /// it: held from before the history is asked whether the run was
    /// resumed already until the new run is committed, so two concurrent
    /// resumes of one run cannot both pass (`reserve_resume`).
    resuming: Mutex<HashMap<String, String>>,
    /// `<state_dir>/artifacts`: each run's kept files go to a folder of
    /// its own below it (`daemon::artifacts`).
    artifacts: std::path::PathBuf,
    /// The daily token budgets and the prices runs are costed at.
    budgets: Option<Arc<super::budget::Budgets>>,
}

/// One place in the queue, given back when the run gets its slot or ends
/// without one (cancelled while queued); with it, its user's place.
struct QueuePlace {
    _queued: GlobalPlace,
    _user: UserSlot,
}

/// The count of the whole queue, given back on drop (also when the user's
/// share then refuses the run).
struct GlobalPlace(Arc<AtomicUsize>);

impl Drop for GlobalPlace {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl RunManager {
    pub fn new(
        history: History,
        max_concurrent_runs: u32,
        max_queued_runs: usize,
        max_queued_runs_per_user: usize,
        release_waiting: bool,
        bus: Arc<EventBus>,
    ) -> Self {
        RunManager {
            release_waiting,
            queued: Arc::new(AtomicUsize::new(0)),
            max_queued: max_queued_runs,
            queued_by_user: UserSlots::new(max_queued_runs_per_user),
            live: Mutex::new(HashMap::new()),
            slots: Arc::new(Semaphore::new(max_concurrent_runs.max(1) as usize)),
            history,
            tasks: TaskTracker::new(),
            accepting: AtomicBool::new(true),
            bus,
            resuming: Mutex::new(HashMap::new()),
            artifacts: std::path::PathBuf::new(),
            budgets: None,
        }
    }

    /// The daily budgets runs are checked and counted against.
    pub fn with_budgets(mut self, budgets: Arc<super::budget::Budgets>) -> Self {
        self.budgets = Some(budgets);
        self
    }

    /// Where runs' kept files go (`<state_dir>/artifacts`).
    pub fn with_artifacts(mut self, dir: std::path::PathBuf) -> Self {
        self.artifacts = dir;
        self
    }

    pub fn artifacts(&self) -> &std::path::Path {
        &self.artifacts
    }

    pub fn accepting(&self) -> bool {
        self.accepting.load(Ordering::SeqCst)
    }

    fn lock_live(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<LiveRun>>> {
        self.live.lock_unpoisoned()
    }

    pub fn get(&self, id: &str) -> Option<Arc<LiveRun>> {
        self.lock_live().get(id).cloned()
    }

    /// Live runs by state right now. A run that has ended but is still
    /// being flushed is in none.
    pub fn counts(&self) -> RunCounts {
        let live = self.lock_live();
        live.values().fold(RunCounts::default(), |mut c, run| {
            match run.state() {
                RunState::Queued => c.queued += 1,
                RunState::Running => c.active += 1,
                RunState::Waiting => {
                    c.active += 1;
                    c.waiting += 1;
                }
                RunState::Ended => {}
            }
            c
        })
    }

    /// The live runs in `state`, newest first, as list rows.
    pub fn live_in(&self, state: RunState) -> Vec<RunSummary> {
        let mut rows: Vec<RunSummary> = self
            .lock_live()
            .values()
            .filter(|r| r.state() == state)
            .map(|r| r.list_row())
            .collect();
        rows.sort_by_key(|r| std::cmp::Reverse(r.seq));
        rows
    }

    /// Takes a place in the queue for a run of `uid`, or says that the
    /// queue, or that user's share of it, is full. Every run queues first,
    /// if only for a moment, so the caps count runs that have no slot yet,
    /// whatever `max_concurrent_runs` is.
    fn take_queue_place(&self, uid: Option<u32>) -> Result<QueuePlace, CreateError> {
        // The whole queue first, so a full queue is reported as such (a
        // share clamped to the queue's size would otherwise fill first and
        // name a key the operator never set).
        let max = self.max_queued;
        self.queued
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < max).then_some(n + 1)
            })
            .map_err(|_| CreateError::QueueFull { max })?;
        let taken = GlobalPlace(self.queued.clone());
        let user = self
            .queued_by_user
            .try_acquire(uid)
            .ok_or(CreateError::UserQueueFull {
                max: self.queued_by_user.max_per_user(),
                uid,
            })?;
        Ok(QueuePlace {
            _queued: taken,
            _user: user,
        })
    }

    /// Registers the run, makes it durable, and starts it (or queues it).
    /// Refused once shutdown has begun, and while the history cannot be
    /// written: the run is started only once its row is committed.
    /// `uid` is the creating client's (its connection's credentials), for
    /// its share of the queue.
    pub async fn create(
        self: &Arc<Self>,
        agent: Agent,
        request: String,
        uid: Option<u32>,
        files: Vec<InputFile>,
    ) -> Result<RunView, CreateError> {
        self.create_with(agent, request, uid, None, files).await
    }

    /// [`Self::create`], for a run that resumes another (`resume`): its
    /// transcript starts with a copy of `prior`'s messages and its
    /// checkpoint is `prior`'s, both committed with its row, so the new
    /// run is self-contained from its `201` on (it can be shown, and
    /// resumed in turn, even if the daemon dies before its first step).
    pub async fn create_resumed(
        self: &Arc<Self>,
        agent: Agent,
        request: String,
        uid: Option<u32>,
        mut resume: Resume,
    ) -> Result<RunView, CreateError> {
        let files = std::mem::take(&mut resume.files);
        self.create_with(agent, request, uid, Some(resume), files)
            .await
    }

    async fn create_with(
        self: &Arc<Self>,
        agent: Agent,
        request: String,
        uid: Option<u32>,
        resume: Option<Resume>,
        files: Vec<InputFile>,
    ) -> Result<RunView, CreateError> {
        if !self.accepting() {
            return Err(CreateError::ShuttingDown);
        }
        // Refused before anything is queued: a refused run must not add its
        // request (up to 1 MiB) to the writes waiting for the disk.
        if let Some(reason) = self.history.unavailable() {
            return Err(CreateError::HistoryUnavailable(
                super::history::HistoryError::Unavailable {
                    path: self.history.path().to_path_buf(),
                    reason,
                },
            ));
        }
        let price = match &self.budgets {
            Some(b) => {
                let agent = &agent.config().name;
                b.check(agent).map_err(CreateError::BudgetExhausted)?;
                b.price(agent)
            }
            None => Default::default(),
        };
        let place = self.take_queue_place(uid)?;
        let id = resume.as_ref().map_or_else(
            || uuid::Uuid::new_v4().simple().to_string(),
            |r| r.id.clone(),
        );
        let slot = Arc::new(RunSlot {
            slots: self.slots.clone(),
            permit: Mutex::new(None),
            release_waiting: self.release_waiting,
        });
        let mut summary =
            RunSummary::queued(&id, self.history.next_seq(), &agent.config().name, &request);
        if let Some(r) = &resume {
            summary.steps = r.prior.steps;
            summary.resume = r.links.clone();
        }
        // Encoded once, for the transcript and the history both.
        let carried: Vec<serde_json::Result<SharedJson>> =
            resume.as_ref().map_or_else(Vec::new, |r| {
                r.prior
                    .messages
                    .iter()
                    .map(crate::chat::encode_shared)
                    .collect()
            });
        let run = Arc::new(LiveRun {
            id: id.clone(),
            summary: Mutex::new(summary.clone()),
            messages: Mutex::new(carried.iter().map(transcript_entry).collect()),
            // Until the run starts and restores it: a queued resumed run
            // already shows the plan it carries on with.
            plan: Mutex::new(resume.as_ref().and_then(|r| r.prior.plan.clone())),
            events: Arc::new(EventLog::default()),
            cancel: CancellationToken::new(),
            next_event: AtomicU64::new(1),
            publishing: Mutex::new(()),
            human: Arc::new(HumanChannel::new(slot.clone())),
            slot,
            interrupted: AtomicBool::new(false),
            price,
            writes: self.history.staged(&id),
        });
        self.lock_live().insert(id.clone(), run.clone());
        self.history.create_run(&summary);
        if let Some(r) = &resume {
            for (index, json) in (0..).zip(carried) {
                self.history.append_message_json(&id, index, json);
            }
            self.history.checkpoint(&id, r.checkpoint());
        }
        // A 201 means the run is on disk: a crash right after still lists it.
        if let Err(e) = self.history.flush().await {
            self.lock_live().remove(&id);
            self.history.forget_run(&id);
            warn!(run_id = %id, error = %e, "run refused: it cannot be recorded");
            return Err(CreateError::HistoryUnavailable(e));
        }
        super::metrics::run_created(&summary.agent);
        self.bus.publish(DaemonEvent::RunCreated {
            run_id: id.clone(),
            agent: summary.agent.clone(),
        });
        let me = self.clone();
        // `warn`, so that the run id is on the run's lines under the default
        // filter too; handed to `Agent::run` (`log_span`), which then opens
        // no second one.
        let span = tracing::warn_span!(
            crate::agent::RUN_SPAN,
            run_id = %id,
            agent = %summary.agent
        );
        let prior = resume.map(|r| r.prior);
        self.tasks.spawn(
            async move { me.drive(run, agent, request, place, prior, files).await }
                .instrument(span),
        );
        match self.get(&id) {
            Some(run) => Ok(run.first_view()),
            // Already ended (cancelled by a shutdown that began meanwhile).
            None => Err(CreateError::ShuttingDown),
        }
    }

    async fn drive(
        self: Arc<Self>,
        run: Arc<LiveRun>,
        agent: Agent,
        request: String,
        place: QueuePlace,
        prior: Option<Prior>,
        files: Vec<InputFile>,
    ) {
        let permit = tokio::select! {
            p = self.slots.clone().acquire_owned() => p.ok(),
            _ = run.cancel.cancelled() => None,
        };
        drop(place);
        let Some(permit) = permit else {
            // Cancelled (or shut down) while queued: it never ran. A resumed
            // run still records the plan it carried (as its start would
            // have), so its record, and a resume of it, keep the plan.
            if let Some(p) = &prior {
                if let Some(plan) = p.plan.clone() {
                    self.publish(
                        &run,
                        &RunEvent::PlanChanged {
                            step: p.steps,
                            plan,
                        },
                    );
                }
            }
            let record = RunRecord {
                id: run.id.clone(),
                agent: agent.config().name.clone(),
                request,
                outcome: Outcome::Cancelled,
                steps: prior.as_ref().map_or(0, |p| p.steps),
                result: "No steps executed".into(),
                error: None,
                messages: Vec::new(),
                usage: Default::default(),
                plan: prior.as_ref().and_then(|p| p.plan.clone()),
                files: None,
            };
            self.finish(&run, record).await;
            return;
        };
        let started = run.update(|s| {
            s.state = RunState::Running;
            s.started_at_ms = Some(now_ms());
        });
        run.writes.save_run(started);
        run.writes.release();
        *run.slot.permit.lock_unpoisoned() = Some(permit);
        let opts = RunOptions {
            run_id: Some(run.id.clone()),
            cancel: run.cancel.clone(),
            events: self.event_sink(&run),
            messages: Some(self.message_sink(&run)),
            human: Some(run.human.clone()),
            prior,
            checkpoint: Some(self.checkpoint_hook(&run)),
            files,
            keep_into: Some(super::artifacts::run_dir(&self.artifacts, &run.id)),
            // `drive` runs in the span `create` opened for the run.
            log_span: Some(tracing::Span::current()),
            budget: Some(Arc::new(RunUsage {
                daily: self
                    .budgets
                    .as_ref()
                    .map(|b| b.for_run(&agent.config().name)),
                run: run.clone(),
            })),
        };
        // In its own task so that a panic anywhere below still ends the run
        // with a record instead of leaving it `running` forever.
        let task = tokio::spawn(
            async move {
                let r = agent.run(&request, opts).await;
                (r, request, agent)
            }
            .in_current_span(),
        );
        let record = match task.await {
            Ok((Ok(record), _, _)) => record,
            Ok((Err(e), request, agent)) => {
                failed_record(&run.id, agent.config().name.clone(), request, e.to_string())
            }
            Err(join) => {
                let s = run.summary();
                failed_record(
                    &run.id,
                    s.agent,
                    s.request,
                    format!("internal error: the run panicked: {join}"),
                )
            }
        };
        run.slot.permit.lock_unpoisoned().take();
        self.finish(&run, record).await;
    }

    /// Records the end, publishes `run_ended`, waits until it is on disk
    /// (however long a full disk takes to recover: meanwhile the run is
    /// served from memory), and only then lets the run leave memory.
    async fn finish(&self, run: &Arc<LiveRun>, mut record: RunRecord) {
        if let Some(kept) = &record.files {
            if let Err(e) = super::artifacts::write_manifest(&self.artifacts, &run.id, kept) {
                warn!(error = %e, "cannot record the run's kept files");
            }
        }
        if record.outcome == Outcome::Cancelled && run.interrupted.load(Ordering::SeqCst) {
            // Cut short by a shutdown, not by anyone's cancel: it can be
            // resumed after the restart.
            record.outcome = Outcome::Interrupted;
            record.error = Some(SHUTDOWN_INTERRUPTED.to_string());
        }
        let ended = run.update(|s| {
            s.end(&record);
            run.reprice(s);
            s.waiting = None;
        });
        let agent = ended.agent.clone();
        run.writes.save_run(ended);
        self.publish(
            run,
            &RunEvent::RunEnded {
                outcome: record.outcome,
                steps: record.steps,
                error: record.error.clone(),
            },
        );
        run.writes.release();
        self.history.settle().await;
        run.events.close();
        self.lock_live().remove(&run.id);
        super::metrics::run_ended(&agent, record.outcome);
        self.bus.publish(DaemonEvent::RunEnded {
            run_id: run.id.clone(),
            agent,
            outcome: record.outcome,
        });
        info!(outcome = %record.outcome, steps = record.steps, "run recorded");
    }

    /// Encodes the event once, for both the history and the followers.
    /// The seq is taken under the run's publish lock so the log is in seq
    /// order (followers find their place in it by seq).
    fn publish(&self, run: &LiveRun, event: &RunEvent) {
        let at_ms = now_ms();
        let json = match serde_json::to_string(event) {
            Ok(json) => json,
            Err(e) => {
                warn!(error = %e, "cannot encode an event");
                return;
            }
        };
        let _order = run.publishing.lock_unpoisoned();
        let seq = run.next_event.fetch_add(1, Ordering::SeqCst);
        run.events
            .push(seq, Bytes::from(crate::api::event_line(seq, at_ms, &json)));
        run.writes.append_event_json(seq, at_ms, json);
    }

    fn event_sink(self: &Arc<Self>, run: &Arc<LiveRun>) -> crate::agent::EventSink {
        let me = self.clone();
        let run = run.clone();
        Arc::new(move |event: &RunEvent| {
            // A wait for a person may last days, and so may the rest of the
            // step once the answer is given (a slot under
            // `release_waiting`, a tool): neither the wait nor the answer,
            // nor what the step did before them, is held meanwhile.
            let release = match event {
                // Published by `finish`, once the record is complete.
                RunEvent::RunEnded { .. } => return,
                RunEvent::RunStarted { max_steps, .. } => {
                    let max = *max_steps;
                    run.update(|s| s.max_steps = Some(max));
                    false
                }
                RunEvent::StepStarted { step, max_steps } => {
                    let (step, max) = (*step, *max_steps);
                    let s = run.update(|s| {
                        s.steps = step;
                        s.max_steps = Some(max);
                    });
                    run.writes.save_run(s);
                    false
                }
                // The channel holds the wait before the event is emitted,
                // so the summary can show what to answer.
                RunEvent::InputRequested { .. } | RunEvent::ApprovalRequested { .. } => {
                    let waiting = run.human.waiting();
                    let s = run.update(|s| {
                        s.state = RunState::Waiting;
                        s.waiting = waiting;
                    });
                    run.writes.save_run(s);
                    true
                }
                RunEvent::PlanChanged { plan, .. } => {
                    *run.plan.lock_unpoisoned() = Some(plan.clone());
                    false
                }
                RunEvent::InputReceived { .. } | RunEvent::ApprovalDecided { .. } => {
                    let s = run.update(|s| {
                        s.state = RunState::Running;
                        s.waiting = None;
                    });
                    run.writes.save_run(s);
                    true
                }
                _ => false,
            };
            me.publish(&run, event);
            if release {
                run.writes.release();
            }
        })
    }

    fn message_sink(&self, run: &Arc<LiveRun>) -> MessageSink {
        let run = run.clone();
        Arc::new(move |message: &Arc<Kept>| {
            // The JSON memory encoded: neither encoded again nor copied, but
            // shared by the memory, the transcript and the history.
            let json = message.shared_json();
            let mut messages = run.messages.lock_unpoisoned();
            let index = messages.len() as u32;
            messages.push(transcript_entry(&json));
            drop(messages);
            run.writes.append_message_json(index, json);
        })
    }

    /// Makes each completed step durable before the next begins: the
    /// checkpoint is held behind the step's messages and events, all of
    /// them are released to the writer together, then the history is
    /// flushed, so a daemon killed during the next step still has this one
    /// whole (`resume`). When the history cannot be written (a full disk),
    /// the flush answers at once: the run goes on, its writes (checkpoint
    /// included) are kept and committed when the disk recovers, and the
    /// log says so once per run.
    fn checkpoint_hook(&self, run: &Arc<LiveRun>) -> CheckpointHook {
        let history = self.history.clone();
        let run = run.clone();
        let warned = Arc::new(AtomicBool::new(false));
        Arc::new(move |checkpoint: Checkpoint| {
            let (history, run, warned) = (history.clone(), run.clone(), warned.clone());
            Box::pin(async move {
                run.writes.checkpoint(checkpoint);
                run.writes.release();
                if let Err(e) = history.flush().await {
                    if !warned.swap(true, Ordering::Relaxed) {
                        warn!(run_id = %run.id, step = checkpoint.steps, error = %e,
                            "a completed step is not durable yet; the run goes on and it is written when the history can be");
                    }
                }
            })
        })
    }

    /// Holds `old` for the resume that will create `new`; refused with
    /// the id of the run already resuming it. The hold ends when the
    /// returned guard is dropped, once the new run is committed (after
    /// that the history says `resumed_by`) or refused.
    pub fn reserve_resume(self: &Arc<Self>, old: &str, new: &str) -> Result<ResumeHold, String> {
        let mut resuming = self.resuming.lock_unpoisoned();
        if let Some(by) = resuming.get(old) {
            return Err(by.clone());
        }
        resuming.insert(old.to_string(), new.to_string());
        Ok(ResumeHold {
            runs: self.clone(),
            old: old.to_string(),
        })
    }

    /// Cancels a live run. The run ends `cancelled` shortly after: its LLM
    /// call is dropped, its sandbox (and any command in it) removed.
    pub fn cancel(&self, id: &str) -> Option<Result<RunView, CancelError>> {
        let run = self.get(id)?;
        let view = run.first_view();
        if view.summary.state == RunState::Ended {
            return Some(Err(CancelError::Ended {
                id: id.to_string(),
                outcome: view
                    .summary
                    .outcome
                    .map(|o| o.to_string())
                    .unwrap_or_default(),
            }));
        }
        info!(run_id = %id, "cancel requested");
        run.cancel.cancel();
        // No longer waiting for anyone, even before its end is recorded:
        // lists of waiting runs must not offer it.
        run.update(|s| {
            if s.state == RunState::Waiting {
                s.state = RunState::Running;
                s.waiting = None;
            }
        });
        Some(Ok(run.first_view()))
    }

    /// SIGTERM: refuse new runs, cancel queued ones, interrupt those
    /// waiting for a person at once (nobody answers a daemon going down),
    /// give running ones `grace`, then interrupt them too, and wait until
    /// each has removed its sandbox and recorded its end. An interrupted
    /// run ends `interrupted` and can be resumed after the restart.
    pub async fn shut_down(&self, grace: Duration) {
        self.accepting.store(false, Ordering::SeqCst);
        self.tasks.close();
        let live: Vec<_> = self.lock_live().values().cloned().collect();
        for run in &live {
            if run.state() == RunState::Queued {
                run.cancel.cancel();
            }
        }
        // Runs waiting for a person are interrupted at once, and so is a
        // run that starts waiting during the grace: checked every 100 ms.
        let interrupt_waiting = async {
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            loop {
                tick.tick().await;
                let live: Vec<_> = self.lock_live().values().cloned().collect();
                for run in live.iter().filter(|r| r.state() == RunState::Waiting) {
                    run.interrupt();
                }
            }
        };
        let ended = tokio::select! {
            r = tokio::time::timeout(grace, self.tasks.wait()) => r.is_ok(),
            _ = interrupt_waiting => false,
        };
        if !ended {
            let left: Vec<_> = self.lock_live().values().cloned().collect();
            warn!(
                runs = left.len(),
                "shutdown grace elapsed: cancelling the runs still going"
            );
            for run in left {
                run.interrupt();
            }
            // Cancelled runs end within a step's worth of host work plus a
            // container removal; a bound keeps a wedged engine from
            // holding the shutdown forever (the next start reaps).
            if tokio::time::timeout(Duration::from_secs(30), self.tasks.wait())
                .await
                .is_err()
            {
                warn!("runs did not end within 30 s of being cancelled");
            }
        }
        // Not `settle`: on a full disk that would hold the exit forever.
        if let Err(e) = self.history.flush().await {
            warn!(error = %e, "shutting down with run history writes not committed");
        }
    }
}

/// The error of a run a shutdown cut short.
const SHUTDOWN_INTERRUPTED: &str =
    "agentd shut down while the run was in flight; resume it with `agentd resume`";

impl LiveRun {
    /// Ends the run as `interrupted` (a shutdown's doing).
    fn interrupt(&self) {
        self.interrupted.store(true, Ordering::SeqCst);
        self.cancel.cancel();
    }
}

/// What a resumed run is created with (`RunManager::create_resumed`).
pub struct Resume {
    /// The new run's id, chosen before it is created (it is held in
    /// [`RunManager::reserve_resume`] meanwhile).
    pub id: String,
    pub prior: Prior,
    /// `resumed_from`, `resumed_at_step`, `resumed_messages`.
    pub links: ResumeLinks,
    /// The old run's kept files, which the new run starts with (empty
    /// when the client said `"files": false`).
    pub files: Vec<InputFile>,
}

impl Resume {
    /// The new run's first checkpoint: where the old run's last one was,
    /// counted in the new run's own transcript (it starts with the copies).
    fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            steps: self.prior.steps,
            messages: u32::try_from(self.prior.messages.len()).unwrap_or(u32::MAX),
            stuck_warning: self.prior.stuck_warning,
        }
    }
}

/// A run held for one resume (see [`RunManager::reserve_resume`]).
pub struct ResumeHold {
    runs: Arc<RunManager>,
    old: String,
}

impl Drop for ResumeHold {
    fn drop(&mut self) {
        self.runs.resuming.lock_unpoisoned().remove(&self.old);
    }
}

fn failed_record(id: &str, agent: String, request: String, error: String) -> RunRecord {
    RunRecord {
        id: id.to_string(),
        agent,
        request,
        outcome: Outcome::Error,
        steps: 0,
        result: "No steps executed".into(),
        error: Some(error),
        messages: Vec::new(),
        usage: Default::default(),
        plan: None,
        files: None,
    }
}
