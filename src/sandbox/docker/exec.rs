//! One-off commands through `docker exec`, bounded in time and memory.

use std::time::Duration;

use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bollard::Docker;
use futures::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio::time::Instant;

use super::engine::OpError;
use super::output::CappedOutput;
use super::scripts;

/// Environment variable that tags every process of a one-off exec, so a
/// timed-out command can be killed with all it started ([`scripts::KILL_TAGGED`]).
pub(crate) const EXEC_TAG_VAR: &str = "AGENTD_EXEC";

/// How long helper execs (killers, mkdir, listings) may take.
pub(crate) const HELPER_TIMEOUT: Duration = Duration::from_secs(30);
/// After a kill, how long to wait for the exec's streams to close.
const DRAIN_GRACE: Duration = Duration::from_secs(3);

/// Where an exec runs.
#[derive(Clone, Copy)]
pub(crate) struct Target<'a> {
    pub(crate) docker: &'a Docker,
    pub(crate) container: &'a str,
    /// The `User` every exec runs as (`uid:gid`): the container's own user
    /// is not the sandbox user (see `container::KEEPER_USER`). Empty: the
    /// container's.
    pub(crate) user: &'a str,
}

pub(crate) struct ExecRequest {
    pub(crate) cmd: Vec<String>,
    pub(crate) working_dir: Option<String>,
    pub(crate) stdin: Option<Vec<u8>>,
    pub(crate) timeout: Duration,
    pub(crate) output_limit: usize,
    /// Kill the command (tagging its processes) when it times out or floods.
    pub(crate) killable: bool,
}

pub(crate) struct ExecOutcome {
    pub(crate) stdout: CappedOutput,
    pub(crate) stderr: CappedOutput,
    /// `None` when the command could not be seen to finish.
    pub(crate) exit_code: Option<i64>,
    pub(crate) timed_out: bool,
    /// Killed for printing far more than the output limit.
    pub(crate) flooded: bool,
}

/// Output beyond which a command is killed rather than read on: the model
/// sees only `limit` bytes anyway, and reading gigabytes costs CPU for
/// nothing.
pub(crate) fn flood_limit(output_limit: usize) -> u64 {
    (output_limit as u64).saturating_mul(64).max(64 << 20)
}

/// `67108864` → `64 MiB`, for notes the model reads.
pub(crate) fn human_bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 30 && n % (1 << 30) == 0 => format!("{} GiB", n >> 30),
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

/// Creates and starts an exec attached to its output (and stdin when asked)
/// that carries `tag` in its environment, so the processes it starts can be
/// found and killed later. Returns the exec's id with its streams.
pub(crate) async fn start_attached(
    t: Target<'_>,
    cmd: Vec<String>,
    tag: &str,
    working_dir: Option<String>,
    stdin: bool,
    what: &str,
) -> Result<(String, StartExecResults), OpError> {
    let created = t
        .docker
        .create_exec(
            t.container,
            CreateExecOptions {
                cmd: Some(cmd),
                env: Some(vec![tag.to_string()]),
                working_dir,
                user: (!t.user.is_empty()).then(|| t.user.to_string()),
                attach_stdin: Some(stdin),
                attach_stdout: Some(true),
                attach_stderr: Some(true),
                tty: Some(false),
                ..Default::default()
            },
        )
        .await
        .map_err(OpError::docker(what))?;
    let started = t
        .docker
        .start_exec(
            &created.id,
            Some(StartExecOptions {
                detach: false,
                tty: false,
                output_capacity: Some(64 * 1024),
            }),
        )
        .await
        .map_err(OpError::docker(what))?;
    Ok((created.id, started))
}

/// Runs `req.cmd` to completion, its timeout, or its flood limit.
pub(crate) async fn run(t: Target<'_>, req: ExecRequest) -> Result<ExecOutcome, OpError> {
    let tag = format!("{EXEC_TAG_VAR}={}", uuid::Uuid::new_v4().simple());
    let (exec_id, started) = start_attached(
        t,
        req.cmd,
        &tag,
        req.working_dir,
        req.stdin.is_some(),
        "cannot start the command",
    )
    .await?;
    let StartExecResults::Attached { mut output, input } = started else {
        return Err(OpError::Msg("the engine detached the command".into()));
    };
    // Feed stdin concurrently: a command may print before it reads, and a
    // full pipe on either side must not deadlock us.
    let writer = req.stdin.map(|bytes| {
        let mut input = input;
        tokio::spawn(async move {
            if input.write_all(&bytes).await.is_ok() {
                let _ = input.shutdown().await;
            }
        })
    });

    let mut out = ExecOutcome {
        stdout: CappedOutput::new(req.output_limit),
        stderr: CappedOutput::new(req.output_limit),
        exit_code: None,
        timed_out: false,
        flooded: false,
    };
    let flood = flood_limit(req.output_limit);
    let deadline = Instant::now() + req.timeout;
    let mut finished = false;
    loop {
        match tokio::time::timeout_at(deadline, output.next()).await {
            Err(_) => {
                out.timed_out = true;
                break;
            }
            Ok(None) => {
                finished = true;
                break;
            }
            Ok(Some(Err(e))) => {
                tracing::debug!(error = %e, "exec output stream failed");
                break;
            }
            Ok(Some(Ok(item))) => {
                push(&mut out, item);
                if out.stdout.total() + out.stderr.total() > flood {
                    out.flooded = true;
                    break;
                }
            }
        }
    }
    if !finished && req.killable {
        tracing::debug!(
            timed_out = out.timed_out,
            flooded = out.flooded,
            "killing the command"
        );
        // Keep reading while the killer runs: the engine handles exec exits
        // one at a time, each after its output is delivered, so unread
        // output of this exec would stall the killer's own exit.
        let kill = kill_tagged(t, &tag);
        tokio::pin!(kill);
        let mut killed_at: Option<Instant> = None;
        loop {
            let grace = async {
                match killed_at {
                    Some(at) => tokio::time::sleep_until(at + DRAIN_GRACE).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = &mut kill, if killed_at.is_none() => killed_at = Some(Instant::now()),
                item = output.next() => match item {
                    Some(Ok(item)) => push(&mut out, item),
                    _ => break,
                },
                _ = grace => break,
            }
        }
        if killed_at.is_none() {
            // The streams closed first; orphans may still live.
            kill.await;
        }
    }
    if let Some(w) = writer {
        w.abort();
    }
    drop(output);
    out.exit_code = exit_code(t.docker, &exec_id).await;
    Ok(out)
}

fn push(out: &mut ExecOutcome, item: LogOutput) {
    match item {
        LogOutput::StdErr { message } => out.stderr.push(&message),
        LogOutput::StdOut { message } | LogOutput::Console { message } => out.stdout.push(&message),
        LogOutput::StdIn { .. } => {}
    }
}

/// The exec's exit code. Its stream can close a moment before the engine
/// records the exit, so ask a few times.
pub(crate) async fn exit_code(docker: &Docker, exec_id: &str) -> Option<i64> {
    for attempt in 0..20 {
        match docker.inspect_exec(exec_id).await {
            Ok(info) if info.running != Some(true) => return info.exit_code,
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(error = %e, "inspect_exec failed");
                return None;
            }
        }
        tokio::time::sleep(Duration::from_millis(5 * (attempt + 1))).await;
    }
    None
}

/// Runs a helper program (from [`scripts`]) with arguments; not killable,
/// bounded by [`HELPER_TIMEOUT`].
pub(crate) async fn helper(
    t: Target<'_>,
    script: &str,
    args: &[&str],
    working_dir: Option<String>,
    output_limit: usize,
) -> Result<ExecOutcome, OpError> {
    let mut cmd = vec![
        "sh".to_string(),
        "-c".to_string(),
        script.to_string(),
        "agentd".to_string(),
    ];
    cmd.extend(args.iter().map(|a| a.to_string()));
    run(
        t,
        ExecRequest {
            cmd,
            working_dir,
            stdin: None,
            timeout: HELPER_TIMEOUT,
            output_limit,
            killable: false,
        },
    )
    .await
}

/// SIGKILLs every process carrying `tag` in its environment. Failures are
/// logged: the caller reports the timeout either way.
pub(crate) async fn kill_tagged(t: Target<'_>, tag: &str) {
    // Boxed: `helper` is `run`, which calls this.
    match Box::pin(helper(t, scripts::KILL_TAGGED, &[tag], None, 4096)).await {
        Ok(o) if o.exit_code == Some(0) => {
            let (n, _) = o.stdout.into_text();
            tracing::debug!(tag, killed = n.trim(), "killed tagged processes");
        }
        Ok(o) => tracing::warn!(tag, exit = ?o.exit_code, "the kill helper failed"),
        Err(e) => tracing::warn!(tag, error = ?e, "could not run the kill helper"),
    }
}

/// Whether the container still runs: told apart from a shell that merely
/// exited when a session's stream ends.
pub(crate) async fn check_running(t: Target<'_>) -> Result<(), OpError> {
    let info = t
        .docker
        .inspect_container(t.container, None)
        .await
        .map_err(OpError::docker("cannot inspect the sandbox container"))?;
    match info.state.and_then(|s| s.running) {
        Some(true) => Ok(()),
        _ => Err(OpError::Stopped),
    }
}
