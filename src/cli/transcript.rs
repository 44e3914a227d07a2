//! `agentd show`: a run's record as something to read, not to parse.

use std::collections::HashMap;
use std::fmt::Write;

use std::borrow::Cow;

use super::progress::plan_lines;
use super::sanitize::terminal_safe;
use super::table::{age, duration};
use crate::api::{RunState, RunSummary, RunView};
use crate::chat::{Message, Role};
use crate::plan::Plan;

/// The header, every message in order, then the result, safe for a
/// terminal as [`show`](super::runs) prints it page by page. `now_ms` makes
/// the ages testable.
#[cfg(test)]
pub fn render(view: &RunView, now_ms: i64) -> String {
    let mut t = Transcript::for_run(&view.summary);
    let mut out = header(view, now_ms);
    out.push_str(&t.messages(&view.messages));
    out.push_str(&t.unprinted_marker());
    out.push_str(&footer(view));
    out
}

/// A transcript printed a page of messages at a time (`show` pages
/// through long runs): what it must remember between pages.
#[derive(Default)]
pub struct Transcript {
    /// A tool message may lack `name`; its call in the assistant message
    /// before it (maybe on the previous page) always has one.
    call_names: HashMap<String, String>,
    /// Messages printed so far: where the pages are in the transcript.
    printed: usize,
    /// A resumed run's transcript starts with copies of the run it resumed:
    /// the line printed before its first own message, and where that is.
    marker: Option<(usize, String)>,
}

impl Transcript {
    /// For the transcript of `run`: a resumed run's gets a marker line
    /// where its own messages begin, so the two runs read as one story.
    pub fn for_run(run: &RunSummary) -> Self {
        let marker = match (&run.resume.resumed_from, run.resume.resumed_messages) {
            (Some(from), Some(at)) => Some((at as usize, resumed_marker(from, &run.resume))),
            _ => None,
        };
        Transcript {
            marker,
            ..Transcript::default()
        }
    }

    /// The marker, if the messages printed did not reach it (a resumed run
    /// that has added none of its own yet): printed before the result.
    pub fn unprinted_marker(&mut self) -> String {
        match self.marker.take() {
            Some((_, line)) => safe(format!("\n{line}\n")),
            None => String::new(),
        }
    }

    /// The messages of one page, safe for a terminal (see
    /// [`terminal_safe`]): all of it can come from the model or a tool.
    pub fn messages(&mut self, messages: &[Message]) -> String {
        let mut out = String::new();
        for m in messages {
            if let Some((_, line)) = self.marker.take_if(|(at, _)| *at == self.printed) {
                let _ = write!(out, "\n{line}\n");
            }
            self.printed += 1;
            for c in &m.tool_calls {
                self.call_names.insert(c.id.clone(), c.name.clone());
            }
            out.push('\n');
            out.push_str(&message(m, &self.call_names));
        }
        safe(out)
    }
}

/// The run's plan in its story: each change (`plan_changed`, with the
/// step it was published in), then the plan it has now (the record's), the
/// way `agentd run` printed them. Empty for a run without a plan.
pub fn plan_story(changes: &[(u32, Plan)], current: Option<&Plan>) -> String {
    let mut out = String::new();
    for (step, plan) in changes {
        let _ = write!(
            out,
            "\n[plan changed at step {step}]\n{}\n",
            plan_lines(plan, "")
        );
    }
    if let Some(plan) = current {
        let _ = write!(out, "\n[plan]\n{}\n", plan_lines(plan, ""));
    }
    // Every word of a plan is a strategy's (or the model's).
    safe(out)
}

/// The result, after the last message.
pub fn footer(view: &RunView) -> String {
    match &view.summary.result {
        Some(result) => safe(format!("\n[result]\n{}\n", result.trim_end())),
        None => String::new(),
    }
}

/// `text` with terminal control removed; the common case (nothing to
/// remove) costs no copy.
fn safe(text: String) -> String {
    match terminal_safe(&text) {
        Cow::Borrowed(_) => text,
        Cow::Owned(clean) => clean,
    }
}

pub fn header(view: &RunView, now_ms: i64) -> String {
    let s = &view.summary;
    let mut out = String::new();
    let mut field = |name: &str, value: &str| {
        let _ = writeln!(out, "{name:<8} {value}");
    };
    field("run", &s.id);
    field("agent", &s.agent);
    let state = match (s.state, s.outcome) {
        (RunState::Ended, Some(o)) => format!("ended ({o})"),
        (state, _) => state.as_str().to_string(),
    };
    field("state", &state);
    let steps = match s.max_steps {
        Some(max) => format!("{}/{max}", s.steps),
        None => s.steps.to_string(),
    };
    field("steps", &steps);
    field(
        "tokens",
        &format!(
            "{} prompt, {} completion",
            s.usage.prompt_tokens, s.usage.completion_tokens
        ),
    );
    field("cost", &super::table::cost(s.cost));
    let mut when = format!("{} ago", age(s.created_at_ms, now_ms));
    if let Some(start) = s.started_at_ms {
        let end = s.ended_at_ms.unwrap_or(now_ms);
        let verb = if s.ended_at_ms.is_some() {
            "ran"
        } else {
            "running for"
        };
        let _ = write!(when, ", {verb} {}", duration(end - start));
    }
    field("created", &when);
    if let Some(e) = &s.error {
        field("error", e);
    }
    if let Some(from) = &s.resume.resumed_from {
        let at = s
            .resume
            .resumed_at_step
            .map_or(String::new(), |k| format!(" after step {k}"));
        field("resumes", &format!("{from}{at}"));
    }
    if let Some(by) = &s.resume.resumed_by {
        field("resumed", &format!("by {by}"));
    }
    // The request and the error can come from a client or the model.
    safe(out)
}

/// `── resumed from ID after step K ──`: the run's own steps are K+1 on.
fn resumed_marker(from: &str, links: &crate::api::ResumeLinks) -> String {
    match links.resumed_at_step {
        Some(step) => format!("── resumed from {from} after step {step} ──"),
        None => format!("── resumed from {from} ──"),
    }
}

fn message(m: &Message, call_names: &HashMap<String, String>) -> String {
    let label = match m.role {
        Role::Tool => {
            let name = m.name.as_deref().or_else(|| {
                m.tool_call_id
                    .as_deref()
                    .and_then(|id| call_names.get(id).map(String::as_str))
            });
            format!("[tool {}]", name.unwrap_or("?"))
        }
        role => format!("[{role}]"),
    };
    let mut out = format!("{label}\n");
    let content = m.content_str().trim_end();
    if !content.is_empty() {
        let _ = writeln!(out, "{content}");
    }
    for c in &m.tool_calls {
        let _ = writeln!(out, "  → {} {}", c.name, c.arguments);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::Outcome;
    use crate::api::RunSummary;
    use crate::chat::ToolCall;
    use crate::chat::Usage;

    fn view() -> RunView {
        let mut unnamed = Message::tool("hi there", "c1", "x");
        unnamed.name = None;
        RunView {
            summary: RunSummary {
                id: "0123456789abcdef".into(),
                seq: 7,
                agent: "toolcall".into(),
                request: "greet".into(),
                request_truncated: false,
                result_truncated: false,
                state: RunState::Ended,
                waiting: None,
                outcome: Some(Outcome::Error),
                steps: 2,
                max_steps: Some(30),
                result: Some("Step 1: called echo\nStep 2: boom\n".into()),
                error: Some("boom".into()),
                usage: Usage {
                    prompt_tokens: 120,
                    completion_tokens: 30,
                },
                cost: None,
                created_at_ms: 0,
                started_at_ms: Some(1_000),
                ended_at_ms: Some(5_500),
                resume: Default::default(),
            },
            plan: None,
            messages: vec![
                Message::system("be brief"),
                Message::user("greet"),
                Message::assistant_with_calls(
                    Some("I will echo.".into()),
                    vec![ToolCall {
                        id: "c1".into(),
                        name: "echo".into(),
                        arguments: r#"{"text":"hi there"}"#.into(),
                    }],
                ),
                unnamed,
            ],
            paging: Default::default(),
            files: None,
        }
    }

    #[test]
    fn a_transcript_reads_top_to_bottom() {
        let text = render(&view(), 120_000);
        assert_eq!(
            text,
            "run      0123456789abcdef\n\
             agent    toolcall\n\
             state    ended (error)\n\
             steps    2/30\n\
             tokens   120 prompt, 30 completion\n\
             cost     -\n\
             created  2m ago, ran 4.5s\n\
             error    boom\n\
             \n[system]\nbe brief\n\
             \n[user]\ngreet\n\
             \n[assistant]\nI will echo.\n  → echo {\"text\":\"hi there\"}\n\
             \n[tool echo]\nhi there\n\
             \n[result]\nStep 1: called echo\nStep 2: boom\n"
        );
    }

    #[test]
    fn escape_sequences_from_the_model_and_tools_do_not_reach_the_terminal() {
        let mut v = view();
        v.messages.push(Message::tool(
            "\u{1b}]0;owned\u{7}\u{1b}]52;c;ZWNobyBvd25lZA==\u{7}\u{1b}[2Jtool output",
            "c2",
            "bash",
        ));
        v.messages.push(Message::assistant(
            "\u{1b}[8mhidden\u{1b}[0m\r\u{9b}2J said",
        ));
        v.summary.result = Some("Step 3: \u{1b}c done".into());
        let text = render(&v, 120_000);
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{9b}') && !text.contains('\r'),
            "{text:?}"
        );
        assert!(text.contains("\n[tool bash]\ntool output\n"), "{text}");
        assert!(text.contains("\n[assistant]\nhidden2J said\n"), "{text}");
        assert!(text.contains("Step 3:  done"), "{text}");
    }

    #[test]
    fn a_resumed_run_reads_as_one_story_with_a_marker() {
        let mut v = view();
        v.summary.resume = crate::api::ResumeLinks {
            resumed_from: Some("fedcba9876543210".into()),
            resumed_at_step: Some(1),
            resumed_messages: Some(2),
            resumed_by: Some("0000000000000000".into()),
        };
        let text = render(&v, 120_000);
        assert!(
            text.contains("resumes  fedcba9876543210 after step 1\nresumed  by 0000000000000000\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "\n[user]\ngreet\n\n── resumed from fedcba9876543210 after step 1 ──\n\n[assistant]\nI will echo."
            ),
            "{text}"
        );
        // Paged: the marker falls where the pages reach it, once.
        let mut t = Transcript::for_run(&v.summary);
        let first = t.messages(&v.messages[..1]);
        let second = t.messages(&v.messages[1..3]);
        let rest = t.messages(&v.messages[3..]) + &t.unprinted_marker();
        assert!(!first.contains("resumed") && !rest.contains("resumed"));
        assert_eq!(second.matches("── resumed from").count(), 1, "{second}");
        // A resumed run with none of its own messages yet: before the result.
        let mut t = Transcript::for_run(&v.summary);
        let all = t.messages(&v.messages[..2]) + &t.unprinted_marker();
        assert!(
            all.ends_with("── resumed from fedcba9876543210 after step 1 ──\n"),
            "{all}"
        );
    }

    #[test]
    fn the_plan_s_story_shows_each_change_then_the_plan_now() {
        use crate::plan::{PlanStep, StepStatus};
        let plan = |status, notes: Option<&str>| Plan {
            title: "Greet \u{1b}[2Jthem".into(),
            steps: vec![PlanStep {
                text: "say hi".into(),
                status,
                notes: notes.map(str::to_string),
            }],
        };
        let first = plan(StepStatus::NotStarted, None);
        let last = plan(StepStatus::Completed, Some("said it"));
        let text = plan_story(&[(1, first), (2, last.clone())], Some(&last));
        assert_eq!(
            text,
            "\n[plan changed at step 1]\nGreet them\n  [ ] say hi\n\
             \n[plan changed at step 2]\nGreet them\n  [x] say hi — said it\n\
             \n[plan]\nGreet them\n  [x] say hi — said it\n"
        );
        assert_eq!(plan_story(&[], None), "");
    }

    #[test]
    fn a_running_run_has_no_outcome_or_result_yet() {
        let mut v = view();
        v.summary.state = RunState::Running;
        v.summary.outcome = None;
        v.summary.result = None;
        v.summary.error = None;
        v.summary.ended_at_ms = None;
        v.messages.clear();
        let text = render(&v, 3_000);
        assert!(text.contains("state    running\n"), "{text}");
        assert!(text.contains("running for 2.0s"), "{text}");
        assert!(
            !text.contains("[result]") && !text.contains("error"),
            "{text}"
        );
    }
}
