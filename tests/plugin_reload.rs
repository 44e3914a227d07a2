//! Hot reload of plugin components: swapping files under a live host, bad
//! rewrites that must not take a good plugin down, name conflicts, the
//! folder watcher, and the compile cache. All with real components built
//! from `plugins/` (`versioned_v1`/`versioned_v2` are one plugin at two
//! versions; `versioned_bad` reports an empty version).

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentd::plugin::tool::ToolBox;
use agentd::plugin::{
    watch, ChangeKind, EngineLimits, FileStatus, PluginChange, PluginHost, PluginSet, PluginStatus,
};
use agentd::sandbox::{NoSandbox, SandboxProvider};
use common::built_plugins;

/// `RUST_LOG=agentd=debug cargo test --test plugin_reload -- --nocapture`
/// shows the watcher's events and every load.
fn log() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

fn host() -> PluginHost {
    log();
    PluginHost::new(EngineLimits {
        max_concurrent_runs: 2,
    })
    .expect("plugin host")
}

fn built(name: &str) -> Vec<u8> {
    let path = built_plugins().join(format!("{name}.wasm"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn put(dir: &Path, file: &str, component: &str) -> PathBuf {
    let path = dir.join(file);
    std::fs::write(&path, built(component)).expect("write plugin");
    path
}

fn versioned(set: &PluginSet) -> Option<String> {
    set.tool("versioned").map(|t| t.meta.version.clone())
}

fn status_of(host: &PluginHost, file: &str) -> PluginStatus {
    host.statuses()
        .into_iter()
        .find(|s| s.file.file_name().is_some_and(|n| n == file))
        .unwrap_or_else(|| panic!("no status for {file}: {:?}", host.statuses()))
}

fn kinds(changes: &[PluginChange]) -> Vec<(ChangeKind, String)> {
    changes.iter().map(|c| (c.kind, c.plugin.clone())).collect()
}

/// Calls the `versioned` tool of a snapshot: proves the loaded code runs,
/// not only that metadata was read.
async fn call_versioned(set: &PluginSet) -> String {
    let tool = set.tool("versioned").expect("versioned tool");
    let sandbox = NoSandbox::new("plugin reload tests").for_run("test");
    let mut tools = ToolBox::new(
        vec![tool],
        sandbox,
        agentd::plugin::clock::StepClock::new(),
        Default::default(),
        std::sync::Arc::new(agentd::plugin::NoHuman("plugin reload tests ask no one")),
    );
    tools
        .invoke("versioned", "{}")
        .await
        .unwrap_or_else(|e| panic!("invoke: {e}"))
}

#[tokio::test]
async fn replacing_the_file_swaps_the_plugin_while_old_snapshots_keep_theirs() {
    let dir = tempfile::tempdir().expect("tempdir");
    put(dir.path(), "versioned.wasm", "versioned_v1");
    put(dir.path(), "echo.wasm", "echo");
    let host = host();
    let report = host.load_dir(dir.path()).await.expect("load");
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    let old = host.snapshot();
    assert_eq!(versioned(&old).as_deref(), Some("1.0.0"));

    std::fs::copy(
        built_plugins().join("versioned_v2.wasm"),
        dir.path().join("versioned.wasm"),
    )
    .expect("copy");
    let changes = host.rescan(dir.path()).await;
    assert_eq!(
        kinds(&changes),
        [(ChangeKind::Replaced, "versioned".into())],
        "{changes:?}"
    );
    assert_eq!(changes[0].version.as_deref(), Some("2.0.0"));
    assert_eq!(changes[0].previous_version.as_deref(), Some("1.0.0"));
    assert!(changes[0].file.ends_with("versioned.wasm"));

    let new = host.snapshot();
    assert_eq!(versioned(&new).as_deref(), Some("2.0.0"));
    assert_eq!(versioned(&old).as_deref(), Some("1.0.0"));
    assert_eq!(call_versioned(&new).await, "versioned 2.0.0");
    assert_eq!(call_versioned(&old).await, "versioned 1.0.0");
    // The untouched plugin is the very same one in both sets.
    let (a, b) = (
        old.tool("echo").expect("echo"),
        new.tool("echo").expect("echo"),
    );
    assert!(Arc::ptr_eq(&a, &b), "an unchanged file is not reloaded");

    let status = status_of(&host, "versioned.wasm");
    assert_eq!(status.status, FileStatus::Loaded);
    assert_eq!(status.version.as_deref(), Some("2.0.0"));
    assert_eq!(status.sha256.as_deref().map(str::len), Some(64));
    assert!(status.loaded_at_ms > 0);

    // Same bytes again: nothing to do, however often it is asked.
    assert!(host.rescan(dir.path()).await.is_empty());
    assert!(Arc::ptr_eq(&new, &host.snapshot()));
}

#[tokio::test]
async fn a_bad_rewrite_keeps_the_old_version_serving_and_says_why() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = put(dir.path(), "versioned.wasm", "versioned_v1");
    let host = host();
    host.load_dir(dir.path()).await.expect("load");

    let v2 = built("versioned_v2");
    let mut bad = common::bad_plugin_files(&v2);
    bad.push((
        "an empty version",
        built("versioned_bad"),
        "has an empty version",
    ));
    for (what, bytes, reason) in bad {
        std::fs::write(&file, &bytes).expect("write");
        let changes = host.rescan(dir.path()).await;
        assert_eq!(changes.len(), 1, "{what}: {changes:?}");
        let change = &changes[0];
        assert_eq!(change.kind, ChangeKind::Failed, "{what}: {change:?}");
        assert_eq!(change.plugin, "versioned", "{what}");
        assert_eq!(change.previous_version.as_deref(), Some("1.0.0"), "{what}");
        let error = change.error.clone().unwrap_or_default();
        assert!(error.contains(reason), "{what}: {error}");
        assert!(
            error.contains("versioned.wasm"),
            "{what}: names the file: {error}"
        );

        assert_eq!(
            versioned(&host.snapshot()).as_deref(),
            Some("1.0.0"),
            "{what}"
        );
        assert_eq!(call_versioned(&host.snapshot()).await, "versioned 1.0.0");
        let status = status_of(&host, "versioned.wasm");
        assert_eq!(status.status, FileStatus::Failed, "{what}");
        assert_eq!(status.name, "versioned");
        assert_eq!(status.version, None);
        assert_eq!(status.serving_version.as_deref(), Some("1.0.0"));
        assert!(status.error.unwrap_or_default().contains(reason), "{what}");
        // Failing again on the same bytes is not news.
        assert!(host.rescan(dir.path()).await.is_empty(), "{what}");
    }

    std::fs::write(&file, &v2).expect("write");
    let changes = host.rescan(dir.path()).await;
    assert_eq!(
        kinds(&changes),
        [(ChangeKind::Replaced, "versioned".into())]
    );
    assert_eq!(
        status_of(&host, "versioned.wasm").status,
        FileStatus::Loaded
    );
    assert_eq!(call_versioned(&host.snapshot()).await, "versioned 2.0.0");
}

#[tokio::test]
async fn a_file_that_never_loaded_is_listed_under_its_stem() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("broken.wasm"), common::CORE_MODULE).expect("write");
    let host = host();
    let report = host.load_dir(dir.path()).await.expect("load");
    assert_eq!(report.failed.len(), 1);
    let status = status_of(&host, "broken.wasm");
    assert_eq!(status.name, "broken");
    assert_eq!(status.kind, None);
    assert_eq!(status.status, FileStatus::Failed);
    assert_eq!(status.serving_version, None);
    let json = serde_json::to_value(&status).expect("json");
    for key in common::PLUGIN_STATUS_FIELDS {
        assert!(json.get(key).is_some(), "{key} missing from {json}");
    }
    assert_eq!(json["status"], "failed");
    assert_eq!(json["kind"], serde_json::Value::Null);
}

#[tokio::test]
async fn two_files_with_one_name_conflict_and_the_first_keeps_serving() {
    let dir = tempfile::tempdir().expect("tempdir");
    put(dir.path(), "versioned.wasm", "versioned_v1");
    put(dir.path(), "zz-versioned.wasm", "versioned_v2");
    let host = host();
    let report = host.load_dir(dir.path()).await.expect("load");
    assert_eq!(report.loaded.len(), 1);
    assert_eq!(report.failed.len(), 1);
    assert!(report.failed[0]
        .1
        .to_string()
        .contains("two plugins are named `versioned`"));
    assert_eq!(versioned(&host.snapshot()).as_deref(), Some("1.0.0"));
    let zz = status_of(&host, "zz-versioned.wasm");
    assert_eq!(zz.status, FileStatus::Conflict);
    assert_eq!(zz.version.as_deref(), Some("2.0.0"));
    assert_eq!(zz.serving_version.as_deref(), Some("1.0.0"));
    assert!(zz.error.unwrap_or_default().contains("zz-versioned.wasm"));

    // A newcomer loses to the one serving even if its name sorts first.
    put(dir.path(), "aa-versioned.wasm", "versioned_v2");
    let changes = host.rescan(dir.path()).await;
    assert_eq!(
        kinds(&changes),
        [(ChangeKind::Conflict, "versioned".into())]
    );
    assert_eq!(changes[0].previous_version.as_deref(), Some("1.0.0"));
    assert!(changes[0].file.ends_with("aa-versioned.wasm"));
    assert_eq!(versioned(&host.snapshot()).as_deref(), Some("1.0.0"));

    // When the server goes, the earliest-loaded claimant takes over.
    std::fs::remove_file(dir.path().join("versioned.wasm")).expect("rm");
    let changes = host.rescan(dir.path()).await;
    assert_eq!(
        kinds(&changes),
        [(ChangeKind::Replaced, "versioned".into())]
    );
    assert!(
        changes[0].file.ends_with("zz-versioned.wasm"),
        "{changes:?}"
    );
    assert_eq!(versioned(&host.snapshot()).as_deref(), Some("2.0.0"));
    assert_eq!(
        status_of(&host, "zz-versioned.wasm").status,
        FileStatus::Loaded
    );
    assert_eq!(
        status_of(&host, "aa-versioned.wasm").status,
        FileStatus::Conflict
    );
}

#[tokio::test]
async fn deleting_a_file_unloads_its_plugin_and_temp_files_are_ignored() {
    let dir = tempfile::tempdir().expect("tempdir");
    put(dir.path(), "versioned.wasm", "versioned_v1");
    put(dir.path(), "terminate.wasm", "terminate");
    let host = host();
    host.load_dir(dir.path()).await.expect("load");
    let before = host.snapshot();

    for temp in [
        ".versioned.wasm.swp",
        ".hidden.wasm",
        "versioned.wasm~",
        "versioned.wasm.part",
        "versioned.wasm.crdownload",
        "versioned.tmp",
        "versioned.wasm.tmp",
    ] {
        put(dir.path(), temp, "versioned_v2");
    }
    assert!(host.rescan(dir.path()).await.is_empty());
    assert_eq!(host.statuses().len(), 2);

    std::fs::remove_file(dir.path().join("versioned.wasm")).expect("rm");
    let changes = host.rescan(dir.path()).await;
    assert_eq!(kinds(&changes), [(ChangeKind::Removed, "versioned".into())]);
    assert_eq!(changes[0].previous_version.as_deref(), Some("1.0.0"));
    assert!(host.snapshot().tool("versioned").is_none());
    assert!(host.snapshot().tool("terminate").is_some());
    assert_eq!(host.statuses().len(), 1);
    // A run that started before still has it.
    assert_eq!(call_versioned(&before).await, "versioned 1.0.0");

    // A file that now holds another plugin unloads the one it held.
    put(dir.path(), "other.wasm", "versioned_v1");
    host.rescan(dir.path()).await;
    put(dir.path(), "other.wasm", "echo");
    // Sorted by file, then plugin name.
    let changes = kinds(&host.rescan(dir.path()).await);
    assert_eq!(
        changes,
        [
            (ChangeKind::Loaded, "echo".into()),
            (ChangeKind::Removed, "versioned".into())
        ]
    );
}

#[tokio::test]
async fn an_unreadable_folder_unloads_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    put(dir.path(), "versioned.wasm", "versioned_v1");
    let host = host();
    host.load_dir(dir.path()).await.expect("load");
    let gone = dir.path().join("no-such-folder");
    let changes = host.rescan(&gone).await;
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0].kind, ChangeKind::Failed);
    assert!(changes[0]
        .error
        .as_deref()
        .unwrap_or_default()
        .contains("no-such-folder"));
    assert_eq!(versioned(&host.snapshot()).as_deref(), Some("1.0.0"));
}

/// A plugins folder that others can write to is refused at every scan (with
/// the folder and the fix), and what serves keeps serving: a folder opened
/// later cannot slip in a new plugin.
#[tokio::test]
async fn a_plugins_folder_open_to_others_is_refused_and_unloads_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    put(dir.path(), "versioned.wasm", "versioned_v1");
    let host = host();
    host.load_dir(dir.path()).await.expect("load");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).expect("chmod");
    put(dir.path(), "versioned.wasm", "versioned_v2");
    let error = host
        .try_rescan(dir.path())
        .await
        .expect_err("refused")
        .to_string();
    assert!(error.contains(&dir.path().display().to_string()), "{error}");
    assert!(error.contains("chmod go-w"), "{error}");
    assert_eq!(versioned(&host.snapshot()).as_deref(), Some("1.0.0"));
    let fresh = host_for_links(false);
    assert!(fresh.load_dir(dir.path()).await.is_err());
    assert!(fresh.snapshot().tool("versioned").is_none());
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    host.try_rescan(dir.path()).await.expect("trusted again");
    assert_eq!(versioned(&host.snapshot()).as_deref(), Some("2.0.0"));
}

fn host_for_links(follow: bool) -> PluginHost {
    host().with_follow_symlinks(follow)
}

/// A link in the plugins folder is not followed by default: it is listed
/// `failed` with the reason and the key that allows it, and its target is
/// never loaded. With `follow_symlinks` it loads like a file.
#[tokio::test]
async fn a_link_in_the_plugins_folder_is_followed_only_when_allowed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let target = put(elsewhere.path(), "versioned.wasm", "versioned_v1");
    std::os::unix::fs::symlink(&target, dir.path().join("versioned.wasm")).expect("symlink");

    let strict = host_for_links(false);
    let report = strict.load_dir(dir.path()).await.expect("load");
    assert!(report.loaded.is_empty(), "{:?}", report.loaded);
    assert!(strict.snapshot().tool("versioned").is_none());
    let status = status_of(&strict, "versioned.wasm");
    assert_eq!(status.status, FileStatus::Failed);
    let error = status.error.unwrap_or_default();
    assert!(error.contains("symbolic link"), "{error}");
    assert!(error.contains("follow_symlinks"), "{error}");

    let following = host_for_links(true);
    following.load_dir(dir.path()).await.expect("load");
    assert_eq!(versioned(&following.snapshot()).as_deref(), Some("1.0.0"));
}

/// Records what the watcher reports.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<PluginChange>>>);

impl Seen {
    fn callback(&self) -> Arc<dyn Fn(&PluginChange) + Send + Sync> {
        let seen = self.0.clone();
        Arc::new(move |c: &PluginChange| seen.lock().expect("lock").push(c.clone()))
    }

    fn all(&self) -> Vec<PluginChange> {
        self.0.lock().expect("lock").clone()
    }

    fn count(&self, kinds: &[ChangeKind]) -> usize {
        self.all()
            .iter()
            .filter(|c| kinds.contains(&c.kind))
            .count()
    }

    /// Waits until `n` changes of these kinds arrived, then a little longer
    /// so that a duplicate would have time to show up.
    async fn settle(&self, kinds: &[ChangeKind], n: usize) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while self.count(kinds) < n {
            assert!(
                tokio::time::Instant::now() < deadline,
                "waited for {n} {kinds:?}, saw {:?}",
                self.all()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(agentd::plugin::WATCH_QUIET * 4).await;
    }
}

const SERVING: &[ChangeKind] = &[ChangeKind::Loaded, ChangeKind::Replaced];

#[tokio::test]
async fn the_watcher_applies_an_atomic_rename_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let staging = tempfile::tempdir().expect("tempdir");
    put(dir.path(), "versioned.wasm", "versioned_v1");
    let host = Arc::new(host());
    host.load_dir(dir.path()).await.expect("load");
    let seen = Seen::default();
    let _watcher = watch(host.clone(), dir.path().to_path_buf(), seen.callback()).expect("watch");

    // Staged elsewhere, renamed in: only a `Name(To)` event arrives.
    let staged = put(staging.path(), "v2.wasm", "versioned_v2");
    std::fs::rename(&staged, dir.path().join("versioned.wasm")).expect("rename");
    seen.settle(SERVING, 1).await;
    assert_eq!(seen.count(SERVING), 1, "{:?}", seen.all());
    assert_eq!(seen.all()[0].kind, ChangeKind::Replaced);
    assert_eq!(versioned(&host.snapshot()).as_deref(), Some("2.0.0"));

    // A new file by rename, then renamed out (`Name(From)` only).
    let staged = put(staging.path(), "echo.wasm", "echo");
    std::fs::rename(&staged, dir.path().join("echo.wasm")).expect("rename");
    seen.settle(SERVING, 2).await;
    assert!(host.snapshot().tool("echo").is_some());
    std::fs::rename(
        dir.path().join("echo.wasm"),
        staging.path().join("out.wasm"),
    )
    .expect("rename out");
    seen.settle(&[ChangeKind::Removed], 1).await;
    assert!(host.snapshot().tool("echo").is_none());
    assert_eq!(seen.count(SERVING), 2, "{:?}", seen.all());
    assert_eq!(seen.count(&[ChangeKind::Removed]), 1, "{:?}", seen.all());
}

#[tokio::test]
async fn the_watcher_waits_for_a_slow_write_and_applies_it_once() {
    use std::io::Write;

    let dir = tempfile::tempdir().expect("tempdir");
    put(dir.path(), "versioned.wasm", "versioned_v1");
    let host = Arc::new(host());
    host.load_dir(dir.path()).await.expect("load");
    let seen = Seen::default();
    let _watcher = watch(host.clone(), dir.path().to_path_buf(), seen.callback()).expect("watch");

    // In place, in three chunks with pauses shorter than the quiet time.
    let v2 = built("versioned_v2");
    let third = v2.len() / 3;
    let mut f = std::fs::File::create(dir.path().join("versioned.wasm")).expect("create");
    for chunk in [&v2[..third], &v2[third..2 * third], &v2[2 * third..]] {
        f.write_all(chunk).expect("write");
        f.flush().expect("flush");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(f);
    seen.settle(SERVING, 1).await;
    assert_eq!(seen.count(SERVING), 1, "{:?}", seen.all());
    assert_eq!(versioned(&host.snapshot()).as_deref(), Some("2.0.0"));

    // A plain copy of a new file, then a delete.
    std::fs::copy(
        built_plugins().join("echo.wasm"),
        dir.path().join("echo.wasm"),
    )
    .expect("copy");
    seen.settle(SERVING, 2).await;
    assert_eq!(seen.count(SERVING), 2, "{:?}", seen.all());
    std::fs::remove_file(dir.path().join("versioned.wasm")).expect("rm");
    seen.settle(&[ChangeKind::Removed], 1).await;
    assert!(host.snapshot().tool("versioned").is_none());
}

#[tokio::test]
async fn dropping_the_watcher_stops_watching() {
    let dir = tempfile::tempdir().expect("tempdir");
    let host = Arc::new(host());
    host.load_dir(dir.path()).await.expect("load");
    let seen = Seen::default();
    let watcher = watch(host.clone(), dir.path().to_path_buf(), seen.callback()).expect("watch");
    drop(watcher);
    put(dir.path(), "echo.wasm", "echo");
    tokio::time::sleep(agentd::plugin::WATCH_QUIET * 5).await;
    assert!(seen.all().is_empty(), "{:?}", seen.all());
    assert!(host.snapshot().tool("echo").is_none());
}

fn cached_host(cache: &Path) -> PluginHost {
    host()
        .with_cache_dir(cache.to_path_buf())
        .expect("a private cache folder")
}

fn cache_entries(cache: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(cache)
        .expect("read cache")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "cwasm"))
        .collect();
    entries.sort();
    entries
}

const CACHED: &[&str] = &["versioned_v1", "echo", "terminate", "toolcall"];

fn cached_plugins_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for name in CACHED {
        put(dir.path(), &format!("{name}.wasm"), name);
    }
    dir
}

#[tokio::test]
async fn a_second_host_loads_every_plugin_from_the_cache() {
    let dir = cached_plugins_dir();
    let state = tempfile::tempdir().expect("tempdir");
    let cache = state.path().join("cache");
    let n = CACHED.len() as u64;

    let first = cached_host(&cache);
    assert_eq!(first.cache_dir(), Some(cache.as_path()));
    let report = first.load_dir(dir.path()).await.expect("load");
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    assert_eq!((first.cache_hits(), first.cache_misses()), (0, n));
    assert_eq!(cache_entries(&cache).len(), CACHED.len());
    let mode = std::fs::metadata(&cache)
        .expect("stat")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);

    let second = cached_host(&cache);
    let report = second.load_dir(dir.path()).await.expect("load");
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    assert_eq!((second.cache_hits(), second.cache_misses()), (n, 0));
    assert_eq!(call_versioned(&second.snapshot()).await, "versioned 1.0.0");
    let names: Vec<_> = report.loaded.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["echo", "terminate", "toolcall", "versioned"]);
}

#[tokio::test]
async fn a_corrupt_cache_entry_is_detected_rebuilt_and_the_plugin_works() {
    let dir = tempfile::tempdir().expect("tempdir");
    put(dir.path(), "versioned.wasm", "versioned_v1");
    let state = tempfile::tempdir().expect("tempdir");
    let cache = state.path().join("cache");
    cached_host(&cache)
        .load_dir(dir.path())
        .await
        .expect("load");
    let entries = cache_entries(&cache);
    assert_eq!(entries.len(), 1);
    let entry = &entries[0];
    let good = std::fs::read(entry).expect("read entry");

    let mut flipped = good.clone();
    let middle = flipped.len() / 2;
    for b in &mut flipped[middle..middle + 64] {
        *b ^= 0xff;
    }
    let corruptions: [(&str, Vec<u8>); 4] = [
        ("bytes overwritten", flipped),
        ("truncated", good[..good.len() / 3].to_vec()),
        ("empty", Vec::new()),
        (
            "not ours",
            b"\x7fELF pretending to be machine code".to_vec(),
        ),
    ];
    for (what, bytes) in corruptions {
        std::fs::write(entry, &bytes).expect("corrupt");
        let host = cached_host(&cache);
        let report = host.load_dir(dir.path()).await.expect("load");
        assert!(report.failed.is_empty(), "{what}: {:?}", report.failed);
        assert_eq!(
            (host.cache_hits(), host.cache_misses()),
            (0, 1),
            "{what}: compiled again"
        );
        assert_eq!(call_versioned(&host.snapshot()).await, "versioned 1.0.0");
        let rebuilt = std::fs::read(entry).expect("read entry");
        assert_eq!(rebuilt.len(), good.len(), "{what}: the entry is rewritten");

        let next = cached_host(&cache);
        next.load_dir(dir.path()).await.expect("load");
        assert_eq!((next.cache_hits(), next.cache_misses()), (1, 0), "{what}");
    }
}

/// A cache folder others could write to may already hold planted machine
/// code: it is refused with the folder and the fix in the error, and left
/// as it was (a silent chmod would hide that it ever was open).
#[tokio::test]
async fn a_cache_folder_open_to_others_is_refused_not_repaired() {
    let state = tempfile::tempdir().expect("tempdir");
    let cache = state.path().join("cache");
    std::fs::create_dir(&cache).expect("mkdir");
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let error = host()
        .with_cache_dir(cache.clone())
        .err()
        .expect("refused")
        .to_string();
    assert!(error.contains(&cache.display().to_string()), "{error}");
    assert!(error.contains("chmod go-w"), "{error}");
    let mode = std::fs::metadata(&cache)
        .expect("stat")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o777, "left as it was");
}

/// The daemon checks each plugin file, not only the folder: a file its
/// group (or everyone) can write is `failed` in `GET /v1/plugins`, naming
/// the file and the fix, never loaded and never re-permissioned, while the
/// other files serve. Once fixed, a reload loads it. `agentd plugins
/// --local` (a user's own folder, where 0664 is the norm under user-private
/// groups) does not check files, and loads the same file.
#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_file_others_can_write_is_refused_by_the_daemon_only() {
    use common::daemon::Daemon;
    let llm = agentd::testkit::FakeLlm::start().await.expect("fake llm");
    let mut d = tokio::task::block_in_place(|| Daemon::unstarted(&llm, ""));
    let good = d.plugins.path().join("echo.wasm");
    std::fs::set_permissions(&good, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let open = put(d.plugins.path(), "versioned.wasm", "versioned_v1");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o664)).expect("chmod");
    tokio::task::block_in_place(|| d.spawn(&[]));

    let row = |file: &str| {
        let (status, v) = d.get("/v1/plugins");
        assert_eq!(status, 200, "{v}");
        v["plugins"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["file"].as_str().is_some_and(|f| f.ends_with(file)))
            .cloned()
            .unwrap_or_else(|| panic!("no row for {file}: {v}"))
    };
    let refused = tokio::task::block_in_place(|| row("versioned.wasm"));
    assert_eq!(refused["status"], "failed", "{refused}");
    let error = refused["error"].as_str().unwrap_or_default();
    assert!(error.contains(&open.display().to_string()), "{error}");
    assert!(error.contains("writable by its group"), "{error}");
    assert!(error.contains("chmod go-w"), "{error}");
    assert_eq!(refused["version"], serde_json::Value::Null, "{refused}");
    assert_eq!(
        tokio::task::block_in_place(|| row("echo.wasm"))["status"],
        "loaded"
    );
    let mode = std::fs::metadata(&open).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode, 0o664, "the file is not re-permissioned");

    // The same folder as `agentd plugins --local` sees it: no file check.
    let local = tokio::task::block_in_place(|| {
        std::process::Command::new(env!("CARGO_BIN_EXE_agentd"))
            .args(["plugins", "--local", "--json", "--config"])
            .arg(&d.config)
            .env_remove("AGENTD_CONFIG")
            .output()
            .expect("agentd plugins --local")
    });
    let listed: serde_json::Value = serde_json::from_slice(&local.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&local.stdout),
            String::from_utf8_lossy(&local.stderr)
        )
    });
    let names: Vec<&str> = listed
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["name"].as_str())
        .collect();
    assert!(names.contains(&"versioned"), "{names:?}");

    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let (status, v) = tokio::task::block_in_place(|| d.post("/v1/plugins/reload", ""));
    assert_eq!(status, 200, "{v}");
    let fixed = tokio::task::block_in_place(|| row("versioned.wasm"));
    assert_eq!(fixed["status"], "loaded", "{fixed}");
    assert_eq!(fixed["version"], "1.0.0", "{fixed}");
}
