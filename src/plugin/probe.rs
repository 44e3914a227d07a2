//! Checking a compiled component before it may serve: which world it
//! implements, that it links against the host's imports, and what its own
//! `metadata()` says. Everything a run would trip over is found here, at load
//! time, so a bad file never replaces a good plugin.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::{Component, Linker};
use wasmtime::Engine;

use super::bindings::types::PluginMetadata;
use super::bindings::Contract;
use super::clock::StepClock;
use super::convert::spec_from_wit;
use super::error::PluginError;
use super::human::NoHuman;
use super::meta::{is_valid_plugin_name, PluginKind, PluginMeta};
use super::registry::LoadedPlugin;
use super::store::new_store;
use super::strategy::{StrategyPlugin, StrategyPre};
use super::strategy_host::StrategyState;
use super::tool::{ToolPlugin, ToolPre};
use super::tool_host::ToolState;
use super::world::{self, WorldKind};
use crate::sandbox::NoSandbox;

/// A plugin that calls nothing but `metadata` must answer quickly.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Type-checks `component` against the world it exports, links it with
/// that world's linker, and probes its metadata in a throwaway store of
/// `engine`. Free-standing (the loader passes what it owns) so that probing
/// depends on the worlds, never on the loader.
pub(super) async fn check(
    engine: &Engine,
    strategy_linker: &Linker<StrategyState>,
    tool_linker: &Linker<ToolState>,
    path: &Path,
    component: Component,
    memory_limit: usize,
) -> Result<LoadedPlugin, PluginError> {
    let invalid = |message: String| PluginError::Invalid {
        path: path.to_path_buf(),
        message,
    };
    let exports: Vec<String> = component
        .component_type()
        .exports(engine)
        .map(|(name, _)| name.to_string())
        .collect();
    let mut imports: Vec<String> = component
        .component_type()
        .imports(engine)
        .map(|(name, _)| name.to_string())
        .collect();
    imports.sort();
    let file = path.to_path_buf();
    let Some((kind, contract)) = world::detect(&exports) else {
        if let Some(message) = world::unknown_version(&exports) {
            return Err(invalid(message));
        }
        return Err(invalid(format!(
            "exports neither the strategy nor the tool world of any contract version this host knows ({}); it exports: {}",
            world::known_exports(),
            if exports.is_empty() {
                "nothing".to_string()
            } else {
                exports.join(", ")
            }
        )));
    };
    match kind {
        WorldKind::Strategy => {
            let pre = StrategyPre::new(strategy_linker, &component, contract).map_err(|e| {
                invalid(format!(
                    "does not fit the `strategy` world of agentd:plugin@{contract}: {e:#}"
                ))
            })?;
            let mut store = new_store(
                engine,
                StrategyState::probe("(loading)".into(), memory_limit),
            );
            let probe = async {
                let inst = pre.instantiate(&mut store).await?;
                let meta = inst.metadata(&mut store).await?;
                let defaults = inst.defaults(&mut store).await?;
                Ok::<_, wasmtime::Error>((meta, defaults))
            };
            let (meta, defaults) = within_probe_timeout(probe).await.map_err(invalid)?;
            let meta = checked_meta(meta, PluginKind::Strategy, file, contract, imports)
                .map_err(invalid)?;
            Ok(LoadedPlugin::Strategy(Arc::new(StrategyPlugin {
                meta,
                defaults,
                pre,
                memory_limit,
            })))
        }
        WorldKind::Tool => {
            let pre = ToolPre::new(tool_linker, &component, contract).map_err(|e| {
                invalid(format!(
                    "does not fit the `tool` world of agentd:plugin@{contract}: {e:#}"
                ))
            })?;
            let sandbox = crate::sandbox::SandboxProvider::for_run(
                &NoSandbox::new("load-time probe"),
                "probe",
            );
            let mut store = new_store(
                engine,
                ToolState::new(
                    "(loading)".into(),
                    sandbox,
                    StepClock::new(),
                    memory_limit,
                    Arc::default(),
                    Arc::new(NoHuman::PROBE),
                ),
            );
            let probe = async {
                let inst = pre.instantiate(&mut store).await?;
                let meta = inst.metadata(&mut store).await?;
                let spec = inst.spec(&mut store).await?;
                Ok::<_, wasmtime::Error>((meta, spec))
            };
            let (meta, spec) = within_probe_timeout(probe).await.map_err(invalid)?;
            let meta =
                checked_meta(meta, PluginKind::Tool, file, contract, imports).map_err(invalid)?;
            let spec = spec_from_wit(spec);
            if spec.name != meta.name {
                return Err(invalid(format!(
                    "spec().name `{}` differs from metadata().name `{}`",
                    spec.name, meta.name
                )));
            }
            if serde_json::from_str::<serde_json::Value>(&spec.parameters).is_err() {
                return Err(invalid(format!(
                    "spec().parameters of `{}` is not valid JSON",
                    spec.name
                )));
            }
            Ok(LoadedPlugin::Tool(Arc::new(ToolPlugin {
                meta,
                spec,
                pre,
                memory_limit,
            })))
        }
    }
}

fn checked_meta(
    m: PluginMetadata,
    kind: PluginKind,
    file: PathBuf,
    contract: Contract,
    imports: Vec<String>,
) -> Result<PluginMeta, String> {
    if !is_valid_plugin_name(&m.name) {
        return Err(format!(
            "metadata().name {:?} is not a valid plugin name (1-64 ASCII letters, digits, `_` or `-`)",
            m.name
        ));
    }
    if m.version.trim().is_empty() {
        return Err(format!("plugin `{}` has an empty version", m.name));
    }
    Ok(PluginMeta {
        name: m.name,
        version: m.version,
        description: m.description,
        kind,
        file,
        contract,
        imports,
    })
}

/// A probe (instantiate, then ask for metadata) under [`PROBE_TIMEOUT`]: a
/// plugin that loops at load time must not hold up the folder.
async fn within_probe_timeout<T>(
    probe: impl std::future::Future<Output = Result<T, wasmtime::Error>>,
) -> Result<T, String> {
    tokio::time::timeout(PROBE_TIMEOUT, probe)
        .await
        .map_err(|_| {
            "the load-time probe (metadata(), then defaults() or spec()) did not answer in time"
                .to_string()
        })?
        .map_err(|e| {
            format!("the load-time probe (metadata(), then defaults() or spec()) failed: {e:#}")
        })
}
