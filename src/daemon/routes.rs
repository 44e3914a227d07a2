//! The HTTP/JSON API under `/v1` (wire types in [`crate::api`]).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::Extension;
use axum::{Json, Router};
use futures::StreamExt;
use serde::Deserialize;

use super::body::{self, BodyLimits};
use super::error::ApiError;
use super::event_log;
use super::mcp_server::McpService;
use super::paging::PageRequest;
use super::peer::Caller;
use super::plugin_install;
use super::run_api::{self, CancelRunError, FindError, ReplyRunError, StartError};
use super::runs::CreateError;
use super::state::{AgentLookupError, Daemon};
use crate::api::{
    AgentList, ApproveRun, CacheStatus, CreateRun, EngineStatus, EngineSummary, InputRun, RunList,
    RunState, RunView, Status,
};

type Shared = State<Arc<Daemon>>;

/// Every route's request body is read by [`body::buffered`] first, under
/// `max_request_bytes` and `body_timeout`, so a handler's extractor only
/// ever reads from memory. A plugin upload (`PUT /v1/plugins/{name}`) is a
/// component, tens of megabytes for Python: its route has its own limits,
/// `plugin_limits` (`max_plugin_bytes`), layered on it alone. `mcp` is the
/// MCP server (`[mcp_server]`), at `/mcp` under the same body limits.
pub fn router(
    daemon: Arc<Daemon>,
    body_limits: BodyLimits,
    plugin_limits: BodyLimits,
    mcp: Option<McpService>,
) -> Router {
    let install = Router::new()
        .route(
            "/v1/plugins/{name}",
            put(plugin_install::install).delete(plugin_install::remove),
        )
        .layer(DefaultBodyLimit::max(plugin_limits.max_bytes))
        .layer(middleware::from_fn_with_state(
            plugin_limits,
            body::buffered,
        ));
    let mut api = Router::new();
    if let Some(mcp) = mcp {
        api = api.route_service("/mcp", mcp);
    }
    api.route("/v1/status", get(status))
        .route("/metrics", get(super::metrics::route))
        .route("/v1/agents", get(agents))
        .route("/v1/doctor", get(doctor))
        .route("/v1/plugins", get(plugins))
        .route("/v1/plugins/reload", post(reload_plugins))
        .route("/v1/mcp", get(mcp_servers))
        .route("/v1/events", get(daemon_events))
        .route("/v1/runs", post(create_run).get(list_runs))
        .route("/v1/runs/{id}", get(get_run))
        .route("/v1/runs/{id}/events", get(run_events))
        .route("/v1/runs/{id}/files", get(super::artifacts::list))
        .route(
            "/v1/runs/{id}/files/{*path}",
            get(super::artifacts::download),
        )
        .route("/v1/runs/{id}/cancel", post(cancel_run))
        .route("/v1/runs/{id}/input", post(input_run))
        .route("/v1/runs/{id}/approve", post(approve_run))
        .route("/v1/runs/{id}/resume", post(super::resume::route))
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(body_limits.max_bytes))
        .layer(middleware::from_fn_with_state(body_limits, body::buffered))
        .merge(install)
        .with_state(daemon)
}

async fn unknown_route(request: Request) -> ApiError {
    ApiError::not_found(format!(
        "no route {} {} (the API is under /v1)",
        request.method(),
        request.uri().path()
    ))
}

async fn method_not_allowed(request: Request) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!(
            "{} is not allowed on {}",
            request.method(),
            request.uri().path()
        ),
    )
}

async fn status(State(d): Shared) -> Json<Status> {
    let counts = d.runs.counts();
    let engines = d.fleet.as_ref().map_or_else(Vec::new, |f| {
        f.report()
            .into_iter()
            .map(|e| EngineSummary {
                name: e.name,
                address: e.address,
                reachable: e.reachable,
                containers: e.containers,
                capacity: e.capacity,
                last_error: e.last_error,
                pool: e.pool.into(),
            })
            .collect()
    });
    let sandbox_engine = match d.fleet.as_ref().and_then(|f| f.first()) {
        Some(docker) => {
            // Half a second: `GET /v1/status` is what an operator (and
            // the fault suite) asks to see that the daemon answers, so a
            // wedged engine must not hold its answer past a second.
            let ping = tokio::time::timeout(Duration::from_millis(500), docker.ping()).await;
            let error = match ping {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(_) => Some("the engine did not answer within 0.5 s".into()),
            };
            EngineStatus {
                reachable: error.is_none(),
                address: docker.engine_address().to_string(),
                error,
                warnings: docker.isolation_warnings(),
                pool: docker.pool_status().into(),
            }
        }
        None => EngineStatus {
            reachable: false,
            address: String::new(),
            error: d.docker_error.clone(),
            warnings: Vec::new(),
            pool: Default::default(),
        },
    };
    let snapshot = d.plugins.snapshot();
    let generation = d.generation();
    Json(Status {
        version: env!("CARGO_PKG_VERSION").to_string(),
        uptime_s: d.uptime().as_secs_f64(),
        runs_active: counts.active,
        runs_waiting: counts.waiting,
        runs_queued: counts.queued,
        plugins_loaded: snapshot.strategies.len() + snapshot.tools.len(),
        sandbox_engine,
        engines,
        socket: d.socket.display().to_string(),
        state_dir: generation.config.daemon.state_dir.display().to_string(),
        accepting_runs: d.runs.accepting(),
        plugin_cache: CacheStatus {
            enabled: d.plugins.cache_dir().is_some(),
            hits: d.plugins.cache_hits(),
            misses: d.plugins.cache_misses(),
        },
        token_budgets: d.budgets.view(),
    })
}

async fn agents(State(d): Shared) -> Json<AgentList> {
    Json(d.agent_list())
}

#[derive(Deserialize)]
struct DoctorQuery {
    agent: Option<String>,
}

/// `agentd doctor`'s checks run by the daemon as itself: its user, its
/// configuration, its folders, the engine and endpoint as it reaches them.
/// On a system install neither root nor a CLI user sees what the `agentd`
/// user sees (the state folder is its own, the configuration is not the
/// CLI users' to read), so only the daemon can say whether its runs will
/// work. Costs a throwaway sandbox and a `GET /models`.
async fn doctor(
    State(d): Shared,
    Query(q): Query<DoctorQuery>,
) -> Result<Json<crate::api::DoctorReport>, ApiError> {
    let generation = d.generation();
    let config = &generation.config;
    let name = q.agent.unwrap_or_else(|| "manus".to_string());
    let Some(agent) = config.agent(&name).cloned() else {
        let known: Vec<_> = config.agents.keys().cloned().collect();
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "unknown_agent",
            format!("unknown agent `{name}` (known: {})", known.join(", ")),
        ));
    };
    let mut checks = vec![crate::doctor::check_loaded_config(config.source.as_deref())];
    checks.extend(crate::doctor::check(config, &name, Some(&agent)).await);
    Ok(Json(crate::api::DoctorReport {
        ok: checks.iter().all(|c| c.ok),
        checks,
    }))
}

/// Every `[mcp.<server>]`: its state, process, tools and per-run instances.
async fn mcp_servers(State(d): Shared) -> Json<crate::api::McpList> {
    Json(super::mcp_status::list(&d.mcp))
}

/// One row per file in the plugins folder: what it holds, whether it
/// loaded, and for a file that failed, which version still serves.
/// Every plugin file with what the running configuration grants it.
async fn plugins(State(d): Shared) -> Json<serde_json::Value> {
    Json(serde_json::json!({ "plugins": d.plugin_statuses() }))
}

/// Rescans the plugins folder now instead of waiting for the watcher.
async fn reload_plugins(State(d): Shared) -> Result<Json<serde_json::Value>, ApiError> {
    let dir = d.generation().config.daemon.plugins_dir.clone();
    let changes = d
        .plugins
        .try_rescan(&dir)
        .await
        .map_err(ApiError::internal)?;
    for change in &changes {
        super::plugin_events::report(&d.bus, change);
    }
    Ok(Json(serde_json::json!({ "changes": changes })))
}

#[derive(Deserialize)]
struct BusQuery {
    since: Option<u64>,
}

/// The daemon-wide NDJSON stream; it ends only when the client leaves.
async fn daemon_events(
    State(d): Shared,
    query: Result<Query<BusQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let stream = d.bus.clone().follow(q.since);
    Ok((
        [
            (header::CONTENT_TYPE, "application/x-ndjson"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(stream.map(Ok::<_, Infallible>)),
    )
        .into_response())
}

/// The body is read as bytes and parsed here, whatever its content type:
/// `curl -d` sends form encoding by default and should still just work.
async fn create_run(
    State(d): Shared,
    caller: Option<Extension<Caller>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let uid = caller.and_then(|Extension(c)| c.uid);
    let body = body.map_err(|r| {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                "the request body is larger than [daemon] max_request_bytes",
            )
        } else {
            ApiError::bad_request(format!("cannot read the request body: {r}"))
        }
    })?;
    let create: CreateRun = serde_json::from_slice(&body).map_err(|e| {
        ApiError::bad_request(format!(
            "the body must be JSON {{\"agent\": \"...\", \"request\": \"...\"}}: {e}"
        ))
    })?;
    let mut files = Vec::with_capacity(create.files.len());
    for (path, content) in create.files {
        let bytes = content
            .bytes()
            .map_err(|e| ApiError::bad_request(format!("file `{path}`: {e}")))?;
        files.push(crate::agent::InputFile::new(&path, bytes).map_err(ApiError::bad_request)?);
    }
    match run_api::start_run(&d, &create.agent, create.request, uid, files).await {
        Ok(view) => Ok((StatusCode::CREATED, Json(view)).into_response()),
        Err(e) => Ok(start_error(e)),
    }
}

/// A refused run as the API words it.
pub(super) fn start_error(e: StartError) -> Response {
    match e {
        StartError::EmptyRequest => ApiError::bad_request(e.to_string()).into_response(),
        StartError::ShuttingDown => ApiError::shutting_down().into_response(),
        StartError::Agent(AgentLookupError::Unknown { .. }) => {
            ApiError::new(StatusCode::NOT_FOUND, "unknown_agent", e.to_string()).into_response()
        }
        StartError::Agent(AgentLookupError::Unusable { .. }) => {
            ApiError::bad_request(e.to_string()).into_response()
        }
        StartError::Create(
            e @ (CreateError::QueueFull { .. } | CreateError::UserQueueFull { .. }),
        ) => {
            tracing::warn!(error = %e, "refused a run: the queue is full");
            (
                [(header::RETRY_AFTER, QUEUE_FULL_RETRY_AFTER)],
                ApiError::new(StatusCode::TOO_MANY_REQUESTS, "queue_full", e.to_string()),
            )
                .into_response()
        }
        StartError::Create(e @ CreateError::HistoryUnavailable(_)) => {
            ApiError::history_unavailable(e).into_response()
        }
        StartError::Create(CreateError::BudgetExhausted(e)) => {
            tracing::warn!(error = %e, "refused a run: a daily token budget is used up");
            (
                [(header::RETRY_AFTER, e.retry_after_secs().to_string())],
                ApiError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "budget_exhausted",
                    e.to_string(),
                ),
            )
                .into_response()
        }
        StartError::Create(CreateError::ShuttingDown) => ApiError::shutting_down().into_response(),
        StartError::Internal(e) => {
            ApiError::internal(format!("creating the run failed: {e}")).into_response()
        }
    }
}

/// Seconds a client refused with `queue_full` is told to wait: about how
/// long a slot takes to free up on a busy daemon.
const QUEUE_FULL_RETRY_AFTER: &str = "5";

#[derive(Deserialize)]
struct ListQuery {
    limit: Option<u32>,
    before: Option<i64>,
    /// `queued`, `running` or `waiting`: only the live runs in that state
    /// (from memory: they are all there), newest first, unpaged.
    state: Option<String>,
}

async fn list_runs(
    State(d): Shared,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<RunList>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    if let Some(state) = &q.state {
        return match RunState::parse(state) {
            Some(state) if state != RunState::Ended => Ok(Json(RunList {
                runs: d.runs.live_in(state),
                next_before: None,
            })),
            _ => Err(ApiError::bad_request(format!(
                "state must be queued, running or waiting, not `{state}` (ended runs are the rest of the list)"
            ))),
        };
    }
    let mut list = d
        .history
        .list(q.limit.unwrap_or(50), q.before)
        .await
        .map_err(ApiError::internal)?;
    // Runs in flight are fresher in memory than in the database.
    for run in &mut list.runs {
        if run.state != RunState::Ended {
            if let Some(live) = d.runs.get(&run.id) {
                *run = live.list_row();
            }
        }
    }
    Ok(Json(list))
}

async fn find_run(d: &Daemon, id: &str, page: PageRequest) -> Result<RunView, ApiError> {
    run_api::find_run(d, id, page).await.map_err(|e| match e {
        FindError::NotFound(_) => ApiError::not_found(e.to_string()),
        FindError::History(e) => ApiError::internal(e),
    })
}

#[derive(Deserialize)]
struct RunQuery {
    messages_from: Option<u32>,
    messages_limit: Option<u32>,
}

/// The run and one page of its messages (see [`RunView`]); without
/// parameters the first page, which for most runs is all of them.
async fn get_run(
    State(d): Shared,
    Path(id): Path<String>,
    query: Result<Query<RunQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<RunView>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let page = PageRequest::new(q.messages_from, q.messages_limit);
    find_run(&d, &id, page).await.map(Json)
}

#[derive(Deserialize)]
struct EventsQuery {
    follow: Option<bool>,
    /// Only events after this seq: where a broken stream left off.
    since: Option<u64>,
}

/// Newline-delimited JSON: every earlier event first, then each new one as
/// it happens; the body ends after `run_ended` (or at once with
/// `follow=false`).
async fn run_events(
    State(d): Shared,
    Path(id): Path<String>,
    query: Result<Query<EventsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let follow = q.follow.unwrap_or(true);
    let since = q.since.unwrap_or(0);
    let live = d.runs.get(&id);
    // Every recorded run has at least its `run_ended`; the run itself is
    // looked up only to tell "no events" from "no such run".
    if live.is_none()
        && d.history
            .summary(&id)
            .await
            .map_err(ApiError::internal)?
            .is_none()
    {
        return Err(ApiError::not_found(format!("no run `{id}`")));
    }
    let stream = event_log::follow(
        id,
        live.as_ref().map(|r| &r.events),
        d.history.clone(),
        since,
        follow,
    );
    let body = Body::from_stream(stream.map(Ok::<_, Infallible>));
    Ok((
        [
            (header::CONTENT_TYPE, "application/x-ndjson"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response())
}

async fn cancel_run(
    State(d): Shared,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<RunView>), ApiError> {
    match run_api::cancel_run(&d, &id).await {
        Ok(view) => Ok((StatusCode::ACCEPTED, Json(view))),
        Err(e @ CancelRunError::Ended(_)) => Err(ApiError::conflict(e.to_string())),
        Err(e @ CancelRunError::NotFound(_)) => Err(ApiError::not_found(e.to_string())),
        Err(CancelRunError::History(e)) => Err(ApiError::internal(e)),
    }
}

/// A request body read as JSON of type `T`, whatever its content type, with
/// the shape the route expects named in the error.
fn json_body<T: serde::de::DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
    shape: &str,
) -> Result<T, ApiError> {
    let body =
        body.map_err(|r| ApiError::bad_request(format!("cannot read the request body: {r}")))?;
    serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("the body must be JSON {shape}: {e}")))
}

fn reply_error(e: ReplyRunError) -> ApiError {
    match e {
        ReplyRunError::NotFound(_) => ApiError::not_found(e.to_string()),
        ReplyRunError::NotWaiting { .. } => {
            ApiError::new(StatusCode::CONFLICT, "not_waiting", e.to_string())
        }
        ReplyRunError::History(e) => ApiError::internal(e),
    }
}

/// `POST /v1/runs/{id}/input`: the answer to the question the run waits on.
/// Recorded with the caller's uid (its connection's credentials).
async fn input_run(
    State(d): Shared,
    Path(id): Path<String>,
    caller: Option<Extension<Caller>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<RunView>, ApiError> {
    let uid = caller.and_then(|Extension(c)| c.uid);
    let input: InputRun = json_body(body, r#"{"text": "...", "id": "..."}"#)?;
    run_api::answer(&d, &id, input.id.as_deref(), input.text, uid)
        .await
        .map(Json)
        .map_err(reply_error)
}

/// `POST /v1/runs/{id}/approve`: the decision on the call the run holds.
async fn approve_run(
    State(d): Shared,
    Path(id): Path<String>,
    caller: Option<Extension<Caller>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<RunView>, ApiError> {
    let uid = caller.and_then(|Extension(c)| c.uid);
    let a: ApproveRun = json_body(
        body,
        r#"{"call_id": "...", "decision": "approve" | "deny", "reason": "..."}"#,
    )?;
    run_api::decide(&d, &id, &a.call_id, a.decision, a.reason, uid)
        .await
        .map(Json)
        .map_err(reply_error)
}
