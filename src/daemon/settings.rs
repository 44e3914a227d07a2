//! The daemon's own settings (`[daemon]`), owned here and built by
//! `config`, which only parses the file.

use std::path::PathBuf;
use std::time::Duration;

pub const DEFAULT_STEP_TIMEOUT: Duration = Duration::from_secs(60);
pub const DEFAULT_MAX_CONCURRENT_RUNS: u32 = 64;
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// A month of history is enough to debug last week's runs without letting
/// the database grow forever on a busy server.
pub const DEFAULT_HISTORY_DAYS: u32 = 30;
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 1 << 20;

#[derive(Debug, Clone, PartialEq)]
pub struct DaemonConfig {
    pub plugins_dir: PathBuf,
    pub state_dir: PathBuf,
    pub socket: Option<PathBuf>,
    pub step_timeout: Duration,
    pub max_concurrent_runs: u32,
    pub socket_group: Option<String>,
    pub shutdown_grace: Duration,
    /// 0 keeps every run.
    pub history_days: u32,
    pub max_request_bytes: usize,
    /// Whether a symbolic link in the plugins folder is loaded. Off by
    /// default: a link lets whoever controls its target change the code the
    /// daemon runs, outside the folder whose permissions are checked.
    pub follow_symlinks: bool,
}
