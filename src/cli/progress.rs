//! Human-readable progress, one line per thing that happened. The same
//! lines serve `run --local`, `run` through the daemon and `logs`, so a run
//! reads the same however it was started.

use std::io::Write;

use super::sanitize::terminal_safe;
use crate::agent::RunEvent;
use crate::plan::{Plan, StepStatus};

/// Long tool outputs are shortened on screen; the record keeps them whole.
const MAX_SHOWN: usize = 300;

fn shorten(s: &str) -> String {
    let one_line = s.replace('\n', "\\n");
    match one_line.char_indices().nth(MAX_SHOWN) {
        Some((cut, _)) => format!("{}…", &one_line[..cut]),
        None => one_line,
    }
}

/// A step's notes are shortened harder than other text: a plan is read at
/// a glance, one line per step.
const MAX_NOTES_SHOWN: usize = 80;

fn shorten_to(s: &str, max: usize) -> String {
    let one_line = s.replace('\n', " ");
    match one_line.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &one_line[..cut]),
        None => one_line,
    }
}

/// How a step's status reads at the start of its line.
pub fn status_mark(status: StepStatus) -> &'static str {
    match status {
        StepStatus::NotStarted => "[ ]",
        StepStatus::InProgress => "[>]",
        StepStatus::Completed => "[x]",
        StepStatus::Blocked => "[!]",
    }
}

/// A plan, compact: its title, then one line per step with its status mark
/// and its notes shortened, each line indented by `indent`. Not yet
/// [`terminal_safe`]: the caller makes the whole text safe.
pub fn plan_lines(plan: &Plan, indent: &str) -> String {
    let mut out = format!("{indent}{}", shorten(&plan.title));
    for step in &plan.steps {
        out.push('\n');
        out.push_str(&format!(
            "{indent}  {} {}",
            status_mark(step.status),
            shorten(&step.text)
        ));
        if let Some(notes) = step.notes.as_deref().filter(|n| !n.trim().is_empty()) {
            out.push_str(&format!(" — {}", shorten_to(notes, MAX_NOTES_SHOWN)));
        }
    }
    out
}

/// " by uid N" for a decision a client made.
fn by(uid: Option<u32>) -> String {
    uid.map(|u| format!(" by uid {u}")).unwrap_or_default()
}

/// Prints the event's line on stderr, if it has one.
pub fn print_event(event: &RunEvent) {
    if let Some(line) = event_line(event) {
        let _ = writeln!(std::io::stderr(), "{line}");
    }
}

/// `None` for events that add nothing on screen (a step's end repeats what
/// its tool lines said). The model's and tools' text in it is made
/// [`terminal_safe`].
pub fn event_line(event: &RunEvent) -> Option<String> {
    let line = raw_event_line(event)?;
    Some(terminal_safe(&line).into_owned())
}

fn raw_event_line(event: &RunEvent) -> Option<String> {
    let line = match event {
        RunEvent::RunStarted {
            agent,
            strategy,
            strategy_version,
            max_steps,
            ..
        } => format!(
            "agent {agent} (strategy {strategy} {strategy_version}, up to {max_steps} steps)"
        ),
        RunEvent::StepStarted { step, max_steps } => format!("step {step}/{max_steps}"),
        RunEvent::AssistantMessage { content, .. } => match content.as_deref() {
            Some(c) if !c.is_empty() => format!("  thought: {}", shorten(c)),
            _ => return None,
        },
        RunEvent::ToolCall {
            name, arguments, ..
        } => format!("  tool {name} {}", shorten(arguments)),
        RunEvent::ToolResult {
            name, ok, output, ..
        } => format!(
            "  {} {name}: {}",
            if *ok { "result" } else { "failed" },
            shorten(output)
        ),
        RunEvent::StuckDetected { step } => {
            format!("  stuck at step {step}: the agent repeated itself; warning it")
        }
        RunEvent::StepFinished { .. } => return None,
        RunEvent::InputRequested {
            plugin, question, ..
        } => format!("  waiting: {plugin} asks: {}", shorten(question)),
        RunEvent::InputReceived {
            text,
            by_uid,
            timed_out,
            ..
        } => match (timed_out, text) {
            (true, _) | (_, None) => "  no answer in time; the run goes on".to_string(),
            (false, Some(t)) => format!("  answered{}: {}", by(*by_uid), shorten(t)),
        },
        RunEvent::ApprovalRequested {
            tool, arguments, ..
        } => format!("  waiting: approve {tool} {}?", shorten(arguments)),
        RunEvent::ApprovalDecided {
            tool,
            decision,
            reason,
            by_uid,
            timed_out,
            ..
        } => {
            let what = match (decision, timed_out) {
                (_, true) => "denied (no decision in time)".to_string(),
                (crate::agent::Decision::Approve, _) => format!("approved{}", by(*by_uid)),
                (crate::agent::Decision::Deny, _) => format!("denied{}", by(*by_uid)),
            };
            match reason {
                Some(r) if !timed_out => format!("  {tool} {what}: {}", shorten(r)),
                _ => format!("  {tool} {what}"),
            }
        }
        RunEvent::PlanChanged { plan, .. } => format!("  plan:\n{}", plan_lines(plan, "    ")),
        RunEvent::RunEnded {
            outcome,
            steps,
            error,
        } => match error {
            Some(e) => format!("run ended: {outcome} after {steps} steps: {e}"),
            None => format!("run ended: {outcome} after {steps} steps"),
        },
    };
    Some(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::PlanStep;

    fn step(text: &str, status: StepStatus, notes: Option<&str>) -> PlanStep {
        PlanStep {
            text: text.into(),
            status,
            notes: notes.map(str::to_string),
        }
    }

    #[test]
    fn a_plan_prints_its_title_then_a_line_per_step_with_its_mark() {
        let event = RunEvent::PlanChanged {
            step: 2,
            plan: Plan {
                title: "Fix the build".into(),
                steps: vec![
                    step(
                        "Read the error",
                        StepStatus::Completed,
                        Some("a missing\nimport"),
                    ),
                    step("Add it", StepStatus::InProgress, None),
                    step("Run the tests", StepStatus::NotStarted, Some("")),
                    step("Release", StepStatus::Blocked, Some(&"why ".repeat(40))),
                ],
            },
        };
        let text = event_line(&event).expect("a plan is shown");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "  plan:");
        assert_eq!(lines[1], "    Fix the build");
        assert_eq!(lines[2], "      [x] Read the error — a missing import");
        assert_eq!(lines[3], "      [>] Add it");
        assert_eq!(lines[4], "      [ ] Run the tests");
        assert!(
            lines[5].starts_with("      [!] Release — why why"),
            "{text}"
        );
        assert!(lines[5].ends_with('…'), "notes are shortened: {text}");
        assert_eq!(lines.len(), 6);
    }

    #[test]
    fn a_plan_s_text_cannot_drive_the_terminal() {
        let event = RunEvent::PlanChanged {
            step: 1,
            plan: Plan {
                title: "\u{1b}]0;owned\u{7}Title\u{1b}[2J".into(),
                steps: vec![step(
                    "do \u{1b}[8mhidden\u{1b}[0m\r",
                    StepStatus::NotStarted,
                    Some("\u{9b}2Jnote"),
                )],
            },
        };
        let text = event_line(&event).expect("shown");
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{9b}') && !text.contains('\r'),
            "{text:?}"
        );
        assert!(
            text.contains("    Title\n      [ ] do hidden — 2Jnote"),
            "{text:?}"
        );
    }
}
