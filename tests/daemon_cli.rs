//! The `agentd` CLI against the real daemon: every command over the socket,
//! exit codes matching `run --local`, and the message when no daemon runs.

use crate::common;

use std::process::{Command, Output};
use std::time::Duration;

use agentd::testkit::{FakeLlm, Reply};
use common::daemon::Daemon;

const AGENTS: &str = "\n[agents.echoer]\nstrategy = \"toolcall\"\ntools = [\"echo\", \"terminate\"]\nmax_steps = 3\n";

fn cli(d: &Daemon, args: &[&str]) -> Output {
    d.cli(args)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_command_works_against_the_daemon() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "greet",
        [
            Reply::call("echo", r#"{"text":"hello from echo"}"#),
            Reply::terminate(),
        ],
    );
    llm.push_for("as json", [Reply::terminate()]);
    llm.push_for(
        "never ends",
        [
            Reply::call("echo", r#"{"text":"1"}"#),
            Reply::call("echo", r#"{"text":"2"}"#),
            Reply::call("echo", r#"{"text":"3"}"#),
        ],
    );
    llm.push_for(
        "detached",
        [Reply::Delayed(
            Duration::from_secs(30),
            Box::new(Reply::terminate()),
        )],
    );
    let d = tokio::task::block_in_place(|| Daemon::start(&llm, AGENTS));
    tokio::task::block_in_place(|| {
        // run: follows, prints the result, exits 0.
        let out = cli(&d, &["run", "echoer", "greet"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert!(
            text(&out.stdout).contains("Step 1"),
            "{}",
            text(&out.stdout)
        );
        let progress = text(&out.stderr);
        assert!(progress.contains("step 1/3"), "{progress}");
        assert!(progress.contains("echo"), "{progress}");

        // --json prints the record.
        let out = cli(&d, &["run", "--json", "echoer", "as json"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let record: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json record");
        assert_eq!(record["outcome"], "finished");
        let json_id = record["id"].as_str().expect("id").to_string();

        // max_steps has the same exit code as with --local.
        let out = cli(&d, &["run", "echoer", "never ends"]);
        assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));

        // --detach prints the id and returns while the run goes on.
        let out = cli(&d, &["run", "--detach", "echoer", "detached"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let detached = text(&out.stdout).trim().to_string();
        assert_eq!(detached.len(), 32, "{detached}");
        let (_, v) = d.get(&format!("/v1/runs/{detached}"));
        assert_eq!(v["state"], "running", "{v}");

        // runs lists them, newest first.
        let out = cli(&d, &["runs"]);
        assert_eq!(out.status.code(), Some(0));
        let listing = text(&out.stdout);
        assert!(listing.contains(&detached[..12]), "{listing}");
        assert!(listing.contains("max_steps"), "{listing}");

        // show renders the transcript.
        let out = cli(&d, &["show", &json_id]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert!(
            text(&out.stdout).contains("as json"),
            "{}",
            text(&out.stdout)
        );

        // logs prints the events; --json the raw lines.
        let out = cli(&d, &["logs", "--json", &json_id]);
        assert_eq!(out.status.code(), Some(0));
        let lines = common::daemon::ndjson(&out.stdout);
        assert_eq!(lines.last().expect("events")["type"], "run_ended");

        // cancel ends the detached run; logs -f then returns with its end.
        let out = cli(&d, &["cancel", &detached]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let out = cli(&d, &["logs", "-f", &detached]);
        assert_eq!(out.status.code(), Some(0));
        assert!(text(&out.stdout).contains("cancelled") || text(&out.stderr).contains("cancelled"));
        assert_eq!(
            d.wait_run(&detached, Duration::from_secs(10))["outcome"],
            "cancelled"
        );
        let out = cli(&d, &["cancel", &detached]);
        assert_eq!(out.status.code(), Some(1));
        assert!(
            text(&out.stderr).contains("already ended"),
            "{}",
            text(&out.stderr)
        );

        for (cmd, needle) in [
            ("agents", "echoer"),
            ("plugins", "toolcall"),
            ("status", "0.1.0"),
        ] {
            let out = cli(&d, &[cmd]);
            assert_eq!(out.status.code(), Some(0), "{cmd}: {}", text(&out.stderr));
            assert!(
                text(&out.stdout).contains(needle),
                "{cmd}: {}",
                text(&out.stdout)
            );
        }
        let out = cli(&d, &["status", "--json"]);
        let status: serde_json::Value = serde_json::from_slice(&out.stdout).expect("status json");
        assert_eq!(status["accepting_runs"], true);

        // An unknown agent: the daemon's message, exit 2 as with --local.
        let out = cli(&d, &["run", "nobody", "hi"]);
        assert_eq!(out.status.code(), Some(2));
        assert!(
            text(&out.stderr).contains("unknown agent"),
            "{}",
            text(&out.stderr)
        );
        // So is an empty request, refused by the daemon as by --local.
        let out = cli(&d, &["run", "echoer", " "]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
        assert!(text(&out.stderr).contains("must not be empty"));
    });
}

#[test]
fn no_daemon_means_a_clear_message_and_exit_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("absent.sock");
    for args in [vec!["status"], vec!["run", "toolcall", "hi"], vec!["runs"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_agentd"))
            .arg("--socket")
            .arg(&socket)
            .args(&args)
            .env_remove("AGENTD_CONFIG")
            .output()
            .expect("run the CLI");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(
            text(&out.stderr).trim(),
            format!(
                "agentd: cannot connect to agentd at {}: is the service running?",
                socket.display()
            )
        );
    }
}

/// The model's and tools' text is printed for people without its escape
/// sequences (they would set the window title, write the clipboard, clear
/// the screen); `--json` keeps it exact.
#[tokio::test(flavor = "multi_thread")]
async fn model_and_tool_text_reach_the_terminal_without_escape_sequences() {
    const NASTY: &str = "\u{1b}]0;owned\u{7}\u{1b}]52;c;ZWNobyBvd25lZA==\u{7}\u{1b}[2J";
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "nasty",
        [
            Reply::Calls {
                content: Some(format!("{NASTY}thinking")),
                calls: vec![(
                    "echo".into(),
                    serde_json::json!({ "text": format!("{NASTY}echoed") }).to_string(),
                )],
            },
            Reply::terminate(),
        ],
    );
    let d = tokio::task::block_in_place(|| Daemon::start(&llm, AGENTS));
    tokio::task::block_in_place(|| {
        let clean = |what: &str, out: &Output, want: &str| {
            assert_eq!(out.status.code(), Some(0), "{what}: {}", text(&out.stderr));
            let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
            assert!(
                !all.contains('\u{1b}') && !all.contains('\u{7}'),
                "{what} printed an escape sequence: {all:?}"
            );
            assert!(all.contains(want), "{what}: {all}");
        };
        let out = cli(&d, &["run", "echoer", "nasty"]);
        clean("run", &out, "echoed");
        clean("run (its progress)", &out, "thinking");
        let (_, list) = d.get("/v1/runs");
        let id = list["runs"][0]["id"].as_str().expect("id").to_string();
        clean("show", &cli(&d, &["show", &id]), "echoed");
        clean("logs", &cli(&d, &["logs", &id]), "echoed");

        // --json: the exact text, escapes included.
        let out = cli(&d, &["show", "--json", &id]);
        let record: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        let exact = record["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .any(|m| m["content"].as_str() == Some(&format!("{NASTY}thinking")));
        assert!(exact, "show --json changed the model's text: {record}");
        let out = cli(&d, &["logs", "--json", &id]);
        let exact = text(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .any(|e| {
                e["output"]
                    .as_str()
                    .is_some_and(|o| o.contains(&format!("{NASTY}echoed")))
            });
        assert!(
            exact,
            "logs --json changed the tool's text: {}",
            text(&out.stdout)
        );
    });
}
