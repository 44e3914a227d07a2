//! Reading a request's body: at most `max_request_bytes` of it, all of it
//! within `body_timeout`. hyper's header timer stops once the headers are
//! in, so without a deadline here a client that announces
//! `Content-Length: 1000000` and sends a byte a second holds its connection,
//! a task and the buffer forever (security review M2).
//!
//! It is a middleware over every route rather than a helper each handler
//! calls, so a route added later that reads a body cannot forget it: the
//! body is read here, whole, before the handler runs, and the handler gets
//! it from memory. Only request bodies are read here; responses, the
//! long-lived NDJSON streams of followers included, are untouched.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody as _};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt as _, LengthLimitError, Limited};

use super::error::ApiError;

/// From `[daemon]`: `max_request_bytes` (or, for a plugin upload,
/// `max_plugin_bytes`) and `body_timeout`.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimits {
    pub max_bytes: usize,
    pub timeout: Duration,
    /// The key `max_bytes` comes from, named in the 413's message so the
    /// client knows which setting to raise.
    pub key: &'static str,
}

/// Why a body was not read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("the request body is larger than [daemon] {key} ({max} bytes)")]
    TooLarge { max: usize, key: &'static str },
    #[error(
        "the request body did not arrive within {} s ([daemon] body_timeout)",
        .timeout.as_secs_f64()
    )]
    TimedOut { timeout: Duration },
    #[error("cannot read the request body: {0}")]
    Broken(String),
}

impl IntoResponse for BodyError {
    /// The connection is closed after each of these: the rest of the body
    /// was not read, so nothing after it on the connection could be parsed,
    /// and a client that drips is not given another request's time.
    fn into_response(self) -> Response {
        let (status, code) = match &self {
            BodyError::TooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
            BodyError::TimedOut { .. } => (StatusCode::REQUEST_TIMEOUT, "request_timeout"),
            BodyError::Broken(_) => (StatusCode::BAD_REQUEST, "bad_request"),
        };
        let mut response = ApiError::new(status, code, self.to_string()).into_response();
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        response
    }
}

/// The whole body, or why not. A `Content-Length` over the cap is refused
/// before anything is read; the deadline counts from the first read, right
/// after the headers, to the last byte.
pub async fn read(body: Body, limits: BodyLimits) -> Result<Bytes, BodyError> {
    if body.is_end_stream() {
        return Ok(Bytes::new());
    }
    let too_large = BodyError::TooLarge {
        max: limits.max_bytes,
        key: limits.key,
    };
    if body.size_hint().lower() > limits.max_bytes as u64 {
        return Err(too_large);
    }
    let collect = Limited::new(body, limits.max_bytes).collect();
    match tokio::time::timeout(limits.timeout, collect).await {
        Err(_) => Err(BodyError::TimedOut {
            timeout: limits.timeout,
        }),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.is::<LengthLimitError>() => Err(too_large),
        Ok(Err(e)) => Err(BodyError::Broken(e.to_string())),
    }
}

/// The middleware: reads the body under [`read`]'s rules and hands the
/// handler a request whose body is already in memory.
pub async fn buffered(State(limits): State<BodyLimits>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    match read(body, limits).await {
        Ok(bytes) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Err(e) => {
            if let BodyError::TimedOut { .. } = e {
                if let Some(unlogged) = TIMEOUT_LOG.due() {
                    tracing::warn!(
                        method = %parts.method,
                        path = parts.uri.path(),
                        also_since_last = unlogged,
                        "a request body did not arrive within [daemon] body_timeout; closing the connection"
                    );
                }
            }
            e.into_response()
        }
    }
}

/// Clients that drip their bodies are logged at most once a second, with
/// how many went unlogged since: the journal is not another thing a client
/// can fill.
static TIMEOUT_LOG: OncePerSecond = OncePerSecond::new();

struct OncePerSecond {
    last_ms: AtomicI64,
    unlogged: AtomicU64,
}

impl OncePerSecond {
    const fn new() -> Self {
        OncePerSecond {
            last_ms: AtomicI64::new(i64::MIN),
            unlogged: AtomicU64::new(0),
        }
    }

    /// `Some(n)` when a line is due now (`n` went unlogged before it);
    /// `None` when one was logged less than a second ago (this one is
    /// counted instead).
    fn due(&self) -> Option<u64> {
        let now = crate::time::now_ms();
        let last = self.last_ms.load(Ordering::Relaxed);
        let claimed = now.saturating_sub(last) >= 1000
            && self
                .last_ms
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok();
        if claimed {
            Some(self.unlogged.swap(0, Ordering::Relaxed))
        } else {
            self.unlogged.fetch_add(1, Ordering::Relaxed);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_flood_of_timeouts_is_one_line_a_second_with_a_count() {
        let log = OncePerSecond::new();
        assert_eq!(log.due(), Some(0), "the first is logged");
        for _ in 0..500 {
            assert_eq!(log.due(), None, "the rest of the second is counted");
        }
        // A second later the next one is logged, carrying the count.
        log.last_ms.fetch_sub(1000, Ordering::Relaxed);
        assert_eq!(log.due(), Some(500));
    }

    use super::*;
    use futures::{stream, StreamExt};

    fn limits(max_bytes: usize, timeout_ms: u64) -> BodyLimits {
        BodyLimits {
            max_bytes,
            timeout: Duration::from_millis(timeout_ms),
            key: "max_request_bytes",
        }
    }

    #[tokio::test]
    async fn a_whole_body_within_the_limits_is_read() {
        let got = read(Body::from("{\"agent\":\"a\"}"), limits(1024, 1000))
            .await
            .expect("read");
        assert_eq!(&got[..], b"{\"agent\":\"a\"}");
        let empty = read(Body::empty(), limits(1024, 1000)).await.expect("read");
        assert!(empty.is_empty());
    }

    #[tokio::test]
    async fn a_body_that_stops_arriving_times_out_naming_the_key() {
        // One chunk, then nothing ever again: a client that drips.
        let drip = stream::iter([Ok::<_, std::io::Error>(Bytes::from_static(b"{"))])
            .chain(stream::pending());
        let e = read(Body::from_stream(drip), limits(1024, 200))
            .await
            .expect_err("timed out");
        assert!(matches!(e, BodyError::TimedOut { .. }), "{e}");
        assert!(e.to_string().contains("[daemon] body_timeout"), "{e}");
        let response = e.into_response();
        assert_eq!(response.status(), StatusCode::REQUEST_TIMEOUT);
        assert_eq!(
            response.headers().get(header::CONNECTION),
            Some(&HeaderValue::from_static("close"))
        );
    }

    #[tokio::test]
    async fn a_body_over_the_cap_is_refused_whether_announced_or_not() {
        let e = read(Body::from(vec![b'x'; 2048]), limits(1024, 1000))
            .await
            .expect_err("too large");
        assert!(matches!(e, BodyError::TooLarge { max: 1024, .. }), "{e}");
        // No length announced: refused once the bytes pass the cap.
        let chunks =
            stream::iter((0..4).map(|_| Ok::<_, std::io::Error>(Bytes::from(vec![b'x'; 512]))));
        let e = read(Body::from_stream(chunks), limits(1024, 1000))
            .await
            .expect_err("too large");
        assert!(matches!(e, BodyError::TooLarge { .. }), "{e}");
        assert_eq!(e.into_response().status(), StatusCode::PAYLOAD_TOO_LARGE);
    }
}
