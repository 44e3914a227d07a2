//! Writing a command's output to stdout.
//!
//! `agentd runs | head` closes the pipe early; that ends the output, it is
//! not an error worth a panic, so write failures are ignored here.

use std::io::Write;

use serde::Serialize;

use super::client::ClientError;

pub fn text(s: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(s.as_bytes());
    let _ = out.flush();
}

pub fn line(s: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{s}");
    let _ = out.flush();
}

/// Pretty JSON: `--json` output is read by people as often as by `jq`.
pub fn json(value: &impl Serialize) -> Result<(), ClientError> {
    let s = serde_json::to_string_pretty(value)
        .map_err(|e| ClientError::Protocol(format!("cannot encode JSON: {e}")))?;
    line(&s);
    Ok(())
}
