//! How events are stored: the events a run has in one commit go in one row
//! of `events` (schema 6), and are split again when read.
//!
//! Why: a step's five events were five rows, and storing them was about
//! half of the writer's work under `cargo bench --bench daemon` (README,
//! Benchmarks): five statements and five entries in the `(run_id, seq)`
//! index per step. One row holds them now: `seq` its first event's,
//! `last_seq` its last's, `at_ms` its last's (a run's last sign of life is
//! still `MAX(at_ms)`), and `event` the events' API lines, each
//! `{"seq":N,"at_ms":T,...}` and a newline, as `GET /v1/runs/{id}/events`
//! serves them. A row with a NULL `last_seq` holds the one event `seq` as
//! its object alone: every row written before schema 6, a run's single
//! event in a commit, and every `plan_changed` event, which the partial
//! index `events_plan` finds by the object's first bytes ([`PLAN_PREFIX`]).
//! Only consecutive seqs share a row, so a row never holds a gap and rows
//! never overlap: the rows from the one holding `after + 1` on hold every
//! event past `after`, in order.

use std::collections::HashMap;

use rusqlite::{params, Connection};

/// How a stored `plan_changed` event begins: serde writes the tag first.
/// `read::PLAN_EVENTS` and the partial index `events_plan` (schema 5)
/// test the same 23 bytes.
pub(super) const PLAN_PREFIX: &str = "{\"type\":\"plan_changed\",";

/// One event of a commit, by its place in the commit's list of writes.
struct Pending<'a> {
    write: usize,
    seq: i64,
    at_ms: i64,
    json: &'a str,
}

/// The events of one commit, gathered by run in the order their runs first
/// appear, to be stored as few rows as their seqs allow.
#[derive(Default)]
pub(super) struct EventRows<'a> {
    runs: Vec<(&'a str, Vec<Pending<'a>>)>,
    index: HashMap<&'a str, usize>,
}

/// Rows to insert: a run's consecutive events, with the writes they came
/// from (to count them if the row is refused).
pub(super) struct Row<'a> {
    pub run_id: &'a str,
    pub writes: Vec<usize>,
    first_seq: i64,
    last_seq: i64,
    last_at_ms: i64,
    /// The event's object alone for a row of one, else the events' lines.
    stored: Stored<'a>,
}

enum Stored<'a> {
    One(&'a str),
    Lines(String),
}

impl<'a> EventRows<'a> {
    /// Takes write `write`, event `seq` of `run_id`, to be stored with the
    /// run's others; `false` for a `plan_changed` event, which is stored as
    /// a row of its own, in order, by the caller.
    pub(super) fn gather(
        &mut self,
        write: usize,
        run_id: &'a str,
        seq: i64,
        at_ms: i64,
        json: &'a str,
    ) -> bool {
        if json.starts_with(PLAN_PREFIX) {
            return false;
        }
        let i = *self.index.entry(run_id).or_insert_with(|| {
            self.runs.push((run_id, Vec::new()));
            self.runs.len() - 1
        });
        self.runs[i].1.push(Pending {
            write,
            seq,
            at_ms,
            json,
        });
        true
    }

    /// The rows: each run's events cut where a seq is not the one after
    /// the last (events dropped while the disk refused, a `plan_changed`
    /// stored apart).
    pub(super) fn rows(self) -> impl Iterator<Item = Row<'a>> {
        self.runs.into_iter().flat_map(|(run_id, mut events)| {
            events.sort_by_key(|e| e.seq);
            let mut rows = Vec::new();
            let mut start = 0;
            for i in 1..=events.len() {
                if i == events.len() || events[i].seq != events[i - 1].seq.saturating_add(1) {
                    rows.push(Row::of(run_id, &events[start..i]));
                    start = i;
                }
            }
            rows
        })
    }
}

impl<'a> Row<'a> {
    /// `events`: consecutive, at least one.
    fn of(run_id: &'a str, events: &[Pending<'a>]) -> Row<'a> {
        let (first, last) = (&events[0], &events[events.len() - 1]);
        let stored = if events.len() == 1 {
            Stored::One(first.json)
        } else {
            let mut lines =
                String::with_capacity(events.iter().map(|e| e.json.len() + 48).sum::<usize>());
            for e in events {
                crate::api::push_event_line(&mut lines, e.seq, e.at_ms, e.json);
            }
            Stored::Lines(lines)
        };
        Row {
            run_id,
            writes: events.iter().map(|e| e.write).collect(),
            first_seq: first.seq,
            last_seq: last.seq,
            last_at_ms: last.at_ms,
            stored,
        }
    }

    pub(super) fn describe(&self) -> String {
        format!(
            "appending events {}..={} of run {}",
            self.first_seq, self.last_seq, self.run_id
        )
    }

    pub(super) fn insert(&self, conn: &Connection) -> rusqlite::Result<()> {
        match &self.stored {
            Stored::One(json) => {
                insert_one(conn, self.run_id, self.first_seq, self.last_at_ms, json)
            }
            Stored::Lines(lines) => conn
                .prepare_cached(
                    "INSERT INTO events (run_id, seq, last_seq, at_ms, event)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )?
                .execute(params![
                    self.run_id,
                    self.first_seq,
                    self.last_seq,
                    self.last_at_ms,
                    lines
                ])
                .map(drop),
        }
    }
}

/// One event in a row of its own, its object alone.
pub(super) fn insert_one(
    conn: &Connection,
    run_id: &str,
    seq: i64,
    at_ms: i64,
    json: &str,
) -> rusqlite::Result<()> {
    conn.prepare_cached("INSERT INTO events (run_id, seq, at_ms, event) VALUES (?1, ?2, ?3, ?4)")?
        .execute(params![run_id, seq, at_ms, json])
        .map(drop)
}

/// One event as a row holds it.
#[derive(Debug)]
pub(super) enum StoredEvent<'r> {
    /// A row of one: the event's object, its seq and time in the columns.
    One { seq: u64, at_ms: i64, json: &'r str },
    /// A line of a row of several: `{"seq":N,"at_ms":T,...}`, no newline.
    Line { seq: u64, line: &'r str },
}

impl StoredEvent<'_> {
    pub(super) fn seq(&self) -> u64 {
        match self {
            StoredEvent::One { seq, .. } | StoredEvent::Line { seq, .. } => *seq,
        }
    }
}

/// The events of a row (`seq`, `last_seq`, `at_ms`, `event`), in order;
/// `Err` names what is wrong with a row of several that does not read.
pub(super) fn split<'r>(
    seq: u64,
    last_seq: Option<u64>,
    at_ms: i64,
    event: &'r str,
) -> Result<Vec<StoredEvent<'r>>, String> {
    let Some(last) = last_seq else {
        return Ok(vec![StoredEvent::One {
            seq,
            at_ms,
            json: event,
        }]);
    };
    let mut events = Vec::new();
    let mut expected = seq;
    for line in event.split_terminator('\n') {
        let found = line_seq(line).ok_or_else(|| {
            format!("a line of the events {seq}..={last} does not begin with its seq")
        })?;
        if found != expected || found > last {
            return Err(format!(
                "the events {seq}..={last} hold event {found} where {expected} belongs"
            ));
        }
        events.push(StoredEvent::Line { seq: found, line });
        expected = found.saturating_add(1);
    }
    if expected != last.saturating_add(1) {
        return Err(format!(
            "the events {seq}..={last} end at {}",
            expected.saturating_sub(1)
        ));
    }
    Ok(events)
}

/// The seq an API line begins with (`{"seq":N,`).
fn line_seq(line: &str) -> Option<u64> {
    let rest = line.strip_prefix("{\"seq\":")?;
    let digits = rest.find(|c: char| !c.is_ascii_digit())?;
    rest[..digits].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gathered<'a>(events: &[(&'a str, i64, &'a str)]) -> Vec<(String, Vec<usize>, i64, i64)> {
        let mut rows = EventRows::default();
        for (i, (run, seq, json)) in events.iter().enumerate() {
            rows.gather(i, run, *seq, 1_000 + seq, json);
        }
        rows.rows()
            .map(|r| (r.run_id.to_string(), r.writes, r.first_seq, r.last_seq))
            .collect()
    }

    #[test]
    fn a_runs_consecutive_events_share_a_row_and_a_gap_cuts_it() {
        let e = r#"{"type":"step_started","step":1,"max_steps":3}"#;
        let rows = gathered(&[
            ("a", 1, e),
            ("b", 7, e),
            ("a", 2, e),
            ("a", 3, e),
            ("b", 8, e),
            ("a", 5, e),
        ]);
        assert_eq!(
            rows,
            vec![
                ("a".into(), vec![0, 2, 3], 1, 3),
                ("a".into(), vec![5], 5, 5),
                ("b".into(), vec![1, 4], 7, 8),
            ]
        );
    }

    #[test]
    fn a_plan_event_is_left_to_a_row_of_its_own() {
        let mut rows = EventRows::default();
        let plan = r#"{"type":"plan_changed","step":1,"plan":{"title":"t","steps":[]}}"#;
        assert!(!rows.gather(0, "a", 1, 1, plan));
        assert!(rows.gather(1, "a", 2, 1, r#"{"type":"step_started"}"#));
        assert_eq!(rows.rows().count(), 1);
    }

    #[test]
    fn a_row_of_several_splits_into_its_lines_and_a_bad_one_is_refused() {
        let mut lines = String::new();
        crate::api::push_event_line(&mut lines, 4, 10, r#"{"type":"a"}"#);
        crate::api::push_event_line(&mut lines, 5, 11, r#"{"type":"b"}"#);
        let events = split(4, Some(5), 11, &lines).unwrap();
        let seqs: Vec<(u64, &str)> = events
            .iter()
            .map(|e| match e {
                StoredEvent::Line { seq, line } => (*seq, *line),
                StoredEvent::One { .. } => panic!("a line"),
            })
            .collect();
        assert_eq!(
            seqs,
            vec![
                (4, r#"{"seq":4,"at_ms":10,"type":"a"}"#),
                (5, r#"{"seq":5,"at_ms":11,"type":"b"}"#)
            ]
        );
        assert!(matches!(
            split(4, None, 3, r#"{"type":"a"}"#).unwrap()[..],
            [StoredEvent::One {
                seq: 4,
                at_ms: 3,
                ..
            }]
        ));
        assert!(split(4, Some(6), 11, &lines)
            .unwrap_err()
            .contains("end at 5"));
        assert!(split(3, Some(5), 11, &lines)
            .unwrap_err()
            .contains("where 3 belongs"));
        assert!(split(4, Some(5), 11, "not a line\n").is_err());
    }
}
