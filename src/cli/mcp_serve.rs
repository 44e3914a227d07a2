//! `agentd mcp serve`: the daemon's MCP server for clients that start a
//! command and speak newline-delimited JSON-RPC on its stdin and stdout
//! (Claude Desktop, IDEs, goose). It is a pump between two rmcp transports:
//! stdio on one side, Streamable HTTP to `/mcp` over the daemon's Unix
//! socket on the other. It holds no MCP state of its own: the handshake,
//! sessions, progress and cancellation are the client's and the daemon's,
//! and the daemon sees this process's credentials, so the peer check and
//! per-user caps apply to whoever started it.

use std::path::Path;

use rmcp::model::{ErrorData, JsonRpcMessage, RequestId, ServerJsonRpcMessage};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, Transport, UnixSocketHttpClient};
use rmcp::RoleServer;
use tokio::task::JoinSet;

use super::endpoint;
use super::exit;

/// The URL the daemon is asked for; only its path matters on the socket.
const URI: &str = "http://localhost/mcp";

#[derive(Debug, thiserror::Error)]
enum BridgeError {
    #[error("the socket path {0} is not UTF-8")]
    SocketPath(String),
    #[error("the daemon refused the MCP session: {0}")]
    Refused(String),
    #[error("the daemon closed the MCP session")]
    Closed,
    #[error("cannot write to stdout: {0}")]
    Stdout(#[source] std::io::Error),
}

/// Bridges until the client closes stdin (0) or the daemon goes away (1).
pub async fn run(socket: Option<&Path>, config: Option<&Path>) -> i32 {
    let path = match endpoint::socket_path(socket, config) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("agentd: {e}");
            return exit::USAGE;
        }
    };
    match bridge(&path).await {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("agentd: {e} ({})", path.display());
            1
        }
    }
}

async fn bridge(socket: &Path) -> Result<(), BridgeError> {
    let socket_text = socket
        .to_str()
        .ok_or_else(|| BridgeError::SocketPath(socket.display().to_string()))?;
    let mut daemon = StreamableHttpClientTransport::with_client(
        UnixSocketHttpClient::new(socket_text, URI),
        StreamableHttpClientTransportConfig::with_uri(URI),
    );
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    let mut client = AsyncRwTransport::<RoleServer, _, _>::new_server(stdin, stdout);
    // Each message to the daemon is its own POST (a request's answer may
    // stream for as long as a run takes), so they are sent side by side,
    // as rmcp's own service loop sends them.
    let mut sends = JoinSet::new();
    loop {
        tokio::select! {
            from_client = client.receive() => {
                let Some(message) = from_client else {
                    break;
                };
                let id = match &message {
                    JsonRpcMessage::Request(r) => Some(r.id.clone()),
                    _ => None,
                };
                let initialize = is_initialize(&message);
                // The transport hands a message to its worker when the send
                // is first polled, so each is polled once here, in the
                // client's order, before the rest of it (the answer) goes
                // to its own task. Spawned unpolled, a burst of lines let
                // the scheduler start a `tools/call` before the
                // `notifications/initialized` ahead of it; the worker took
                // the call for the notification and quit, and every request
                // after it was answered "Transport channel closed".
                let mut send = Box::pin(daemon.send(message));
                match futures::poll!(&mut send) {
                    std::task::Poll::Ready(result) => {
                        let sent = Sent { id, initialize, result: result.map_err(|e| e.to_string()) };
                        settle(&mut client, sent).await?;
                    }
                    std::task::Poll::Pending => {
                        sends.spawn(async move { Sent { id, initialize, result: send.await.map_err(|e| e.to_string()) } });
                    }
                }
            }
            from_daemon = daemon.receive() => {
                let Some(message) = from_daemon else {
                    // Why it ended is in the send that failed, if one did
                    // (a refused handshake ends the transport at once).
                    while let Ok(Some(Ok(sent))) = tokio::time::timeout(SETTLE, sends.join_next()).await {
                        settle(&mut client, sent).await?;
                    }
                    return Err(BridgeError::Closed);
                };
                client.send(message).await.map_err(BridgeError::Stdout)?;
            }
            Some(Ok(sent)) = sends.join_next(), if !sends.is_empty() => {
                settle(&mut client, sent).await?;
            }
        }
    }
    // The client is done. What it sent last (a `notifications/cancelled`,
    // say) still reaches the daemon: the sends under way get SETTLE each.
    while let Ok(Some(_)) = tokio::time::timeout(SETTLE, sends.join_next()).await {}
    // Ending the transport ends the session (a DELETE), and with it the
    // session's sandbox in the daemon.
    let _ = daemon.close().await;
    Ok(())
}

/// How long the sends still under way get once the daemon's side ended.
const SETTLE: std::time::Duration = std::time::Duration::from_secs(2);

/// One message handed to the daemon's transport, and how that went.
struct Sent {
    id: Option<RequestId>,
    initialize: bool,
    result: Result<(), String>,
}

/// A request that never reached the daemon is answered with the error, so
/// the client is not left waiting for an answer that cannot come; a failed
/// handshake ends the bridge.
async fn settle<T: Transport<RoleServer, Error = std::io::Error>>(
    client: &mut T,
    sent: Sent,
) -> Result<(), BridgeError> {
    let Err(e) = sent.result else {
        return Ok(());
    };
    if let Some(id) = sent.id {
        answer_error(client, id, &e).await?;
    }
    if sent.initialize {
        return Err(BridgeError::Refused(e));
    }
    tracing::warn!(error = %e, "a message did not reach the daemon");
    Ok(())
}

fn is_initialize(message: &rmcp::model::ClientJsonRpcMessage) -> bool {
    matches!(
        message,
        JsonRpcMessage::Request(r)
            if matches!(r.request, rmcp::model::ClientRequest::InitializeRequest(_))
    )
}

async fn answer_error<T: Transport<RoleServer, Error = std::io::Error>>(
    client: &mut T,
    id: RequestId,
    message: &str,
) -> Result<(), BridgeError> {
    let error = ServerJsonRpcMessage::error(
        ErrorData::internal_error(format!("agentd mcp serve: {message}"), None),
        Some(id),
    );
    client.send(error).await.map_err(BridgeError::Stdout)
}
