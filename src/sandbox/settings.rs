//! The sandbox's settings (`[sandbox]`), owned here and built by `config`,
//! which only parses the file. The defaults are OpenManus's.

use std::time::Duration;

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
}

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
        }
    }
}
