//! `runs`, `show`, `logs` and `cancel`: the daemon's runs, past and present.

use hyper::StatusCode;
use serde_json::Value;

use super::client::{from_value, path_segment, Client, ClientError};
use super::follow::follow;
use super::sanitize::terminal_safe;
use super::table::{age, first_line, truncate, Table};
use super::view::{EventView, LogPrinter};
use super::{out, transcript, RunsArgs};
use crate::agent::{RunEvent, Waiting};
use crate::api::{EventLine, RunList, RunSummary, RunView};
use crate::plan::Plan;
use crate::time::now_ms;

/// `runs` shows this many characters of an id; they name the run anywhere
/// a run is asked for (see [`fetch_run`]).
pub const SHORT_ID: usize = 12;
const REQUEST_WIDTH: usize = 50;

/// Prefix lookups page through this many recent runs at most: enough for
/// an id copied from `runs`, bounded on a daemon with a long history.
const PREFIX_SCAN_PAGES: usize = 5;
const PREFIX_SCAN_PAGE: u32 = 200;

pub async fn list(client: &Client, args: &RunsArgs) -> Result<i32, ClientError> {
    let mut path = format!("/v1/runs?limit={}", args.limit);
    if let Some(before) = args.before {
        path.push_str(&format!("&before={before}"));
    }
    if args.waiting {
        path = "/v1/runs?state=waiting".to_string();
    }
    let value: Value = client.get(&path).await?;
    if args.common.json {
        out::json(&value)?;
        return Ok(0);
    }
    let list: RunList = from_value(&path, &value)?;
    if list.runs.is_empty() {
        eprintln!(
            "{}",
            if args.waiting {
                "no run is waiting"
            } else {
                "no runs"
            }
        );
        return Ok(0);
    }
    if args.waiting {
        out::text(&waiting_table(&list.runs, now_ms()));
        return Ok(0);
    }
    out::text(&runs_table(&list.runs, now_ms()));
    if let Some(next) = list.next_before {
        eprintln!("(older runs: agentd runs --before {next})");
    }
    Ok(0)
}

/// `runs --waiting`: what each run waits for, and for how long already.
pub fn waiting_table(runs: &[RunSummary], now_ms: i64) -> String {
    let mut table = Table::new(["ID", "AGENT", "STEP", "WAITING", "FOR"]);
    for r in runs {
        let (since, what) = match &r.waiting {
            Some(Waiting::Input {
                plugin,
                question,
                since_ms,
                ..
            }) => (*since_ms, format!("{plugin} asks: {question}")),
            Some(Waiting::Approval {
                tool,
                arguments,
                since_ms,
                ..
            }) => (*since_ms, format!("approve {tool} {arguments}")),
            None => (r.created_at_ms, "-".to_string()),
        };
        table.row(vec![
            r.id.chars().take(SHORT_ID).collect(),
            truncate(&r.agent, 20),
            r.steps.to_string(),
            age(since, now_ms),
            first_line(&terminal_safe(&what), REQUEST_WIDTH),
        ]);
    }
    table.render()
}

pub fn runs_table(runs: &[RunSummary], now_ms: i64) -> String {
    let mut table = Table::new([
        "ID", "STATE", "OUTCOME", "AGENT", "STEPS", "TOKENS", "COST", "AGE", "LINK", "REQUEST",
    ]);
    for r in runs {
        table.row(vec![
            r.id.chars().take(SHORT_ID).collect(),
            r.state.as_str().to_string(),
            r.outcome.map_or("-", |o| o.as_str()).to_string(),
            truncate(&r.agent, 20),
            match r.max_steps {
                Some(max) => format!("{}/{max}", r.steps),
                None => r.steps.to_string(),
            },
            (r.usage.prompt_tokens + r.usage.completion_tokens).to_string(),
            super::table::cost(r.cost),
            age(r.created_at_ms, now_ms),
            link(r),
            first_line(&r.request, REQUEST_WIDTH),
        ]);
    }
    table.render()
}

/// `←ID`: this run resumed that one; `→ID`: that one resumed this one
/// (short ids, which `show` and `resume` take); `-` for neither.
fn link(r: &RunSummary) -> String {
    let short = |id: &str| id.chars().take(SHORT_ID).collect::<String>();
    let links: Vec<String> = [
        r.resume
            .resumed_from
            .as_deref()
            .map(|id| format!("←{}", short(id))),
        r.resume
            .resumed_by
            .as_deref()
            .map(|id| format!("→{}", short(id))),
    ]
    .into_iter()
    .flatten()
    .collect();
    if links.is_empty() {
        "-".into()
    } else {
        links.join(" ")
    }
}

/// The daemon serves a long transcript in pages (`next_messages_from`):
/// text is printed a page at a time, so `show` never holds more than one;
/// `--json` joins the pages into the one document it always printed.
pub async fn show(client: &Client, run: &str, json: bool) -> Result<i32, ClientError> {
    let mut value = fetch_run(client, run).await?;
    let first: RunView = from_value("the run", &value)?;
    let id = path_segment(&first.summary.id);
    let mut next = first.paging.next_messages_from;
    if json {
        while let Some(from) = next {
            let page: Value = client
                .get(&format!("/v1/runs/{id}?messages_from={from}"))
                .await?;
            let view: RunView = from_value("a page of the run", &page)?;
            next = advance(from, &view)?;
            if let (Some(all), Some(more)) = (
                value.get_mut("messages").and_then(Value::as_array_mut),
                page.get("messages").and_then(Value::as_array),
            ) {
                all.extend(more.iter().cloned());
            }
        }
        if let Some(obj) = value.as_object_mut() {
            obj.remove("next_messages_from");
        }
        out::json(&value)?;
        return Ok(0);
    }
    let now = now_ms();
    let mut t = transcript::Transcript::for_run(&first.summary);
    out::text(&transcript::header(&first, now));
    out::text(&t.messages(&first.messages));
    let mut last = first;
    while let Some(from) = next {
        let view: RunView = client
            .get(&format!("/v1/runs/{id}?messages_from={from}"))
            .await?;
        next = advance(from, &view)?;
        out::text(&t.messages(&view.messages));
        last = view;
    }
    out::text(&t.unprinted_marker());
    if last.plan.is_some() {
        // Only a run with a plan has changes to read from its events.
        let changes = plan_changes(client, &last.summary.id).await?;
        out::text(&transcript::plan_story(&changes, last.plan.as_ref()));
    }
    out::text(&transcript::footer(&last));
    Ok(0)
}

/// Every `plan_changed` of the run's events so far, with its step.
async fn plan_changes(client: &Client, id: &str) -> Result<Vec<(u32, Plan)>, ClientError> {
    let mut collect = PlanChanges(Vec::new());
    follow(client, id, false, None, &mut collect).await?;
    Ok(collect.0)
}

/// The event view of `show`: keeps the plan changes, prints nothing.
struct PlanChanges(Vec<(u32, Plan)>);

impl EventView for PlanChanges {
    fn line(&mut self, _raw: &[u8], event: Option<&EventLine>) {
        if let Some(EventLine {
            event: RunEvent::PlanChanged { step, plan },
            ..
        }) = event
        {
            self.0.push((*step, plan.clone()));
        }
    }
}

/// The cursor after a page; a page that does not move it would loop.
fn advance(from: u32, page: &RunView) -> Result<Option<u32>, ClientError> {
    match page.paging.next_messages_from {
        Some(next) if next <= from => Err(ClientError::Protocol(format!(
            "the daemon's pages of messages do not advance (from {from} to {next})"
        ))),
        next => Ok(next),
    }
}

pub async fn logs(
    client: &Client,
    run: &str,
    follow_: bool,
    json: bool,
) -> Result<i32, ClientError> {
    let view: RunView = from_value("the run", &fetch_run(client, run).await?)?;
    let mut printer = LogPrinter::new(json);
    follow(client, &view.summary.id, follow_, None, &mut printer).await?;
    Ok(0)
}

pub async fn cancel(client: &Client, run: &str) -> Result<i32, ClientError> {
    let view: RunView = from_value("the run", &fetch_run(client, run).await?)?;
    let id = view.summary.id;
    let path = format!("/v1/runs/{}/cancel", path_segment(&id));
    match client.post_empty::<Value>(&path).await {
        Ok(_) => {
            out::line(&format!("cancelling {id}"));
            Ok(0)
        }
        Err(e) if e.is_status(StatusCode::CONFLICT) => {
            let ended = client
                .get::<RunView>(&format!("/v1/runs/{}", path_segment(&id)))
                .await
                .ok()
                .and_then(|v| v.summary.outcome);
            match ended {
                Some(outcome) => eprintln!("agentd: run {id} already ended ({outcome})"),
                None => eprintln!("agentd: {e}"),
            }
            Ok(1)
        }
        Err(e) => Err(e),
    }
}

/// `GET /v1/runs/{id}`, also accepting a unique prefix of the id (such as
/// the 12 characters `runs` shows) when the daemon does not know it whole.
pub async fn fetch_run(client: &Client, given: &str) -> Result<Value, ClientError> {
    let run_path = |id: &str| format!("/v1/runs/{}", path_segment(id));
    match client.get::<Value>(&run_path(given)).await {
        Err(e) if e.is_status(StatusCode::NOT_FOUND) && !given.is_empty() => {
            match find_by_prefix(client, given).await? {
                Some(id) => client.get(&run_path(&id)).await,
                None => Err(e),
            }
        }
        other => other,
    }
}

/// `Ok(None)` when nothing matches or the list cannot be read: the
/// daemon's own "not found" then says it best.
async fn find_by_prefix(client: &Client, prefix: &str) -> Result<Option<String>, ClientError> {
    let mut matches: Vec<String> = Vec::new();
    let mut before: Option<i64> = None;
    for _ in 0..PREFIX_SCAN_PAGES {
        let mut path = format!("/v1/runs?limit={PREFIX_SCAN_PAGE}");
        if let Some(b) = before {
            path.push_str(&format!("&before={b}"));
        }
        let Ok(page) = client.get::<RunList>(&path).await else {
            return Ok(None);
        };
        matches.extend(
            page.runs
                .into_iter()
                .filter(|r| r.id.starts_with(prefix))
                .map(|r| r.id),
        );
        if matches.len() > 1 {
            return Err(ClientError::Protocol(format!(
                "`{prefix}` names several runs ({}); give more of the id",
                matches.join(", ")
            )));
        }
        match page.next_before {
            Some(b) => before = Some(b),
            None => break,
        }
    }
    Ok(matches.pop())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::Outcome;
    use crate::api::RunState;
    use crate::chat::Usage;

    fn summary(id: &str, request: &str, outcome: Option<Outcome>) -> RunSummary {
        RunSummary {
            id: id.into(),
            seq: 1,
            agent: "toolcall".into(),
            request: request.into(),
            request_truncated: false,
            result_truncated: false,
            state: if outcome.is_some() {
                RunState::Ended
            } else {
                RunState::Running
            },
            waiting: None,
            outcome,
            steps: 3,
            max_steps: Some(30),
            result: None,
            error: None,
            usage: Usage::default(),
            cost: None,
            created_at_ms: 0,
            started_at_ms: None,
            ended_at_ms: None,
            resume: Default::default(),
        }
    }

    #[test]
    fn the_table_shortens_ids_and_requests() {
        let long = "Write fizzbuzz.py, run it, and show me the output of the first hundred numbers";
        let text = runs_table(
            &[
                summary("0123456789abcdef0123", long, None),
                summary("fedcba9876543210", "hi\nmore", Some(Outcome::MaxSteps)),
            ],
            90_000,
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "ID            STATE    OUTCOME    AGENT     STEPS  TOKENS  COST  AGE  LINK  REQUEST"
        );
        assert_eq!(
            lines[1],
            "0123456789ab  running  -          toolcall  3/30   0       -     1m   -     Write fizzbuzz.py, run it, and show me the output…"
        );
        assert_eq!(
            lines[2],
            "fedcba987654  ended    max_steps  toolcall  3/30   0       -     1m   -     hi…"
        );
        let request = lines[1]
            .split_once("1m   -     ")
            .map(|(_, r)| r.chars().count());
        assert_eq!(request, Some(REQUEST_WIDTH));
    }

    #[test]
    fn the_table_shows_both_links_of_a_resumed_run() {
        let mut old = summary("aaaaaaaaaaaaaaaa", "task", Some(Outcome::MaxSteps));
        old.resume.resumed_by = Some("bbbbbbbbbbbbbbbb".into());
        let mut new = summary("bbbbbbbbbbbbbbbb", "task", None);
        new.resume.resumed_from = Some("aaaaaaaaaaaaaaaa".into());
        new.resume.resumed_by = Some("cccccccccccccccc".into());
        let text = runs_table(&[new, old], 90_000);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[1].contains("  ←aaaaaaaaaaaa →cccccccccccc  task"),
            "{text}"
        );
        assert!(lines[2].contains("  →bbbbbbbbbbbb"), "{text}");
    }
}
