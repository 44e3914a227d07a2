//! The LLM client against what real servers and proxies do: answers in every
//! shape they send, retries as the README states them, and HTTPS endpoints
//! behind a CA of their own. Runs go through the real `toolcall` strategy
//! component and the scripted fake LLM; TLS is a real rustls endpoint on
//! loopback in front of it.

use crate::common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use agentd::agent::{Outcome, RunOptions, RunRecord};

use agentd::chat::ToolChoice;
use agentd::chat::{Message, Role};
use agentd::llm::{ChatRequest, FinishReason, LlmClient, LlmError, LlmSettings};
use agentd::testkit::{FakeLlm, Reply};
use common::{tool_outputs, toolcall_agent, Harness};
use serde_json::json;

async fn run_with(h: &Harness, settings: LlmSettings, request: &str) -> RunRecord {
    h.agent_with(toolcall_agent(5), settings)
        .run(request, RunOptions::default())
        .await
        .expect("run")
}

fn assistant_texts(r: &RunRecord) -> Vec<String> {
    r.messages
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .map(|m| m.content_str().to_string())
        .collect()
}

// ---- Responses from real servers and proxies parse ----

#[tokio::test]
async fn a_text_answer_with_null_fields_finishes_normally() {
    let h = Harness::new().await;
    h.llm.push_all([
        // LiteLLM's text-only answer.
        Reply::message(json!({"role": null, "content": "Hello", "tool_calls": null,
                              "function_call": null, "refusal": null})),
        Reply::Choice(json!({"index": 0, "finish_reason": null, "message": {
            "role": "assistant", "content": null,
            "tool_calls": [{"id": null, "type": null,
                            "function": {"name": "terminate", "arguments": "{\"status\":\"success\"}"}}]}})),
    ]);
    let r = h.run(toolcall_agent(5), "greet").await;
    assert_eq!(r.outcome, Outcome::Finished, "{r:?}");
    assert_eq!(r.steps, 2);
    assert!(r.result.starts_with("Step 1: Hello\n"), "{}", r.result);
    assert_eq!(assistant_texts(&r)[0], "Hello");
    // What was stored is sent back as a valid conversation.
    assert!(h.llm.rejected().is_empty(), "{:?}", h.llm.rejected());
}

#[tokio::test]
async fn content_parts_are_joined_into_the_stored_answer() {
    let h = Harness::new().await;
    h.llm.push_all([
        Reply::message(json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": [{"type": "text", "text": "let me see"}]},
            {"type": "text", "text": "Part one, "},
            {"type": "text", "text": "part two."},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]})),
        Reply::terminate(),
    ]);
    let r = h.run(toolcall_agent(5), "parts").await;
    assert_eq!(r.outcome, Outcome::Finished, "{r:?}");
    let expected = "[thinking part omitted]\nPart one, part two.\n[image_url part omitted]";
    assert_eq!(assistant_texts(&r)[0], expected);
    let second = &h.llm.requests()[1];
    let sent = second["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "assistant"))
        .expect("the answer is sent back");
    assert_eq!(sent["content"], expected, "sent back as one string");
}

#[tokio::test]
async fn a_refusal_is_the_stored_answer_and_the_step_observes_it() {
    let h = Harness::new().await;
    h.llm.push_all([
        Reply::message(json!({"role": "assistant", "content": null,
                              "refusal": "I can't help with that."})),
        Reply::terminate(),
    ]);
    let r = h.run(toolcall_agent(5), "something forbidden").await;
    assert_eq!(r.outcome, Outcome::Finished, "{r:?}");
    assert_eq!(assistant_texts(&r)[0], "I can't help with that.");
    assert!(
        r.result.starts_with("Step 1: I can't help with that.\n"),
        "{}",
        r.result
    );
}

#[tokio::test]
async fn a_legacy_function_call_runs_the_tool() {
    let h = Harness::new().await;
    h.llm.push_all([
        Reply::message(json!({"role": "assistant", "content": null, "tool_calls": null,
            "function_call": {"name": "echo", "arguments": "{\"text\":\"from the legacy field\"}"}})),
        Reply::message(json!({"role": "assistant", "content": null,
            "function_call": {"name": "terminate", "arguments": "{\"status\":\"success\"}"}})),
    ]);
    let r = h.run(toolcall_agent(5), "legacy").await;
    assert_eq!(r.outcome, Outcome::Finished, "{r:?}");
    assert_eq!(
        tool_outputs(&r)[0],
        "Observed output of cmd `echo` executed:\nfrom the legacy field"
    );
    let second = &h.llm.requests()[1];
    let messages = second["messages"].as_array().expect("messages");
    let call = messages
        .iter()
        .find(|m| m["role"] == "assistant")
        .expect("the call is sent back");
    assert_eq!(call["tool_calls"][0]["id"], "call_0");
    assert_eq!(call["tool_calls"][0]["function"]["name"], "echo");
    assert!(messages
        .iter()
        .any(|m| m["role"] == "tool" && m["tool_call_id"] == "call_0"));
    assert!(h.llm.rejected().is_empty(), "{:?}", h.llm.rejected());
}

/// A tool's schema goes out as the plugin wrote it (checked to be JSON, not
/// re-encoded); one that is not JSON goes out as "any object", so the
/// request is still one the server accepts.
#[tokio::test]
async fn tool_schemas_are_sent_as_written_or_as_any_object() {
    use agentd::chat::ToolSpec;
    let llm = FakeLlm::start().await.expect("fake LLM");
    let client = LlmClient::new(settings_for(llm.base_url())).expect("client");
    let schema =
        "{\n  \"type\": \"object\",\n  \"properties\": {\"text\": {\"type\": \"string\"}}\n}";
    let tools = [
        ToolSpec {
            name: "echo".into(),
            description: "says it back".into(),
            parameters: schema.into(),
        },
        ToolSpec {
            name: "broken".into(),
            description: "its schema is not JSON".into(),
            parameters: "{type: object".into(),
        },
    ];
    llm.push(Reply::text("ok"));
    client
        .chat(ChatRequest {
            messages: std::slice::from_ref(&*USER),
            tools: &tools,
            tool_choice: ToolChoice::Auto,
            run_id: None,
        })
        .await
        .expect("chat");
    let sent = llm.requests();
    let sent_tools = &sent[0]["tools"];
    assert_eq!(sent_tools[0]["type"], "function");
    assert_eq!(sent_tools[0]["function"]["name"], "echo");
    assert_eq!(
        sent_tools[0]["function"]["parameters"],
        serde_json::from_str::<serde_json::Value>(schema).expect("schema")
    );
    assert_eq!(sent_tools[1]["function"]["name"], "broken");
    assert_eq!(
        sent_tools[1]["function"]["parameters"],
        json!({"type": "object"})
    );
    assert!(llm.rejected().is_empty(), "{:?}", llm.rejected());
}

#[tokio::test]
async fn finish_reason_is_exposed() {
    let llm = FakeLlm::start().await.expect("fake LLM");
    let settings = settings_for(llm.base_url());
    let client = LlmClient::new(settings).expect("client");
    let ask = || ChatRequest {
        messages: std::slice::from_ref(&*USER),
        tools: &[],
        tool_choice: ToolChoice::Auto,
        run_id: None,
    };
    llm.push_all([
        Reply::Choice(
            json!({"message": {"role": "assistant", "content": "The answer is cut sh"},
                             "finish_reason": "length"}),
        ),
        Reply::text("done"),
        Reply::Choice(json!({"message": {"content": "x"}, "finish_reason": "eos"})),
    ]);
    let cut = client.chat(ask()).await.expect("answer");
    assert_eq!(cut.finish_reason, Some(FinishReason::Length));
    assert_eq!(cut.message.content_str(), "The answer is cut sh");
    let whole = client.chat(ask()).await.expect("answer");
    assert_eq!(whole.finish_reason, Some(FinishReason::Stop));
    let other = client.chat(ask()).await.expect("answer");
    assert_eq!(other.finish_reason, Some(FinishReason::Other("eos".into())));
}

static USER: std::sync::LazyLock<Message> = std::sync::LazyLock::new(|| Message::user("hi"));

fn settings_for(base_url: String) -> LlmSettings {
    LlmSettings {
        retry: agentd::llm::RetryPolicy {
            initial_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(200),
            ..Default::default()
        },
        ..agentd::testkit::llm_settings(base_url)
    }
}

// ---- Retries that match the documentation ----

#[tokio::test]
async fn an_http_date_retry_after_is_honoured() {
    let h = Harness::new().await;
    let started = SystemTime::now();
    let at = httpdate::fmt_http_date(started + Duration::from_secs(2));
    h.llm.push_all([
        Reply::Error {
            status: 503,
            message: "warming up".into(),
            retry_after: Some(at),
        },
        Reply::terminate(),
    ]);
    let r = h.run(toolcall_agent(3), "wait for the date").await;
    assert_eq!(r.outcome, Outcome::Finished, "{r:?}");
    assert_eq!(h.llm.requests().len(), 2, "one 503, then the retry");
    // Lower bound only (the date has one-second resolution): the retry did
    // not come before the server asked, as the 10 ms backoff would have.
    let waited = SystemTime::now()
        .duration_since(started)
        .unwrap_or_default();
    assert!(waited >= Duration::from_secs(1), "retried after {waited:?}");
}

#[tokio::test]
async fn request_timeout_and_conflict_statuses_are_retried() {
    let h = Harness::new().await;
    h.llm.push_all([
        Reply::error(408, "request timeout"),
        Reply::error(409, "conflict"),
        Reply::terminate(),
    ]);
    let r = h.run(toolcall_agent(3), "retry 408 and 409").await;
    assert_eq!(r.outcome, Outcome::Finished, "{r:?}");
    assert_eq!(h.llm.requests().len(), 3);
}

#[tokio::test]
async fn a_retry_after_beyond_retry_max_wait_fails_naming_the_key() {
    let h = Harness::new().await;
    h.llm.push_all([
        Reply::Error {
            status: 429,
            message: "quota resets in ten minutes".into(),
            retry_after: Some("600".into()),
        },
        Reply::terminate(),
    ]);
    let mut settings = h.settings();
    settings.retry.max_wait = Duration::from_secs(1);
    let r = run_with(&h, settings, "too long a wait").await;
    assert_eq!(r.outcome, Outcome::Error, "{r:?}");
    assert_eq!(h.llm.requests().len(), 1, "not retried early");
    let err = r.error.expect("error");
    assert!(
        err.contains("quota resets in ten minutes")
            && err.contains("after 600 s")
            && err.contains("[llm] retry_max_wait"),
        "{err}"
    );
}

#[tokio::test]
async fn a_timed_out_request_is_tried_one_plus_timeout_retries_times() {
    for timeout_retries in [0, 1, 2] {
        let h = Harness::new().await;
        h.llm.set_fallback(Reply::Delayed(
            Duration::from_secs(5),
            Box::new(Reply::terminate()),
        ));
        let mut settings = h.settings();
        settings.request_timeout = Duration::from_millis(300);
        settings.retry.timeout_retries = timeout_retries;
        assert_eq!(settings.retry.max_retries, 3, "more than timeout_retries");
        let r = run_with(&h, settings, "slow model").await;
        assert_eq!(r.outcome, Outcome::Error, "{r:?}");
        assert!(
            r.error.as_deref().unwrap_or("").contains("timed out"),
            "{r:?}"
        );
        assert_eq!(
            h.llm.requests().len(),
            1 + timeout_retries as usize,
            "timeout_retries = {timeout_retries}"
        );
    }
}

#[tokio::test]
async fn a_malformed_base_url_is_refused_before_any_request() {
    for url in [
        "localhost:11434/v1",
        "ftp://example.com/v1",
        "http://",
        "api.openai.com/v1",
    ] {
        let settings = LlmSettings {
            base_url: url.into(),
            ..settings_for(String::new())
        };
        match LlmClient::new(settings) {
            Err(LlmError::NotConfigured(msg)) => {
                assert!(msg.contains(&format!("base_url `{url}`")), "{msg}")
            }
            Err(other) => panic!("{url}: expected NotConfigured, got {other}"),
            Ok(_) => panic!("{url}: accepted"),
        }
    }
}

// ---- The HTTPS client trusts what the system trusts ----

/// A CA and a certificate it issued for `127.0.0.1` and `localhost`.
struct TestPki {
    ca_pem: String,
    leaf_der: Vec<u8>,
    leaf_key_der: Vec<u8>,
}

fn test_pki() -> TestPki {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "agentd test CA");
    let ca_cert = ca.self_signed(&ca_key).expect("CA certificate");
    let issuer = Issuer::new(ca, ca_key);
    let leaf_key = KeyPair::generate().expect("leaf key");
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .expect("leaf params")
        .signed_by(&leaf_key, &issuer)
        .expect("leaf certificate");
    TestPki {
        ca_pem: ca_cert.pem(),
        leaf_der: leaf.der().to_vec(),
        leaf_key_der: leaf_key.serialize_der(),
    }
}

/// A TLS terminator on loopback that forwards bytes to `backend` (the fake
/// LLM), counting the connections it accepts.
struct TlsFront {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl TlsFront {
    async fn start(pki: &TestPki, backend: SocketAddr) -> Self {
        use tokio_rustls::rustls;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_no_client_auth()
            .with_single_cert(
                vec![pki.leaf_der.clone().into()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(pki.leaf_key_der.clone().into()),
            )
            .expect("server certificate");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("address");
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = connections.clone();
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    // A client that refuses the certificate ends here.
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    if let Ok(mut plain) = tokio::net::TcpStream::connect(backend).await {
                        let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                    }
                });
            }
        });
        TlsFront {
            addr,
            connections,
            task,
        }
    }

    fn base_url(&self) -> String {
        format!("https://{}/v1", self.addr)
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn backend_of(llm: &FakeLlm) -> SocketAddr {
    let url = llm.base_url();
    url.trim_start_matches("http://")
        .trim_end_matches("/v1")
        .parse()
        .expect("fake LLM address")
}

#[tokio::test]
async fn an_untrusted_certificate_is_one_clear_attempt_and_ca_file_fixes_it() {
    let h = Harness::new().await;
    let pki = test_pki();
    let front = TlsFront::start(&pki, backend_of(&h.llm)).await;
    h.llm.set_fallback(Reply::terminate());

    let mut settings = h.settings();
    settings.base_url = front.base_url();
    let r = run_with(&h, settings.clone(), "over TLS").await;
    assert_eq!(r.outcome, Outcome::Error, "{r:?}");
    let err = r.error.expect("error");
    assert!(
        err.contains(&format!("certificate of LLM endpoint {}", front.base_url()))
            && err.contains("UnknownIssuer")
            && err.contains("[llm] ca_file"),
        "{err}"
    );
    assert_eq!(
        front.connections(),
        1,
        "a refused certificate is not retried"
    );
    assert!(h.llm.requests().is_empty());

    let dir = tempfile::tempdir().expect("tempdir");
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, &pki.ca_pem).expect("write CA");
    settings.ca_file = Some(ca_file);
    let r = run_with(&h, settings, "over TLS").await;
    assert_eq!(r.outcome, Outcome::Finished, "{r:?}");
    assert_eq!(h.llm.requests().len(), 1);
}

#[tokio::test]
async fn an_unusable_ca_file_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "").expect("write");
    for (path, words) in [
        (dir.path().join("missing.pem"), "cannot read"),
        (empty, "no PEM certificate"),
    ] {
        let settings = LlmSettings {
            ca_file: Some(path.clone()),
            ..settings_for("http://127.0.0.1:9/v1".into())
        };
        match LlmClient::new(settings) {
            Err(LlmError::NotConfigured(msg)) => assert!(
                msg.contains(&format!("ca_file {}", path.display())) && msg.contains(words),
                "{msg}"
            ),
            Err(other) => panic!("expected NotConfigured, got {other}"),
            Ok(_) => panic!("{} accepted", path.display()),
        }
    }
}

/// The system trust store is read (`SSL_CERT_FILE` is how a system store is
/// pointed at a file): checked in a child process of this test binary, so
/// the variable is set before anything reads it and nowhere else.
#[tokio::test]
async fn the_system_trust_store_is_trusted() {
    let h = Harness::new().await;
    let pki = test_pki();
    let front = TlsFront::start(&pki, backend_of(&h.llm)).await;
    h.llm.set_fallback(Reply::text("trusted"));
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("system-store.pem");
    std::fs::write(&store, &pki.ca_pem).expect("write store");
    run_child_test(
        "llm_client::system_store_child",
        &[
            ("SSL_CERT_FILE", store.display().to_string()),
            (CHILD_URL, front.base_url()),
        ],
        &["SSL_CERT_DIR"],
    )
    .await;
    assert_eq!(h.llm.requests().len(), 1, "the child's request got through");
}

/// Runs the ignored test `name` of this binary in a child process, with
/// `set` in its environment and `unset` removed from it, and asserts that
/// it passed: how a test sees what the client makes of variables read once
/// per process, without setting them in this one.
async fn run_child_test(name: &str, set: &[(&str, String)], unset: &[&str]) {
    let exe = std::env::current_exe().expect("test binary");
    let mut child = tokio::process::Command::new(exe);
    child.args(["--exact", name, "--include-ignored", "--nocapture"]);
    for var in unset {
        child.env_remove(var);
    }
    for (var, value) in set {
        child.env(var, value);
    }
    let out = child.output().await.expect("run the child");
    assert!(
        out.status.success(),
        "{name} with {set:?}\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

const CHILD_URL: &str = "AGENTD_TEST_SYSTEM_STORE_URL";

/// Half of `the_system_trust_store_is_trusted`; does nothing on its own.
#[tokio::test]
#[ignore = "run by the_system_trust_store_is_trusted with SSL_CERT_FILE set"]
async fn system_store_child() {
    let Ok(base_url) = std::env::var(CHILD_URL) else {
        return;
    };
    let settings = LlmSettings {
        base_url,
        ..settings_for(String::new())
    };
    let client = LlmClient::new(settings).expect("client");
    let answer = client
        .chat(ChatRequest {
            messages: std::slice::from_ref(&*USER),
            tools: &[],
            tool_choice: ToolChoice::Auto,
            run_id: None,
        })
        .await
        .expect("the CA in SSL_CERT_FILE is trusted");
    assert_eq!(answer.message.content_str(), "trusted");
}

// ---- Proxy variables: a plain-HTTP endpoint goes direct only when none applies ----

/// A forward proxy on loopback that answers every request itself, with a
/// chat completion saying `via proxy`, and records the target it was asked
/// for (a proxied request names it whole: `http://host:port/path`).
async fn recording_proxy() -> (SocketAddr, Arc<std::sync::Mutex<Vec<String>>>) {
    let asked: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let record = asked.clone();
    let app = axum::Router::new().fallback(move |uri: axum::http::Uri| {
        let record = record.clone();
        async move {
            record.lock().expect("proxy log").push(uri.to_string());
            axum::Json(json!({"choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": "via proxy"}}]}))
        }
    });
    (common::serve_loopback(app).await, asked)
}

/// Runs `proxy_child` with `vars` set and every other proxy variable
/// removed: it asks `base_url` once and checks the answer is `expect`.
async fn ask_in_child(base_url: &str, expect: &str, vars: &[(&str, String)]) {
    let mut set = vars.to_vec();
    set.push((PROXY_CHILD_URL, base_url.to_string()));
    set.push((PROXY_CHILD_EXPECT, expect.to_string()));
    run_child_test(
        "llm_client::proxy_child",
        &set,
        &[
            "HTTP_PROXY",
            "http_proxy",
            "HTTPS_PROXY",
            "https_proxy",
            "ALL_PROXY",
            "all_proxy",
            "NO_PROXY",
            "no_proxy",
            "REQUEST_METHOD",
        ],
    )
    .await;
}

#[tokio::test]
async fn a_proxy_variable_sends_the_request_through_the_proxy_and_no_proxy_sends_it_direct() {
    let h = Harness::new().await;
    h.llm.set_fallback(Reply::text("direct"));
    let (proxy, asked) = recording_proxy().await;
    let proxy_url = format!("http://{proxy}");
    let base_url = h.llm.base_url();

    for var in ["HTTP_PROXY", "http_proxy", "ALL_PROXY"] {
        ask_in_child(&base_url, "via proxy", &[(var, proxy_url.clone())]).await;
    }
    assert_eq!(
        *asked.lock().expect("proxy log"),
        vec![format!("{base_url}/chat/completions"); 3],
        "each request named its target to the proxy"
    );
    assert!(
        h.llm.requests().is_empty(),
        "nothing reached the endpoint past the proxy"
    );

    // An `https` proxy does not apply to a plain-HTTP endpoint, nor does
    // one whose `NO_PROXY` names the endpoint's host.
    ask_in_child(&base_url, "direct", &[("HTTPS_PROXY", proxy_url.clone())]).await;
    ask_in_child(
        &base_url,
        "direct",
        &[
            ("HTTP_PROXY", proxy_url.clone()),
            ("NO_PROXY", "localhost,127.0.0.1".into()),
        ],
    )
    .await;
    assert_eq!(
        h.llm.requests().len(),
        2,
        "both went straight to the endpoint"
    );
    assert_eq!(
        asked.lock().expect("proxy log").len(),
        3,
        "not through the proxy"
    );
}

/// What reqwest does for a plain-HTTP endpoint beyond sending, the direct
/// way does too: a redirect is followed (the POST sent again, with its
/// body) and credentials in the URL are sent as Basic auth.
#[tokio::test]
async fn a_redirect_is_followed_and_credentials_in_the_url_are_sent() {
    let h = Harness::new().await;
    h.llm.set_fallback(Reply::text("moved"));
    let target = format!("{}/chat/completions", h.llm.base_url());
    let app = axum::Router::new().fallback(move || {
        let target = target.clone();
        async move { axum::response::Redirect::temporary(&target) }
    });
    let moved = common::serve_loopback(app).await;
    let client = LlmClient::new(settings_for(format!("http://{moved}/v1"))).expect("client");
    let answer = chat_once(&client).await.expect("the redirect is followed");
    assert_eq!(answer.message.content_str(), "moved");
    assert_eq!(
        h.llm.requests()[0]["messages"][0]["content"],
        "hello",
        "the body went along"
    );

    let with_user = h.llm.base_url().replace("http://", "http://user:pass@");
    let client = LlmClient::new(settings_for(with_user)).expect("client");
    chat_once(&client).await.expect("an answer");
    assert_eq!(
        h.llm.auth_headers().last().cloned().flatten().as_deref(),
        Some("Basic dXNlcjpwYXNz")
    );
}

const PROXY_CHILD_URL: &str = "AGENTD_TEST_PROXY_CHILD_URL";
const PROXY_CHILD_EXPECT: &str = "AGENTD_TEST_PROXY_CHILD_EXPECT";

/// Half of `a_proxy_variable_sends_the_request_through_the_proxy_and_no_proxy_sends_it_direct`;
/// does nothing on its own.
#[tokio::test]
#[ignore = "run by a_proxy_variable_sends_the_request_through_the_proxy_and_no_proxy_sends_it_direct"]
async fn proxy_child() {
    let (Ok(base_url), Ok(expect)) = (
        std::env::var(PROXY_CHILD_URL),
        std::env::var(PROXY_CHILD_EXPECT),
    ) else {
        return;
    };
    let client = LlmClient::new(settings_for(base_url)).expect("client");
    let answer = chat_once(&client).await.expect("an answer");
    assert_eq!(answer.message.content_str(), expect);
}

// ---- A missing server fails at once; anything else is retried ----

fn hello() -> Vec<Message> {
    vec![Message::user("hello")]
}

async fn chat_once(client: &LlmClient) -> Result<agentd::llm::ChatResponse, LlmError> {
    let messages = hello();
    client
        .chat(ChatRequest {
            messages: &messages,
            tools: &[],
            tool_choice: ToolChoice::Auto,
            run_id: None,
        })
        .await
}

/// A server that accepts each connection and closes it before answering
/// (a proxy whose upstream is restarting, a crashing server) is there: even
/// before it ever answered, its failure is retried, never reported as
/// "nothing listens" (which is for refused connections and unresolved
/// names only).
#[tokio::test]
async fn a_connection_closed_before_any_answer_is_retried_not_called_absent() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            drop(socket);
        }
    });
    let client = LlmClient::new(settings_for(format!("http://{addr}/v1"))).expect("client");
    let err = chat_once(&client).await.expect_err("no answer");
    assert!(
        matches!(
            err,
            LlmError::Connect {
                nothing_listens: false,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(!err.to_string().contains("is the server running?"), "{err}");
    assert!(accepted.load(Ordering::SeqCst) > 1, "not retried");
}

/// A refused connection before any answer fails at once with the help; the
/// same refusal after the endpoint answered once (even to another client
/// built since, as a reload builds them, when they share the memory) is
/// retried.
#[tokio::test]
async fn a_refused_endpoint_is_absent_until_it_has_answered_once() {
    let llm = FakeLlm::start().await.expect("fake llm");
    let base = llm.base_url();
    let answered = agentd::llm::AnsweredEndpoints::default();
    llm.push(Reply::text("hi"));
    let first = LlmClient::new(settings_for(base.clone()))
        .expect("client")
        .with_answered(answered.clone());
    chat_once(&first).await.expect("answered");
    assert!(answered.has_answered(&base));
    drop(llm);

    // A client built afterwards with the same memory: retried, then the
    // plain connect error.
    let second = LlmClient::new(settings_for(base.clone()))
        .expect("client")
        .with_answered(answered.clone());
    let err = chat_once(&second).await.expect_err("gone");
    assert!(
        matches!(
            err,
            LlmError::Connect {
                nothing_listens: true,
                ..
            }
        ),
        "{err:?}"
    );

    // One with a memory of its own has never seen it answer: absent.
    let fresh = LlmClient::new(settings_for(base)).expect("client");
    let err = chat_once(&fresh).await.expect_err("gone");
    assert!(matches!(err, LlmError::Absent { .. }), "{err:?}");
}
