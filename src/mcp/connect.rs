//! Reaching one MCP server: spawning a stdio server with nothing of the
//! daemon's environment but `PATH`, or connecting to a Streamable HTTP one
//! with its headers, then rmcp's `initialize`. What the server sends
//! besides answers (`notifications/tools/list_changed`) reaches the
//! supervisor through [`Events`].

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Once};

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::sync::Notify;

use super::settings::Transport;

/// What the supervisor hears from a live connection.
#[derive(Clone, Default)]
pub struct Events {
    /// Woken by each `notifications/tools/list_changed`.
    pub tools_changed: Arc<Notify>,
}

impl ClientHandler for Events {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.notify_one();
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("agentd", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// A live, initialized connection to a server.
pub type Service = RunningService<RoleClient, Events>;

/// One connection and, for a stdio server, its process id.
pub struct Connection {
    /// The rmcp service: its peer sends requests; dropping it closes the
    /// transport (and kills a stdio server's process group).
    pub service: Service,
    /// The stdio server's process id.
    pub pid: Option<u32>,
}

/// Why a server could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The program could not be started.
    #[error("cannot start `{command}`: {source}")]
    Spawn {
        /// The configured `command`.
        command: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A header name or value is not valid HTTP.
    #[error("header `{0}` is not a valid HTTP header")]
    Header(String),
    /// The server did not complete `initialize`.
    #[error("initialize failed: {0}")]
    Initialize(String),
}

/// The TLS of rmcp's HTTP client uses the process's default rustls crypto
/// provider; agentd's is ring (already linked through the LLM client).
fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Err means one is installed already, which serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Connects to the server `name` as `transport` says, with `events` as the
/// client side; the server's stderr goes to the log under its name.
pub async fn connect(
    name: &str,
    transport: &Transport,
    events: Events,
) -> Result<Connection, ConnectError> {
    match transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(args).env_clear().kill_on_drop(true);
            if let Some(path) = std::env::var_os("PATH") {
                cmd.env("PATH", path);
            }
            for (key, value) in env {
                cmd.env(key, value.expose());
            }
            if let Some(dir) = cwd {
                cmd.current_dir(dir);
            }
            let mut wrapped = process_wrap::tokio::CommandWrap::from(cmd);
            // Its own process group: stopping the server stops what it
            // started (an `npx` server's node, a shell's children).
            wrapped.wrap(process_wrap::tokio::ProcessGroup::leader());
            let (child, stderr) = TokioChildProcess::builder(wrapped)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|source| ConnectError::Spawn {
                    command: command.clone(),
                    source,
                })?;
            let pid = child.id();
            if let Some(stderr) = stderr {
                // Its lines under the span of whoever started it (a run's,
                // for a server of the run's own): see `LogParent`.
                let parent = crate::otel::LogParent::current();
                tokio::spawn(log_stderr(name.to_string(), stderr, parent));
            }
            let service = events
                .serve(child)
                .await
                .map_err(|e| ConnectError::Initialize(e.to_string()))?;
            Ok(Connection { service, pid })
        }
        Transport::Http { url, headers } => {
            install_crypto_provider();
            let mut custom = HashMap::new();
            for (key, value) in headers {
                let name = http::HeaderName::try_from(key.as_str())
                    .map_err(|_| ConnectError::Header(key.clone()))?;
                let mut value = http::HeaderValue::try_from(value.expose())
                    .map_err(|_| ConnectError::Header(key.clone()))?;
                value.set_sensitive(true);
                custom.insert(name, value);
            }
            let config =
                StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(custom);
            let transport = StreamableHttpClientTransport::from_config(config);
            let service = events
                .serve(transport)
                .await
                .map_err(|e| ConnectError::Initialize(e.to_string()))?;
            Ok(Connection { service, pid: None })
        }
    }
}

/// The longest stderr line logged; the rest of a longer one is dropped.
const MAX_LOG_LINE: usize = 2048;

/// Copies a stdio server's stderr to the log, line by line, each cut to
/// [`MAX_LOG_LINE`], until the process closes it.
/// `parent`: whose lines these are (a run's, for a per-run server).
async fn log_stderr(
    server: String,
    stderr: tokio::process::ChildStderr,
    parent: crate::otel::LogParent,
) {
    let mut lines = BufReader::new(stderr);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        // Bounded read: a line without an end cannot grow without limit.
        match (&mut lines)
            .take(MAX_LOG_LINE as u64 + 1)
            .read_until(b'\n', &mut buf)
            .await
        {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let text = String::from_utf8_lossy(&buf);
                let text = text.trim_end();
                if !text.is_empty() {
                    tracing::info!(parent: parent.id(), mcp_server = %server, "{text}");
                }
                // Skip the rest of an over-long line, a bounded piece at a time.
                let mut ended = buf.last() == Some(&b'\n');
                while !ended {
                    buf.clear();
                    match (&mut lines)
                        .take(MAX_LOG_LINE as u64)
                        .read_until(b'\n', &mut buf)
                        .await
                    {
                        Ok(0) | Err(_) => return,
                        Ok(_) => ended = buf.last() == Some(&b'\n'),
                    }
                }
            }
        }
    }
}
