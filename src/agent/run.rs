//! OpenManus's `BaseAgent.run`, with its defects fixed (see
//! `docs/agent-semantics.md` in the shared contract): an explicit outcome for
//! every run, a step counter per run, and sandbox cleanup on every ending.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{info, warn, warn_span, Instrument};

use super::context::{NextStep, RunContext};
use super::counted_sandbox::CountedSandbox;
use super::events::{discard_events, EventSink, MessageSink, RunEvent};
use super::files::{InputFile, KeepSpec, KeptFiles};
use super::human::HumanChannel;
use super::outcome::{AgentState, Outcome, RunRecord};
use super::resume::{CheckpointHook, Prior};
use super::settings::{resolve, RunLimits, RunSettings};
use super::tool_provider::ToolProvider;
use crate::agent::AgentConfig;
use crate::llm::LlmClient;
use crate::plugin::session::{StepEnd, StrategySession};
use crate::plugin::PluginHost;
use crate::plugin::{Grants, RunTools, StrategyPlugin, ToolPlugin};
use crate::sandbox::{Sandbox, SandboxProvider};
use crate::sync::LockExt;

/// The name of the span that carries a run's `run_id` and `agent` on its
/// log lines; a caller that opens it (the daemon) is not given a second.
pub const RUN_SPAN: &str = "run";

/// What every run of every agent shares.
pub struct Runtime {
    /// The plugin host; each run resolves its plugins from one snapshot of it.
    pub plugins: Arc<PluginHost>,
    /// Makes each run's sandbox, which the run destroys however it ends.
    pub sandboxes: Arc<dyn SandboxProvider>,
    /// How long one step (strategy plus the tools it calls) may take, unless
    /// the strategy's `[plugins.<name>] timeout` says otherwise.
    pub step_timeout: Duration,
    /// What the operator granted each plugin (`[plugins.<name>]`), as of
    /// the configuration this runtime was built from: a run keeps them.
    pub grants: Arc<Grants>,
    /// The daemon's limits per run (`[daemon]`); an agent's own keys go
    /// over them when its run starts.
    pub limits: RunLimits,
    /// The tools agents name that are not components (`mcp:` entries).
    pub tool_provider: Arc<dyn ToolProvider>,
}

/// Why [`Agent::run`] refused to start; a run that starts always returns a
/// [`RunRecord`], whatever its outcome.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AgentError {
    /// The agent is already running (runs of one agent are sequential); the
    /// message names the state it was in.
    #[error("Cannot run agent from state: {0:?}")]
    NotIdle(AgentState),
}

/// What the caller supplies for one run besides the request.
pub struct RunOptions {
    /// The run's id; `None` generates a UUID. The daemon sets it to the id
    /// it already gave the client.
    pub run_id: Option<String>,
    /// Cancels the run (outcome `cancelled`); the run uses a child token, so
    /// its own ending never cancels the caller's.
    pub cancel: CancellationToken,
    /// Receives the run's events as they happen; the default discards them.
    pub events: EventSink,
    /// Every message as it is added; `None` when nobody keeps a transcript.
    pub messages: Option<MessageSink>,
    /// Where the run's questions and held tool calls wait for a person (the
    /// daemon's API, a terminal); `None`: nobody can be reached, so a
    /// question fails at once and a call that needs approval is denied.
    pub human: Option<Arc<HumanChannel>>,
    /// Resume an earlier run: start from its transcript and step count
    /// instead of from the request alone (`agent::resume`).
    pub prior: Option<Prior>,
    /// Awaited at the end of each completed step, before the next one
    /// begins: where the caller makes the step durable.
    pub checkpoint: Option<CheckpointHook>,
    /// Written into the sandbox's work dir before the first step; a file
    /// that cannot be written ends the run `error`, naming it.
    pub files: Vec<InputFile>,
    /// The folder the files matching `[agents.X] keep_files` are copied
    /// to when the run ends (the daemon's `<state_dir>/artifacts/<id>`);
    /// `None`: nothing is kept, whatever the agent says.
    pub keep_into: Option<std::path::PathBuf>,
    /// Budgets shared with other runs (the daemon's daily token budgets),
    /// asked before each LLM request; `None`: only `max_input_tokens`.
    pub budget: Option<Arc<dyn crate::agent::TokenBudget>>,
    /// The caller's span carrying the run's id on its log lines (the
    /// daemon opens one when it creates the run, before the run starts);
    /// `None`: the run opens its own [`RUN_SPAN`]. Handed over, not found
    /// by name, so a second one never prints the same fields twice.
    pub log_span: Option<tracing::Span>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            run_id: None,
            cancel: CancellationToken::new(),
            events: discard_events(),
            messages: None,
            human: None,
            prior: None,
            checkpoint: None,
            files: Vec::new(),
            keep_into: None,
            budget: None,
            log_span: None,
        }
    }
}

/// An agent: its configuration and its lifecycle state. Runs of one agent
/// are sequential (a second concurrent `run` is refused, as in OpenManus);
/// the daemon makes one `Agent` per run.
pub struct Agent {
    config: AgentConfig,
    llm: LlmClient,
    runtime: Arc<Runtime>,
    state: Mutex<AgentState>,
    last_outcome: Mutex<Option<Outcome>>,
}

struct Resolved {
    strategy: Arc<StrategyPlugin>,
    tools: Vec<Arc<ToolPlugin>>,
    /// The agent's `tools` entries the tool provider serves, opened when
    /// the run starts.
    hosted: Vec<String>,
    settings: RunSettings,
}

impl Agent {
    /// An idle agent; `llm` is the client its runs send chat requests through.
    pub fn new(config: AgentConfig, llm: LlmClient, runtime: Arc<Runtime>) -> Self {
        Agent {
            config,
            llm,
            runtime,
            state: Mutex::new(AgentState::Idle),
            last_outcome: Mutex::new(None),
        }
    }

    /// The configuration the agent was made with.
    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// `Running` during [`Agent::run`], `Idle` otherwise.
    pub fn state(&self) -> AgentState {
        *self.state.lock_unpoisoned()
    }

    /// The outcome of the last completed run, kept after the agent is IDLE
    /// again (OpenManus loses it).
    pub fn last_outcome(&self) -> Option<Outcome> {
        *self.last_outcome.lock_unpoisoned()
    }

    /// Runs `request` to an ending and returns its record. Refuses only when
    /// the agent is already running; every other failure (plugin not loaded,
    /// sandbox down, trap, timeout) is the record's `error` outcome. The run's
    /// sandbox is destroyed on every path, including when this future is dropped.
    pub async fn run(&self, request: &str, opts: RunOptions) -> Result<RunRecord, AgentError> {
        {
            let mut state = self.state.lock_unpoisoned();
            if *state != AgentState::Idle {
                return Err(AgentError::NotIdle(*state));
            }
            *state = AgentState::Running;
        }
        let run_id = opts
            .run_id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());
        // A child token: dropping this future cancels the run without
        // cancelling whatever else shares the caller's token.
        let cancel = opts.cancel.child_token();
        let sandbox = self.runtime.sandboxes.for_run(&run_id);
        let mut guard = RunGuard {
            agent: self,
            cancel: cancel.clone(),
            sandbox: Some(sandbox.clone()),
        };
        // The run's id on every log line of the run, whatever the log level
        // (a `warn` span is enabled under the default filter, and prints
        // nothing by itself): the caller's, or one of its own.
        let span = opts
            .log_span
            .clone()
            .unwrap_or_else(|| warn_span!(RUN_SPAN, run_id = %run_id, agent = %self.config.name));
        // Its trace's root, `invoke_agent {agent}`, when traces are exported.
        let trace = crate::otel::invoke_agent(&run_id, &self.config.name, || {
            let snapshot = self.runtime.plugins.snapshot();
            Some(
                snapshot
                    .strategy(&self.config.strategy)?
                    .meta
                    .version
                    .clone(),
            )
        });
        let events = opts.events.clone();
        let keep = self.keep_spec(opts.keep_into.clone());
        let opts = RunOptions { cancel, ..opts };
        let builder = self
            .run_inner(run_id, request, opts, sandbox.clone())
            .instrument(trace.clone())
            .instrument(span.clone())
            .await;
        // Whatever way the run ended, its kept files are copied out, then
        // its sandbox goes with it.
        let files = match &keep {
            Some(keep) => Some(keep_files(&*sandbox, keep).instrument(span.clone()).await),
            None => None,
        };
        sandbox.destroy().instrument(span.clone()).await;
        guard.sandbox = None;
        let mut record = builder.into_record();
        record.files = files;
        let model = &self.llm.settings().model;
        crate::otel::run_ended(&trace, Some(model), record.outcome.as_str(), record.steps);
        span.in_scope(|| {
            info!(outcome = %record.outcome, steps = record.steps, error = record.error.as_deref().unwrap_or(""), "run ended")
        });
        events(&RunEvent::RunEnded {
            outcome: record.outcome,
            steps: record.steps,
            error: record.error.clone(),
        });
        *self.last_outcome.lock_unpoisoned() = Some(record.outcome);
        drop(guard);
        Ok(record)
    }

    /// What this run keeps when it ends: nothing unless the agent names
    /// globs and the caller gives a folder.
    fn keep_spec(&self, dest: Option<std::path::PathBuf>) -> Option<KeepSpec> {
        if self.config.keep_files.is_empty() {
            return None;
        }
        Some(KeepSpec {
            patterns: self.config.keep_files.clone(),
            limit: self.config.keep_limit,
            dest: dest?,
        })
    }

    async fn run_inner(
        &self,
        run_id: String,
        request: &str,
        opts: RunOptions,
        sandbox: Arc<dyn Sandbox>,
    ) -> RecordBuilder {
        let resolved = match self.resolve() {
            Ok(resolved) => self.open_hosted(&run_id, resolved, &opts.cancel).await,
            Err(message) => Err(message),
        };
        match resolved {
            Ok((resolved, hosted)) => {
                self.execute(run_id, request, opts, resolved, hosted, sandbox)
                    .await
            }
            Err(message) => {
                // The daemon's defaults: the strategy that would have given
                // its own is not there.
                let (settings, _) = resolve(&self.config, None);
                let ctx = Arc::new(self.context(&run_id, settings, &opts, Vec::new()));
                // The request (or the transcript resumed from) is still
                // recorded: nothing the user sent is lost.
                let _ = match &opts.prior {
                    Some(prior) => ctx.restore(prior),
                    None => ctx.pin_request(request).map_err(|e| e.to_string()),
                };
                let builder = RecordBuilder::new(ctx, request);
                if opts.cancel.is_cancelled() {
                    builder.ended(Outcome::Cancelled, None)
                } else {
                    builder.ended(Outcome::Error, Some(message))
                }
            }
        }
    }

    fn resolve(&self) -> Result<Resolved, String> {
        let snapshot = self.runtime.plugins.snapshot();
        let strategy = snapshot.strategy(&self.config.strategy).ok_or_else(|| {
            format!(
                "strategy plugin `{}` needed by agent `{}` is not loaded",
                self.config.strategy, self.config.name
            )
        })?;
        let provider = &self.runtime.tool_provider;
        let (hosted, components): (Vec<String>, Vec<String>) = self
            .config
            .tools
            .iter()
            .cloned()
            .partition(|t| provider.serves(t));
        let tools = components
            .iter()
            .map(|name| {
                snapshot.tool(name).ok_or_else(|| {
                    format!(
                        "tool plugin `{name}` needed by agent `{}` is not loaded",
                        self.config.name
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let (settings, _) = resolve(&self.config, Some(&strategy.defaults));
        Ok(Resolved {
            strategy,
            tools,
            hosted,
            settings,
        })
    }

    /// Opens the run's host-served tools (an MCP server started for a
    /// `per_run` one); a cancel while it waits ends the wait.
    async fn open_hosted(
        &self,
        run_id: &str,
        resolved: Resolved,
        cancel: &CancellationToken,
    ) -> Result<(Resolved, Vec<Arc<dyn crate::plugin::HostTool>>), String> {
        if resolved.hosted.is_empty() {
            return Ok((resolved, Vec::new()));
        }
        let opened = tokio::select! {
            _ = cancel.cancelled() => return Err("cancelled while its MCP tools were being opened".into()),
            r = self.runtime.tool_provider.open(run_id, &resolved.hosted) => r?,
        };
        if let Some(dup) = opened
            .iter()
            .find(|h| resolved.tools.iter().any(|t| t.spec.name == h.spec().name))
        {
            return Err(format!(
                "agent `{}` has two tools named `{}`: a tool plugin and an MCP tool",
                self.config.name,
                dup.spec().name
            ));
        }
        Ok((resolved, opened))
    }

    /// `[agents.X] approve` must name tools the run has: a misspelt name
    /// (`"Bash"`) would otherwise let every call of the real tool run
    /// unapproved. Checked when the run starts, once its tools (MCP ones
    /// included) are known.
    fn check_approve(&self, tools: &[String]) -> Result<(), String> {
        let crate::agent::Approve::Tools(names) = &self.config.approve else {
            return Ok(());
        };
        match names.iter().find(|n| !tools.contains(n)) {
            None => Ok(()),
            Some(name) => Err(format!(
                "[agents.{}] approve names `{name}`, which is not one of the agent's tools ({}); a call it meant to hold would run unapproved, so the run is refused",
                self.config.name,
                tools.join(", ")
            )),
        }
    }

    fn context(
        &self,
        run_id: &str,
        settings: RunSettings,
        opts: &RunOptions,
        tools: Vec<crate::chat::ToolSpec>,
    ) -> RunContext {
        RunContext::new(
            run_id.to_string(),
            settings,
            self.runtime.limits.for_agent(&self.config),
            self.llm.clone(),
            tools,
            opts.events.clone(),
            opts.messages.clone(),
        )
        .with_human(opts.human.clone())
        .with_checkpoint_hook(opts.checkpoint.clone())
        .with_budget(opts.budget.clone())
    }

    async fn execute(
        &self,
        run_id: String,
        request: &str,
        opts: RunOptions,
        resolved: Resolved,
        hosted: Vec<Arc<dyn crate::plugin::HostTool>>,
        sandbox: Arc<dyn Sandbox>,
    ) -> RecordBuilder {
        let Resolved {
            strategy,
            tools,
            mut settings,
            hosted: _,
        } = resolved;
        if let Some(prior) = &opts.prior {
            // A resumed run continues the earlier one's numbering.
            settings.max_steps = prior.step_limit(settings.max_steps);
        }
        let tools = RunTools {
            plugins: tools,
            hosted,
        };
        let max_steps = settings.max_steps;
        let name = strategy.meta.name.clone();
        let specs = tools.specs();
        let ctx = Arc::new(self.context(&run_id, settings, &opts, specs));
        let builder = RecordBuilder::new(ctx.clone(), request);
        ctx.emit(RunEvent::RunStarted {
            run_id: run_id.clone(),
            agent: self.config.name.clone(),
            request: request.to_string(),
            max_steps,
            strategy: strategy.meta.name.clone(),
            strategy_version: strategy.meta.version.clone(),
        });
        // The request (or the resumed transcript, with its plan) first, so
        // that a run refused below still records what it carried.
        let started = match &opts.prior {
            Some(prior) => ctx.restore(prior),
            None => ctx.pin_request(request).map_err(|e| e.to_string()),
        };
        if let Err(e) = started {
            return builder.ended(Outcome::Error, Some(e));
        }
        if let Err(e) = self.check_approve(&ctx.tool_specs_names()) {
            return builder.ended(Outcome::Error, Some(e));
        }
        info!(max_steps, strategy = %strategy.meta.name, version = %strategy.meta.version,
            resumed_at_step = opts.prior.as_ref().map(|p| p.steps), "run started");

        // The loop runs in its own task: wasm calls are faster there, and a
        // panic in host code becomes an `error` outcome instead of taking the
        // caller (and the sandbox cleanup) down with it.
        let step_timeout = self
            .runtime
            .grants
            .of(&strategy.meta.name)
            .timeout
            .unwrap_or(self.runtime.step_timeout);
        let files = opts.files;
        let (cancel, grants) = (opts.cancel.clone(), self.runtime.grants.clone());
        let ctx_for_steps = ctx.clone();
        let steps = async move {
            // The run's input files, before the strategy starts: its first
            // step finds them in the work dir.
            if let Some(failed) = write_inputs(&*sandbox, files, step_timeout, &cancel).await {
                return failed;
            }
            step_loop(
                ctx_for_steps,
                strategy,
                tools,
                sandbox,
                grants,
                step_timeout,
                cancel,
            )
            .await
        };
        let task = tokio::spawn(within_limits(ctx.clone(), name, steps).in_current_span());
        let (outcome, error) = match task.await {
            Ok(end) => end,
            Err(join) => (
                Outcome::Error,
                Some(format!("internal error: the step loop panicked: {join}")),
            ),
        };
        builder.ended(outcome, error)
    }
}

/// Runs `steps` (the whole step loop: sandbox preparation, the strategy's
/// start, every step with its LLM calls, tool calls and sandbox waits)
/// under the run's wall clock and its byte budget. Whichever ends first
/// drops the loop where it is waiting, as a cancel does; `Agent::run` then
/// removes the sandbox as on every ending.
async fn within_limits(
    ctx: Arc<RunContext>,
    strategy: String,
    steps: impl std::future::Future<Output = (Outcome, Option<String>)>,
) -> (Outcome, Option<String>) {
    let max = ctx.limits.max_run_time;
    let ended = tokio::select! {
        biased;
        _ = ctx.stopped() => (Outcome::Error, None),
        _ = wall_clock(&ctx, max) => {
            warn!(?max, "the run reached its wall-clock limit");
            return (
                Outcome::Error,
                Some(format!(
                    "the run reached its wall-clock limit, max_run_time ({}s), and was stopped",
                    max.as_secs_f64()
                )),
            );
        }
        r = steps => r,
    };
    // A limit hit inside a host call wins over how the step then ended
    // (the strategy may have swallowed the refusal and returned).
    match (ctx.stop_reason(), ended) {
        (_, (Outcome::Cancelled, e)) => (Outcome::Cancelled, e),
        (Some(reason), _) => (
            Outcome::Error,
            Some(format!(
                "{reason} (strategy `{strategy}`, step {})",
                ctx.current_step()
            )),
        ),
        (None, ended) => ended,
    }
}

/// Resolves once the run has used `max` of wall clock, not counting the
/// time it waited for a person (a question, an approval): that wait has its
/// own limit, and a person at lunch is not the run going on too long.
async fn wall_clock(ctx: &RunContext, max: Duration) {
    let started = tokio::time::Instant::now();
    loop {
        let used = started.elapsed().saturating_sub(ctx.waited());
        if used >= max {
            return;
        }
        // While the run waits, `used` stands still: this wakes once per
        // remaining span, never in a busy loop.
        tokio::time::sleep(max - used).await;
    }
}

/// Writes `files` into the sandbox's work dir; `Some` is the run's ending
/// when one cannot be written (named, never skipped silently).
async fn write_inputs(
    sandbox: &dyn Sandbox,
    files: Vec<InputFile>,
    timeout: Duration,
    cancel: &CancellationToken,
) -> Option<(Outcome, Option<String>)> {
    for file in files {
        let written = tokio::select! {
            _ = cancel.cancelled() => return Some((Outcome::Cancelled, None)),
            r = tokio::time::timeout(timeout, sandbox.write_file(&file.path, &file.contents)) => r,
        };
        let error = match written {
            Ok(Ok(())) => continue,
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("not written within {}s", timeout.as_secs_f64()),
        };
        return Some((
            Outcome::Error,
            Some(format!(
                "cannot write the input file `{}`: {error}",
                file.path
            )),
        ));
    }
    None
}

async fn step_loop(
    ctx: Arc<RunContext>,
    strategy: Arc<StrategyPlugin>,
    tools: RunTools,
    sandbox: Arc<dyn Sandbox>,
    grants: Arc<Grants>,
    step_timeout: Duration,
    cancel: CancellationToken,
) -> (Outcome, Option<String>) {
    let name = strategy.meta.name.clone();
    let prepared = tokio::select! {
        _ = cancel.cancelled() => return (Outcome::Cancelled, None),
        r = tokio::time::timeout(step_timeout, sandbox.prepare()) => r,
    };
    match prepared {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return (Outcome::Error, Some(e.to_string())),
        Err(_) => {
            return (
                Outcome::Error,
                Some(format!(
                    "sandbox unavailable: not ready within {}s",
                    step_timeout.as_secs_f64()
                )),
            )
        }
    }
    // The tools act on the run's sandbox through the host-call budget; the
    // loop's own calls (prepare, fatal_error, destroy) are not counted.
    let tools_sandbox: Arc<dyn Sandbox> =
        Arc::new(CountedSandbox::new(sandbox.clone(), ctx.clone()));
    let session = StrategySession::start(
        &strategy,
        tools,
        tools_sandbox,
        ctx.clone(),
        ctx.clone(),
        ctx.clone(),
        grants,
        step_timeout,
    );
    let mut session = tokio::select! {
        _ = cancel.cancelled() => return (Outcome::Cancelled, None),
        r = session => match r {
            Ok(s) => s,
            Err(e) => return (Outcome::Error, Some(e.to_string())),
        },
    };
    loop {
        if cancel.is_cancelled() {
            return (Outcome::Cancelled, None);
        }
        let (step, mark) = match ctx.next_step() {
            NextStep::Step { step, mark } => (step, mark),
            NextStep::Finished => break,
            NextStep::LimitReached => return (Outcome::MaxSteps, None),
        };
        ctx.emit(RunEvent::StepStarted {
            step,
            max_steps: ctx.max_steps(),
        });
        let started = std::time::Instant::now();
        let result = session
            .step(step_timeout, &cancel)
            .instrument(crate::otel::step(step, &ctx.run_id))
            .instrument(warn_span!("step", step))
            .await;
        ctx.metrics.step(started.elapsed(), session.plugin_time());
        let text = match result {
            StepEnd::Done(text) => text,
            StepEnd::Cancelled => return (Outcome::Cancelled, None),
            // A strategy that passes the budget's refusal up as an error
            // still ends the run as `token_limit`.
            StepEnd::Failed(_) | StepEnd::Trapped(_) if ctx.token_limited() => {
                return (Outcome::TokenLimit, None)
            }
            StepEnd::Failed(message) => {
                return (
                    Outcome::Error,
                    Some(format!(
                        "strategy `{name}` failed at step {step}: {message}"
                    )),
                )
            }
            StepEnd::Trapped(trap) => {
                return (
                    Outcome::Error,
                    Some(format!(
                        "strategy plugin `{name}` trapped at step {step}: {trap}"
                    )),
                )
            }
            StepEnd::Stopped { plugin, reason } => {
                warn!(%plugin, %reason, "plugin stopped by a limit");
                return (Outcome::Error, Some(format!("{reason} (at step {step})")));
            }
            StepEnd::Overran { culprit } => {
                warn!(plugin = %culprit, ?step_timeout, "step deadline exceeded");
                // A plugin that only waited gets here once its waits were
                // refused; saying so names the real cause.
                let refused = ctx.host_calls_refused().map_or(String::new(), |max| {
                    format!(
                        " (its LLM requests and sandbox operations past max_host_calls_per_step ({max}) were refused)"
                    )
                });
                return (
                    Outcome::Error,
                    Some(format!(
                        "plugin `{culprit}` exceeded the step deadline of {}s at step {step}{refused}",
                        step_timeout.as_secs_f64()
                    )),
                );
            }
        };
        let recorded = ctx.record_step(step, mark, text);
        if recorded.stuck {
            warn!(step, "agent is stuck: repeating the same action");
            ctx.emit(RunEvent::StuckDetected { step });
        }
        ctx.emit(RunEvent::StepFinished {
            step,
            result: recorded.result,
        });
        // The step is complete: made durable before anything else happens,
        // so a daemon killed from here on resumes after it. A cancel does
        // not wait for it (the hook's work goes on regardless).
        tokio::select! {
            _ = ctx.checkpoint_step() => {}
            _ = cancel.cancelled() => return (Outcome::Cancelled, None),
        }
        if recorded.token_limited {
            return (Outcome::TokenLimit, None);
        }
        // A sandbox that can never work (engine down, image missing) ends
        // the run now rather than letting the model retry blindly.
        if let Some(e) = sandbox.fatal_error() {
            return (Outcome::Error, Some(e.to_string()));
        }
    }
    (Outcome::Finished, None)
}

/// Copies the run's kept files out of `sandbox` into `keep.dest`. Never
/// fails the run: a problem is recorded in the answer's `error`.
async fn keep_files(sandbox: &dyn Sandbox, keep: &KeepSpec) -> KeptFiles {
    let failed = |error: String| KeptFiles {
        limit: keep.limit,
        error: Some(error),
        ..KeptFiles::default()
    };
    if let Err(e) = std::fs::create_dir_all(&keep.dest) {
        warn!(dest = %keep.dest.display(), error = %e, "cannot create the folder for the run's kept files");
        return failed(format!("cannot create {}: {e}", keep.dest.display()));
    }
    match sandbox
        .keep_files(&keep.patterns, keep.limit, &keep.dest)
        .await
    {
        Ok(kept) => {
            info!(
                files = kept.kept.len(),
                bytes = kept.bytes,
                capped = kept.capped,
                error = kept.error.as_deref().unwrap_or(""),
                "kept the run's files"
            );
            kept
        }
        Err(e) => {
            warn!(error = %e, "cannot keep the run's files");
            failed(e.to_string())
        }
    }
}

/// Restores the agent if `run` is dropped before it finishes (a caller that
/// gives up, a shutdown): the run is cancelled, its sandbox destroyed in the
/// background, and the agent is IDLE again instead of stuck in RUNNING.
struct RunGuard<'a> {
    agent: &'a Agent,
    cancel: CancellationToken,
    /// `None` once the sandbox was destroyed on the normal path.
    sandbox: Option<Arc<dyn Sandbox>>,
}

impl Drop for RunGuard<'_> {
    fn drop(&mut self) {
        if let Some(sandbox) = self.sandbox.take() {
            // Dropped before the end: the run was cancelled, and that is its
            // recorded outcome, not the previous run's.
            *self.agent.last_outcome.lock_unpoisoned() = Some(Outcome::Cancelled);
            self.cancel.cancel();
            match tokio::runtime::Handle::try_current() {
                Ok(handle) => {
                    handle.spawn(async move { sandbox.destroy().await });
                }
                Err(_) => warn!(
                    "run dropped outside a runtime; the orphan reaper will remove its sandbox"
                ),
            }
        }
        *self.agent.state.lock_unpoisoned() = AgentState::Idle;
    }
}

/// Builds the run record from the run context, which outlives the store.
struct RecordBuilder {
    ctx: Arc<RunContext>,
    request: String,
    outcome: Outcome,
    error: Option<String>,
}

impl RecordBuilder {
    fn new(ctx: Arc<RunContext>, request: &str) -> Self {
        RecordBuilder {
            ctx,
            request: request.to_string(),
            outcome: Outcome::Error,
            error: None,
        }
    }

    fn ended(mut self, outcome: Outcome, error: Option<String>) -> Self {
        self.outcome = outcome;
        self.error = error;
        self
    }

    fn into_record(self) -> RunRecord {
        let st = self.ctx.take_final();
        let result = if st.results.is_empty() {
            "No steps executed".to_string()
        } else {
            st.results.join("\n")
        };
        RunRecord {
            id: self.ctx.run_id.clone(),
            agent: self.ctx.settings.name.clone(),
            request: self.request.clone(),
            outcome: self.outcome,
            steps: st.steps,
            result,
            error: self.error.clone(),
            messages: st.messages,
            usage: st.usage,
            plan: st.plan,
            files: None,
        }
    }
}
