//! Shared test harness: real plugin components built from `plugins/`, the
//! scripted fake LLM on loopback, and an agent wired to both.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use agentd::agent::AgentConfig;
use agentd::agent::{Agent, Runtime};
use agentd::llm::{LlmClient, LlmSettings, RetryPolicy};
use agentd::plugin::{EngineLimits, PluginHost};
use agentd::sandbox::{NoSandbox, SandboxProvider};
use agentd::testkit::FakeLlm;

pub mod daemon;
pub mod fault;
pub mod tmpfs;

/// The environment variables through which a caller's own setup could
/// reach an `agentd` under test: its configuration, socket, bundle, LLM
/// endpoint and Docker engine.
pub const AGENTD_ENV: &[&str] = &[
    "AGENTD_CONFIG",
    "AGENTD_SOCKET",
    "AGENTD_BUNDLED_PLUGINS",
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "DOCKER_HOST",
    // A developer's collector must not receive (or shape) the tests' traces.
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
];

/// An `agentd` command (`exe`) with none of [`AGENTD_ENV`] inherited, so
/// a test sees only what it sets.
pub fn scrubbed(exe: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
    let mut cmd = std::process::Command::new(exe);
    for var in AGENTD_ENV {
        cmd.env_remove(var);
    }
    cmd
}

/// Serves `app` on a fresh loopback port for the rest of the test: a
/// stand-in endpoint (a proxy, a redirecting server, an OTLP receiver).
pub async fn serve_loopback(app: axum::Router) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let addr = listener.local_addr().expect("its address");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    addr
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Builds the plugin workspace once per test binary (a no-op when it is up to
/// date) and returns the folder holding the components.
pub fn built_plugins() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        agentd::testkit::build_plugins(&repo_root()).unwrap_or_else(|e| panic!("{e}"))
    })
}

/// Builds the Python plugins of `plugins/python/` once per test binary
/// (`plugins/python/build.sh`: the pinned componentize-py, installed on
/// first use; a plugin whose inputs did not change is not rebuilt) and
/// returns the folder holding them, the same as [`built_plugins`]'s, so
/// [`plugins_dir`] and the daemon helpers find both languages there once
/// this has run.
pub fn built_python_plugins() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        built_plugins();
        agentd::testkit::build_python_plugins(&repo_root()).unwrap_or_else(|e| panic!("{e}"))
    })
}

/// An event sink for `RunOptions::events` and what it has seen so far.
pub fn recording() -> (
    agentd::agent::EventSink,
    Arc<std::sync::Mutex<Vec<agentd::agent::RunEvent>>>,
) {
    let events = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = events.clone();
    (
        Arc::new(move |e: &agentd::agent::RunEvent| sink.lock().expect("events").push(e.clone())),
        events,
    )
}

/// A fresh plugins folder holding copies of the named components.
pub fn plugins_dir(names: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let built = built_plugins();
    for name in names {
        let from = built.join(format!("{name}.wasm"));
        std::fs::copy(&from, dir.path().join(format!("{name}.wasm")))
            .unwrap_or_else(|e| panic!("copy {}: {e}", from.display()));
    }
    dir
}

pub const ALL_TEST_PLUGINS: &[&str] = &[
    "toolcall",
    "react",
    "planning",
    "terminate",
    "echo",
    "misbehave",
    "fail_tool",
    "bash",
    "str_replace_editor",
    "python_execute",
    "ask_human",
    "legacy_strategy",
    "legacy_tool",
    "legacy_v0_2_tool",
    "legacy_v0_2_1_tool",
    "legacy_v0_2_2_strategy",
    "legacy_v0_2_3_strategy",
];

pub struct Harness {
    pub llm: FakeLlm,
    pub runtime: Arc<Runtime>,
    pub dir: tempfile::TempDir,
}

impl Harness {
    pub async fn new() -> Self {
        Self::with_step_timeout(Duration::from_secs(30)).await
    }

    pub async fn with_step_timeout(step_timeout: Duration) -> Self {
        Self::build(
            step_timeout,
            Arc::new(NoSandbox::new("tests of the core have no sandbox")),
        )
        .await
    }

    pub async fn build(step_timeout: Duration, sandboxes: Arc<dyn SandboxProvider>) -> Self {
        let dir = plugins_dir(ALL_TEST_PLUGINS);
        let host = PluginHost::new(EngineLimits {
            max_concurrent_runs: 4,
        })
        .expect("plugin host");
        let report = host.load_dir(dir.path()).await.expect("load plugins");
        assert!(
            report.failed.is_empty(),
            "plugins failed: {:?}",
            report.failed
        );
        let runtime = Arc::new(Runtime {
            plugins: Arc::new(host),
            sandboxes,
            step_timeout,
            limits: agentd::agent::RunLimits::default(),
            tool_provider: Arc::new(agentd::agent::NoToolProvider),
            grants: Default::default(),
        });
        Harness {
            llm: FakeLlm::start().await.expect("fake LLM"),
            runtime,
            dir,
        }
    }

    pub fn settings(&self) -> LlmSettings {
        LlmSettings {
            api_key: Some("test-key".into()),
            max_tokens: Some(100),
            temperature: Some(0.0),
            retry: RetryPolicy {
                max_retries: 3,
                initial_backoff: Duration::from_millis(10),
                max_backoff: Duration::from_millis(200),
                ..RetryPolicy::default()
            },
            ..agentd::testkit::llm_settings(self.llm.base_url())
        }
    }

    pub fn agent(&self, config: AgentConfig) -> Agent {
        self.agent_with(config, self.settings())
    }

    /// One run of a fresh agent with default options.
    pub async fn run(&self, config: AgentConfig, request: &str) -> agentd::agent::RunRecord {
        self.agent(config)
            .run(request, agentd::agent::RunOptions::default())
            .await
            .expect("run")
    }

    pub fn agent_with(&self, config: AgentConfig, settings: LlmSettings) -> Agent {
        Agent::new(
            config,
            LlmClient::new(settings).expect("llm client"),
            self.runtime.clone(),
        )
    }
}

/// OpenManus's `ToolCallAgent` prompts (contract §5), which the `toolcall`
/// strategy plugin gives as its defaults.
pub const TOOLCALL_SYSTEM_PROMPT: &str = "You are an agent that can execute tool calls";
pub const TOOLCALL_NEXT_STEP_PROMPT: &str =
    "If you want to stop interaction, use `terminate` tool/function call.";

/// An agent on the `toolcall` strategy with the test tools and a step
/// limit; its prompts are the strategy's defaults.
pub fn toolcall_agent(max_steps: u32) -> AgentConfig {
    AgentConfig {
        strategy: "toolcall".into(),
        tools: vec!["echo".into(), "fail_tool".into(), "terminate".into()],
        max_steps: Some(max_steps),
        ..AgentConfig::with_defaults("tester")
    }
}

/// The contents of the `tool` messages of a run, in order.
pub fn tool_outputs(record: &agentd::agent::RunRecord) -> Vec<String> {
    record
        .messages
        .iter()
        .filter(|m| m.role == agentd::chat::Role::Tool)
        .map(|m| m.content_str().to_string())
        .collect()
}

/// Containers (running or not) carrying `label` (`key=value`). Tests that
/// call it need a Docker engine (scripts/ensure-docker.sh).
pub async fn containers_labelled(label: &str) -> Vec<bollard::models::ContainerSummary> {
    use bollard::query_parameters::ListContainersOptionsBuilder;
    let docker = bollard::Docker::connect_with_defaults().expect("docker client");
    let filters = std::collections::HashMap::from([("label", vec![label.to_string()])]);
    docker
        .list_containers(Some(
            ListContainersOptionsBuilder::default()
                .all(true)
                .filters(&filters)
                .build(),
        ))
        .await
        .expect("list containers (is Docker running? scripts/ensure-docker.sh)")
}

/// How many containers belong to the run `run_id`.
pub async fn containers_of_run(run_id: &str) -> usize {
    containers_labelled(&format!("agentd.run={run_id}"))
        .await
        .len()
}

/// The smallest core module, `(module)`: valid wasm, but not a component.
pub const CORE_MODULE: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
/// The smallest component, `(component)`: valid, but of neither world.
pub const EMPTY_COMPONENT: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];

/// Files that must never replace a serving plugin, each with the words its
/// error gives: `good` is a real component to cut short.
pub fn bad_plugin_files(good: &[u8]) -> Vec<(&'static str, Vec<u8>, &'static str)> {
    vec![
        (
            "truncated",
            good[..good.len() / 2].to_vec(),
            "not a valid WebAssembly component",
        ),
        (
            "random bytes",
            b"\x13\x37 certainly not wasm, just bytes".to_vec(),
            "not a valid WebAssembly component",
        ),
        (
            "a core module",
            CORE_MODULE.to_vec(),
            "not a valid WebAssembly component",
        ),
        (
            "a component of neither world",
            EMPTY_COMPONENT.to_vec(),
            "exports neither",
        ),
    ]
}

/// Every field `GET /v1/plugins` promises for each file.
pub const PLUGIN_STATUS_FIELDS: &[&str] = &[
    "name",
    "kind",
    "version",
    "description",
    "contract",
    "file",
    "sha256",
    "loaded_at_ms",
    "status",
    "error",
    "serving_version",
];
