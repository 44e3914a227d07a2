//! Files in and out of runs through the daemon, in real Docker sandboxes:
//! `POST /v1/runs` `files` and `agentd run --file` write into the work
//! dir before the first step; `[agents.X] keep_files` copies the matching
//! files out on every ending (globs, the `keep_limit` cap, symlinks not
//! followed, an erroring run), served by `GET /v1/runs/{id}/files[/PATH]`
//! and `agentd files`, pruned with the run, and carried into a resumed run.
//! Needs a Docker engine (scripts/ensure-docker.sh).

use crate::common;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use agentd::testkit::{FakeLlm, Reply};
use common::daemon::{raw, Daemon};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(120);

/// `keeper` keeps Python files anywhere, `out/` and `data/`; `capped`
/// keeps every `.dat` file up to 1000 bytes.
const AGENTS: &str = "history_days = 1\n\n\
    [agents.keeper]\nstrategy = \"toolcall\"\ntools = [\"bash\", \"terminate\"]\nmax_steps = 5\n\
    keep_files = [\"**/*.py\", \"out/**\", \"data/**\"]\n\n\
    [agents.capped]\nstrategy = \"toolcall\"\ntools = [\"bash\", \"terminate\"]\nmax_steps = 5\n\
    keep_files = [\"*.dat\"]\nkeep_limit = 1000\n\n\
    [agents.onestep]\nstrategy = \"toolcall\"\ntools = [\"bash\", \"terminate\"]\nmax_steps = 1\n\
    keep_files = [\"*.txt\"]\n";

fn bash(command: &str) -> Reply {
    Reply::call("bash", &json!({ "command": command }).to_string())
}

fn cli(d: &Daemon, args: &[&str]) -> Output {
    d.cli(args)
}

/// What the run's tools answered, in order.
fn tool_outputs(record: &Value) -> Vec<String> {
    record["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn kept_paths(record: &Value) -> Vec<String> {
    let mut paths: Vec<String> = record["files"]["kept"]
        .as_array()
        .unwrap_or_else(|| panic!("no kept files: {record}"))
        .iter()
        .map(|k| k["path"].as_str().expect("path").to_string())
        .collect();
    paths.sort();
    paths
}

fn create(d: &Daemon, body: Value) -> String {
    let (status, v) = d.post("/v1/runs", &body.to_string());
    assert_eq!(status, 201, "{v}");
    v["id"].as_str().expect("id").to_string()
}

fn download(d: &Daemon, id: &str, path: &str) -> (u16, Vec<u8>) {
    raw(
        &d.socket,
        "GET",
        &format!("/v1/runs/{id}/files/{path}"),
        None,
    )
    .expect("download")
}

fn artifacts(d: &Daemon) -> std::path::PathBuf {
    d.state_dir.join("artifacts")
}

#[tokio::test(flavor = "multi_thread")]
async fn files_sent_with_the_run_are_in_the_work_dir_before_the_first_step() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "read the inputs",
        [
            bash("cat in/a.txt; echo; od -An -tx1 b.bin"),
            Reply::terminate(),
        ],
    );
    let d = tokio::task::block_in_place(|| Daemon::start(&llm, AGENTS));
    tokio::task::block_in_place(|| {
        let id = create(
            &d,
            json!({
                "agent": "keeper",
                "request": "read the inputs",
                "files": {
                    "in/a.txt": "hello from the client",
                    "b.bin": {"content": "AAEC/w==", "encoding": "base64"},
                },
            }),
        );
        let record = d.wait_run(&id, WAIT);
        assert_eq!(record["outcome"], "finished", "{record}");
        let out = &tool_outputs(&record)[0];
        assert!(out.contains("hello from the client"), "{out}");
        assert!(out.contains("00 01 02 ff"), "{out}");

        // Paths that would leave the work dir, and bad base64, are refused
        // before any run is made, naming the file.
        for (path, content) in [
            ("../up.txt", json!("x")),
            ("/etc/evil", json!("x")),
            ("ok.bin", json!({"content": "%%%", "encoding": "base64"})),
        ] {
            let body = json!({"agent": "keeper", "request": "never", "files": {path: content}});
            let (status, v) = d.post("/v1/runs", &body.to_string());
            assert_eq!(status, 400, "{v}");
            assert_eq!(v["error"]["code"], "bad_request", "{v}");
            let message = v["error"]["message"].as_str().expect("message");
            assert!(message.contains(path), "{message}");
        }
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn kept_files_follow_the_globs_never_follow_symlinks_and_download_by_api_and_cli() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "make files",
        [
            bash(
                "mkdir -p out/deep sub && echo 'print(1)' > a.py && echo 'print(2)' > sub/b.py \
                 && echo report > out/deep/r.txt && echo not-kept > c.txt \
                 && ln -s /etc/passwd link.py && ln -s /etc out/etc",
            ),
            Reply::terminate(),
        ],
    );
    let d = tokio::task::block_in_place(|| Daemon::start(&llm, AGENTS));
    tokio::task::block_in_place(|| {
        let id = d.create_run("keeper", "make files");
        let record = d.wait_run(&id, WAIT);
        assert_eq!(record["outcome"], "finished", "{record}");
        assert_eq!(
            kept_paths(&record),
            ["a.py", "out/deep/r.txt", "sub/b.py"],
            "{record}"
        );
        let files = &record["files"];
        assert_eq!(files["capped"], false, "{files}");
        let mut skipped: Vec<&str> = files["skipped"]
            .as_array()
            .expect("skipped")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        skipped.sort();
        assert_eq!(skipped, ["link.py", "out/etc"], "{files}");

        // On disk: the matching regular files, no link, nothing else.
        let dir = artifacts(&d).join(&id);
        assert_eq!(
            std::fs::read_to_string(dir.join("a.py")).expect("a.py"),
            "print(1)\n"
        );
        assert!(std::fs::symlink_metadata(dir.join("link.py")).is_err());
        assert!(std::fs::symlink_metadata(dir.join("out/etc")).is_err());
        assert!(!dir.join("c.txt").exists());

        // The API: the list, a download, and 404s for what was not kept.
        let (status, list) = d.get(&format!("/v1/runs/{id}/files"));
        assert_eq!(status, 200, "{list}");
        assert_eq!(list.as_array().expect("list").len(), 3, "{list}");
        assert!(list
            .as_array()
            .expect("list")
            .contains(&json!({"path": "sub/b.py", "size": 9})));
        assert_eq!(download(&d, &id, "sub/b.py"), (200, b"print(2)\n".to_vec()));
        for missing in ["c.txt", "link.py", "out/etc/passwd", "..%2F..%2Fhistory.db"] {
            assert_eq!(download(&d, &id, missing).0, 404, "{missing}");
        }
        assert_eq!(d.get("/v1/runs/no-such-run/files").0, 404);

        // The CLI: list, one file to stdout, all into a folder.
        let out = cli(&d, &["files", &id]);
        assert!(out.status.success(), "{out:?}");
        let listed = String::from_utf8_lossy(&out.stdout);
        for path in ["a.py", "sub/b.py", "out/deep/r.txt"] {
            assert!(listed.contains(path), "{listed}");
        }
        let out = cli(&d, &["files", &id, "out/deep/r.txt"]);
        assert!(out.status.success(), "{out:?}");
        assert_eq!(out.stdout, b"report\n");
        let into = tempfile::tempdir().expect("tempdir");
        let to = into.path().to_str().expect("utf-8");
        let out = cli(&d, &["files", &id, "-o", to]);
        assert!(out.status.success(), "{out:?}");
        assert_eq!(
            std::fs::read(into.path().join("sub/b.py")).expect("b.py"),
            b"print(2)\n"
        );
        assert!(into.path().join("out/deep/r.txt").is_file());
        assert!(!into.path().join("c.txt").exists());
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn cli_file_goes_in_and_comes_back_out_byte_for_byte() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "copy it",
        [
            bash("cp data/in.bin data/copy.bin && cp notes.txt data/notes.txt"),
            Reply::terminate(),
        ],
    );
    let d = tokio::task::block_in_place(|| Daemon::start(&llm, AGENTS));
    tokio::task::block_in_place(|| {
        let local = tempfile::tempdir().expect("tempdir");
        let binary: Vec<u8> = (0..=255u8).cycle().take(3000).collect();
        let bin = local.path().join("blob.bin");
        std::fs::write(&bin, &binary).expect("write");
        let notes = local.path().join("notes.txt");
        std::fs::write(&notes, "plain text\n").expect("write");
        let out = cli(
            &d,
            &[
                "run",
                "--json",
                "--file",
                &format!("{}:data/in.bin", bin.display()),
                "--file",
                notes.to_str().expect("utf-8"),
                "keeper",
                "copy it",
            ],
        );
        assert!(out.status.success(), "{out:?}");
        let record: Value = serde_json::from_slice(&out.stdout).expect("json");
        let id = record["id"].as_str().expect("id");
        assert_eq!(
            kept_paths(&record),
            ["data/copy.bin", "data/in.bin", "data/notes.txt"],
            "{record}"
        );
        assert_eq!(download(&d, id, "data/copy.bin"), (200, binary));
        assert_eq!(
            download(&d, id, "data/notes.txt"),
            (200, b"plain text\n".to_vec())
        );

        // A REMOTE that leaves the work dir is refused by the CLI itself.
        let out = cli(
            &d,
            &[
                "run",
                "--file",
                &format!("{}:../x", bin.display()),
                "keeper",
                "never",
            ],
        );
        assert_eq!(out.status.code(), Some(2), "{out:?}");
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn the_size_cap_leaves_files_out_and_the_record_says_which() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "fill up",
        [
            bash(
                "head -c 600 /dev/zero > a.dat && head -c 600 /dev/zero > b.dat \
                 && echo small > c.dat",
            ),
            Reply::terminate(),
        ],
    );
    let d = tokio::task::block_in_place(|| Daemon::start(&llm, AGENTS));
    tokio::task::block_in_place(|| {
        let id = d.create_run("capped", "fill up");
        let record = d.wait_run(&id, WAIT);
        let files = &record["files"];
        assert_eq!(files["capped"], true, "{files}");
        assert_eq!(files["limit"], 1000, "{files}");
        assert_eq!(files["left_out_count"], 1, "{files}");
        assert_eq!(files["left_out"].as_array().expect("left_out").len(), 1);
        assert!(files["bytes"].as_u64().expect("bytes") <= 1000, "{files}");
        assert_eq!(kept_paths(&record).len(), 2, "{files}");
        let left_out = files["left_out"][0].as_str().expect("name");
        assert!(!artifacts(&d).join(&id).join(left_out).exists());
        // `agentd files` says the list is incomplete.
        let out = cli(&d, &["files", &id]);
        assert!(out.status.success(), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("left out by keep_limit"), "{err}");
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_that_errors_still_keeps_its_files() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "then fail",
        [
            bash("echo 'x = 1' > work.py"),
            Reply::error(400, "the model refuses"),
        ],
    );
    let d = tokio::task::block_in_place(|| Daemon::start(&llm, AGENTS));
    tokio::task::block_in_place(|| {
        let id = d.create_run("keeper", "then fail");
        let record = d.wait_run(&id, WAIT);
        assert_eq!(record["outcome"], "error", "{record}");
        assert_eq!(kept_paths(&record), ["work.py"], "{record}");
        assert_eq!(download(&d, &id, "work.py"), (200, b"x = 1\n".to_vec()));
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn a_resumed_run_starts_with_the_kept_files_unless_told_not_to() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "take notes",
        [
            // The first run's one step; it then ends `max_steps`.
            bash("echo 'remember this' > notes.txt"),
            // The resumed run's step.
            bash("cat notes.txt"),
            // The run resumed without files.
            bash("cat notes.txt || echo no-notes"),
        ],
    );
    let d = tokio::task::block_in_place(|| Daemon::start(&llm, AGENTS));
    tokio::task::block_in_place(|| {
        let first = d.create_run("onestep", "take notes");
        let record = d.wait_run(&first, WAIT);
        assert_eq!(record["outcome"], "max_steps", "{record}");
        assert_eq!(kept_paths(&record), ["notes.txt"], "{record}");

        let (status, v) = d.post(&format!("/v1/runs/{first}/resume"), "");
        assert_eq!(status, 201, "{v}");
        let second = v["id"].as_str().expect("id").to_string();
        let record = d.wait_run(&second, WAIT);
        let outputs = tool_outputs(&record);
        assert!(
            outputs.last().expect("output").contains("remember this"),
            "{record}"
        );

        let (status, v) = d.post(&format!("/v1/runs/{second}/resume"), r#"{"files": false}"#);
        assert_eq!(status, 201, "{v}");
        let third = v["id"].as_str().expect("id").to_string();
        let record = d.wait_run(&third, WAIT);
        let outputs = tool_outputs(&record);
        assert!(
            outputs.last().expect("output").contains("no-notes"),
            "{record}"
        );
    });
}

/// Makes the run `id` look `days` old, as pruning sees it.
fn age_run(state_dir: &Path, id: &str, days: i64) {
    let db = rusqlite::Connection::open(state_dir.join("history.db")).expect("open history");
    let changed = db
        .execute(
            "UPDATE runs SET ended_at_ms = ended_at_ms - ?1 WHERE id = ?2",
            rusqlite::params![days * 86_400_000, id],
        )
        .expect("age run");
    assert_eq!(changed, 1, "run {id} aged");
}

#[tokio::test(flavor = "multi_thread")]
async fn pruning_a_run_removes_its_kept_files() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "keep one",
        [bash("echo 'print(3)' > keep.py"), Reply::terminate()],
    );
    llm.push_for(
        "keep another",
        [bash("echo 'print(4)' > keep.py"), Reply::terminate()],
    );
    let mut d = tokio::task::block_in_place(|| Daemon::start(&llm, AGENTS));
    tokio::task::block_in_place(|| {
        let old = d.create_run("keeper", "keep one");
        assert_eq!(kept_paths(&d.wait_run(&old, WAIT)), ["keep.py"]);
        assert!(artifacts(&d).join(&old).join("keep.py").is_file());
        // Ended before the restart too, but recent: it must survive the
        // prune that takes the old one.
        let recent = d.create_run("keeper", "keep another");
        assert_eq!(kept_paths(&d.wait_run(&recent, WAIT)), ["keep.py"]);
        d.stop();
        // Two days old, past `history_days = 1`.
        age_run(&d.state_dir, &old, 2);
        d.spawn(&[]);

        // The daemon pruned the old run at start, and its files with it.
        assert_eq!(d.get(&format!("/v1/runs/{old}")).0, 404);
        assert!(!artifacts(&d).join(&old).exists());
        assert!(!artifacts(&d).join(format!("{old}.json")).exists());
        assert_eq!(d.get(&format!("/v1/runs/{old}/files")).0, 404);
        // The recent run's are untouched.
        assert_eq!(
            download(&d, &recent, "keep.py"),
            (200, b"print(4)\n".to_vec())
        );
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_interrupted_by_a_shutdown_keeps_its_files() {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "write then wait",
        [bash("echo 'v = 1' > late.py"), bash("sleep 600")],
    );
    let mut d = tokio::task::block_in_place(|| Daemon::start(&llm, AGENTS));
    tokio::task::block_in_place(|| {
        let id = d.create_run("keeper", "write then wait");
        // The second call has started: the first, which wrote the file,
        // has completed.
        let deadline = std::time::Instant::now() + WAIT;
        while d
            .events_so_far(&id)
            .iter()
            .filter(|e| e["type"] == "tool_call")
            .count()
            < 2
        {
            assert!(std::time::Instant::now() < deadline, "never called twice");
            std::thread::sleep(Duration::from_millis(50));
        }
        d.stop();
        d.spawn(&[]);
        let record = d.wait_run(&id, WAIT);
        assert_eq!(record["outcome"], "interrupted", "{record}");
        assert_eq!(kept_paths(&record), ["late.py"], "{record}");
        assert_eq!(download(&d, &id, "late.py"), (200, b"v = 1\n".to_vec()));
    });
}
