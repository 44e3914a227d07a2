use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};
use tracing::{debug, warn};

use super::answered::AnsweredEndpoints;
use super::direct::{Answer, Direct};
use super::error::LlmError;
use super::retry::{parse_retry_after, Attempts, Next, RetryPolicy};
use super::wire::{ErrorBody, FunctionParam, RequestBody, ResponseBody, ToolParam, Transcript};
use crate::chat::{AsMessage, Message, Role, ToolChoice, ToolSpec, Usage};

/// Resolved settings for one agent (`[llm]` overlaid with `[llm.<agent>]`).
#[derive(Clone, Debug, PartialEq)]
pub struct LlmSettings {
    pub model: String,
    /// Without the `/chat/completions` suffix, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    pub api_key: Option<String>,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f32>,
    /// Cumulative prompt tokens a run may spend; `None` is unlimited.
    pub max_input_tokens: Option<u64>,
    pub request_timeout: Duration,
    pub retry: RetryPolicy,
    /// Extra trusted roots (PEM), beside the system's trust store: for an
    /// endpoint behind an internal CA or a TLS-inspecting proxy.
    pub ca_file: Option<PathBuf>,
}

pub struct ChatRequest<'a, M = Message> {
    /// Owned messages, or a run's memory as it holds it (`Arc<Kept>`, each
    /// message with its JSON): either is written without being copied or,
    /// when kept, encoded again.
    pub messages: &'a [M],
    pub tools: &'a [ToolSpec],
    pub tool_choice: ToolChoice,
    /// The run asking, for its trace's `chat` span (`agentd.run.id`); never
    /// sent to the server.
    pub run_id: Option<&'a str>,
}

#[derive(Debug, Clone)]
pub struct ChatResponse {
    pub message: Message,
    pub usage: Usage,
    /// Why the model stopped, when the server says. `Length` means the
    /// answer (and possibly a tool call's arguments) was cut at `max_tokens`.
    pub finish_reason: Option<FinishReason>,
}

/// `choices[].finish_reason`, read from the server's string. Unknown values
/// (`eos` from some local servers) are kept as they came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishReason {
    Stop,
    Length,
    /// Also the legacy `function_call`, which means the same.
    ToolCalls,
    ContentFilter,
    Other(String),
}

impl FinishReason {
    pub fn as_str(&self) -> &str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::ContentFilter => "content_filter",
            FinishReason::Other(s) => s,
        }
    }
}

impl From<String> for FinishReason {
    fn from(s: String) -> Self {
        match s.as_str() {
            "stop" => FinishReason::Stop,
            "length" => FinishReason::Length,
            "tool_calls" | "function_call" => FinishReason::ToolCalls,
            "content_filter" => FinishReason::ContentFilter,
            _ => FinishReason::Other(s),
        }
    }
}

impl std::fmt::Display for FinishReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for FinishReason {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for FinishReason {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(FinishReason::from)
    }
}

/// Checks that `base_url` is an absolute `http://` or `https://` URL with a
/// host. A URL without a scheme (`localhost:11434/v1`) would otherwise fail
/// on every request as if the server were down, and be retried as such.
pub fn check_base_url(base_url: &str) -> Result<(), String> {
    let hint = || {
        if base_url.contains("://") {
            String::new()
        } else {
            format!(" (did you mean `http://{base_url}`?)")
        }
    };
    let url = reqwest::Url::parse(base_url)
        .map_err(|e| format!("base_url `{base_url}` is not a valid URL: {e}{}", hint()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "base_url `{base_url}` must start with http:// or https://{}",
            hint()
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("base_url `{base_url}` has no host"));
    }
    Ok(())
}

/// Reads the PEM certificates of `ca_file` and checks each is usable as a
/// trust anchor, so a wrong file is refused when the configuration loads
/// rather than showing up as an untrusted endpoint.
pub fn load_ca_file(path: &Path) -> Result<Vec<reqwest::Certificate>, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    let shown = path.display();
    let bytes = std::fs::read(path).map_err(|e| format!("ca_file {shown}: cannot read: {e}"))?;
    let ders = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("ca_file {shown}: not a PEM certificate file: {e}"))?;
    if ders.is_empty() {
        return Err(format!(
            "ca_file {shown}: no PEM certificate (-----BEGIN CERTIFICATE-----) in it"
        ));
    }
    let mut store = rustls::RootCertStore::empty();
    ders.into_iter()
        .enumerate()
        .map(|(i, der)| {
            let cert = reqwest::Certificate::from_der(&der)
                .map_err(|e| format!("ca_file {shown}: certificate {}: {e}", i + 1))?;
            store.add(der).map_err(|e| {
                // rustls words this for a server's certificate ("invalid peer
                // certificate"); here it is one of ours.
                let why = match e {
                    rustls::Error::InvalidCertificate(c) => format!("{c:?}"),
                    other => other.to_string(),
                };
                format!(
                    "ca_file {shown}: certificate {} is not a usable CA certificate: {why}",
                    i + 1
                )
            })?;
            Ok(cert)
        })
        .collect()
}

/// How long a connection to the endpoint may take to open (at most the
/// request timeout).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// One client per agent configuration; cheap to share (both ways to the
/// endpoint pool their connections, which matters for the per-step
/// overhead).
#[derive(Clone)]
pub struct LlmClient {
    /// TLS, proxies, and the endpoint's other routes ([`Self::get`]).
    http: reqwest::Client,
    /// The chat request's way to a plain-HTTP endpoint no proxy applies to
    /// (`direct.rs` says why); `None`: it goes through `http`.
    direct: Option<Direct>,
    settings: LlmSettings,
    url: String,
    /// `url` parsed once: reqwest would parse the string on every request.
    /// `None` only if it does not parse, and then the string is sent, for
    /// reqwest's own error.
    endpoint: Option<reqwest::Url>,
    /// Whether the endpoint has answered (any HTTP status) in this process
    /// (see [`AnsweredEndpoints`]): a refused or unresolved connection
    /// before that fails at once; after it, it is retried.
    answered: AnsweredEndpoints,
    /// [`answered`](Self::answered) for this client's URL once it is true,
    /// so the hot path takes no lock; shared by the client's clones.
    answered_here: Arc<AtomicBool>,
    /// Its handles for the request metrics (`llm/metrics.rs`), made once.
    metrics: super::metrics::LlmMetrics,
}

impl LlmClient {
    /// Builds the client, refusing settings no request could succeed with:
    /// a malformed `base_url` (also when it comes from `$OPENAI_BASE_URL`,
    /// which the configuration file never sees) or an unusable `ca_file`.
    /// An empty `base_url` (no endpoint configured at all) builds a client
    /// whose every request fails at once with the setup help, so the run
    /// that needs it ends `error` with the fix in its record.
    pub fn new(settings: LlmSettings) -> Result<Self, LlmError> {
        if !settings.base_url.is_empty() {
            check_base_url(&settings.base_url).map_err(LlmError::NotConfigured)?;
        }
        // Built-in roots are the system's trust store plus Mozilla's list
        // (both reqwest features are on; see Cargo.toml), then `ca_file`.
        // A connection that does not complete is given CONNECT_TIMEOUT, not
        // the whole request's time: a host that drops packets is known as
        // such in seconds.
        let connect_timeout = settings.request_timeout.min(CONNECT_TIMEOUT);
        let mut builder = reqwest::Client::builder()
            .timeout(settings.request_timeout)
            .connect_timeout(connect_timeout);
        if let Some(path) = &settings.ca_file {
            for cert in load_ca_file(path).map_err(LlmError::NotConfigured)? {
                builder = builder.add_root_certificate(cert);
            }
        }
        let http = builder.build().map_err(|e| {
            LlmError::NotConfigured(format!("cannot build the HTTP client: {}", error_chain(&e)))
        })?;
        let url = format!(
            "{}/chat/completions",
            settings.base_url.trim_end_matches('/')
        );
        let endpoint = reqwest::Url::parse(&url).ok();
        let direct = endpoint.as_ref().and_then(|endpoint| {
            Direct::for_endpoint(
                endpoint,
                settings.api_key.as_deref(),
                settings.request_timeout,
                connect_timeout,
            )
        });
        Ok(LlmClient {
            http,
            direct,
            metrics: super::metrics::LlmMetrics::new(&settings.model),
            settings,
            endpoint,
            url,
            answered: AnsweredEndpoints::default(),
            answered_here: Arc::new(AtomicBool::new(false)),
        })
    }

    /// Shares `answered` (the daemon's, for its whole life) instead of this
    /// client's own, so that whether the endpoint has ever answered
    /// survives the clients a configuration reload replaces.
    pub fn with_answered(mut self, answered: AnsweredEndpoints) -> Self {
        self.answered_here = Arc::new(AtomicBool::new(
            answered.has_answered(&self.settings.base_url),
        ));
        self.answered = answered;
        self
    }

    fn has_answered(&self) -> bool {
        self.answered_here.load(Ordering::Relaxed)
            || self.answered.has_answered(&self.settings.base_url)
    }

    fn mark_answered(&self) {
        if !self.answered_here.load(Ordering::Relaxed) {
            self.answered.mark(&self.settings.base_url);
            self.answered_here.store(true, Ordering::Relaxed);
        }
    }

    /// Whether an endpoint is configured at all (see [`LlmClient::new`]).
    pub fn is_configured(&self) -> bool {
        !self.settings.base_url.is_empty()
    }

    pub fn settings(&self) -> &LlmSettings {
        &self.settings
    }

    /// Sends one chat request, retrying where the contract allows. The future
    /// may be dropped at any point (a cancelled run): nothing is left behind.
    pub async fn chat<M: AsMessage>(
        &self,
        request: ChatRequest<'_, M>,
    ) -> Result<ChatResponse, LlmError> {
        // The `chat {model}` span, when traces are exported (`crate::otel`).
        let span = crate::otel::chat(&self.settings.model, request.run_id);
        let started = Instant::now();
        let result = self.chat_with_retries(request, &span).await;
        self.metrics
            .operation(started.elapsed(), result.as_ref().err());
        super::trace::record(&span, &result);
        result
    }

    async fn chat_with_retries<M: AsMessage>(
        &self,
        request: ChatRequest<'_, M>,
        span: &tracing::Span,
    ) -> Result<ChatResponse, LlmError> {
        if !self.is_configured() {
            return Err(LlmError::NotConfigured(super::setup::no_endpoint_help()));
        }
        let tools: Vec<ToolParam<'_>> = request
            .tools
            .iter()
            .map(|t| ToolParam {
                kind: "function",
                function: FunctionParam {
                    name: &t.name,
                    description: &t.description,
                    parameters: serde_json::from_str(&t.parameters)
                        .unwrap_or_else(|_| any_object_schema()),
                },
            })
            .collect();
        let body = RequestBody {
            model: &self.settings.model,
            messages: Transcript(request.messages),
            tool_choice: (!tools.is_empty()).then(|| request.tool_choice.as_str()),
            tools,
            max_tokens: self.settings.max_tokens,
            temperature: self.settings.temperature,
        };
        // Encoded into a buffer sized for it at once (the memory's messages
        // are mostly JSON already, spliced in), then shared by every attempt
        // without a copy.
        let hint = 256
            + request
                .messages
                .iter()
                .map(|m| m.encoded_len_hint() + 1)
                .sum::<usize>()
            + request
                .tools
                .iter()
                .map(|t| t.name.len() + t.description.len() + t.parameters.len() + 64)
                .sum::<usize>();
        let mut encoded = Vec::with_capacity(hint);
        serde_json::to_writer(&mut encoded, &body)
            .map_err(|e| LlmError::Malformed(format!("cannot encode request: {e}")))?;
        let body = bytes::Bytes::from(encoded);

        let mut spent = Attempts::default();
        loop {
            let error = match self.timed_send(&body, span).await {
                Ok(r) => return Ok(r),
                Err(LlmError::Connect {
                    url,
                    message,
                    nothing_listens: true,
                }) if !self.has_answered() => {
                    return Err(LlmError::Absent {
                        help: super::setup::unreachable_help(&self.settings.base_url),
                        url,
                        message,
                    })
                }
                Err(e) => e,
            };
            match self.settings.retry.next(error, &mut spent) {
                Next::Retry { delay, error } => {
                    warn!(%error, retries = spent.retries, timeout_retries = spent.timeouts, ?delay,
                        "LLM request failed; retrying");
                    tokio::time::sleep(delay).await;
                }
                Next::Fail(error) => return Err(error),
            }
        }
    }

    /// [`Self::send_once`], recorded as one attempt.
    async fn timed_send(
        &self,
        body: &bytes::Bytes,
        span: &tracing::Span,
    ) -> Result<ChatResponse, LlmError> {
        let started = Instant::now();
        let result = self.send_once(body, span).await;
        self.metrics
            .attempt(started.elapsed(), result.as_ref().err());
        result
    }

    async fn send_once(
        &self,
        body: &bytes::Bytes,
        span: &tracing::Span,
    ) -> Result<ChatResponse, LlmError> {
        let answer = match &self.direct {
            Some(direct) => {
                let answer = direct
                    .post_json(body, MAX_RESPONSE_BYTES, || self.mark_answered())
                    .await?;
                // A redirect (an `http` server moved to `https`, a framework
                // answering 307 for a trailing slash) is followed as reqwest
                // follows it: the request is sent again through reqwest.
                if answer.status.is_redirection() {
                    self.post_json(body).await?
                } else {
                    answer
                }
            }
            None => self.post_json(body).await?,
        };
        let (status, bytes) = (answer.status, answer.body);
        let retry_after = answer
            .retry_after
            .as_ref()
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, SystemTime::now()));
        if !status.is_success() {
            return Err(LlmError::Status {
                status: status.as_u16(),
                message: error_message(&bytes),
                retry_after,
            });
        }
        let parsed: ResponseBody = serde_json::from_slice(&bytes).map_err(|e| {
            LlmError::Malformed(format!(
                "{e}; body starts with {:?}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
            ))
        })?;
        let Some(choice) = parsed.choices.into_iter().next() else {
            return Err(LlmError::Malformed("no choices in response".into()));
        };
        let Some(mut message) = choice.message else {
            return Err(LlmError::Malformed(
                "the first choice has no message".into(),
            ));
        };
        if choice.finish_reason == Some(FinishReason::Length) {
            warn!(url = %self.url, max_tokens = ?self.settings.max_tokens,
                "the LLM answer was cut at max_tokens (finish_reason \"length\")");
        }
        if message.role != Role::Assistant {
            debug!(role = %message.role, "server answered with a non-assistant role; treating it as assistant");
            message.role = Role::Assistant;
        }
        super::trace::response_model(span, parsed.model.as_deref());
        let usage = parsed.usage.unwrap_or_default();
        Ok(ChatResponse {
            message,
            usage: Usage {
                prompt_tokens: usage.prompt_tokens.unwrap_or(0),
                completion_tokens: usage.completion_tokens.unwrap_or(0),
            },
            finish_reason: choice.finish_reason,
        })
    }

    /// The chat request through reqwest: TLS, proxies, and a redirect the
    /// direct way was answered with.
    async fn post_json(&self, body: &bytes::Bytes) -> Result<Answer, LlmError> {
        let req = match &self.endpoint {
            Some(url) => self.http.post(url.clone()),
            None => self.http.post(&self.url),
        };
        let mut req = req
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.clone());
        if let Some(key) = self.settings.api_key.as_deref().filter(|k| !k.is_empty()) {
            req = req.bearer_auth(key);
        }
        let resp = req.send().await.map_err(|e| self.transport_error(e))?;
        self.mark_answered();
        let status = resp.status();
        let retry_after = resp.headers().get(reqwest::header::RETRY_AFTER).cloned();
        let body = read_capped(resp)
            .await
            .map_err(|e| e.unwrap_or_else(|e| self.transport_error(e)))?;
        Ok(Answer {
            status,
            retry_after,
            body,
        })
    }

    fn transport_error(&self, e: reqwest::Error) -> LlmError {
        transport_error(e, &self.url, self.settings.request_timeout)
    }

    /// A GET of `url` on this client (its CA, its pool) with the key, for
    /// the endpoint's other routes ([`super::models`]).
    pub(super) fn get(&self, url: &str) -> reqwest::RequestBuilder {
        let req = self.http.get(url);
        match self.settings.api_key.as_deref().filter(|k| !k.is_empty()) {
            Some(key) => req.bearer_auth(key),
            None => req,
        }
    }
}

/// The schema sent for a tool whose own is not JSON: any object.
fn any_object_schema() -> &'static serde_json::value::RawValue {
    static SCHEMA: std::sync::OnceLock<Box<serde_json::value::RawValue>> =
        std::sync::OnceLock::new();
    SCHEMA.get_or_init(|| {
        serde_json::value::RawValue::from_string(r#"{"type":"object"}"#.to_string())
            .expect("a JSON literal")
    })
}

/// A request to `url` that got no HTTP answer, classified: a timeout (after
/// `timeout`), settings no request can succeed with, a refused
/// certificate, or no connection.
pub(super) fn transport_error(e: reqwest::Error, url: &str, timeout: Duration) -> LlmError {
    if e.is_timeout() {
        LlmError::Timeout(timeout)
    } else if e.is_builder() {
        // The request could not even be formed: the same would happen on
        // every try, so this is a settings problem, not a network one.
        LlmError::NotConfigured(format!(
            "cannot send a request to {url}: {}",
            error_chain(&e)
        ))
    } else if let Some(message) = certificate_problem(&e) {
        LlmError::Certificate {
            url: url.to_string(),
            message,
        }
    } else {
        LlmError::Connect {
            url: url.to_string(),
            message: error_chain(&e),
            nothing_listens: nothing_listens(&e),
        }
    }
}

/// Whether a failed request found no server at all: its connection was
/// refused, or the host name did not resolve. A reset, a timeout or an
/// answer cut short means something is there, and is retried.
///
/// Refused is found by type (an `io::Error` of kind `ConnectionRefused` in
/// the chain, looked for inside `io::Error`s too, whose `source()` skips
/// what they wrap). A resolver failure has no public type in hyper-util:
/// its connector says "dns error", and that is what is matched.
fn nothing_listens(e: &reqwest::Error) -> bool {
    e.is_connect() && refused_or_unresolved(e)
}

/// The search of [`nothing_listens`] through any error's chain (the direct
/// way's errors are hyper-util's own).
pub(super) fn refused_or_unresolved(e: &(dyn std::error::Error + 'static)) -> bool {
    caused_by(e, std::io::ErrorKind::ConnectionRefused)
        || find_in_chain(e, |err| {
            err.to_string().starts_with("dns error").then_some(())
        })
        .is_some()
}

/// What an error answer says: the OpenAI-shaped `error.message`, else the
/// start of the body as it came.
pub(super) fn error_message(bytes: &[u8]) -> String {
    serde_json::from_slice::<ErrorBody>(bytes)
        .map(|b| b.error.message)
        .unwrap_or_else(|_| String::from_utf8_lossy(&bytes[..bytes.len().min(500)]).into_owned())
}

/// A chat response is a few kilobytes; a server streaming without end must
/// not grow the daemon's memory.
const MAX_RESPONSE_BYTES: usize = 16 << 20;

pub(super) async fn read_capped(
    mut resp: reqwest::Response,
) -> Result<Vec<u8>, Result<LlmError, reqwest::Error>> {
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(Err)? {
        if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(Ok(LlmError::Malformed(format!(
                "response larger than {MAX_RESPONSE_BYTES} bytes"
            ))));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The TLS certificate error behind a failed request, if that is what it was.
/// It is found by type, not by wording: rustls's error travels inside an
/// `io::Error` inside hyper's and reqwest's own errors.
fn certificate_problem(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    find_in_chain(e, |err| match err.downcast_ref::<rustls::Error>()? {
        tls @ (rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented) => {
            Some(tls.to_string())
        }
        _ => None,
    })
}

/// The first answer `found` gives for an error in `e`'s chain, `e` first.
/// `io::Error`s are looked inside too: their `source()` skips the error
/// they wrap, which is where rustls's and the resolver's errors travel.
fn find_in_chain<T>(
    e: &(dyn std::error::Error + 'static),
    mut found: impl FnMut(&(dyn std::error::Error + 'static)) -> Option<T>,
) -> Option<T> {
    let mut pending: Vec<&(dyn std::error::Error + 'static)> = vec![e];
    while let Some(err) = pending.pop() {
        if let Some(answer) = found(err) {
            return Some(answer);
        }
        if let Some(inner) = err
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
        {
            pending.push(inner);
        }
        pending.extend(err.source());
    }
    None
}

/// Whether an `io::Error` of `kind` is somewhere in `e`'s chain.
pub(super) fn caused_by(e: &(dyn std::error::Error + 'static), kind: std::io::ErrorKind) -> bool {
    find_in_chain(e, |err| {
        err.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == kind)
            .then_some(())
    })
    .is_some()
}

pub(super) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        source = inner.source();
    }
    s
}

/// A rough input-token estimate (4 characters a token plus framing), used to
/// refuse a request *before* it would exceed the run's budget, as OpenManus
/// does with tiktoken. Servers' own counts replace it once they answer.
pub fn estimate_tokens<M: AsMessage>(messages: &[M], tools: &[ToolSpec]) -> u64 {
    let chars: usize = messages
        .iter()
        .map(AsMessage::message)
        .map(|m: &Message| {
            m.content_str().len()
                + m.tool_calls
                    .iter()
                    .map(|c| c.name.len() + c.arguments.len())
                    .sum::<usize>()
        })
        .sum::<usize>()
        + tools
            .iter()
            .map(|t| t.name.len() + t.description.len() + t.parameters.len())
            .sum::<usize>();
    (chars as u64).div_ceil(4) + 4 * messages.len() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_must_be_http_or_https_with_a_host() {
        assert!(check_base_url("https://api.openai.com/v1").is_ok());
        assert!(check_base_url("http://127.0.0.1:11434/v1").is_ok());
        let err = check_base_url("localhost:11434/v1").expect_err("no scheme");
        assert!(
            err.contains("did you mean `http://localhost:11434/v1`"),
            "{err}"
        );
        assert!(check_base_url("api.openai.com/v1").is_err());
        assert!(check_base_url("ftp://example.com").is_err());
        assert!(check_base_url("http://").is_err());
        assert!(check_base_url("unix:///run/llm.sock").is_err());
    }
}
