//! `scripts/install.sh` into a temporary prefix, state folder and
//! configuration (the user layout, no service), then `agentd doctor` and
//! `agentd run manus` through a daemon started from the installed files, and
//! the script run again: idempotent, and an edited configuration is kept.
//!
//! The script is given the binary cargo built for the tests (`--binary`) so
//! that the suite does not build agentd a second time in release mode; the
//! plugins, Docker and the images are its own steps, as for a user.
//!
//! Then what CI can check of the rest without systemd and without root
//! making a difference (`--no-docker`): the plugins go where `agentd paths`
//! says for an existing configuration, a configuration that does not load
//! stops the script with agentd's message, paths with spaces and quotes
//! work end to end, the user unit is quoted and restarted on an upgrade
//! (a `systemctl` stand-in records the calls), and a system service with
//! another state folder is refused before anything is built or installed.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use agentd::testkit::{FakeLlm, Reply};
use common::daemon::Daemon;
use common::repo_root;
use serde_json::Value;

struct Layout {
    _root: tempfile::TempDir,
    prefix: std::path::PathBuf,
    state: std::path::PathBuf,
    config: std::path::PathBuf,
    socket: std::path::PathBuf,
}

fn layout() -> Layout {
    let root = tempfile::tempdir().expect("tempdir");
    Layout {
        prefix: root.path().join("prefix"),
        state: root.path().join("state"),
        config: root.path().join("etc/agentd.toml"),
        socket: root.path().join("agentd.sock"),
        _root: root,
    }
}

/// `install.sh --user` into `l`, with the test binary; more arguments and
/// the environment are the caller's.
fn install_cmd(l: &Layout) -> Command {
    let mut cmd = Command::new(repo_root().join("scripts/install.sh"));
    cmd.arg("--user")
        .arg("--binary")
        .arg(env!("CARGO_BIN_EXE_agentd"))
        .arg("--prefix")
        .arg(&l.prefix)
        .arg("--state-dir")
        .arg(&l.state)
        .arg("--config")
        .arg(&l.config)
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("SUDO_USER")
        .env_remove("AGENTD_CONFIG");
    cmd
}

fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("run scripts/install.sh");
    assert_eq!(
        out.status.code(),
        Some(0),
        "install.sh failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn install(l: &Layout) -> Output {
    run_ok(&mut install_cmd(l))
}

fn installed_agentd(l: &Layout, args: &[&str]) -> Output {
    Command::new(l.prefix.join("bin/agentd"))
        .args(args)
        .env_remove("AGENTD_CONFIG")
        .env_remove("AGENTD_SOCKET")
        .env_remove("AGENTD_BUNDLED_PLUGINS")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .output()
        .expect("spawn the installed agentd")
}

/// The starter configuration pointed at `llm`, as a user edits it: the
/// commented example lines made real, and the socket in the test's folder.
fn edit_config(config: &Path, llm: &FakeLlm, socket: &Path) -> String {
    let text = std::fs::read_to_string(config).expect("starter config");
    let base = text
        .lines()
        .find(|l| l.starts_with("# base_url = "))
        .unwrap_or_else(|| panic!("no commented base_url in the starter config:\n{text}"))
        .to_string();
    let model = text
        .lines()
        .find(|l| l.starts_with("# model = "))
        .unwrap_or_else(|| panic!("no commented model in the starter config:\n{text}"))
        .to_string();
    let edited = text
        .replace(&base, &format!("base_url = \"{}\"", llm.base_url()))
        .replace(&model, "model = \"fake\"\nretry_backoff_ms = 10")
        .replace(
            "[daemon]\n",
            &format!("[daemon]\nsocket = \"{}\"\n", socket.display()),
        );
    std::fs::write(config, &edited).expect("edit config");
    edited
}

#[tokio::test(flavor = "multi_thread")]
async fn install_then_doctor_then_manus_then_install_again_keeping_the_config() {
    let l = layout();
    let out = tokio::task::block_in_place(|| install(&l));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!(
            "wrote a starter configuration {}",
            l.config.display()
        )),
        "{stdout}"
    );
    assert!(stdout.contains("next: "), "{stdout}");
    assert!(l.prefix.join("bin/agentd").is_file());
    for name in [
        "toolcall",
        "bash",
        "python_execute",
        "str_replace_editor",
        "terminate",
    ] {
        let bundled = l.prefix.join(format!("lib/agentd/plugins/{name}.wasm"));
        assert!(bundled.is_file(), "{} missing", bundled.display());
        let served = l.state.join(format!("plugins/{name}.wasm"));
        assert!(served.is_file(), "{} missing", served.display());
    }
    let starter = std::fs::read_to_string(&l.config).expect("config");
    assert!(
        starter.contains(&format!("state_dir = \"{}\"", l.state.display())),
        "{starter}"
    );

    let llm = FakeLlm::start().await.expect("fake llm");
    let edited = edit_config(&l.config, &llm, &l.socket);
    let mut d = Daemon::installed(&l.prefix.join("bin/agentd"), &l.config, &l.socket, &l.state);
    tokio::task::block_in_place(|| d.spawn(&[]));

    let config = l.config.display().to_string();
    let socket = l.socket.display().to_string();
    let out = tokio::task::block_in_place(|| {
        installed_agentd(
            &l,
            &["doctor", "--json", "--config", &config, "--socket", &socket],
        )
    });
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "doctor --json: {e}\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(report["ok"], true, "{report:#}");
    assert_eq!(out.status.code(), Some(0), "{report:#}");

    llm.push_all([
        Reply::call(
            "bash",
            r#"{"command": "echo installed-and-running > /workspace/proof.txt && cat /workspace/proof.txt"}"#,
        ),
        Reply::terminate(),
    ]);
    let out = tokio::task::block_in_place(|| {
        installed_agentd(
            &l,
            &[
                "run",
                "--json",
                "--socket",
                &socket,
                "manus",
                "Write proof.txt and show it.",
            ],
        )
    });
    let record: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "run --json: {e}\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(record["outcome"], "finished", "{record:#}");
    assert_eq!(out.status.code(), Some(0));
    let outputs: Vec<&str> = record["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert!(
        outputs.iter().any(|o| o.contains("installed-and-running")),
        "{outputs:?}"
    );
    d.stop();

    // Again: the same files, the edited configuration untouched.
    let out = tokio::task::block_in_place(|| install(&l));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!(
            "kept the existing configuration {}",
            l.config.display()
        )),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read_to_string(&l.config).expect("config"),
        edited,
        "install.sh changed an edited configuration"
    );
    let mut d = Daemon::installed(&l.prefix.join("bin/agentd"), &l.config, &l.socket, &l.state);
    tokio::task::block_in_place(|| d.spawn(&[]));
    llm.push(Reply::terminate());
    let out = tokio::task::block_in_place(|| {
        installed_agentd(
            &l,
            &["run", "--json", "--socket", &socket, "manus", "again"],
        )
    });
    let record: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert_eq!(record["outcome"], "finished", "{record:#}");
}

/// The bundled plugins' names, as the script installs them.
fn bundled() -> Vec<String> {
    let out = Command::new(repo_root().join("scripts/build-plugins.sh"))
        .arg("--list-bundled")
        .output()
        .expect("build-plugins.sh --list-bundled");
    let names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert!(names.iter().any(|n| n == "toolcall"), "{names:?}");
    names
}

/// `agentd paths --config FILE` of the installed binary, as a map.
fn paths(l: &Layout) -> std::collections::BTreeMap<String, String> {
    let config = l.config.to_str().expect("utf-8 path").to_string();
    let out = installed_agentd(l, &["paths", "--config", &config]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "agentd paths: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A TOML basic string of `p`.
fn toml_path(p: &Path) -> String {
    let s = p.to_str().expect("utf-8 path");
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// A folder of stand-ins for `names`: each appends `NAME ARGS` to `log`
/// and exits with `code`.
fn stand_ins(dir: &Path, log: &Path, names: &[&str], code: i32) -> PathBuf {
    let bin = dir.join("stand-ins");
    std::fs::create_dir_all(&bin).expect("stand-ins folder");
    for name in names {
        let file = bin.join(name);
        std::fs::write(
            &file,
            format!(
                "#!/bin/sh\necho \"{name} $*\" >> '{}'\nexit {code}\n",
                log.display()
            ),
        )
        .expect("stand-in");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755))
            .expect("chmod stand-in");
    }
    bin
}

fn path_with(first: &Path) -> std::ffi::OsString {
    let mut dirs = vec![first.to_path_buf()];
    dirs.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(dirs).expect("PATH")
}

#[test]
fn an_existing_configs_plugins_dir_gets_the_bundled_plugins() {
    let l = layout();
    let elsewhere = l._root.path().join("elsewhere");
    std::fs::create_dir_all(l.config.parent().expect("config folder")).expect("mkdir");
    let text = format!(
        "[daemon]\nstate_dir = {}\nplugins_dir = {}\n",
        toml_path(&l.state),
        toml_path(&elsewhere)
    );
    std::fs::write(&l.config, &text).expect("config");

    let out = run_ok(install_cmd(&l).arg("--no-docker"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!(
            "installed the bundled plugins into {}",
            elsewhere.display()
        )),
        "{stdout}"
    );
    for name in bundled() {
        let there = elsewhere.join(format!("{name}.wasm"));
        assert!(there.is_file(), "{} missing\n{stdout}", there.display());
    }
    assert!(
        !l.state.join("plugins").exists(),
        "the plugins went to <state>/plugins as well\n{stdout}"
    );
    assert_eq!(
        std::fs::read_to_string(&l.config).expect("config"),
        text,
        "install.sh changed an existing configuration"
    );
}

#[test]
fn a_config_that_does_not_load_stops_the_script_with_agentds_message() {
    let l = layout();
    std::fs::create_dir_all(l.config.parent().expect("config folder")).expect("mkdir");
    std::fs::write(
        &l.config,
        format!(
            "[daemon]\nstate_dir = {}\nplugins_dri = \"/nowhere\"\n",
            toml_path(&l.state)
        ),
    )
    .expect("config");

    let out = install_cmd(&l)
        .arg("--no-docker")
        .output()
        .expect("run scripts/install.sh");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("{}:3", l.config.display())) && stderr.contains("plugins_dri"),
        "no FILE:LINE message from agentd:\n{stderr}"
    );
    assert!(
        !l.state.join("plugins").exists(),
        "plugins installed for a configuration that does not load"
    );
}

#[test]
fn paths_with_spaces_and_quotes_work_end_to_end() {
    let root = tempfile::tempdir().expect("tempdir");
    let odd = root.path().join("my \"agentd\" files");
    let l = Layout {
        prefix: odd.join("pre fix"),
        state: odd.join("state \"dir\""),
        config: odd.join("etc \"x\"/agentd.toml"),
        socket: odd.join("agentd.sock"),
        _root: root,
    };
    let out = run_ok(
        install_cmd(&l)
            .arg("--no-docker")
            .args(["--model", "qwen\"2.5\\7b"])
            .env("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1"),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The starter configuration loads, and says the state folder is ours.
    let p = paths(&l);
    assert_eq!(p["config"], l.config.display().to_string(), "{p:?}");
    assert_eq!(p["state_dir"], l.state.display().to_string(), "{p:?}");
    assert_eq!(
        p["plugins_dir"],
        l.state.join("plugins").display().to_string(),
        "{p:?}"
    );
    for name in bundled() {
        let served = l.state.join(format!("plugins/{name}.wasm"));
        assert!(served.is_file(), "{} missing\n{stdout}", served.display());
    }
    let starter = std::fs::read_to_string(&l.config).expect("config");
    assert!(
        starter.contains("model = \"qwen\\\"2.5\\\\7b\""),
        "{starter}"
    );
}

#[test]
fn the_user_unit_is_quoted_and_an_upgrade_restarts_it() {
    let root = tempfile::tempdir().expect("tempdir");
    let odd = root.path().join("a b%c$d");
    let l = Layout {
        prefix: odd.join("prefix"),
        state: odd.join("state"),
        config: odd.join("etc \"q\"/agentd.toml"),
        socket: odd.join("agentd.sock"),
        _root: root,
    };
    let log = l._root.path().join("systemctl.log");
    let bin = stand_ins(l._root.path(), &log, &["systemctl"], 0);
    let xdg = l._root.path().join("xdg");
    run_ok(
        install_cmd(&l)
            .args(["--no-docker", "--service"])
            .env("PATH", path_with(&bin))
            .env("XDG_CONFIG_HOME", &xdg),
    );
    let calls = std::fs::read_to_string(&log).expect("systemctl log");
    assert_eq!(
        calls.lines().collect::<Vec<_>>(),
        [
            "systemctl --user show-environment",
            "systemctl --user daemon-reload",
            "systemctl --user enable agentd.service",
            "systemctl --user try-restart agentd.service",
            "systemctl --user start agentd.service",
        ],
        "{calls}"
    );
    let unit = std::fs::read_to_string(xdg.join("systemd/user/agentd.service")).expect("unit");
    let exec = unit
        .lines()
        .find(|l| l.starts_with("ExecStart="))
        .expect("ExecStart=");
    // The program: quoted, % doubled ($ is not expanded there); the
    // argument: quoted, " and \ escaped, % and $ doubled.
    let program = l.prefix.join("bin/agentd").display().to_string();
    let config = l.config.display().to_string();
    assert_eq!(
        exec,
        format!(
            "ExecStart=\"{}\" serve --config \"{}\"",
            program.replace('%', "%%"),
            config
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('%', "%%")
                .replace('$', "$$")
        ),
        "{unit}"
    );
}

#[test]
fn a_user_service_without_a_user_manager_is_refused_before_building() {
    let l = layout();
    let log = l._root.path().join("calls.log");
    let bin = stand_ins(l._root.path(), &log, &["systemctl", "cargo", "rustup"], 1);
    let out = install_cmd(&l)
        .args(["--no-docker", "--service"])
        .env("PATH", path_with(&bin))
        .output()
        .expect("run scripts/install.sh");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("loginctl enable-linger"), "{stderr}");
    let calls = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(calls, "systemctl --user show-environment\n");
    assert!(!l.prefix.exists() && !l.config.exists());
}

#[test]
fn a_system_service_with_another_state_dir_is_refused_before_anything() {
    let l = layout();
    let log = l._root.path().join("calls.log");
    // Whatever the script would build, install or change with: none of
    // them may run (and if the refusal were missing, they fail at once
    // instead of changing this host).
    let bin = stand_ins(
        l._root.path(),
        &log,
        &[
            "cargo",
            "rustup",
            "docker",
            "systemctl",
            "groupadd",
            "useradd",
            "usermod",
            "chgrp",
            "chown",
            "chmod",
            "install",
            "mkdir",
            "mv",
            "runuser",
            "sudo",
            "getent",
        ],
        97,
    );
    let out = Command::new(repo_root().join("scripts/install.sh"))
        .arg("--system")
        .arg("--service")
        .arg("--no-docker")
        .arg("--binary")
        .arg(env!("CARGO_BIN_EXE_agentd"))
        .arg("--prefix")
        .arg(&l.prefix)
        .arg("--state-dir")
        .arg(&l.state)
        .arg("--config")
        .arg(&l.config)
        .env("PATH", path_with(&bin))
        .env_remove("SUDO_USER")
        .output()
        .expect("run scripts/install.sh");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("--state-dir {}", l.state.display()))
            && stderr.contains("ProtectSystem=strict")
            && stderr.contains("Drop --state-dir")
            && stderr.contains("without --service"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&log).unwrap_or_default(), "");
    assert!(!l.prefix.exists() && !l.config.exists() && !l.state.exists());
}
