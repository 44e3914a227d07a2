//! The sandbox of one MCP session: what the tool plugins it calls act in
//! (`[mcp_server] expose_tools`). As a run's, it is one container shared by
//! the session's calls and created on the first call that needs it. Unlike
//! a run, a session has no end the daemon waits for, so its sandbox goes
//! when the session's handler is dropped (the session closed or expired),
//! or earlier, after `idle_timeout` without a call; a later call then gets
//! a fresh one. No container outlives its session.

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use tracing::{debug, Instrument};

use crate::sandbox::{Sandbox, SandboxProvider};
use crate::sync::LockExt;

/// A session's sandbox, present or not.
pub struct SessionSandbox {
    provider: Arc<dyn SandboxProvider>,
    idle_timeout: Duration,
    state: Mutex<State>,
}

/// A sandbox with the key it was made under.
type Keyed = (String, Arc<dyn Sandbox>);

#[derive(Default)]
struct State {
    /// The sandbox now.
    live: Option<Keyed>,
    /// How many sandboxes this session has had: each gets its own key, so
    /// a new one never meets the container of one still being removed.
    made: u32,
    last_call: Option<Instant>,
    in_flight: usize,
}

/// A call's hold on the sandbox: while one is alive the sandbox is not idle.
pub struct Lease {
    owner: Arc<SessionSandbox>,
    pub sandbox: Arc<dyn Sandbox>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut st = self.owner.state.lock_unpoisoned();
        st.in_flight = st.in_flight.saturating_sub(1);
        st.last_call = Some(Instant::now());
    }
}

impl SessionSandbox {
    pub fn new(provider: Arc<dyn SandboxProvider>, idle_timeout: Duration) -> Arc<Self> {
        Arc::new(SessionSandbox {
            provider,
            idle_timeout,
            state: Mutex::new(State::default()),
        })
    }

    /// The sandbox for one call, made when there is none. `session` names
    /// the MCP session: the container's run label is `mcp-<session>-<n>`.
    /// The handle is cheap; the container itself is created by the first
    /// sandbox operation, as in a run.
    pub fn lease(self: &Arc<Self>, session: &str) -> Lease {
        let mut st = self.state.lock_unpoisoned();
        st.in_flight += 1;
        st.last_call = Some(Instant::now());
        let sandbox = match &st.live {
            Some((_, sandbox)) => sandbox.clone(),
            None => {
                st.made += 1;
                let key = format!("mcp-{session}-{}", st.made);
                let sandbox = self.provider.for_run(&key);
                debug!(sandbox = %key, "MCP session sandbox made");
                st.live = Some((key.clone(), sandbox.clone()));
                let span = tracing::info_span!("mcp_sandbox_reaper", sandbox = %key);
                tokio::spawn(reap_when_idle(Arc::downgrade(self)).instrument(span));
                sandbox
            }
        };
        Lease {
            owner: self.clone(),
            sandbox,
        }
    }

    /// Whether a sandbox is present (made and not yet removed).
    #[cfg(test)]
    fn is_live(&self) -> bool {
        self.state.lock_unpoisoned().live.is_some()
    }

    /// How long to wait before looking again, or `Err` with the sandbox,
    /// taken, once it has been idle for `idle_timeout` (`Err(None)`: there
    /// is none any more).
    fn idle_wait(&self) -> Result<Duration, Option<Keyed>> {
        let mut st = self.state.lock_unpoisoned();
        if st.live.is_none() {
            return Err(None);
        }
        if st.in_flight > 0 {
            return Ok(self.idle_timeout);
        }
        let idle = st.last_call.map_or(Duration::MAX, |t| t.elapsed());
        if idle >= self.idle_timeout {
            return Err(st.live.take());
        }
        Ok(self.idle_timeout - idle)
    }
}

/// Removes the sandbox once no call has used it for `idle_timeout`; ends
/// when it is removed or the session is gone (whose drop removes it).
async fn reap_when_idle(owner: Weak<SessionSandbox>) {
    loop {
        let Some(me) = owner.upgrade() else {
            return;
        };
        match me.idle_wait() {
            Ok(wait) => {
                drop(me);
                tokio::time::sleep(wait).await;
            }
            Err(taken) => {
                drop(me);
                if let Some((key, sandbox)) = taken {
                    debug!(sandbox = %key, "MCP session sandbox idle: removing it");
                    sandbox.destroy().await;
                }
                return;
            }
        }
    }
}

impl Drop for SessionSandbox {
    /// The session is over: its container goes too, in the background
    /// (a drop cannot wait); whatever a removal misses, the daemon's reaper
    /// takes at shutdown.
    fn drop(&mut self) {
        let taken = self
            .state
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .live
            .take();
        let Some((key, sandbox)) = taken else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                debug!(sandbox = %key, "MCP session closed: removing its sandbox");
                rt.spawn(async move { sandbox.destroy().await });
            }
            Err(_) => {
                tracing::warn!(sandbox = %key, "no runtime to remove an MCP session's sandbox; the reaper will")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::{CommandOutput, CommandSpec, DirEntry, SandboxError};
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Default)]
    struct Counting {
        made: AtomicUsize,
        destroyed: Arc<AtomicUsize>,
    }

    struct Fake(Arc<AtomicUsize>);

    #[async_trait::async_trait]
    impl Sandbox for Fake {
        async fn run(&self, _: CommandSpec) -> Result<CommandOutput, SandboxError> {
            Ok(CommandOutput::default())
        }
        async fn shell(&self, _: &str, _: Option<Duration>) -> Result<CommandOutput, SandboxError> {
            Ok(CommandOutput::default())
        }
        async fn restart_shell(&self) -> Result<(), SandboxError> {
            Ok(())
        }
        async fn read_file(&self, _: &str) -> Result<Vec<u8>, SandboxError> {
            Ok(Vec::new())
        }
        async fn write_file(&self, _: &str, _: &[u8]) -> Result<(), SandboxError> {
            Ok(())
        }
        async fn list_dir(&self, _: &str) -> Result<Vec<DirEntry>, SandboxError> {
            Ok(Vec::new())
        }
        async fn destroy(&self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    impl SandboxProvider for Counting {
        fn for_run(&self, _: &str) -> Arc<dyn Sandbox> {
            self.made.fetch_add(1, Ordering::SeqCst);
            Arc::new(Fake(self.destroyed.clone()))
        }
    }

    #[tokio::test]
    async fn idle_sandboxes_go_busy_ones_stay_and_a_closed_session_takes_its_own() {
        let idle = Duration::from_millis(500);
        let provider = Arc::new(Counting::default());
        let destroyed = provider.destroyed.clone();
        let s = SessionSandbox::new(provider.clone(), idle);
        let lease = s.lease("abc");
        // A call that runs longer than the idle timeout keeps it.
        tokio::time::sleep(idle * 2 + idle / 2).await;
        assert!(s.is_live(), "a call in flight keeps the sandbox");
        drop(lease);
        let released = Instant::now();
        tokio::time::sleep(idle / 4).await;
        assert!(s.is_live(), "not idle long enough yet");
        while s.is_live() {
            assert!(
                released.elapsed() < Duration::from_secs(10),
                "never removed"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(released.elapsed() >= idle, "removed before it was idle");
        assert_eq!(destroyed.load(Ordering::SeqCst), 1);
        // The next call makes a new one; the session's end removes it.
        drop(s.lease("abc"));
        assert_eq!(provider.made.load(Ordering::SeqCst), 2);
        drop(s);
        let dropped = Instant::now();
        while destroyed.load(Ordering::SeqCst) < 2 {
            assert!(
                dropped.elapsed() < Duration::from_secs(10),
                "not removed with the session"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}
