//! Reads, on read-only connections of their own: under WAL each sees the
//! last commit and neither waits for the writer nor makes it wait.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rusqlite::{params, Connection, OptionalExtension, Row};

use super::event_rows::{self, StoredEvent};
use super::{schema, HistoryError};
use crate::agent::Checkpoint;
use crate::agent::{Outcome, RunEvent};
use crate::api::{
    EventLine, ResumeLinks, RunList, RunState, RunSummary, RunView, LIST_REQUEST_CHARS,
    LIST_RESULT_CHARS,
};
use crate::chat::Message;
use crate::chat::Usage;
use crate::daemon::paging::PageRequest;
use crate::plan::Plan;
use crate::sync::LockExt;

/// Idle connections kept for reuse; more may be open at once when reads
/// overlap, the extra ones are closed after use.
const MAX_IDLE: usize = 4;

/// A run's row and its request, which has a table of its own (it is written
/// once, the row at every step). A run always has a request row (both are
/// written in one transaction); a left join still serves a run that lost it
/// (with an empty request) rather than hiding it.
const RUN_FROM: &str = "runs LEFT JOIN requests ON requests.run_id = runs.id";

/// The columns [`RawRun::from_row`] reads, with the request and the result
/// given as SQL expressions.
fn run_columns(request: &str, result: &str) -> String {
    format!(
        "runs.id, runs.seq, runs.agent, {request}, runs.state, runs.outcome, runs.steps, \
         runs.max_steps, {result}, runs.error, runs.prompt_tokens, runs.completion_tokens, \
         runs.created_at_ms, runs.started_at_ms, runs.ended_at_ms, runs.resumed_from, \
         runs.resumed_at_step, runs.resumed_messages, \
         (SELECT later.id FROM runs AS later WHERE later.resumed_from = runs.id), runs.cost"
    )
}

/// All of a run's row, request and result whole.
fn full_columns() -> String {
    run_columns("coalesce(requests.request, '')", "runs.result")
}

/// As [`full_columns`] with the request and the result cut for a list row,
/// and whether they were: SQLite cuts them, so a page of rows never hands
/// whole requests or results to the daemon.
fn list_columns() -> String {
    let (n, m) = (LIST_REQUEST_CHARS, LIST_RESULT_CHARS);
    run_columns(
        &format!("substr(coalesce(requests.request, ''), 1, {n})"),
        &format!("substr(runs.result, 1, {m})"),
    ) + &format!(
        ", coalesce(length(requests.request) > {n}, 0), coalesce(length(runs.result) > {m}, 0)"
    )
}

/// A run as [`History::resume_point`] reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct ResumePoint {
    pub summary: RunSummary,
    /// `None`: the run was recorded before checkpoints existed (schema 2).
    pub checkpoint: Option<Checkpoint>,
    /// The stored messages below the checkpoint, with their indexes: a
    /// gap means some were dropped while the disk refused writes.
    pub messages: Vec<(u32, Message)>,
    /// The run's plan at the checkpoint: its last `plan_changed` event of a
    /// completed step (a plan published in a step that did not complete
    /// belongs with that step's messages, which are not carried either).
    pub plan: Option<Plan>,
}

/// A run's `plan_changed` events, newest first. Each is stored in a row of
/// its own, as its object alone (`event_rows`), which begins with its tag
/// (serde writes it first), so they are told from the others by their
/// first 23 bytes, [`event_rows::PLAN_PREFIX`]: the condition of the
/// partial index `events_plan` (schema migration 5), written here word for
/// word so that SQLite seeks through that index.
pub(super) const PLAN_EVENTS: &str = "SELECT seq, event FROM events \
     WHERE run_id = ?1 AND substr(event, 1, 23) = '{\"type\":\"plan_changed\",' \
     ORDER BY seq DESC";

/// The rows of a run's events from the one holding event `?2` on, in
/// order: the subquery seeks the last row that begins at or before it (a
/// row may hold several events, `event_rows`), the outer query reads on
/// from there through the same `(run_id, seq)` index.
pub(super) const EVENT_ROWS: &str = "SELECT seq, last_seq, at_ms, event FROM events \
     WHERE run_id = ?1 AND seq >= \
     COALESCE((SELECT MAX(seq) FROM events WHERE run_id = ?1 AND seq <= ?2), 0) \
     ORDER BY seq";

/// How far up a chain of resumed runs a carried plan is looked for.
const MAX_CHAIN: usize = 64;

/// Opening a connection parses the schema; keeping a few idle ones makes a
/// read cost only its query.
pub(super) struct Readers {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
}

impl Readers {
    pub(super) fn new(path: PathBuf) -> Self {
        Readers {
            path,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Runs `f` on a pooled connection, inside one read transaction so that
    /// everything it reads comes from the same commit.
    pub(super) fn with<T>(
        &self,
        f: impl FnOnce(&mut Reader<'_>) -> Result<T, HistoryError>,
    ) -> Result<T, HistoryError> {
        let pooled = self.idle.lock_unpoisoned().pop();
        let mut conn = match pooled {
            Some(conn) => conn,
            None => schema::open_reader(&self.path)?,
        };
        let result = (|| {
            let tx = conn.transaction().map_err(|e| sqlite(&self.path, e))?;
            f(&mut Reader {
                conn: &tx,
                path: &self.path,
            })
            // Dropping the read transaction rolls it back: nothing to keep.
        })();
        let mut idle = self.idle.lock_unpoisoned();
        // A connection left inside a transaction (its rollback failed) would
        // serve a stale snapshot forever: it is closed, not kept.
        if idle.len() < MAX_IDLE && conn.is_autocommit() {
            idle.push(conn);
        }
        result
    }
}

pub(super) struct Reader<'a> {
    conn: &'a Connection,
    path: &'a Path,
}

impl Reader<'_> {
    pub(super) fn summary(&mut self, id: &str) -> Result<Option<RunSummary>, HistoryError> {
        let sql = format!(
            "SELECT {} FROM {RUN_FROM} WHERE runs.id = ?1",
            full_columns()
        );
        let raw = self
            .conn
            .prepare_cached(&sql)
            .and_then(|mut stmt| stmt.query_row([id], RawRun::from_row).optional())
            .map_err(|e| self.sqlite(e))?;
        raw.map(|raw| raw.into_summary(self.path)).transpose()
    }

    /// The summary and one page of messages. Rows are read one at a time
    /// and the page stops at its byte budget, so a transcript of any size
    /// costs at most one page of memory.
    pub(super) fn get(
        &mut self,
        id: &str,
        page: PageRequest,
    ) -> Result<Option<RunView>, HistoryError> {
        let Some(summary) = self.summary(id)? else {
            return Ok(None);
        };
        let total: u32 = self
            .conn
            .prepare_cached("SELECT count(*) FROM messages WHERE run_id = ?1")
            .and_then(|mut stmt| stmt.query_row([id], |row| row.get(0)))
            .map_err(|e| self.sqlite(e))?;
        let mut rows: Vec<(u32, String)> = Vec::new();
        {
            let mut stmt = self
                .conn
                .prepare_cached(
                    "SELECT idx, message FROM messages WHERE run_id = ?1 AND idx >= ?2 \
                     ORDER BY idx LIMIT ?3",
                )
                .map_err(|e| self.sqlite(e))?;
            let mut cursor = stmt
                .query(params![id, page.from, page.limit])
                .map_err(|e| sqlite(self.path, e))?;
            let mut bytes = 0usize;
            while let Some(row) = cursor.next().map_err(|e| sqlite(self.path, e))? {
                let idx: u32 = row.get(0).map_err(|e| sqlite(self.path, e))?;
                let json: String = row.get(1).map_err(|e| sqlite(self.path, e))?;
                if !page.fits(rows.len(), bytes, json.len()) {
                    break;
                }
                bytes = bytes.saturating_add(json.len());
                rows.push((idx, json));
            }
        }
        let taken = rows.len();
        let plan = self.plan_at(id, u32::MAX)?;
        let messages = rows
            .into_iter()
            .map(|(idx, json)| {
                serde_json::from_str::<Message>(&json)
                    .map_err(|e| self.corrupt(format!("message {idx} of run {id}: {e}")))
            })
            .collect::<Result<_, _>>()?;
        Ok(Some(RunView {
            summary,
            plan,
            messages,
            paging: page.paging(taken, total as usize),
            files: None,
        }))
    }

    /// The run's last checkpoint (`None`: recorded before checkpoints
    /// existed) and the messages of its transcript up to it, in one
    /// snapshot. Messages missing below the checkpoint (dropped while the
    /// disk refused writes) are left out, so the caller sees the hole.
    pub(super) fn resume_point(&mut self, id: &str) -> Result<Option<ResumePoint>, HistoryError> {
        let Some(summary) = self.summary(id)? else {
            return Ok(None);
        };
        let stored: (Option<u32>, Option<u32>, Option<bool>) = self
            .conn
            .prepare_cached(
                "SELECT checkpoint_steps, checkpoint_messages, checkpoint_stuck FROM runs \
                 WHERE id = ?1",
            )
            .and_then(|mut stmt| {
                stmt.query_row([id], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
            })
            .map_err(|e| self.sqlite(e))?;
        let (Some(steps), Some(messages), stuck) = stored else {
            return Ok(Some(ResumePoint {
                summary,
                checkpoint: None,
                messages: Vec::new(),
                plan: None,
            }));
        };
        let checkpoint = Checkpoint {
            steps,
            messages,
            stuck_warning: stuck.unwrap_or(false),
        };
        let rows: Vec<(u32, String)> = self
            .conn
            .prepare_cached(
                "SELECT idx, message FROM messages WHERE run_id = ?1 AND idx < ?2 ORDER BY idx",
            )
            .and_then(|mut stmt| {
                stmt.query_map(params![id, messages], |row| Ok((row.get(0)?, row.get(1)?)))?
                    .collect()
            })
            .map_err(|e| self.sqlite(e))?;
        let messages = rows
            .into_iter()
            .map(|(idx, json)| {
                serde_json::from_str::<Message>(&json)
                    .map(|m| (idx, m))
                    .map_err(|e| self.corrupt(format!("message {idx} of run {id}: {e}")))
            })
            .collect::<Result<_, _>>()?;
        let plan = self.carried_plan(id, checkpoint.steps, &summary.resume)?;
        Ok(Some(ResumePoint {
            summary,
            checkpoint: Some(checkpoint),
            messages,
            plan,
        }))
    }

    /// The plan a run resumed from `id` after `step` starts with: `id`'s
    /// own, else (a resumed run that never started, so never recorded the
    /// plan it carried) its predecessor's at the step it resumed after, up
    /// the chain. Bounded, so a corrupt cycle of links cannot loop.
    fn carried_plan(
        &self,
        id: &str,
        step: u32,
        links: &ResumeLinks,
    ) -> Result<Option<Plan>, HistoryError> {
        if let Some(plan) = self.plan_at(id, step)? {
            return Ok(Some(plan));
        }
        let mut from = links.resumed_from.clone().zip(links.resumed_at_step);
        for _ in 0..MAX_CHAIN {
            let Some((prev, at)) = from else { break };
            if let Some(plan) = self.plan_at(&prev, at)? {
                return Ok(Some(plan));
            }
            from = self
                .conn
                .prepare_cached("SELECT resumed_from, resumed_at_step FROM runs WHERE id = ?1")
                .and_then(|mut stmt| {
                    stmt.query_row([&prev], |row| {
                        Ok(row
                            .get::<_, Option<String>>(0)?
                            .zip(row.get::<_, Option<u32>>(1)?))
                    })
                    .optional()
                })
                .map_err(|e| self.sqlite(e))?
                .flatten();
        }
        Ok(None)
    }

    /// The plan of the run's last `plan_changed` event of a step up to
    /// `step` (`u32::MAX`: its latest), `None` when there is none. The
    /// plan is kept in its events, not in the row: the row is rewritten at
    /// every step and a plan may be 64 KiB, while a change's event is
    /// written once. Newest first, stopping at the first that fits.
    fn plan_at(&self, id: &str, step: u32) -> Result<Option<Plan>, HistoryError> {
        let mut stmt = self
            .conn
            .prepare_cached(PLAN_EVENTS)
            .map_err(|e| self.sqlite(e))?;
        let mut rows = stmt.query([id]).map_err(|e| sqlite(self.path, e))?;
        while let Some(row) = rows.next().map_err(|e| sqlite(self.path, e))? {
            let seq: i64 = row.get(0).map_err(|e| sqlite(self.path, e))?;
            let json: String = row.get(1).map_err(|e| sqlite(self.path, e))?;
            match serde_json::from_str::<RunEvent>(&json) {
                Ok(RunEvent::PlanChanged { step: at, plan }) if at <= step => {
                    return Ok(Some(plan))
                }
                Ok(_) => {}
                Err(e) => {
                    return Err(HistoryError::Corrupt {
                        path: self.path.to_path_buf(),
                        detail: format!("event {seq} of run {id}: {e}"),
                    })
                }
            }
        }
        Ok(None)
    }

    /// Tokens (input plus output) per agent of the runs active since
    /// `since_ms`: not ended before it (ended since, or still unfinished),
    /// each run counted whole. What `daemon::budget` starts the day with.
    /// A run interrupted by a crash ended at its last event (`interrupt`),
    /// so only runs that did work today count; one that ran across
    /// midnight counts whole, yesterday's tokens included: a budget errs
    /// on the side of spending less.
    pub(super) fn tokens_since(
        &mut self,
        since_ms: i64,
    ) -> Result<Vec<(String, u64)>, HistoryError> {
        self.conn
            .prepare_cached(
                "SELECT agent, SUM(prompt_tokens + completion_tokens) FROM runs
                 WHERE ended_at_ms IS NULL OR ended_at_ms >= ?1 GROUP BY agent",
            )
            .and_then(|mut stmt| {
                stmt.query_map([since_ms], |row| {
                    let tokens: i64 = row.get(1)?;
                    Ok((row.get(0)?, u64::try_from(tokens).unwrap_or(0)))
                })?
                .collect()
            })
            .map_err(|e| self.sqlite(e))
    }

    pub(super) fn list(
        &mut self,
        limit: u32,
        before: Option<i64>,
    ) -> Result<RunList, HistoryError> {
        let sql = format!(
            "SELECT {} FROM {RUN_FROM} WHERE runs.seq < ?1 ORDER BY runs.seq DESC LIMIT ?2",
            list_columns()
        );
        // One row more than asked says whether another page exists.
        let mut raws: Vec<RawRun> = self
            .conn
            .prepare_cached(&sql)
            .and_then(|mut stmt| {
                stmt.query_map(
                    params![before.unwrap_or(i64::MAX), i64::from(limit) + 1],
                    RawRun::from_list_row,
                )?
                .collect()
            })
            .map_err(|e| self.sqlite(e))?;
        let more = raws.len() > limit as usize;
        raws.truncate(limit as usize);
        let runs = raws
            .into_iter()
            .map(|raw| raw.into_summary(self.path))
            .collect::<Result<Vec<_>, _>>()?;
        let next_before = if more {
            runs.last().map(|run| run.seq)
        } else {
            None
        };
        Ok(RunList { runs, next_before })
    }

    pub(super) fn events(&mut self, id: &str, after: u64) -> Result<Vec<EventLine>, HistoryError> {
        let mut events = Vec::new();
        self.each_event(id, after, |event| {
            events.push(match event {
                StoredEvent::One { seq, at_ms, json } => EventLine {
                    seq,
                    at_ms,
                    event: serde_json::from_str::<RunEvent>(json)
                        .map_err(|e| format!("event {seq} of run {id}: {e}"))?,
                },
                StoredEvent::Line { seq, line } => serde_json::from_str::<EventLine>(line)
                    .map_err(|e| format!("event {seq} of run {id}: {e}"))?,
            });
            Ok(true)
        })?;
        Ok(events)
    }

    pub(super) fn event_lines(
        &mut self,
        id: &str,
        after: u64,
        limit: u32,
    ) -> Result<Vec<(u64, Vec<u8>)>, HistoryError> {
        let mut lines = Vec::new();
        if limit == 0 {
            return Ok(lines);
        }
        self.each_event(id, after, |event| {
            lines.push(match event {
                StoredEvent::One { seq, at_ms, json } => {
                    (seq, crate::api::event_line(seq, at_ms, json))
                }
                StoredEvent::Line { seq, line } => {
                    let mut bytes = Vec::with_capacity(line.len() + 1);
                    bytes.extend_from_slice(line.as_bytes());
                    bytes.push(b'\n');
                    (seq, bytes)
                }
            });
            Ok(lines.len() < limit as usize)
        })?;
        Ok(lines)
    }

    /// Calls `f` with each stored event of run `id` past `after`, in
    /// order, until it returns `false`. Rows may hold several events
    /// (`event_rows`): the rows read begin with the one holding
    /// `after + 1`, found by a seek of the `(run_id, seq)` index, and the
    /// events at or before `after` in it are skipped. `f`'s `Err` (an event
    /// that does not read) is reported as a corrupt history.
    fn each_event(
        &mut self,
        id: &str,
        after: u64,
        mut f: impl FnMut(StoredEvent<'_>) -> Result<bool, String>,
    ) -> Result<(), HistoryError> {
        // Stored seqs never exceed i64::MAX, so clamping loses no event.
        let from = i64::try_from(after.saturating_add(1)).unwrap_or(i64::MAX);
        let mut stmt = self
            .conn
            .prepare_cached(EVENT_ROWS)
            .map_err(|e| self.sqlite(e))?;
        let mut rows = stmt
            .query(params![id, from])
            .map_err(|e| sqlite(self.path, e))?;
        let columns = |row: &Row<'_>| -> rusqlite::Result<(u64, Option<u64>, i64, String)> {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
        };
        let corrupt = |detail: String| HistoryError::Corrupt {
            path: self.path.to_path_buf(),
            detail,
        };
        // The last seq served: rows never overlap as the writer stores
        // them, and an event met again (a file edited by hand) is skipped
        // rather than served twice.
        let mut served = after;
        while let Some(row) = rows.next().map_err(|e| sqlite(self.path, e))? {
            let (seq, last_seq, at_ms, text) = columns(row).map_err(|e| sqlite(self.path, e))?;
            let events = event_rows::split(seq, last_seq, at_ms, &text)
                .map_err(|e| corrupt(format!("run {id}: {e}")))?;
            for event in events {
                if event.seq() <= served {
                    continue;
                }
                served = event.seq();
                if !f(event).map_err(corrupt)? {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    fn sqlite(&self, source: rusqlite::Error) -> HistoryError {
        sqlite(self.path, source)
    }

    fn corrupt(&self, detail: String) -> HistoryError {
        HistoryError::Corrupt {
            path: self.path.to_path_buf(),
            detail,
        }
    }
}

fn sqlite(path: &Path, source: rusqlite::Error) -> HistoryError {
    HistoryError::Sqlite {
        path: path.to_path_buf(),
        source,
    }
}

/// A row as stored; the text columns are checked in `into_summary`, where a
/// bad value can be reported with the run it belongs to.
struct RawRun {
    id: String,
    seq: i64,
    agent: String,
    request: String,
    state: String,
    outcome: Option<String>,
    steps: u32,
    max_steps: Option<u32>,
    result: Option<String>,
    error: Option<String>,
    prompt_tokens: u64,
    completion_tokens: u64,
    cost: Option<f64>,
    created_at_ms: i64,
    started_at_ms: Option<i64>,
    ended_at_ms: Option<i64>,
    resume: ResumeLinks,
    request_truncated: bool,
    result_truncated: bool,
}

impl RawRun {
    fn from_row(row: &Row<'_>) -> rusqlite::Result<Self> {
        Ok(RawRun {
            id: row.get(0)?,
            seq: row.get(1)?,
            agent: row.get(2)?,
            request: row.get(3)?,
            state: row.get(4)?,
            outcome: row.get(5)?,
            steps: row.get(6)?,
            max_steps: row.get(7)?,
            result: row.get(8)?,
            error: row.get(9)?,
            prompt_tokens: row.get(10)?,
            completion_tokens: row.get(11)?,
            cost: row.get(19)?,
            created_at_ms: row.get(12)?,
            started_at_ms: row.get(13)?,
            ended_at_ms: row.get(14)?,
            resume: ResumeLinks {
                resumed_from: row.get(15)?,
                resumed_at_step: row.get(16)?,
                resumed_messages: row.get(17)?,
                resumed_by: row.get(18)?,
            },
            request_truncated: false,
            result_truncated: false,
        })
    }

    /// A row of [`list_columns`].
    fn from_list_row(row: &Row<'_>) -> rusqlite::Result<Self> {
        let mut raw = Self::from_row(row)?;
        raw.request_truncated = row.get(20)?;
        raw.result_truncated = row.get(21)?;
        Ok(raw)
    }

    fn into_summary(self, path: &Path) -> Result<RunSummary, HistoryError> {
        let corrupt = |detail: String| HistoryError::Corrupt {
            path: path.to_path_buf(),
            detail,
        };
        let state = RunState::parse(&self.state)
            .ok_or_else(|| corrupt(format!("run {}: unknown state `{}`", self.id, self.state)))?;
        let outcome = self
            .outcome
            .map(|s| {
                parse_outcome(&s)
                    .ok_or_else(|| corrupt(format!("run {}: unknown outcome `{s}`", self.id)))
            })
            .transpose()?;
        Ok(RunSummary {
            id: self.id,
            seq: self.seq,
            agent: self.agent,
            request: self.request,
            request_truncated: self.request_truncated,
            state,
            waiting: None,
            outcome,
            steps: self.steps,
            max_steps: self.max_steps,
            result: self.result,
            result_truncated: self.result_truncated,
            error: self.error,
            usage: Usage {
                prompt_tokens: self.prompt_tokens,
                completion_tokens: self.completion_tokens,
            },
            cost: self.cost,
            created_at_ms: self.created_at_ms,
            started_at_ms: self.started_at_ms,
            ended_at_ms: self.ended_at_ms,
            resume: self.resume,
        })
    }
}

/// Through serde, so the names stay those of the wire format (which
/// `Outcome::as_str`, used to write them, matches).
pub(super) fn parse_outcome(s: &str) -> Option<Outcome> {
    serde_json::from_value(serde_json::Value::String(s.to_string())).ok()
}
