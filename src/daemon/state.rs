//! What the daemon's handlers share.
//!
//! The configuration lives in a [`Generation`] behind a lock: SIGHUP builds
//! a new one and swaps it in; a run takes what it needs from the current
//! generation when it is created and keeps it, so a reload never changes a
//! run in flight.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use super::event_bus::EventBus;
use super::history::History;
use super::peer::AccessPolicy;
use super::runs::RunManager;
use crate::agent::settings::resolve;
use crate::agent::{Agent, Runtime};
use crate::api::{AgentList, AgentView};
use crate::config::Config;
use crate::llm::{AnsweredEndpoints, LlmClient};
use crate::mcp::McpClients;
use crate::plugin::PluginHost;
use crate::sandbox::fleet::Fleet;
use crate::sandbox::SandboxProvider;
use crate::sync::{LockExt, RwLockExt};

/// One loaded configuration and the clients built from it.
pub struct Generation {
    pub config: Config,
    pub runtime: Arc<Runtime>,
    /// Per agent: one HTTP client (and connection pool) shared by its runs,
    /// or why its `[llm]` settings are unusable.
    llm: BTreeMap<String, Result<LlmClient, String>>,
}

#[derive(Debug, thiserror::Error)]
pub enum AgentLookupError {
    #[error("unknown agent `{name}` (known: {known})")]
    Unknown { name: String, known: String },
    #[error("agent `{name}` cannot run: {reason}")]
    Unusable { name: String, reason: String },
}

impl Generation {
    /// `answered` is the daemon's for its whole life, so that a reload
    /// keeps knowing which endpoints have answered (see `llm::answered`).
    pub fn new(
        config: Config,
        plugins: Arc<PluginHost>,
        sandboxes: Arc<dyn SandboxProvider>,
        mcp: Arc<McpClients>,
        answered: &AnsweredEndpoints,
    ) -> Self {
        let llm = config
            .agents
            .keys()
            .map(|name| {
                let client = config
                    .llm
                    .check_api_key(name)
                    .map_err(|e| e.to_string())
                    .and_then(|()| {
                        LlmClient::new(config.llm.for_agent(name))
                            .map(|c| c.with_answered(answered.clone()))
                            .map_err(|e| e.to_string())
                    });
                (name.clone(), client)
            })
            .collect();
        let runtime = Arc::new(Runtime {
            plugins,
            sandboxes,
            step_timeout: config.daemon.step_timeout,
            grants: Arc::new(config.plugin_grants.clone()),
            limits: config.daemon.run_limits,
            tool_provider: mcp,
        });
        Generation {
            config,
            runtime,
            llm,
        }
    }

    pub fn agent(&self, name: &str) -> Result<Agent, AgentLookupError> {
        let Some(config) = self.config.agent(name) else {
            return Err(AgentLookupError::Unknown {
                name: name.to_string(),
                known: self
                    .config
                    .agents
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        };
        match self.llm.get(name) {
            Some(Ok(llm)) => Ok(Agent::new(
                config.clone(),
                llm.clone(),
                self.runtime.clone(),
            )),
            Some(Err(reason)) => Err(AgentLookupError::Unusable {
                name: name.to_string(),
                reason: reason.clone(),
            }),
            None => Err(AgentLookupError::Unusable {
                name: name.to_string(),
                reason: "no LLM client".into(),
            }),
        }
    }
}

pub struct Daemon {
    generation: RwLock<Arc<Generation>>,
    pub plugins: Arc<PluginHost>,
    /// The engines runs are placed on (`[[sandbox.engines]]`, or the one
    /// local engine).
    pub fleet: Option<Arc<Fleet>>,
    pub sandboxes: Arc<dyn SandboxProvider>,
    /// Why there is no Docker provider (an invalid `[sandbox]` section).
    pub docker_error: Option<String>,
    pub runs: Arc<RunManager>,
    /// The daily token budgets and runs' prices (`daemon::budget`).
    pub budgets: Arc<super::budget::Budgets>,
    pub history: History,
    pub started: Instant,
    pub socket: PathBuf,
    pub policy: AccessPolicy,
    /// The file SIGHUP reads again; `None` runs on built-in defaults.
    pub config_path: Option<PathBuf>,
    pub bus: Arc<EventBus>,
    /// The `[mcp.<server>]` servers; SIGHUP hands them the new tables.
    pub mcp: Arc<McpClients>,
    /// What `warn_missing_plugins` said last.
    missing_reported: std::sync::Mutex<Vec<(String, Vec<String>)>>,
    /// Held by each plugin install or removal through the API, so two of
    /// them cannot interleave their checks and renames (`plugin_install.rs`).
    pub installs: tokio::sync::Mutex<()>,
    /// Which LLM endpoints have answered since the daemon started, carried
    /// over every configuration generation.
    answered: AnsweredEndpoints,
}

pub struct DaemonParts {
    pub config: Config,
    pub config_path: Option<PathBuf>,
    pub plugins: Arc<PluginHost>,
    pub fleet: Option<Arc<Fleet>>,
    pub sandboxes: Arc<dyn SandboxProvider>,
    pub docker_error: Option<String>,
    pub history: History,
    pub socket: PathBuf,
    pub policy: AccessPolicy,
    pub bus: Arc<EventBus>,
    pub mcp: Arc<McpClients>,
}

impl Daemon {
    pub fn new(p: DaemonParts) -> Self {
        let budgets = Arc::new(super::budget::Budgets::new(&p.config));
        let runs = Arc::new(
            RunManager::new(
                p.history.clone(),
                p.config.daemon.max_concurrent_runs,
                p.config.daemon.max_queued_runs,
                p.config.daemon.max_queued_runs_per_user,
                p.config.daemon.release_waiting,
                p.bus.clone(),
            )
            .with_artifacts(p.config.daemon.state_dir.join("artifacts"))
            .with_budgets(budgets.clone()),
        );
        let answered = AnsweredEndpoints::default();
        let generation = Generation::new(
            p.config,
            p.plugins.clone(),
            p.sandboxes.clone(),
            p.mcp.clone(),
            &answered,
        );
        Daemon {
            generation: RwLock::new(Arc::new(generation)),
            plugins: p.plugins,
            fleet: p.fleet,
            sandboxes: p.sandboxes,
            docker_error: p.docker_error,
            runs,
            budgets,
            history: p.history,
            started: Instant::now(),
            socket: p.socket,
            policy: p.policy,
            config_path: p.config_path,
            bus: p.bus,
            mcp: p.mcp,
            missing_reported: Default::default(),
            installs: tokio::sync::Mutex::new(()),
            answered,
        }
    }

    /// Every plugin file's record with what the running configuration
    /// grants it (secrets by name only): `GET /v1/plugins`, and the answers
    /// of the install and remove routes.
    pub fn plugin_statuses(&self) -> Vec<crate::plugin::PluginStatus> {
        let grants = self.generation().runtime.grants.clone();
        let mut statuses = self.plugins.statuses();
        for s in &mut statuses {
            s.grants = grants.of(&s.name).public();
        }
        statuses
    }

    pub fn generation(&self) -> Arc<Generation> {
        self.generation.read_unpoisoned().clone()
    }

    /// Makes `config` the running configuration; its `[mcp.*]` tables go to
    /// the MCP client, which starts, keeps or lets go of each server (runs
    /// in flight keep the servers they hold).
    pub fn swap_config(&self, config: Config) {
        self.mcp.apply(config.mcp.clone());
        self.budgets.configure(&config);
        let next = Generation::new(
            config,
            self.plugins.clone(),
            self.sandboxes.clone(),
            self.mcp.clone(),
            &self.answered,
        );
        *self.generation.write_unpoisoned() = Arc::new(next);
    }

    /// Agents that name a plugin that is not loaded, or an MCP tool that
    /// cannot be served now, with those names: such an agent's runs would
    /// fail at once, so it is reported up front.
    pub fn agents_missing_plugins(&self) -> Vec<(String, Vec<String>)> {
        use crate::agent::ToolProvider;
        let generation = self.generation();
        let snapshot = self.plugins.snapshot();
        generation
            .config
            .agents
            .values()
            .filter_map(|a| {
                let mut missing = Vec::new();
                if snapshot.strategy(&a.strategy).is_none() {
                    missing.push(a.strategy.clone());
                }
                let (hosted, components): (Vec<String>, Vec<String>) =
                    a.tools.iter().cloned().partition(|t| self.mcp.serves(t));
                missing.extend(
                    components
                        .into_iter()
                        .filter(|t| snapshot.tool(t).is_none()),
                );
                missing.extend(self.mcp.missing(&hosted));
                (!missing.is_empty()).then(|| (a.name.clone(), missing))
            })
            .collect()
    }

    /// Logs each agent whose missing plugins changed since the last call,
    /// so a plugin swap that does not concern an agent stays quiet.
    pub fn warn_missing_plugins(&self) {
        let now = self.agents_missing_plugins();
        let mut reported = self.missing_reported.lock_unpoisoned();
        for (agent, missing) in &now {
            if !reported.contains(&(agent.clone(), missing.clone())) {
                tracing::warn!(agent = %agent, missing = %missing.join(", "), "agent names plugins that are not loaded; its runs will fail until they are");
            }
        }
        for (agent, _) in reported.iter() {
            if !now.iter().any(|(a, _)| a == agent) {
                tracing::info!(agent = %agent, "every plugin the agent names is loaded now");
            }
        }
        *reported = now;
    }

    /// Every agent as a run started now would see it: the same layering
    /// of settings over the strategy version serving now, and the plugins
    /// it names that are not loaded (`GET /v1/agents`, MCP `list_agents`).
    pub fn agent_list(&self) -> AgentList {
        let generation = self.generation();
        let mut missing: std::collections::HashMap<_, _> =
            self.agents_missing_plugins().into_iter().collect();
        let plugins = self.plugins.snapshot();
        let agents = generation
            .config
            .agents
            .values()
            .map(|a| {
                let strategy = plugins.strategy(&a.strategy);
                let (settings, sources) = resolve(a, strategy.as_ref().map(|s| &s.defaults));
                AgentView {
                    name: a.name.clone(),
                    strategy: a.strategy.clone(),
                    tools: a.tools.clone(),
                    max_steps: Some(settings.max_steps),
                    max_steps_source: sources.max_steps,
                    system_prompt: settings.system_prompt,
                    system_prompt_source: sources.system_prompt,
                    next_step_prompt: settings.next_step_prompt,
                    next_step_prompt_source: sources.next_step_prompt,
                    missing_plugins: missing.remove(&a.name).unwrap_or_default(),
                }
            })
            .collect();
        AgentList { agents }
    }

    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }
}
