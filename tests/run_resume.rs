//! Resuming runs (`POST /v1/runs/{id}/resume`, `agentd resume`) through the
//! real daemon over its socket, with real Docker and the scripted fake LLM:
//! after `kill -9` mid-step the resumed run's first request is the one the
//! killed daemon had sent; refusals (finished, live, unknown, resumed
//! already); the CLI with `--steps`, the links in `agentd runs` and `GET`,
//! and `agentd show` as one story with its marker.

use crate::common;

use std::process::Output;
use std::time::{Duration, Instant};

use agentd::testkit::{FakeLlm, Reply};
use common::daemon::Daemon;
use serde_json::Value;

const AGENTS: &str = "\n[agents.shell]\nstrategy = \"toolcall\"\ntools = [\"bash\", \"terminate\"]\nmax_steps = 6\n\n[agents.echoer]\nstrategy = \"toolcall\"\ntools = [\"echo\", \"terminate\"]\nmax_steps = 2\n";

const WAIT: Duration = Duration::from_secs(60);

fn cli(d: &Daemon, args: &[&str]) -> Output {
    d.cli(args)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn resume(d: &Daemon, id: &str, body: &str) -> (u16, Value) {
    d.post(&format!("/v1/runs/{id}/resume"), body)
}

/// Resumes `id` and returns the new run's id. `wait_run` may see the run
/// end while its end is still being flushed: the daemon waits for the
/// flush rather than refusing, so this resumes at once.
fn resumed(d: &Daemon, id: &str, body: &str) -> String {
    let (status, v) = resume(d, id, body);
    assert_eq!(status, 201, "{v}");
    v["id"].as_str().expect("new run id").to_string()
}

fn steps_started(d: &Daemon, id: &str) -> Vec<u64> {
    d.events(id)
        .iter()
        .filter(|e| e["type"] == "step_started")
        .map(|e| e["step"].as_u64().expect("step"))
        .collect()
}

fn messages(v: &Value) -> Vec<Value> {
    v["messages"].as_array().expect("messages").clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn after_kill_9_mid_step_the_resumed_run_sends_the_request_the_killed_one_had_sent() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "count in the shell",
        [
            Reply::call("bash", r#"{"command":"echo one"}"#),
            Reply::call("bash", r#"{"command":"echo two"}"#),
            // Step 3's request is held here when the daemon is killed.
            Reply::Delayed(Duration::from_secs(600), Box::new(Reply::terminate())),
            // What the resumed run's step 3 gets.
            Reply::terminate(),
        ],
    );
    let mut d = tokio::task::block_in_place(|| Daemon::start(&llm, AGENTS));
    let old = tokio::task::block_in_place(|| {
        let old = d.create_run("shell", "count in the shell");
        let deadline = Instant::now() + WAIT;
        while llm.requests().len() < 3 {
            assert!(Instant::now() < deadline, "step 3 never asked the model");
            std::thread::sleep(Duration::from_millis(5));
        }
        // At once: whatever step 2 left unflushed would be lost now.
        d.kill9();
        d.spawn(&[]);
        old
    });
    let held = llm.requests()[2].clone();

    let new = tokio::task::block_in_place(|| {
        let (status, v) = d.get(&format!("/v1/runs/{old}"));
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["outcome"], "interrupted", "{v}");
        let new = resumed(&d, &old, "");
        let record = d.wait_run(&new, WAIT);
        assert_eq!(record["outcome"], "finished", "{record}");
        new
    });
    let requests = llm.requests();
    assert_eq!(requests.len(), 4, "one request of the resumed run");
    let first = &requests[3];
    assert_eq!(first["messages"], held["messages"], "the same conversation");
    assert_eq!(first["tools"], held["tools"], "the same tools");
    assert_eq!(*first, held, "the same request, byte for byte in JSON");
    assert!(llm.rejected().is_empty(), "{:?}", llm.rejected());
    // The step 2 observation made it: the checkpoint was durable.
    let tool_messages = held["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .count();
    assert_eq!(tool_messages, 2, "{held}");

    tokio::task::block_in_place(|| {
        let record = d.wait_run(&new, WAIT);
        assert_eq!(record["resumed_from"], old.as_str(), "{record}");
        assert_eq!(record["resumed_at_step"], 2, "{record}");
        assert_eq!(record["steps"], 3, "its numbering continues");
        assert_eq!(record["max_steps"], 6, "the agent's remaining budget");
        let result = record["result"].as_str().expect("result");
        assert!(result.starts_with("Step 3:"), "{result}");
        assert_eq!(steps_started(&d, &new), [3]);
        let (_, old_record) = d.get(&format!("/v1/runs/{old}"));
        assert_eq!(old_record["resumed_by"], new.as_str(), "{old_record}");
        // The new transcript starts with the old one up to its checkpoint
        // (step 3's prompt, which had been sent, is not carried over).
        let carried = record["resumed_messages"].as_u64().expect("count") as usize;
        let (old_messages, new_messages) = (messages(&old_record), messages(&record));
        assert_eq!(new_messages[..carried], old_messages[..carried]);
        let prompts = |ms: &[Value]| ms.iter().filter(|m| m["role"] == "user").count();
        assert_eq!(
            prompts(&new_messages),
            prompts(&held["messages"].as_array().expect("held")[..]),
            "the request and one prompt per step, none doubled"
        );
    });
    assert_eq!(common::containers_of_run(&old).await, 0);
    assert_eq!(common::containers_of_run(&new).await, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn finished_live_unknown_and_bad_resumes_are_refused_with_stable_codes() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for("be done", [Reply::terminate()]);
    llm.push_for(
        "take your time",
        [Reply::Delayed(
            Duration::from_secs(30),
            Box::new(Reply::terminate()),
        )],
    );
    let d = tokio::task::block_in_place(|| Daemon::start(&llm, AGENTS));
    tokio::task::block_in_place(|| {
        let done = d.create_run("echoer", "be done");
        assert_eq!(d.wait_run(&done, WAIT)["outcome"], "finished");
        let (status, v) = resume(&d, &done, "");
        assert_eq!(status, 409, "{v}");
        assert_eq!(v["error"]["code"], "not_resumable", "{v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .expect("message")
                .contains("finished"),
            "{v}"
        );

        let (status, v) = resume(&d, "no-such-run", "");
        assert_eq!(status, 404, "{v}");
        assert_eq!(v["error"]["code"], "not_found", "{v}");

        let slow = d.create_run("echoer", "take your time");
        d.wait_for_event(&slow, "step_started");
        let (status, v) = resume(&d, &slow, "");
        assert_eq!(status, 409, "{v}");
        assert_eq!(v["error"]["code"], "run_live", "{v}");
        for body in [r#"{"steps": 0}"#, r#"{"stpes": 1}"#, "not json"] {
            let (status, v) = resume(&d, &slow, body);
            assert_eq!(status, 400, "{body}: {v}");
            assert_eq!(v["error"]["code"], "bad_request", "{v}");
        }
        // Cancelled, it can be resumed: from its request, at step 1.
        let (status, _) = d.post(&format!("/v1/runs/{slow}/cancel"), "");
        assert_eq!(status, 202);
        assert_eq!(d.wait_run(&slow, WAIT)["outcome"], "cancelled");
        llm.push_for("take your time", [Reply::terminate()]);
        let again = resumed(&d, &slow, r#"{"steps": 1}"#);
        let record = d.wait_run(&again, WAIT);
        assert_eq!(record["outcome"], "finished", "{record}");
        assert_eq!(record["resumed_at_step"], 0, "{record}");
        assert_eq!(record["max_steps"], 1, "{record}");
        assert_eq!(steps_started(&d, &again), [1]);
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cli_resumes_a_max_steps_run_and_shows_the_links_and_one_story() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "count to four",
        [
            Reply::call("echo", r#"{"text":"one"}"#),
            Reply::call("echo", r#"{"text":"two"}"#),
            Reply::call("echo", r#"{"text":"three"}"#),
            Reply::terminate(),
        ],
    );
    let d = tokio::task::block_in_place(|| Daemon::start(&llm, AGENTS));
    tokio::task::block_in_place(|| {
        let out = cli(&d, &["run", "echoer", "count to four"]);
        assert_eq!(
            out.status.code(),
            Some(3),
            "max_steps: {}",
            text(&out.stderr)
        );
        let (_, list) = d.get("/v1/runs");
        let old = list["runs"][0]["id"].as_str().expect("id").to_string();

        // By the short id `agentd runs` shows, with two more steps.
        let out = cli(&d, &["resume", &old[..12], "--steps", "2"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let stdout = text(&out.stdout);
        assert!(
            stdout.starts_with("Step 3:") && stdout.contains("Step 4:"),
            "{stdout}"
        );
        assert!(
            text(&out.stderr).contains("step 3/4"),
            "{}",
            text(&out.stderr)
        );

        let (_, list) = d.get("/v1/runs");
        let new = list["runs"][0]["id"].as_str().expect("id").to_string();
        assert_eq!(list["runs"][0]["resumed_from"], old.as_str(), "{list}");
        assert_eq!(list["runs"][1]["resumed_by"], new.as_str(), "{list}");
        let (_, record) = d.get(&format!("/v1/runs/{new}"));
        assert_eq!(record["outcome"], "finished", "{record}");
        assert_eq!(record["steps"], 4, "{record}");
        assert_eq!(record["max_steps"], 4, "{record}");
        assert_eq!(record["resumed_at_step"], 2, "{record}");

        let out = cli(&d, &["runs"]);
        assert_eq!(out.status.code(), Some(0));
        let table = text(&out.stdout);
        let row = |id: &str| {
            table
                .lines()
                .find(|l| l.starts_with(&id[..12]))
                .unwrap_or_else(|| panic!("no row for {id}: {table}"))
                .to_string()
        };
        assert!(table.lines().next().expect("header").contains("LINK"));
        assert!(row(&new).contains(&format!("←{}", &old[..12])), "{table}");
        assert!(row(&old).contains(&format!("→{}", &new[..12])), "{table}");

        let out = cli(&d, &["show", &new]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let story = text(&out.stdout);
        let marker = format!("── resumed from {old} after step 2 ──");
        let at = story.find(&marker).unwrap_or_else(|| panic!("{story}"));
        let (before, after) = story.split_at(at);
        assert!(
            before.contains("one") && before.contains("two") && !before.contains("three"),
            "the old run's steps come before the marker: {story}"
        );
        assert!(after.contains("three"), "{story}");
        assert!(
            story.contains(&format!("resumes  {old} after step 2")),
            "{story}"
        );
        let out = cli(&d, &["show", &old]);
        assert!(text(&out.stdout).contains(&format!("resumed  by {new}")));
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_is_resumed_once_and_the_run_that_resumed_it_can_be_resumed_in_turn() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "keep going",
        [
            Reply::call("echo", r#"{"text":"a"}"#),
            Reply::call("echo", r#"{"text":"b"}"#),
            Reply::call("echo", r#"{"text":"c"}"#),
            Reply::terminate(),
        ],
    );
    let d = tokio::task::block_in_place(|| Daemon::start(&llm, AGENTS));
    tokio::task::block_in_place(|| {
        let first = d.create_run("echoer", "keep going");
        assert_eq!(d.wait_run(&first, WAIT)["outcome"], "max_steps");
        let second = resumed(&d, &first, r#"{"steps": 1}"#);
        let record = d.wait_run(&second, WAIT);
        assert_eq!(record["outcome"], "max_steps", "{record}");
        assert_eq!(record["steps"], 3);

        let (status, v) = resume(&d, &first, "");
        assert_eq!(status, 409, "{v}");
        assert_eq!(v["error"]["code"], "already_resumed", "{v}");
        let message = v["error"]["message"].as_str().expect("message");
        assert!(message.contains(&second), "it names the run: {message}");

        // The resumed run is self-contained: it resumes like any run.
        let third = resumed(&d, &second, "");
        let record = d.wait_run(&third, WAIT);
        assert_eq!(record["outcome"], "finished", "{record}");
        assert_eq!(record["resumed_from"], second.as_str());
        assert_eq!(record["resumed_at_step"], 3);
        assert_eq!(steps_started(&d, &third), [4]);
        let (_, first_record) = d.get(&format!("/v1/runs/{first}"));
        let carried = messages(&first_record);
        assert_eq!(messages(&record)[..carried.len()], carried[..]);
        let (status, v) = resume(&d, &first, "");
        assert_eq!(
            (status, v["error"]["code"].clone()),
            (409, "already_resumed".into())
        );
    });
    assert!(llm.rejected().is_empty(), "{:?}", llm.rejected());
}

/// The agent layer alone (no daemon): a run started from a prior
/// transcript and step count sends, for its first step, the request the
/// original run sent for that step, with a window of 5 that has already
/// trimmed the transcript (an orphan `tool` message dropped at its head)
/// and the stuck warning the last step earned.
#[tokio::test]
async fn a_prior_gives_the_window_and_the_stuck_warning_the_original_had() {
    use std::sync::{Arc, Mutex};

    use agentd::agent::{Checkpoint, Outcome, Prior, RunOptions};
    use agentd::chat::{Kept, Message};

    let h = common::Harness::new().await;
    let mut config = common::toolcall_agent(5);
    config.max_messages = 5;
    config.duplicate_threshold = 1;
    let same = Reply::call("echo", r#"{"text":"again"}"#);
    h.llm.push_all([
        same.clone(),
        same.clone(),
        same,
        Reply::text("a thought"),
        Reply::terminate(),
    ]);
    let transcript = Arc::new(Mutex::new(Vec::<Message>::new()));
    let checkpoints = Arc::new(Mutex::new(Vec::<Checkpoint>::new()));
    let (t, c) = (transcript.clone(), checkpoints.clone());
    let original = h
        .agent(config.clone())
        .run(
            "repeat yourself",
            RunOptions {
                messages: Some(Arc::new(move |m: &Arc<Kept>| {
                    t.lock().expect("transcript").push((***m).clone())
                })),
                checkpoint: Some(Arc::new(move |cp: Checkpoint| {
                    c.lock().expect("checkpoints").push(cp);
                    Box::pin(async {})
                })),
                ..RunOptions::default()
            },
        )
        .await
        .expect("run");
    assert_eq!(original.outcome, Outcome::Finished, "{original:?}");
    let checkpoints = checkpoints.lock().expect("checkpoints").clone();
    assert_eq!(
        checkpoints.iter().map(|c| c.steps).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5]
    );
    let after_3 = checkpoints[2];
    assert!(after_3.stuck_warning, "step 3 repeated step 2");
    let requests = h.llm.requests();
    assert_eq!(requests.len(), 5);

    h.llm
        .push_all([Reply::text("a thought"), Reply::terminate()]);
    let transcript = transcript.lock().expect("transcript").clone();
    let resumed = h
        .agent(config)
        .run(
            "repeat yourself",
            RunOptions {
                prior: Some(Prior {
                    messages: transcript[..after_3.messages as usize].to_vec(),
                    steps: 3,
                    stuck_warning: after_3.stuck_warning,
                    more_steps: None,
                    plan: None,
                }),
                ..RunOptions::default()
            },
        )
        .await
        .expect("run");
    assert_eq!(resumed.outcome, Outcome::Finished, "{resumed:?}");
    assert_eq!(resumed.steps, 5);
    assert!(
        resumed.result.starts_with("Step 4: a thought"),
        "{resumed:?}"
    );
    let again = h.llm.requests();
    assert_eq!(again[5], requests[3], "step 4's request");
    let sent = again[5]["messages"].as_array().expect("messages").len();
    assert!(
        sent < after_3.messages as usize + 2,
        "the window was trimmed: {sent} messages sent of {} plus the prompts",
        after_3.messages
    );
    assert_eq!(again[6], requests[4], "step 5's request");
    assert!(
        again[5]["messages"]
            .to_string()
            .contains("Observed duplicate responses"),
        "the warning is carried: {}",
        again[5]
    );
}

/// An agent on `misbehave`'s `plan-story` (contract 0.2.3's `plan`):
/// steps 1 and 2 change the plan, 3 republishes it, 4 is refused a
/// 101-step plan; a run resumed after step 4 reads `current()` in step 5.
const PLAN_AGENT: &str = "\n[agents.planner]\nstrategy = \"misbehave\"\ntools = []\nsystem_prompt = \"plan-story\"\nmax_steps = 4\n";

fn plan_changes(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["type"] == "plan_changed")
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_plan_is_in_the_events_the_record_and_show_across_a_restart_and_a_resume() {
    let llm = FakeLlm::start().await.expect("fake llm");
    let mut d = tokio::task::block_in_place(|| Daemon::start(&llm, PLAN_AGENT));
    tokio::task::block_in_place(|| {
        let last = serde_json::json!({
            "title": "Greet the user",
            "steps": [
                {"text": "say hi", "status": "completed", "notes": "said hi"},
                {"text": "say bye", "status": "not_started", "notes": null},
            ],
        });
        // `agentd run` prints each change as it happens.
        let out = cli(&d, &["run", "planner", "greet me"]);
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains("  plan:\n    Greet the user\n      [ ] say hi\n      [ ] say bye\n")
                && stderr.contains(
                    "  plan:\n    Greet the user\n      [x] say hi — said hi\n      [ ] say bye\n"
                ),
            "{stderr}"
        );
        assert_eq!(stderr.matches("  plan:\n").count(), 2, "{stderr}");

        let id = d.create_run("planner", "greet me");
        let record = d.wait_run(&id, WAIT);
        assert_eq!(record["outcome"], "max_steps", "{record}");
        assert_eq!(record["plan"], last, "{record}");
        // The list rows stay small: no plan there.
        let (_, list) = d.get("/v1/runs?limit=1");
        assert!(list["runs"][0].get("plan").is_none(), "{list}");
        let changes = plan_changes(&d.events(&id));
        assert_eq!(changes.len(), 2, "{changes:?}");
        assert_eq!(changes[0]["step"], 1);
        assert_eq!(changes[0]["plan"]["steps"][0]["status"], "not_started");
        assert_eq!(changes[0]["plan"]["steps"][0]["notes"], Value::Null);
        assert_eq!(
            (&changes[1]["step"], &changes[1]["plan"]),
            (&2.into(), &last)
        );
        let result = record["result"].as_str().expect("result");
        assert!(
            result.contains("Step 4: refused: strategy `misbehave` published a plan that was refused: the plan has 101 steps, more than the 100 a plan may have"),
            "{result}"
        );

        // `agentd show`: each change in the story, then the plan.
        let show = |d: &Daemon, id: &str| text(&cli(d, &["show", id]).stdout);
        let shown = show(&d, &id);
        assert!(
            shown.contains(
                "\n[plan changed at step 1]\nGreet the user\n  [ ] say hi\n  [ ] say bye\n\
                 \n[plan changed at step 2]\nGreet the user\n  [x] say hi — said hi\n  [ ] say bye\n\
                 \n[plan]\nGreet the user\n  [x] say hi — said hi\n  [ ] say bye\n\n[result]\n"
            ),
            "{shown}"
        );

        // A restart: the plan and its events come from the history.
        assert_eq!(d.stop(), Some(0));
        d.spawn(&[]);
        let (status, after) = d.get(&format!("/v1/runs/{id}"));
        assert_eq!(status, 200, "{after}");
        assert_eq!(after["plan"], last, "{after}");
        assert_eq!(plan_changes(&d.events(&id)).len(), 2);
        assert_eq!(show(&d, &id), shown);

        // Resumed: `current()` is the predecessor's plan, and the new run's
        // own story and record start from it.
        let new = resumed(&d, &id, "");
        let record = d.wait_run(&new, WAIT);
        assert_eq!(record["outcome"], "finished", "{record}");
        assert_eq!(
            record["result"],
            "Step 5: current plan: Greet the user: say hi (completed: said hi), say bye (not_started)"
        );
        assert_eq!(record["plan"], last, "{record}");
        let changes = plan_changes(&d.events(&new));
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert_eq!(
            (&changes[0]["step"], &changes[0]["plan"]),
            (&4.into(), &last)
        );
    });
}

/// A resumed run cancelled while it waited for a slot never ran, yet its
/// record has the plan it carried, and a resume of it carries it on.
#[tokio::test(flavor = "multi_thread")]
async fn a_resumed_run_cancelled_in_the_queue_keeps_the_plan_it_carried() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "hold the slot",
        [Reply::Delayed(
            Duration::from_secs(60),
            Box::new(Reply::terminate()),
        )],
    );
    let extra = format!("max_concurrent_runs = 1\n{PLAN_AGENT}{AGENTS}");
    let d = tokio::task::block_in_place(|| Daemon::start(&llm, &extra));
    tokio::task::block_in_place(|| {
        let first = d.create_run("planner", "greet me");
        assert_eq!(d.wait_run(&first, WAIT)["outcome"], "max_steps");
        let last = d.get(&format!("/v1/runs/{first}")).1["plan"].clone();
        assert!(last.is_object(), "{last}");
        let blocker = d.create_run("echoer", "hold the slot");
        d.wait_for_event(&blocker, "step_started");
        let queued = resumed(&d, &first, "");
        let (_, v) = d.get(&format!("/v1/runs/{queued}"));
        assert_eq!(v["state"], "queued", "{v}");
        assert_eq!(v["plan"], last, "a queued resumed run shows its plan: {v}");
        let (status, _) = d.post(&format!("/v1/runs/{queued}/cancel"), "");
        assert_eq!(status, 202);
        let record = d.wait_run(&queued, WAIT);
        assert_eq!(record["outcome"], "cancelled", "{record}");
        assert_eq!(record["plan"], last, "{record}");
        let changes = plan_changes(&d.events(&queued));
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert_eq!(changes[0]["step"], 4);
        let (status, _) = d.post(&format!("/v1/runs/{blocker}/cancel"), "");
        assert_eq!(status, 202);
        d.wait_run(&blocker, WAIT);
        // And on: resumed again, step 5 reads the plan back.
        let again = resumed(&d, &queued, "");
        let record = d.wait_run(&again, WAIT);
        assert_eq!(
            record["result"],
            "Step 5: current plan: Greet the user: say hi (completed: said hi), say bye (not_started)"
        );
    });
}
