//! The sandbox's settings (`[sandbox]`), owned here and built by `config`,
//! which only parses the file. The defaults are OpenManus's, plus the
//! containment limits (`user`, `disk_limit`, `max_open_files`) that keep a
//! model's commands from reaching the host.

use std::time::Duration;

use super::fleet::EngineConfig;

#[derive(Debug, Clone, PartialEq)]
pub struct SandboxConfig {
    pub image: String,
    pub work_dir: String,
    pub memory_limit: String,
    pub cpu_limit: f64,
    pub timeout: Duration,
    pub network_enabled: bool,
    pub pids_limit: i64,
    pub docker_host: Option<String>,
    pub create_on_start: bool,
    pub output_limit: usize,
    /// Who every command runs as: a user of the image (`sandbox`, which
    /// `scripts/build-images.sh` creates with uid 1000), a numeric `uid`
    /// or `uid:gid` (needs no entry in the image's `/etc/passwd`, so it
    /// works with any image), or `root`, which must be asked for by name:
    /// root in the container is root on the host for any runtime or kernel
    /// bug.
    pub user: String,
    /// Size of each of the two tmpfs the model can write to (`work_dir`
    /// and `/tmp`); the root filesystem is read-only, so this is all the
    /// space a run has, and it is memory, counted in `memory_limit`, never
    /// the host's disk. Same syntax as `memory_limit`.
    pub disk_limit: String,
    /// The `nofile` ulimit of every process in the container.
    pub max_open_files: u64,
    /// Containers the daemon keeps created and started ahead of runs, each
    /// with its shell already open, so a run's first command does not wait
    /// for a container. Each is handed to one run only and removed with it.
    /// 0 turns the pool off.
    pub pool_size: usize,
    /// `[[sandbox.engines]]`, checked; empty means the one engine of
    /// [`Self::engine_list`].
    pub engines: Vec<EngineConfig>,
}

/// The largest `[sandbox] pool_size`: each pooled container holds its
/// memory and processes while idle, and a pool is a head start, not a fleet.
pub const MAX_POOL_SIZE: usize = 64;

impl SandboxConfig {
    /// The timeout of one command: what the plugin asked for, clamped to
    /// `timeout`, which is the operator's bound. A plugin asking for more
    /// (`timeout_secs` up to 136 years) gets `timeout`; one asking for
    /// nothing gets it too.
    pub fn command_timeout(&self, asked: Option<Duration>) -> Duration {
        asked.map_or(self.timeout, |t| t.min(self.timeout))
    }

    /// The engines runs are placed on: `[[sandbox.engines]]`, or the one
    /// engine `docker_host` (else `DOCKER_HOST`, else the default socket)
    /// names, called `local`, with no capacity of its own.
    pub fn engine_list(&self) -> Vec<EngineConfig> {
        if self.engines.is_empty() {
            vec![EngineConfig::default_engine(self.docker_host.clone())]
        } else {
            self.engines.clone()
        }
    }
}

/// The `[sandbox] user` used when none is configured.
pub const DEFAULT_SANDBOX_USER: &str = "sandbox";

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            image: "agentd-sandbox:latest".into(),
            work_dir: "/workspace".into(),
            memory_limit: "512m".into(),
            cpu_limit: 1.0,
            timeout: Duration::from_secs(300),
            network_enabled: false,
            pids_limit: 256,
            docker_host: None,
            create_on_start: false,
            output_limit: 1 << 20,
            user: DEFAULT_SANDBOX_USER.into(),
            disk_limit: "1g".into(),
            max_open_files: 1024,
            pool_size: 2,
            engines: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plugin_cannot_ask_for_more_than_the_configured_timeout() {
        let c = SandboxConfig {
            timeout: Duration::from_secs(30),
            ..SandboxConfig::default()
        };
        let year = Duration::from_secs(u64::from(u32::MAX));
        assert_eq!(c.command_timeout(Some(year)), Duration::from_secs(30));
        assert_eq!(c.command_timeout(None), Duration::from_secs(30));
        assert_eq!(
            c.command_timeout(Some(Duration::from_secs(5))),
            Duration::from_secs(5)
        );
    }
}
