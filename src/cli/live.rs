//! The one-line status a terminal shows under a followed run's lines.
//!
//! A step can spend minutes inside a model call or a tool with no event;
//! a clock that keeps moving tells the user the run is alive, and where.

use crate::agent::RunEvent;
use crate::api::{EventLine, RunState};

use super::table::duration;

#[derive(Debug, Clone, PartialEq)]
enum Phase {
    Queued,
    Starting,
    /// In the strategy: usually waiting on the model.
    Thinking,
    Tool(String),
    /// Waiting for a person: an answer, or a decision on a held call.
    Waiting,
    Ended,
}

#[derive(Debug, Clone)]
pub struct LiveStatus {
    phase: Phase,
    step: u32,
    max_steps: Option<u32>,
    /// What the clock counts from: the run's creation until it starts.
    since_ms: i64,
}

impl LiveStatus {
    pub fn new(state: RunState, created_at_ms: i64, max_steps: Option<u32>) -> Self {
        LiveStatus {
            phase: match state {
                RunState::Queued => Phase::Queued,
                RunState::Running => Phase::Starting,
                RunState::Waiting => Phase::Waiting,
                RunState::Ended => Phase::Ended,
            },
            step: 0,
            max_steps,
            since_ms: created_at_ms,
        }
    }

    pub fn update(&mut self, line: &EventLine) {
        match &line.event {
            RunEvent::RunStarted { max_steps, .. } => {
                self.phase = Phase::Starting;
                self.max_steps = Some(*max_steps);
                self.since_ms = line.at_ms;
            }
            RunEvent::StepStarted { step, max_steps } => {
                self.phase = Phase::Thinking;
                self.step = *step;
                self.max_steps = Some(*max_steps);
            }
            RunEvent::ToolCall { name, .. } => self.phase = Phase::Tool(name.clone()),
            RunEvent::ToolResult { .. } | RunEvent::StepFinished { .. } => {
                self.phase = Phase::Thinking
            }
            RunEvent::InputRequested { .. } | RunEvent::ApprovalRequested { .. } => {
                self.phase = Phase::Waiting
            }
            // Back to the strategy, or (an approved call) to the tool,
            // whose `tool_call` follows.
            RunEvent::InputReceived { .. } | RunEvent::ApprovalDecided { .. } => {
                self.phase = Phase::Thinking
            }
            RunEvent::AssistantMessage { .. }
            | RunEvent::StuckDetected { .. }
            | RunEvent::PlanChanged { .. } => {}
            RunEvent::RunEnded { .. } => self.phase = Phase::Ended,
        }
    }

    /// Empty once the run has ended: there is nothing left to watch.
    /// Never wider than `width - 1`, since a wrapped line cannot be redrawn
    /// in place.
    pub fn render(&self, now_ms: i64, width: usize) -> String {
        let clock = duration(now_ms - self.since_ms);
        let max = self
            .max_steps
            .map(|m| m.to_string())
            .unwrap_or_else(|| "?".into());
        let text = match &self.phase {
            Phase::Ended => return String::new(),
            Phase::Queued => format!("queued · {clock}"),
            Phase::Starting => format!("starting · {clock}"),
            Phase::Thinking => format!("step {}/{max} · thinking · {clock}", self.step),
            Phase::Tool(name) => format!("step {}/{max} · tool {name} · {clock}", self.step),
            Phase::Waiting => format!("step {}/{max} · waiting for you · {clock}", self.step),
        };
        super::table::truncate(&text, width.saturating_sub(1).max(1))
    }
}

/// Columns of the terminal on stderr, read at each redraw so a resize is
/// followed; 80 when it cannot be known.
pub fn terminal_width() -> usize {
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `winsize` through the pointer, which
    // points to a live, writable one.
    let ok = unsafe { libc::ioctl(libc::STDERR_FILENO, libc::TIOCGWINSZ, &mut size) } == 0;
    if ok && size.ws_col > 0 {
        usize::from(size.ws_col)
    } else {
        80
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::Outcome;

    fn at(at_ms: i64, event: RunEvent) -> EventLine {
        EventLine {
            seq: 0,
            at_ms,
            event,
        }
    }

    #[test]
    fn the_line_follows_the_run() {
        let mut s = LiveStatus::new(RunState::Queued, 1_000, None);
        assert_eq!(s.render(3_000, 80), "queued · 2.0s");
        s.update(&at(
            5_000,
            RunEvent::RunStarted {
                run_id: "r".into(),
                agent: "a".into(),
                request: "q".into(),
                max_steps: 30,
                strategy: "toolcall".into(),
                strategy_version: "1".into(),
            },
        ));
        assert_eq!(s.render(5_400, 80), "starting · 0.4s");
        s.update(&at(
            6_000,
            RunEvent::StepStarted {
                step: 3,
                max_steps: 30,
            },
        ));
        assert_eq!(s.render(17_400, 80), "step 3/30 · thinking · 12.4s");
        s.update(&at(
            7_000,
            RunEvent::ToolCall {
                step: 3,
                id: "c".into(),
                name: "bash".into(),
                arguments: "{}".into(),
            },
        ));
        assert_eq!(s.render(17_400, 80), "step 3/30 · tool bash · 12.4s");
        assert_eq!(s.render(17_400, 12), "step 3/30 …");
        s.update(&at(
            8_000,
            RunEvent::RunEnded {
                outcome: Outcome::Finished,
                steps: 3,
                error: None,
            },
        ));
        assert_eq!(s.render(17_400, 80), "");
    }
}
