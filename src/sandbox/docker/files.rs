//! Files in and out of the container as tar archives.
//!
//! Contents never pass through a shell, so any bytes and any file name
//! survive. Docker resolves paths inside the container's root: `..` and
//! symlinks cannot reach the host.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bollard::errors::Error as DockerError;
use bollard::query_parameters::{
    DownloadFromContainerOptionsBuilder, UploadToContainerOptionsBuilder,
};
use futures::StreamExt;

use super::engine::OpError;
use super::exec::{self, Target};
use super::scripts;
use super::user::Ids;
use crate::sandbox::{keep_globs, DirEntry, KeptFile, KeptFiles, LEFT_OUT_NAMES};

/// Bound on a whole download (bollard's own timeout stops at the headers).
const TRANSFER_TIMEOUT: Duration = Duration::from_secs(120);
/// Room for tar headers (PAX records, padding) beyond a file's bytes.
const TAR_OVERHEAD: usize = 64 * 1024;
/// Symlinks followed by `read`, as the kernel's own limit is about 40.
const MAX_LINK_HOPS: usize = 16;
/// Listing output kept; a directory with more is listed partially.
const LIST_OUTPUT_LIMIT: usize = 16 << 20;

/// `path` as an absolute path in the container: relative to `work_dir`.
pub(crate) fn resolve(work_dir: &str, path: &str) -> String {
    let path = path.trim();
    if path.starts_with('/') {
        path.to_string()
    } else if path.is_empty() || path == "." {
        work_dir.to_string()
    } else {
        format!("{}/{}", work_dir.trim_end_matches('/'), path)
    }
}

/// `path` with `.`, `..` and repeated slashes resolved as text (never
/// through the filesystem): `/a/./b/../c` → `/a/c`. Absolute input only.
fn normalise(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for p in path.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    format!("/{}", parts.join("/"))
}

/// The directory a plugin asked a command to run in (`None`: the work
/// dir), which must be the work dir or below it: a plugin may not point
/// the engine's exec at `/proc/self/fd/...` or anywhere else (the runc
/// working-directory escapes, CVE-2024-21626, went through the exec's
/// cwd). Checked as text; symlinks inside the container are the
/// runtime's to resolve, within the container's root.
pub(crate) fn within_work_dir(work_dir: &str, requested: Option<&str>) -> Result<String, String> {
    let root = normalise(work_dir);
    let Some(requested) = requested.map(str::trim).filter(|r| !r.is_empty()) else {
        return Ok(root);
    };
    let full = normalise(&resolve(&root, requested));
    let inside = full == root || full.starts_with(&format!("{}/", root.trim_end_matches('/')));
    if inside {
        Ok(full)
    } else {
        Err(format!(
            "workdir `{requested}` is outside the work dir `{root}`: commands run only in the \
             work dir or a folder below it"
        ))
    }
}

/// Splits an absolute path into its directory and file name.
fn split(full: &str) -> Option<(&str, &str)> {
    let (dir, name) = full.rsplit_once('/')?;
    if name.is_empty() || name == "." || name == ".." {
        return None;
    }
    Some((if dir.is_empty() { "/" } else { dir }, name))
}

/// The archive of one file, owned by `owner`: the engine extracts it with
/// the header's ids (it runs as root), so the sandbox user can change and
/// remove what the model's tools wrote.
fn tar_of(name: &str, contents: &[u8], owner: Ids) -> std::io::Result<Vec<u8>> {
    let mut header = tar::Header::new_gnu();
    header.set_size(contents.len() as u64);
    header.set_mode(0o644);
    header.set_uid(u64::from(owner.uid));
    header.set_gid(u64::from(owner.gid));
    header.set_entry_type(tar::EntryType::Regular);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    header.set_mtime(now);
    let mut builder = tar::Builder::new(Vec::with_capacity(contents.len() + 2048));
    builder.append_data(&mut header, name, contents)?;
    builder.into_inner()
}

/// Writes `contents` to `path` as a file of `owner`, creating missing
/// parent directories. A directory at `path` is refused, not replaced.
pub(crate) async fn write(
    t: Target<'_>,
    work_dir: &str,
    path: &str,
    contents: &[u8],
    owner: Ids,
) -> Result<(), OpError> {
    let full = resolve(work_dir, path);
    let (dir, name) = split(&full)
        .ok_or_else(|| OpError::Msg(format!("cannot write `{path}`: not a file path")))?;
    let archive = bytes::Bytes::from(
        tar_of(name, contents, owner)
            .map_err(|e| OpError::Msg(format!("cannot write `{path}`: {e}")))?,
    );
    let upload = |archive: bytes::Bytes| {
        let options = UploadToContainerOptionsBuilder::default()
            .path(dir)
            .no_overwrite_dir_non_dir("true")
            .build();
        t.docker
            .upload_to_container(t.container, Some(options), bollard::body_full(archive))
    };
    let first = upload(archive.clone()).await;
    let second = match first {
        Err(DockerError::DockerResponseServerError {
            status_code: 404,
            message,
        }) if !message.to_ascii_lowercase().contains("no such container") => {
            // The parent directory is missing: make it, then try again.
            let made = exec::helper(t, scripts::MKDIR_P, &[dir], None, 4096).await?;
            if made.exit_code != Some(0) {
                let (err, _) = made.stderr.into_text();
                return Err(OpError::Msg(format!(
                    "cannot write `{path}`: cannot create `{dir}`: {}",
                    err.trim()
                )));
            }
            upload(archive).await
        }
        other => other,
    };
    second.map_err(|e| write_error(path, dir, e))
}

fn write_error(path: &str, dir: &str, e: DockerError) -> OpError {
    if let DockerError::DockerResponseServerError { message, .. } = &e {
        if message.contains("not a directory") {
            return OpError::Msg(format!("cannot write `{path}`: `{dir}` is not a directory"));
        }
        if message.contains("cannot overwrite directory") {
            return OpError::Msg(format!("cannot write `{path}`: it is a directory"));
        }
        if message.contains("read-only") {
            return OpError::Msg(format!(
                "cannot write `{path}`: the sandbox's root filesystem is read-only; only the \
                 work dir and /tmp are writable"
            ));
        }
    }
    OpError::docker(format!("cannot write `{path}`"))(e)
}

/// Reads the file at `path` (following symlinks), refusing files larger
/// than `max` bytes.
pub(crate) async fn read(
    t: Target<'_>,
    work_dir: &str,
    path: &str,
    max: u64,
) -> Result<Vec<u8>, OpError> {
    let mut full = resolve(work_dir, path);
    for _ in 0..MAX_LINK_HOPS {
        let archive = tokio::time::timeout(TRANSFER_TIMEOUT, download(t, &full, path, max))
            .await
            .map_err(|_| {
                OpError::Msg(format!(
                    "cannot read `{path}`: no complete answer within {}s",
                    TRANSFER_TIMEOUT.as_secs()
                ))
            })??;
        match first_entry(archive, max)
            .map_err(|e| OpError::Msg(format!("cannot read `{path}`: bad archive: {e}")))?
        {
            Entry::File(bytes) => return Ok(bytes),
            Entry::TooLarge(size) => return Err(too_large(path, size, max)),
            Entry::Dir => {
                return Err(OpError::Msg(format!(
                    "cannot read `{path}`: it is a directory"
                )))
            }
            Entry::Other => {
                return Err(OpError::Msg(format!(
                    "cannot read `{path}`: not a regular file"
                )))
            }
            Entry::Link(target) => {
                full = if target.starts_with('/') {
                    target
                } else {
                    let dir = full.rsplit_once('/').map(|(d, _)| d).unwrap_or("");
                    format!("{dir}/{target}")
                };
            }
        }
    }
    Err(OpError::Msg(format!(
        "cannot read `{path}`: too many levels of symbolic links"
    )))
}

fn too_large(path: &str, size: u64, max: u64) -> OpError {
    OpError::Msg(format!(
        "cannot read `{path}`: it is {size} bytes, over the {max}-byte limit for reading files"
    ))
}

/// The archive of `full`, stopping as soon as it outgrows `max`.
async fn download(t: Target<'_>, full: &str, path: &str, max: u64) -> Result<Vec<u8>, OpError> {
    let options = DownloadFromContainerOptionsBuilder::default()
        .path(full)
        .build();
    let mut stream = t.docker.download_from_container(t.container, Some(options));
    let cap = (max as usize).saturating_add(TAR_OVERHEAD);
    let mut archive = Vec::new();
    let mut peeked = false;
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(bytes) => {
                archive.extend_from_slice(&bytes);
                if !peeked {
                    // The first header says what is coming: a directory's
                    // archive (the whole tree) or a file over the limit is
                    // refused before it is buffered.
                    match peek(&archive) {
                        Some(Peek::Dir) => {
                            return Err(OpError::Msg(format!(
                                "cannot read `{path}`: it is a directory"
                            )))
                        }
                        Some(Peek::Size(size)) if size > max => {
                            return Err(too_large(path, size, max))
                        }
                        Some(_) => peeked = true,
                        None => {}
                    }
                }
                if archive.len() > cap {
                    // The header tells the real size; fall back to a bound.
                    let size = tar::Archive::new(&archive[..])
                        .entries()
                        .ok()
                        .and_then(|mut e| e.next())
                        .and_then(|e| e.ok())
                        .map(|e| e.size())
                        .unwrap_or(archive.len() as u64);
                    return Err(too_large(path, size, max));
                }
            }
            Err(DockerError::DockerResponseServerError {
                status_code: 404,
                message,
            }) if !message.to_ascii_lowercase().contains("no such container") => {
                return Err(OpError::Msg(format!("cannot read `{path}`: no such file")));
            }
            Err(e) => return Err(OpError::docker(format!("cannot read `{path}`"))(e)),
        }
    }
    Ok(archive)
}

enum Peek {
    Dir,
    Size(u64),
    Other,
}

/// The first entry's kind, once its header (and any PAX header before it)
/// has arrived; `None` until then.
fn peek(archive: &[u8]) -> Option<Peek> {
    let mut ar = tar::Archive::new(archive);
    let entry = ar.entries().ok()?.next()?.ok()?;
    Some(match entry.header().entry_type() {
        tar::EntryType::Directory => Peek::Dir,
        tar::EntryType::Regular | tar::EntryType::Continuous => Peek::Size(entry.size()),
        _ => Peek::Other,
    })
}

enum Entry {
    File(Vec<u8>),
    TooLarge(u64),
    Dir,
    Link(String),
    Other,
}

/// The first entry of `archive`. A file's bytes are cut out of the
/// archive's own buffer, not copied: a read peaks at its size once, not
/// twice.
fn first_entry(mut archive: Vec<u8>, max: u64) -> std::io::Result<Entry> {
    let (start, size) = {
        let mut ar = tar::Archive::new(&archive[..]);
        let mut entries = ar.entries()?;
        let Some(entry) = entries.next() else {
            return Err(std::io::Error::other("empty archive"));
        };
        let entry = entry?;
        match entry.header().entry_type() {
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                (entry.raw_file_position(), entry.size())
            }
            tar::EntryType::Directory => return Ok(Entry::Dir),
            tar::EntryType::Symlink => {
                return Ok(match entry.link_name()? {
                    Some(target) => Entry::Link(target.to_string_lossy().into_owned()),
                    None => Entry::Other,
                })
            }
            _ => return Ok(Entry::Other),
        }
    };
    if size > max {
        return Ok(Entry::TooLarge(size));
    }
    let start = usize::try_from(start).map_err(std::io::Error::other)?;
    let end = usize::try_from(size)
        .ok()
        .and_then(|n| start.checked_add(n))
        .filter(|end| *end <= archive.len())
        .ok_or_else(|| std::io::Error::other("the archive ends inside the file"))?;
    archive.truncate(end);
    archive.drain(..start);
    Ok(Entry::File(archive))
}

/// Lists the entries of directory `path` at depth 1, sorted by name.
///
/// An exec of a small script rather than a tar download: the archive of a
/// directory holds the whole tree, contents included.
pub(crate) async fn list(
    t: Target<'_>,
    work_dir: &str,
    path: &str,
) -> Result<Vec<DirEntry>, OpError> {
    let full = resolve(work_dir, path);
    let o = exec::helper(t, scripts::LIST_DIR, &[&full], None, LIST_OUTPUT_LIMIT).await?;
    match o.exit_code {
        Some(0) => {}
        Some(20) => {
            return Err(OpError::Msg(format!(
                "cannot list `{path}`: not a directory"
            )))
        }
        Some(21) => {
            return Err(OpError::Msg(format!(
                "cannot list `{path}`: no such directory"
            )))
        }
        code => {
            let (err, _) = o.stderr.into_text();
            return Err(OpError::Msg(format!(
                "cannot list `{path}` (exit {}): {}",
                code.map_or("unknown".into(), |c| c.to_string()),
                err.trim()
            )));
        }
    }
    let (text, truncated) = o.stdout.into_text();
    if truncated {
        tracing::warn!(path = full, "directory listing truncated");
    }
    let mut entries = parse_listing(&text);
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(entries)
}

/// Parses `d|f <size> <name>` lines; a line that is not one continues the
/// previous name (a file name with a newline in it).
fn parse_listing(text: &str) -> Vec<DirEntry> {
    let mut entries: Vec<DirEntry> = Vec::new();
    for line in text.lines() {
        let parsed = line.split_once(' ').and_then(|(kind, rest)| {
            let (size, name) = rest.split_once(' ')?;
            let is_dir = match kind {
                "d" => true,
                "f" => false,
                _ => return None,
            };
            Some(DirEntry {
                name: name.to_string(),
                is_dir,
                size: size.parse().ok()?,
            })
        });
        match (parsed, entries.last_mut()) {
            (Some(e), _) => entries.push(e),
            (None, Some(prev)) => {
                prev.name.push('\n');
                prev.name.push_str(line);
            }
            (None, None) => {}
        }
    }
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_against_the_work_dir() {
        assert_eq!(resolve("/workspace", "a/b"), "/workspace/a/b");
        assert_eq!(resolve("/workspace/", "a"), "/workspace/a");
        assert_eq!(resolve("/workspace", "/etc/x"), "/etc/x");
        assert_eq!(resolve("/workspace", ""), "/workspace");
        assert_eq!(split("/a/b"), Some(("/a", "b")));
        assert_eq!(split("/b"), Some(("/", "b")));
        assert_eq!(split("/a/"), None);
        assert_eq!(split("/a/.."), None);
    }

    #[test]
    fn workdirs_stay_in_the_work_dir() {
        let w = |r: Option<&str>| within_work_dir("/workspace", r);
        assert_eq!(w(None), Ok("/workspace".into()));
        assert_eq!(w(Some("")), Ok("/workspace".into()));
        assert_eq!(w(Some("app/src")), Ok("/workspace/app/src".into()));
        assert_eq!(w(Some("/workspace/a/../b/")), Ok("/workspace/b".into()));
        assert_eq!(w(Some("/workspace")), Ok("/workspace".into()));
        for bad in [
            "/tmp",
            "..",
            "../etc",
            "/workspace/../etc",
            "/workspacex",
            "/proc/self/fd/7",
            "/",
        ] {
            let e = w(Some(bad)).expect_err(bad);
            assert!(e.contains("outside the work dir `/workspace`"), "{e}");
        }
    }

    #[test]
    fn parses_listings() {
        let e = parse_listing("d 0 src\nf 12 a b\nf 3 new\nline\n");
        assert_eq!(e.len(), 3);
        assert!(e[0].is_dir && e[0].name == "src");
        assert_eq!((e[1].name.as_str(), e[1].size), ("a b", 12));
        assert_eq!(e[2].name, "new\nline");
    }

    #[test]
    fn tar_roundtrip() {
        let bytes: Vec<u8> = (0..=255).collect();
        let ar = tar_of(
            "x.bin",
            &bytes,
            Ids {
                uid: 1000,
                gid: 1000,
            },
        )
        .expect("tar");
        assert!(matches!(peek(&ar), Some(Peek::Size(256))));
        assert!(peek(&ar[..100]).is_none(), "a partial header");
        match first_entry(ar.clone(), 1000).expect("entry") {
            Entry::File(b) => assert_eq!(b, bytes),
            _ => panic!("not a file"),
        }
        assert!(matches!(first_entry(ar, 10), Ok(Entry::TooLarge(256))));
    }
}

/// Bound on keeping a run's files: the whole work dir's archive streams
/// through once (what the cap leaves out is still read, to be listed), and
/// a wedged engine must not hold the run's ending for ever.
const KEEP_TIMEOUT: Duration = Duration::from_secs(300);
/// Chunks of the archive in flight between the engine's stream and the
/// thread that writes the files: a little read-ahead, never the whole tar.
const KEEP_CHANNEL_CHUNKS: usize = 8;

/// Copies the regular files under `work_dir` matching `patterns` into
/// `dest`, at most `limit` bytes in all. The work dir comes as one tar
/// stream from the engine, parsed on a blocking thread while it arrives:
/// files are written as they stream, never the whole archive in memory.
/// Symlinks, devices and hard links are listed as skipped, never followed;
/// an entry name that would leave `dest` is refused. Errors are recorded in
/// the answer, with what was kept before them.
pub(crate) async fn keep(
    t: Target<'_>,
    work_dir: &str,
    patterns: &[String],
    limit: u64,
    dest: &std::path::Path,
) -> KeptFiles {
    let mut failed = KeptFiles {
        limit,
        ..KeptFiles::default()
    };
    let globs = match keep_globs(patterns) {
        Ok(g) => g,
        Err(e) => {
            failed.error = Some(e);
            return failed;
        }
    };
    let options = DownloadFromContainerOptionsBuilder::default()
        .path(work_dir)
        .build();
    let mut stream = t.docker.download_from_container(t.container, Some(options));
    let (tx, rx) = tokio::sync::mpsc::channel(KEEP_CHANNEL_CHUNKS);
    let to = dest.to_path_buf();
    let writer = tokio::task::spawn_blocking(move || {
        unpack(
            ChunkReader {
                rx,
                current: bytes::Bytes::new(),
            },
            &globs,
            limit,
            &to,
        )
    });
    let pump = async move {
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| match e {
                DockerError::DockerResponseServerError {
                    status_code: 404, ..
                } => format!("the work dir {work_dir} is not there"),
                e => format!("the engine failed while sending the work dir: {e}"),
            });
            let stop = chunk.is_err();
            // A closed channel: the writer stopped (an error of its own).
            if tx.send(chunk).await.is_err() || stop {
                break;
            }
        }
    };
    let timed_out = tokio::time::timeout(KEEP_TIMEOUT, pump).await.is_err();
    let mut kept = match writer.await {
        Ok(kept) => kept,
        Err(e) => {
            failed.error = Some(format!("keeping the files failed: {e}"));
            return failed;
        }
    };
    if timed_out {
        kept.error = Some(format!(
            "the work dir's files did not arrive within {}s; the files listed were kept",
            KEEP_TIMEOUT.as_secs()
        ));
    }
    kept
}

/// The archive's chunks as a [`std::io::Read`], for the `tar` crate on a
/// blocking thread; an engine error arrives as a read error.
struct ChunkReader {
    rx: tokio::sync::mpsc::Receiver<Result<bytes::Bytes, String>>,
    current: bytes::Bytes,
}

impl std::io::Read for ChunkReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.current.is_empty() {
            match self.rx.blocking_recv() {
                Some(Ok(chunk)) => self.current = chunk,
                Some(Err(e)) => return Err(std::io::Error::other(e)),
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current.split_to(n));
        Ok(n)
    }
}

/// An archive entry's path below the work dir (the engine names entries
/// `<work dir's name>/...`), if every part of it is a plain name: `..`,
/// absolute names and the work dir itself give `None`.
fn below_work_dir(raw: &std::path::Path) -> Option<std::path::PathBuf> {
    use std::path::Component;
    let mut parts = raw.components();
    match parts.next() {
        Some(Component::Normal(_)) => {}
        _ => return None,
    }
    let rest: std::path::PathBuf = parts.clone().collect();
    if rest.as_os_str().is_empty() || !parts.all(|c| matches!(c, Component::Normal(_))) {
        return None;
    }
    Some(rest)
}

fn note(list: &mut Vec<String>, name: String) {
    if list.len() < LEFT_OUT_NAMES {
        list.push(name);
    }
}

/// Reads the work dir's archive from `reader` to its end, writing each
/// matching regular file under `dest` while the total stays within
/// `limit`; files past it are listed as left out (the rest of the archive
/// is still read, to list them all).
fn unpack(
    reader: impl std::io::Read,
    globs: &globset::GlobSet,
    limit: u64,
    dest: &std::path::Path,
) -> KeptFiles {
    let mut out = KeptFiles {
        limit,
        ..KeptFiles::default()
    };
    if let Err(e) = unpack_into(reader, globs, dest, &mut out) {
        out.error = Some(e);
    }
    out
}

fn unpack_into(
    reader: impl std::io::Read,
    globs: &globset::GlobSet,
    dest: &std::path::Path,
    out: &mut KeptFiles,
) -> Result<(), String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let bad = |e: std::io::Error| format!("reading the work dir's archive: {e}");
    let mut archive = tar::Archive::new(reader);
    for entry in archive.entries().map_err(bad)? {
        let mut entry = entry.map_err(bad)?;
        let raw = entry.path().map_err(bad)?.into_owned();
        let Some(rel) = below_work_dir(&raw) else {
            continue;
        };
        if !globs.is_match(&rel) {
            continue;
        }
        let name = rel.to_string_lossy().into_owned();
        match entry.header().entry_type() {
            tar::EntryType::Regular | tar::EntryType::Continuous => {}
            tar::EntryType::Directory => continue,
            _ => {
                note(&mut out.skipped, name);
                continue;
            }
        }
        let Some(path) = rel.to_str().map(str::to_string) else {
            // Not UTF-8: it could not be named in the API.
            note(&mut out.skipped, name);
            continue;
        };
        let size = entry.size();
        if out.bytes.saturating_add(size) > out.limit {
            out.capped = true;
            out.left_out_count += 1;
            note(&mut out.left_out, path);
            continue;
        }
        let target = dest.join(&rel);
        let write = |entry: &mut tar::Entry<'_, _>| -> std::io::Result<u64> {
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent)?;
            }
            // `create_new`: never through a link, never over a file kept
            // before.
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&target)?;
            std::io::copy(&mut entry.take(size), &mut file)
        };
        let written = write(&mut entry).map_err(|e| format!("cannot keep `{path}`: {e}"))?;
        out.bytes += written;
        out.kept.push(KeptFile {
            path,
            size: written,
        });
    }
    Ok(())
}

#[cfg(test)]
mod keep_tests {
    use super::*;

    fn archive(entries: &[(&str, tar::EntryType, &[u8])]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (name, kind, data) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(*kind);
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            if *kind == tar::EntryType::Symlink {
                h.set_size(0);
                b.append_link(&mut h, name, "/etc/passwd").unwrap();
            } else {
                b.append_data(&mut h, name, *data).unwrap();
            }
        }
        b.into_inner().unwrap()
    }

    #[test]
    fn globs_cap_and_links() {
        use tar::EntryType::{Regular, Symlink};
        let tar = archive(&[
            ("workspace/a.py", Regular, b"print(1)"),
            ("workspace/sub/b.py", Regular, b"print(22)"),
            ("workspace/c.txt", Regular, b"no"),
            ("workspace/link.py", Symlink, b""),
            ("workspace/big.py", Regular, &[7u8; 100]),
        ]);
        let dir = tempfile::tempdir().unwrap();
        let globs = keep_globs(&["**/*.py".into()]).unwrap();
        let kept = unpack(&tar[..], &globs, 50, dir.path());
        let names: Vec<_> = kept.kept.iter().map(|k| k.path.as_str()).collect();
        assert_eq!(names, ["a.py", "sub/b.py"]);
        assert_eq!(kept.bytes, 17);
        assert!(kept.capped);
        assert_eq!(kept.left_out, ["big.py"]);
        assert_eq!(kept.skipped, ["link.py"]);
        assert_eq!(
            std::fs::read(dir.path().join("sub/b.py")).unwrap(),
            b"print(22)"
        );
        assert!(!dir.path().join("c.txt").exists());
        assert!(kept.error.is_none());
    }

    #[test]
    fn star_stays_in_its_folder() {
        let globs = keep_globs(&["*.py".into()]).unwrap();
        assert!(globs.is_match("a.py"));
        assert!(!globs.is_match("sub/a.py"));
        assert!(keep_globs(&["a[".into()]).is_err());
    }

    #[test]
    fn names_that_leave_the_work_dir_are_refused() {
        assert_eq!(below_work_dir("workspace/../x".as_ref()), None);
        assert_eq!(below_work_dir("workspace".as_ref()), None);
        assert_eq!(below_work_dir("/etc/x".as_ref()), None);
        assert_eq!(below_work_dir("workspace/a/b".as_ref()), Some("a/b".into()));
    }
}
