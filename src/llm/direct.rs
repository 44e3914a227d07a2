//! The chat request's short way to a local endpoint: hyper-util's pooled
//! HTTP/1.1 client (the one reqwest is built on), without reqwest's layers.
//!
//! Why it exists: on loopback, reqwest's own work per request (its URL and
//! body wrappers, the redirect and retry layers) was about 25 µs of a
//! 100 µs round trip, paid at every step of every run (`benches/
//! http_client.rs` prints both side by side). The endpoints where that
//! matters are the local servers a step waits on for little else (Ollama,
//! vLLM, llama.cpp on `http://localhost`), so only those take this way:
//! a plain `http://` endpoint that no proxy variable applies to.
//! Everything else (TLS with its roots and `ca_file`, `HTTPS_PROXY` and
//! friends) stays with reqwest, which does it well. Whether a proxy applies
//! is decided by hyper-util's matcher, the one reqwest itself consults, so
//! an endpoint goes direct exactly when reqwest would have connected to it
//! directly. What reqwest does beyond sending is kept: its TCP keepalive
//! settings here, and a redirect answer is sent again through reqwest,
//! which follows it (`client.rs`).

use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER};
use http::{Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use super::error::LlmError;

/// How long an idle pooled connection is kept (reqwest's default).
const POOL_IDLE: Duration = Duration::from_secs(90);
/// TCP keepalive probes, as reqwest sets them: a peer that dies during a
/// long generation is noticed in about a minute, not at `timeout`.
const KEEPALIVE: Duration = Duration::from_secs(15);
const KEEPALIVE_RETRIES: u32 = 3;
/// Unacknowledged data is given up on after this long (reqwest's default).
#[cfg(any(target_os = "android", target_os = "fuchsia", target_os = "linux"))]
const TCP_USER_TIMEOUT: Duration = Duration::from_secs(30);

/// What came back: the status, the `Retry-After` header as sent, the body.
pub(super) struct Answer {
    pub status: StatusCode,
    pub retry_after: Option<HeaderValue>,
    pub body: Vec<u8>,
}

/// The direct way to one endpoint; cheap to clone (the pool is shared).
#[derive(Clone)]
pub(super) struct Direct {
    client: Client<HttpConnector, Full<Bytes>>,
    uri: Uri,
    /// `Bearer <key>`, built once and marked sensitive (never logged).
    auth: Option<HeaderValue>,
    /// The whole request's time: connecting, sending, reading the answer.
    timeout: Duration,
}

impl Direct {
    /// The direct way to `url` (as reqwest parsed it: host lower-cased, IPv4
    /// written out, so the proxy matcher sees what it sees under reqwest),
    /// or `None` when it must go through reqwest: not plain `http://`,
    /// credentials in the URL (reqwest sends them as Basic auth), a proxy
    /// variable applies to it, or an API key that cannot be a header value
    /// (reqwest then reports it as it did).
    pub(super) fn for_endpoint(
        url: &reqwest::Url,
        api_key: Option<&str>,
        timeout: Duration,
        connect_timeout: Duration,
    ) -> Option<Self> {
        if url.scheme() != "http" || !url.username().is_empty() || url.password().is_some() {
            return None;
        }
        let uri: Uri = url.as_str().parse().ok()?;
        let proxies = hyper_util::client::proxy::matcher::Matcher::from_system();
        if proxies.intercept(&uri).is_some() {
            return None;
        }
        let auth = match api_key.filter(|k| !k.is_empty()) {
            Some(key) => {
                let mut value = HeaderValue::try_from(format!("Bearer {key}")).ok()?;
                value.set_sensitive(true);
                Some(value)
            }
            None => None,
        };
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(connect_timeout));
        // As reqwest does: a request is one write, sent at once.
        connector.set_nodelay(true);
        connector.set_keepalive(Some(KEEPALIVE));
        connector.set_keepalive_interval(Some(KEEPALIVE));
        connector.set_keepalive_retries(Some(KEEPALIVE_RETRIES));
        #[cfg(any(target_os = "android", target_os = "fuchsia", target_os = "linux"))]
        connector.set_tcp_user_timeout(Some(TCP_USER_TIMEOUT));
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(POOL_IDLE)
            .build(connector);
        Some(Direct {
            client,
            uri,
            auth,
            timeout,
        })
    }

    /// POSTs `body` as JSON and reads the answer, at most `max_body` bytes
    /// of it, within the request timeout (connecting, sending and reading:
    /// reqwest's meaning of it). `answered` is called as soon as the server
    /// answers (its status line), before the body is read.
    pub(super) async fn post_json(
        &self,
        body: &Bytes,
        max_body: usize,
        answered: impl FnOnce(),
    ) -> Result<Answer, LlmError> {
        let exchange = self.exchange(body, max_body, answered);
        match tokio::time::timeout(self.timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(LlmError::Timeout(self.timeout)),
        }
    }

    async fn exchange(
        &self,
        body: &Bytes,
        max_body: usize,
        answered: impl FnOnce(),
    ) -> Result<Answer, LlmError> {
        let mut request = Request::post(self.uri.clone())
            .body(Full::new(body.clone()))
            .map_err(|e| self.not_sent(&e))?;
        let headers = request.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(ACCEPT, HeaderValue::from_static("*/*"));
        if let Some(auth) = &self.auth {
            headers.insert(AUTHORIZATION, auth.clone());
        }
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| self.failed(e.is_connect(), &e))?;
        answered();
        let status = response.status();
        let retry_after = response.headers().get(RETRY_AFTER).cloned();
        let mut incoming = response.into_body();
        let mut body = Vec::new();
        while let Some(frame) = incoming.frame().await {
            let frame = frame.map_err(|e| self.failed(false, &e))?;
            if let Ok(data) = frame.into_data() {
                if body.len() + data.len() > max_body {
                    return Err(LlmError::Malformed(format!(
                        "response larger than {max_body} bytes"
                    )));
                }
                body.extend_from_slice(&data);
            }
        }
        Ok(Answer {
            status,
            retry_after,
            body,
        })
    }

    /// A request that could not be formed: the same would happen on every
    /// try, so this is a settings problem (as reqwest's builder errors are).
    fn not_sent(&self, e: &http::Error) -> LlmError {
        LlmError::NotConfigured(format!("cannot send a request to {}: {e}", self.uri))
    }

    /// A request that got no HTTP answer: one that timed out anywhere (the
    /// connect timeout, a read the kernel gave up on) is a timeout, as
    /// reqwest counts them; anything else a connection failure, classified
    /// as the reqwest path classifies it.
    fn failed(&self, connect: bool, e: &(dyn std::error::Error + 'static)) -> LlmError {
        if super::client::caused_by(e, std::io::ErrorKind::TimedOut) {
            return LlmError::Timeout(self.timeout);
        }
        LlmError::Connect {
            url: self.uri.to_string(),
            message: super::client::error_chain(e),
            nothing_listens: connect && super::client::refused_or_unresolved(e),
        }
    }
}
