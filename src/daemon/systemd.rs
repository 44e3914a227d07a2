//! The systemd notify protocol. Every call is a no-op without
//! `NOTIFY_SOCKET`, so the same binary runs under systemd, in a terminal and
//! in tests; a failure to notify is logged, never fatal, because the service
//! itself works either way.

use std::time::Duration;

use sd_notify::NotifyState;

fn send(states: &[NotifyState]) {
    if let Err(e) = sd_notify::notify(states) {
        tracing::warn!(error = %e, "cannot notify systemd");
    }
}

pub fn ready(status: &str) {
    send(&[NotifyState::Ready, NotifyState::Status(status)]);
}

pub fn status(status: &str) {
    send(&[NotifyState::Status(status)]);
}

pub fn stopping() {
    send(&[NotifyState::Stopping, NotifyState::Status("shutting down")]);
}

/// systemd 253+ requires the monotonic timestamp with `RELOADING=1`.
pub fn reloading() {
    match NotifyState::monotonic_usec_now() {
        Ok(now) => send(&[NotifyState::Reloading, now]),
        Err(_) => send(&[NotifyState::Reloading]),
    }
}

/// Pings from a task on the daemon's runtime, at half the interval systemd
/// asked for: a wedged runtime stops the pings and systemd restarts us.
pub fn spawn_watchdog() {
    let Some(interval) = sd_notify::watchdog_enabled() else {
        return;
    };
    let period = (interval / 2).max(Duration::from_millis(10));
    tracing::info!(?period, "systemd watchdog enabled");
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(period);
        loop {
            tick.tick().await;
            send(&[NotifyState::Watchdog]);
        }
    });
}

/// The sockets systemd passed (`LISTEN_FDS`), if this process is the one
/// they were meant for.
pub fn activated_socket() -> std::io::Result<Option<std::os::fd::RawFd>> {
    Ok(sd_notify::listen_fds()?.next())
}
