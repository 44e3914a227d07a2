//! `PluginHost`, the handle the daemon, `run --local`, the tests and the
//! benches hold (as `Arc<PluginHost>`). It owns one [`Loader`] and one
//! [`Catalog`] and only forwards to them: the logic lives in those two, and
//! the catalog is handed the loader on each scan, so neither reaches into
//! the other and callers still need one handle.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use wasmtime::Engine;

use super::catalog::{Catalog, LoadReport, PluginChange, PluginStatus};
use super::engine::EngineLimits;
use super::error::PluginError;
use super::loader::Loader;
use super::registry::{LoadedPlugin, PluginSet};
use super::settings::PluginSettings;

/// The plugin host: a [`Loader`] to compile and check components, a
/// [`Catalog`] of the plugins folder and the set it serves.
pub struct PluginHost {
    loader: Loader,
    catalog: Catalog,
}

impl PluginHost {
    /// See [`Loader::new`]; the catalog starts empty.
    pub fn new(limits: EngineLimits) -> Result<Self, PluginError> {
        Self::with_settings(limits, PluginSettings::default())
    }

    /// See [`Loader::with_settings`]; the catalog starts empty.
    pub fn with_settings(
        limits: EngineLimits,
        settings: PluginSettings,
    ) -> Result<Self, PluginError> {
        Ok(PluginHost {
            loader: Loader::with_settings(limits, settings)?,
            catalog: Catalog::new(),
        })
    }

    /// See [`Loader::settings`].
    pub fn settings(&self) -> &PluginSettings {
        self.loader.settings()
    }

    /// See [`Loader::with_cache_dir`].
    pub fn with_cache_dir(self, dir: PathBuf) -> Result<Self, PluginError> {
        Ok(PluginHost {
            loader: self.loader.with_cache_dir(dir)?,
            catalog: self.catalog,
        })
    }

    /// See [`Catalog::with_follow_symlinks`].
    pub fn with_follow_symlinks(self, follow: bool) -> Self {
        PluginHost {
            loader: self.loader,
            catalog: self.catalog.with_follow_symlinks(follow),
        }
    }

    /// See [`Catalog::with_file_checks`].
    pub fn with_file_checks(self, check: bool) -> Self {
        PluginHost {
            loader: self.loader,
            catalog: self.catalog.with_file_checks(check),
        }
    }

    /// See [`Catalog::with_checks_as`].
    pub fn with_checks_as(self, uid: u32) -> Self {
        PluginHost {
            loader: self.loader,
            catalog: self.catalog.with_checks_as(uid),
        }
    }

    /// See [`Loader::cache_dir`].
    pub fn cache_dir(&self) -> Option<&Path> {
        self.loader.cache_dir()
    }

    /// See [`Loader::cache_hits`].
    pub fn cache_hits(&self) -> u64 {
        self.loader.cache_hits()
    }

    /// See [`Loader::cache_misses`].
    pub fn cache_misses(&self) -> u64 {
        self.loader.cache_misses()
    }

    /// See [`Loader::engine`].
    pub fn engine(&self) -> &Engine {
        self.loader.engine()
    }

    /// Compiles and probes `bytes` as a scan would, without writing them
    /// anywhere or changing what serves: the daemon's install route checks
    /// a component with it before the file exists. `path` is where the
    /// component will live, for its messages and its metadata.
    pub async fn validate(&self, path: &Path, bytes: Vec<u8>) -> Result<LoadedPlugin, PluginError> {
        let compiled = self.loader.compile(path, bytes).await?;
        self.loader.probe(path, &compiled).await
    }

    /// See [`Catalog::snapshot`].
    pub fn snapshot(&self) -> Arc<PluginSet> {
        self.catalog.snapshot()
    }

    /// See [`Catalog::statuses`].
    pub fn statuses(&self) -> Vec<PluginStatus> {
        self.catalog.statuses()
    }

    /// See [`Catalog::load_dir`].
    pub async fn load_dir(&self, dir: &Path) -> Result<LoadReport, PluginError> {
        self.catalog.load_dir(&self.loader, dir).await
    }

    /// See [`Catalog::rescan`].
    pub async fn rescan(&self, dir: &Path) -> Vec<PluginChange> {
        self.catalog.rescan(&self.loader, dir).await
    }

    /// See [`Catalog::try_rescan`].
    pub async fn try_rescan(&self, dir: &Path) -> Result<Vec<PluginChange>, PluginError> {
        self.catalog.try_rescan(&self.loader, dir).await
    }

    /// See [`Catalog::rescan_files`].
    pub async fn rescan_files(&self, dir: &Path, files: &[PathBuf]) -> Vec<PluginChange> {
        self.catalog.rescan_files(&self.loader, dir, files).await
    }
}
