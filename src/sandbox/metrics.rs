//! What the sandbox records through the `metrics` facade: how long
//! containers take to make and to remove. The pools' state is read from
//! the fleet by the daemon at each scrape. Without an exporter installed
//! every record is a no-op.

use std::time::Duration;

use ::metrics::histogram;

/// Seconds to create and start one container (for a run or a pool), by
/// `result`: `ok` or `error`.
pub const CREATE_DURATION: &str = "agentd_sandbox_create_duration_seconds";
/// Seconds to remove one container, by `result`.
pub const REMOVE_DURATION: &str = "agentd_sandbox_remove_duration_seconds";

/// Buckets of both: a local engine takes a few hundred milliseconds, a
/// loaded or remote one seconds.
pub const BUCKETS: &[f64] = &[
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

fn result(ok: bool) -> &'static str {
    if ok {
        "ok"
    } else {
        "error"
    }
}

/// A container's creation (and start) ended.
pub(crate) fn created(elapsed: Duration, ok: bool) {
    histogram!(CREATE_DURATION, "result" => result(ok)).record(elapsed.as_secs_f64());
}

/// A container's removal ended.
pub(crate) fn removed(elapsed: Duration, ok: bool) {
    histogram!(REMOVE_DURATION, "result" => result(ok)).record(elapsed.as_secs_f64());
}
