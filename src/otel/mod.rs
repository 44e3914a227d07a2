//! OpenTelemetry traces: the spans agentd exports, named and attributed as
//! the OpenTelemetry GenAI semantic conventions say (`invoke_agent {agent}`,
//! `chat {model}`, `execute_tool {tool}`), and the OTLP pipeline that
//! exports them when the standard `OTEL_*` variables ask for it
//! ([`export`]).
//!
//! The spans here are `tracing` spans with the target [`TARGET`], which the
//! log never prints (its filter leaves that target out, see `main.rs`) and
//! only the OpenTelemetry layer enables. So when export is off no layer
//! wants them: each constructor returns a disabled span after one cached
//! interest check, and its fields (a `format!` for the name among them) are
//! never evaluated. The log's own spans (`run{run_id=..}`, `step{step=..}`)
//! are separate and unchanged, which is what joins logs and traces: every log
//! line of a run carries `run_id`, every span of its trace `agentd.run.id`.
//!
//! A leaf: it knows nothing of the crate, the layers that make the spans
//! hand it plain strings and numbers.

pub mod export;

use tracing::field::Empty;
use tracing::Span;

/// The `tracing` target of every span meant for OpenTelemetry only.
pub const TARGET: &str = "agentd::otel";

/// `gen_ai.provider.name`: agentd speaks the OpenAI chat-completions API to
/// whatever serves it.
const PROVIDER: &str = "openai";

/// The span of one run, `invoke_agent {agent}` (kind `internal`: the agent
/// runs in this process). `strategy_version` is only called when the span is
/// exported.
pub fn invoke_agent(
    run_id: &str,
    agent: &str,
    strategy_version: impl FnOnce() -> Option<String>,
) -> Span {
    let span = tracing::info_span!(
        target: "agentd::otel",
        "invoke_agent",
        otel.name = %format_args!("invoke_agent {agent}"),
        otel.kind = "internal",
        otel.status_code = Empty,
        gen_ai.operation.name = "invoke_agent",
        gen_ai.provider.name = PROVIDER,
        gen_ai.agent.name = agent,
        gen_ai.request.model = Empty,
        agentd.run.id = run_id,
        agentd.plugin.strategy.version = Empty,
        agentd.outcome = Empty,
        agentd.steps = Empty,
        error.type = Empty,
    );
    if !span.is_disabled() {
        if let Some(version) = strategy_version() {
            span.record("agentd.plugin.strategy.version", version.as_str());
        }
    }
    span
}

/// Records how a run ended on its [`invoke_agent`] span: `outcome` is the
/// record's outcome (`finished`, `error`, ...); `error`, `token_limit` and
/// `interrupted` mark the span an error of that type (a cancel, or the step
/// limit, is how the run was asked to end, not a failure).
pub fn run_ended(span: &Span, model: Option<&str>, outcome: &str, steps: u32) {
    if span.is_disabled() {
        return;
    }
    if let Some(model) = model {
        span.record("gen_ai.request.model", model);
    }
    span.record("agentd.outcome", outcome);
    span.record("agentd.steps", i64::from(steps));
    if matches!(outcome, "error" | "token_limit" | "interrupted") {
        failed(span, outcome);
    }
}

/// One step of a run's loop, `step {n}`: the parent of that step's `chat`
/// and `execute_tool` spans.
///
/// Every span of a run carries `agentd.run.id`, not only its root: a
/// backend's search for a run's slow `chat` or failing `execute_tool`
/// filters spans by attribute, and most cannot join a span to its root's.
pub fn step(step: u32, run_id: &str) -> Span {
    tracing::info_span!(
        target: "agentd::otel",
        "step",
        otel.name = %format_args!("step {step}"),
        otel.kind = "internal",
        otel.status_code = Empty,
        agentd.run.id = run_id,
        agentd.step = i64::from(step),
        error.type = Empty,
    )
}

/// One LLM request, `chat {model}` (kind `client`), retries included;
/// `run_id` is the run that asked, when one did.
pub fn chat(model: &str, run_id: Option<&str>) -> Span {
    tracing::info_span!(
        target: "agentd::otel",
        "chat",
        otel.name = %format_args!("chat {model}"),
        otel.kind = "client",
        otel.status_code = Empty,
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = PROVIDER,
        gen_ai.request.model = model,
        gen_ai.response.model = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.response.finish_reasons = Empty,
        agentd.run.id = run_id,
        error.type = Empty,
    )
}

/// What the model answered, on a [`chat`] span.
pub fn chat_answered(
    span: &Span,
    input_tokens: u64,
    output_tokens: u64,
    finish_reason: Option<&str>,
) {
    if span.is_disabled() {
        return;
    }
    span.record("gen_ai.usage.input_tokens", int(input_tokens));
    span.record("gen_ai.usage.output_tokens", int(output_tokens));
    if let Some(reason) = finish_reason {
        span.record("gen_ai.response.finish_reasons", reason);
    }
}

/// One tool call, `execute_tool {tool}` (kind `internal`) of the run
/// `run_id`, when it has one; `version` is the tool plugin's own version,
/// only called when the span is exported.
pub fn execute_tool(
    tool: &str,
    call_id: &str,
    run_id: Option<&str>,
    version: impl FnOnce() -> Option<String>,
) -> Span {
    let span = tracing::info_span!(
        target: "agentd::otel",
        "execute_tool",
        otel.name = %format_args!("execute_tool {tool}"),
        otel.kind = "internal",
        otel.status_code = Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = tool,
        gen_ai.tool.call.id = call_id,
        gen_ai.tool.type = "function",
        agentd.run.id = run_id,
        agentd.plugin.tool.version = Empty,
        error.type = Empty,
    );
    if !span.is_disabled() {
        if let Some(version) = version() {
            span.record("agentd.plugin.tool.version", version.as_str());
        }
    }
    span
}

/// The parent to give a log line written for the current span from a task
/// of its own (a guest's stdout, an MCP server's stderr): the current span
/// if the log can see it, else its nearest ancestor the log can see.
///
/// Why: while traces are exported the span current in a run is one of
/// ours (`invoke_agent`, `execute_tool`), which the log's filter leaves
/// out. Entered elsewhere, the log looks for its spans on that thread's
/// stack only; as an explicit parent it does not look past a span it
/// leaves out. Either way the run's `run{run_id=..}` prefix was lost. The
/// ancestors are found in the registry; holding the span keeps them open,
/// so the id stays theirs.
#[derive(Clone)]
pub struct LogParent {
    _span: Span,
    id: Option<tracing::Id>,
}

impl LogParent {
    pub fn current() -> Self {
        use tracing_subscriber::registry::{LookupSpan, Registry};
        let span = Span::current();
        let id = tracing::dispatcher::get_default(|dispatch| {
            let own = span.id()?;
            let Some(registry) = dispatch.downcast_ref::<Registry>() else {
                return Some(own);
            };
            let mut at = registry.span(&own)?;
            while at.metadata().target() == TARGET {
                at = at.parent()?;
            }
            Some(at.id())
        });
        LogParent { _span: span, id }
    }

    /// For an event's `parent:`.
    pub fn id(&self) -> Option<tracing::Id> {
        self.id.clone()
    }
}

/// OTLP integers are signed, and the layer records an unsigned one as text.
fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Marks `span` failed: status `ERROR` and `error.type` (a short, low
/// cardinality name: an HTTP status, `timeout`, a run's outcome).
pub fn failed(span: &Span, error_type: &str) {
    if span.is_disabled() {
        return;
    }
    span.record("otel.status_code", "error");
    span.record("error.type", error_type);
}
