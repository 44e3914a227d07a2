//! `agentd doctor`, spawned against real prerequisites: a daemon, the
//! Docker engine and the `agentd-sandbox` image (scripts/ensure-docker.sh,
//! scripts/build-images.sh), the fake LLM on loopback, and the built
//! plugins. Each test breaks one prerequisite and checks, through `--json`,
//! that exactly its check (and those that depend on it) fails with a fix,
//! and that the exit status says so.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use agentd::testkit::FakeLlm;
use common::built_plugins;
use common::daemon::{config_text_for, Daemon};
use serde_json::Value;

/// What `manus` runs on (src/config/bundled.rs).
const MANUS_PLUGINS: &[(&str, &str)] = &[
    ("toolcall.wasm", "toolcall"),
    ("bash.wasm", "bash"),
    ("python_execute.wasm", "python_execute"),
    ("str_replace_editor.wasm", "str_replace_editor"),
    ("terminate.wasm", "terminate"),
];

/// The checks, in their documented order.
const CHECKS: [&str; 7] = [
    "config", "state", "plugins", "docker", "image", "llm", "daemon",
];

/// `dir`, created, holding manus's plugins but those named in `without`.
fn manus_plugins_in(dir: &Path, without: &[&str]) {
    std::fs::create_dir_all(dir).expect("mkdir");
    for (file, component) in MANUS_PLUGINS {
        if !without.contains(component) {
            let from = built_plugins().join(format!("{component}.wasm"));
            std::fs::copy(&from, dir.join(file))
                .unwrap_or_else(|e| panic!("copy {}: {e}", from.display()));
        }
    }
}

struct Env {
    llm: FakeLlm,
    daemon: Daemon,
    dir: tempfile::TempDir,
}

/// A daemon with manus's plugins on the fake LLM. Its compile cache is the
/// tests' shared one, and the doctor's configuration shares the daemon's
/// state folder, so neither compiles a component twice.
async fn env() -> Env {
    let llm = FakeLlm::start().await.expect("fake LLM");
    let daemon = Daemon::start_sharing_compile_cache(&llm, MANUS_PLUGINS, "");
    Env {
        llm,
        daemon,
        dir: tempfile::tempdir().expect("tempdir"),
    }
}

struct Doctor {
    code: Option<i32>,
    report: Value,
    stderr: String,
}

impl Doctor {
    fn check(&self, name: &str) -> &Value {
        self.report["checks"]
            .as_array()
            .and_then(|checks| checks.iter().find(|c| c["name"] == name))
            .unwrap_or_else(|| panic!("no check {name}: {}", self.report))
    }

    /// Asserts that check `name`'s `field` ("detail" or "fix") holds each
    /// of `needles`.
    fn says(&self, name: &str, field: &str, needles: &[&str]) {
        let check = self.check(name);
        let text = check[field].as_str().unwrap_or_default();
        for needle in needles {
            assert!(
                text.contains(needle),
                "{name} {field} lacks {needle:?}: {check}"
            );
        }
    }

    fn failing(&self) -> Vec<String> {
        self.report["checks"]
            .as_array()
            .expect("checks")
            .iter()
            .filter(|c| c["ok"] != true)
            .map(|c| c["name"].as_str().expect("name").to_string())
            .collect()
    }

    /// Exactly `names` fail, each with a fix (and only they have one), and
    /// the exit status is 1 (0 when `names` is empty).
    fn assert_fails(&self, names: &[&str]) {
        assert_eq!(self.failing(), names, "{:#}\n{}", self.report, self.stderr);
        for c in self.report["checks"].as_array().expect("checks") {
            let fix = c["fix"].as_str();
            if c["ok"] == true {
                assert!(c["fix"].is_null(), "{c}");
            } else {
                assert!(fix.is_some_and(|f| !f.trim().is_empty()), "{c}");
            }
            assert!(c["detail"].as_str().is_some_and(|d| !d.is_empty()), "{c}");
        }
        assert_eq!(self.report["ok"], names.is_empty(), "{}", self.report);
        let expected = if names.is_empty() { 0 } else { 1 };
        assert_eq!(
            self.code,
            Some(expected),
            "{:#}\n{}",
            self.report,
            self.stderr
        );
    }
}

impl Env {
    /// A configuration for the doctor: the daemon's folders and socket, the
    /// fake LLM and the full sandbox image, then `edit`ed to break one thing.
    fn config(&self, edit: impl FnOnce(String) -> String) -> PathBuf {
        let text = config_text_for(
            &self.llm.base_url(),
            "fake",
            self.daemon.dir.path(),
            self.daemon.plugins.path(),
            "",
        )
        .replace("agentd-sandbox-tiny:latest", "agentd-sandbox:latest");
        let path = self.dir.path().join("doctor.toml");
        std::fs::write(&path, edit(text)).expect("write config");
        path
    }

    /// [`config`](Self::config) with `[daemon] plugins_dir` set to `dir`.
    fn config_with_plugins(&self, dir: &Path) -> PathBuf {
        let line = format!("plugins_dir = \"{}\"", self.daemon.plugins.path().display());
        self.config(|t| t.replace(&line, &format!("plugins_dir = \"{}\"", dir.display())))
    }

    fn command(&self, config: &Path) -> Command {
        self.command_at(config, &self.daemon.socket)
    }

    fn command_at(&self, config: &Path, socket: &Path) -> Command {
        let mut cmd = common::scrubbed(env!("CARGO_BIN_EXE_agentd"));
        cmd.arg("--socket")
            .arg(socket)
            .arg("doctor")
            .arg("--config")
            .arg(config);
        cmd
    }

    fn doctor_with(&self, config: &Path, env: &[(&str, &Path)]) -> Doctor {
        let mut cmd = self.command(config);
        for (k, v) in env {
            cmd.env(k, v);
        }
        Self::json(cmd)
    }

    fn doctor_at(&self, config: &Path, socket: &Path) -> Doctor {
        Self::json(self.command_at(config, socket))
    }

    fn json(mut cmd: Command) -> Doctor {
        let out = cmd.arg("--json").output().expect("spawn agentd doctor");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}): {}\n{stderr}",
                String::from_utf8_lossy(&out.stdout)
            )
        });
        let names: Vec<&str> = report["checks"]
            .as_array()
            .expect("checks")
            .iter()
            .filter_map(|c| c["name"].as_str())
            .collect();
        assert_eq!(names, CHECKS, "{report}");
        Doctor {
            code: out.status.code(),
            report,
            stderr,
        }
    }

    fn doctor(&self, config: &Path) -> Doctor {
        self.doctor_with(config, &[])
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn everything_in_place_passes_and_exits_0() {
    let e = env().await;
    let config = e.config(|t| t);
    let d = e.doctor(&config);
    d.assert_fails(&[]);
    assert_eq!(d.check("config")["detail"], config.display().to_string());
    d.says("plugins", "detail", &["1 strategy and 4 tools load"]);
    d.says("docker", "detail", &["Docker", "API"]);
    d.says("image", "detail", &["bash", "python3"]);
    d.says("llm", "detail", &["serves fake"]);
    d.says("daemon", "detail", &["running at"]);

    // The text report: a ✓ line each, then the verdict.
    let out = e.command(&config).output().expect("spawn");
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), CHECKS.len() + 1, "{text}");
    for (line, name) in lines.iter().zip(CHECKS) {
        assert!(line.starts_with(&format!("✓ {name} ")), "{text}");
    }
    assert_eq!(
        lines.last().copied(),
        Some("all checks passed: agentd run manus is ready")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn no_engine_socket_fails_docker_and_skips_the_image() {
    let e = env().await;
    let config = e.config(|t| t + "docker_host = \"unix:///nonexistent.sock\"\n");
    let d = e.doctor(&config);
    d.assert_fails(&["docker", "image"]);
    d.says("docker", "detail", &["unix:///nonexistent.sock"]);
    d.says("docker", "fix", &["ensure-docker.sh", "docker_host"]);
    d.says("image", "detail", &["skipped: no Docker engine"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_image_or_one_without_python_fails_the_image_check() {
    let e = env().await;
    let config = e.config(|t| t.replace("agentd-sandbox:latest", "agentd-no-such-image:none"));
    let d = e.doctor(&config);
    d.assert_fails(&["image"]);
    d.says(
        "image",
        "detail",
        &["agentd-no-such-image:none is not on the Docker engine"],
    );
    d.says("image", "fix", &["scripts/build-images.sh"]);

    // The tiny test image has a shell and no python3.
    let config = e.config(|t| t.replace("agentd-sandbox:latest", "agentd-sandbox-tiny:latest"));
    let d = e.doctor(&config);
    d.assert_fails(&["image"]);
    d.says("image", "detail", &["has no", "python3"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unusable_plugins_folder_fails_the_plugins_check() {
    use std::os::unix::fs::PermissionsExt;
    let e = env().await;

    // Writable by everyone: the daemon's trust check refuses it.
    let open = e.dir.path().join("open-plugins");
    manus_plugins_in(&open, &[]);
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let d = e.doctor(&e.config_with_plugins(&open));
    d.assert_fails(&["plugins"]);
    d.says("plugins", "detail", &["writable by everyone"]);
    assert_eq!(
        d.check("plugins")["fix"],
        format!("chmod go-w {}, and check what is in it", open.display())
    );

    // A regular file where the folder should be.
    let file = e.dir.path().join("plugins-file");
    std::fs::write(&file, "not a folder").expect("write");
    let d = e.doctor(&e.config_with_plugins(&file));
    d.assert_fails(&["plugins"]);
    d.says("plugins", "detail", &["is not a directory"]);

    // Below a regular file: the OS says ENOTDIR.
    let d = e.doctor(&e.config_with_plugins(&file.join("plugins")));
    d.assert_fails(&["plugins"]);
    d.says("plugins", "detail", &["Not a directory"]);
    d.says("plugins", "fix", &["plugins_dir"]);

    // A folder without one of manus's tools.
    let partial = e.dir.path().join("partial-plugins");
    manus_plugins_in(&partial, &["bash"]);
    let d = e.doctor(&e.config_with_plugins(&partial));
    d.assert_fails(&["plugins"]);
    d.says(
        "plugins",
        "detail",
        &["manus needs bash, which does not load"],
    );
    d.says("plugins", "fix", &["scripts/build-plugins.sh --install"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_empty_plugins_folder_passes_only_with_a_bundle_to_fill_it() {
    let e = env().await;
    let empty = e.dir.path().join("empty-plugins");
    std::fs::create_dir(&empty).expect("mkdir");
    let config = e.config_with_plugins(&empty);

    let d = e.doctor(&config);
    d.assert_fails(&["plugins"]);
    d.says("plugins", "fix", &["scripts/install.sh"]);

    let bundle = e.dir.path().join("bundle");
    manus_plugins_in(&bundle, &[]);
    let d = e.doctor_with(&config, &[("AGENTD_BUNDLED_PLUGINS", &bundle)]);
    d.assert_fails(&[]);
    d.says(
        "plugins",
        "detail",
        &[&format!(
            "is empty: the daemon will install 5 bundled plugins from {}",
            bundle.display()
        )],
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_llm_endpoint_that_is_down_or_lacks_the_model_fails_the_llm_check() {
    let e = env().await;
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let down = format!("http://127.0.0.1:{closed}/v1");
    let config = e.config(|t| t.replace(&e.llm.base_url(), &down));
    let d = e.doctor(&config);
    d.assert_fails(&["llm"]);
    d.says("llm", "detail", &[&format!("{down} is unreachable: ")]);
    assert_eq!(
        d.check("llm")["fix"],
        "start the server, or correct [llm] base_url"
    );

    // The text form: the failing line, its fix under it, the count.
    let out = e.command(&config).output().expect("spawn");
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("✗ llm     {down} is unreachable: "))
            && text.contains("\n  fix: start the server, or correct [llm] base_url\n")
            && text.ends_with("1 problem\n"),
        "{text}"
    );

    // Up, but serving other models.
    e.llm.set_models(&["other-a", "other-b"]);
    let config = e.config(|t| t);
    let d = e.doctor(&config);
    d.assert_fails(&["llm"]);
    d.says(
        "llm",
        "detail",
        &["model fake is not served (it has: other-a, other-b)"],
    );
    d.says("llm", "fix", &["[llm] model"]);

    // A server that lists nothing cannot say the model is missing.
    e.llm.set_models(&[]);
    let d = e.doctor(&config);
    d.assert_fails(&[]);
    d.says("llm", "detail", &["does not list models"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_typo_in_the_configuration_fails_config_with_its_line() {
    let e = env().await;
    let config = e.config(|t| t.replacen("[llm]\nmodel", "[llm]\nmodle", 1));
    let d = e.doctor(&config);
    assert_eq!(d.code, Some(1), "{}", d.report);
    assert_eq!(d.report["ok"], false);
    let c = d.check("config");
    assert_eq!(c["ok"], false, "{c}");
    d.says(
        "config",
        "detail",
        &[&format!("{}:2: ", config.display()), "`modle`"],
    );
    assert_eq!(c["fix"], format!("correct {}:2", config.display()));
    // The rest ran on the built-in defaults, and say so.
    for name in &CHECKS[1..] {
        d.says(
            name,
            "detail",
            &["(checked with the built-in defaults: the configuration does not load)"],
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn no_daemon_fails_the_daemon_check_and_an_unknown_agent_is_bad_usage() {
    let e = env().await;
    let config = e.config(|t| t);
    let socket = e.dir.path().join("none.sock");
    let d = e.doctor_at(&config, &socket);
    d.assert_fails(&["daemon"]);
    assert_eq!(
        d.check("daemon")["detail"],
        format!("no daemon at {}", socket.display())
    );
    d.says("daemon", "fix", &["agentd serve", "systemctl"]);

    let out = e
        .command(&config)
        .args(["--agent", "nobody"])
        .output()
        .expect("spawn");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unknown agent `nobody`"), "{stderr}");
}

impl Env {
    /// `agentd doctor --json` with no `--config`, as a user on a system
    /// install types it: `home` stands in for a home with no configuration
    /// of its own, so a check run here would use the built-in defaults.
    fn plain_doctor(&self, home: &Path, extra: &[&str]) -> (Option<i32>, Value, String) {
        let mut cmd = common::scrubbed(env!("CARGO_BIN_EXE_agentd"));
        cmd.arg("--socket")
            .arg(&self.daemon.socket)
            .arg("doctor")
            .arg("--json")
            .args(extra)
            .env("HOME", home);
        for var in [
            "XDG_CONFIG_HOME",
            "XDG_STATE_HOME",
            "XDG_RUNTIME_DIR",
            "STATE_DIRECTORY",
        ] {
            cmd.env_remove(var);
        }
        let out = cmd.output().expect("spawn agentd doctor");
        let report = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        (
            out.status.code(),
            report,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

fn check<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .and_then(|checks| checks.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("no check {name}: {report}"))
}

/// Without `--config`, a daemon that answers runs the checks as itself
/// (`GET /v1/doctor`): its configuration, its folders, its image. On a
/// system install that is the only view that can pass (the CLI user can
/// read neither the configuration nor the state, and root does not own
/// the plugins folder); here it shows as the daemon's own folders and its
/// image (the tests' tiny one, without python3), which the defaults this
/// process would use know nothing of.
#[tokio::test(flavor = "multi_thread")]
async fn without_config_a_running_daemon_runs_the_checks_as_itself() {
    let e = env().await;
    let home = e.dir.path().join("home");
    std::fs::create_dir_all(&home).expect("mkdir");

    let (code, report, stderr) = e.plain_doctor(&home, &[]);
    assert_eq!(code, Some(1), "{report:#}\n{stderr}");
    let names: Vec<&str> = report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, CHECKS, "{report}");
    let daemon_config = e.daemon.config.display().to_string();
    assert_eq!(
        check(&report, "config")["detail"],
        format!("{daemon_config} (the daemon's)"),
        "{report:#}"
    );
    let plugins = check(&report, "plugins");
    assert_eq!(plugins["ok"], true, "{plugins}");
    assert!(
        plugins["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with(&e.daemon.plugins.path().display().to_string())),
        "{plugins}"
    );
    let image = check(&report, "image");
    assert_eq!(image["ok"], false, "{image}");
    assert!(
        image["detail"]
            .as_str()
            .is_some_and(|d| d.contains("agentd-sandbox-tiny:latest has no")),
        "{image}"
    );
    for name in ["state", "docker", "llm", "daemon"] {
        assert_eq!(check(&report, name)["ok"], true, "{report:#}");
    }
    assert!(
        check(&report, "daemon")["detail"]
            .as_str()
            .is_some_and(|d| d.contains("the checks above are the daemon's own")),
        "{report:#}"
    );

    // A typo saved into the daemon's file since it loaded it: the daemon
    // still runs, but its next reload would fail, and the doctor says so.
    let text = std::fs::read_to_string(&e.daemon.config).expect("config");
    std::fs::write(&e.daemon.config, format!("typo_key = 1\n{text}")).expect("config");
    let (code, report, _) = e.plain_doctor(&home, &[]);
    assert_eq!(code, Some(1), "{report:#}");
    let config = check(&report, "config");
    assert_eq!(config["ok"], false, "{config}");
    for needle in [
        "the daemon runs an earlier version of",
        "a reload or restart would fail",
        "typo_key",
    ] {
        assert!(
            config["detail"]
                .as_str()
                .is_some_and(|d| d.contains(needle)),
            "{needle}: {config}"
        );
    }
    assert_eq!(config["fix"], format!("correct {daemon_config}:1"));
    std::fs::write(&e.daemon.config, text).expect("config");

    // --local checks in this process: the built-in defaults, whose plugins
    // folder (under HOME, or /var/lib/agentd for root) is not the daemon's.
    let (_, report, _) = e.plain_doctor(&home, &["--local"]);
    assert_eq!(
        check(&report, "config")["detail"],
        "none: built-in defaults",
        "{report:#}"
    );
    let plugins = check(&report, "plugins")["detail"]
        .as_str()
        .unwrap_or_default();
    assert!(!plugins.is_empty(), "{report:#}");
    assert!(
        !plugins.contains(&e.daemon.plugins.path().display().to_string()),
        "{report:#}"
    );

    // An agent the daemon does not know is bad usage, in its words.
    let (code, _, stderr) = e.plain_doctor(&home, &["--agent", "nobody"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("unknown agent `nobody`"), "{stderr}");
}

/// Root checking a system install while its daemon is down: the state and
/// plugins folders belong to the service's user (systemd's
/// `StateDirectory=` chowns them), and the daemon, running as that user,
/// trusts them. The doctor judges them as that user too, instead of
/// failing the folder with a needless "chown it to root". As another
/// user, a folder someone else owns still fails.
#[tokio::test(flavor = "multi_thread")]
async fn root_judges_the_plugins_folder_as_the_state_folders_owner() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test checks what root sees on a system install: run the suite as root (CI does)"
    );
    const SERVICE_UID: u32 = 65534;
    let e = env().await;
    let state = e.dir.path().join("service-state");
    let plugins = state.join("plugins");
    manus_plugins_in(&plugins, &[]);
    for path in [&state, &plugins] {
        std::os::unix::fs::chown(path, Some(SERVICE_UID), Some(SERVICE_UID)).expect("chown");
        std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("chmod");
    }
    for entry in std::fs::read_dir(&plugins).expect("ls") {
        let path = entry.expect("entry").path();
        std::os::unix::fs::chown(&path, Some(SERVICE_UID), Some(SERVICE_UID)).expect("chown");
    }
    let state_line = format!(
        "state_dir = \"{}\"",
        e.daemon.dir.path().join("state").display()
    );
    let plugins_line = format!("plugins_dir = \"{}\"", e.daemon.plugins.path().display());
    let config = e.config(|t| {
        t.replace(&state_line, &format!("state_dir = \"{}\"", state.display()))
            .replace(
                &plugins_line,
                &format!("plugins_dir = \"{}\"", plugins.display()),
            )
    });
    let d = e.doctor(&config);
    d.assert_fails(&[]);
    d.says(
        "plugins",
        "detail",
        &[
            "1 strategy and 4 tools load",
            &format!("judged as uid {SERVICE_UID}, the state folder's owner"),
        ],
    );

    // A state folder of root's own: root judges as root, and a plugins
    // folder another user owns is refused, as the daemon would.
    std::os::unix::fs::chown(&state, Some(0), Some(0)).expect("chown");
    let d = e.doctor(&config);
    d.assert_fails(&["plugins"]);
    d.says(
        "plugins",
        "detail",
        &[&format!("belongs to uid {SERVICE_UID}")],
    );
}
