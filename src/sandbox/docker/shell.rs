//! The persistent shell: one long-lived `docker exec` of bash (or sh) per
//! run, fed commands on its stdin.
//!
//! Why: an exec costs ~60 ms in the engine, a line on an open session about
//! a millisecond, and `cd`/`export` carry over as in a terminal.
//!
//! The session starts with [`scripts::SHELL_SETUP`]; then, per command
//! (`N` a fresh random nonce):
//!
//! ```sh
//! __agentd_cmd='<command, single-quoted>'; __agentd_run </dev/null 7>&- 8>&-; \
//!   { __agentd_rc=$?; __agentd_in=; \
//!   printf '\n__AGENTD_END_N__%d\n' "$__agentd_rc" >&7; printf '\n__AGENTD_END_N__\n' >&8; } 2>/dev/null
//! ```
//!
//! - A single-quoted string needs no escaping but of `'` itself, and the
//!   text reaches `eval` unchanged.
//! - `</dev/null`: a command that reads stdin cannot eat the next command.
//! - `{ ...; } 2>/dev/null` keeps the marker lines out of the model's
//!   `set -x` trace.
//! - The line starts with a plain assignment, never a reserved word: after
//!   an `eval` syntax error ("unexpected EOF while looking for matching"),
//!   bash 5.2 fails to recognise a reserved word (`{`, `if`) opening the
//!   next line it reads, and a non-interactive bash exits on that.
//! - The markers go on both streams, so stdout and stderr stay apart and
//!   each is complete when its marker arrives; the nonce makes them
//!   unforgeable by the command's output.
//!
//! A command past its timeout is stopped from a helper exec
//! ([`scripts::KILL_RECENT_CHILDREN`]): the shell's trap abandons the rest
//! of the command, its processes are killed, the shell prints the markers
//! and lives on with its state. If the shell still does not answer (the
//! command replaced the trap, say), the whole session is killed and the
//! next call starts a fresh one; the output says so.

use std::pin::Pin;
use std::time::Duration;

use bollard::container::LogOutput;
use bollard::errors::Error as DockerError;
use bollard::exec::StartExecResults;
use futures::{FutureExt, Stream, StreamExt};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::Mutex;
use tokio::time::Instant;

use super::engine::OpError;
use super::exec::{self, flood_limit, Target};
use super::output::MarkerScanner;
use super::scripts;
use crate::sandbox::CommandOutput;

/// Environment variable tagging the session's processes, so the whole
/// session can be killed ([`scripts::KILL_TAGGED`]).
const SHELL_TAG_VAR: &str = "AGENTD_SHELL";
/// How long a fresh session may take to answer its first command.
const START_TIMEOUT: Duration = Duration::from_secs(15);
/// After killing a command, how long the shell has to print its markers.
const KILL_GRACE: Duration = Duration::from_secs(2);
/// Reported when the command was killed without a status of its own.
const KILLED_EXIT_CODE: i32 = 137;

type Output = Pin<Box<dyn Stream<Item = Result<LogOutput, DockerError>> + Send>>;

/// A command written to the session whose markers have not all been read.
struct Running {
    started: Instant,
    /// False until the whole line is written: a half-written line would
    /// swallow the next command.
    written: bool,
    stdout: MarkerScanner,
    stderr: MarkerScanner,
}

impl Running {
    fn done(&self) -> bool {
        self.stdout.tail().is_some() && self.stderr.tail().is_some()
    }
}

enum Progress {
    Done,
    Deadline,
    Flood,
    /// The session's stream ended: the shell exited.
    Eof,
    Broken(DockerError),
}

struct Session {
    exec_id: String,
    /// `AGENTD_SHELL=<nonce>`, in the environment of all its processes.
    tag: String,
    /// The shell's pid inside the container.
    pid: String,
    /// The container's clock (/proc/uptime, in ticks) read at `clock.0`:
    /// maps our instants to the start times in /proc/PID/stat.
    clock: (Instant, u64),
    input: Pin<Box<dyn AsyncWrite + Send>>,
    output: Output,
    current: Option<Running>,
}

impl Session {
    async fn start(t: Target<'_>, work_dir: &str) -> Result<Session, OpError> {
        let what = "cannot start the shell session";
        let tag = format!("{SHELL_TAG_VAR}={}", uuid::Uuid::new_v4().simple());
        let (exec_id, started) = exec::start_attached(
            t,
            vec![
                "sh".to_string(),
                "-c".to_string(),
                scripts::SHELL_START.to_string(),
            ],
            &tag,
            Some(work_dir.to_string()),
            true,
            what,
        )
        .await?;
        let StartExecResults::Attached { output, mut input } = started else {
            return Err(OpError::Msg(format!("{what}: the engine detached it")));
        };
        input
            .write_all(scripts::SHELL_SETUP.as_bytes())
            .await
            .map_err(|e| OpError::Msg(format!("{what}: {e}")))?;
        let mut session = Session {
            exec_id,
            tag,
            pid: String::new(),
            clock: (Instant::now(), 0),
            input,
            output,
            current: None,
        };
        session
            .begin("read -r up _ </proc/uptime; echo \"$$ $up\"", 4096)
            .await?;
        let progress = session.read(Instant::now() + START_TIMEOUT, None).await;
        let answered = Instant::now();
        let answer = session.current.take();
        match (progress, answer) {
            (Progress::Done, Some(r)) => {
                let (text, _) = r.stdout.into_text();
                let Some((pid, ticks)) = parse_hello(&text) else {
                    return Err(OpError::Msg(format!(
                        "{what}: unexpected answer `{}`",
                        text.trim()
                    )));
                };
                session.pid = pid;
                session.clock = (answered, ticks);
                tracing::debug!(pid = %session.pid, "shell session started");
                Ok(session)
            }
            (Progress::Broken(e), _) => Err(OpError::docker(what)(e)),
            (Progress::Eof, _) => {
                exec::check_running(t).await?;
                Err(OpError::Msg(format!(
                    "{what}: the shell exited at once (does the image have /bin/sh?)"
                )))
            }
            _ => {
                discard(t, session).await;
                Err(OpError::Msg(format!(
                    "{what}: no answer within {}s",
                    START_TIMEOUT.as_secs()
                )))
            }
        }
    }

    /// Writes `command` with its markers.
    async fn begin(&mut self, command: &str, limit: usize) -> Result<(), OpError> {
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        let marker = format!("__AGENTD_END_{nonce}__");
        let line = format!(
            "__agentd_cmd='{}'; __agentd_run </dev/null 7>&- 8>&-; \
             {{ __agentd_rc=$?; __agentd_in=; printf '\\n{marker}%d\\n' \"$__agentd_rc\" >&7; \
             printf '\\n{marker}\\n' >&8; }} 2>/dev/null\n",
            command.replace('\'', r"'\''")
        );
        self.current = Some(Running {
            started: Instant::now(),
            written: false,
            stdout: MarkerScanner::new(format!("\n{marker}"), limit, is_exit_code),
            stderr: MarkerScanner::new(format!("\n{marker}"), limit, str::is_empty),
        });
        let write = async {
            self.input.write_all(line.as_bytes()).await?;
            self.input.flush().await
        };
        write
            .await
            .map_err(|e| OpError::Msg(format!("the shell session is broken: {e}")))?;
        if let Some(r) = self.current.as_mut() {
            r.written = true;
        }
        Ok(())
    }

    /// Reads the running command's output until both markers, the
    /// deadline, or (when `flood` is set) that many bytes.
    /// Cancel-safe: all state lives in `self`.
    async fn read(&mut self, deadline: Instant, flood: Option<u64>) -> Progress {
        loop {
            let Some(cur) = self.current.as_mut() else {
                return Progress::Done;
            };
            if cur.done() {
                return Progress::Done;
            }
            if flood.is_some_and(|f| cur.stdout.seen() + cur.stderr.seen() > f) {
                return Progress::Flood;
            }
            match tokio::time::timeout_at(deadline, self.output.next()).await {
                Err(_) => return Progress::Deadline,
                Ok(None) => return Progress::Eof,
                Ok(Some(Err(e))) => return Progress::Broken(e),
                Ok(Some(Ok(item))) => match item {
                    LogOutput::StdOut { message } | LogOutput::Console { message } => {
                        cur.stdout.push(&message)
                    }
                    LogOutput::StdErr { message } => cur.stderr.push(&message),
                    LogOutput::StdIn { .. } => {}
                },
            }
        }
    }

    /// Between commands: drops late output of background jobs and tells
    /// whether the shell is still there (it may have exited, or been
    /// killed, since the last call).
    fn idle_alive(&mut self) -> bool {
        loop {
            match self.output.next().now_or_never() {
                None => return true,
                Some(Some(Ok(_))) => continue,
                Some(Some(Err(_))) | Some(None) => return false,
            }
        }
    }

    /// Finishes a command a cancelled call left running, so its markers do
    /// not end up in the next command's output. False: the session is
    /// unusable.
    async fn recover(&mut self, t: Target<'_>) -> bool {
        let Some(cur) = self.current.as_ref() else {
            return true;
        };
        if !cur.written {
            return false;
        }
        let started = cur.started;
        if let Progress::Done = self.read(Instant::now(), None).await {
            self.current = None;
            return true;
        }
        if !kill_recent(t, &self.pid, self.clock, started).await {
            return false;
        }
        let done = matches!(
            self.read(Instant::now() + KILL_GRACE, None).await,
            Progress::Done
        );
        self.current = None;
        done
    }
}

/// "<pid> <uptime seconds>" → (pid, uptime in clock ticks).
fn parse_hello(text: &str) -> Option<(String, u64)> {
    let (pid, up) = text.trim().split_once(' ')?;
    if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let up: f64 = up.trim().parse().ok()?;
    Some((pid.to_string(), (up * TICKS_PER_SEC as f64) as u64))
}

/// /proc reports times in USER_HZ, 100 on Linux.
const TICKS_PER_SEC: u64 = 100;

fn is_exit_code(tail: &str) -> bool {
    !tail.is_empty() && tail.bytes().all(|b| b.is_ascii_digit())
}

/// Stops the shell's current command: its trap, and its processes
/// (children of the shell started since `since`, with their descendants).
/// False if the helper could not run.
async fn kill_recent(
    t: Target<'_>,
    shell_pid: &str,
    clock: (Instant, u64),
    since: Instant,
) -> bool {
    let (at, ticks) = clock;
    let elapsed = since.saturating_duration_since(at);
    // Start times are whole ticks, and our clock reading lags the shell's
    // by the round trip: a two-tick margin (20 ms).
    let min = ticks + elapsed.as_millis() as u64 * TICKS_PER_SEC / 1000;
    let min = min.saturating_sub(2).to_string();
    let args = [shell_pid, min.as_str()];
    match exec::helper(t, scripts::KILL_RECENT_CHILDREN, &args, None, 4096).await {
        Ok(o) if o.exit_code == Some(0) => {
            let (pids, _) = o.stdout.into_text();
            tracing::debug!(pids = pids.trim(), "stopped the timed-out command");
            true
        }
        Ok(o) => {
            tracing::warn!(exit = ?o.exit_code, "the kill helper failed");
            false
        }
        Err(e) => {
            tracing::warn!(error = ?e, "could not run the kill helper");
            false
        }
    }
}

fn fmt_secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{}s", s as u64)
    } else {
        format!("{s:.1}s")
    }
}

fn append_note(text: &mut String, note: &str) {
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push('[');
    text.push_str(note);
    text.push(']');
}

/// Kills a session and everything it started. Its connection is closed
/// first: the engine handles exec exits one at a time, each after its
/// output is delivered, so unread output would stall the killer's exit.
async fn discard(t: Target<'_>, session: Session) {
    let tag = session.tag.clone();
    drop(session);
    exec::kill_tagged(t, &tag).await;
}

/// The run's shell; calls are serialised, as in a terminal.
#[derive(Default)]
pub(crate) struct Shell {
    session: Mutex<Option<Session>>,
}

impl Shell {
    pub(crate) async fn run(
        &self,
        t: Target<'_>,
        work_dir: &str,
        command: &str,
        timeout: Duration,
        output_limit: usize,
    ) -> Result<CommandOutput, OpError> {
        if command.contains('\0') {
            return Err(OpError::Msg(
                "the command contains a NUL byte, which a shell cannot take".into(),
            ));
        }
        let mut guard = self.session.lock().await;
        let mut notes: Vec<String> = Vec::new();

        if let Some(s) = guard.as_mut() {
            if !s.recover(t).await {
                if let Some(old) = guard.take() {
                    discard(t, old).await;
                }
                notes.push(
                    "the previous command was interrupted; the shell session was restarted".into(),
                );
            } else if !s.idle_alive() {
                tracing::debug!("the shell session ended since the last command; restarting it");
                *guard = None;
            }
        }
        // Before the write: the command's processes must count as started
        // after this when a timeout kills "what started since".
        let mut started = Instant::now();
        for attempt in 0..2 {
            let session = match guard.as_mut() {
                Some(s) => s,
                None => guard.insert(Session::start(t, work_dir).await?),
            };
            started = Instant::now();
            match session.begin(command, output_limit).await {
                Ok(()) => break,
                Err(e) => {
                    // The shell died just now: once, start a fresh one.
                    *guard = None;
                    exec::check_running(t).await?;
                    if attempt == 1 {
                        return Err(e);
                    }
                    tracing::debug!(error = ?e, "the shell session broke; starting a fresh one");
                }
            }
        }
        let Some(session) = guard.as_mut() else {
            return Err(OpError::Msg("the shell session was lost".into()));
        };
        let mut timed_out = false;
        let mut restart = false;
        let mut exited = None;
        match session
            .read(started + timeout, Some(flood_limit(output_limit)))
            .await
        {
            Progress::Done => {}
            p @ (Progress::Deadline | Progress::Flood) => {
                let freed = kill_recent(t, &session.pid, session.clock, started).await
                    && matches!(
                        session.read(Instant::now() + KILL_GRACE, None).await,
                        Progress::Done
                    );
                restart = !freed;
                let what = if let Progress::Deadline = p {
                    timed_out = true;
                    format!("command timed out after {}", fmt_secs(timeout))
                } else {
                    format!(
                        "command printed more than {} and was stopped",
                        exec::human_bytes(flood_limit(output_limit))
                    )
                };
                notes.push(if restart {
                    format!("{what}; the shell session was restarted")
                } else {
                    format!("{what}; it was killed")
                });
            }
            Progress::Eof => {
                exec::check_running(t).await?;
                let code = exec::exit_code(t.docker, &session.exec_id).await;
                exited = Some(code.unwrap_or(-1));
                notes.push(match code {
                    Some(c) => format!(
                        "the shell exited with code {c}; the next command starts a fresh shell"
                    ),
                    None => "the shell exited; the next command starts a fresh shell".into(),
                });
            }
            Progress::Broken(err) => {
                *guard = None;
                exec::check_running(t).await?;
                return Err(OpError::docker("the shell session failed")(err));
            }
        }

        let Some(cur) = session.current.take() else {
            return Err(OpError::Msg("the shell session lost its command".into()));
        };
        if restart || exited.is_some() {
            if let Some(old) = guard.take() {
                drop(guard);
                discard(t, old).await;
            }
        } else {
            drop(guard);
        }

        let exit_code = match (exited, cur.stdout.tail()) {
            (Some(code), _) => code as i32,
            (None, Some(tail)) => tail.parse().unwrap_or(-1),
            (None, None) => KILLED_EXIT_CODE,
        };
        let (stdout, out_truncated) = cur.stdout.into_text();
        let (mut stderr, err_truncated) = cur.stderr.into_text();
        for note in &notes {
            append_note(&mut stderr, note);
        }
        Ok(CommandOutput {
            stdout,
            stderr,
            exit_code,
            timed_out,
            truncated: out_truncated || err_truncated,
        })
    }

    /// Kills the session and everything it started, then starts a fresh one.
    pub(crate) async fn restart(&self, t: Target<'_>, work_dir: &str) -> Result<(), OpError> {
        let mut guard = self.session.lock().await;
        if let Some(old) = guard.take() {
            discard(t, old).await;
        }
        *guard = Some(Session::start(t, work_dir).await?);
        Ok(())
    }

    /// A shell with its session already started: what a pooled container
    /// is kept with, so a run's first command pays neither the exec nor the
    /// shell's start.
    pub(crate) async fn started(t: Target<'_>, work_dir: &str) -> Result<Shell, OpError> {
        Ok(Shell {
            session: Mutex::new(Some(Session::start(t, work_dir).await?)),
        })
    }

    /// Whether an idle, started session still has its shell (a pooled
    /// container killed behind agentd's back has none). Never waits.
    pub(crate) fn is_alive(&self) -> bool {
        match self.session.try_lock() {
            Ok(mut guard) => guard.as_mut().is_some_and(Session::idle_alive),
            Err(_) => true,
        }
    }

    /// Takes over `other`'s session (a pooled container's), dropping any
    /// of its own.
    pub(crate) async fn adopt(&self, other: Shell) {
        *self.session.lock().await = other.session.into_inner();
    }

    /// Drops the session without waiting for a command in flight (the
    /// container's removal ends that one).
    pub(crate) fn close(&self) {
        if let Ok(mut guard) = self.session.try_lock() {
            guard.take();
        }
    }
}
