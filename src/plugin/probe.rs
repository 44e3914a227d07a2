//! Checking a compiled component before it may serve: which world it
//! implements, that it links against the host's imports, and what its own
//! `metadata()` says. Everything a run would trip over is found here, at load
//! time, so a bad file never replaces a good plugin.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::Component;

use super::bindings::strategy::StrategyPre;
use super::bindings::tool::ToolPre;
use super::bindings::{STRATEGY_EXPORT, TOOL_EXPORT};
use super::convert::spec_from_wit;
use super::host::PluginHost;
use super::registry::{LoadedPlugin, PluginKind, PluginMeta, StrategyPlugin, ToolPlugin};
use super::strategy_host::StrategyState;
use super::tool_host::ToolState;
use super::{new_store, PluginError};
use crate::sandbox::NoSandbox;

/// A plugin that calls nothing but `metadata` must answer quickly.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

impl PluginHost {
    /// Type-checks `component` against the world it exports and probes its
    /// metadata in a throwaway store.
    pub(super) async fn instantiate_checked(
        &self,
        path: &Path,
        component: Component,
    ) -> Result<LoadedPlugin, PluginError> {
        let invalid = |message: String| PluginError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        let exports: Vec<String> = component
            .component_type()
            .exports(&self.engine)
            .map(|(name, _)| name.to_string())
            .collect();
        let file = path.to_path_buf();
        if exports.iter().any(|e| e == STRATEGY_EXPORT) {
            let pre = self
                .strategy_linker
                .instantiate_pre(&component)
                .and_then(StrategyPre::new)
                .map_err(|e| invalid(format!("does not fit the `strategy` world: {e:#}")))?;
            let mut store = new_store(&self.engine, StrategyState::probe("(loading)".into()));
            let probe = async {
                let inst = pre.instantiate_async(&mut store).await?;
                let api = inst.agentd_plugin_strategy_api();
                let meta = api.call_metadata(&mut store).await?;
                let steps = api.call_default_max_steps(&mut store).await?;
                Ok::<_, wasmtime::Error>((meta, steps))
            };
            let (meta, default_max_steps) = within_probe_timeout(probe).await.map_err(invalid)?;
            let meta = checked_meta(meta, PluginKind::Strategy, file).map_err(invalid)?;
            return Ok(LoadedPlugin::Strategy(Arc::new(StrategyPlugin {
                meta,
                default_max_steps,
                pre,
            })));
        }
        if exports.iter().any(|e| e == TOOL_EXPORT) {
            let pre = self
                .tool_linker
                .instantiate_pre(&component)
                .and_then(ToolPre::new)
                .map_err(|e| invalid(format!("does not fit the `tool` world: {e:#}")))?;
            let sandbox = crate::sandbox::SandboxProvider::for_run(
                &NoSandbox::new("load-time probe"),
                "probe",
            );
            let mut store = new_store(
                &self.engine,
                ToolState::new("(loading)".into(), sandbox, None),
            );
            let probe = async {
                let inst = pre.instantiate_async(&mut store).await?;
                let api = inst.agentd_plugin_tool_api();
                let meta = api.call_metadata(&mut store).await?;
                let spec = api.call_spec(&mut store).await?;
                Ok::<_, wasmtime::Error>((meta, spec))
            };
            let (meta, spec) = within_probe_timeout(probe).await.map_err(invalid)?;
            let meta = checked_meta(meta, PluginKind::Tool, file).map_err(invalid)?;
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
            return Ok(LoadedPlugin::Tool(Arc::new(ToolPlugin { meta, spec, pre })));
        }
        Err(invalid(format!(
            "exports neither `{STRATEGY_EXPORT}` nor `{TOOL_EXPORT}` (it exports: {})",
            if exports.is_empty() {
                "nothing".to_string()
            } else {
                exports.join(", ")
            }
        )))
    }
}

fn checked_meta(
    m: super::bindings::types::PluginMetadata,
    kind: PluginKind,
    file: PathBuf,
) -> Result<PluginMeta, String> {
    let valid_name = !m.name.is_empty()
        && m.name.len() <= 64
        && m.name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !valid_name {
        return Err(format!(
            "metadata().name {:?} is not a valid plugin name (1-64 of a-z, 0-9, `_`, `-`)",
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
    })
}

/// A probe (instantiate, then ask for metadata) under [`PROBE_TIMEOUT`]: a
/// plugin that loops at load time must not hold up the folder.
async fn within_probe_timeout<T>(
    probe: impl std::future::Future<Output = Result<T, wasmtime::Error>>,
) -> Result<T, String> {
    tokio::time::timeout(PROBE_TIMEOUT, probe)
        .await
        .map_err(|_| "metadata() did not answer in time".to_string())?
        .map_err(|e| format!("metadata() failed: {e:#}"))
}
