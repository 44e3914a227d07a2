//! `agentd run --file LOCAL[:REMOTE]` (the files a run starts with) and
//! `agentd files RUN [PATH] [-o DIR]` (the files a run kept, from
//! `GET /v1/runs/{id}/files`).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use http_body_util::BodyExt;

use super::client::{from_value, path_segment, Client, ClientError};
use super::table::Table;
use super::{exit, out, FilesArgs};
use crate::agent::files::check_relative;
use crate::agent::KeptFile;
use crate::api::{FileContent, RunView};

/// The `--file` arguments as `POST /v1/runs` `files`: `LOCAL[:REMOTE]`,
/// REMOTE (relative to the work dir) defaulting to LOCAL's file name;
/// text sent as text, anything else as base64.
pub fn input_files(specs: &[String]) -> Result<BTreeMap<String, FileContent>, String> {
    let mut files = BTreeMap::new();
    for spec in specs {
        let (local, remote) = parse_spec(spec)?;
        check_relative(&remote).map_err(|e| format!("--file {spec}: {e}"))?;
        let bytes = std::fs::read(&local)
            .map_err(|e| format!("--file {spec}: cannot read {}: {e}", local.display()))?;
        if files
            .insert(remote.clone(), FileContent::of(bytes))
            .is_some()
        {
            return Err(format!("--file: `{remote}` is given twice"));
        }
    }
    Ok(files)
}

/// `LOCAL[:REMOTE]`: the last `:` splits, unless what follows it is
/// empty (a local name may itself hold a `:`; then give REMOTE).
fn parse_spec(spec: &str) -> Result<(PathBuf, String), String> {
    let (local, remote) = match spec.rsplit_once(':') {
        Some((local, remote)) if !local.is_empty() && !remote.is_empty() => {
            (PathBuf::from(local), remote.to_string())
        }
        _ => {
            let local = PathBuf::from(spec);
            let name = local
                .file_name()
                .and_then(|n| n.to_str())
                .ok_or_else(|| {
                    format!("--file {spec}: give the name in the work dir, LOCAL:REMOTE")
                })?
                .to_string();
            (local, name)
        }
    };
    Ok((local, remote))
}

fn url(id: &str, path: &str) -> String {
    let path: Vec<String> = path.split('/').map(path_segment).collect();
    format!("/v1/runs/{}/files/{}", path_segment(id), path.join("/"))
}

pub async fn files(client: &Client, args: &FilesArgs) -> Result<i32, ClientError> {
    let run = super::runs::fetch_run(client, &args.run).await?;
    let view: RunView = from_value("the run", &run)?;
    let id = view.summary.id.clone();
    if let Some(path) = &args.path {
        return match &args.output {
            None => {
                let mut stdout = std::io::stdout().lock();
                download(client, &url(&id, path), &mut stdout).await?;
                Ok(0)
            }
            Some(dir) => save(client, &id, path, dir).await,
        };
    }
    let kept: Vec<KeptFile> = client
        .get(&format!("/v1/runs/{}/files", path_segment(&id)))
        .await?;
    if let Some(files) = &view.files {
        if files.capped {
            eprintln!(
                "agentd: {} matching file(s) were left out by keep_limit ({} bytes)",
                files.left_out_count, files.limit
            );
        }
        if let Some(e) = &files.error {
            eprintln!("agentd: keeping this run's files stopped early: {e}");
        }
    }
    match &args.output {
        Some(dir) => {
            for k in &kept {
                let code = save(client, &id, &k.path, dir).await?;
                if code != 0 {
                    return Ok(code);
                }
            }
            Ok(0)
        }
        None if args.common.json => {
            out::json(&kept)?;
            Ok(0)
        }
        None => {
            let mut table = Table::new(["SIZE", "PATH"]);
            for k in &kept {
                table.row(vec![k.size.to_string(), k.path.clone()]);
            }
            out::text(&table.render());
            Ok(0)
        }
    }
}

/// Downloads `path` into `dir/path`, making its folders.
async fn save(client: &Client, id: &str, path: &str, dir: &Path) -> Result<i32, ClientError> {
    let rel = match check_relative(path) {
        Ok(rel) => rel,
        Err(e) => {
            eprintln!("agentd: {e}");
            return Ok(exit::USAGE);
        }
    };
    let target = dir.join(rel);
    let local = |e: std::io::Error| {
        ClientError::Protocol(format!("cannot write {}: {e}", target.display()))
    };
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent).map_err(local)?;
    }
    // Into a temporary name first: a refused or broken download must not
    // leave an empty or partial file under the real name.
    let partial = target.with_file_name(format!(
        ".{}.partial",
        target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    ));
    let mut file = std::fs::File::create(&partial).map_err(local)?;
    if let Err(e) = download(client, &url(id, path), &mut file).await {
        drop(file);
        let _ = std::fs::remove_file(&partial);
        return Err(e);
    }
    std::fs::rename(&partial, &target).map_err(local)?;
    Ok(0)
}

/// Streams the body of `url` into `to`, chunk by chunk.
async fn download(client: &Client, url: &str, to: &mut impl Write) -> Result<(), ClientError> {
    let mut body = client.stream(url).await?;
    while let Some(frame) = body.frame().await {
        let frame = frame
            .map_err(|e| ClientError::Protocol(format!("the download of {url} broke: {e}")))?;
        if let Some(data) = frame.data_ref() {
            to.write_all(data)
                .map_err(|e| ClientError::Protocol(format!("cannot write the file: {e}")))?;
        }
    }
    to.flush()
        .map_err(|e| ClientError::Protocol(format!("cannot write the file: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_specs() {
        assert_eq!(
            parse_spec("/tmp/a.txt").unwrap(),
            (PathBuf::from("/tmp/a.txt"), "a.txt".to_string())
        );
        assert_eq!(
            parse_spec("/tmp/a.txt:src/b.txt").unwrap(),
            (PathBuf::from("/tmp/a.txt"), "src/b.txt".to_string())
        );
        assert_eq!(url("abc", "a b/c.txt"), "/v1/runs/abc/files/a%20b/c.txt");
    }
}
