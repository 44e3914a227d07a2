//! The host side of the `tool` world: the state of one tool's store (one
//! per tool per run, created on the tool's first call by the run's
//! [`ToolBox`](super::tool::ToolBox)), with the run's sandbox behind the
//! `sandbox` import and the run's person behind `human`. Every contract version's imports are served here:
//! 0.1.0's by converting to the current ones.

use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::bindings::types as wit;
use super::bindings::v0_1::strategy::agentd::plugin::{logging as old_logging, types as old_types};
use super::bindings::v0_1::tool::agentd::plugin::sandbox as old_sandbox;
use super::bindings::v0_2::strategy::agentd::plugin::{config, human, logging};
use super::bindings::v0_2::tool::agentd::plugin::sandbox as wit_sandbox;
use super::clock::{Paused, StepClock};
use super::compat_v0_1::{old, Conv};
use super::convert::sandbox_error;
use super::egress::Egress;
use super::grants::PluginGrant;
use super::human::AskHuman;
use super::limits::{LimitHit, StoreLimiter};
use super::log_rate::LogRate;
use super::store::{capped_table, config_get, config_keys, plugin_log, sandboxed_wasi, Limited};
use crate::sandbox::{CommandSpec, Sandbox};

/// The data of one tool's store in one run: its WASI context and handles,
/// its limiter, its grant (environment, settings, HTTP egress), the run's
/// sandbox and whoever answers the run's questions.
pub struct ToolState {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    egress: Egress,
    grant: Arc<PluginGrant>,
    table: ResourceTable,
    limiter: StoreLimiter,
    plugin: Arc<str>,
    /// The store's log budget, shared with its stdout and stderr.
    log_rate: Arc<LogRate>,
    sandbox: Arc<dyn Sandbox>,
    /// The run's step clock; sandbox waits and questions to a person do not
    /// count against the step deadline (each has its own timeout).
    clock: Arc<StepClock>,
    /// Who answers `human.ask`: the run, or a [`super::human::NoHuman`].
    human: Arc<dyn AskHuman>,
}

impl ToolState {
    /// The state of `plugin`'s store in one run, acting on `sandbox`, its
    /// memories summed limited to `memory_limit` bytes, given what `grant`
    /// grants, its questions answered by `human`.
    pub fn new(
        plugin: Arc<str>,
        sandbox: Arc<dyn Sandbox>,
        clock: Arc<StepClock>,
        memory_limit: usize,
        grant: Arc<PluginGrant>,
        human: Arc<dyn AskHuman>,
    ) -> Self {
        let log_rate = LogRate::new(plugin.clone());
        ToolState {
            wasi: sandboxed_wasi(&log_rate, &grant),
            http: WasiHttpCtx::new(),
            egress: Egress::new(plugin.clone(), grant.clone()),
            grant,
            table: capped_table(),
            limiter: StoreLimiter::new(memory_limit),
            plugin,
            log_rate,
            sandbox,
            clock,
            human,
        }
    }

    fn pause(&self) -> Paused {
        self.clock.pause()
    }

    /// Why the tool stopped, if a limit stopped it (see
    /// [`super::limits::classify`]).
    pub(super) fn limit_hit(&self, error: &wasmtime::Error) -> Option<LimitHit> {
        super::limits::classify(error, &self.limiter, &self.plugin)
    }
}

impl Limited for ToolState {
    fn limiter(&mut self) -> &mut StoreLimiter {
        &mut self.limiter
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

impl WasiHttpView for ToolState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.egress,
        }
    }
}

impl wit::Host for ToolState {}

impl config::Host for ToolState {
    async fn get(&mut self, key: String) -> wasmtime::Result<Option<String>> {
        Ok(config_get(&self.grant, &key))
    }

    async fn keys(&mut self) -> wasmtime::Result<Vec<String>> {
        Ok(config_keys(&self.grant))
    }
}

impl logging::Host for ToolState {
    async fn log(&mut self, level: logging::Level, message: String) -> wasmtime::Result<()> {
        plugin_log(&self.log_rate, level, &message);
        Ok(())
    }
}

impl human::Host for ToolState {
    async fn ask(&mut self, question: String) -> wasmtime::Result<Result<String, wit::Error>> {
        // A person may take minutes: not plugin time (`input_timeout`
        // bounds the wait, not the step deadline or the tool's timeout).
        let _paused = self.pause();
        Ok(self
            .human
            .ask(&self.plugin, question)
            .await
            .map_err(|e| e.into_wit()))
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

// The 0.1.0 imports: each converts its arguments, calls the current import
// above, and converts the answer back (see `compat_v0_1.rs`).

impl old_types::Host for ToolState {}

impl old_logging::Host for ToolState {
    async fn log(&mut self, level: old::Level, message: String) -> wasmtime::Result<()> {
        <Self as logging::Host>::log(self, level.conv(), message).await
    }
}

impl old_sandbox::Host for ToolState {
    async fn run(
        &mut self,
        command: old::Command,
    ) -> wasmtime::Result<Result<old::CommandOutput, old::Error>> {
        Ok(<Self as wit_sandbox::Host>::run(self, command.conv())
            .await?
            .conv())
    }

    async fn shell(
        &mut self,
        command: String,
        timeout_secs: Option<u32>,
    ) -> wasmtime::Result<Result<old::CommandOutput, old::Error>> {
        Ok(
            <Self as wit_sandbox::Host>::shell(self, command, timeout_secs)
                .await?
                .conv(),
        )
    }

    async fn restart_shell(&mut self) -> wasmtime::Result<Result<(), old::Error>> {
        Ok(<Self as wit_sandbox::Host>::restart_shell(self)
            .await?
            .conv())
    }

    async fn read_file(&mut self, path: String) -> wasmtime::Result<Result<Vec<u8>, old::Error>> {
        // Moved, not converted byte by byte.
        Ok(<Self as wit_sandbox::Host>::read_file(self, path)
            .await?
            .map_err(Conv::conv))
    }

    async fn write_file(
        &mut self,
        path: String,
        contents: Vec<u8>,
    ) -> wasmtime::Result<Result<(), old::Error>> {
        Ok(
            <Self as wit_sandbox::Host>::write_file(self, path, contents)
                .await?
                .conv(),
        )
    }

    async fn list_dir(
        &mut self,
        path: String,
    ) -> wasmtime::Result<Result<Vec<old::DirEntry>, old::Error>> {
        Ok(<Self as wit_sandbox::Host>::list_dir(self, path)
            .await?
            .conv())
    }
}
