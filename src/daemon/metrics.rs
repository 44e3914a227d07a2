//! Prometheus metrics: `GET /metrics` on the socket (behind the same peer
//! check as every route) and, with `[daemon] metrics_listen`, on a TCP
//! address that serves nothing else.
//!
//! The layers below record through the `metrics` facade (`llm/metrics.rs`,
//! `agent/metrics.rs`, `plugin/metrics.rs`, `sandbox/metrics.rs`) and know
//! nothing of this module; the daemon installs `metrics-exporter-prometheus`
//! as the process's recorder at start-up, with every histogram's buckets
//! registered here, and renders it on each scrape. The gauges of the
//! daemon's state (runs, pools, the history queue) are set from that state
//! as the scrape is answered, so keeping them costs the runs nothing.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ::metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram};
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::state::Daemon;
use crate::agent::metrics as agent_m;
use crate::agent::Outcome;
use crate::llm::metrics as llm_m;
use crate::plugin::metrics as plugin_m;
use crate::sandbox::metrics as sandbox_m;

/// Runs created, by `agent`.
pub const RUNS_CREATED: &str = "agentd_runs_created_total";
/// Runs ended, by `agent` and `outcome` (`finished`, `error`, ...).
pub const RUNS_ENDED: &str = "agentd_runs_ended_total";
/// Runs started and not ended (those waiting for a person included).
pub const RUNS_ACTIVE: &str = "agentd_runs_active";
/// Runs waiting for a slot.
pub const RUNS_QUEUED: &str = "agentd_runs_queued";
/// Of the active runs, those waiting for a person (a question, an approval).
pub const RUNS_WAITING: &str = "agentd_runs_waiting";
/// Containers of an engine's warm pool, by `engine` and `state` (`ready`,
/// `creating`).
pub const POOL_CONTAINERS: &str = "agentd_sandbox_pool_containers";
/// `[sandbox] pool_size` of an engine's pool, by `engine`.
pub const POOL_TARGET: &str = "agentd_sandbox_pool_target";
/// Sandboxes placed on an engine and not freed (its pool included), by `engine`.
pub const ENGINE_CONTAINERS: &str = "agentd_sandbox_engine_containers";
/// Writes and flushes queued for the history writer thread.
pub const HISTORY_QUEUE_DEPTH: &str = "agentd_history_queue_depth";
/// Seconds of one history commit (a batch of writes in one transaction).
pub const HISTORY_COMMIT_DURATION: &str = "agentd_history_commit_duration_seconds";

/// Buckets of [`HISTORY_COMMIT_DURATION`]: a WAL commit without fsync takes
/// well under a millisecond; a batch of thousands of events, tens.
const HISTORY_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

/// What `/metrics` answers with: the Prometheus text format, 0.0.4.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// How often histogram samples are folded into their buckets when nobody
/// scrapes: the exporter keeps them until then, so without this an
/// unscraped daemon's memory would grow with every step.
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error("cannot set up the metrics exporter: {0}")]
    Build(#[from] metrics_exporter_prometheus::BuildError),
    #[error("[daemon] metrics_listen {addr}: cannot listen: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// Installs the exporter as the process's recorder, once (a second call
/// keeps the first). Called before anything records, so the handles the
/// layers below make are the exporter's, not no-ops. Needs a tokio runtime
/// for the upkeep task.
pub fn install() -> Result<(), MetricsError> {
    if HANDLE.get().is_some() {
        return Ok(());
    }
    let buckets: &[(&str, &[f64])] = &[
        (agent_m::STEP_DURATION, agent_m::STEP_BUCKETS),
        (agent_m::STEP_PLUGIN_TIME, agent_m::PLUGIN_TIME_BUCKETS),
        (llm_m::REQUEST_DURATION, llm_m::DURATION_BUCKETS),
        (llm_m::OPERATION_DURATION, llm_m::DURATION_BUCKETS),
        (llm_m::TOKEN_USAGE, llm_m::TOKEN_BUCKETS),
        (plugin_m::TOOL_CALL_DURATION, plugin_m::TOOL_CALL_BUCKETS),
        (sandbox_m::CREATE_DURATION, sandbox_m::BUCKETS),
        (sandbox_m::REMOVE_DURATION, sandbox_m::BUCKETS),
        (HISTORY_COMMIT_DURATION, HISTORY_BUCKETS),
    ];
    // Every histogram has buckets of its own; the default only keeps one
    // added later without them a histogram rather than a summary.
    let mut builder = PrometheusBuilder::new().set_buckets(agent_m::STEP_BUCKETS)?;
    for (name, values) in buckets {
        builder = builder.set_buckets_for_metric(Matcher::Full((*name).to_string()), values)?;
    }
    let handle = match builder.install_recorder() {
        Ok(handle) => handle,
        Err(e) => {
            // Another recorder is installed (the daemon started twice in
            // one process): its records go there and /metrics says so.
            warn!(error = %e, "metrics: a recorder is already installed");
            return Err(e.into());
        }
    };
    describe();
    let upkeep = handle.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(UPKEEP_EVERY).await;
            upkeep.run_upkeep();
        }
    });
    let _ = HANDLE.set(handle);
    Ok(())
}

/// `# HELP` for every series, and the counters that may stay at zero for
/// a long time registered at zero, so a dashboard finds them from the
/// first scrape.
fn describe() {
    describe_counter!(RUNS_CREATED, "Runs created, by agent.");
    describe_counter!(RUNS_ENDED, "Runs ended, by agent and outcome.");
    describe_gauge!(
        RUNS_ACTIVE,
        "Runs started and not ended (waiting ones included)."
    );
    describe_gauge!(RUNS_QUEUED, "Runs waiting for a slot.");
    describe_gauge!(RUNS_WAITING, "Active runs waiting for a person.");
    describe_histogram!(
        agent_m::STEP_DURATION,
        "Wall-clock seconds of one step, by agent."
    );
    describe_histogram!(
        agent_m::STEP_PLUGIN_TIME,
        "Seconds of one step spent in plugin code (strategy and tools), by agent."
    );
    describe_histogram!(
        llm_m::REQUEST_DURATION,
        "Seconds of one HTTP attempt to the LLM endpoint, by model."
    );
    describe_counter!(
        llm_m::REQUEST_ERRORS,
        "Failed LLM attempts, by model and status class."
    );
    describe_histogram!(
        llm_m::OPERATION_DURATION,
        "GenAI operation duration (gen_ai.client.operation.duration), retries included."
    );
    describe_histogram!(
        llm_m::TOKEN_USAGE,
        "GenAI token usage (gen_ai.client.token.usage) per chat operation."
    );
    describe_histogram!(
        plugin_m::TOOL_CALL_DURATION,
        "Seconds of one tool call, by tool."
    );
    describe_counter!(plugin_m::TOOL_CALL_ERRORS, "Failed tool calls, by tool.");
    describe_counter!(plugin_m::PLUGIN_LOADS, "Plugin file loads, by result.");
    describe_counter!(
        plugin_m::PLUGIN_RESCAN_ERRORS,
        "Rescans that could not read the plugins folder."
    );
    describe_counter!(
        plugin_m::CACHE_HITS,
        "Components found in the compile cache."
    );
    describe_counter!(
        plugin_m::CACHE_MISSES,
        "Components compiled (not in the cache)."
    );
    describe_histogram!(
        sandbox_m::CREATE_DURATION,
        "Seconds to create and start a container, by result."
    );
    describe_histogram!(
        sandbox_m::REMOVE_DURATION,
        "Seconds to remove a container, by result."
    );
    describe_gauge!(
        POOL_CONTAINERS,
        "Warm pool containers, by engine and state."
    );
    describe_gauge!(
        POOL_TARGET,
        "Warm pool size wanted ([sandbox] pool_size), by engine."
    );
    describe_gauge!(
        ENGINE_CONTAINERS,
        "Sandboxes placed on an engine and not freed, by engine."
    );
    describe_gauge!(HISTORY_QUEUE_DEPTH, "Writes queued for the history writer.");
    describe_histogram!(
        HISTORY_COMMIT_DURATION,
        "Seconds of one run history commit."
    );
    for name in [
        plugin_m::PLUGIN_RESCAN_ERRORS,
        plugin_m::CACHE_HITS,
        plugin_m::CACHE_MISSES,
    ] {
        counter!(name).absolute(0);
    }
}

/// A run was created (its row committed).
pub fn run_created(agent: &str) {
    counter!(RUNS_CREATED, "agent" => agent.to_string()).increment(1);
}

/// A run ended with `outcome`.
pub fn run_ended(agent: &str, outcome: Outcome) {
    counter!(RUNS_ENDED, "agent" => agent.to_string(), "outcome" => outcome.as_str()).increment(1);
}

/// The history writer committed a batch.
pub fn history_committed(elapsed: Duration) {
    histogram!(HISTORY_COMMIT_DURATION).record(elapsed.as_secs_f64());
}

/// The exposition: the gauges of the daemon's state set now, then every
/// series. `None` when the exporter could not be installed.
fn render(d: &Daemon) -> Option<String> {
    let handle = HANDLE.get()?;
    let counts = d.runs.counts();
    gauge!(RUNS_ACTIVE).set(counts.active as f64);
    gauge!(RUNS_QUEUED).set(counts.queued as f64);
    gauge!(RUNS_WAITING).set(counts.waiting as f64);
    gauge!(HISTORY_QUEUE_DEPTH).set(d.history.queue_depth() as f64);
    if let Some(fleet) = &d.fleet {
        for e in fleet.report() {
            let engine = e.name;
            gauge!(POOL_CONTAINERS, "engine" => engine.clone(), "state" => "ready")
                .set(e.pool.ready as f64);
            gauge!(POOL_CONTAINERS, "engine" => engine.clone(), "state" => "creating")
                .set(e.pool.creating as f64);
            gauge!(POOL_TARGET, "engine" => engine.clone()).set(e.pool.target as f64);
            gauge!(ENGINE_CONTAINERS, "engine" => engine).set(e.containers as f64);
        }
    }
    Some(handle.render())
}

/// `GET /metrics`, on the socket and on `metrics_listen`.
pub async fn route(State(d): State<Arc<Daemon>>) -> Response {
    match render(&d) {
        Some(text) => ([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response(),
        None => super::error::ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "metrics_unavailable",
            "the metrics exporter could not be installed (see the daemon's log)".to_string(),
        )
        .into_response(),
    }
}

/// At most this many scrapers at once: a Prometheus server needs one, a
/// second during a migration; past it a connection is closed at accept.
pub const MAX_CONNECTIONS: usize = 8;

/// Binds `[daemon] metrics_listen` (failing start-up with the key's name
/// when it cannot) and serves `GET /metrics` there, and nothing else,
/// until `stop`. No peer check is possible on TCP: the address is the
/// operator's choice (loopback, or a network their scraper is on), and
/// what it serves is read-only counts with no prompt, output or run id.
pub async fn listen(
    addr: SocketAddr,
    daemon: Arc<Daemon>,
    limits: super::server::ServerLimits,
    stop: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>, MetricsError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| MetricsError::Listen { addr, source })?;
    let bound = listener.local_addr().unwrap_or(addr);
    let app = Router::new()
        .route("/metrics", get(route))
        .fallback(|| async { (StatusCode::NOT_FOUND, "only /metrics is served here\n") })
        .with_state(daemon);
    info!(address = %bound, "serving metrics over TCP");
    // The socket's accept loop's timeouts and a cap of its own: a plain
    // `axum::serve` would let anyone who reaches the port hold connections
    // (and descriptors) open without limit.
    Ok(tokio::spawn(super::server::serve_tcp(
        listener,
        app,
        MAX_CONNECTIONS,
        limits,
        stop,
    )))
}
