//! Budgets and cost through a real daemon: a run's tokens and its cost at
//! the configured prices (in its record, `agentd show` and `agentd runs`,
//! and kept when the prices change later); the daily token budgets, which
//! refuse a run past them with `429 budget_exhausted`, end a run that
//! crosses them `token_limit` at its next LLM request, and survive a
//! restart.

use crate::common;

use std::time::Duration;

use agentd::testkit::{FakeLlm, Reply};
use common::daemon::Daemon;
use serde_json::Value;

/// Completion tokens the fake reports on every answer.
const FAKE_COMPLETION_TOKENS: u64 = 5;

fn agent(name: &str, extra: &str) -> String {
    format!(
        "\n[agents.{name}]\nstrategy = \"toolcall\"\ntools = [\"echo\", \"terminate\"]\nmax_steps = 10\n{extra}\n"
    )
}

async fn daemon(extra: &str) -> (FakeLlm, Daemon) {
    let llm = FakeLlm::start().await.expect("fake llm");
    let d = tokio::task::block_in_place(|| Daemon::start(&llm, extra));
    (llm, d)
}

fn echoes(n: usize) -> Vec<Reply> {
    let mut replies: Vec<Reply> = (0..n)
        .map(|i| Reply::call("echo", &format!(r#"{{"text":"echo {i}"}}"#)))
        .collect();
    replies.push(Reply::terminate());
    replies
}

fn usage_total(record: &Value) -> u64 {
    record["usage"]["prompt_tokens"]
        .as_u64()
        .expect("prompt tokens")
        + record["usage"]["completion_tokens"]
            .as_u64()
            .expect("completion tokens")
}

/// LLM requests a run makes, `per_request` tokens each, starting at
/// `used` tokens today, before a budget of `budget` refuses the next.
fn requests_until(mut used: u64, budget: u64, per_request: u64) -> u64 {
    let mut requests = 0;
    while used < budget {
        used += per_request;
        requests += 1;
    }
    requests
}

fn stdout(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Starts a run of `agent` and expects it refused by a daily budget:
/// returns the error's message.
fn refused(d: &Daemon, agent: &str) -> String {
    let body = serde_json::json!({"agent": agent, "request": "one more"}).to_string();
    let (status, v) = d.post("/v1/runs", &body);
    assert_eq!(status, 429, "{v}");
    assert_eq!(v["error"]["code"], "budget_exhausted", "{v}");
    v["error"]["message"].as_str().expect("message").to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_carries_its_tokens_and_its_cost_which_later_prices_do_not_change() {
    // Each price from its most specific place: the agent's own input
    // price, the model's table for output, `[llm]`'s only where neither is.
    let prices = "\n[llm.prices.\"fake\"]\noutput_price = 12.0\n";
    let extra = format!(
        "{prices}{}",
        agent("priced", "[agents.priced.llm]\ninput_price = 3.0\n")
    );
    let llm = FakeLlm::start().await.expect("fake llm");
    let prompt_tokens = 1_000;
    llm.set_prompt_tokens(prompt_tokens);
    llm.push_for("count the cost", echoes(1));
    tokio::task::block_in_place(|| {
        let mut d = Daemon::unstarted(&llm, &extra);
        // `[llm]`'s own prices go in the table the test configuration
        // starts with; both are overridden for this agent.
        let config = std::fs::read_to_string(&d.config).expect("config");
        let config = config.replacen(
            "[llm]\n",
            "[llm]\ninput_price = 100.0\noutput_price = 100.0\n",
            1,
        );
        std::fs::write(&d.config, &config).expect("write config");
        d.spawn(&[]);

        let id = d.create_run("priced", "count the cost");
        let record = d.wait_run(&id, Duration::from_secs(30));
        assert_eq!(record["outcome"], "finished", "{record}");
        let requests = llm.requests().len() as u64;
        assert_eq!(requests, 2, "an echo, then terminate");
        let (prompt, completion) = (prompt_tokens * requests, FAKE_COMPLETION_TOKENS * requests);
        assert_eq!(record["usage"]["prompt_tokens"], prompt, "{record}");
        assert_eq!(record["usage"]["completion_tokens"], completion, "{record}");
        let expected = (prompt as f64 * 3.0 + completion as f64 * 12.0) / 1e6;
        let cost = record["cost"].as_f64().expect("a cost");
        assert!((cost - expected).abs() < 1e-12, "{cost} != {expected}");

        let shown = stdout(&d.cli(&["show", &id]));
        assert!(
            shown.contains(&format!("{prompt} prompt, {completion} completion")),
            "{shown}"
        );
        assert!(
            shown.contains(&format!("cost     {expected:.6}\n")),
            "{shown}"
        );
        let listed = stdout(&d.cli(&["runs"]));
        let header = listed.lines().next().expect("header");
        assert!(
            header.contains("TOKENS") && header.contains("COST"),
            "{listed}"
        );
        let row = listed
            .lines()
            .find(|l| id.starts_with(l.split_whitespace().next().unwrap_or("-")))
            .expect("the run's row");
        assert!(row.contains(&format!(" {} ", prompt + completion)), "{row}");
        assert!(row.contains(&format!(" {expected:.6} ")), "{row}");

        // Prices change and the daemon restarts: the run read back from
        // the history costs what it cost.
        std::fs::write(
            &d.config,
            config.replace("output_price = 12.0", "output_price = 99.0"),
        )
        .expect("write config");
        d.stop();
        d.spawn(&[]);
        let (status, again) = d.get(&format!("/v1/runs/{id}"));
        assert_eq!(status, 200, "{again}");
        assert_eq!(again["cost"].as_f64(), Some(cost), "{again}");
        assert_eq!(again["usage"], record["usage"], "{again}");
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn daily_budgets_end_a_crossing_run_refuse_new_ones_and_survive_a_restart() {
    let extra = format!(
        "daily_token_budget = 3000\n{}{}",
        agent("capped", "daily_token_budget = 1000"),
        agent("other", "")
    );
    let (llm, mut d) = daemon(&extra).await;
    let prompt_tokens = 600;
    let per_request = prompt_tokens + FAKE_COMPLETION_TOKENS;
    llm.set_prompt_tokens(prompt_tokens);
    llm.push_for("use a lot", echoes(5));
    llm.push_for("use the rest", echoes(8));
    tokio::task::block_in_place(|| {
        // Requests go while today's use is under 1000; the next is refused
        // and the run ends `token_limit`, with replies left unused.
        let id = d.create_run("capped", "use a lot");
        let record = d.wait_run(&id, Duration::from_secs(30));
        assert_eq!(record["outcome"], "token_limit", "{record}");
        let made = llm.requests().len() as u64;
        assert_eq!(made, requests_until(0, 1000, per_request));
        assert!(made < 6, "fewer requests than the 6 scripted: {made}");
        let capped_used = usage_total(&record);
        assert_eq!(capped_used, made * per_request);
        assert_eq!(record["cost"], Value::Null, "no price configured: {record}");
        let ended = d.events_so_far(&id);
        let last = ended.last().expect("events");
        assert_eq!(last["outcome"], "token_limit", "{last}");

        // Past the agent's budget: refused before it starts, naming it.
        let message = refused(&d, "capped");
        for part in [
            "agent `capped`",
            "daily_token_budget = 1000",
            &format!("{capped_used} tokens used today"),
            "resets at",
        ] {
            assert!(message.contains(part), "`{part}` not in: {message}");
        }

        // Another agent has no budget of its own, but all runs share the
        // daemon's, which its requests cross.
        let before = llm.requests().len();
        let id = d.create_run("other", "use the rest");
        let record = d.wait_run(&id, Duration::from_secs(30));
        assert_eq!(record["outcome"], "token_limit", "{record}");
        let other_requests = (llm.requests().len() - before) as u64;
        let budget = 3000;
        assert_eq!(
            other_requests,
            requests_until(capped_used, budget, per_request),
            "requests until the total passed {budget}"
        );
        assert!(other_requests < 9, "fewer than the 9 scripted");
        let total = capped_used + usage_total(&record);
        let message = refused(&d, "other");
        assert!(
            message.contains("[daemon] daily_token_budget = 3000")
                && message.contains(&format!("{total} tokens used today")),
            "{message}"
        );

        let (status, s) = d.get("/v1/status");
        assert_eq!(status, 200, "{s}");
        assert_eq!(s["token_budgets"]["used_today"], total, "{s}");
        assert_eq!(s["token_budgets"]["daemon"]["budget"], 3000, "{s}");
        assert_eq!(s["token_budgets"]["agents"][0]["agent"], "capped", "{s}");
        assert_eq!(s["token_budgets"]["agents"][0]["used"], capped_used, "{s}");

        // A restart counts today's use from the history: still refused.
        d.stop();
        d.spawn(&[]);
        let message = refused(&d, "capped");
        assert!(
            message.contains(&format!("{capped_used} tokens used today")),
            "{message}"
        );
        let message = refused(&d, "other");
        assert!(
            message.contains(&format!("{total} tokens used today")),
            "{message}"
        );
        let status = stdout(&d.cli(&["status"]));
        assert!(
            status.contains(&format!(
                "{total} today (UTC); budgets: daemon {total}/3000, capped {capped_used}/1000"
            )),
            "{status}"
        );
    });
}

/// The history's view of `run_id`'s row: `(prompt_tokens, ended_at_ms)`.
fn history_row(d: &Daemon, run_id: &str) -> (i64, Option<i64>) {
    let db = rusqlite::Connection::open(d.state_dir.join("history.db")).expect("open history");
    db.query_row(
        "SELECT prompt_tokens, ended_at_ms FROM runs WHERE id = ?1",
        [run_id],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
    .expect("the run's row")
}

/// A daemon killed while tools run: the tokens of the step under way are
/// in the history already (saved with the model's answer, not at the next
/// step), so the restarted daemon counts them; and a run the dead daemon
/// left unfinished since the day before yesterday ends at its last sign of
/// life, not at the restart, so its tokens are not today's.
#[tokio::test(flavor = "multi_thread")]
async fn a_crash_keeps_the_step_under_ways_tokens_and_charges_orphans_to_their_day() {
    let shell = "\n[agents.shell]\nstrategy = \"toolcall\"\ntools = [\"bash\", \"terminate\"]\nmax_steps = 5\n";
    let (llm, mut d) = daemon(&format!("daily_token_budget = 100000\n{shell}")).await;
    let prompt_tokens = 700;
    let per_request = prompt_tokens + FAKE_COMPLETION_TOKENS;
    llm.set_prompt_tokens(prompt_tokens);
    for request in ["today", "long ago"] {
        llm.push_for(request, [Reply::call("bash", r#"{"command":"sleep 600"}"#)]);
    }
    tokio::task::block_in_place(|| {
        let today = d.create_run("shell", "today");
        let long_ago = d.create_run("shell", "long ago");
        for id in [&today, &long_ago] {
            d.wait_for_event(id, "tool_call");
            // The tool sleeps: no step starts and the run does not end, so
            // only the answer's own save can have put its tokens here.
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while history_row(&d, id).0 != prompt_tokens as i64 {
                assert!(
                    std::time::Instant::now() < deadline,
                    "run {id}: the answer's tokens never reached the history: {:?}",
                    history_row(&d, id)
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        d.kill9();

        // The second run was left by a daemon that died two days ago.
        const TWO_DAYS_MS: i64 = 2 * 24 * 3600 * 1000;
        let db = rusqlite::Connection::open(d.state_dir.join("history.db")).expect("open");
        db.execute(
            "UPDATE runs SET created_at_ms = created_at_ms - ?2,
                 started_at_ms = started_at_ms - ?2 WHERE id = ?1",
            rusqlite::params![long_ago, TWO_DAYS_MS],
        )
        .expect("age the run");
        db.execute(
            "UPDATE events SET at_ms = at_ms - ?2 WHERE run_id = ?1",
            rusqlite::params![long_ago, TWO_DAYS_MS],
        )
        .expect("age its events");
        let last_sign_of_life: i64 = db
            .query_row(
                "SELECT MAX(at_ms) FROM events WHERE run_id = ?1",
                [&long_ago],
                |row| row.get(0),
            )
            .expect("its last event");
        drop(db);

        d.spawn(&[]);
        let (status, s) = d.get("/v1/status");
        assert_eq!(status, 200, "{s}");
        assert_eq!(
            s["token_budgets"]["used_today"], per_request,
            "today's run only, its one answer counted: {s}"
        );
        let record = d.wait_run(&long_ago, Duration::from_secs(10));
        assert_eq!(record["outcome"], "interrupted", "{record}");
        assert_eq!(
            history_row(&d, &long_ago),
            (prompt_tokens as i64, Some(last_sign_of_life)),
            "ended at its last event"
        );
        let record = d.wait_run(&today, Duration::from_secs(10));
        assert_eq!(record["outcome"], "interrupted", "{record}");
        assert_eq!(usage_total(&record), per_request, "{record}");
    });
}
