//! Human-readable progress, one line per thing that happened. The same
//! lines serve `run --local`, `run` through the daemon and `logs`, so a run
//! reads the same however it was started.

use std::io::Write;

use super::sanitize::terminal_safe;
use crate::agent::RunEvent;

/// Long tool outputs are shortened on screen; the record keeps them whole.
const MAX_SHOWN: usize = 300;

fn shorten(s: &str) -> String {
    let one_line = s.replace('\n', "\\n");
    match one_line.char_indices().nth(MAX_SHOWN) {
        Some((cut, _)) => format!("{}…", &one_line[..cut]),
        None => one_line,
    }
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
