//! The compile cache: machine code of plugin components, kept on disk so a
//! restart (or a reload of an unchanged file) skips cranelift.
//!
//! Why it is built the way it is:
//! - **Deserializing is `unsafe`.** wasmtime runs whatever machine code an
//!   artefact holds, so only artefacts this process family wrote are ever
//!   loaded: the folder must be a real directory owned by this user (or
//!   root) that no one else can write (else start-up is refused, with the
//!   fix: the folder is never re-permissioned, because a folder that was
//!   writable may already hold a planted entry). Entries are opened with
//!   `O_NOFOLLOW` and must be regular files of this user with no group or
//!   other bits; they are written to a temp file and renamed (a reader never
//!   sees half an entry), and each carries the SHA-256 of its artefact,
//!   checked before wasmtime sees a byte. Anything that does not check out is
//!   logged, deleted and rebuilt: the cache is never trusted blindly.
//! - **Deserialized from memory, not `deserialize_file`.** The file is read
//!   once, verified, and those same bytes are deserialized: nothing can change
//!   between the check and the use. `deserialize_file` would map the file and
//!   page it in lazily, so an in-place overwrite of the entry (the very
//!   corruption we guard against) would alter code already running. The
//!   extra copy costs well under a millisecond for a plugin.
//! - **Keyed by content and engine.** The key hashes the component's SHA-256
//!   with the engine's `precompile_compatibility_hash` (wasmtime version,
//!   target, compiler settings): a changed file or an upgraded agentd simply
//!   misses, never loads stale or incompatible code.
//! - **Our own format, not wasmtime's `cache` feature**, which pulls in zstd
//!   and its C build for something a few dozen lines do.
//!
//! Entries are not pruned: one per plugin version seen, about the size of the
//! component's machine code. Deleting the folder is always safe.

use std::fs::{self, File, OpenOptions};
use std::hash::{Hash, Hasher};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};
use tracing::{debug, warn};
use wasmtime::component::Component;
use wasmtime::Engine;

use super::trust::{self, TrustError};

/// Why the compile cache cannot be used.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CacheError {
    #[error("cannot create the compile cache folder {}: {message}", dir.display())]
    Create { dir: PathBuf, message: String },
    #[error(transparent)]
    Untrusted(#[from] TrustError),
}

/// Identifies an entry written by this code, and its layout version.
/// Version 2 added the key: entries of version 1 are recompiled.
const MAGIC: &[u8; 8] = b"AGDCWA02";
/// `MAGIC`, the entry's key (the name it was written under), the artefact's
/// SHA-256, its length (u64 little endian). The key makes an entry good for
/// one component only: a sound entry renamed to another component's name
/// (by someone who could once write the folder) is refused, not served as
/// that component's machine code (security review M6).
const HEADER_LEN: usize = MAGIC.len() + 32 + 32 + 8;
/// Separates keys of this layout from any future one.
const KEY_DOMAIN: &[u8] = b"agentd compile cache v1\0";
/// An entry larger than this is not ours: refuse to read it into memory.
const MAX_ENTRY_BYTES: u64 = 1 << 30;
/// Temp files older than this were left by a process that died mid-write.
const STALE_TEMP: Duration = Duration::from_secs(3600);

/// Where a component's machine code came from, for the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Compiled,
    Cache,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Compiled => "compiled",
            Origin::Cache => "from cache",
        }
    }
}

pub struct CompileCache {
    dir: PathBuf,
    engine_hash: [u8; 32],
    hits: AtomicU64,
    misses: AtomicU64,
}

impl CompileCache {
    /// Opens (creating it `0700` if needed) the cache folder. Refuses a folder
    /// that is a link, owned by someone else, or writable by anyone else:
    /// whoever could write there could plant machine code.
    pub fn open(dir: PathBuf, engine: &Engine) -> Result<Self, CacheError> {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| CacheError::Create {
                dir: dir.clone(),
                message: e.to_string(),
            })?;
        trust::check_dir("compile cache folder", &dir)?;
        remove_stale_temps(&dir);
        Ok(CompileCache {
            dir,
            engine_hash: engine_hash(engine),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    pub fn misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }

    /// The entry for a component with this SHA-256 under this engine.
    pub fn entry_path(&self, component_sha: &[u8; 32]) -> PathBuf {
        self.dir
            .join(format!("{}.cwasm", hex(&self.entry_key(component_sha))))
    }

    /// The key of that entry: its name, and the first field of its header.
    fn entry_key(&self, component_sha: &[u8; 32]) -> [u8; 32] {
        let mut key = Sha256::new();
        key.update(KEY_DOMAIN);
        key.update(component_sha);
        key.update(self.engine_hash);
        key.finalize().into()
    }

    /// The component for `bytes` (whose SHA-256 is `sha`): from the cache if
    /// a sound entry exists, else compiled and stored. Blocking: call it from
    /// `spawn_blocking`. Cache trouble is logged and never fails the load;
    /// only a component that does not compile does.
    pub fn component(
        &self,
        engine: &Engine,
        bytes: &[u8],
        sha: &[u8; 32],
        file: &Path,
    ) -> wasmtime::Result<(Component, Origin)> {
        let entry = self.entry_path(sha);
        let key = self.entry_key(sha);
        match read_verified(&entry, &key) {
            Ok(None) => {}
            Ok(Some(buf)) => {
                // SAFETY: the artefact was written by `store` below into a
                // folder only this user can write, and its SHA-256 matched the
                // one stored with it, so these are exactly the bytes
                // `Component::serialize` produced. wasmtime checks itself that
                // they suit this engine.
                match unsafe { Component::deserialize(engine, &buf[HEADER_LEN..]) } {
                    Ok(component) => {
                        self.hits.fetch_add(1, Ordering::Relaxed);
                        super::metrics::cache_lookup(true);
                        return Ok((component, Origin::Cache));
                    }
                    Err(e) => discard(&entry, file, &format!("cannot be deserialized: {e:#}")),
                }
            }
            Err(reason) => discard(&entry, file, &reason),
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        super::metrics::cache_lookup(false);
        let component = Component::new(engine, bytes)?;
        match component.serialize() {
            Ok(artefact) => {
                if let Err(e) = self.store(&entry, &key, &artefact) {
                    warn!(entry = %entry.display(), error = %e, "cannot write the compile cache entry; the plugin is loaded anyway");
                }
            }
            Err(e) => {
                warn!(file = %file.display(), error = %format!("{e:#}"), "cannot serialize the compiled plugin for the cache")
            }
        }
        Ok((component, Origin::Compiled))
    }

    /// Temp file, fsync, rename: the entry appears whole or not at all, even
    /// if the process dies mid-write or another host writes the same key.
    fn store(&self, entry: &Path, key: &[u8; 32], artefact: &[u8]) -> std::io::Result<()> {
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let name = entry
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let temp = self
            .dir
            .join(format!(".{name}.{}.{nanos}.tmp", std::process::id()));
        let written = (|| {
            let mut f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&temp)?;
            let len = u64::try_from(artefact.len()).map_err(std::io::Error::other)?;
            f.write_all(MAGIC)?;
            f.write_all(key)?;
            f.write_all(&Sha256::digest(artefact))?;
            f.write_all(&len.to_le_bytes())?;
            f.write_all(artefact)?;
            f.sync_all()?;
            fs::rename(&temp, entry)
        })();
        if written.is_err() {
            let _ = fs::remove_file(&temp);
        }
        written
    }
}

/// `Ok(None)` when there is no entry; `Err(reason)` when there is one that is
/// not exactly what `store` wrote under `key`. On success the buffer holds
/// the header followed by the verified artefact.
fn read_verified(entry: &Path, key: &[u8; 32]) -> Result<Option<Vec<u8>>, String> {
    // Not followed: a link would let whoever made it choose the bytes.
    let f = match File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(entry)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err("is a symbolic link".into()),
        Err(e) => return Err(format!("cannot be read: {e}")),
    };
    // Of the file opened, not of the name: nothing can swap it in between.
    let meta = f
        .metadata()
        .map_err(|e| format!("cannot be inspected: {e}"))?;
    if !meta.is_file() {
        return Err("is not a regular file".into());
    }
    if meta.uid() != trust::euid() {
        return Err(format!(
            "belongs to uid {}, not to this process (uid {})",
            meta.uid(),
            trust::euid()
        ));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(format!(
            "has mode {:04o}; entries this process writes are 0600",
            meta.mode() & 0o7777
        ));
    }
    let mut buf = Vec::new();
    f.take(MAX_ENTRY_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(|e| format!("cannot be read: {e}"))?;
    if buf.len() < HEADER_LEN {
        return Err(format!("is truncated ({} bytes)", buf.len()));
    }
    if &buf[..MAGIC.len()] != MAGIC {
        return Err("has no agentd cache header of this version".into());
    }
    let at_key = MAGIC.len();
    let at_sha = at_key + 32;
    let at_len = at_sha + 32;
    if &buf[at_key..at_sha] != key {
        return Err("was written for another component (its header's key is not its name)".into());
    }
    let stored_sha = &buf[at_sha..at_len];
    let mut len = [0u8; 8];
    len.copy_from_slice(&buf[at_len..HEADER_LEN]);
    let len = u64::from_le_bytes(len);
    let actual = (buf.len() - HEADER_LEN) as u64;
    if len != actual {
        return Err(format!(
            "holds {actual} bytes of artefact, its header says {len}"
        ));
    }
    if Sha256::digest(&buf[HEADER_LEN..]).as_slice() != stored_sha {
        return Err("does not match its checksum".into());
    }
    Ok(Some(buf))
}

fn discard(entry: &Path, file: &Path, reason: &str) {
    warn!(entry = %entry.display(), file = %file.display(), "compile cache entry {reason}; deleting it and compiling again");
    if let Err(e) = fs::remove_file(entry) {
        if e.kind() != std::io::ErrorKind::NotFound {
            warn!(entry = %entry.display(), error = %e, "cannot delete the bad cache entry");
        }
    }
}

fn remove_stale_temps(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with('.') && name.ends_with(".tmp")) {
            continue;
        }
        let stale = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > STALE_TEMP);
        if stale {
            debug!(file = %entry.path().display(), "removing a stale compile cache temp file");
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// `precompile_compatibility_hash` is only `impl Hash`: feed it to SHA-256
/// rather than `DefaultHasher`, whose output may change between Rust
/// releases and is too short to key machine code on.
fn engine_hash(engine: &Engine) -> [u8; 32] {
    struct ShaHasher(Sha256);
    impl Hasher for ShaHasher {
        fn write(&mut self, bytes: &[u8]) {
            self.0.update(bytes);
        }
        fn finish(&self) -> u64 {
            0
        }
    }
    let mut h = ShaHasher(Sha256::new());
    engine.precompile_compatibility_hash().hash(&mut h);
    h.0.finalize().into()
}

pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

pub fn hex(bytes: &[u8; 32]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(component)`: the smallest component, enough to exercise the cache.
    const EMPTY_COMPONENT: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];

    fn engine() -> Engine {
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true);
        Engine::new(&config).expect("engine")
    }

    #[test]
    fn an_entry_is_used_only_while_it_verifies() {
        let engine = engine();
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = CompileCache::open(dir.path().join("cache"), &engine).expect("open");
        let sha = sha256(&EMPTY_COMPONENT);
        let mut umask_safe = fs::OpenOptions::new();
        umask_safe
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600);
        let file = Path::new("empty.wasm");
        let load = || {
            cache
                .component(&engine, &EMPTY_COMPONENT, &sha, file)
                .expect("component")
                .1
        };
        assert_eq!(load(), Origin::Compiled);
        assert_eq!(load(), Origin::Cache);
        let entry = cache.entry_path(&sha);
        let good = fs::read(&entry).expect("entry");
        assert!(read_verified(&entry, &cache.entry_key(&sha))
            .expect("verifies")
            .is_some());

        let mut flipped = good.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        for bad in [flipped, good[..HEADER_LEN - 1].to_vec(), b"junk".to_vec()] {
            umask_safe
                .open(&entry)
                .and_then(|mut f| f.write_all(&bad))
                .expect("corrupt");
            assert!(read_verified(&entry, &cache.entry_key(&sha)).is_err());
            assert_eq!(load(), Origin::Compiled, "rebuilt");
            assert_eq!(fs::read(&entry).expect("entry"), good, "rewritten");
        }
        assert_eq!((cache.hits(), cache.misses()), (1, 4));
    }

    #[test]
    fn an_entry_that_is_a_link_or_open_to_others_is_not_used() {
        use std::os::unix::fs::PermissionsExt;
        let engine = engine();
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = CompileCache::open(dir.path().join("cache"), &engine).expect("open");
        let sha = sha256(&EMPTY_COMPONENT);
        let file = Path::new("empty.wasm");
        let load = || {
            cache
                .component(&engine, &EMPTY_COMPONENT, &sha, file)
                .expect("component")
                .1
        };
        assert_eq!(load(), Origin::Compiled);
        let entry = cache.entry_path(&sha);
        let good = fs::read(&entry).expect("entry");

        // A sound entry elsewhere, linked in: refused, the link deleted.
        let elsewhere = dir.path().join("planted.cwasm");
        fs::write(&elsewhere, &good).expect("write");
        fs::set_permissions(&elsewhere, fs::Permissions::from_mode(0o600)).expect("chmod");
        fs::remove_file(&entry).expect("rm");
        std::os::unix::fs::symlink(&elsewhere, &entry).expect("symlink");
        assert!(read_verified(&entry, &cache.entry_key(&sha))
            .expect_err("link")
            .contains("symbolic link"));
        assert_eq!(load(), Origin::Compiled);
        assert!(!fs::symlink_metadata(&entry)
            .expect("stat")
            .file_type()
            .is_symlink());
        assert_eq!(
            fs::read(&elsewhere).expect("kept"),
            good,
            "the target is untouched"
        );

        // A sound entry that others could have written: refused, rebuilt.
        fs::set_permissions(&entry, fs::Permissions::from_mode(0o666)).expect("chmod");
        assert!(read_verified(&entry, &cache.entry_key(&sha))
            .expect_err("mode")
            .contains("0666"));
        assert_eq!(load(), Origin::Compiled);
        assert_eq!(load(), Origin::Cache);
    }

    #[test]
    fn a_folder_open_to_others_is_refused_and_left_as_it_is() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let folder = dir.path().join("cache");
        fs::create_dir(&folder).expect("mkdir");
        fs::set_permissions(&folder, fs::Permissions::from_mode(0o777)).expect("chmod");
        let e = CompileCache::open(folder.clone(), &engine())
            .err()
            .expect("refused");
        let text = e.to_string();
        assert!(text.contains(&folder.display().to_string()), "{text}");
        assert!(text.contains("chmod go-w"), "{text}");
        let mode = fs::metadata(&folder).expect("stat").permissions().mode();
        assert_eq!(mode & 0o777, 0o777, "never re-permissioned");
    }

    #[test]
    fn a_sound_entry_renamed_to_another_component_is_not_served_as_it() {
        let engine = engine();
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = CompileCache::open(dir.path().join("cache"), &engine).expect("open");
        // Two components: the second differs by a custom section only.
        let a = EMPTY_COMPONENT.to_vec();
        let mut b = EMPTY_COMPONENT.to_vec();
        b.extend_from_slice(&[0x00, 0x04, 0x01, b'x', 0x01, 0x02]);
        let (sha_a, sha_b) = (sha256(&a), sha256(&b));
        let load = |bytes: &[u8], sha: &[u8; 32]| {
            cache
                .component(&engine, bytes, sha, Path::new("p.wasm"))
                .expect("component")
                .1
        };
        assert_eq!(load(&a, &sha_a), Origin::Compiled);
        // A's entry, whole and sound, put under B's name (as someone who
        // could once write the folder might have).
        fs::rename(cache.entry_path(&sha_a), cache.entry_path(&sha_b)).expect("rename");
        let why = read_verified(&cache.entry_path(&sha_b), &cache.entry_key(&sha_b))
            .expect_err("refused");
        assert!(why.contains("another component"), "{why}");
        assert_eq!(
            load(&b, &sha_b),
            Origin::Compiled,
            "B is compiled, not served A's code"
        );
        assert_eq!(
            load(&b, &sha_b),
            Origin::Cache,
            "and its own entry then serves"
        );
    }

    #[test]
    fn the_key_covers_the_engine() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sha = sha256(&EMPTY_COMPONENT);
        let a = CompileCache::open(dir.path().to_path_buf(), &engine()).expect("open");
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true).epoch_interruption(true);
        let other = Engine::new(&config).expect("engine");
        let b = CompileCache::open(dir.path().to_path_buf(), &other).expect("open");
        assert_ne!(a.entry_path(&sha), b.entry_path(&sha));
        assert_eq!(a.entry_path(&sha), a.entry_path(&sha));
    }
}
