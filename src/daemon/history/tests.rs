use std::time::Instant;

use super::*;
use crate::agent::{Outcome, RunEvent};
use crate::api::RunState;
use crate::chat::Usage;
use crate::chat::{Message, ToolCall};

fn summary(id: &str, seq: i64, state: RunState) -> RunSummary {
    let ended = state == RunState::Ended;
    RunSummary {
        id: id.to_string(),
        seq,
        agent: "coder".to_string(),
        request: format!("request of {id}"),
        request_truncated: false,
        result_truncated: false,
        state,
        waiting: None,
        outcome: ended.then_some(Outcome::Finished),
        steps: 2,
        max_steps: Some(10),
        result: ended.then(|| "Step 1: a\nStep 2: b".to_string()),
        error: None,
        usage: Usage {
            prompt_tokens: 120,
            completion_tokens: 30,
        },
        cost: ended.then_some(0.0125),
        created_at_ms: 1_000 + seq,
        started_at_ms: Some(1_100 + seq),
        ended_at_ms: ended.then_some(2_000 + seq),
        resume: Default::default(),
    }
}

fn line(seq: u64, event: RunEvent) -> EventLine {
    EventLine {
        seq,
        at_ms: 5_000 + seq as i64,
        event,
    }
}

fn step_started(seq: u64) -> EventLine {
    line(
        seq,
        RunEvent::StepStarted {
            step: seq as u32,
            max_steps: 10,
        },
    )
}

fn open(dir: &tempfile::TempDir) -> History {
    History::open(&dir.path().join("state")).expect("open history")
}

#[tokio::test]
async fn roundtrip_of_a_run_with_messages_and_events() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(&dir);
    assert_eq!(h.path(), dir.path().join("state").join("history.db"));
    let mut run = summary("r1", h.next_seq(), RunState::Running);
    run.outcome = None;
    h.create_run(&run);
    let messages = vec![
        Message::system("be brief"),
        Message::user("list files"),
        Message::assistant_with_calls(
            None,
            vec![ToolCall {
                id: "call_1".into(),
                name: "bash".into(),
                arguments: "{\"cmd\":\"ls\"}".into(),
            }],
        ),
        Message::tool("a.txt", "call_1", "bash"),
    ];
    // Appended out of order: the transcript comes back ordered by index.
    for i in [2usize, 0, 3, 1] {
        h.append_message("r1", i as u32, &messages[i]);
    }
    let events = vec![
        step_started(1),
        line(
            2,
            RunEvent::ToolResult {
                step: 1,
                id: "call_1".into(),
                name: "bash".into(),
                ok: true,
                output: "a.txt".into(),
            },
        ),
        line(
            3,
            RunEvent::RunEnded {
                outcome: Outcome::Finished,
                steps: 1,
                error: None,
            },
        ),
    ];
    for e in &events {
        h.append_event("r1", e);
    }
    let ended = RunSummary {
        state: RunState::Ended,
        waiting: None,
        outcome: Some(Outcome::TokenLimit),
        result: Some("Step 1: done".into()),
        error: Some("budget".into()),
        ended_at_ms: Some(9_999),
        usage: Usage {
            prompt_tokens: u64::MAX,
            completion_tokens: 7,
        },
        ..run.clone()
    };
    h.save_run(&ended);
    h.flush().await.unwrap();

    let view = h.get("r1").await.unwrap().expect("stored");
    let expected_usage = Usage {
        prompt_tokens: i64::MAX as u64,
        completion_tokens: 7,
    };
    assert_eq!(
        view.summary,
        RunSummary {
            usage: expected_usage,
            ..ended
        }
    );
    assert_eq!(view.messages, messages);
    assert_eq!(h.events("r1", 0).await.unwrap(), events);
    assert_eq!(h.events("r1", 2).await.unwrap(), events[2..].to_vec());
    assert!(h.events("r1", u64::MAX).await.unwrap().is_empty());
    assert!(h.get("nope").await.unwrap().is_none());
    assert!(h.events("nope", 0).await.unwrap().is_empty());
    assert_eq!(h.write_errors(), 0);
}

#[tokio::test]
async fn every_outcome_and_state_survives_storage() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(&dir);
    let outcomes = [
        Outcome::Finished,
        Outcome::MaxSteps,
        Outcome::Error,
        Outcome::Cancelled,
        Outcome::TokenLimit,
        Outcome::Interrupted,
    ];
    for (i, outcome) in outcomes.into_iter().enumerate() {
        assert_eq!(read::parse_outcome(outcome.as_str()), Some(outcome));
        let mut run = summary(&format!("o{i}"), h.next_seq(), RunState::Ended);
        run.outcome = Some(outcome);
        h.create_run(&run);
    }
    for (i, state) in [RunState::Queued, RunState::Running]
        .into_iter()
        .enumerate()
    {
        let mut run = summary(&format!("s{i}"), h.next_seq(), state);
        run.max_steps = None;
        run.started_at_ms = None;
        h.create_run(&run);
    }
    h.flush().await.unwrap();
    for (i, outcome) in outcomes.into_iter().enumerate() {
        let got = h.get(&format!("o{i}")).await.unwrap().unwrap();
        assert_eq!(got.summary.outcome, Some(outcome));
    }
    let queued = h.get("s0").await.unwrap().unwrap().summary;
    assert_eq!(
        (queued.state, queued.max_steps, queued.started_at_ms),
        (RunState::Queued, None, None)
    );
    assert_eq!(
        h.get("s1").await.unwrap().unwrap().summary.state,
        RunState::Running
    );
}

#[tokio::test]
async fn list_pages_newest_first_with_next_before() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(&dir);
    for i in 0..5 {
        h.create_run(&summary(&format!("r{i}"), h.next_seq(), RunState::Ended));
    }
    h.flush().await.unwrap();

    let page = h.list(2, None).await.unwrap();
    let ids: Vec<_> = page.runs.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["r4", "r3"]);
    assert_eq!(page.next_before, Some(4));

    let page = h.list(2, page.next_before).await.unwrap();
    let ids: Vec<_> = page.runs.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["r2", "r1"]);
    assert_eq!(page.next_before, Some(2));

    let page = h.list(2, page.next_before).await.unwrap();
    let ids: Vec<_> = page.runs.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["r0"]);
    assert_eq!(page.next_before, None);

    // Exactly a full last page: no further page announced.
    let page = h.list(5, None).await.unwrap();
    assert_eq!((page.runs.len(), page.next_before), (5, None));
    // A limit of 0 is clamped to 1, not an empty page.
    let page = h.list(0, None).await.unwrap();
    assert_eq!((page.runs.len(), page.next_before), (1, Some(5)));
    // Clamped to 1000 rather than refused.
    assert_eq!(h.list(u32::MAX, None).await.unwrap().runs.len(), 5);
}

#[tokio::test]
async fn reopen_keeps_everything_and_seq_continues() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(&dir);
    assert_eq!(h.next_seq(), 1);
    let seq = h.next_seq();
    assert_eq!(seq, 2);
    h.create_run(&summary("kept", seq, RunState::Ended));
    h.append_message("kept", 0, &Message::user("hi"));
    h.append_event("kept", &step_started(1));
    // A seq chosen elsewhere is never handed out again.
    h.create_run(&summary("far", 40, RunState::Ended));
    assert_eq!(h.next_seq(), 41);
    // No flush: dropping the last handle must commit what is queued.
    drop(h.clone());
    drop(h);

    let h = open(&dir);
    assert_eq!(h.next_seq(), 41);
    let view = h.get("kept").await.unwrap().unwrap();
    assert_eq!(view.summary, summary("kept", 2, RunState::Ended));
    assert_eq!(view.messages, vec![Message::user("hi")]);
    assert_eq!(h.events("kept", 0).await.unwrap(), vec![step_started(1)]);
}

#[tokio::test]
async fn interrupt_unfinished_ends_queued_and_running_runs_only() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(&dir);
    h.create_run(&summary("queued", 1, RunState::Queued));
    let mut running = summary("running", 2, RunState::Running);
    running.steps = 3;
    h.create_run(&running);
    h.append_event("running", &step_started(1));
    h.append_event("running", &step_started(2));
    let done = summary("done", 3, RunState::Ended);
    h.create_run(&done);
    h.append_event("done", &step_started(1));
    // Queued, not flushed: interrupt runs behind these writes.
    h.interrupt_unfinished(77_000).await.unwrap();

    let r = h.get("running").await.unwrap().unwrap().summary;
    assert_eq!(r.state, RunState::Ended);
    assert_eq!(r.outcome, Some(Outcome::Interrupted));
    assert_eq!(r.error.as_deref(), Some(writer::INTERRUPTED_ERROR));
    // Ended when the dead daemon last moved it: its last event (at 5002),
    // not the restart (77000).
    assert_eq!(r.ended_at_ms, Some(5_002));
    assert_eq!(r.steps, 3);
    let ended_event = |steps| RunEvent::RunEnded {
        outcome: Outcome::Interrupted,
        steps,
        error: Some(writer::INTERRUPTED_ERROR.to_string()),
    };
    let events = h.events("running", 2).await.unwrap();
    assert_eq!(
        events,
        vec![EventLine {
            seq: 3,
            at_ms: 5_002,
            event: ended_event(3)
        }]
    );
    // A run with no events gets seq 1.
    let q = h.events("queued", 0).await.unwrap();
    assert_eq!(q.len(), 1);
    assert_eq!((q[0].seq, &q[0].event), (1, &ended_event(2)));
    let queued = h.get("queued").await.unwrap().unwrap().summary;
    assert_eq!(queued.outcome, Some(Outcome::Interrupted));
    // No event: it ended at its start (1101), the latest it was seen.
    assert_eq!(queued.ended_at_ms, Some(1_101));
    assert_eq!(q[0].at_ms, 1_101);

    // Ended runs are untouched.
    assert_eq!(h.get("done").await.unwrap().unwrap().summary, done);
    assert_eq!(h.events("done", 0).await.unwrap().len(), 1);
    // Nothing left to interrupt: a second pass adds no event.
    h.interrupt_unfinished(78_000).await.unwrap();
    assert_eq!(h.events("running", 0).await.unwrap().len(), 3);
    assert_eq!(h.events("queued", 0).await.unwrap().len(), 1);
    assert_eq!(h.write_errors(), 0);
}

#[tokio::test]
async fn prune_deletes_old_ended_runs_with_their_rows() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(&dir);
    // ended_at_ms = 2000 + seq
    for (id, seq, state) in [
        ("old1", 1, RunState::Ended),
        ("old2", 2, RunState::Ended),
        ("new", 10, RunState::Ended),
        ("live", 3, RunState::Running),
    ] {
        let mut run = summary(id, seq, state);
        if state == RunState::Running {
            run.ended_at_ms = Some(0); // only ended runs may go, whatever the column says
        }
        h.create_run(&run);
        h.append_event(id, &step_started(1));
        h.append_message(id, 0, &Message::user("x"));
    }
    assert_eq!(h.prune(2_005).await.unwrap(), 2);
    assert!(h.get("old1").await.unwrap().is_none());
    assert!(h.get("old2").await.unwrap().is_none());
    assert!(h.get("new").await.unwrap().is_some());
    assert!(h.get("live").await.unwrap().is_some());
    assert!(h.events("old1", 0).await.unwrap().is_empty());
    // The cascade removed their events and messages.
    let conn = rusqlite::Connection::open(h.path()).unwrap();
    let count = |table: &str| -> i64 {
        conn.query_row(
            &format!("SELECT COUNT(*) FROM {table} WHERE run_id LIKE 'old%'"),
            [],
            |r| r.get(0),
        )
        .unwrap()
    };
    assert_eq!((count("events"), count("messages")), (0, 0));
    assert_eq!(h.prune(2_005).await.unwrap(), 0);
}

#[test]
fn a_file_that_is_not_a_database_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("history.db");
    let content = "this is not a database, it is someone's notes\n".repeat(100);
    std::fs::write(&file, &content).unwrap();
    let err = History::open(dir.path()).expect_err("must refuse");
    assert!(matches!(err, HistoryError::NotADatabase { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains(&file.display().to_string()), "{message}");
    assert!(message.contains("not an SQLite database"), "{message}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), content);
    assert!(!dir.path().join("history.db-wal").exists());
}

#[test]
fn another_programs_database_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("history.db");
    {
        let conn = rusqlite::Connection::open(&file).unwrap();
        conn.execute_batch("CREATE TABLE notes (body TEXT)")
            .unwrap();
    }
    let before = std::fs::read(&file).unwrap();
    let err = History::open(dir.path()).expect_err("must refuse");
    assert!(matches!(err, HistoryError::Foreign { .. }), "{err:?}");
    assert_eq!(std::fs::read(&file).unwrap(), before);
}

#[test]
fn a_newer_schema_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    drop(History::open(dir.path()).unwrap());
    let file = dir.path().join("history.db");
    {
        let conn = rusqlite::Connection::open(&file).unwrap();
        conn.pragma_update(None, "user_version", schema::SCHEMA_VERSION + 1)
            .unwrap();
    }
    let before = std::fs::read(&file).unwrap();
    let err = History::open(dir.path()).expect_err("must refuse");
    match &err {
        HistoryError::TooNew {
            found, supported, ..
        } => assert_eq!(
            (*found, *supported),
            (schema::SCHEMA_VERSION + 1, schema::SCHEMA_VERSION)
        ),
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains(&file.display().to_string()));
    assert_eq!(std::fs::read(&file).unwrap(), before);
}

#[cfg(unix)]
#[test]
fn a_created_state_dir_is_private_and_pragmas_are_set() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("a").join("state");
    let h = History::open(&state).unwrap();
    let mode = std::fs::metadata(&state).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    let conn = rusqlite::Connection::open(h.path()).unwrap();
    let journal: String = conn
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .unwrap();
    assert_eq!(journal, "wal");
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, schema::SCHEMA_VERSION);
}

#[test]
fn handles_and_their_futures_cross_threads() {
    fn send_sync<T: Send + Sync>(_: &T) {}
    fn send<T: Send>(_: T) {}
    let dir = tempfile::tempdir().unwrap();
    let h = open(&dir);
    send_sync(&h);
    send(h.flush());
    send(h.get("x"));
    send(h.list(1, None));
    send(h.events("x", 0));
    send(h.interrupt_unfinished(0));
    send(h.prune(0));
}

#[tokio::test]
async fn flush_makes_earlier_writes_visible() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(&dir);
    h.create_run(&summary("r", 1, RunState::Queued));
    for step in 0..50 {
        let mut run = summary("r", 1, RunState::Running);
        run.steps = step;
        h.save_run(&run);
        h.flush().await.unwrap();
        assert_eq!(h.get("r").await.unwrap().unwrap().summary.steps, step);
    }
}

#[tokio::test]
async fn failed_writes_are_counted_and_the_writer_keeps_going() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(&dir);
    // No such run: the foreign key refuses it.
    h.append_event("ghost", &step_started(1));
    h.create_run(&summary("r", 1, RunState::Running));
    h.append_event("r", &step_started(1));
    // Same (run, seq) twice, and a seq SQLite cannot hold.
    h.append_event("r", &step_started(1));
    h.append_event("r", &step_started(u64::MAX));
    h.append_message("r", 0, &Message::user("a"));
    h.append_message("r", 0, &Message::user("b"));
    h.flush().await.unwrap();
    assert_eq!(h.write_errors(), 4);
    // The good writes of the same batch were committed.
    assert_eq!(h.events("r", 0).await.unwrap(), vec![step_started(1)]);
    assert_eq!(
        h.get("r").await.unwrap().unwrap().messages,
        vec![Message::user("a")]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_writer_keeps_up_with_a_flood_of_events() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(&dir);
    h.create_run(&summary("flood", 1, RunState::Running));
    let start = Instant::now();
    let n = 100_000u64;
    for seq in 1..=n {
        h.append_event(
            "flood",
            &line(
                seq,
                RunEvent::ToolResult {
                    step: (seq / 10) as u32,
                    id: format!("call_{seq}"),
                    name: "bash".into(),
                    ok: true,
                    output: "some output of a command, a line or two long".into(),
                },
            ),
        );
    }
    h.flush().await.unwrap();
    let elapsed = start.elapsed();
    assert_eq!(h.write_errors(), 0);
    let events = h.events("flood", n - 3).await.unwrap();
    assert_eq!(
        events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [n - 2, n - 1, n]
    );
    // Generous for a slow debug build on a loaded machine; a writer that
    // committed per event would take minutes.
    assert!(elapsed.as_secs() < 30, "100k events took {elapsed:?}");
}

#[tokio::test]
async fn a_transcript_is_served_in_pages_with_a_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(&dir);
    h.create_run(&summary("long", 1, RunState::Ended));
    for i in 0..10u32 {
        h.append_message("long", i, &Message::user(format!("m{i}")));
    }
    // Two messages larger than a page's byte budget together.
    let huge = "y".repeat(crate::api::MESSAGES_PAGE_BYTES / 2 + 1);
    h.append_message("long", 10, &Message::user(huge.clone()));
    h.append_message("long", 11, &Message::user(huge));
    h.flush().await.expect("flush");

    let page = |from, limit| {
        let h = h.clone();
        async move {
            h.get_page("long", PageRequest::new(from, limit))
                .await
                .unwrap()
                .unwrap()
        }
    };
    let first = page(None, Some(4)).await;
    assert_eq!(first.messages.len(), 4);
    assert_eq!(first.messages[0], Message::user("m0"));
    assert_eq!(first.paging.messages_total, Some(12));
    assert_eq!(first.paging.messages_from, None);
    assert_eq!(first.paging.next_messages_from, Some(4));
    let second = page(Some(4), Some(4)).await;
    assert_eq!(second.messages[0], Message::user("m4"));
    assert_eq!(second.paging.next_messages_from, Some(8));
    // The byte budget cuts the page before the second huge message.
    let third = page(Some(8), None).await;
    assert_eq!(third.messages.len(), 3, "m8, m9 and one huge message");
    assert_eq!(third.paging.next_messages_from, Some(11));
    let last = page(Some(11), None).await;
    assert_eq!(last.messages.len(), 1, "a huge message alone still comes");
    assert_eq!(last.paging.next_messages_from, None);
    // Without parameters: the first page, at most the default limit.
    let default = h.get("long").await.unwrap().unwrap();
    assert_eq!(default.messages.len(), 11);
}

#[tokio::test]
async fn list_rows_carry_a_cut_request_and_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(&dir);
    let mut big = summary("big", 1, RunState::Ended);
    big.request = "é".repeat(crate::api::LIST_REQUEST_CHARS * 100);
    h.create_run(&big);
    h.create_run(&summary("small", 2, RunState::Ended));
    h.flush().await.expect("flush");
    let list = h.list(10, None).await.unwrap();
    let row = |id: &str| list.runs.iter().find(|r| r.id == id).unwrap().clone();
    assert_eq!(
        row("big").request.chars().count(),
        crate::api::LIST_REQUEST_CHARS
    );
    assert!(row("big").request_truncated);
    assert!(!row("small").request_truncated);
    assert_eq!(row("small").request, "request of small");
    // The run's own record has all of it.
    let full = h.summary("big").await.unwrap().unwrap();
    assert_eq!(full.request, big.request);
    assert!(!full.request_truncated);
    // A live run's row is cut the same way.
    let live = big.list_row();
    assert_eq!(live.request, row("big").request);
    assert!(live.request_truncated);
}

/// Makes the writer's SQLite answer "database or disk is full" for anything
/// that needs a new page (`full`), or lifts that (`!full`).
fn disk_full(h: &History, full: bool) {
    h.on_writer(move |conn| {
        let pages: i64 = conn
            .pragma_query_value(None, "page_count", |r| r.get(0))
            .unwrap();
        let limit = if full { pages } else { 1 << 30 };
        let _: i64 = conn
            .pragma_update_and_check(None, "max_page_count", limit, |r| r.get(0))
            .unwrap();
    });
}

/// Fills the disk, then creates the run `id` (queued), whose request needs
/// new pages: from then on nothing commits until `disk_full(h, false)`, and
/// the writes sent meanwhile stay pending, where they can be counted.
async fn hold_commits(h: &History, id: &str, seq: i64) -> RunSummary {
    disk_full(h, true);
    let mut run = summary(id, seq, RunState::Queued);
    run.request = "b".repeat(100_000);
    h.create_run(&run);
    assert!(h.flush().await.is_err(), "the disk refuses");
    run
}

#[tokio::test]
async fn a_full_disk_fails_the_flush_keeps_the_writes_and_commits_them_when_it_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(&dir);
    let committed = summary("before", 1, RunState::Ended);
    h.create_run(&committed);
    h.append_event("before", &step_started(1));
    h.flush().await.unwrap();
    assert_eq!(h.unavailable(), None);

    disk_full(&h, true);
    let mut big = summary("big", 2, RunState::Running);
    big.request = "x".repeat(200_000);
    h.create_run(&big);
    let err = h.flush().await.expect_err("nothing can commit");
    assert!(
        matches!(&err, HistoryError::Unavailable { reason, .. } if reason.contains("full")),
        "{err}"
    );
    assert!(err.to_string().contains("history.db"), "{err}");
    assert!(h.unavailable().is_some_and(|r| r.contains("full")));
    // A run in flight keeps writing; its writes wait with the row.
    for seq in 1..=20 {
        h.append_event("big", &step_started(seq));
    }
    h.append_message("big", 0, &Message::user("kept"));
    assert!(h.flush().await.is_err());
    // Reads still work, and what was committed is intact.
    assert_eq!(h.get("before").await.unwrap().unwrap().summary, committed);
    assert!(h.get("big").await.unwrap().is_none());
    // Pruning refuses rather than loses the pending writes.
    assert!(h.prune(i64::MAX).await.is_err());

    disk_full(&h, false);
    h.settle().await;
    assert_eq!(h.unavailable(), None);
    h.flush().await.unwrap();
    let view = h.get("big").await.unwrap().expect("the kept row committed");
    assert_eq!(view.summary, big);
    assert_eq!(view.messages, vec![Message::user("kept")]);
    assert_eq!(h.events("big", 0).await.unwrap().len(), 20);
    assert_eq!(h.write_errors(), 0, "nothing was dropped");
    assert_eq!(h.get("before").await.unwrap().unwrap().summary, committed);
}

/// Makes every write fail as on a read-only file system (`query_only`), or
/// lifts that.
fn read_only(h: &History, on: bool) {
    h.on_writer(move |conn| conn.pragma_update(None, "query_only", on).unwrap());
}

#[tokio::test]
async fn a_refused_run_is_forgotten_and_interrupt_waits_in_order_on_a_read_only_disk() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(&dir);
    h.create_run(&summary("old", 1, RunState::Running));
    h.flush().await.unwrap();
    read_only(&h, true);
    // Start-up on a full disk: the interrupt step cannot commit yet.
    let mut refused = summary("refused", 2, RunState::Queued);
    refused.request = "y".repeat(200_000);
    assert!(h.interrupt_unfinished(9_000).await.is_err());
    h.create_run(&refused);
    assert!(h.flush().await.is_err());
    h.forget_run("refused");
    // A later run, created after recovery, must not be interrupted by the
    // step that waited.
    read_only(&h, false);
    h.settle().await;
    h.create_run(&summary("later", 3, RunState::Running));
    h.flush().await.unwrap();
    assert!(h.get("refused").await.unwrap().is_none());
    let old = h.get("old").await.unwrap().unwrap().summary;
    assert_eq!(old.outcome, Some(Outcome::Interrupted));
    let later = h.get("later").await.unwrap().unwrap().summary;
    assert_eq!(later.state, RunState::Running);
}

#[tokio::test]
async fn the_database_is_created_private_whatever_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    // SAFETY: umask has no memory-safety preconditions; tests in this binary
    // create no files whose mode matters concurrently.
    let old = unsafe { libc::umask(0) };
    let h = open(&dir);
    unsafe { libc::umask(old) };
    h.create_run(&summary("r", 1, RunState::Running));
    h.flush().await.unwrap();
    for name in [FILE_NAME, "history.db-wal", "history.db-shm"] {
        let path = dir.path().join("state").join(name);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{}", path.display());
    }
}

#[test]
fn the_wal_files_outlive_a_clean_close_and_the_wal_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.db");
    let conn = super::schema::open_writer(&path).expect("open");
    let limit: i64 = conn
        .pragma_query_value(None, "journal_size_limit", |r| r.get(0))
        .expect("journal_size_limit");
    assert_eq!(limit, 64 << 20);
    conn.execute_batch("CREATE TABLE probe (x); INSERT INTO probe VALUES (1);")
        .expect("write");
    drop(conn);
    // A clean close leaves them: on a full disk the next open could not
    // create them again.
    for suffix in ["-wal", "-shm"] {
        let file = dir.path().join(format!("history.db{suffix}"));
        assert!(file.exists(), "{} was deleted on close", file.display());
    }
}

#[tokio::test]
async fn list_rows_carry_a_cut_result_and_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(&dir);
    let mut big = summary("big", 1, RunState::Ended);
    big.result = Some("ü".repeat(crate::api::LIST_RESULT_CHARS * 50));
    h.create_run(&big);
    let mut running = summary("running", 2, RunState::Running);
    running.result = None;
    h.create_run(&running);
    h.flush().await.expect("flush");
    let list = h.list(10, None).await.unwrap();
    let row = |id: &str| list.runs.iter().find(|r| r.id == id).unwrap().clone();
    let cut = row("big");
    assert_eq!(
        cut.result.as_deref().map(|r| r.chars().count()),
        Some(crate::api::LIST_RESULT_CHARS)
    );
    assert!(cut.result_truncated);
    assert!(
        !row("running").result_truncated,
        "no result is not a cut one"
    );
    // The run's own record has all of it; a live run's row is cut the same way.
    let full = h.summary("big").await.unwrap().unwrap();
    assert_eq!(full.result, big.result);
    assert!(!full.result_truncated);
    let live = big.list_row();
    assert_eq!(live.result, cut.result);
    assert!(live.result_truncated);
}

/// Runs `f` on the writer's connection, in queue order, and hands back what
/// it returns.
async fn ask_writer<T: Send + 'static>(
    h: &History,
    f: impl FnOnce(&rusqlite::Connection) -> T + Send + 'static,
) -> T {
    let (reply, answer) = oneshot::channel();
    h.on_writer(move |conn| {
        let _ = reply.send(f(conn));
    });
    answer.await.expect("the writer ran the closure")
}

#[tokio::test]
async fn a_request_is_written_once_however_many_times_its_run_is_saved() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(&dir);
    let wal = dir.path().join("state").join("history.db-wal");
    // No checkpoint from here on: the WAL keeps every page each commit
    // wrote, so its size is what the saves cost. Temporary triggers (on the
    // writer's connection only) count the writes to the requests.
    let triggers = ask_writer(&h, |conn| {
        conn.execute_batch("PRAGMA wal_autocheckpoint = 0")?;
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        conn.execute_batch(
            "CREATE TEMP TABLE request_writes (kind TEXT NOT NULL);
             CREATE TEMP TRIGGER request_inserted AFTER INSERT ON main.requests
                 BEGIN INSERT INTO request_writes VALUES ('insert'); END;
             CREATE TEMP TRIGGER request_updated AFTER UPDATE ON main.requests
                 BEGIN INSERT INTO request_writes VALUES ('update'); END;",
        )
    })
    .await;
    let before = std::fs::metadata(&wal).map_or(0, |m| m.len());

    let mut run = summary("big", 1, RunState::Queued);
    run.request = "r".repeat(1 << 20);
    h.create_run(&run);
    h.flush().await.unwrap();
    run.state = RunState::Running;
    for step in 1..=50 {
        // SQLite overwrites a row of unchanged size in place, skipping the
        // overflow pages that did not change; a row that changes size (as
        // at a run's start, its end, and as its counters and texts grow) is
        // written whole. Each save here changes the row's size.
        run.steps = step;
        run.error = Some("e".repeat(step as usize));
        h.save_run(&run);
        // One commit per step, as a run's steps are in the daemon.
        h.flush().await.unwrap();
    }
    let written = std::fs::metadata(&wal).unwrap().len() - before;
    // The request once (1 MiB) and 50 small row updates; rewriting the
    // request at each step would be over 50 MiB.
    assert!(
        written < 8 << 20,
        "1 MiB request and 50 saves wrote {written} bytes to the WAL"
    );
    triggers.expect("count the writes to the requests table");
    let writes: Vec<String> = ask_writer(&h, |conn| {
        conn.prepare("SELECT kind FROM temp.request_writes")?
            .query_map([], |r| r.get(0))?
            .collect::<rusqlite::Result<Vec<String>>>()
    })
    .await
    .unwrap();
    assert_eq!(writes, ["insert"], "the request was written once");
    let stored = h.summary("big").await.unwrap().expect("stored");
    assert_eq!(stored, run, "the request is intact, the row the newest");
    assert_eq!(h.write_errors(), 0);
}

/// What the test's triggers counted, in order.
async fn indexed_writes(h: &History) -> rusqlite::Result<Vec<String>> {
    ask_writer(h, |conn| {
        conn.prepare("SELECT col FROM temp.indexed_writes ORDER BY rowid")?
            .query_map([], |r| r.get(0))?
            .collect::<rusqlite::Result<Vec<String>>>()
    })
    .await
}

#[tokio::test]
async fn a_steps_save_rewrites_no_index_and_an_end_rewrites_state_and_end_time() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(&dir);
    let mut run = summary("steps", 1, RunState::Running);
    h.create_run(&run);
    h.flush().await.unwrap();
    // Temporary triggers (on the writer's connection only) count the
    // updates SQLite makes to each indexed column of `runs`: an `UPDATE OF`
    // trigger fires when the column is in the statement's `SET`, which is
    // when SQLite rewrites the column's index entry, whatever the value.
    ask_writer(&h, |conn| {
        conn.execute_batch(
            "CREATE TEMP TABLE indexed_writes (col TEXT NOT NULL);
             CREATE TEMP TRIGGER state_set AFTER UPDATE OF state ON main.runs
                 BEGIN INSERT INTO indexed_writes VALUES ('state'); END;
             CREATE TEMP TRIGGER ended_set AFTER UPDATE OF ended_at_ms ON main.runs
                 BEGIN INSERT INTO indexed_writes VALUES ('ended_at_ms'); END;
             CREATE TEMP TRIGGER seq_set AFTER UPDATE OF seq ON main.runs
                 BEGIN INSERT INTO indexed_writes VALUES ('seq'); END;",
        )
    })
    .await
    .expect("create the triggers");
    for step in 3..=6 {
        run.steps = step;
        run.usage.prompt_tokens += 100;
        h.save_run(&run);
        // One commit per step, so each save is its own `UPDATE`.
        h.flush().await.unwrap();
        assert_eq!(h.summary("steps").await.unwrap().expect("stored"), run);
    }
    assert_eq!(
        indexed_writes(&h).await.unwrap(),
        Vec::<String>::new(),
        "a step's save leaves the indexed columns alone"
    );
    run.state = RunState::Ended;
    run.outcome = Some(Outcome::Finished);
    run.ended_at_ms = Some(9_000);
    h.save_run(&run);
    h.flush().await.unwrap();
    assert_eq!(indexed_writes(&h).await.unwrap(), ["state", "ended_at_ms"]);
    assert_eq!(h.summary("steps").await.unwrap().expect("stored"), run);
    assert_eq!(h.write_errors(), 0);
}

/// The first schema, as agentd wrote it (migration 1); kept here verbatim so
/// the upgrade is tested from what files in the field hold.
const SCHEMA_1: &str = "
    CREATE TABLE runs (
        id                TEXT PRIMARY KEY NOT NULL,
        seq               INTEGER NOT NULL UNIQUE,
        agent             TEXT NOT NULL,
        request           TEXT NOT NULL,
        state             TEXT NOT NULL,
        outcome           TEXT,
        steps             INTEGER NOT NULL,
        max_steps         INTEGER,
        result            TEXT,
        error             TEXT,
        prompt_tokens     INTEGER NOT NULL,
        completion_tokens INTEGER NOT NULL,
        created_at_ms     INTEGER NOT NULL,
        started_at_ms     INTEGER,
        ended_at_ms       INTEGER
    );
    CREATE INDEX runs_state ON runs(state);
    CREATE INDEX runs_ended_at ON runs(ended_at_ms);
    CREATE TABLE events (
        run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        seq    INTEGER NOT NULL,
        at_ms  INTEGER NOT NULL,
        event  TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    );
    CREATE TABLE messages (
        run_id  TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        idx     INTEGER NOT NULL,
        message TEXT NOT NULL,
        PRIMARY KEY (run_id, idx)
    );
";

/// Writes a run into a schema-1 file the way agentd 1 did.
fn insert_v1_run(conn: &rusqlite::Connection, run: &RunSummary) {
    conn.execute(
        "INSERT INTO runs (id, seq, agent, request, state, outcome, steps, max_steps, result,
                           error, prompt_tokens, completion_tokens, created_at_ms,
                           started_at_ms, ended_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
        rusqlite::params![
            run.id,
            run.seq,
            run.agent,
            run.request,
            run.state.as_str(),
            run.outcome.map(Outcome::as_str),
            run.steps,
            run.max_steps,
            run.result,
            run.error,
            run.usage.prompt_tokens as i64,
            run.usage.completion_tokens as i64,
            run.created_at_ms,
            run.started_at_ms,
            run.ended_at_ms,
        ],
    )
    .unwrap();
}

#[tokio::test]
async fn a_schema_1_history_is_upgraded_with_its_runs_intact() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let file = state.join(FILE_NAME);
    let mut old = summary("old", 1, RunState::Ended);
    old.request = "é".repeat(crate::api::LIST_REQUEST_CHARS * 3);
    // Schema 1 had no cost: the upgrade leaves it unknown.
    old.cost = None;
    let mut running = summary("running", 2, RunState::Running);
    running.outcome = None;
    running.result = None;
    running.ended_at_ms = None;
    let messages = [Message::user("list files"), Message::assistant("done")];
    let events = vec![
        step_started(1),
        line(
            2,
            RunEvent::RunEnded {
                outcome: Outcome::Finished,
                steps: 2,
                error: None,
            },
        ),
    ];
    {
        let conn = rusqlite::Connection::open(&file).unwrap();
        conn.execute_batch(SCHEMA_1).unwrap();
        conn.pragma_update(None, "application_id", 0x6167_6e64)
            .unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
        insert_v1_run(&conn, &old);
        insert_v1_run(&conn, &running);
        for (i, m) in messages.iter().enumerate() {
            conn.execute(
                "INSERT INTO messages (run_id, idx, message) VALUES ('old', ?1, ?2)",
                rusqlite::params![i, serde_json::to_string(m).unwrap()],
            )
            .unwrap();
        }
        for e in &events {
            conn.execute(
                "INSERT INTO events (run_id, seq, at_ms, event) VALUES ('old', ?1, ?2, ?3)",
                rusqlite::params![
                    e.seq as i64,
                    e.at_ms,
                    serde_json::to_string(&e.event).unwrap()
                ],
            )
            .unwrap();
        }
    }

    let h = History::open(&state).expect("a schema-1 history opens");
    let view = h.get("old").await.unwrap().expect("the old run is kept");
    assert_eq!(view.summary, old);
    assert_eq!(view.messages, messages);
    assert_eq!(h.events("old", 0).await.unwrap(), events);
    assert_eq!(h.get("running").await.unwrap().unwrap().summary, running);
    let list = h.list(10, None).await.unwrap();
    assert_eq!(list.runs[1].id, "old");
    assert!(list.runs[1].request_truncated);
    assert_eq!(list.runs[1].request, old.list_row().request);
    // The running run goes on being saved, without its request.
    running.steps = 7;
    h.save_run(&running);
    h.flush().await.unwrap();
    assert_eq!(h.summary("running").await.unwrap().unwrap(), running);

    let conn = rusqlite::Connection::open(&file).unwrap();
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, schema::SCHEMA_VERSION);
    let columns: Vec<String> = conn
        .prepare("SELECT name FROM pragma_table_info('runs')")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    assert!(!columns.iter().any(|c| c == "request"), "{columns:?}");
    let requests: i64 = conn
        .query_row("SELECT COUNT(*) FROM requests", [], |r| r.get(0))
        .unwrap();
    assert_eq!(requests, 2);
    let integrity: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");
    let orphans: i64 = conn
        .query_row("SELECT COUNT(*) FROM pragma_foreign_key_check", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(orphans, 0);
    // Pruning the old run takes its request with it.
    assert_eq!(h.prune(i64::MAX).await.unwrap(), 1);
    let left: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM requests WHERE run_id = 'old'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(left, 0);
    assert_eq!(h.write_errors(), 0);
}

#[tokio::test]
async fn a_runs_end_is_kept_past_the_pending_bound_while_events_are_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(&dir);
    let mut run = summary("long", 1, RunState::Running);
    run.outcome = None;
    run.result = None;
    run.ended_at_ms = None;
    h.create_run(&run);
    h.flush().await.unwrap();

    disk_full(&h, true);
    let output = "o".repeat(1 << 20);
    let result = |seq: u64, output: &str| {
        line(
            seq,
            RunEvent::ToolResult {
                step: 1,
                id: format!("call_{seq}"),
                name: "bash".into(),
                ok: true,
                output: output.to_string(),
            },
        )
    };
    // 1 MiB events past the bound, then small ones (over 1 MiB of them) to
    // fill what room the big ones left, to less than one small event.
    let big = (MAX_PENDING_BYTES >> 20) as u64 + 8;
    let n = big + 20_000;
    for seq in 1..=n {
        h.append_event(
            "long",
            &result(seq, if seq <= big { &output } else { "ok" }),
        );
    }
    let ended = RunSummary {
        state: RunState::Ended,
        waiting: None,
        outcome: Some(Outcome::Finished),
        steps: 1,
        // Larger than a small event: it would not fit either.
        result: Some("Step 1: done. ".repeat(100)),
        ended_at_ms: Some(9_000),
        ..run.clone()
    };
    h.save_run(&ended);
    h.append_event(
        "long",
        &line(
            n + 1,
            RunEvent::RunEnded {
                outcome: Outcome::Finished,
                steps: 1,
                error: None,
            },
        ),
    );
    assert!(h.flush().await.is_err());
    let dropped = h.write_errors();
    assert!(dropped > 0, "past the bound, events are dropped");

    disk_full(&h, false);
    h.settle().await;
    h.flush().await.unwrap();
    assert_eq!(
        h.summary("long").await.unwrap().expect("stored"),
        ended,
        "the run's end was kept past the bound"
    );
    // The events kept are in order: the first ones, and perhaps the small
    // run_ended that fitted in what room was left; the rest were dropped and
    // counted.
    let seqs: Vec<u64> = h
        .event_lines("long", 0, u32::MAX)
        .await
        .unwrap()
        .into_iter()
        .map(|(seq, _)| seq)
        .collect();
    assert_eq!(seqs.first(), Some(&1));
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    assert_eq!(seqs.len() as u64 + dropped, n + 1);
    assert_eq!(h.write_errors(), dropped);
}

#[tokio::test]
async fn a_runs_row_writes_are_one_pending_write_however_many_saves() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(&dir);
    let mut a = summary("a", 1, RunState::Queued);
    h.create_run(&a);
    h.flush().await.unwrap();

    let mut b = hold_commits(&h, "b", 2).await;
    assert_eq!(h.pending_writes().await, 1);
    a.state = RunState::Running;
    for step in 1..=1000 {
        a.steps = step;
        h.save_run(&a);
    }
    assert_eq!(h.pending_writes().await, 2, "1000 saves, one pending write");
    // b's creation takes its updates (and keeps its request), at its place
    // before b's event.
    h.append_event("b", &step_started(1));
    b.state = RunState::Running;
    for step in 1..=1000 {
        b.steps = step;
        h.save_run(&b);
    }
    assert_eq!(
        h.pending_writes().await,
        3,
        "b's creation, a's row, b's event"
    );
    assert!(h.flush().await.is_err(), "still nothing committed");

    disk_full(&h, false);
    h.settle().await;
    assert_eq!(h.pending_writes().await, 0);
    assert_eq!(h.summary("a").await.unwrap().unwrap(), a);
    assert_eq!(h.summary("b").await.unwrap().unwrap(), b);
    assert_eq!(h.events("b", 0).await.unwrap(), vec![step_started(1)]);
    assert_eq!(h.write_errors(), 0);
}

#[test]
fn pending_coalesces_row_writes_up_to_barriers_and_keeps_its_byte_count() {
    use pending::{Pending, Push};
    use write::{RunRow, Write};
    let row = |id: &str, steps: u32, result: usize| {
        let mut run = summary(id, 1, RunState::Running);
        run.steps = steps;
        run.result = Some("x".repeat(result));
        Box::new(RunRow::from(&run))
    };
    let save = |row: Box<RunRow>| Write::SaveRun {
        row,
        checkpoint: None,
    };
    let event = |run_id: &str, seq: u64| Write::Event {
        run_id: run_id.into(),
        seq,
        at_ms: 0,
        json: "{}".into(),
    };
    let sum = |p: &Pending| p.writes().iter().map(Write::size).sum::<usize>();
    let mut p = Pending::default();
    let create = Write::CreateRun {
        row: row("a", 0, 0),
        request: "q".repeat(1000),
    };
    assert_eq!(p.push(create, true), Push::Appended);
    assert_eq!(p.push(event("a", 1), true), Push::Appended);
    for (steps, result) in [(1, 10), (2, 5_000), (3, 20)] {
        assert_eq!(p.push(save(row("a", steps, result)), true), Push::Coalesced);
        assert_eq!(p.bytes(), sum(&p));
    }
    assert_eq!(p.len(), 2);
    match &p.writes()[0] {
        Write::CreateRun { row, request } => {
            assert_eq!((row.steps, request.len()), (3, 1000));
        }
        _ => panic!("the creation stays first"),
    }
    // A deletion is a barrier for its run, an interrupt for every run.
    p.push(Write::DeleteRun("a".into()), true);
    // The refused creation's request is let go at once; its row stays for
    // the deletion to apply to, in order.
    match &p.writes()[0] {
        Write::CreateRun { row, request } => assert_eq!((row.steps, request.len()), (3, 0)),
        _ => panic!("the creation stays first"),
    }
    assert_eq!(p.bytes(), sum(&p));
    assert_eq!(p.push(save(row("a", 4, 0)), true), Push::Appended);
    assert_eq!(p.push(save(row("b", 1, 0)), true), Push::Appended);
    p.push(Write::Interrupt { now_ms: 0 }, true);
    assert_eq!(p.push(save(row("b", 2, 0)), true), Push::Appended);
    assert_eq!(p.push(save(row("b", 3, 0)), true), Push::Coalesced);
    assert_eq!((p.len(), p.bytes()), (7, sum(&p)));
    // Past the bound events go, rows stay; a restore keeps the coalescing.
    let big = Write::Message {
        run_id: "b".into(),
        index: 0,
        json: serde_json::value::to_raw_value(&"m".repeat(MAX_PENDING_BYTES))
            .unwrap()
            .into(),
    };
    assert_eq!(p.push(big, true), Push::Dropped);
    assert_eq!(p.push(event("b", 1), false), Push::Appended);
    assert_eq!(p.push(save(row("b", 4, 0)), true), Push::Coalesced);
    let writes = p.take();
    assert_eq!((p.len(), p.bytes()), (0, 0));
    assert_eq!(p.restore(writes), 0);
    assert_eq!(p.push(save(row("b", 5, 0)), true), Push::Coalesced);
    assert_eq!((p.len(), p.bytes()), (8, sum(&p)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_producer_waiting_on_a_full_queue_does_not_stall_its_worker() {
    use std::sync::atomic::AtomicUsize;
    use std::sync::mpsc as std_mpsc;
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let h = open(&dir);
    h.create_run(&summary("r", 1, RunState::Running));
    h.flush().await.unwrap();

    // Hold the writer, so the queue fills and stays full.
    let (entered_tx, entered) = std_mpsc::channel();
    let (release, released) = std_mpsc::channel::<()>();
    h.on_writer(move |_| {
        let _ = entered_tx.send(());
        let _ = released.recv_timeout(Duration::from_secs(120));
    });
    entered
        .recv_timeout(Duration::from_secs(60))
        .expect("the writer took the closure");

    // The producer runs on the runtime's only worker and never yields: the
    // queue's last free place taken, its next send waits.
    let total = writer::QUEUE_OPS + 100;
    let sent = Arc::new(AtomicUsize::new(0));
    let producer = tokio::spawn({
        let (h, sent) = (h.clone(), sent.clone());
        async move {
            for seq in 1..=total as u64 {
                h.append_event("r", &step_started(seq));
                sent.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    // Polled from the test's own thread (not a worker), with std sleeps:
    // tokio's timers are driven by the worker this test may find blocked.
    let deadline = Instant::now() + Duration::from_secs(60);
    while sent.load(Ordering::SeqCst) < writer::QUEUE_OPS {
        assert!(Instant::now() < deadline, "the queue did not fill");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(sent.load(Ordering::SeqCst) < total, "the queue is full");
    // Another task on the same runtime: it runs only if the waiting
    // producer gave up the worker.
    let (ran_tx, ran) = std_mpsc::channel();
    tokio::spawn(async move {
        let _ = ran_tx.send(());
    });
    let other_ran = ran.recv_timeout(Duration::from_secs(30));
    release.send(()).expect("the writer waits");
    assert!(
        other_ran.is_ok(),
        "a producer waiting on the full queue blocked the runtime's worker"
    );
    producer.await.expect("the producer finished");
    h.flush().await.unwrap();
    assert_eq!(h.events("r", 0).await.unwrap().len(), total);
    assert_eq!(h.write_errors(), 0);
}

/// Runs created before schema 3 have no checkpoint: resuming them is
/// refused, since where their last completed step ended is not known.
#[tokio::test]
async fn a_schema_2_history_is_upgraded_and_its_runs_have_no_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let file = state.join(FILE_NAME);
    let mut old = summary("old", 1, RunState::Ended);
    // Schema 2 had no cost: the upgrade leaves it unknown.
    old.cost = None;
    {
        let conn = rusqlite::Connection::open(&file).unwrap();
        conn.execute_batch(SCHEMA_1).unwrap();
        insert_v1_run(&conn, &old);
        conn.execute(
            "INSERT INTO messages (run_id, idx, message) VALUES ('old', 0, ?1)",
            [serde_json::to_string(&Message::user("request of old")).unwrap()],
        )
        .unwrap();
        // Migration 2 exactly as released, then the file is at version 2.
        conn.execute_batch(
            "CREATE TABLE requests (
                 run_id  TEXT PRIMARY KEY NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
                 request TEXT NOT NULL
             );
             INSERT INTO requests (run_id, request) SELECT id, request FROM runs;
             ALTER TABLE runs DROP COLUMN request;",
        )
        .unwrap();
        conn.pragma_update(None, "application_id", 0x6167_6e64)
            .unwrap();
        conn.pragma_update(None, "user_version", 2).unwrap();
    }
    let h = History::open(&state).expect("a schema-2 history opens");
    let point = h.resume_point("old").await.unwrap().expect("kept");
    assert_eq!(point.summary, old, "the run is intact and has no links");
    assert_eq!(point.checkpoint, None);
    // A run made now has one from its creation.
    let new = summary("new", 2, RunState::Running);
    h.create_run(&new);
    h.flush().await.unwrap();
    let point = h.resume_point("new").await.unwrap().expect("kept");
    assert_eq!(point.checkpoint, Some(crate::agent::Checkpoint::default()));
    let conn = rusqlite::Connection::open(&file).unwrap();
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, schema::SCHEMA_VERSION);
    let integrity: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");
}

/// A step's end saves its run's row and then its checkpoint; within one
/// batch the checkpoint is folded into the row's pending update (one
/// `UPDATE`), the newest of each wins, a later save without a checkpoint
/// keeps the folded one, and a checkpoint behind the run's creation (which
/// sets its own) is written on its own.
#[test]
fn pending_folds_a_checkpoint_into_the_run_s_pending_update() {
    use crate::agent::Checkpoint;
    use pending::{Pending, Push};
    use write::{RunRow, Write};
    let row = |id: &str, steps: u32| {
        let mut run = summary(id, 1, RunState::Running);
        run.steps = steps;
        Box::new(RunRow::from(&run))
    };
    let at = |steps: u32| Checkpoint {
        steps,
        messages: 2 * steps,
        stuck_warning: steps % 2 == 1,
    };
    let checkpoint = |id: &str, steps: u32| Write::Checkpoint {
        run_id: id.into(),
        checkpoint: at(steps),
    };
    let saved = |p: &Pending, i: usize| match &p.writes()[i] {
        Write::SaveRun { row, checkpoint } => (row.steps, *checkpoint),
        _ => panic!("write {i} is not a row update"),
    };
    let mut p = Pending::default();
    let create = Write::CreateRun {
        row: row("new", 0),
        request: "q".into(),
    };
    assert_eq!(p.push(create, false), Push::Appended);
    assert_eq!(p.push(checkpoint("new", 1), false), Push::Appended);
    let update = Write::SaveRun {
        row: row("a", 1),
        checkpoint: None,
    };
    assert_eq!(p.push(update, false), Push::Appended);
    assert_eq!(p.push(checkpoint("a", 1), false), Push::Coalesced);
    assert_eq!(saved(&p, 2), (1, Some(at(1))));
    let later = Write::SaveRun {
        row: row("a", 2),
        checkpoint: None,
    };
    assert_eq!(p.push(later, false), Push::Coalesced);
    assert_eq!(saved(&p, 2), (2, Some(at(1))));
    assert_eq!(p.push(checkpoint("a", 2), false), Push::Coalesced);
    assert_eq!(saved(&p, 2), (2, Some(at(2))));
    assert_eq!(p.len(), 3);
    // A restore (the disk refused the batch) keeps the folded checkpoint.
    let writes = p.take();
    assert_eq!(p.restore(writes), 0);
    assert_eq!((p.len(), saved(&p, 2)), (3, (2, Some(at(2)))));

    // A save that carries a checkpoint (as a restore replays one) is not
    // folded into the run's creation, which would lose the checkpoint: it
    // goes to the end, and the run's next checkpoint folds into it.
    let mut p = Pending::default();
    let create = Write::CreateRun {
        row: row("c", 0),
        request: "q".into(),
    };
    assert_eq!(p.push(create, false), Push::Appended);
    let carried = Write::SaveRun {
        row: row("c", 1),
        checkpoint: Some(at(1)),
    };
    assert_eq!(p.push(carried, false), Push::Appended);
    assert_eq!(saved(&p, 1), (1, Some(at(1))));
    assert_eq!(p.push(checkpoint("c", 2), false), Push::Coalesced);
    assert_eq!((p.len(), saved(&p, 1)), (2, (1, Some(at(2)))));
    // Past a barrier a checkpoint is not moved before it: a deletion for
    // its run, an interrupt for every run.
    let update = |id: &str| Write::SaveRun {
        row: row(id, 3),
        checkpoint: None,
    };
    assert_eq!(p.push(update("d"), false), Push::Appended);
    assert_eq!(p.push(Write::DeleteRun("c".into()), false), Push::Appended);
    assert_eq!(p.push(checkpoint("c", 3), false), Push::Appended);
    assert_eq!(
        p.push(Write::Interrupt { now_ms: 0 }, false),
        Push::Appended
    );
    assert_eq!(p.push(checkpoint("d", 3), false), Push::Appended);
    assert_eq!(saved(&p, 2), (3, None));
    assert_eq!(p.len(), 7);
}

/// Through the writer: a checkpoint folded into a step's save is stored
/// with it, and a later save without one leaves the stored checkpoint as
/// it is.
#[tokio::test]
async fn a_checkpoint_folded_into_a_save_is_stored_and_kept_by_later_saves() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(&dir);
    h.create_run(&summary("r", 1, RunState::Running));
    for i in 0..4 {
        h.append_message("r", i, &Message::user("m"));
    }
    h.flush().await.unwrap();
    // Nothing commits from here on, so what is pending shows the fold.
    hold_commits(&h, "big", 2).await;
    let mut run = summary("r", 1, RunState::Running);
    run.steps = 2;
    h.save_run(&run);
    assert_eq!(h.pending_writes().await, 2);
    let checkpoint = crate::agent::Checkpoint {
        steps: 2,
        messages: 4,
        stuck_warning: true,
    };
    h.checkpoint("r", checkpoint);
    assert_eq!(h.pending_writes().await, 2, "folded into the save");
    disk_full(&h, false);
    h.settle().await;
    let point = h.resume_point("r").await.unwrap().expect("kept");
    assert_eq!(point.checkpoint, Some(checkpoint));
    assert_eq!((point.summary.steps, point.messages.len()), (2, 4));
    // A later save without a checkpoint leaves the stored one as it is.
    run.steps = 3;
    h.save_run(&run);
    h.flush().await.unwrap();
    let point = h.resume_point("r").await.unwrap().expect("kept");
    assert_eq!(point.summary.steps, 3);
    assert_eq!(point.checkpoint, Some(checkpoint));
    assert_eq!(h.write_errors(), 0);
}

/// The checkpoint says where the last completed step ended: the messages
/// after it (a step cut short) are not part of the resume point, and the
/// links of a resumed run read back on both runs, in `get` and in `list`.
#[tokio::test]
async fn a_checkpoint_bounds_the_resume_point_and_links_read_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(&dir);
    let old = summary("old", 1, RunState::Ended);
    h.create_run(&old);
    let messages = [
        Message::user("request of old"),
        Message::user("next?"),
        Message::assistant("step 1"),
        // Step 2 began and did not complete.
        Message::user("next?"),
    ];
    for (i, m) in (0..).zip(&messages) {
        h.append_message("old", i, m);
    }
    let checkpoint = crate::agent::Checkpoint {
        steps: 1,
        messages: 3,
        stuck_warning: true,
    };
    h.checkpoint("old", checkpoint);
    let mut new = summary("new", 2, RunState::Queued);
    new.resume.resumed_from = Some("old".into());
    new.resume.resumed_at_step = Some(1);
    new.resume.resumed_messages = Some(3);
    h.create_run(&new);
    h.flush().await.unwrap();

    let point = h.resume_point("old").await.unwrap().expect("kept");
    assert_eq!(point.checkpoint, Some(checkpoint));
    let carried: Vec<Message> = point.messages.iter().map(|(_, m)| m.clone()).collect();
    assert_eq!(carried, messages[..3]);
    assert_eq!(point.summary.resume.resumed_by.as_deref(), Some("new"));
    let got = h.get("new").await.unwrap().expect("kept").summary;
    assert_eq!(got.resume, new.resume);
    let list = h.list(10, None).await.unwrap();
    assert_eq!(list.runs[0].resume, new.resume);
    assert_eq!(list.runs[1].resume.resumed_by.as_deref(), Some("new"));
    // One to one: a second run resuming `old` is refused by the index.
    let mut again = summary("again", 3, RunState::Queued);
    again.resume.resumed_from = Some("old".into());
    h.create_run(&again);
    h.flush().await.unwrap();
    assert!(h.summary("again").await.unwrap().is_none());
    assert_eq!(h.write_errors(), 1);
}

/// A run's plan is read from its `plan_changed` events: the record gets
/// the latest, the resume point the latest of a completed step (one
/// published in a step cut short stays with that step), and a run that
/// published none has `null`.
#[tokio::test]
async fn the_plan_is_the_last_plan_changed_and_the_resume_point_s_is_the_checkpoint_s() {
    use crate::plan::{Plan, PlanStep, StepStatus};
    let plan = |status| Plan {
        title: "t".into(),
        steps: vec![PlanStep {
            text: "do it".into(),
            status,
            notes: None,
        }],
    };
    let dir = tempfile::tempdir().unwrap();
    let h = open(&dir);
    h.create_run(&summary("r", 1, RunState::Ended));
    h.create_run(&summary("none", 2, RunState::Ended));
    let changed = |seq, step, status| {
        line(
            seq,
            RunEvent::PlanChanged {
                step,
                plan: plan(status),
            },
        )
    };
    h.append_event("r", &step_started(1));
    h.append_event("r", &changed(2, 1, StepStatus::NotStarted));
    h.append_event("r", &changed(3, 1, StepStatus::InProgress));
    h.append_event("r", &step_started(4));
    // Step 2's change: after the checkpoint (step 1).
    h.append_event("r", &changed(5, 2, StepStatus::Completed));
    h.append_message("r", 0, &Message::user("request of r"));
    h.checkpoint(
        "r",
        crate::agent::Checkpoint {
            steps: 1,
            messages: 1,
            stuck_warning: false,
        },
    );
    h.append_event("none", &step_started(1));
    // A run resuming `r` after step 1 that never started (it recorded no
    // event): resuming it carries `r`'s plan at step 1 on.
    let mut never = summary("never", 3, RunState::Ended);
    never.resume.resumed_from = Some("r".into());
    never.resume.resumed_at_step = Some(1);
    h.create_run(&never);
    h.append_message("never", 0, &Message::user("request of r"));
    h.checkpoint(
        "never",
        crate::agent::Checkpoint {
            steps: 1,
            messages: 1,
            stuck_warning: false,
        },
    );
    h.flush().await.unwrap();

    let view = h.get("r").await.unwrap().expect("kept");
    assert_eq!(view.plan, Some(plan(StepStatus::Completed)));
    let point = h.resume_point("r").await.unwrap().expect("kept");
    assert_eq!(point.plan, Some(plan(StepStatus::InProgress)));
    assert_eq!(h.get("none").await.unwrap().expect("kept").plan, None);
    let point = h.resume_point("never").await.unwrap().expect("kept");
    assert_eq!(point.plan, Some(plan(StepStatus::InProgress)));
    assert_eq!(
        h.resume_point("none").await.unwrap().expect("kept").plan,
        None
    );
    // And it reads back as the wire's `"plan": null`.
    let json = serde_json::to_value(h.get("none").await.unwrap().expect("kept")).unwrap();
    assert_eq!(json.get("plan"), Some(&serde_json::Value::Null), "{json}");
}

/// A run's plan is found by a seek through the partial index `events_plan`,
/// not a scan of all its events: `read::PLAN_EVENTS` repeats the index's
/// condition word for word, and a stored `plan_changed` event starts with
/// the 23 bytes that condition tests (and no other event does).
#[tokio::test]
async fn the_plan_is_read_through_its_partial_index() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(&dir);
    h.create_run(&summary("r", 1, RunState::Ended));
    h.append_event("r", &step_started(1));
    h.append_event(
        "r",
        &line(
            2,
            RunEvent::PlanChanged {
                step: 1,
                plan: crate::plan::Plan {
                    title: "t".into(),
                    steps: vec![],
                },
            },
        ),
    );
    h.flush().await.unwrap();
    let conn = rusqlite::Connection::open(h.path()).unwrap();
    let plan: Vec<String> = conn
        .prepare(&format!("EXPLAIN QUERY PLAN {}", super::read::PLAN_EVENTS))
        .unwrap()
        .query_map(["r"], |r| r.get::<_, String>(3))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(
        plan.iter().any(|d| d.contains("USING INDEX events_plan")),
        "{plan:?}"
    );
    // The index holds the plan event alone, and the query finds it.
    let indexed = plan_seqs(&conn, "r");
    assert_eq!(indexed, vec![2]);
}

/// The seqs `read::PLAN_EVENTS` finds for run `id`, newest first.
fn plan_seqs(conn: &rusqlite::Connection, id: &str) -> Vec<i64> {
    conn.prepare(super::read::PLAN_EVENTS)
        .unwrap()
        .query_map([id], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// A live run's step is held until its release and then committed whole,
/// in one commit: its row, events, messages and checkpoint.
#[tokio::test]
async fn a_staged_step_waits_for_its_release_and_commits_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(&dir);
    let mut run = summary("r", 1, RunState::Running);
    run.outcome = None;
    h.create_run(&run);
    h.flush().await.unwrap();
    let created = h.resume_point("r").await.unwrap().expect("created");
    let before = h.inner.health.commits();

    let staged = h.staged("r");
    run.steps = 1;
    staged.save_run(&run);
    let started = serde_json::to_string(&step_started(1).event).unwrap();
    staged.append_event_json(1, 5_001, started);
    let answer = Message::assistant("done");
    staged.append_message_json(0, crate::chat::encode_shared(&answer));
    let checkpoint = crate::agent::Checkpoint {
        steps: 1,
        messages: 1,
        stuck_warning: false,
    };
    staged.checkpoint(checkpoint);
    h.flush().await.unwrap();
    assert_eq!(
        h.inner.health.commits(),
        before,
        "nothing is sent before the release"
    );
    assert_eq!(h.resume_point("r").await.unwrap(), Some(created));
    assert!(h.events("r", 0).await.unwrap().is_empty());

    staged.release();
    h.flush().await.unwrap();
    assert_eq!(
        h.inner.health.commits(),
        before + 1,
        "the whole step in one commit"
    );
    let point = h.resume_point("r").await.unwrap().expect("kept");
    assert_eq!(point.summary.steps, 1);
    assert_eq!(point.checkpoint, Some(checkpoint));
    assert_eq!(point.messages, vec![(0, answer)]);
    let events = h.events("r", 0).await.unwrap();
    assert_eq!(events.len(), 1);
    assert!(matches!(
        events[0].event,
        RunEvent::StepStarted { step: 1, .. }
    ));
    assert_eq!(h.write_errors(), 0);
}

/// Writes still held when their `Staged` goes away are sent, not lost.
#[tokio::test]
async fn staged_writes_dropped_unreleased_are_still_committed() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(&dir);
    let mut run = summary("r", 1, RunState::Running);
    h.create_run(&run);
    let staged = h.staged("r");
    run.steps = 7;
    staged.save_run(&run);
    drop(staged);
    h.flush().await.unwrap();
    assert_eq!(h.summary("r").await.unwrap().unwrap().steps, 7);
}

fn plan_changed(seq: u64) -> EventLine {
    line(
        seq,
        RunEvent::PlanChanged {
            step: 1,
            plan: crate::plan::Plan {
                title: format!("plan {seq}"),
                steps: vec![],
            },
        },
    )
}

/// A run in flight, queued for the writer.
fn create_running(h: &History, id: &str) {
    let mut run = summary(id, 1, RunState::Running);
    run.outcome = None;
    h.create_run(&run);
}

/// How many rows hold run `id`'s events, and how many of them several.
async fn event_rows(h: &History, id: &str) -> (i64, i64) {
    let id = id.to_string();
    ask_writer(h, move |conn| {
        conn.query_row(
            "SELECT count(*), count(last_seq) FROM events WHERE run_id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
    })
    .await
}

/// A step's events, released together, are one row, not one each (schema
/// 6); every read splits it again: from its start, from inside it, a page
/// cut inside it, as lines byte for byte what the live log serves. A
/// `plan_changed` among them keeps a row of its own, which the plan's
/// partial index finds.
#[tokio::test]
async fn a_commits_events_of_a_run_are_one_row_and_read_back_event_by_event() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(&dir);
    create_running(&h, "r");
    let events: Vec<EventLine> = vec![
        step_started(1),
        line(
            2,
            RunEvent::ToolCall {
                step: 1,
                id: "c1".into(),
                name: "echo".into(),
                arguments: "{\"text\":\"line\\nbreak\"}".into(),
            },
        ),
        line(
            3,
            RunEvent::ToolResult {
                step: 1,
                id: "c1".into(),
                name: "echo".into(),
                ok: true,
                output: "a\nb".into(),
            },
        ),
        plan_changed(4),
        step_started(5),
        step_started(6),
    ];
    let staged = h.staged("r");
    for e in &events {
        staged.append_event_json(e.seq, e.at_ms, serde_json::to_string(&e.event).unwrap());
    }
    staged.release();
    h.flush().await.unwrap();

    assert_eq!(
        event_rows(&h, "r").await,
        (3, 2),
        "1..=3, the plan alone, 5..=6"
    );
    assert_eq!(h.events("r", 0).await.unwrap(), events);
    for after in 0..=6 {
        assert_eq!(
            h.events("r", after).await.unwrap(),
            events[after as usize..].to_vec(),
            "after {after}"
        );
    }
    let lines = |from: usize, to: usize| -> Vec<(u64, Vec<u8>)> {
        events[from..to]
            .iter()
            .map(|e| {
                let json = serde_json::to_string(&e.event).unwrap();
                (e.seq, crate::api::event_line(e.seq, e.at_ms, &json))
            })
            .collect()
    };
    assert_eq!(h.event_lines("r", 1, 2).await.unwrap(), lines(1, 3));
    assert_eq!(h.event_lines("r", 2, 3).await.unwrap(), lines(2, 5));
    assert_eq!(h.event_lines("r", 0, 100).await.unwrap(), lines(0, 6));
    assert!(h.event_lines("r", 0, 0).await.unwrap().is_empty());
    assert!(h.event_lines("r", 6, 10).await.unwrap().is_empty());

    let conn = rusqlite::Connection::open(h.path()).unwrap();
    let plans = plan_seqs(&conn, "r");
    assert_eq!(plans, vec![4]);
    assert!(super::read::PLAN_EVENTS.contains(super::event_rows::PLAN_PREFIX));
    // Both halves of the read seek the run's rows through the index.
    let steps: Vec<String> = conn
        .prepare(&format!("EXPLAIN QUERY PLAN {}", super::read::EVENT_ROWS))
        .unwrap()
        .query_map(rusqlite::params!["r", 3], |r| r.get::<_, String>(3))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(steps.iter().all(|s| !s.starts_with("SCAN")), "{steps:?}");
    assert!(
        steps
            .iter()
            .filter(|s| s.contains("run_id=? AND seq"))
            .count()
            >= 2,
        "{steps:?}"
    );
    assert_eq!(h.write_errors(), 0);
}

/// Start-up recovery numbers its `run_ended` after the last event of the
/// run's last row, and dates it by that row's latest event, when the
/// events before it are stored as one row in the same commit (the disk
/// refuses until all of them are queued, so they commit together).
#[tokio::test]
async fn interrupt_follows_the_last_event_of_a_row_of_several() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(&dir);
    hold_commits(&h, "r", 1).await;
    let staged = h.staged("r");
    for e in [step_started(1), step_started(2), step_started(3)] {
        staged.append_event_json(e.seq, e.at_ms, serde_json::to_string(&e.event).unwrap());
    }
    staged.release();
    assert!(
        h.interrupt_unfinished(77_000).await.is_err(),
        "refused for now, and kept behind the events"
    );
    disk_full(&h, false);
    h.flush().await.unwrap();
    assert_eq!(
        event_rows(&h, "r").await,
        (2, 1),
        "1..=3 as one row, then run_ended"
    );
    let events = h.events("r", 0).await.unwrap();
    assert_eq!(
        events.iter().map(|e| (e.seq, e.at_ms)).collect::<Vec<_>>(),
        vec![(1, 5_001), (2, 5_002), (3, 5_003), (4, 5_003)]
    );
    assert!(matches!(events[3].event, RunEvent::RunEnded { .. }));
    assert_eq!(h.write_errors(), 0);
}

/// A row that would hold an event already stored (its key alone does not
/// catch that: the stored row begins earlier) is tried again one event a
/// row: only that event is lost and counted, the next one is kept, and no
/// event is served twice.
#[tokio::test]
async fn a_refused_row_loses_only_its_bad_events_and_none_is_served_twice() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(&dir);
    create_running(&h, "r");
    let send = |events: &[EventLine]| {
        let staged = h.staged("r");
        for e in events {
            staged.append_event_json(e.seq, e.at_ms, serde_json::to_string(&e.event).unwrap());
        }
        staged.release();
    };
    send(&[step_started(1), step_started(2), step_started(3)]);
    h.flush().await.unwrap();
    send(&[step_started(3), step_started(4)]);
    h.flush().await.unwrap();
    assert_eq!(h.write_errors(), 1, "event 3 again");
    let all: Vec<EventLine> = (1..=4).map(step_started).collect();
    assert_eq!(h.events("r", 0).await.unwrap(), all);
    assert_eq!(h.events("r", 3).await.unwrap(), all[3..].to_vec());
    assert_eq!(h.event_lines("r", 1, 10).await.unwrap().len(), 3);
}

/// A row of several that does not read (a line out of place) is reported
/// as a corrupt history naming the run, not served short.
#[tokio::test]
async fn a_row_of_several_that_does_not_read_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(&dir);
    h.create_run(&summary("r", 1, RunState::Ended));
    h.flush().await.unwrap();
    ask_writer(&h, |conn| {
        conn.execute(
            "INSERT INTO events (run_id, seq, last_seq, at_ms, event)
             VALUES ('r', 1, 2, 5, '{\"seq\":1,\"at_ms\":5,\"type\":\"x\"}\n')",
            [],
        )
        .unwrap();
    })
    .await;
    let e = h.events("r", 0).await.unwrap_err().to_string();
    assert!(e.contains("run r") && e.contains("1..=2"), "{e}");
    assert!(h.event_lines("r", 0, 10).await.is_err());
}
