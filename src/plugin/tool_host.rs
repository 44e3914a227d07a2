//! The host side of the `tool` world: one store per tool per run, created on
//! the tool's first call, with the run's sandbox behind the `sandbox` import.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::ResourceTable;
use wasmtime::Store;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings::types::{self as wit, ErrorCode};
use super::bindings::v0_2::strategy::agentd::plugin::logging;
use super::bindings::v0_2::tool::agentd::plugin::sandbox as wit_sandbox;
use super::clock::{Paused, StepClock};
use super::convert::{error, sandbox_error};
use super::registry::ToolPlugin;
use super::world::ToolInstance;
use super::{new_store, plugin_log, sandboxed_wasi};
use crate::sandbox::{CommandSpec, Sandbox};

pub struct ToolState {
    wasi: WasiCtx,
    table: ResourceTable,
    plugin: Arc<str>,
    sandbox: Arc<dyn Sandbox>,
    /// The run's step clock; sandbox waits do not count against the step
    /// deadline (commands have their own timeout).
    clock: Arc<StepClock>,
}

impl ToolState {
    pub fn new(plugin: Arc<str>, sandbox: Arc<dyn Sandbox>, clock: Arc<StepClock>) -> Self {
        ToolState {
            wasi: sandboxed_wasi(&plugin),
            table: ResourceTable::new(),
            plugin,
            sandbox,
            clock,
        }
    }

    fn pause(&self) -> Paused {
        self.clock.pause()
    }
}

impl WasiView for ToolState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl wit::Host for ToolState {}

impl logging::Host for ToolState {
    async fn log(&mut self, level: logging::Level, message: String) -> wasmtime::Result<()> {
        plugin_log(&self.plugin, level, &message);
        Ok(())
    }
}

fn secs(t: Option<u32>) -> Option<Duration> {
    t.map(|s| Duration::from_secs(u64::from(s)))
}

fn output(o: crate::sandbox::CommandOutput) -> wit_sandbox::CommandOutput {
    wit_sandbox::CommandOutput {
        stdout: o.stdout,
        stderr: o.stderr,
        exit_code: o.exit_code,
        timed_out: o.timed_out,
        truncated: o.truncated,
    }
}

impl wit_sandbox::Host for ToolState {
    async fn run(
        &mut self,
        c: wit_sandbox::Command,
    ) -> wasmtime::Result<Result<wit_sandbox::CommandOutput, wit::Error>> {
        let _paused = self.pause();
        let spec = CommandSpec {
            command: c.command,
            workdir: c.workdir,
            timeout: secs(c.timeout_secs),
            stdin: c.stdin,
        };
        Ok(self
            .sandbox
            .run(spec)
            .await
            .map(output)
            .map_err(sandbox_error))
    }

    async fn shell(
        &mut self,
        command: String,
        timeout_secs: Option<u32>,
    ) -> wasmtime::Result<Result<wit_sandbox::CommandOutput, wit::Error>> {
        let _paused = self.pause();
        Ok(self
            .sandbox
            .shell(&command, secs(timeout_secs))
            .await
            .map(output)
            .map_err(sandbox_error))
    }

    async fn restart_shell(&mut self) -> wasmtime::Result<Result<(), wit::Error>> {
        let _paused = self.pause();
        Ok(self.sandbox.restart_shell().await.map_err(sandbox_error))
    }

    async fn read_file(&mut self, path: String) -> wasmtime::Result<Result<Vec<u8>, wit::Error>> {
        let _paused = self.pause();
        Ok(self.sandbox.read_file(&path).await.map_err(sandbox_error))
    }

    async fn write_file(
        &mut self,
        path: String,
        contents: Vec<u8>,
    ) -> wasmtime::Result<Result<(), wit::Error>> {
        let _paused = self.pause();
        Ok(self
            .sandbox
            .write_file(&path, &contents)
            .await
            .map_err(sandbox_error))
    }

    async fn list_dir(
        &mut self,
        path: String,
    ) -> wasmtime::Result<Result<Vec<wit_sandbox::DirEntry>, wit::Error>> {
        let _paused = self.pause();
        Ok(self
            .sandbox
            .list_dir(&path)
            .await
            .map(|entries| {
                entries
                    .into_iter()
                    .map(|e| wit_sandbox::DirEntry {
                        name: e.name,
                        is_dir: e.is_dir,
                        size: e.size,
                    })
                    .collect()
            })
            .map_err(sandbox_error))
    }
}

/// Why a tool call produced no result.
#[derive(Debug, thiserror::Error)]
pub enum ToolFailure {
    #[error("unknown tool `{0}`")]
    Unknown(String),
    /// The tool reported an error itself.
    #[error("{}", .0.message)]
    Reported(wit::Error),
    /// The tool trapped; its instance is discarded and the next call gets a
    /// fresh one.
    #[error("tool plugin `{plugin}` trapped: {message}")]
    Trapped { plugin: String, message: String },
}

struct LiveTool {
    store: Store<ToolState>,
    instance: ToolInstance,
}

/// The tools of one run. Each tool is instantiated on its first call and then
/// reused for the rest of the run, so a tool may keep state between calls.
pub struct ToolBox {
    plugins: HashMap<String, Arc<ToolPlugin>>,
    live: HashMap<String, LiveTool>,
    sandbox: Arc<dyn Sandbox>,
    clock: Arc<StepClock>,
}

impl ToolBox {
    pub fn new(
        plugins: Vec<Arc<ToolPlugin>>,
        sandbox: Arc<dyn Sandbox>,
        clock: Arc<StepClock>,
    ) -> Self {
        ToolBox {
            clock,
            plugins: plugins
                .into_iter()
                .map(|p| (p.meta.name.clone(), p))
                .collect(),
            live: HashMap::new(),
            sandbox,
        }
    }

    pub async fn invoke(&mut self, name: &str, arguments: &str) -> Result<String, ToolFailure> {
        let Some(plugin) = self.plugins.get(name).cloned() else {
            return Err(ToolFailure::Unknown(name.to_string()));
        };
        if !self.live.contains_key(name) {
            let mut store = new_store(
                plugin.pre.engine(),
                ToolState::new(
                    plugin.meta.name.as_str().into(),
                    self.sandbox.clone(),
                    self.clock.clone(),
                ),
            );
            let instance =
                plugin
                    .pre
                    .instantiate(&mut store)
                    .await
                    .map_err(|e| ToolFailure::Trapped {
                        plugin: name.to_string(),
                        message: format!("cannot instantiate: {e:#}"),
                    })?;
            self.live
                .insert(name.to_string(), LiveTool { store, instance });
        }
        let Some(live) = self.live.get_mut(name) else {
            return Err(ToolFailure::Unknown(name.to_string()));
        };
        let result = live.instance.invoke(&mut live.store, arguments).await;
        match result {
            Ok(Ok(text)) => Ok(text),
            Ok(Err(e)) => Err(ToolFailure::Reported(e)),
            Err(trap) => {
                self.live.remove(name);
                Err(ToolFailure::Trapped {
                    plugin: name.to_string(),
                    message: format!("{trap:#}"),
                })
            }
        }
    }
}

impl ToolFailure {
    pub fn into_wit(self) -> wit::Error {
        match self {
            ToolFailure::Unknown(n) => error(ErrorCode::UnknownTool, format!("unknown tool `{n}`")),
            ToolFailure::Reported(e) => e,
            t @ ToolFailure::Trapped { .. } => error(ErrorCode::Failed, t.to_string()),
        }
    }
}
