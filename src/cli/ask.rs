//! Answering a run that waits for a person: `agentd reply`, `agentd
//! approve`, and the prompts `agentd run` shows inline.
//!
//! On a terminal `agentd run` asks the question (or y/n for a held call)
//! where the run's progress is shown and sends the answer; in a pipe it
//! prints the command that answers and keeps following, so a script or
//! another terminal can answer.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde_json::Value;

use super::client::{from_value, path_segment, Client, ClientError};
use super::runs::fetch_run;
use super::sanitize::terminal_safe;
use super::view::EventView;
use super::{out, ApproveArgs, ReplyArgs};
use crate::agent::{Decision, RunEvent, Waiting};
use crate::api::{ApproveRun, EventLine, InputRun, RunView};

/// `agentd reply RUN TEXT`.
pub async fn reply(client: &Client, args: &ReplyArgs) -> Result<i32, ClientError> {
    let view: RunView = from_value("the run", &fetch_run(client, &args.run).await?)?;
    let id = view.summary.id;
    let body = InputRun {
        text: args.text.clone(),
    };
    client
        .post::<Value>(&format!("/v1/runs/{}/input", path_segment(&id)), &body)
        .await?;
    out::line(&format!("answered {id}"));
    Ok(0)
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
pub struct Prompting<'a> {
    inner: &'a mut dyn EventView,
    client: Client,
    run_id: String,
    interactive: bool,
    /// While a prompt waits for the user's line, the live status line is
    /// not redrawn over what they type.
    open: Arc<AtomicBool>,
}

impl<'a> Prompting<'a> {
    pub fn new(inner: &'a mut dyn EventView, client: Client, run_id: String) -> Self {
        Prompting {
            inner,
            client,
            run_id,
            interactive: std::io::stdin().is_terminal() && std::io::stderr().is_terminal(),
            open: Arc::new(AtomicBool::new(false)),
        }
    }

    fn ask(&mut self, prompt: String, answer: impl FnOnce(String) -> Answer + Send + 'static) {
        let id = self.run_id.clone();
        if !self.interactive {
            return;
        }
        self.open.store(true, Ordering::SeqCst);
        self.inner.finish_line();
        let _ = write!(std::io::stderr(), "{prompt}");
        let _ = std::io::stderr().flush();
        let (tx, rx) = tokio::sync::oneshot::channel();
        // A plain thread, not tokio's blocking pool: a runtime waits for
        // its blocking tasks on exit, and this read may never return (the
        // run was answered from elsewhere and ended).
        std::thread::spawn(move || {
            let mut line = String::new();
            let read = std::io::stdin().lock().read_line(&mut line);
            let _ = tx.send(read.map(|_| line));
        });
        let client = self.client.clone();
        let open = self.open.clone();
        tokio::spawn(async move {
            let line = rx.await;
            open.store(false, Ordering::SeqCst);
            let Ok(Ok(line)) = line else { return };
            let sent = match answer(line.trim_end_matches(['\r', '\n']).to_string()) {
                Answer::Text(text) => client
                    .post::<Value>(
                        &format!("/v1/runs/{}/input", path_segment(&id)),
                        &InputRun { text },
                    )
                    .await
                    .map(drop),
                Answer::Decision {
                    call_id,
                    decision,
                    reason,
                } => send_decision(&client, &id, &call_id, decision, reason).await,
            };
            if let Err(e) = sent {
                eprintln!("agentd: the answer was not taken: {e}");
            }
        });
    }
}

enum Answer {
    Text(String),
    Decision {
        call_id: String,
        decision: Decision,
        reason: Option<String>,
    },
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
        let id = self.run_id.clone();
        match &event.event {
            RunEvent::InputRequested { question, .. } => {
                if self.interactive {
                    let q = terminal_safe(question).into_owned();
                    self.ask(format!("? {q}\n> "), Answer::Text);
                } else {
                    self.inner
                        .note(&format!("agentd: answer with: agentd reply {id} \"...\""));
                }
            }
            RunEvent::ApprovalRequested {
                call_id,
                tool,
                arguments,
                ..
            } => {
                if self.interactive {
                    let call_id = call_id.clone();
                    let args = terminal_safe(arguments).into_owned();
                    self.ask(
                        format!("? run {tool} {args}? [y/N, or a reason to deny] "),
                        move |line| {
                            let (decision, reason) = decision_from(&line);
                            Answer::Decision {
                                call_id,
                                decision,
                                reason,
                            }
                        },
                    );
                } else {
                    self.inner.note(&format!(
                        "agentd: decide with: agentd approve {id}  (or: agentd approve {id} --deny \"reason\")"
                    ));
                }
            }
            _ => {}
        }
    }

    fn tick(&mut self) {
        if !self.open.load(Ordering::SeqCst) {
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
