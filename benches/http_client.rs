//! The LLM request's round trip on loopback, by the way it is sent: agentd's
//! `LlmClient` (which takes hyper-util's pooled client straight to a plain
//! `http://` endpoint, `src/llm/direct.rs`), reqwest as the client used it
//! before, and hyper-util's client alone. The server answers a fixed chat
//! completion without reading the request, on a thread and runtime of its
//! own, so the figures are the client's side and the kernel's, nothing a
//! server does. Prints the p50 and p99 of each, in µs.
//!
//! Run: `cargo bench --bench http_client`.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use agentd::chat::{Message, ToolChoice, ToolSpec};
use agentd::llm::{ChatRequest, LlmClient};
use agentd::testkit::llm_settings;
use agentd::testkit::stats::percentile;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};

/// A chat completion calling `echo`, as the fake LLM answers a step.
const ANSWER: &str = r#"{"id":"chatcmpl-bench","object":"chat.completion","created":0,"model":"fake","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"echo","arguments":"{\"text\":\"x\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}"#;
/// Requests per measurement, after as many to warm the pool up.
const REQUESTS: usize = 3000;
/// Each way is measured this many times, interleaved with the others.
const ROUNDS: usize = 2;

/// Serves [`ANSWER`] to every `POST /v1/chat/completions`.
fn serve() -> anyhow::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::spawn(move || {
        runtime.block_on(async move {
            let app = axum::Router::new().route(
                "/v1/chat/completions",
                axum::routing::post(|_: Bytes| async {
                    ([("content-type", "application/json")], ANSWER)
                }),
            );
            if let Ok(listener) = tokio::net::TcpListener::from_std(listener) {
                let _ = axum::serve(listener, app).await;
            }
        })
    });
    Ok(addr)
}

/// A step's request of a 20-message window (the `step_overhead` shape).
fn window() -> Vec<Message> {
    let mut window = vec![Message::system("bench"), Message::user("benchmark")];
    for _ in 0..9 {
        window.push(Message::assistant("thinking about it"));
        window.push(Message::user(
            "If you want to stop interaction, use `terminate` tool/function call.",
        ));
    }
    window
}

/// Times `REQUESTS` calls of `one` after as many unmeasured: p50 and p99.
async fn measure<F, Fut>(mut one: F) -> anyhow::Result<(Duration, Duration)>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    for _ in 0..REQUESTS {
        one().await?;
    }
    let mut times = Vec::with_capacity(REQUESTS);
    for _ in 0..REQUESTS {
        let t = Instant::now();
        one().await?;
        times.push(t.elapsed());
    }
    times.sort();
    Ok((percentile(&times, 0.5), percentile(&times, 0.99)))
}

fn print(label: &str, (p50, p99): (Duration, Duration)) {
    println!(
        "  {label:<44} p50 {:6.1} µs, p99 {:6.1} µs",
        p50.as_secs_f64() * 1e6,
        p99.as_secs_f64() * 1e6
    );
}

/// Each measurement runs in a spawned task, as a run's step does.
async fn round(addr: SocketAddr) -> anyhow::Result<()> {
    let base_url = format!("http://{addr}/v1");
    let url = format!("{base_url}/chat/completions");
    let window = window();
    let body = Bytes::from(serde_json::to_vec(&serde_json::json!({
        "model": "fake", "messages": window, "tool_choice": "auto"
    }))?);

    let client = LlmClient::new(llm_settings(base_url))?;
    let agentd = tokio::spawn(async move {
        let no_tools: [ToolSpec; 0] = [];
        measure(|| async {
            client
                .chat(ChatRequest {
                    messages: &window,
                    tools: &no_tools,
                    tool_choice: ToolChoice::Auto,
                    run_id: None,
                })
                .await?;
            Ok(())
        })
        .await
    });
    print("agentd LlmClient (encode, send, parse)", agentd.await??);

    let reqwest = reqwest::Client::new();
    let (url2, body2) = (url.clone(), body.clone());
    let plain = tokio::spawn(async move {
        measure(|| async {
            let answer = reqwest
                .post(&url2)
                .header("content-type", "application/json")
                .body(body2.clone())
                .send()
                .await?
                .bytes()
                .await?;
            serde_json::from_slice::<serde_json::Value>(&answer)?;
            Ok(())
        })
        .await
    });
    print("reqwest (send, parse)", plain.await??);

    let hyper = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let uri: http::Uri = url.parse()?;
    let bare = tokio::spawn(async move {
        measure(|| async {
            let request = http::Request::post(uri.clone())
                .header("content-type", "application/json")
                .body(Full::new(body.clone()))?;
            let answer = hyper.request(request).await?;
            let answer = answer.into_body().collect().await?.to_bytes();
            serde_json::from_slice::<serde_json::Value>(&answer)?;
            Ok(())
        })
        .await
    });
    print("hyper-util's pooled client (send, parse)", bare.await??);
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let addr = serve()?;
    println!(
        "http_client: {REQUESTS} requests of a 20-message window to a fixed answer on loopback, {ROUNDS} rounds"
    );
    for _ in 0..ROUNDS {
        round(addr).await?;
    }
    Ok(())
}
