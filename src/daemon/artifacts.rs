//! A run's kept files (`[agents.X] keep_files`) on the daemon's disk, and
//! the routes that serve them.
//!
//! Layout, under `<state_dir>/artifacts/`: `<run id>/` holds the files as
//! they were under the work dir, and `<run id>.json` the run's
//! [`KeptFiles`] (what was kept, what the cap left out). The manifest sits
//! beside the folder, not in it, so no kept file can shadow it; it is also
//! the list the routes serve from: a file is served only if the manifest
//! names it, and never through a symlink.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::{Path as UrlPath, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::error::ApiError;
use super::history::History;
use super::state::Daemon;
use crate::agent::files::check_relative;
use crate::agent::{InputFile, KeptFile, KeptFiles};

/// Whether `id` can be a path component: run ids are hex UUIDs, and an id
/// from a URL must never be `..` or hold a `/`.
fn plain_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The folder a run's kept files go to.
pub fn run_dir(root: &Path, id: &str) -> PathBuf {
    root.join(id)
}

fn manifest_path(root: &Path, id: &str) -> PathBuf {
    root.join(format!("{id}.json"))
}

/// Records what the run kept, once it has ended.
pub fn write_manifest(root: &Path, id: &str, kept: &KeptFiles) -> std::io::Result<()> {
    std::fs::create_dir_all(root)?;
    let json = serde_json::to_vec(kept).map_err(std::io::Error::other)?;
    let path = manifest_path(root, id);
    let tmp = root.join(format!(".{id}.json.tmp"));
    std::fs::write(&tmp, json)?;
    std::fs::rename(tmp, path)
}

/// What the run kept, if it kept anything (`None`: its agent keeps no
/// files, or the run has not ended).
pub fn read_manifest(root: &Path, id: &str) -> Option<KeptFiles> {
    if !plain_id(id) {
        return None;
    }
    let bytes = std::fs::read(manifest_path(root, id)).ok()?;
    match serde_json::from_slice(&bytes) {
        Ok(kept) => Some(kept),
        Err(e) => {
            tracing::warn!(run = id, error = %e, "unreadable kept-files manifest");
            None
        }
    }
}

/// Removes a run's kept files and their manifest.
pub fn remove(root: &Path, id: &str) {
    if !plain_id(id) {
        return;
    }
    let dir = run_dir(root, id);
    if let Err(e) = std::fs::remove_dir_all(&dir) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot remove a run's kept files");
        }
    }
    let _ = std::fs::remove_file(manifest_path(root, id));
}

/// Removes the kept files of every run the history no longer has (pruned
/// by `history_days`): run after each pruning.
pub async fn prune(root: &Path, history: &History) -> usize {
    let Ok(entries) = std::fs::read_dir(root) else {
        return 0;
    };
    let mut ids: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .filter_map(|name| {
            let id = name.strip_suffix(".json").unwrap_or(&name).to_string();
            plain_id(&id).then_some(id)
        })
        .collect();
    ids.sort();
    ids.dedup();
    let mut removed = 0;
    for id in ids {
        // An unreadable history keeps everything: never guess a run gone.
        if let Ok(None) = history.summary(&id).await {
            remove(root, &id);
            removed += 1;
        }
    }
    removed
}

/// Opens the kept file `path` of run `id`, refusing anything the manifest
/// does not list, names with `..`, and symlinks (none are ever written
/// there; one that appears is not followed).
fn open(root: &Path, id: &str, kept: &KeptFiles, path: &str) -> Option<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let rel = check_relative(path).ok()?;
    kept.kept.iter().find(|k| Path::new(&k.path) == rel)?;
    let full = run_dir(root, id).join(&rel);
    // Each folder on the way is a real folder, not a link.
    let mut at = run_dir(root, id);
    for part in rel.parent().into_iter().flat_map(Path::components) {
        at.push(part);
        if !std::fs::symlink_metadata(&at).ok()?.is_dir() {
            return None;
        }
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(full)
        .ok()?;
    file.metadata().ok()?.is_file().then_some(file)
}

/// The previous run's kept files as the input files of the run that
/// resumes it (at most its `keep_limit`, which bounded them when kept).
pub fn input_files(root: &Path, id: &str) -> Result<Vec<InputFile>, String> {
    let Some(kept) = read_manifest(root, id) else {
        return Ok(Vec::new());
    };
    let mut files = Vec::with_capacity(kept.kept.len());
    for k in &kept.kept {
        let mut contents = Vec::new();
        open(root, id, &kept, &k.path)
            .ok_or_else(|| format!("its kept file `{}` is missing", k.path))?
            .read_to_end(&mut contents)
            .map_err(|e| format!("cannot read its kept file `{}`: {e}", k.path))?;
        files.push(InputFile::new(&k.path, contents)?);
    }
    Ok(files)
}

/// The manifest of a run that exists (else 404).
async fn manifest_of(d: &Daemon, id: &str) -> Result<KeptFiles, ApiError> {
    let known = d.runs.get(id).is_some()
        || d.history
            .summary(id)
            .await
            .map_err(ApiError::internal)?
            .is_some();
    if !known || !plain_id(id) {
        return Err(ApiError::not_found(format!("no run `{id}`")));
    }
    Ok(read_manifest(d.runs.artifacts(), id).unwrap_or_default())
}

/// `GET /v1/runs/{id}/files`: `[{"path", "size"}]`, empty while the run
/// goes on and for an agent that keeps nothing.
pub async fn list(
    State(d): State<Arc<Daemon>>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<Vec<KeptFile>>, ApiError> {
    Ok(Json(manifest_of(&d, &id).await?.kept))
}

/// `GET /v1/runs/{id}/files/{*path}`: the kept file's bytes.
pub async fn download(
    State(d): State<Arc<Daemon>>,
    UrlPath((id, path)): UrlPath<(String, String)>,
) -> Result<Response, ApiError> {
    let kept = manifest_of(&d, &id).await?;
    let root = d.runs.artifacts().to_path_buf();
    let opened = {
        let (id, path) = (id.clone(), path.clone());
        tokio::task::spawn_blocking(move || open(&root, &id, &kept, &path))
            .await
            .map_err(ApiError::internal)?
    };
    let Some(file) = opened else {
        return Err(ApiError::not_found(format!(
            "run `{id}` kept no file `{path}`"
        )));
    };
    // Streamed in chunks: a kept file may be as large as `keep_limit`.
    let start = Some(tokio::fs::File::from_std(file));
    let chunks = futures::stream::unfold(start, |file| async {
        use tokio::io::AsyncReadExt;
        let mut file = file?;
        let mut buf = vec![0u8; 64 << 10];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(axum::body::Bytes::from(buf)), Some(file)))
            }
            Err(e) => Some((Err::<axum::body::Bytes, _>(e), None)),
        }
    });
    let body = axum::body::Body::from_stream(chunks);
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], body).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serves_only_listed_real_files() {
        let root = tempfile::tempdir().unwrap();
        let dir = run_dir(root.path(), "r1");
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/a.txt"), "a").unwrap();
        std::fs::write(dir.join("secret"), "s").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.join("link")).unwrap();
        let kept = KeptFiles {
            kept: vec![
                KeptFile {
                    path: "sub/a.txt".into(),
                    size: 1,
                },
                KeptFile {
                    path: "link".into(),
                    size: 1,
                },
            ],
            ..KeptFiles::default()
        };
        assert!(open(root.path(), "r1", &kept, "sub/a.txt").is_some());
        assert!(open(root.path(), "r1", &kept, "secret").is_none());
        assert!(open(root.path(), "r1", &kept, "link").is_none());
        assert!(open(root.path(), "r1", &kept, "../r1/sub/a.txt").is_none());
        assert!(!plain_id(".."));
        assert!(!plain_id("a/b"));
    }
}
