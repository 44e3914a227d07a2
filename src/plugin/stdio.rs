//! Plugin stdout/stderr go to the log, line by line, tagged with the plugin,
//! within the store's log rate ([`LogRate`]).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};

use super::log_rate::LogRate;
use crate::otel::LogParent;

/// A plugin's stdout or stderr: each line goes to the log under the
/// plugin's name, while the store's log rate allows.
#[derive(Clone)]
pub struct LogStream {
    rate: Arc<LogRate>,
    stream: &'static str,
    /// The span current when the store was made (a run's, with its id):
    /// wasmtime writes a guest's output from a task of its own, outside
    /// it, and the line must still say which run printed it.
    span: LogParent,
}

impl LogStream {
    /// `stream` is `"stdout"` or `"stderr"`, as the log shows it; `rate` is
    /// the store's, shared with its other stream and its `logging.log`
    /// (every `get-stdout` makes a new writer, so the budget cannot live in
    /// the writer).
    pub fn new(rate: Arc<LogRate>, stream: &'static str) -> Self {
        LogStream {
            rate,
            stream,
            span: LogParent::current(),
        }
    }
}

impl IsTerminal for LogStream {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for LogStream {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(LineWriter {
            rate: self.rate.clone(),
            stream: self.stream,
            span: self.span.clone(),
            buf: Vec::new(),
        })
    }
}

/// Caps a line so a plugin printing without newlines cannot grow memory.
const MAX_LINE: usize = 8 * 1024;

struct LineWriter {
    rate: Arc<LogRate>,
    stream: &'static str,
    span: LogParent,
    buf: Vec<u8>,
}

impl LineWriter {
    fn emit(&mut self, upto: usize) {
        let line: Vec<u8> = self.buf.drain(..upto).collect();
        // A line the filter leaves out takes nothing from the rate.
        let shown = tracing::enabled!(target: "agentd::guest_output", tracing::Level::INFO);
        if !shown || !self.rate.admit() {
            return;
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\n', '\r']);
        // The run's span as the explicit parent (see `LogParent`).
        tracing::info!(target: "agentd::guest_output", parent: self.span.id(), plugin = %self.rate.plugin(), stream = self.stream, "{text}");
    }

    /// Emits every complete line, and cuts a line at [`MAX_LINE`] bytes:
    /// one write can carry many lines, or more than a line's worth.
    fn flush_lines(&mut self) {
        loop {
            let window = self.buf.len().min(MAX_LINE);
            match self.buf[..window].iter().position(|b| *b == b'\n') {
                Some(pos) => self.emit(pos + 1),
                None if self.buf.len() >= MAX_LINE => self.emit(MAX_LINE),
                None => break,
            }
        }
    }
}

impl AsyncWrite for LineWriter {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.buf.extend_from_slice(data);
        self.flush_lines();
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if !self.buf.is_empty() {
            let len = self.buf.len();
            self.emit(len);
        }
        Poll::Ready(Ok(()))
    }
}

impl Drop for LineWriter {
    fn drop(&mut self) {
        if !self.buf.is_empty() {
            let len = self.buf.len();
            self.emit(len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writer() -> LineWriter {
        LineWriter {
            rate: LogRate::new("p".into()),
            stream: "stdout",
            span: LogParent::current(),
            buf: Vec::new(),
        }
    }

    #[test]
    fn a_long_write_is_cut_into_lines_of_at_most_max_line() {
        let mut w = writer();
        w.buf.extend(std::iter::repeat_n(b'a', 3 * MAX_LINE + 10));
        w.flush_lines();
        // Three full lines were emitted; the rest waits for its newline.
        assert_eq!(w.buf.len(), 10);
    }

    #[test]
    fn complete_lines_are_emitted_and_the_rest_is_kept() {
        let mut w = writer();
        w.buf.extend_from_slice(b"one\ntwo\nthr");
        w.flush_lines();
        assert_eq!(w.buf, b"thr");
    }
}
