//! The real `agentd serve`, spawned, and a raw HTTP/1.1 client over its Unix
//! socket (what `curl --unix-socket` sends, byte for byte).

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agentd::testkit::FakeLlm;
use serde_json::Value;

use super::{built_plugins, plugins_dir};

pub struct Daemon {
    /// The `agentd` binary started: the one cargo built, or an installed
    /// copy ([`Daemon::installed`]).
    pub exe: PathBuf,
    pub child: Option<Child>,
    pub dir: tempfile::TempDir,
    pub plugins: tempfile::TempDir,
    pub socket: PathBuf,
    pub config: PathBuf,
    pub state_dir: PathBuf,
    pub log: PathBuf,
}

pub const DAEMON_PLUGINS: &[&str] = &["toolcall", "terminate", "echo", "bash", "misbehave"];

/// An agent `versioned` on the test strategy `versioned_strategy`, which
/// writes `strategy versioned_strategy <VERSION> step <N>` into the
/// transcript at each step and finishes at step 3. It uses no tools, so it
/// needs no sandbox. Append it to `extra`.
pub const VERSIONED_STRATEGY_AGENT: &str =
    "\n[agents.versioned]\nstrategy = \"versioned_strategy\"\ntools = []\nmax_steps = 10\n";

/// The warm pool is off in test daemons unless a test turns it on
/// (replacing this line): the suite's tests count the containers their runs
/// leave, and two made ahead by every daemon would be noise to them. The
/// pool's own tests (`tests/sandbox_pool.rs`) run with it.
pub const POOL_OFF: &str = "pool_size = 0";

/// The configuration every daemon test starts from; `extra` is appended
/// (more `[daemon]` keys first, then other tables).
pub fn config_text(llm: &FakeLlm, dir: &Path, plugins: &Path, extra: &str) -> String {
    config_text_for(&llm.base_url(), "fake", dir, plugins, extra)
}

/// [`config_text`] for any OpenAI-compatible endpoint serving `model`.
pub fn config_text_for(
    base_url: &str,
    model: &str,
    dir: &Path,
    plugins: &Path,
    extra: &str,
) -> String {
    format!(
        "[llm]\nmodel = \"{model}\"\nbase_url = \"{base_url}\"\napi_key = \"k\"\nretry_backoff_ms = 10\n\n\
         [daemon]\nplugins_dir = \"{}\"\nstate_dir = \"{}\"\nsocket = \"{}\"\nshutdown_grace = 2\n{extra}\n\n\
         [sandbox]\nimage = \"agentd-sandbox-tiny:latest\"\n{POOL_OFF}\n",
        plugins.display(),
        dir.join("state").display(),
        dir.join("agentd.sock").display(),
    )
}

impl Daemon {
    /// Writes a configuration and starts `agentd serve`, waiting until the
    /// socket answers.
    pub fn start(llm: &FakeLlm, extra: &str) -> Daemon {
        Self::start_in(llm, plugins_dir(DAEMON_PLUGINS), extra)
    }

    /// Like [`start`](Self::start), with exactly these plugin files in the
    /// plugins folder: `(file name there, built component)`, e.g.
    /// `("versioned_strategy.wasm", "versioned_strategy_v1")`.
    pub fn start_with_plugins(llm: &FakeLlm, files: &[(&str, &str)], extra: &str) -> Daemon {
        let mut d = Self::unstarted_with_plugins(llm, files, extra);
        d.spawn(&[]);
        d
    }

    /// Like [`start_with_plugins`](Self::start_with_plugins), not started
    /// yet: the test writes files next to the configuration (a secrets
    /// file, say) and then calls [`spawn`](Self::spawn).
    pub fn unstarted_with_plugins(llm: &FakeLlm, files: &[(&str, &str)], extra: &str) -> Daemon {
        let plugins = tempfile::tempdir().expect("tempdir");
        let built = built_plugins();
        for (file, component) in files {
            let from = built.join(format!("{component}.wasm"));
            std::fs::copy(&from, plugins.path().join(file))
                .unwrap_or_else(|e| panic!("copy {}: {e}", from.display()));
        }
        Self::configured(llm, plugins, extra)
    }

    /// Like [`start_with_plugins`](Self::start_with_plugins), with the
    /// compile cache (`<state_dir>/cache`) seeded from
    /// [`shared_compile_cache`] before the daemon starts and the entries it
    /// compiled shared back once it is ready. For tests of Python plugins,
    /// which take 7-17 s each to compile: each test's daemon then loads
    /// them from the cache in milliseconds, as a restarted daemon does.
    /// Start-ups through here are serialised within a test binary, so tests
    /// that start together do not all compile the same components at once:
    /// the first compiles, the others wait and find the entries.
    pub fn start_sharing_compile_cache(
        llm: &FakeLlm,
        files: &[(&str, &str)],
        extra: &str,
    ) -> Daemon {
        static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
        let mut d = Self::configured(llm, Self::folder_of(files), extra);
        d.seed_compile_cache();
        d.spawn(&[]);
        d.share_compile_cache();
        d
    }

    /// A plugins folder holding `(file name, built component)` copies.
    fn folder_of(files: &[(&str, &str)]) -> tempfile::TempDir {
        let plugins = tempfile::tempdir().expect("tempdir");
        let built = built_plugins();
        for (file, component) in files {
            let from = built.join(format!("{component}.wasm"));
            std::fs::copy(&from, plugins.path().join(file))
                .unwrap_or_else(|e| panic!("copy {}: {e}", from.display()));
        }
        plugins
    }

    fn cache_entries(dir: &Path) -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "cwasm"))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Links (or copies) every entry of [`shared_compile_cache`] into this
    /// daemon's cache folder, made as the daemon makes it (0700); entries
    /// stay 0600 and this user's, which the daemon checks before use.
    /// Entries of another engine build are simply misses.
    pub fn seed_compile_cache(&self) {
        use std::os::unix::fs::DirBuilderExt;
        let cache = self.state_dir.join("cache");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&cache)
            .expect("create the cache folder");
        for entry in Self::cache_entries(&shared_compile_cache()) {
            let to = cache.join(entry.file_name().expect("entry name"));
            if std::fs::hard_link(&entry, &to).is_err() {
                let _ = std::fs::copy(&entry, &to);
            }
        }
    }

    /// Shares this daemon's new compile cache entries with later tests (a
    /// temp file renamed into place: a test reading the folder never sees
    /// half an entry).
    pub fn share_compile_cache(&self) {
        use std::os::unix::fs::PermissionsExt;
        let shared = shared_compile_cache();
        for entry in Self::cache_entries(&self.state_dir.join("cache")) {
            let name = entry.file_name().expect("entry name");
            let to = shared.join(name);
            if to.exists() {
                continue;
            }
            let tmp = shared.join(format!(
                ".{}.{}.tmp",
                name.to_string_lossy(),
                std::process::id()
            ));
            if std::fs::copy(&entry, &tmp).is_ok() {
                let _ = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600));
                let _ = std::fs::rename(&tmp, &to);
            }
        }
    }

    fn start_in(llm: &FakeLlm, plugins: tempfile::TempDir, extra: &str) -> Daemon {
        let mut d = Self::configured(llm, plugins, extra);
        d.spawn(&[]);
        d
    }

    /// Like [`start`](Self::start) but not started yet: the test prepares
    /// the folders (mounts a small file system on `state_dir`, makes the
    /// cache writable...) and then calls [`spawn`](Self::spawn), or runs
    /// [`command`](Self::command) itself to see start-up refused.
    pub fn unstarted(llm: &FakeLlm, extra: &str) -> Daemon {
        Self::configured(llm, plugins_dir(DAEMON_PLUGINS), extra)
    }

    fn configured(llm: &FakeLlm, plugins: tempfile::TempDir, extra: &str) -> Daemon {
        Self::configured_for(&llm.base_url(), "fake", plugins, extra)
    }

    /// Started against a real OpenAI-compatible endpoint serving `model`,
    /// with exactly these plugin files (as in
    /// [`start_with_plugins`](Self::start_with_plugins)).
    pub fn start_against(
        base_url: &str,
        model: &str,
        files: &[(&str, &str)],
        extra: &str,
    ) -> Daemon {
        let mut d = Self::configured_for(base_url, model, Self::folder_of(files), extra);
        d.spawn(&[]);
        d
    }

    fn configured_for(
        base_url: &str,
        model: &str,
        plugins: tempfile::TempDir,
        extra: &str,
    ) -> Daemon {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dir.path().join("agentd.toml");
        let text = config_text_for(base_url, model, dir.path(), plugins.path(), extra);
        std::fs::write(&config, text).expect("write config");
        Daemon {
            exe: PathBuf::from(env!("CARGO_BIN_EXE_agentd")),
            child: None,
            socket: dir.path().join("agentd.sock"),
            state_dir: dir.path().join("state"),
            log: dir.path().join("daemon.log"),
            config,
            dir,
            plugins,
        }
    }

    /// An installed `agentd` (e.g. by `scripts/install.sh`) on its own
    /// configuration, not started yet; `socket` and `state_dir` are where
    /// that configuration puts them.
    pub fn installed(exe: &Path, config: &Path, socket: &Path, state_dir: &Path) -> Daemon {
        let dir = tempfile::tempdir().expect("tempdir");
        Daemon {
            exe: exe.to_path_buf(),
            child: None,
            socket: socket.to_path_buf(),
            state_dir: state_dir.to_path_buf(),
            log: dir.path().join("daemon.log"),
            config: config.to_path_buf(),
            dir,
            plugins: tempfile::tempdir().expect("tempdir"),
        }
    }

    pub fn command(&self) -> Command {
        let mut cmd = super::scrubbed(&self.exe);
        cmd.arg("serve")
            .arg("--config")
            .arg(&self.config)
            .env_remove("NOTIFY_SOCKET")
            .env_remove("LISTEN_FDS")
            .env_remove("LISTEN_PID")
            .env("AGENTD_LOG", "info");
        cmd
    }

    /// (Re)starts the daemon process on the same folders.
    pub fn spawn(&mut self, env: &[(&str, &str)]) {
        self.spawn_with(env, |_| {});
    }

    /// [`spawn`](Self::spawn), with `adjust` applied to the command last
    /// (a umask, say).
    pub fn spawn_with(&mut self, env: &[(&str, &str)], adjust: impl FnOnce(&mut Command)) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("log file");
        let mut cmd = self.command();
        for (k, v) in env {
            cmd.env(k, v);
        }
        adjust(&mut cmd);
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("spawn agentd serve");
        self.child = Some(child);
        self.wait_ready();
    }

    pub fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Ok((200, _)) = raw(&self.socket, "GET", "/v1/status", None) {
                return;
            }
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!("agentd serve exited ({status}):\n{}", self.log_text());
                }
            }
            assert!(
                Instant::now() < deadline,
                "agentd serve not ready:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Polls `GET /v1/runs/{id}` until the run is in `state` (`queued`,
    /// `running`, `waiting`), and returns that view; a run that ends
    /// instead fails the test, naming it.
    pub fn wait_state(&self, id: &str, state: &str) -> Value {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let (status, v) = self.get(&format!("/v1/runs/{id}"));
            assert_eq!(status, 200, "{v}");
            if v["state"] == state {
                return v;
            }
            assert!(
                v["state"] != "ended",
                "run {id} ended instead of {state}: {v}"
            );
            assert!(
                std::time::Instant::now() < deadline,
                "run {id} never got to {state}: {v}\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Lets every user reach the socket (its folder 0755, the socket 0666):
    /// the file mode is the socket's first gate, and a test of the second,
    /// the credential check, needs a client past the first. Such tests act
    /// as `nobody` and need root.
    pub fn open_socket_to_all(&self) {
        use std::os::unix::fs::PermissionsExt;
        // SAFETY: geteuid has no preconditions.
        assert_eq!(
            unsafe { libc::geteuid() },
            0,
            "this test runs a client as another user and needs root"
        );
        std::fs::set_permissions(self.dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod the daemon's folder");
        std::fs::set_permissions(&self.socket, std::fs::Permissions::from_mode(0o666))
            .expect("chmod the socket");
    }

    /// A copy of the `agentd` client every user can execute, wherever the
    /// build tree lives (a checkout under a 0700 folder, say).
    pub fn client_for_all(&self) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let client = self.dir.path().join("agentd-client");
        std::fs::copy(env!("CARGO_BIN_EXE_agentd"), &client).expect("copy the client");
        std::fs::set_permissions(&client, std::fs::Permissions::from_mode(0o755))
            .expect("chmod the client");
        client
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().map(|c| c.id() as i32).unwrap_or(0)
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe {
            libc::kill(self.pid(), sig);
        }
    }

    /// Waits for the process to exit and returns its exit code.
    pub fn wait_exit(&mut self, within: Duration) -> Option<i32> {
        let child = self.child.as_mut()?;
        let deadline = Instant::now() + within;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return status.code();
            }
            if Instant::now() > deadline {
                panic!("agentd did not exit in time:\n{}", self.log_text());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM, then waits for the process to exit; returns its exit code.
    pub fn stop(&mut self) -> Option<i32> {
        self.signal(libc::SIGTERM);
        self.wait_exit(Duration::from_secs(60))
    }

    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn get(&self, path: &str) -> (u16, Value) {
        request(&self.socket, "GET", path, None)
    }

    pub fn post(&self, path: &str, body: &str) -> (u16, Value) {
        request(&self.socket, "POST", path, Some(body.as_bytes()))
    }

    /// Starts a run and returns its id.
    /// The `agentd` CLI against this daemon's socket, with no
    /// configuration or socket from the environment.
    pub fn cli(&self, args: &[&str]) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_agentd"))
            .arg("--socket")
            .arg(&self.socket)
            .args(args)
            .env_remove("AGENTD_CONFIG")
            .env_remove("AGENTD_SOCKET")
            .output()
            .expect("run the CLI")
    }

    pub fn create_run(&self, agent: &str, request_text: &str) -> String {
        let body = serde_json::json!({"agent": agent, "request": request_text}).to_string();
        let (status, v) = self.post("/v1/runs", &body);
        assert_eq!(status, 201, "{v}");
        v["id"].as_str().expect("run id").to_string()
    }

    /// Polls until the run has ended and returns its record.
    pub fn wait_run(&self, id: &str, within: Duration) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let (status, v) = self.get(&format!("/v1/runs/{id}"));
            assert_eq!(status, 200, "{v}");
            if v["state"] == "ended" {
                return self.with_every_message(id, v);
            }
            assert!(
                Instant::now() < deadline,
                "run {id} did not end: {v}\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// `record` (a first page of `GET /v1/runs/{id}`) with the messages of
    /// every later page appended: the whole transcript, as one record.
    pub fn with_every_message(&self, id: &str, mut record: Value) -> Value {
        let mut next = record.get("next_messages_from").and_then(Value::as_u64);
        while let Some(from) = next {
            let (status, page) = self.get(&format!("/v1/runs/{id}?messages_from={from}"));
            assert_eq!(status, 200, "{page}");
            let more = page["messages"].as_array().cloned().unwrap_or_default();
            assert!(!more.is_empty(), "an empty page before the end: {page}");
            if let Some(messages) = record["messages"].as_array_mut() {
                messages.extend(more);
            }
            next = page.get("next_messages_from").and_then(Value::as_u64);
        }
        if let Some(fields) = record.as_object_mut() {
            fields.remove("next_messages_from");
        }
        record
    }

    /// The events of a run so far, without waiting for more.
    pub fn events_so_far(&self, id: &str) -> Vec<Value> {
        let (status, body) = raw(
            &self.socket,
            "GET",
            &format!("/v1/runs/{id}/events?follow=false"),
            None,
        )
        .expect("events request");
        assert_eq!(status, 200);
        ndjson(&body)
    }

    /// Polls until the run has had an event of type `kind`.
    pub fn wait_for_event(&self, id: &str, kind: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.events_so_far(id).iter().any(|e| e["type"] == kind) {
            assert!(Instant::now() < deadline, "no {kind} event for {id}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The whole event stream of a run (follows it until `run_ended`).
    pub fn events(&self, id: &str) -> Vec<Value> {
        let (status, body) = raw(&self.socket, "GET", &format!("/v1/runs/{id}/events"), None)
            .expect("events request");
        assert_eq!(status, 200);
        ndjson(&body)
    }
}

/// The compile cache entries tests share (`target/tmp/compile-cache`):
/// keyed like every cache entry by the component's content and the engine
/// build, so a stale one is a miss, never wrong code.
pub fn shared_compile_cache() -> PathBuf {
    use std::os::unix::fs::DirBuilderExt;
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("compile-cache");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .expect("create the shared compile cache");
    dir
}

/// A response body that never ends (`GET /v1/events`), read as it comes:
/// a thread decodes it into JSON lines and hands them over a channel, so
/// the test waits for each with a timeout. Dropping it closes the
/// connection.
pub struct EventStream {
    lines: std::sync::mpsc::Receiver<Value>,
    conn: UnixStream,
    /// Every line received so far, in order.
    pub seen: Vec<Value>,
}

impl EventStream {
    /// Sends `GET path` and checks for a 200; the lines then arrive in the
    /// background.
    pub fn open(socket: &Path, path: &str) -> EventStream {
        let mut conn = UnixStream::connect(socket)
            .unwrap_or_else(|e| panic!("connect {}: {e}", socket.display()));
        let head = format!(
            "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nAccept: */*\r\n\r\n"
        );
        conn.write_all(head.as_bytes()).expect("send request");
        let mut reader = BufReader::new(conn.try_clone().expect("clone stream"));
        // The head comes at once; only the body waits for events.
        conn.set_read_timeout(Some(Duration::from_secs(60)))
            .expect("read timeout");
        let mut status_line = String::new();
        reader.read_line(&mut status_line).expect("status line");
        assert!(
            status_line.split_whitespace().nth(1) == Some("200"),
            "GET {path}: {status_line}"
        );
        let mut chunked = false;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).expect("header");
            let line = line.trim_end().to_ascii_lowercase();
            if line.is_empty() {
                break;
            }
            if line.starts_with("transfer-encoding:") && line.contains("chunked") {
                chunked = true;
            }
        }
        // From here the reader blocks for as long as no event comes.
        conn.set_read_timeout(None).expect("read timeout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut pending = Vec::new();
            let mut deliver = |bytes: &[u8]| -> bool {
                pending.extend_from_slice(bytes);
                while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = pending.drain(..=end).collect();
                    let text = String::from_utf8_lossy(&line);
                    if text.trim().is_empty() {
                        continue;
                    }
                    let value: Value = serde_json::from_str(text.trim())
                        .unwrap_or_else(|e| panic!("bad event line {text:?}: {e}"));
                    if tx.send(value).is_err() {
                        return false;
                    }
                }
                true
            };
            loop {
                let chunk = if chunked {
                    let mut size = String::new();
                    match reader.read_line(&mut size) {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {}
                    }
                    let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    let mut chunk = vec![0; n + 2];
                    if reader.read_exact(&mut chunk).is_err() {
                        return;
                    }
                    chunk.truncate(n);
                    chunk
                } else {
                    let mut buf = vec![0; 8192];
                    match reader.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            buf.truncate(n);
                            buf
                        }
                    }
                };
                if !deliver(&chunk) {
                    return;
                }
            }
        });
        EventStream {
            lines: rx,
            conn,
            seen: Vec::new(),
        }
    }

    /// The next line, if one comes within `within`.
    pub fn next(&mut self, within: Duration) -> Option<Value> {
        let line = self.lines.recv_timeout(within).ok()?;
        self.seen.push(line.clone());
        Some(line)
    }

    /// Reads until a line matches `want` and returns it; panics after
    /// `within` with what was seen.
    pub fn wait_for(&mut self, within: Duration, want: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next(left) {
                Some(line) if want(&line) => return line,
                Some(_) => {}
                None => panic!(
                    "no matching event within {within:?}; seen: {:#?}",
                    self.seen
                ),
            }
        }
    }

    /// Reads whatever comes for `period` (whether or not lines keep coming).
    pub fn drain_for(&mut self, period: Duration) {
        let until = Instant::now() + period;
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            if self.next(left).is_none() {
                break;
            }
        }
    }
}

impl Drop for EventStream {
    fn drop(&mut self) {
        let _ = self.conn.shutdown(std::net::Shutdown::Both);
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            // SIGTERM so that the daemon removes its sandboxes.
            // SAFETY: kill has no memory-safety preconditions.
            unsafe {
                libc::kill(child.id() as i32, libc::SIGTERM);
            }
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub fn ndjson(body: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(body)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad event line {l:?}: {e}")))
        .collect()
}

/// One request, JSON body parsed (`Value::Null` for an empty body).
pub fn request(socket: &Path, method: &str, path: &str, body: Option<&[u8]>) -> (u16, Value) {
    let (status, bytes) = raw(socket, method, path, body)
        .unwrap_or_else(|e| panic!("{method} {path} over {}: {e}", socket.display()));
    let value = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            panic!(
                "{method} {path}: body is not JSON ({e}): {}",
                String::from_utf8_lossy(&bytes)
            )
        })
    };
    (status, value)
}

/// HTTP/1.1 with `Connection: close`: status and the de-chunked body.
pub fn raw(
    socket: &Path,
    method: &str,
    path: &str,
    body: Option<&[u8]>,
) -> std::io::Result<(u16, Vec<u8>)> {
    agentd::testkit::uds_http::request(socket, method, path, body)
}
