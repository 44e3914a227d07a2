//! `PUT /v1/plugins/{name}` and `DELETE /v1/plugins/{name}`: installing and
//! removing a plugin through the daemon, so a user allowed on the socket can
//! do it without write access to the plugins folder (`agentd plugin install`,
//! `agentd plugin remove`).
//!
//! Why it works this way:
//! - **Validated before it is written.** The bytes are compiled and probed
//!   by the daemon's own loader first (the same checks as a scan), and the
//!   component's `metadata().name` must be `{name}`: a file that would be
//!   `failed` in the folder is refused with the loader's message and never
//!   touches the folder.
//! - **Written atomically.** A hidden temp file in the folder itself (the
//!   catalog skips names starting with `.`), fsynced, made 0644 whatever the
//!   umask (the daemon's file checks refuse files others can write, and the
//!   owner is the daemon's user), then renamed over `{name}.wasm` and the
//!   folder fsynced: a crash leaves the old file or the new one, never half
//!   of one under a plugin's name.
//! - **Loaded before the answer.** The catalog rescans that one file and the
//!   answer is its status record, as `GET /v1/plugins` shows it. The
//!   watcher sees the rename too; the catalog skips bytes it already loaded
//!   (same SHA-256), so its rescan changes nothing and nothing is reported
//!   twice.
//! - One install or removal at a time ([`Daemon::installs`]): two uploads of
//!   one name cannot interleave their checks and renames.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Extension, Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::error::ApiError;
use super::peer::Caller;
use super::state::Daemon;
use crate::plugin::{is_valid_plugin_name, FileStatus, PluginStatus};

/// Grants follow a plugin's name, so whoever installs a component under a
/// name gets what that name was granted. Secrets, hosts and environment are
/// the operator's to hand out: a name holding any of them may be installed
/// only by root or the daemon's own user (who could read the secrets
/// anyway), never by another member of the socket group, who could
/// otherwise upload a component that returns the secret or sends it away.
fn check_may_take_grants(d: &Daemon, name: &str, uid: Option<u32>) -> Result<(), ApiError> {
    let grant = d.generation().runtime.grants.of(name);
    let sensitive: Vec<&str> = [
        ("secrets", !grant.secrets.is_empty()),
        ("allow_hosts", !grant.allow_hosts.is_empty()),
        ("env", !grant.env.is_empty()),
    ]
    .into_iter()
    .filter_map(|(key, set)| set.then_some(key))
    .collect();
    if sensitive.is_empty() {
        return Ok(());
    }
    let me = crate::plugin::trust::euid();
    match uid {
        Some(u) if u == 0 || u == me => Ok(()),
        _ => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!(
                "plugin `{name}` is granted {} in [plugins.{name}]: only root or the daemon's user (uid {me}) may install a component under that name, since it would get those grants",
                sensitive.join(", ")
            ),
        )),
    }
}

/// The mode of an installed plugin file: readable by all (the daemon may run
/// under another uid than root), writable by its owner only, which the
/// daemon's file check requires.
const PLUGIN_FILE_MODE: u32 = 0o644;

/// `PUT /v1/plugins/{name}`: the body is the component's bytes.
pub async fn install(
    State(d): State<Arc<Daemon>>,
    caller: Option<Extension<Caller>>,
    UrlPath(name): UrlPath<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body.map_err(|r| {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                "the component is larger than [daemon] max_plugin_bytes",
            )
        } else {
            ApiError::bad_request(format!("cannot read the request body: {r}"))
        }
    })?;
    check_name(&name)?;
    check_may_take_grants(&d, &name, caller.and_then(|Extension(c)| c.uid))?;
    if body.is_empty() {
        return Err(ApiError::bad_request(
            "the body must be the component's bytes (agentd plugin install FILE.wasm, or curl -T FILE.wasm)",
        ));
    }
    let _one_at_a_time = d.installs.lock().await;
    let dir = d.generation().config.daemon.plugins_dir.clone();
    let target = dir.join(format!("{name}.wasm"));

    let plugin = d
        .plugins
        .validate(&target, body.to_vec())
        .await
        .map_err(|e| match e {
            crate::plugin::PluginError::Engine(_) => ApiError::internal(e),
            e => ApiError::new(StatusCode::BAD_REQUEST, "invalid_plugin", e.to_string()),
        })?;
    let meta = plugin.meta();
    if meta.name != name {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "name_mismatch",
            format!(
                "the component's metadata().name is `{}`, not `{name}`: the plugins folder keeps a plugin under its own name (install it as `{}`: agentd plugin install --name {} FILE)",
                meta.name, meta.name, meta.name
            ),
        ));
    }
    let statuses = d.plugins.statuses();
    if let Some(other) = statuses.iter().find(|s| {
        s.name == name
            && s.kind == Some(meta.kind)
            && s.status == FileStatus::Loaded
            && s.file != target
    }) {
        return Err(ApiError::conflict(format!(
            "a plugin `{name}` is already served from {}; remove that file first (agentd plugin remove {name})",
            other.file.display()
        )));
    }
    let existed = std::fs::symlink_metadata(&target).is_ok();

    let (dir_w, target_w) = (dir.clone(), target.clone());
    tokio::task::spawn_blocking(move || write_atomically(&dir_w, &target_w, &body))
        .await
        .map_err(|e| ApiError::internal(format!("writing the plugin failed: {e}")))?
        .map_err(|e| write_error(&dir, &e))?;

    let changes = d
        .plugins
        .rescan_files(&dir, std::slice::from_ref(&target))
        .await;
    for change in &changes {
        super::plugin_events::report(&d.bus, change);
    }
    d.warn_missing_plugins();
    let status = status_of(&d, &target).ok_or_else(|| {
        ApiError::internal(format!(
            "{} was written but the catalog does not list it",
            target.display()
        ))
    })?;
    match status.status {
        FileStatus::Loaded => {
            let code = if existed {
                StatusCode::OK
            } else {
                StatusCode::CREATED
            };
            Ok((code, Json(status)).into_response())
        }
        // Another file took the name between the check and the rescan.
        FileStatus::Conflict => Err(ApiError::conflict(status.error.unwrap_or_default())),
        FileStatus::Failed => Err(ApiError::internal(format!(
            "{} was written but did not load: {}",
            target.display(),
            status.error.unwrap_or_default()
        ))),
    }
}

/// `DELETE /v1/plugins/{name}`: removes the file that offers `name` and
/// unloads it; the answer is that file's status record before removal.
/// Runs already under way keep the plugin (they hold their snapshot).
pub async fn remove(
    State(d): State<Arc<Daemon>>,
    UrlPath(name): UrlPath<String>,
) -> Result<Response, ApiError> {
    let _one_at_a_time = d.installs.lock().await;
    let dir = d.generation().config.daemon.plugins_dir.clone();
    let matching: Vec<PluginStatus> = d
        .plugin_statuses()
        .into_iter()
        .filter(|s| s.name == name)
        .collect();
    let status = match matching.as_slice() {
        [] => {
            return Err(ApiError::not_found(format!(
                "no plugin `{name}` in the plugins folder {}",
                dir.display()
            )))
        }
        [one] => one.clone(),
        several => {
            let files: Vec<String> = several
                .iter()
                .map(|s| s.file.display().to_string())
                .collect();
            return Err(ApiError::conflict(format!(
                "several files offer a plugin `{name}` ({}); remove the one you mean from the folder by hand",
                files.join(", ")
            )));
        }
    };
    let file = status.file.clone();
    let dir_r = dir.clone();
    let removed = tokio::task::spawn_blocking(move || -> std::io::Result<()> {
        match std::fs::remove_file(&file) {
            Ok(()) => {}
            // Gone already (removed by hand meanwhile): the rescan unloads it.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        sync_dir(&dir_r)
    })
    .await
    .map_err(|e| ApiError::internal(format!("removing the plugin failed: {e}")))?;
    removed.map_err(|e| {
        ApiError::internal(format!(
            "cannot remove {}: {e} (the daemon needs write access to [daemon] plugins_dir)",
            status.file.display()
        ))
    })?;
    let changes = d
        .plugins
        .rescan_files(&dir, std::slice::from_ref(&status.file))
        .await;
    for change in &changes {
        super::plugin_events::report(&d.bus, change);
    }
    d.warn_missing_plugins();
    Ok((StatusCode::OK, Json(status)).into_response())
}

fn check_name(name: &str) -> Result<(), ApiError> {
    if is_valid_plugin_name(name) {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "{name:?} is not a valid plugin name (1-64 ASCII letters, digits, `_` or `-`)"
        )))
    }
}

/// The status record of `file` as `GET /v1/plugins` shows it: with what the
/// running configuration grants the plugin (secrets by name only).
fn status_of(d: &Daemon, file: &Path) -> Option<PluginStatus> {
    d.plugin_statuses().into_iter().find(|s| s.file == file)
}

/// Temp file in `dir`, fsync, mode 0644, rename over `target`, fsync `dir`.
/// The temp file is removed when any step fails.
fn write_atomically(dir: &Path, target: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let stem = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp: PathBuf = dir.join(format!(
        ".{stem}.{}.{}.tmp",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ));
    let written = (|| {
        let mut file = std::fs::File::options()
            .write(true)
            .create_new(true)
            .mode(PLUGIN_FILE_MODE)
            .open(&temp)?;
        file.write_all(bytes)?;
        // The umask may have taken bits off `mode`; the file check wants
        // exactly "writable by the owner only", and readers need `r`.
        file.set_permissions(std::fs::Permissions::from_mode(PLUGIN_FILE_MODE))?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&temp, target)?;
        sync_dir(dir)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// A full disk is the client's to hear about plainly (507), with the
/// folder; anything else is the daemon's problem (500).
fn write_error(dir: &Path, e: &std::io::Error) -> ApiError {
    let full = matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT));
    if full {
        let message = format!(
            "the plugins folder {} is full ({e}); nothing was installed: free some space there ([daemon] plugins_dir)",
            dir.display()
        );
        tracing::error!(error = %message, "plugin install failed");
        ApiError::new(
            StatusCode::INSUFFICIENT_STORAGE,
            "insufficient_storage",
            message,
        )
    } else {
        ApiError::internal(format!(
            "cannot write into the plugins folder {}: {e}; nothing was installed",
            dir.display()
        ))
    }
}
