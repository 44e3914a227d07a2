//! `scripts/install.sh` into a temporary prefix, state folder and
//! configuration (the user layout, no service), then `agentd doctor` and
//! `agentd run manus` through a daemon started from the installed files, and
//! the script run again: idempotent, and an edited configuration is kept.
//!
//! The script is given the binary cargo built for the tests (`--binary`) so
//! that the suite does not build agentd a second time in release mode; the
//! plugins, Docker and the images are its own steps, as for a user.

mod common;

use std::path::Path;
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

fn install(l: &Layout) -> Output {
    let out = Command::new(repo_root().join("scripts/install.sh"))
        .arg("--user")
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
        .output()
        .expect("run scripts/install.sh");
    assert_eq!(
        out.status.code(),
        Some(0),
        "install.sh failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
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
