//! Wall-clock timestamps as the daemon, the plugin host and the CLI record
//! them. A leaf module, so that each of them can stamp a record without
//! importing another's.

use std::time::{SystemTime, UNIX_EPOCH};

/// Unix time in milliseconds: the unit of every `*_at_ms` field in the API
/// and the history. A clock set before 1970 reads 0 rather than failing, as
/// a timestamp is never worth failing a run for.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
