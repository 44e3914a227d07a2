//! A scripted OpenAI-compatible `/chat/completions` server.
//!
//! It is strict where real servers are strict: a `tool` message that does not
//! answer a call of the assistant message before it, or a call left
//! unanswered, gets HTTP 400 with an OpenAI-shaped error, as OpenAI, vLLM and
//! others answer. Its checks are written against the raw JSON on purpose,
//! independently of agentd's own message types.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::sync::LockExt;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};

/// One scripted answer.
#[derive(Clone, Debug)]
pub enum Reply {
    /// An assistant message with text only.
    Text(String),
    /// An assistant message calling tools: `(name, arguments)` pairs; the
    /// arguments are sent verbatim, so they may be invalid JSON.
    Calls {
        content: Option<String>,
        calls: Vec<(String, String)>,
    },
    /// An HTTP error with an OpenAI-shaped body.
    Error {
        status: u16,
        message: String,
        retry_after: Option<String>,
    },
    /// A 200 whose body is not a chat completion.
    Garbage(String),
    /// A chat completion whose only choice is this raw JSON object (its
    /// `message`, `finish_reason` and whatever else), sent as it is: the
    /// shapes real servers and proxies answer with (`"tool_calls": null`,
    /// content parts, a refusal, a legacy `function_call`, a `length` cut).
    Choice(Value),
    /// Waits, then answers.
    Delayed(Duration, Box<Reply>),
}

impl Reply {
    pub fn text(s: impl Into<String>) -> Self {
        Reply::Text(s.into())
    }

    pub fn call(name: &str, arguments: &str) -> Self {
        Reply::Calls {
            content: None,
            calls: vec![(name.into(), arguments.into())],
        }
    }

    pub fn terminate() -> Self {
        Self::call("terminate", r#"{"status":"success"}"#)
    }

    /// A choice carrying `message` as raw JSON, finished with `"stop"`.
    pub fn message(message: Value) -> Self {
        Reply::Choice(choice(message))
    }

    pub fn error(status: u16, message: &str) -> Self {
        Reply::Error {
            status,
            message: message.into(),
            retry_after: None,
        }
    }
}

#[derive(Default)]
struct Script {
    replies: VecDeque<Reply>,
    /// Replies for one conversation, keyed by its first user message, so
    /// concurrent runs each get their own script whatever the arrival order.
    /// A map, not a list: `cargo bench --bench daemon` scripts 1000 runs,
    /// and a scan of them per request was about 7 % of the fake's CPU.
    by_request: HashMap<String, VecDeque<Reply>>,
    /// Answered when the script is exhausted.
    fallback: Option<Reply>,
    requests: Vec<Value>,
    /// The `Authorization` header of each request.
    auth: Vec<Option<String>>,
    /// Requests refused because the conversation was malformed.
    rejected: Vec<String>,
    prompt_tokens: u64,
    next_call_id: u64,
    /// Benchmarks turn recording off so memory stays flat.
    no_recording: bool,
    /// The ids `GET /v1/models` lists.
    models: Vec<String>,
}

pub struct FakeLlm {
    addr: SocketAddr,
    script: Arc<Mutex<Script>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    server: Option<std::thread::JoinHandle<()>>,
}

impl FakeLlm {
    /// Starts the server on its own thread and runtime, as a real server is
    /// its own process: it never competes with the caller's runtime for
    /// workers, and a caller that blocks its runtime cannot stall it.
    pub async fn start() -> std::io::Result<Self> {
        let script = Arc::new(Mutex::new(Script {
            prompt_tokens: 10,
            // The model the tests' configurations name.
            models: vec!["fake".into()],
            ..Script::default()
        }));
        let app = Router::new()
            .route("/v1/chat/completions", post(handle))
            .route("/v1/models", get(models))
            // axum's default (2 MiB) is far below what real endpoints take:
            // a conversation carrying a few 1 MiB tool results is normal.
            .layer(axum::extract::DefaultBodyLimit::max(256 << 20))
            .with_state(script.clone());
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let server = std::thread::Builder::new()
            .name("fake-llm".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(l) => l,
                        Err(e) => return tracing::error!(error = %e, "fake LLM cannot listen"),
                    };
                    let shutdown = async {
                        let _ = stopped.await;
                    };
                    if let Err(e) = axum::serve(listener, app)
                        .with_graceful_shutdown(shutdown)
                        .await
                    {
                        tracing::error!(error = %e, "fake LLM server stopped");
                    }
                })
            })?;
        Ok(FakeLlm {
            addr,
            script,
            stop: Some(stop),
            server: Some(server),
        })
    }

    /// The `base_url` to configure (`http://127.0.0.1:PORT/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Script> {
        self.script.lock_unpoisoned()
    }

    pub fn push(&self, reply: Reply) -> &Self {
        self.lock().replies.push_back(reply);
        self
    }

    pub fn push_all(&self, replies: impl IntoIterator<Item = Reply>) -> &Self {
        self.lock().replies.extend(replies);
        self
    }

    /// Queues `replies` for the conversation whose first user message is
    /// `request`; they are served before the shared queue.
    pub fn push_for(&self, request: &str, replies: impl IntoIterator<Item = Reply>) -> &Self {
        self.lock()
            .by_request
            .entry(request.to_string())
            .or_default()
            .extend(replies);
        self
    }

    pub fn set_fallback(&self, reply: Reply) -> &Self {
        self.lock().fallback = Some(reply);
        self
    }

    /// `usage.prompt_tokens` reported on each answer.
    pub fn set_prompt_tokens(&self, n: u64) -> &Self {
        self.lock().prompt_tokens = n;
        self
    }

    /// The model ids `GET /v1/models` lists (`["fake"]` at first; empty
    /// for a server that lists none). Model-list requests are not recorded
    /// in [`requests`](Self::requests), which holds chat requests only.
    pub fn set_models(&self, ids: &[&str]) -> &Self {
        self.lock().models = ids.iter().map(|id| id.to_string()).collect();
        self
    }

    /// Stops keeping request bodies (for long benchmarks); `requests()` then
    /// returns only what came before.
    pub fn set_recording(&self, on: bool) -> &Self {
        self.lock().no_recording = !on;
        self
    }

    /// Every request body received, in order (including rejected ones).
    pub fn requests(&self) -> Vec<Value> {
        self.lock().requests.clone()
    }

    /// The `Authorization` header of each request, in order.
    pub fn auth_headers(&self) -> Vec<Option<String>> {
        self.lock().auth.clone()
    }

    pub fn rejected(&self) -> Vec<String> {
        self.lock().rejected.clone()
    }
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // Not joined: a client still holding a keep-alive connection would
        // make graceful shutdown wait; the thread ends on its own.
        drop(self.server.take());
    }
}

/// OpenAI's list shape, as `GET /v1/models` answers it.
async fn models(State(script): State<Arc<Mutex<Script>>>) -> Response {
    let data: Vec<Value> = script
        .lock_unpoisoned()
        .models
        .iter()
        .map(|id| json!({"id": id, "object": "model", "owned_by": "fake-llm"}))
        .collect();
    axum::Json(json!({"object": "list", "data": data})).into_response()
}

async fn handle(
    State(script): State<Arc<Mutex<Script>>>,
    headers: HeaderMap,
    body: String,
) -> Response {
    // A test records the request, so it is parsed whole anyway and judged
    // on that tree; a benchmark does not, and gets the one-pass reading.
    let recording = !script.lock_unpoisoned().no_recording;
    let (verdict, first_user, request) = if recording {
        let request: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        let (verdict, first_user) = judge_tree(&request);
        (verdict, first_user, Some(request))
    } else {
        let (verdict, first_user) = read_request(&body);
        (verdict, first_user, None)
    };
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let (reply, id_base, prompt_tokens) = {
        let mut s = script.lock_unpoisoned();
        if let Some(request) = request {
            s.requests.push(request);
            s.auth.push(auth);
        }
        if let Err(problem) = verdict {
            s.rejected.push(problem.clone());
            return openai_error(400, &problem, None);
        }
        let routed = first_user
            .as_deref()
            .and_then(|k| s.by_request.get_mut(k))
            .and_then(VecDeque::pop_front);
        let reply = routed
            .or_else(|| s.replies.pop_front())
            .or_else(|| s.fallback.clone());
        // Ids stay unique across replies however many calls one carries
        // (a reply of 1000 calls takes 1000 ids).
        let calls = match &reply {
            Some(Reply::Calls { calls, .. }) => calls.len() as u64,
            _ => 0,
        };
        let id_base = s.next_call_id;
        s.next_call_id += calls.max(8);
        (reply, id_base, s.prompt_tokens)
    };
    let Some(reply) = reply else {
        return openai_error(500, "fake LLM: script exhausted", None);
    };
    answer(reply, id_base, prompt_tokens).await
}

async fn answer(mut reply: Reply, id_base: u64, prompt_tokens: u64) -> Response {
    while let Reply::Delayed(d, inner) = reply {
        tokio::time::sleep(d).await;
        reply = *inner;
    }
    let choice = match reply {
        Reply::Text(t) => choice(json!({"role": "assistant", "content": t})),
        Reply::Calls { content, calls } => {
            let calls: Vec<Value> = calls
                .into_iter()
                .enumerate()
                .map(|(i, (name, args))| {
                    json!({"id": format!("call_{}", id_base + i as u64), "type": "function",
                           "function": {"name": name, "arguments": args}})
                })
                .collect();
            choice(json!({"role": "assistant", "content": content, "tool_calls": calls}))
        }
        Reply::Choice(raw) => raw,
        Reply::Error {
            status,
            message,
            retry_after,
        } => return openai_error(status, &message, retry_after),
        Reply::Garbage(body) => return (StatusCode::OK, body).into_response(),
        Reply::Delayed(..) => unreachable!("unwrapped above"),
    };
    let body = json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": "fake",
        "system_fingerprint": "fp_fake",
        "choices": [choice],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 5, "total_tokens": prompt_tokens + 5,
                  "prompt_tokens_details": {"cached_tokens": 0}},
    });
    (StatusCode::OK, axum::Json(body)).into_response()
}

fn choice(message: Value) -> Value {
    json!({"index": 0, "message": message, "finish_reason": "stop", "logprobs": null})
}

fn openai_error(status: u16, message: &str, retry_after: Option<String>) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": null}});
    let mut headers = HeaderMap::new();
    if let Some(v) = retry_after.and_then(|v| HeaderValue::from_str(&v).ok()) {
        headers.insert("retry-after", v);
    }
    (code, headers, axum::Json(body)).into_response()
}

/// The checks' verdict on a request body and its first user message (the
/// key of its conversation's script), for a fake that does not record. A
/// well-formed request is read in one pass into borrowed, typed fields
/// ([`WellFormed`]); anything that pass does not accept at once (a
/// rejection to word, a shape it does not expect) is judged again on the
/// whole `Value` tree by [`validate`], which alone decides what is refused
/// and says why. Building that tree for every request was most of the
/// fake's CPU per answer under `cargo bench`.
///
/// The one pass skips what it does not read as serde_json skips any value,
/// which is laxer than building a `Value`: a lone surrogate escape, a
/// number past `f64`'s range or nesting deeper than 128 in a part it does
/// not read is accepted, where the tree refuses the whole body. agentd
/// sends none of these (it encodes from Rust strings and finite numbers);
/// a test that sends them records its requests and is judged on the tree.
fn read_request(body: &str) -> (Result<(), String>, Option<String>) {
    if let Some(first_user) = WellFormed::check(body) {
        return (Ok(()), first_user);
    }
    judge_tree(&serde_json::from_str(body).unwrap_or(Value::Null))
}

/// The checks' verdict on the whole tree, and the routing key.
fn judge_tree(request: &Value) -> (Result<(), String>, Option<String>) {
    (validate(request), first_user_message(request))
}

/// The fields [`validate`] reads, borrowed from the body. Objects are taken
/// as raw JSON first and parsed only if they are objects: a derived struct
/// would also accept an array, which the checks refuse.
#[derive(serde::Deserialize)]
struct WellFormed<'a> {
    #[serde(borrow)]
    model: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    messages: Vec<&'a serde_json::value::RawValue>,
    /// Present (even as `null`, which is refused) or absent.
    #[serde(borrow, default, deserialize_with = "present")]
    tool_choice: Option<&'a serde_json::value::RawValue>,
}

#[derive(serde::Deserialize)]
struct WellFormedMessage<'a> {
    #[serde(borrow)]
    role: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    content: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, default)]
    tool_call_id: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<&'a serde_json::value::RawValue>>,
}

#[derive(serde::Deserialize)]
struct WellFormedCall<'a> {
    #[serde(borrow)]
    id: std::borrow::Cow<'a, str>,
}

fn present<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<&'de serde_json::value::RawValue>, D::Error> {
    serde::Deserialize::deserialize(d).map(Some)
}

/// `raw` parsed as `T` if it is a JSON object.
fn object<'a, T: serde::Deserialize<'a>>(raw: &'a serde_json::value::RawValue) -> Option<T> {
    raw.get()
        .starts_with('{')
        .then(|| serde_json::from_str(raw.get()).ok())
        .flatten()
}

impl WellFormed<'_> {
    /// `Some(first user message)` when the request passes every check of
    /// [`validate`]; `None` when it may not (then `validate` judges it).
    fn check(body: &str) -> Option<Option<String>> {
        if !body.trim_start().starts_with('{') {
            return None;
        }
        let request: WellFormed<'_> = serde_json::from_str(body).ok()?;
        request.model.as_ref()?;
        if let Some(choice) = request.tool_choice {
            if !matches!(choice.get(), r#""none""# | r#""auto""# | r#""required""#) {
                return None;
            }
        }
        let mut first_user = None;
        let mut any_user = false;
        let mut open: Option<Vec<std::borrow::Cow<'_, str>>> = None;
        for raw in &request.messages {
            let m: WellFormedMessage<'_> = object(raw)?;
            match &*m.role {
                "tool" => {
                    let id = m.tool_call_id.as_deref().unwrap_or("");
                    let ids = open.as_mut()?;
                    if !ids.iter().any(|x| x == id) {
                        return None;
                    }
                    ids.retain(|x| x != id);
                    continue;
                }
                "user" if !any_user => {
                    any_user = true;
                    // The routing key: the content when it is a string.
                    first_user = m
                        .content
                        .filter(|c| c.get().starts_with('"'))
                        .and_then(|c| serde_json::from_str::<String>(c.get()).ok());
                }
                "system" | "user" | "assistant" => {}
                _ => return None,
            }
            if open.as_ref().is_some_and(|ids| !ids.is_empty()) {
                return None;
            }
            open = match m.tool_calls {
                Some(calls) => Some(
                    calls
                        .iter()
                        .map(|c| object::<WellFormedCall<'_>>(c).map(|c| c.id))
                        .collect::<Option<_>>()?,
                ),
                None => None,
            };
        }
        if !any_user || open.is_some_and(|ids| !ids.is_empty()) {
            return None;
        }
        Some(first_user)
    }
}

fn first_user_message(request: &Value) -> Option<String> {
    request["messages"]
        .as_array()?
        .iter()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .map(str::to_string)
}

/// The checks real servers make on a request's conversation.
fn validate(request: &Value) -> Result<(), String> {
    let messages = request
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("'messages' must be an array")?;
    if request.get("model").and_then(Value::as_str).is_none() {
        return Err("'model' is required".into());
    }
    if messages.is_empty() {
        // OpenAI's wording.
        return Err("[] is too short - 'messages'".into());
    }
    if !messages.iter().any(|m| m["role"] == "user") {
        // What Qwen-family chat templates raise (vLLM answers 400 with it).
        return Err("No user query found in messages.".into());
    }
    if let Some(choice) = request.get("tool_choice") {
        if !matches!(choice.as_str(), Some("none" | "auto" | "required")) {
            return Err(format!("invalid tool_choice {choice}"));
        }
    }
    let mut open: Option<Vec<String>> = None;
    for (i, m) in messages.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        if !matches!(role, "system" | "user" | "assistant" | "tool") {
            return Err(format!("messages[{i}]: invalid role {role:?}"));
        }
        if role == "tool" {
            let id = m.get("tool_call_id").and_then(Value::as_str).unwrap_or("");
            match open.as_mut() {
                Some(ids) if ids.iter().any(|x| x == id) => ids.retain(|x| x != id),
                _ => {
                    return Err(format!(
                        "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'. (messages[{i}], tool_call_id {id:?})"
                    ))
                }
            }
            continue;
        }
        if let Some(ids) = &open {
            if !ids.is_empty() {
                return Err(format!(
                    "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
                    ids.join(", ")
                ));
            }
        }
        open = m.get("tool_calls").and_then(Value::as_array).map(|calls| {
            calls
                .iter()
                .filter_map(|c| c.get("id").and_then(Value::as_str).map(str::to_string))
                .collect()
        });
    }
    match open {
        Some(ids) if !ids.is_empty() => Err(format!(
            "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
            ids.join(", ")
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one-pass reading accepts exactly what `validate` accepts, with
    /// the same routing key, and leaves every refusal to `validate`.
    #[test]
    fn the_typed_reading_agrees_with_the_checks_on_the_whole_tree() {
        let bodies = [
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#,
            r#"{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"h\u0069 \"q\""}],"tool_choice":"auto"}"#,
            r#"{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"parts"}]}]}"#,
            r#"{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function"},{"id":"c2"}]},{"role":"tool","tool_call_id":"c2","content":"x"},{"role":"tool","tool_call_id":"c1","content":"y"},{"role":"user","content":"b"}]}"#,
            r#"{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","tool_calls":null},{"role":"user","content":"b"}]}"#,
            r#"{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","tool_calls":[{"id":"c1"}]}]}"#,
            r#"{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","tool_calls":[{"id":"c1"}]},{"role":"user","content":"b"}]}"#,
            r#"{"model":"m","messages":[{"role":"user","content":"a"},{"role":"tool","tool_call_id":"c9","content":"x"}]}"#,
            r#"{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","tool_calls":[{"type":"function"}]},{"role":"user","content":"b"}]}"#,
            r#"{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","tool_calls":{"id":"c1"}}]}"#,
            r#"{"model":"m","messages":[{"role":"user","content":"a"}],"tool_choice":null}"#,
            r#"{"model":"m","messages":[{"role":"user","content":"a"}],"tool_choice":"any"}"#,
            r#"{"model":"m","messages":[{"role":"user","content":"a"}],"tool_choice":{"type":"function"}}"#,
            r#"{"model":null,"messages":[{"role":"user","content":"a"}]}"#,
            r#"{"messages":[{"role":"user","content":"a"}]}"#,
            r#"{"model":"m","messages":[]}"#,
            r#"{"model":"m","messages":[{"role":"system","content":"s"}]}"#,
            r#"{"model":"m","messages":[{"role":"robot","content":"a"},{"role":"user","content":"b"}]}"#,
            r#"{"model":"m","messages":[["user","a"]]}"#,
            r#"{"model":"m","messages":[{"role":7,"content":"a"}]}"#,
            r#"{"model":"m","messages":[{"role":"user","role":"system","content":"a"}]}"#,
            r#"{"model":"m","model":"n","messages":[{"role":"user","content":"a"}]}"#,
            r#"{"model":"m","messages":{"role":"user"}}"#,
            r#"["m",[{"role":"user","content":"a"}]]"#,
            r#"not json"#,
            r#""#,
        ];
        for body in bodies {
            let whole = judge_tree(&serde_json::from_str(body).unwrap_or(Value::Null));
            assert_eq!(read_request(body), whole, "{body}");
            if let Some(first_user) = WellFormed::check(body) {
                assert_eq!((Ok(()), first_user), whole, "accepted at once: {body}");
            }
        }
        // The common shapes are read in one pass, not judged on the tree.
        assert!(WellFormed::check(bodies[0]).is_some());
        assert!(WellFormed::check(bodies[3]).is_some());
        assert_eq!(
            WellFormed::check(bodies[1]),
            Some(Some("hi \"q\"".to_string()))
        );
    }
}
