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
    Ok(repo.join("plugins/target/wasm32-wasip2/release"))
}
