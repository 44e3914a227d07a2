//! What every fault-injection test (`tests/fault_*.rs`) asserts once its
//! fault has happened: the daemon still answers `GET /v1/status` within a
//! second, another run finishes normally, no container is left, no
//! committed run is lost or changed, and the failing run ends with an
//! outcome and a message that names the cause. One harness so that every
//! family proves the same promise the same way.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use agentd::testkit::{FakeLlm, Reply};
use serde_json::Value;

use super::daemon::Daemon;

/// An agent that runs one real sandbox command and finishes: the bystander
/// that must keep working while another run misbehaves. Append it to the
/// daemon's `extra` configuration (with the `[agents.*]` tables).
pub const BYSTANDER_AGENT: &str = "\n[agents.bystander]\nstrategy = \"toolcall\"\ntools = [\"bash\", \"terminate\"]\nmax_steps = 5\n";

/// `GET /v1/status` answers 200 within one second, on a fresh connection.
pub fn assert_status_within_a_second(d: &Daemon) {
    let started = Instant::now();
    let answer = (|| -> std::io::Result<String> {
        let mut s = UnixStream::connect(&d.socket)?;
        s.set_read_timeout(Some(Duration::from_secs(1)))?;
        s.set_write_timeout(Some(Duration::from_secs(1)))?;
        s.write_all(b"GET /v1/status HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")?;
        let mut head = [0u8; 12];
        s.read_exact(&mut head)?;
        Ok(String::from_utf8_lossy(&head).into_owned())
    })();
    let took = started.elapsed();
    match answer {
        Ok(head) => assert!(
            head.starts_with("HTTP/1.1 200") && took < Duration::from_secs(1),
            "GET /v1/status answered {head:?} after {took:?}\n{}",
            d.log_text()
        ),
        Err(e) => panic!(
            "GET /v1/status did not answer within a second ({e}, after {took:?})\n{}",
            d.log_text()
        ),
    }
}

/// A normal run started next to the fault; [`finish`](Self::finish) proves
/// it ended as if nothing had happened.
pub struct Bystander {
    pub id: String,
    marker: String,
}

impl Bystander {
    /// Scripts the fake LLM for one `bash` call and a `terminate`, keyed by
    /// this run's request so it never takes the failing run's replies, and
    /// starts it on the [`BYSTANDER_AGENT`].
    pub fn start(d: &Daemon, llm: &FakeLlm) -> Bystander {
        let marker = format!("bystander-{}", std::process::id() ^ rand_u32());
        let request = format!("bystander run {marker}");
        llm.push_for(
            &request,
            [
                Reply::call(
                    "bash",
                    &serde_json::json!({"command": format!("echo {marker}")}).to_string(),
                ),
                Reply::terminate(),
            ],
        );
        let id = d.create_run("bystander", &request);
        Bystander { id, marker }
    }

    /// Waits for the run and asserts it finished and saw its command's output.
    pub fn finish(&self, d: &Daemon) -> Value {
        let record = d.wait_run(&self.id, Duration::from_secs(120));
        assert_eq!(record["outcome"], "finished", "bystander run: {record}");
        let saw = record["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|m| {
                m["role"] == "tool" && m["content"].as_str().unwrap_or("").contains(&self.marker)
            });
        assert!(
            saw,
            "the bystander did not see its command's output: {record}"
        );
        record
    }
}

fn rand_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos());
    h.finish() as u32
}

/// The records of every ended run, taken before the fault; after it,
/// [`assert_unchanged`](Self::assert_unchanged) proves none was lost or
/// altered.
pub struct Committed {
    runs: Vec<(String, Value)>,
}

impl Committed {
    /// Every ended run (up to 1000, the API's page) with its full record.
    pub fn take(d: &Daemon) -> Committed {
        let (status, list) = d.get("/v1/runs?limit=1000");
        assert_eq!(status, 200, "{list}");
        let runs = list["runs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| r["state"] == "ended")
            .map(|r| {
                let id = r["id"].as_str().expect("run id").to_string();
                let (status, full) = d.get(&format!("/v1/runs/{id}"));
                assert_eq!(status, 200, "{full}");
                (id, full)
            })
            .collect();
        Committed { runs }
    }

    pub fn len(&self) -> usize {
        self.runs.len()
    }

    pub fn assert_unchanged(&self, d: &Daemon) {
        for (id, before) in &self.runs {
            let (status, now) = d.get(&format!("/v1/runs/{id}"));
            assert_eq!(status, 200, "committed run {id} is gone: {now}");
            assert_eq!(&now, before, "committed run {id} changed");
        }
    }
}

/// No container of any of these runs is left on the engine.
pub async fn assert_no_containers(run_ids: &[&str]) {
    for id in run_ids {
        let left = super::containers_of_run(id).await;
        assert_eq!(left, 0, "{left} container(s) of run {id} left behind");
    }
}

/// The run ended with `outcome` and its error names the cause: every one of
/// `words` appears in it (case-insensitively).
pub fn assert_ended_because(record: &Value, outcome: &str, words: &[&str]) {
    assert_eq!(record["state"], "ended", "{record}");
    assert_eq!(record["outcome"], outcome, "{record}");
    let error = record["error"].as_str().unwrap_or("").to_lowercase();
    for w in words {
        assert!(
            error.contains(&w.to_lowercase()),
            "the run's error does not name {w:?}: {:?}",
            record["error"]
        );
    }
}

/// The contents of a run record's `tool` messages, in order: what the model
/// was told each tool returned.
pub fn tool_contents(record: &Value) -> Vec<String> {
    record["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect()
}
