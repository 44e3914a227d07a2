//! Fault injection, family 6: an LLM endpoint that misbehaves at the HTTP
//! level. A server that accepts the connection and never answers, one that
//! drips its body a byte a second, and one that answers with 20 MiB of JSON
//! must each end only the run that talks to it, with an error naming the
//! cause, while the daemon keeps answering and another run (on a healthy
//! endpoint) finishes. Real daemon, real Docker, real wasm, loopback only.

use crate::common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use agentd::testkit::FakeLlm;
use common::daemon::Daemon;
use common::fault::{self, Bystander, Committed, BYSTANDER_AGENT};

/// How the hostile endpoint treats each request.
#[derive(Clone, Copy)]
enum Misbehaviour {
    /// Reads the request, then holds the connection open in silence.
    Silent,
    /// Sends a 200 head announcing a body, then one byte a second.
    Drip,
    /// Sends a complete, well-formed 200 whose JSON body is 20 MiB.
    Huge,
}

/// A loopback HTTP server that answers every request with one
/// [`Misbehaviour`]; it stops (and drops its connections) when dropped.
struct HostileLlm {
    addr: std::net::SocketAddr,
    stop: Arc<AtomicBool>,
}

impl HostileLlm {
    fn start(how: Misbehaviour) -> HostileLlm {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        listener.set_nonblocking(true).expect("nonblocking");
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        std::thread::spawn(move || {
            while !stopping.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        let stopping = stopping.clone();
                        std::thread::spawn(move || serve(conn, how, &stopping));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        HostileLlm { addr, stop }
    }

    fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }
}

impl Drop for HostileLlm {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Reads one request head (and its sized body), then misbehaves.
fn serve(mut conn: TcpStream, how: Misbehaviour, stop: &AtomicBool) {
    conn.set_nonblocking(false).ok();
    conn.set_read_timeout(Some(Duration::from_secs(5))).ok();
    let mut seen = Vec::new();
    let mut buf = [0u8; 8192];
    let head_end = loop {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
        if let Some(i) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&seen[..head_end]).to_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while seen.len() < head_end + length {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
    match how {
        Misbehaviour::Silent => {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Misbehaviour::Drip => {
            let body = completion_json(64 << 10);
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            if conn.write_all(head.as_bytes()).is_err() {
                return;
            }
            for byte in body.bytes() {
                if stop.load(Ordering::Relaxed) || conn.write_all(&[byte]).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        }
        Misbehaviour::Huge => {
            let body = completion_json(20 << 20);
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            let _ = conn.write_all(head.as_bytes());
            let _ = conn.write_all(body.as_bytes());
        }
    }
}

/// A well-formed chat completion whose answer text makes it `size` bytes.
fn completion_json(size: usize) -> String {
    let text = "A".repeat(size);
    serde_json::json!({
        "id": "c1", "object": "chat.completion", "created": 0, "model": "hostile",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": text}}],
    })
    .to_string()
}

/// The bystander on the healthy fake LLM, and `hostile` on the misbehaving
/// endpoint with a 2 s request timeout and no timeout retry, so the test
/// does not wait the default 300 s.
fn agents(hostile: &HostileLlm) -> String {
    format!(
        "{BYSTANDER_AGENT}\n[agents.hostile]\nstrategy = \"toolcall\"\ntools = [\"bash\", \"terminate\"]\nmax_steps = 3\n\
         [agents.hostile.llm]\nbase_url = \"{}\"\ntimeout = 2\ntimeout_retries = 0\nmax_retries = 0\n",
        hostile.base_url()
    )
}

/// Starts the daemon, commits one bystander run, then starts the hostile
/// run next to a second bystander and checks everything the fault suite
/// promises. Returns the hostile run's record.
async fn contained(how: Misbehaviour, cause: &[&str]) -> serde_json::Value {
    let llm = FakeLlm::start().await.expect("fake llm");
    let hostile = HostileLlm::start(how);
    let extra = agents(&hostile);
    let d = tokio::task::block_in_place(|| Daemon::start(&llm, &extra));
    let (first, committed, second, hostile_id, record) = tokio::task::block_in_place(|| {
        let first = Bystander::start(&d, &llm);
        first.finish(&d);
        let committed = Committed::take(&d);
        assert!(committed.len() >= 1);
        let hostile_id = d.create_run("hostile", "say hello");
        let second = Bystander::start(&d, &llm);
        fault::assert_status_within_a_second(&d);
        second.finish(&d);
        let record = d.wait_run(&hostile_id, Duration::from_secs(60));
        fault::assert_ended_because(&record, "error", cause);
        fault::assert_status_within_a_second(&d);
        committed.assert_unchanged(&d);
        (first, committed, second, hostile_id, record)
    });
    drop(committed);
    fault::assert_no_containers(&[&first.id, &second.id, &hostile_id]).await;
    record
}

#[tokio::test(flavor = "multi_thread")]
async fn an_endpoint_that_never_answers_ends_the_run_at_the_request_timeout() {
    contained(Misbehaviour::Silent, &["timed out"]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_endpoint_that_drips_its_body_ends_the_run_at_the_request_timeout() {
    contained(Misbehaviour::Drip, &["timed out"]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn twenty_mib_of_json_is_refused_past_the_response_cap() {
    let record = contained(Misbehaviour::Huge, &["larger than"]).await;
    // The run's error says how big a response may be, and nothing of the
    // 20 MiB answer was stored.
    let stored: usize = record["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| m["content"].as_str().map_or(0, str::len))
        .sum();
    assert!(stored < 1 << 20, "{stored} bytes of messages stored");
}
