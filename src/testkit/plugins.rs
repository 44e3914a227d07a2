//! Building the plugin components of this repository for tests and benches.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds `plugins/` (a no-op when up to date) and returns the folder that
/// holds the `.wasm` components. `repo` is the repository root.
pub fn build_plugins(repo: &Path) -> std::io::Result<PathBuf> {
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--manifest-path",
        ])
        .arg(repo.join("plugins/Cargo.toml"))
        // The caller's target dir and flags are for the host, not the guests.
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .status()?;
    if !status.success() {
        return Err(std::io::Error::other(format!(
            "building {} failed ({status})",
            repo.join("plugins").display()
        )));
    }
    Ok(plugins_out_dir(repo))
}

/// Builds the Python plugins of `plugins/python/` (examples and test tools)
/// with `plugins/python/build.sh`, which installs the pinned componentize-py
/// on first use and skips every plugin whose inputs did not change (a few
/// milliseconds then; 10-20 s of CPU per plugin otherwise). They land in
/// the same folder as the Rust ones ([`build_plugins`]'s), so a test takes
/// components of both languages from one place.
pub fn build_python_plugins(repo: &Path) -> std::io::Result<PathBuf> {
    let script = repo.join("plugins/python/build.sh");
    let status = Command::new(&script)
        .status()
        .map_err(|e| std::io::Error::other(format!("cannot run {}: {e}", script.display())))?;
    if !status.success() {
        return Err(std::io::Error::other(format!(
            "{} failed ({status})",
            script.display()
        )));
    }
    Ok(plugins_out_dir(repo))
}

/// Where both builds put their components.
fn plugins_out_dir(repo: &Path) -> PathBuf {
    repo.join("plugins/target/wasm32-wasip2/release")
}
