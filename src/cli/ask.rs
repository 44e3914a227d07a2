//! Answering a run that waits for a person: `agentd reply`, `agentd
//! approve`, and the prompts `agentd run` shows inline.
//!
//! On a terminal `agentd run` asks the question (or y/n for a held call)
//! where the run's progress is shown and sends the answer; in a pipe it
//! prints the command that answers and keeps following, so a script or
//! another terminal can answer.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::client::{from_value, path_segment, Client, ClientError};
use super::runs::fetch_run;
use super::sanitize::terminal_safe;
use super::view::EventView;
use super::{out, ApproveArgs, ReplyArgs};
use crate::agent::{Decision, RunEvent, Waiting};
use crate::api::{ApproveRun, EventLine, InputRun, RunView};
use crate::sync::LockExt;

/// `agentd reply RUN TEXT`: answers the question the run waits on now
/// (its id is read from the run and sent, so the answer never goes to a
/// question asked since).
pub async fn reply(client: &Client, args: &ReplyArgs) -> Result<i32, ClientError> {
    let view: RunView = from_value("the run", &fetch_run(client, &args.run).await?)?;
    let id = view.summary.id;
    let Some(Waiting::Input { id: question, .. }) = view.summary.waiting else {
        eprintln!("agentd: run {id} is not waiting for an answer");
        return Ok(1);
    };
    send_answer(client, &id, &question, args.text.clone()).await?;
    out::line(&format!("answered {id}"));
    Ok(0)
}

async fn send_answer(
    client: &Client,
    id: &str,
    question: &str,
    text: String,
) -> Result<(), ClientError> {
    let body = InputRun {
        text,
        id: Some(question.to_string()),
    };
    client
        .post::<Value>(&format!("/v1/runs/{}/input", path_segment(id)), &body)
        .await
        .map(drop)
}

/// `agentd approve RUN [--deny [REASON]]`: decides on the call the run
/// holds now (its id is read from the run, and sent, so a decision is never
/// taken for a call made since).
pub async fn approve(client: &Client, args: &ApproveArgs) -> Result<i32, ClientError> {
    let view: RunView = from_value("the run", &fetch_run(client, &args.run).await?)?;
    let id = view.summary.id;
    let Some(Waiting::Approval { call_id, tool, .. }) = view.summary.waiting else {
        eprintln!("agentd: run {id} holds no tool call for approval");
        return Ok(1);
    };
    let (decision, reason) = match &args.deny {
        None => (Decision::Approve, None),
        Some(reason) => (
            Decision::Deny,
            Some(reason.clone()).filter(|r| !r.is_empty()),
        ),
    };
    send_decision(client, &id, &call_id, decision, reason).await?;
    let word = match decision {
        Decision::Approve => "approved",
        Decision::Deny => "denied",
    };
    out::line(&format!("{word} {tool} ({call_id}) in {id}"));
    Ok(0)
}

async fn send_decision(
    client: &Client,
    id: &str,
    call_id: &str,
    decision: Decision,
    reason: Option<String>,
) -> Result<(), ClientError> {
    let body = ApproveRun {
        call_id: call_id.to_string(),
        decision,
        reason,
    };
    client
        .post::<Value>(&format!("/v1/runs/{}/approve", path_segment(id)), &body)
        .await
        .map(drop)
}

/// `agentd run`'s view with the prompts: every line goes to `inner`; a
/// question or a held call is asked on the terminal, or, in a pipe, the
/// command that answers it is printed.
///
/// One thread reads stdin for the whole run, and each line goes to the
/// prompt open when it arrives: a prompt whose wait ended otherwise (a
/// timeout, an answer from another terminal) is withdrawn when its event
/// says so, and never takes a line meant for the next one.
pub struct Prompting<'a> {
    inner: &'a mut dyn EventView,
    client: Client,
    run_id: String,
    interactive: bool,
    /// The prompt waiting for the user's line, if any; while there is one
    /// the live status line is not redrawn over what they type.
    open: Arc<Mutex<Option<Open>>>,
    /// Started with the first prompt.
    reader: bool,
}

/// What a typed line answers.
#[derive(Clone)]
enum Open {
    Question { id: String },
    Call { call_id: String },
}

impl<'a> Prompting<'a> {
    pub fn new(inner: &'a mut dyn EventView, client: Client, run_id: String) -> Self {
        Prompting {
            inner,
            client,
            run_id,
            interactive: std::io::stdin().is_terminal() && std::io::stderr().is_terminal(),
            open: Arc::new(Mutex::new(None)),
            reader: false,
        }
    }

    fn ask(&mut self, prompt: &str, open: Open) {
        *self.open.lock_unpoisoned() = Some(open);
        self.inner.finish_line();
        let _ = write!(std::io::stderr(), "{prompt}");
        let _ = std::io::stderr().flush();
        if !self.reader {
            self.reader = true;
            self.start_reader();
        }
    }

    /// The wait of the open prompt ended (its `..._received`/`_decided`).
    fn withdraw(&mut self) {
        if self.open.lock_unpoisoned().take().is_some() {
            let _ = writeln!(std::io::stderr());
        }
    }

    fn start_reader(&self) {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        // A plain thread, not tokio's blocking pool: a runtime waits for its
        // blocking tasks on exit, and this read may never return.
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let (client, id, open) = (self.client.clone(), self.run_id.clone(), self.open.clone());
        tokio::spawn(async move {
            while let Some(line) = rx.recv().await {
                let Some(answering) = open.lock_unpoisoned().take() else {
                    continue;
                };
                let line = line.trim_end_matches('\r').to_string();
                let sent = match answering {
                    Open::Question { id: question } => {
                        send_answer(&client, &id, &question, line).await
                    }
                    Open::Call { call_id } => {
                        let (decision, reason) = decision_from(&line);
                        send_decision(&client, &id, &call_id, decision, reason).await
                    }
                };
                if let Err(e) = sent {
                    eprintln!("agentd: the answer was not taken: {e}");
                }
            }
        });
    }
}

/// `y`/`yes` approves; an empty line, `n` or `no` denies; anything else
/// denies with that text as the reason (which the model then reads).
fn decision_from(line: &str) -> (Decision, Option<String>) {
    match line.trim() {
        l if l.eq_ignore_ascii_case("y") || l.eq_ignore_ascii_case("yes") => {
            (Decision::Approve, None)
        }
        l if l.is_empty() || l.eq_ignore_ascii_case("n") || l.eq_ignore_ascii_case("no") => {
            (Decision::Deny, None)
        }
        reason => (Decision::Deny, Some(reason.to_string())),
    }
}

impl EventView for Prompting<'_> {
    fn line(&mut self, raw: &[u8], event: Option<&EventLine>) {
        self.inner.line(raw, event);
        let Some(event) = event else { return };
        let run = self.run_id.clone();
        match &event.event {
            RunEvent::InputRequested { id, question, .. } => {
                if self.interactive {
                    let q = terminal_safe(question).into_owned();
                    self.ask(&format!("? {q}\n> "), Open::Question { id: id.clone() });
                } else {
                    self.inner
                        .note(&format!("agentd: answer with: agentd reply {run} \"...\""));
                }
            }
            RunEvent::ApprovalRequested {
                call_id,
                tool,
                arguments,
                ..
            } => {
                if self.interactive {
                    let args = terminal_safe(arguments).into_owned();
                    self.ask(
                        &format!("? run {tool} {args}? [y/N, or a reason to deny] "),
                        Open::Call {
                            call_id: call_id.clone(),
                        },
                    );
                } else {
                    self.inner.note(&format!(
                        "agentd: decide with: agentd approve {run}  (or: agentd approve {run} --deny \"reason\")"
                    ));
                }
            }
            RunEvent::InputReceived { .. } | RunEvent::ApprovalDecided { .. } => self.withdraw(),
            _ => {}
        }
    }

    fn tick(&mut self) {
        if self.open.lock_unpoisoned().is_none() {
            self.inner.tick();
        }
    }

    fn wants_ticks(&self) -> bool {
        self.inner.wants_ticks()
    }

    fn note(&mut self, message: &str) {
        self.inner.note(message);
    }

    fn finish(&mut self) {
        self.inner.finish();
    }

    fn finish_line(&mut self) {
        self.inner.finish_line();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typed_line_is_a_decision() {
        assert_eq!(decision_from("y"), (Decision::Approve, None));
        assert_eq!(decision_from(" YES "), (Decision::Approve, None));
        assert_eq!(decision_from(""), (Decision::Deny, None));
        assert_eq!(decision_from("n"), (Decision::Deny, None));
        assert_eq!(
            decision_from("not on main"),
            (Decision::Deny, Some("not on main".into()))
        );
    }
}
