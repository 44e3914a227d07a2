//! How events are stored: the events a run has in one commit go in one row
//! of `events` (schema 6), and are split again when read.
//!
//! Why: a step's five events were five rows, and storing them was about
//! half of the writer's work under `cargo bench --bench daemon` (README,
//! Benchmarks): five statements and five entries in the `(run_id, seq)`
//! index per step. One row holds them now (at most [`MAX_ROW_EVENTS`]
//! events and about [`MAX_ROW_BYTES`], so that a reader paging through a
//! run reads each row about once): `seq` its first event's, `last_seq` its
//! last's, `at_ms` the latest of their times (a run's last sign of life is
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

use rusqlite::{params, Connection, OptionalExtension};

/// How a stored `plan_changed` event begins: serde writes the tag first.
/// `read::PLAN_EVENTS` and the partial index `events_plan` (schema 5)
/// test the same 23 bytes.
pub(super) const PLAN_PREFIX: &str = "{\"type\":\"plan_changed\",";

/// Most events in one row: a page of `GET /v1/runs/{id}/events` read from
/// the history (`event_log`'s 64), so that paging through a run whose
/// events piled up in one commit (a disk that refused writes for a while)
/// does not read the same large row once per page.
pub(super) const MAX_ROW_EVENTS: usize = 64;

/// About the most bytes of events in one row, for the same reason.
pub(super) const MAX_ROW_BYTES: usize = 64 << 10;

/// A row of several events that does not read back as the writer wrote it.
#[derive(Debug, thiserror::Error)]
#[error("the row of events {first}..={last} {problem}")]
pub(super) struct BadRow {
    first: u64,
    last: u64,
    problem: String,
}

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
    /// The row's events, in seq order, with the writes they came from.
    events: Vec<Pending<'a>>,
    /// The latest of the events' times.
    at_ms: i64,
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
    /// stored apart) and where a row is full.
    pub(super) fn rows(self) -> impl Iterator<Item = Row<'a>> {
        self.runs.into_iter().flat_map(|(run_id, mut events)| {
            events.sort_by_key(|e| e.seq);
            let mut rows = Vec::new();
            let mut current: Vec<Pending<'a>> = Vec::new();
            let mut bytes = 0;
            for event in events {
                let follows = current
                    .last()
                    .is_some_and(|last| last.seq.checked_add(1) == Some(event.seq));
                let full = current.len() >= MAX_ROW_EVENTS || bytes >= MAX_ROW_BYTES;
                if !current.is_empty() && (!follows || full) {
                    rows.push(Row::of(run_id, std::mem::take(&mut current)));
                    bytes = 0;
                }
                bytes += event.json.len();
                current.push(event);
            }
            if !current.is_empty() {
                rows.push(Row::of(run_id, current));
            }
            rows
        })
    }
}

impl<'a> Row<'a> {
    /// `events`: consecutive, at least one (`rows` makes no empty row).
    fn of(run_id: &'a str, events: Vec<Pending<'a>>) -> Row<'a> {
        let at_ms = events.iter().map(|e| e.at_ms).max().unwrap_or_default();
        let stored = match &events[..] {
            [one] => Stored::One(one.json),
            several => {
                let mut lines =
                    String::with_capacity(several.iter().map(|e| e.json.len() + 48).sum::<usize>());
                for e in several {
                    crate::api::push_event_line(&mut lines, e.seq, e.at_ms, e.json);
                }
                Stored::Lines(lines)
            }
        };
        Row {
            run_id,
            events,
            at_ms,
            stored,
        }
    }

    /// The writes the row's events came from, in seq order.
    pub(super) fn writes(&self) -> impl Iterator<Item = usize> + '_ {
        self.events.iter().map(|e| e.write)
    }

    pub(super) fn len(&self) -> usize {
        self.events.len()
    }

    pub(super) fn describe(&self) -> String {
        let (first, last) = (self.events.first(), self.events.last());
        format!(
            "appending events {}..={} of run {}",
            first.map_or(0, |e| e.seq),
            last.map_or(0, |e| e.seq),
            self.run_id
        )
    }

    pub(super) fn insert(&self, conn: &Connection) -> rusqlite::Result<()> {
        let (Some(first), Some(last)) = (self.events.first(), self.events.last()) else {
            return Ok(());
        };
        if stored_any(conn, self.run_id, first.seq, last.seq)? {
            return Err(already_stored());
        }
        match &self.stored {
            Stored::One(json) => insert_one(conn, self.run_id, first.seq, self.at_ms, json),
            Stored::Lines(lines) => conn
                .prepare_cached(
                    "INSERT INTO events (run_id, seq, last_seq, at_ms, event)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )?
                .execute(params![self.run_id, first.seq, last.seq, self.at_ms, lines])
                .map(drop),
        }
    }

    /// The row's events one row each, for a row refused by itself: only
    /// the events that are wrong by themselves (a seq already stored) are
    /// then lost. Each with the write it came from, its seq and how it went.
    pub(super) fn insert_each<'s>(
        &'s self,
        conn: &'s Connection,
    ) -> impl Iterator<Item = (usize, i64, rusqlite::Result<()>)> + 's {
        self.events.iter().map(move |e| {
            let inserted = match stored_any(conn, self.run_id, e.seq, e.seq) {
                Ok(false) => insert_one(conn, self.run_id, e.seq, e.at_ms, e.json),
                Ok(true) => Err(already_stored()),
                Err(e) => Err(e),
            };
            (e.write, e.seq, inserted)
        })
    }
}

/// An event whose seq run already has: refused like a duplicate key, which
/// a row's key alone no longer catches (a row holds several seqs).
#[derive(Debug, thiserror::Error)]
#[error("the run has this event already")]
struct AlreadyStored;

fn already_stored() -> rusqlite::Error {
    // Not a storage error: the write is wrong by itself, counted and dropped.
    rusqlite::Error::ToSqlConversionFailure(Box::new(AlreadyStored))
}

/// Whether run `run_id` has an event stored in `first..=last`: in the row
/// that begins last at or before `first` (rows never overlap, so no earlier
/// one reaches further), or in a row that begins after it. Two seeks of
/// the `(run_id, seq)` index, whose pages the insert that follows touches
/// anyway; what keeps rows from overlapping, which reads rely on.
fn stored_any(conn: &Connection, run_id: &str, first: i64, last: i64) -> rusqlite::Result<bool> {
    let reach: Option<i64> = conn
        .prepare_cached(
            "SELECT COALESCE(last_seq, seq) FROM events WHERE run_id = ?1 AND seq <= ?2
             ORDER BY seq DESC LIMIT 1",
        )?
        .query_row(params![run_id, first], |r| r.get(0))
        .optional()?;
    if reach.is_some_and(|end| end >= first) {
        return Ok(true);
    }
    conn.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM events WHERE run_id = ?1 AND seq > ?2 AND seq <= ?3)",
    )?
    .query_row(params![run_id, first, last], |r| r.get(0))
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

/// The events of a row (`seq`, `last_seq`, `at_ms`, `event`), in order,
/// or what is wrong with a row of several that does not read.
pub(super) fn split<'r>(
    seq: u64,
    last_seq: Option<u64>,
    at_ms: i64,
    event: &'r str,
) -> Result<Vec<StoredEvent<'r>>, BadRow> {
    let Some(last) = last_seq else {
        return Ok(vec![StoredEvent::One {
            seq,
            at_ms,
            json: event,
        }]);
    };
    let bad = |problem: String| BadRow {
        first: seq,
        last,
        problem,
    };
    let mut events = Vec::new();
    let mut expected = seq;
    for line in event.split_terminator('\n') {
        let found = line_seq(line)
            .ok_or_else(|| bad("has a line that does not begin with its seq".into()))?;
        if found != expected || found > last {
            return Err(bad(format!("holds event {found} where {expected} belongs")));
        }
        events.push(StoredEvent::Line { seq: found, line });
        expected = found.saturating_add(1);
    }
    if expected != last.saturating_add(1) {
        return Err(bad(format!("ends at {}", expected.saturating_sub(1))));
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

    fn gathered<'a>(events: &[(&'a str, i64, &'a str)]) -> Vec<(String, Vec<usize>)> {
        let mut rows = EventRows::default();
        for (i, (run, seq, json)) in events.iter().enumerate() {
            rows.gather(i, run, *seq, seq.saturating_add(1_000), json);
        }
        rows.rows()
            .map(|r| (r.run_id.to_string(), r.writes().collect()))
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
                ("a".into(), vec![0, 2, 3]),
                ("a".into(), vec![5]),
                ("b".into(), vec![1, 4]),
            ]
        );
    }

    #[test]
    fn a_row_is_cut_when_full_and_seqs_at_the_limit_do_not_join() {
        let e = r#"{"type":"step_started","step":1,"max_steps":3}"#;
        let many: Vec<(&str, i64, &str)> = (1..=150).map(|seq| ("a", seq, e)).collect();
        let sizes: Vec<usize> = gathered(&many).iter().map(|(_, w)| w.len()).collect();
        assert_eq!(sizes, vec![64, 64, 22]);
        let big = "x".repeat(40 << 10);
        let sizes: Vec<usize> = gathered(&[("a", 1, &big), ("a", 2, &big), ("a", 3, e)])
            .iter()
            .map(|(_, w)| w.len())
            .collect();
        assert_eq!(sizes, vec![2, 1], "cut once past 64 KiB");
        assert_eq!(gathered(&[("a", i64::MAX, e), ("a", i64::MAX, e)]).len(), 2);
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
        let err =
            |first, last, text: &str| split(first, Some(last), 11, text).unwrap_err().to_string();
        assert_eq!(err(4, 6, &lines), "the row of events 4..=6 ends at 5");
        assert_eq!(
            err(3, 5, &lines),
            "the row of events 3..=5 holds event 4 where 3 belongs"
        );
        assert!(split(4, Some(5), 11, "not a line\n").is_err());
    }
}
