//! A tool's outgoing HTTP (`wasi:http/outgoing-handler`, served by
//! wasmtime-wasi-http), checked against its `[plugins.<name>] allow_hosts`
//! on every request before anything leaves the host.
//!
//! Every tool store links `wasi:http`, granted or not, so a tool that
//! imports it always loads and a request without a grant fails at once
//! inside the plugin with a message naming the host and the key to change
//! (`internal-error` is the one WASI error code that carries text), rather
//! than the component failing to link. Raw sockets are never granted: the
//! WASI context keeps `wasi:sockets` denied whatever the grants say.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::uri::Scheme;
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody, WasiHttpHooks};

use super::grants::{denial_message, PluginGrant};

/// How long a connection may take to open when the plugin sets no timeout
/// (wasmtime-wasi-http's default is 600 s, longer than any step).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the first byte of a response may take when the plugin sets none.
const FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the response may pause between bytes when the plugin sets none.
const BETWEEN_BYTES_TIMEOUT: Duration = Duration::from_secs(60);

/// The `wasi:http` hooks of one tool store: its name (for messages and the
/// log) and its grant.
pub(super) struct Egress {
    plugin: Arc<str>,
    grant: Arc<PluginGrant>,
    /// When a refusal was last logged, and how many were not since: a tool
    /// retrying a refused host in a loop must not flood the journal.
    last_logged: Option<Instant>,
    unlogged: u64,
}

/// At most one refusal line per store this often (the rest are counted in
/// the next line).
const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(1);

impl Egress {
    /// The hooks for `plugin`'s store, allowing what `grant` allows.
    pub(super) fn new(plugin: Arc<str>, grant: Arc<PluginGrant>) -> Self {
        Egress {
            plugin,
            grant,
            last_logged: None,
            unlogged: 0,
        }
    }

    fn log_refusal(&mut self, host: &str, port: u16) {
        let now = Instant::now();
        if self
            .last_logged
            .is_some_and(|t| now.duration_since(t) < REFUSAL_LOG_EVERY)
        {
            self.unlogged += 1;
            return;
        }
        let also = std::mem::take(&mut self.unlogged);
        self.last_logged = Some(now);
        tracing::warn!(plugin = %self.plugin, host = %host, port, refused_since_last_line = also, "plugin HTTP request refused: not in its allow_hosts");
    }
}

type SendResult = Result<
    (
        http::Response<WasiBody>,
        Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ),
    HttpError,
>;

impl WasiHttpHooks for Egress {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        fut: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> Box<dyn Future<Output = SendResult> + Send> {
        drop(fut);
        let uri = request.uri();
        let Some(host) = uri.host().map(str::to_string) else {
            return Box::new(async { Err(HttpError::HttpRequestUriInvalid) });
        };
        let tls = uri.scheme() == Some(&Scheme::HTTPS);
        let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
        if !self.grant.allow_hosts.allows(&host, port) {
            let message = denial_message(&self.plugin, &host, port, &self.grant.allow_hosts);
            self.log_refusal(&host, port);
            return Box::new(async move { Err(HttpError::InternalError(Some(message))) });
        }
        tracing::debug!(plugin = %self.plugin, host = %host, port, method = %request.method(), "plugin HTTP request");
        let options = with_default_timeouts(options);
        Box::new(async move {
            use http_body_util::BodyExt;
            let (response, io) =
                wasmtime_wasi_http::default_send_request(request, Some(options)).await?;
            Ok((
                response.map(BodyExt::boxed_unsync),
                Box::new(io) as Box<dyn Future<Output = _> + Send>,
            ))
        })
    }
}

/// The plugin's own timeouts, each defaulting to the host's when unset.
fn with_default_timeouts(options: Option<RequestOptions>) -> RequestOptions {
    let o = options.unwrap_or_default();
    RequestOptions {
        connect_timeout: Some(o.connect_timeout.unwrap_or(CONNECT_TIMEOUT)),
        first_byte_timeout: Some(o.first_byte_timeout.unwrap_or(FIRST_BYTE_TIMEOUT)),
        between_bytes_timeout: Some(o.between_bytes_timeout.unwrap_or(BETWEEN_BYTES_TIMEOUT)),
    }
}
