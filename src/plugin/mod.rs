//! The WebAssembly plugin host: one engine, one linker per world, plugins
//! compiled once (or taken from the compile cache) and instantiated per run;
//! the plugins folder can be rescanned or watched, and the set is swapped
//! whole so runs keep the versions they started with.
//!
//! The host is two parts with one handle on top, named for what they do (a
//! loader loads one component; a catalog lists what the folder offers and
//! which of it is current):
//! - [`Loader`] (`loader.rs`, with `probe.rs`): the engine, the linkers and
//!   the compile cache; a component's bytes in, a checked [`LoadedPlugin`]
//!   out. It keeps no state about which plugins serve.
//! - [`Catalog`] (`catalog.rs`): the folder's files, who serves each name,
//!   the current [`PluginSet`] and per-file statuses; rescans and swaps. It
//!   is given the loader for each scan and never looks inside it.
//! - [`PluginHost`] (`host.rs`): owns one of each and forwards to them, so
//!   the daemon and `run --local` hold a single `Arc<PluginHost>`.
//!
//! Every file here uses only files below it, so each can be read (and
//! changed) knowing only what is beneath. From the bottom:
//! 1. `error`, `settings` (`[plugins]`), `grants` (`[plugins.<name>]`),
//!    `bundle` (the plugins shipped beside the binary), `bindings`, `clock`, `log_rate`
//!    (how fast one store may log), `stdio`,
//!    `cache`, `run_host` (what the strategy world needs from a run),
//!    `human` (what both worlds' `human.ask` needs from a run),
//!    `plan` (what the strategy world's `plan` needs from a run),
//!    `import_needs` (the grant each import needs, from its name) and
//!    `tool_schema` (a tool's parameters checked as a JSON Schema), both
//!    for `agentd plugin check`;
//! 2. over the bindings: `convert` and `compat_v0_1` (type conversions),
//!    `meta` (what a plugin says about itself), `engine` (the pool and its
//!    per-component caps), `limits` (what one store may take, and naming a
//!    plugin a limit stopped), `store` (what every store starts with),
//!    `egress` (a tool's HTTP requests against its `allow_hosts`),
//!    `world` (which world a component exports);
//! 3. the two worlds: `tool_host` (a tool's imports) → `tool` (`ToolPlugin`,
//!    its `ToolPre` in any contract version, a run's `ToolBox`) →
//!    `strategy_host` (a strategy's imports, which invoke the run's tools) →
//!    `strategy` (`StrategyPlugin`, its `StrategyPre`);
//! 4. `registry` (`LoadedPlugin`, `PluginSet`) and `session` (one run's
//!    strategy instance);
//! 5. `probe` → `loader` → `catalog` → `host` → `watch`; this file only
//!    declares the modules and names the public API.

pub mod bindings;
pub mod bundle;
mod cache;
mod catalog;
pub mod clock;
mod compat_v0_1;
mod convert;
mod egress;
pub mod engine;
mod error;
pub mod grants;
mod host;
pub mod host_tool;
pub mod human;
pub mod import_needs;
pub mod limits;
mod loader;
pub mod log_rate;
mod meta;
pub mod metrics;
pub mod plan;
mod probe;
pub mod registry;
pub mod run_host;
pub mod session;
pub mod settings;
mod stdio;
mod store;
pub mod strategy;
pub mod strategy_host;
pub mod tool;
pub mod tool_host;
pub mod tool_schema;
mod trace;
pub mod trust;
pub mod watch;
pub mod world;

pub use bindings::Contract;
pub use catalog::{
    is_plugin_file_name, Catalog, ChangeKind, FileStatus, LoadReport, PluginChange, PluginStatus,
};
pub use engine::EngineLimits;
pub use error::PluginError;
pub use grants::{AllowList, Grants, PluginGrant, Secret};
pub use host::PluginHost;
pub use host_tool::{HostTool, RunTools};
pub use human::{AskFailure, AskHuman, NoHuman};
pub use loader::{Compiled, Loader, MAX_COMPONENT_BYTES};
pub use meta::{grants_for, is_valid_plugin_name, PluginKind, PluginMeta, StrategyDefaults};
pub use plan::{NoPlan, PlanRefused, RunPlan};
pub use registry::{LoadedPlugin, PluginSet};
pub use settings::PluginSettings;
pub use strategy::StrategyPlugin;
pub use tool::ToolPlugin;
pub use watch::{watch, PluginWatcher, QUIET as WATCH_QUIET};
