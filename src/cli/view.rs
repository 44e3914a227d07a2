//! Where a followed run's events go: progress on stderr for `run`, the
//! command's output on stdout for `logs`.

use std::io::{IsTerminal, Write};

use super::live::{terminal_width, LiveStatus};
use super::progress::event_line;
use super::table::duration;
use crate::api::EventLine;
use crate::time::now_ms;

pub trait EventView {
    /// One line of the stream as received, and its event when this CLI
    /// knows the event's type (a newer daemon may send others).
    fn line(&mut self, raw: &[u8], event: Option<&EventLine>);
    /// Called every ~200 ms while following, when [`wants_ticks`] says so.
    ///
    /// [`wants_ticks`]: EventView::wants_ticks
    fn tick(&mut self) {}
    fn wants_ticks(&self) -> bool {
        false
    }
    /// A message for the user, kept apart from any status line.
    fn note(&mut self, message: &str) {
        let _ = writeln!(std::io::stderr(), "{message}");
    }
    /// Leaves the terminal clean for what is printed next.
    fn finish(&mut self) {}
    /// Clears a status line so a prompt can be written in its place.
    fn finish_line(&mut self) {}
}

/// `run`'s progress on stderr: the event lines, and on a terminal a status
/// line under them redrawn in place.
pub struct Progress {
    live: Option<LiveStatus>,
    drawn: bool,
}

impl Progress {
    /// Live only when stderr is a terminal that understands the redraw:
    /// escape codes in a log file, a pipe or an Emacs shell are noise.
    pub fn for_stderr(status: LiveStatus) -> Self {
        let dumb = std::env::var_os("TERM").is_some_and(|t| t == "dumb");
        Progress {
            live: (std::io::stderr().is_terminal() && !dumb).then_some(status),
            drawn: false,
        }
    }

    fn clear(&mut self) {
        if self.drawn {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
            self.drawn = false;
        }
    }

    fn draw(&mut self) {
        let Some(live) = &self.live else { return };
        let text = live.render(now_ms(), terminal_width());
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K{text}");
        let _ = err.flush();
        self.drawn = !text.is_empty();
    }
}

impl EventView for Progress {
    fn line(&mut self, _raw: &[u8], event: Option<&EventLine>) {
        let Some(event) = event else { return };
        self.clear();
        if let Some(text) = event_line(&event.event) {
            let _ = writeln!(std::io::stderr(), "{text}");
        }
        if let Some(live) = &mut self.live {
            live.update(event);
        }
        self.draw();
    }

    fn tick(&mut self) {
        self.draw();
    }

    fn wants_ticks(&self) -> bool {
        self.live.is_some()
    }

    fn note(&mut self, message: &str) {
        self.clear();
        let _ = writeln!(std::io::stderr(), "{message}");
        self.draw();
    }

    fn finish(&mut self) {
        self.clear();
        self.live = None;
    }

    fn finish_line(&mut self) {
        self.clear();
    }
}

/// `logs`: the events on stdout, each with its time since the first one;
/// with `--json`, the daemon's lines untouched, for `jq`.
pub struct LogPrinter {
    json: bool,
    origin_ms: Option<i64>,
}

impl LogPrinter {
    pub fn new(json: bool) -> Self {
        LogPrinter {
            json,
            origin_ms: None,
        }
    }

    /// `None` when the event shows nothing (see [`event_line`]).
    pub fn format(&mut self, event: &EventLine) -> Option<String> {
        let origin = *self.origin_ms.get_or_insert(event.at_ms);
        let text = event_line(&event.event)?;
        let stamp = format!("+{}", duration(event.at_ms - origin));
        Some(format!("{stamp:>8}  {text}"))
    }
}

impl EventView for LogPrinter {
    fn line(&mut self, raw: &[u8], event: Option<&EventLine>) {
        let mut out = std::io::stdout().lock();
        if self.json {
            let _ = out.write_all(raw);
            let _ = out.write_all(b"\n");
        } else if let Some(text) = event.and_then(|e| self.format(e)) {
            let _ = writeln!(out, "{text}");
        }
        let _ = out.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::RunEvent;

    #[test]
    fn log_lines_carry_the_time_since_the_first_event() {
        let mut p = LogPrinter::new(false);
        let step = |at_ms, step| EventLine {
            seq: 1,
            at_ms,
            event: RunEvent::StepStarted { step, max_steps: 5 },
        };
        assert_eq!(
            p.format(&step(10_000, 1)).as_deref(),
            Some("   +0.0s  step 1/5")
        );
        assert_eq!(
            p.format(&step(75_500, 2)).as_deref(),
            Some("  +1m05s  step 2/5")
        );
        let quiet = EventLine {
            seq: 2,
            at_ms: 80_000,
            event: RunEvent::StepFinished {
                step: 2,
                result: "x".into(),
            },
        };
        assert_eq!(p.format(&quiet), None);
    }
}
