//! Every `[mcp.<server>]` of the running configuration: the shared servers
//! (started with the daemon, one process each), the `per_run` ones started
//! for each run that uses them, and the [`ToolProvider`] that gives a run
//! the tools its agent names. SIGHUP hands it the new tables
//! ([`McpClients::apply`]); runs in flight keep the servers they hold.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock, Weak};

use rmcp::model::Tool;

use super::names::{model_name, parse_entry, Selector};
use super::settings::{McpSettings, ServerSettings};
use super::supervisor::{Phase, Server, Snapshot};
use super::tool::McpTool;
use crate::agent::ToolProvider;
use crate::chat::ToolSpec;
use crate::plugin::HostTool;
use crate::sync::RwLockExt;

/// How long stopping waits for the servers: longer than rmcp's stop of a
/// stdio server (stdin closed, 3 s, SIGTERM, 3 s, then its process group
/// killed), so that sequence always completes before the daemon exits.
pub const STOP_WITHIN: std::time::Duration = std::time::Duration::from_secs(8);

/// One server as `GET /v1/mcp` shows it.
#[derive(Debug, Clone)]
pub struct ServerStatus {
    /// The table it comes from.
    pub settings: ServerSettings,
    /// The shared server now; `None` for a `per_run` one.
    pub shared: Option<Snapshot>,
    /// The live `per_run` servers: run id and snapshot.
    pub per_run: Vec<(String, Snapshot)>,
    /// Its tools as last listed (by the shared server, or the latest
    /// per-run one), with the name the model sees and whether the
    /// allow-list lets agents use it.
    pub tools: Vec<ToolStatus>,
}

/// One tool of a server, for `GET /v1/mcp`.
#[derive(Debug, Clone)]
pub struct ToolStatus {
    /// Its name on the server.
    pub name: String,
    /// The name the model is shown.
    pub model_name: String,
    /// The server's description of it.
    pub description: String,
    /// Whether `[mcp.<server>] tools` lets agents use it.
    pub allowed: bool,
}

#[derive(Default)]
struct Inner {
    settings: McpSettings,
    shared: BTreeMap<String, Arc<Server>>,
    per_run: Vec<(String, Weak<Server>)>,
    /// The tools a `per_run` server listed last, for status and `missing`.
    last_listed: BTreeMap<String, Arc<Vec<Tool>>>,
}

/// The MCP servers of the running configuration.
#[derive(Default)]
pub struct McpClients {
    inner: RwLock<Inner>,
}

impl McpClients {
    /// Starts the shared servers of `settings` (on the current tokio
    /// runtime); each comes up in the background.
    pub fn start(settings: McpSettings) -> Arc<Self> {
        let clients = Arc::new(McpClients::default());
        clients.apply(settings);
        clients
    }

    /// Takes the tables of a new configuration: a removed or changed table's
    /// shared server is let go (it stops once no run holds it), a new or
    /// changed one is started, an unchanged one is kept as it is.
    pub fn apply(&self, settings: McpSettings) {
        let mut inner = self.inner.write_unpoisoned();
        let old = std::mem::take(&mut inner.shared);
        for (name, server) in old {
            match settings.servers.get(&name) {
                Some(s) if *s == server.settings && !s.per_run => {
                    inner.shared.insert(name, server);
                }
                _ => {
                    tracing::info!(mcp_server = %name, "MCP server table removed or changed; its server stops when no run holds it")
                }
            }
        }
        for (name, s) in &settings.servers {
            if !s.per_run && !inner.shared.contains_key(name) {
                inner.shared.insert(name.clone(), Server::start(s.clone()));
            }
        }
        inner
            .last_listed
            .retain(|name, _| settings.servers.contains_key(name));
        inner.settings = settings;
    }

    /// Lets every server go and waits, at most `within`, for those no run
    /// holds any more to stop (the daemon stops, after its runs).
    pub async fn stop(&self, within: std::time::Duration) {
        let waits: Vec<_> = {
            let mut inner = self.inner.write_unpoisoned();
            let per_run = std::mem::take(&mut inner.per_run);
            let shared = std::mem::take(&mut inner.shared);
            shared
                .into_values()
                .chain(per_run.iter().filter_map(|(_, w)| w.upgrade()))
                .map(|server| server.stopped())
                .collect()
        };
        if tokio::time::timeout(within, futures::future::join_all(waits))
            .await
            .is_err()
        {
            tracing::warn!("MCP servers still stopping at exit");
        }
    }

    /// Every table's server and tools.
    pub fn statuses(&self) -> Vec<ServerStatus> {
        let mut inner = self.inner.write_unpoisoned();
        inner.per_run.retain(|(_, w)| w.strong_count() > 0);
        let inner = &*inner;
        inner
            .settings
            .servers
            .values()
            .map(|settings| {
                let shared = inner.shared.get(&settings.name).map(|s| s.snapshot());
                let per_run: Vec<(String, Snapshot)> = inner
                    .per_run
                    .iter()
                    .filter_map(|(run, w)| {
                        let server = w.upgrade()?;
                        (server.name() == settings.name).then(|| (run.clone(), server.snapshot()))
                    })
                    .collect();
                let listed = match &shared {
                    Some(s) => s.tools.clone(),
                    None => inner
                        .last_listed
                        .get(&settings.name)
                        .cloned()
                        .unwrap_or_default(),
                };
                let tools = listed
                    .iter()
                    .map(|t| ToolStatus {
                        name: t.name.to_string(),
                        model_name: model_name(&settings.name, &t.name),
                        description: t.description.as_deref().unwrap_or("").to_string(),
                        allowed: settings.allows(&t.name),
                    })
                    .collect();
                ServerStatus {
                    settings: settings.clone(),
                    shared,
                    per_run,
                    tools,
                }
            })
            .collect()
    }

    /// The server a run uses for `table`: the shared one, or a new one for
    /// this run when the table is `per_run`.
    fn server_for(&self, run_id: &str, table: &ServerSettings) -> Result<Arc<Server>, String> {
        let mut inner = self.inner.write_unpoisoned();
        if table.per_run {
            let server = Server::start(table.clone());
            inner.per_run.retain(|(_, w)| w.strong_count() > 0);
            inner
                .per_run
                .push((run_id.to_string(), Arc::downgrade(&server)));
            return Ok(server);
        }
        inner
            .shared
            .get(&table.name)
            .cloned()
            .ok_or_else(|| format!("MCP server `{}` is not running", table.name))
    }

    fn table(&self, entry: &str, server: &str) -> Result<ServerSettings, String> {
        let inner = self.inner.read_unpoisoned();
        let table = inner.settings.servers.get(server).ok_or_else(|| {
            format!("tool `{entry}`: there is no MCP server `{server}` ([mcp.{server}] in the configuration file)")
        })?;
        if !table.enabled {
            return Err(format!(
                "tool `{entry}`: MCP server `{server}` is disabled ([mcp.{server}] enabled = false)"
            ));
        }
        Ok(table.clone())
    }
}

/// The tools of `listed` that `selector` picks and the table allows.
fn pick<'a>(
    entry: &str,
    selector: &Selector<'_>,
    table: &ServerSettings,
    listed: &'a [Tool],
) -> Result<Vec<&'a Tool>, String> {
    match selector.tool {
        None => Ok(listed.iter().filter(|t| table.allows(&t.name)).collect()),
        Some(name) => {
            let Some(tool) = listed.iter().find(|t| t.name == name) else {
                return Err(format!(
                    "tool `{entry}`: MCP server `{}` has no tool `{name}` (it lists: {})",
                    table.name,
                    listed
                        .iter()
                        .map(|t| t.name.as_ref())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            };
            if !table.allows(name) {
                return Err(format!(
                    "tool `{entry}`: `{name}` is not in [mcp.{}] tools",
                    table.name
                ));
            }
            Ok(vec![tool])
        }
    }
}

fn spec_of(server: &str, tool: &Tool) -> ToolSpec {
    ToolSpec {
        name: model_name(server, &tool.name),
        description: tool.description.as_deref().unwrap_or("").to_string(),
        parameters: serde_json::Value::Object((*tool.input_schema).clone()).to_string(),
    }
}

#[async_trait::async_trait]
impl ToolProvider for McpClients {
    async fn open(
        &self,
        run_id: &str,
        entries: &[String],
    ) -> Result<Vec<Arc<dyn HostTool>>, String> {
        // One server per table for the run, even when several entries name it.
        let mut servers: BTreeMap<String, (Arc<Server>, Arc<Vec<Tool>>)> = BTreeMap::new();
        let mut out: Vec<Arc<dyn HostTool>> = Vec::new();
        // (server, tool) of each of `out`, to tell an entry named twice
        // from two tools that map to one name.
        let mut origins: Vec<(String, String)> = Vec::new();
        for entry in entries {
            let selector = parse_entry(entry)?;
            let table = self.table(entry, selector.server)?;
            if !servers.contains_key(&table.name) {
                let server = self.server_for(run_id, &table)?;
                let listed = server
                    .ready()
                    .await
                    .map_err(|why| format!("tool `{entry}`: {why}"))?;
                if table.per_run {
                    self.inner
                        .write_unpoisoned()
                        .last_listed
                        .insert(table.name.clone(), listed.clone());
                }
                servers.insert(table.name.clone(), (server, listed));
            }
            let (server, listed) = &servers[&table.name];
            for tool in pick(entry, &selector, &table, listed)? {
                let spec = spec_of(&table.name, tool);
                if let Some(i) = out.iter().position(|t| t.spec().name == spec.name) {
                    if origins[i] == (table.name.clone(), tool.name.to_string()) {
                        continue; // named twice by the agent: offered once
                    }
                    return Err(format!(
                        "tool `{entry}`: two MCP tools would both be shown to the model as `{}`",
                        spec.name
                    ));
                }
                origins.push((table.name.clone(), tool.name.to_string()));
                out.push(Arc::new(McpTool::new(
                    spec,
                    tool.name.to_string(),
                    server.clone(),
                )));
            }
        }
        Ok(out)
    }

    fn missing(&self, entries: &[String]) -> Vec<String> {
        let inner = self.inner.read_unpoisoned();
        entries
            .iter()
            .filter(|entry| {
                let Ok(selector) = parse_entry(entry) else {
                    return true;
                };
                let Some(table) = inner.settings.servers.get(selector.server) else {
                    return true;
                };
                if !table.enabled {
                    return true;
                }
                let listed = if table.per_run {
                    match inner.last_listed.get(&table.name) {
                        Some(l) => l.clone(),
                        // Not started yet: nothing says it is missing.
                        None => return false,
                    }
                } else {
                    match inner.shared.get(&table.name).map(|s| s.snapshot()) {
                        Some(s) if s.phase == Phase::Ready => s.tools,
                        // On its way: a run started now waits for it.
                        Some(s) if matches!(s.phase, Phase::Starting | Phase::Restarting) => {
                            return false
                        }
                        _ => return true,
                    }
                };
                pick(entry, &selector, table, &listed).is_err()
            })
            .cloned()
            .collect()
    }
}
