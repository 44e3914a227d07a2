//! agentd as an MCP server: Streamable HTTP at `/mcp` on the daemon's own
//! socket, served by rmcp's `StreamableHttpService` inside the `/v1`
//! router, so the accept loop's peer check (`403` to a user not allowed on
//! the socket), connection caps and timeouts apply to it unchanged.
//!
//! rmcp makes one [`SessionHandler`] per MCP session (one per request for
//! clients of the sessionless protocol) and drops it when the session
//! closes (`DELETE`, the client gone past the keep-alive, shutdown); what
//! belongs to a session (its sandbox, its place among the sessions told of
//! tool list changes) lives in the handler and goes with it.
//!
//! Who is calling comes from the connection, never from the client: the
//! accept loop puts the [`Caller`] in each HTTP request's extensions, rmcp
//! hands the request's `http::request::Parts` to the handler in
//! `RequestContext.extensions`, and runs started here are the caller's uid's
//! as with `POST /v1/runs` (its queue share).

mod list_changed;
mod plugin_tools;
mod run_agent;
mod session_sandbox;
mod tools;

use std::sync::{Arc, Mutex, OnceLock};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Extensions, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::peer::Caller;
use super::settings::McpServerConfig;
use super::state::Daemon;
use crate::sync::LockExt;
use list_changed::{Registration, Sessions};
use session_sandbox::SessionSandbox;

/// What the router mounts at `/mcp`.
pub type McpService = StreamableHttpService<SessionHandler, LocalSessionManager>;

/// What every session shares.
pub struct McpServer {
    daemon: Arc<Daemon>,
    settings: McpServerConfig,
    sessions: Arc<Sessions>,
}

impl McpServer {
    /// The tools served now: agentd's own, then (with `expose_tools`) the
    /// tool plugins of the current set.
    fn tools(&self) -> Vec<Tool> {
        let mut tools = tools::list();
        if self.settings.expose_tools {
            tools.extend(plugin_tools::list(
                &self.daemon.plugins.snapshot(),
                tools::NAMES,
            ));
        }
        tools
    }

    /// The served list, compared to tell whether it changed.
    fn tool_fingerprint(&self) -> Vec<u8> {
        serde_json::to_vec(&self.tools()).unwrap_or_default()
    }
}

/// The MCP service, or `None` with `[mcp_server] enabled = false`. Its
/// sessions end when `stop` is cancelled (shutdown).
pub fn service(daemon: &Arc<Daemon>, stop: CancellationToken) -> Option<McpService> {
    let generation = daemon.generation();
    let settings = generation.config.mcp_server.clone();
    if !settings.enabled {
        return None;
    }
    let server = Arc::new(McpServer {
        daemon: daemon.clone(),
        settings: settings.clone(),
        sessions: Arc::default(),
    });
    list_changed::spawn(&server);
    let mut manager = LocalSessionManager::default();
    // A session that sends nothing is closed, but never during a call it
    // is waiting on: a `run_agent` without progress sends nothing until the
    // run ends, which `max_run_time` bounds.
    manager.session_config.keep_alive =
        Some(settings.idle_timeout + generation.config.daemon.run_limits.max_run_time);
    let config = StreamableHttpServerConfig::default()
        .with_cancellation_token(stop)
        // The guard against DNS rebinding checks `Host`: it protects a
        // server a browser can reach. Only local processes reach this
        // socket (its mode and the peer check decide which), whatever
        // host their URL names.
        .disable_allowed_hosts()
        .with_max_request_body_bytes(generation.config.daemon.max_request_bytes);
    Some(StreamableHttpService::new(
        move || Ok(SessionHandler::new(server.clone())),
        Arc::new(manager),
        config,
    ))
}

/// One MCP session's handler.
pub struct SessionHandler {
    server: Arc<McpServer>,
    sandbox: Arc<SessionSandbox>,
    /// Its place among the sessions told of tool list changes, from its
    /// `notifications/initialized` on.
    registration: Mutex<Option<Registration>>,
    /// The session's `Mcp-Session-Id`, from the first request carrying it
    /// (a fresh id for the sessionless protocol): its sandbox's name.
    id: OnceLock<String>,
}

impl SessionHandler {
    /// Cheap, and does nothing until used: rmcp also makes throwaway
    /// handlers (to look a tool up while checking headers).
    fn new(server: Arc<McpServer>) -> Self {
        let sandbox = SessionSandbox::new(
            server.daemon.sandboxes.clone(),
            server.settings.idle_timeout,
        );
        SessionHandler {
            server,
            sandbox,
            registration: Mutex::new(None),
            id: OnceLock::new(),
        }
    }

    fn session_id(&self, extensions: &Extensions) -> &str {
        self.id.get_or_init(|| {
            extensions
                .get::<http::request::Parts>()
                .and_then(|p| p.headers.get("mcp-session-id"))
                .and_then(|v| v.to_str().ok())
                .filter(|v| !v.is_empty() && v.len() <= 128)
                .map(str::to_string)
                .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string())
        })
    }

    async fn call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CallToolResult, ErrorData> {
        let d = &self.server.daemon;
        let uid = caller_uid(&context.extensions);
        let arguments = request.arguments;
        Ok(match request.name.as_ref() {
            tools::RUN_AGENT => {
                let progress = context
                    .meta
                    .get_progress_token()
                    .map(|token| run_agent::Progress {
                        token,
                        peer: context.peer.clone(),
                    });
                run_agent::run_agent(d, &arguments, uid, progress, &context.ct).await
            }
            tools::START_RUN => tools::start_run(d, &arguments, uid).await,
            tools::GET_RUN => tools::get_run(d, &arguments).await,
            tools::CANCEL_RUN => tools::cancel_run(d, &arguments).await,
            tools::LIST_AGENTS => tools::list_agents(d),
            other => {
                let plugin = self
                    .server
                    .settings
                    .expose_tools
                    .then(|| d.plugins.snapshot().tool(other))
                    .flatten();
                let Some(plugin) = plugin else {
                    return Err(ErrorData::invalid_params(
                        format!("unknown tool `{other}`"),
                        None,
                    ));
                };
                let session = self.session_id(&context.extensions).to_string();
                plugin_tools::call(d, plugin, &self.sandbox, &session, arguments, &context.ct).await
            }
        })
    }
}

/// The uid of the connection the request came on, as the accept loop
/// read it (`SO_PEERCRED`).
fn caller_uid(extensions: &Extensions) -> Option<u32> {
    extensions
        .get::<http::request::Parts>()?
        .extensions
        .get::<Caller>()?
        .uid
}

impl ServerHandler for SessionHandler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("agentd", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "agentd runs LLM agents. list_agents names them; run_agent runs one on a request and \
             waits for its result; start_run, get_run and cancel_run do the same for long work.",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.server.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let span = tracing::info_span!(
            "mcp_call",
            tool = %request.name,
            uid = ?caller_uid(&context.extensions),
        );
        self.call(request, context)
            .instrument(span)
            .await
            .map(Into::into)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let registration = self.server.sessions.register(context.peer.clone());
        *self.registration.lock_unpoisoned() = Some(registration);
        tracing::debug!(uid = ?caller_uid(&context.extensions), "MCP session initialized");
    }
}
