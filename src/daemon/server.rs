//! The accept loop of the API socket, written out instead of `axum::serve`
//! because the defaults there leave a local user able to starve the daemon
//! of file descriptors (security review M2):
//!
//! - at most `max_connections` connections are served at once; one past it
//!   gets a `503` written straight into its (empty, so never blocking)
//!   socket buffer and is closed, with no task kept for it;
//! - at most `max_connections_per_user` of them belong to one uid (the
//!   peer's `SO_PEERCRED`, [`UserSlots`]), refused the same way: one socket
//!   user cannot take every slot and lock out the others, root's
//!   `agentd cancel` among them;
//! - the peer's credentials are checked at accept: a refused peer is
//!   answered `403` with `Connection: close` by a small task that never
//!   starts HTTP and is gone within [`REFUSE_WITHIN`];
//! - hyper gets a timer, so `header_timeout` is enforced: a client that
//!   sends its headers slowly, or keeps an idle connection open, is
//!   disconnected (hyper runs the same timer while waiting for the next
//!   request, so it is also the keep-alive idle timeout; it never runs
//!   while a response streams, so followers are not cut off);
//! - every write has a deadline (`write_timeout`): a client that stops
//!   reading a response (a follower that never reads) is disconnected
//!   instead of holding its connection, and what hyper buffered for it,
//!   forever.
//!
//! The time to receive a request's body (`body_timeout`) is not the
//! connection's business: hyper's header timer stops once the headers are
//! in, so the body is read under its own deadline where the app reads it
//! (`body.rs`).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, warn};

use super::peer::{AccessPolicy, Caller, Peer};
use super::user_slots::{UserSlot, UserSlots};
use tower::ServiceExt as _;

/// How long a refused peer may take to send its request before the `403`
/// is written anyway and the socket closed.
const REFUSE_WITHIN: Duration = Duration::from_secs(1);

/// At most this much of a refused peer's request is read (and discarded)
/// so that its client sees the answer rather than a broken pipe.
const REFUSE_READ_LIMIT: usize = 16 << 10;

/// After a failed `accept` (descriptors exhausted): how long to wait before
/// trying again, instead of spinning on the error.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// What the accept loop enforces; from `[daemon]`.
#[derive(Debug, Clone)]
pub struct ServerLimits {
    pub max_connections: usize,
    /// At most `max_connections` (the configuration clamps it).
    pub max_connections_per_user: usize,
    pub header_timeout: Duration,
    pub write_timeout: Duration,
}

/// Serves `app` on `listener` until `stop` is cancelled, then lets every
/// connection finish its current response (`graceful_shutdown`) and
/// returns once they have closed.
pub async fn serve(
    listener: UnixListener,
    app: Router,
    policy: AccessPolicy,
    limits: ServerLimits,
    stop: CancellationToken,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let users = UserSlots::new(limits.max_connections_per_user);
    let connections = TaskTracker::new();
    let mut refusals = RefusalLog::new("max_connections");
    let mut user_refusals = RefusalLog::new("max_connections_per_user");
    loop {
        let Some(stream) = accept(&stop, listener.accept(), "API").await else {
            break;
        };
        let Some(stream) = stream else {
            continue;
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            refuse_busy(&stream, limits.max_connections);
            refusals.note(limits.max_connections, None);
            continue;
        };
        let peer = Peer::of(&stream);
        // Counted before the access check: a peer the policy refuses holds
        // a slot while its 403 is written, and must not take them all.
        let Some(slot) = users.try_acquire(peer.uid) else {
            refuse_user_busy(&stream, users.max_per_user(), peer.uid);
            user_refusals.note(users.max_per_user(), peer.uid);
            continue;
        };
        let held = Held {
            _permit: permit,
            _slot: slot,
        };
        if !policy.allows(&peer) {
            warn!(uid = ?peer.uid, pid = ?peer.pid, "refused a connection from a user not allowed on the socket");
            connections.spawn(refuse_forbidden(stream, peer, held));
            continue;
        }
        connections.spawn(serve_connection(
            stream,
            app.clone(),
            Caller { uid: peer.uid },
            limits.clone(),
            stop.clone(),
            held,
        ));
    }
    connections.close();
    connections.wait().await;
}

/// Serves `app` on a TCP `listener` (`[daemon] metrics_listen`) until
/// `stop`: at most `max_connections` at once (one past it is closed at
/// accept, unanswered: nothing on this port is worth a task), with the
/// socket's `header_timeout` and `write_timeout`. No peer check is
/// possible on TCP; what is served here is the operator's choice.
pub async fn serve_tcp(
    listener: tokio::net::TcpListener,
    app: Router,
    max_connections: usize,
    limits: ServerLimits,
    stop: CancellationToken,
) {
    let permits = Arc::new(Semaphore::new(max_connections.max(1)));
    let connections = TaskTracker::new();
    let mut refusals = RefusalLog::new("metrics_listen's connections");
    loop {
        let Some(stream) = accept(&stop, listener.accept(), "metrics").await else {
            break;
        };
        let Some(stream) = stream else {
            continue;
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            refusals.note(max_connections, None);
            continue;
        };
        connections.spawn(serve_connection(
            stream,
            app.clone(),
            Caller { uid: None },
            limits.clone(),
            stop.clone(),
            permit,
        ));
    }
    connections.close();
    connections.wait().await;
}

/// The next connection: `None` once `stop` is cancelled, `Some(None)` after
/// a failed accept (EMFILE/ENFILE: the connection stays in the backlog; the
/// caps make this rare, and the pause keeps the loop from spinning on it).
async fn accept<S, A>(
    stop: &CancellationToken,
    accepting: impl Future<Output = io::Result<(S, A)>>,
    what: &str,
) -> Option<Option<S>> {
    let accepted = tokio::select! {
        () = stop.cancelled() => return None,
        a = accepting => a,
    };
    match accepted {
        Ok((stream, _)) => Some(Some(stream)),
        Err(e) => {
            warn!(error = %e, "cannot accept a {what} connection");
            tokio::time::sleep(ACCEPT_BACKOFF).await;
            Some(None)
        }
    }
}

/// What one connection holds of the caps, given back when its task ends
/// (dropped with it, however it ends).
struct Held {
    _permit: OwnedSemaphorePermit,
    _slot: UserSlot,
}

async fn serve_connection<S, H>(
    stream: S,
    app: Router,
    caller: Caller,
    limits: ServerLimits,
    stop: CancellationToken,
    _held: H,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H: Send,
{
    // Every request of the connection carries who sent it, as read at
    // accept: the kernel's credentials, never something the client says.
    let app = app.map_request(move |mut request: hyper::Request<hyper::body::Incoming>| {
        request.extensions_mut().insert(caller);
        request
    });
    let io = TokioIo::new(WriteDeadline::new(stream, limits.write_timeout));
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let conn = builder.serve_connection(io, TowerToHyperService::new(app));
    tokio::pin!(conn);
    let result = tokio::select! {
        r = conn.as_mut() => r,
        () = stop.cancelled() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        // Timeouts and clients that hang up are routine, not errors.
        debug!(error = %e, "API connection closed");
    }
}

/// A flood of refused connections is one log line a second, not one per
/// connection: the journal is not another thing a client can fill. One
/// per cap (`key`, the `[daemon]` key that refused them).
struct RefusalLog {
    key: &'static str,
    last: Option<std::time::Instant>,
    unlogged: u64,
}

impl RefusalLog {
    fn new(key: &'static str) -> Self {
        RefusalLog {
            key,
            last: None,
            unlogged: 0,
        }
    }

    /// `uid`: whose connection it was, for a per-user cap (the line names
    /// the last one refused).
    fn note(&mut self, max: usize, uid: Option<u32>) {
        self.unlogged += 1;
        if self
            .last
            .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
        {
            return;
        }
        warn!(
            refused = self.unlogged,
            limit = max,
            uid = ?uid,
            "refused API connections: [daemon] {} are open",
            self.key
        );
        self.last = Some(std::time::Instant::now());
        self.unlogged = 0;
    }
}

/// Over the cap: the answer fits the empty socket buffer of a connection
/// just accepted, so one non-blocking write delivers it; if it does not,
/// closing alone is the refusal. No task, no wait.
fn refuse_busy(stream: &UnixStream, max: usize) {
    let body = error_json(
        "too_many_connections",
        &format!("agentd serves at most {max} connections at once ([daemon] max_connections); try again shortly"),
    );
    let _ = stream.try_write(&response("503 Service Unavailable", &body));
}

/// Past the per-user cap: answered and closed like [`refuse_busy`], naming
/// the uid so a user whose script leaks connections sees it is its own.
fn refuse_user_busy(stream: &UnixStream, max: usize, uid: Option<u32>) {
    let body = error_json(
        "too_many_connections",
        &format!(
            "uid {} already has {max} connections open, the most one user may ([daemon] max_connections_per_user); close some or try again shortly",
            uid_text(uid)
        ),
    );
    let _ = stream.try_write(&response("503 Service Unavailable", &body));
}

fn uid_text(uid: Option<u32>) -> String {
    uid.map(|u| u.to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// A peer the policy refuses: its request is read (bounded in size and
/// time) so that its client is not cut off mid-write, answered `403` with
/// `Connection: close`, and the socket closed. No HTTP state is kept.
async fn refuse_forbidden(mut stream: UnixStream, peer: Peer, _held: Held) {
    let _ = tokio::time::timeout(REFUSE_WITHIN, read_head(&mut stream)).await;
    let uid = uid_text(peer.uid);
    let body = error_json(
        "forbidden",
        &format!("uid {uid} may not use this socket: root, the daemon's user and members of [daemon] socket_group may"),
    );
    let answer = response("403 Forbidden", &body);
    let _ = tokio::time::timeout(REFUSE_WITHIN, async {
        use tokio::io::AsyncWriteExt;
        let _ = stream.write_all(&answer).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

/// Reads until the end of a request head, EOF, or [`REFUSE_READ_LIMIT`].
async fn read_head(stream: &mut UnixStream) {
    let mut seen: Vec<u8> = Vec::new();
    let mut buf = [0u8; 4096];
    while seen.len() < REFUSE_READ_LIMIT {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
        if seen.windows(4).any(|w| w == b"\r\n\r\n") {
            return;
        }
    }
}

/// The API's error shape ([`crate::api::ErrorBody`]).
fn error_json(code: &str, message: &str) -> String {
    let body = crate::api::ErrorBody {
        error: crate::api::ErrorDetail {
            code: code.to_string(),
            message: message.to_string(),
        },
    };
    serde_json::to_string(&body).unwrap_or_default()
}

fn response(status: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A stream whose writes fail with `TimedOut` once the peer has taken no
/// byte for `limit`: hyper then drops the connection. Reads are untouched
/// (hyper's header timer covers them).
pub struct WriteDeadline<S> {
    inner: S,
    limit: Duration,
    /// Running while a write is blocked; reset by any progress.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<S> WriteDeadline<S> {
    pub fn new(inner: S, limit: Duration) -> Self {
        WriteDeadline {
            inner,
            limit,
            stalled: None,
        }
    }

    /// Called when a write could not proceed: starts the clock, or fails
    /// once it has run out. Polling the sleep registers the waker, so hyper
    /// is woken to see the error even if the peer never reads again.
    fn on_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        let limit = self.limit;
        let sleep = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        ready!(sleep.as_mut().poll(cx));
        Poll::Ready(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "the client read nothing for {} s ([daemon] write_timeout)",
                limit.as_secs()
            ),
        ))
    }

    fn wrote<T>(&mut self, cx: &mut Context<'_>, r: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        match r {
            Poll::Pending => match self.on_pending(cx) {
                Poll::Ready(e) => Poll::Ready(Err(e)),
                Poll::Pending => Poll::Pending,
            },
            ready => {
                self.stalled = None;
                ready
            }
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteDeadline<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.wrote(cx, r)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.wrote(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_flush(cx);
        self.wrote(cx, r)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn a_reader_that_stops_reading_fails_the_write_after_the_limit() {
        let (a, _b) = UnixStream::pair().expect("socketpair");
        let mut w = WriteDeadline::new(a, Duration::from_millis(200));
        let chunk = vec![0u8; 64 << 10];
        let err = loop {
            if let Err(e) = w.write_all(&chunk).await {
                break e;
            }
        };
        assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
    }

    #[tokio::test]
    async fn a_reader_that_reads_is_never_cut_off() {
        let (a, mut b) = UnixStream::pair().expect("socketpair");
        let mut w = WriteDeadline::new(a, Duration::from_secs(5));
        let reader = tokio::spawn(async move {
            let mut all = Vec::new();
            b.read_to_end(&mut all).await.map(|_| all.len())
        });
        let chunk = vec![7u8; 1 << 20];
        for _ in 0..8 {
            w.write_all(&chunk).await.expect("write");
        }
        drop(w);
        assert_eq!(reader.await.expect("join").expect("read"), 8 << 20);
    }

    #[tokio::test]
    async fn over_the_cap_a_connection_gets_503_at_once() {
        let (a, mut b) = UnixStream::pair().expect("socketpair");
        refuse_busy(&a, 3);
        drop(a);
        let mut got = String::new();
        b.read_to_string(&mut got).await.expect("read");
        assert!(got.starts_with("HTTP/1.1 503 "), "{got}");
        assert!(got.contains("connection: close"), "{got}");
        assert!(got.contains("\"code\":\"too_many_connections\""), "{got}");
    }

    #[tokio::test]
    async fn past_the_per_user_cap_the_503_names_the_key_and_the_uid() {
        let (a, mut b) = UnixStream::pair().expect("socketpair");
        refuse_user_busy(&a, 8, Some(65534));
        drop(a);
        let mut got = String::new();
        b.read_to_string(&mut got).await.expect("read");
        assert!(got.starts_with("HTTP/1.1 503 "), "{got}");
        assert!(got.contains("connection: close"), "{got}");
        assert!(got.contains("\"code\":\"too_many_connections\""), "{got}");
        assert!(got.contains("max_connections_per_user"), "{got}");
        assert!(got.contains("uid 65534"), "{got}");
    }
}
