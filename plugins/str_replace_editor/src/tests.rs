//! The editor against an in-memory sandbox. The expected texts of edits
//! were produced by OpenManus's own code on the same inputs.

use super::*;
use agentd_tool_sdk::ErrorCode;
use serde_json::json;
use std::collections::BTreeSet;

/// A sandbox whose file system is two maps. `run` understands exactly the
/// two commands the editor sends, and unquotes their path as `sh` would,
/// which checks the quoting too.
#[derive(Default)]
struct FakeSandbox {
    files: BTreeMap<String, Vec<u8>>,
    dirs: BTreeSet<String>,
    commands: Vec<String>,
    writes: Vec<String>,
    fail_writes: Option<Error>,
}

impl FakeSandbox {
    fn with_file(mut self, path: &str, text: &str) -> Self {
        self.files
            .insert(path.to_string(), text.as_bytes().to_vec());
        self.with_parents(path)
    }

    fn with_dir(mut self, path: &str) -> Self {
        self.dirs.insert(path.to_string());
        self.with_parents(path)
    }

    fn with_parents(mut self, path: &str) -> Self {
        let mut parent = path;
        while let Some((dir, _)) = parent.rsplit_once('/') {
            if dir.is_empty() {
                break;
            }
            self.dirs.insert(dir.to_string());
            parent = dir;
        }
        self
    }

    fn text(&self, path: &str) -> &str {
        std::str::from_utf8(&self.files[path]).expect("UTF-8")
    }

    fn kind(&self, path: &str) -> &'static str {
        if self.dirs.contains(path) || path == "/" {
            "directory"
        } else if self.files.contains_key(path) {
            "file"
        } else {
            "missing"
        }
    }

    /// `find PATH -maxdepth 2 ! -path '*/.*'`, sorted.
    fn find(&self, path: &str) -> String {
        let prefix = format!("{}/", path.trim_end_matches('/'));
        let mut found = vec![path.to_string()];
        for entry in self.dirs.iter().chain(self.files.keys()) {
            let Some(relative) = entry.strip_prefix(&prefix) else {
                continue;
            };
            let parts: Vec<&str> = relative.split('/').collect();
            if parts.len() <= 2 && !parts.iter().any(|part| part.starts_with('.')) {
                found.push(entry.clone());
            }
        }
        found.sort();
        found.iter().map(|line| format!("{line}\n")).collect()
    }
}

impl Sandbox for FakeSandbox {
    fn run(&mut self, command: &str) -> Result<CommandOutput, Error> {
        self.commands.push(command.to_string());
        let stdout = if let Some(rest) = command.strip_prefix("p=") {
            let (path, tail) = unquote(rest).expect("a quoted path");
            assert_eq!(tail, format!("; {PROBE_SCRIPT}"));
            format!("{}\n", self.kind(&path))
        } else if let Some(rest) = command.strip_prefix("find ") {
            let (path, tail) = unquote(rest).expect("a quoted path");
            assert_eq!(tail, format!(" {FIND_ARGS}"));
            self.find(&path)
        } else {
            panic!("unexpected command: {command}");
        };
        Ok(CommandOutput {
            stdout,
            stderr: String::new(),
            exit_code: 0,
            timed_out: false,
            truncated: false,
        })
    }

    fn read_file(&mut self, path: &str) -> Result<Vec<u8>, Error> {
        self.files.get(path).cloned().ok_or_else(|| {
            Error::new(
                ErrorCode::SandboxFailed,
                format!("cannot read `{path}`: no such file"),
            )
        })
    }

    fn write_file(&mut self, path: &str, contents: &[u8]) -> Result<(), Error> {
        if let Some(error) = &self.fail_writes {
            return Err(error.clone());
        }
        assert!(!self.dirs.contains(path), "wrote over a directory");
        self.writes.push(path.to_string());
        self.files.insert(path.to_string(), contents.to_vec());
        Ok(())
    }
}

/// Reads one `sh` word made of single-quoted parts joined by `\'`, as
/// [`shell_quote`] writes them; returns it and what follows.
fn unquote(text: &str) -> Option<(String, &str)> {
    let mut word = String::new();
    let mut rest = text;
    loop {
        rest = rest.strip_prefix('\'')?;
        let end = rest.find('\'')?;
        word.push_str(&rest[..end]);
        rest = &rest[end + 1..];
        match rest.strip_prefix(r"\'") {
            Some(after) => {
                word.push('\'');
                rest = after;
            }
            None => return Some((word, rest)),
        }
    }
}

const PATH: &str = "/w/f.txt";
const TEN: &str = "alpha\nbravo\ncharlie\ndelta\necho\nfoxtrot\ngolf\nhotel\nindia\njuliet\n";

fn call(editor: &mut Editor, sandbox: &mut FakeSandbox, arguments: Value) -> Result<String, Error> {
    editor.invoke(sandbox, &arguments.to_string())
}

fn ok(text: &str) -> Result<String, Error> {
    Ok(text.to_string())
}

fn failed(text: &str) -> Result<String, Error> {
    Err(Error::failed(text))
}

fn invalid(text: &str) -> Result<String, Error> {
    Err(Error::invalid_input(text))
}

fn ten() -> (Editor, FakeSandbox) {
    (Editor::new(), FakeSandbox::default().with_file(PATH, TEN))
}

#[test]
fn view_shows_the_file_as_cat_n() {
    let mut editor = Editor::new();
    let mut sandbox = FakeSandbox::default().with_file(PATH, "a\n\tb\n");
    let result = call(
        &mut editor,
        &mut sandbox,
        json!({"command": "view", "path": PATH}),
    );
    // Tabs are kept, unlike OpenManus's `expandtabs()`.
    assert_eq!(
        result,
        ok(
            "Here's the result of running `cat -n` on /w/f.txt:\n     1\ta\n     2\t\tb\n     3\t\n"
        )
    );
}

#[test]
fn view_range_selects_lines() {
    let (mut editor, mut sandbox) = ten();
    let mut view = |range: Value| {
        call(
            &mut editor,
            &mut sandbox,
            json!({"command": "view", "path": PATH, "view_range": range}),
        )
    };
    let head = "Here's the result of running `cat -n` on /w/f.txt:\n";
    assert_eq!(
        view(json!([2, 3])),
        Ok(format!("{head}     2\tbravo\n     3\tcharlie\n"))
    );
    assert_eq!(
        view(json!([10, -1])),
        Ok(format!("{head}    10\tjuliet\n    11\t\n"))
    );
    assert_eq!(view(json!([11, 11])), Ok(format!("{head}    11\t\n")));
    // Python's `if view_range:`: empty means the whole file.
    let whole = view(json!([])).expect("whole file");
    assert!(
        whole.starts_with(&format!("{head}     1\talpha\n")),
        "{whole}"
    );
    assert_eq!(view(Value::Null), Ok(whole));
}

#[test]
fn bad_view_ranges_get_openmanus_messages() {
    let (mut editor, mut sandbox) = ten();
    let mut view = |range: Value| {
        call(
            &mut editor,
            &mut sandbox,
            json!({"command": "view", "path": PATH, "view_range": range}),
        )
    };
    let two_integers = "Invalid `view_range`. It should be a list of two integers.";
    for range in [
        json!([1]),
        json!([1, 2, 3]),
        json!([1.5, 2]),
        json!("1-2"),
        json!([1, "2"]),
    ] {
        assert_eq!(view(range.clone()), invalid(two_integers), "{range}");
    }
    assert_eq!(
        view(json!([0, 3])),
        invalid(
            "Invalid `view_range`: [0, 3]. Its first element `0` should be within the range of lines of the file: [1, 11]"
        )
    );
    assert_eq!(
        view(json!([12, -1])),
        invalid(
            "Invalid `view_range`: [12, -1]. Its first element `12` should be within the range of lines of the file: [1, 11]"
        )
    );
    assert_eq!(
        view(json!([2, 12])),
        invalid(
            "Invalid `view_range`: [2, 12]. Its second element `12` should be smaller than the number of lines in the file: `11`"
        )
    );
    assert_eq!(
        view(json!([5, 3])),
        invalid(
            "Invalid `view_range`: [5, 3]. Its second element `3` should be larger or equal than its first `5`"
        )
    );
    assert_eq!(
        view(json!([5, -2])),
        invalid(
            "Invalid `view_range`: [5, -2]. Its second element `-2` should be larger or equal than its first `5`"
        )
    );
}

#[test]
fn view_lists_a_directory_two_levels_deep_without_hidden_items() {
    let mut editor = Editor::new();
    let mut sandbox = FakeSandbox::default()
        .with_file("/w/a.txt", "")
        .with_dir("/w/empty")
        .with_file("/w/sub/b.txt", "")
        .with_file("/w/sub/deep/c.txt", "")
        .with_file("/w/.git/config", "")
        .with_file("/w/sub/.env", "");
    let result = call(
        &mut editor,
        &mut sandbox,
        json!({"command": "view", "path": "/w/"}),
    );
    assert_eq!(
        result,
        ok(
            "Here's the files and directories up to 2 levels deep in /w, excluding hidden items:\n/w\n/w/a.txt\n/w/empty\n/w/sub\n/w/sub/b.txt\n/w/sub/deep\n\n"
        )
    );

    let result = call(
        &mut editor,
        &mut sandbox,
        json!({"command": "view", "path": "/w", "view_range": [1, 2]}),
    );
    assert_eq!(
        result,
        invalid("The `view_range` parameter is not allowed when `path` points to a directory.")
    );
}

#[test]
fn paths_must_be_absolute_and_exist() {
    let (mut editor, mut sandbox) = ten();
    let mut run = |arguments: Value| call(&mut editor, &mut sandbox, arguments);
    assert_eq!(
        run(json!({"command": "view", "path": "w/f.txt"})),
        invalid("The path w/f.txt is not an absolute path")
    );
    assert_eq!(
        run(json!({"command": "view", "path": ""})),
        invalid("The path . is not an absolute path")
    );
    for command in ["view", "str_replace", "insert", "undo_edit"] {
        let arguments = json!({"command": command, "path": "/w/nope", "old_str": "a",
            "insert_line": 0, "new_str": "b"});
        assert_eq!(
            run(arguments),
            failed("The path /w/nope does not exist. Please provide a valid path."),
            "{command}"
        );
    }
    for command in ["str_replace", "insert", "undo_edit"] {
        let arguments = json!({"command": command, "path": "/w", "old_str": "a",
            "insert_line": 0, "new_str": "b"});
        assert_eq!(
            run(arguments),
            failed(
                "The path /w is a directory and only the `view` command can be used on directories"
            ),
            "{command}"
        );
    }
}

#[test]
fn unknown_commands_and_missing_parameters_are_refused_before_any_sandbox_call() {
    let (mut editor, mut sandbox) = ten();
    let mut run = |arguments: Value| call(&mut editor, &mut sandbox, arguments);
    assert_eq!(
        run(json!({"command": "delete", "path": PATH})),
        invalid(
            "Unrecognized command delete. The allowed commands for the str_replace_editor tool are: view, create, str_replace, insert, undo_edit"
        )
    );
    assert_eq!(
        run(json!({"command": "create", "path": "/w/new"})),
        invalid("Parameter `file_text` is required for command: create")
    );
    assert_eq!(
        run(json!({"command": "str_replace", "path": PATH, "new_str": "x"})),
        invalid("Parameter `old_str` is required for command: str_replace")
    );
    assert_eq!(
        run(json!({"command": "str_replace", "path": PATH, "old_str": ""})),
        invalid("Parameter `old_str` must not be empty for command: str_replace")
    );
    assert_eq!(
        run(json!({"command": "insert", "path": PATH, "new_str": "x"})),
        invalid("Parameter `insert_line` is required for command: insert")
    );
    assert_eq!(
        run(json!({"command": "insert", "path": PATH, "insert_line": 1, "new_str": null})),
        invalid("Parameter `new_str` is required for command: insert")
    );
    for arguments in [
        json!({"path": PATH}),
        json!({"command": "view"}),
        json!([1]),
    ] {
        let error = run(arguments.clone()).err();
        assert!(
            matches!(&error, Some(e) if e.code == ErrorCode::InvalidInput),
            "{arguments}: {error:?}"
        );
    }
    assert!(sandbox.commands.is_empty(), "{:?}", sandbox.commands);
}

#[test]
fn create_writes_a_new_file_only() {
    let (mut editor, mut sandbox) = ten();
    let sandbox = &mut sandbox;
    let result = call(
        &mut editor,
        sandbox,
        json!({"command": "create", "path": "/w/it's new.py", "file_text": "print(1)\n"}),
    );
    assert_eq!(result, ok("File created successfully at: /w/it's new.py"));
    assert_eq!(sandbox.text("/w/it's new.py"), "print(1)\n");

    let exists = |path: &str| {
        format!("File already exists at: {path}. Cannot overwrite files using command `create`.")
    };
    for path in [PATH, "/w"] {
        let result = call(
            &mut editor,
            sandbox,
            json!({"command": "create", "path": path, "file_text": "x"}),
        );
        assert_eq!(result, failed(&exists(path)));
    }
    assert_eq!(sandbox.text(PATH), TEN);

    // As in OpenManus, undo after create writes the same text back.
    let result = call(
        &mut editor,
        sandbox,
        json!({"command": "undo_edit", "path": "/w/it's new.py"}),
    );
    assert_eq!(
        result,
        ok(
            "Last edit to /w/it's new.py undone successfully. Here's the result of running `cat -n` on /w/it's new.py:\n     1\tprint(1)\n     2\t\n"
        )
    );
    assert_eq!(sandbox.text("/w/it's new.py"), "print(1)\n");
}

#[test]
fn str_replace_edits_a_unique_match_and_shows_a_snippet() {
    let (mut editor, mut sandbox) = ten();
    let result = call(
        &mut editor,
        &mut sandbox,
        json!({"command": "str_replace", "path": PATH, "old_str": "foxtrot", "new_str": "FOX\nTROT"}),
    );
    assert_eq!(
        result,
        ok(
            "The file /w/f.txt has been edited. Here's the result of running `cat -n` on a snippet of /w/f.txt:\n     2\tbravo\n     3\tcharlie\n     4\tdelta\n     5\techo\n     6\tFOX\n     7\tTROT\n     8\tgolf\n     9\thotel\n    10\tindia\n    11\tjuliet\nReview the changes and make sure they are as expected. Edit the file again if necessary."
        )
    );
    assert_eq!(
        sandbox.text(PATH),
        "alpha\nbravo\ncharlie\ndelta\necho\nFOX\nTROT\ngolf\nhotel\nindia\njuliet\n"
    );
}

#[test]
fn str_replace_without_new_str_deletes() {
    let (mut editor, mut sandbox) = ten();
    let result = call(
        &mut editor,
        &mut sandbox,
        json!({"command": "str_replace", "path": PATH, "old_str": "bravo\n"}),
    );
    assert_eq!(
        result,
        ok(
            "The file /w/f.txt has been edited. Here's the result of running `cat -n` on a snippet of /w/f.txt:\n     1\talpha\n     2\tcharlie\n     3\tdelta\n     4\techo\n     5\tfoxtrot\n     6\tgolf\nReview the changes and make sure they are as expected. Edit the file again if necessary."
        )
    );
    assert_eq!(
        sandbox.text(PATH),
        "alpha\ncharlie\ndelta\necho\nfoxtrot\ngolf\nhotel\nindia\njuliet\n"
    );
}

#[test]
fn str_replace_refuses_missing_and_repeated_matches() {
    let mut editor = Editor::new();
    let mut sandbox = FakeSandbox::default().with_file(PATH, "x = 1\ny = 2\nx = 1\n\tz\n");
    let mut replace = |old_str: &str| {
        call(
            &mut editor,
            &mut sandbox,
            json!({"command": "str_replace", "path": PATH, "old_str": old_str, "new_str": "q"}),
        )
    };
    assert_eq!(
        replace("x = 1"),
        failed(
            "No replacement was performed. Multiple occurrences of old_str `x = 1` in lines [1, 3]. Please ensure it is unique"
        )
    );
    // Lines where each occurrence starts, so a multi-line one is placed too.
    assert_eq!(
        replace("1\n"),
        failed(
            "No replacement was performed. Multiple occurrences of old_str `1\n` in lines [1, 3]. Please ensure it is unique"
        )
    );
    assert_eq!(
        replace("w = 0"),
        failed(
            "No replacement was performed, old_str `w = 0` did not appear verbatim in /w/f.txt."
        )
    );
    // Tabs are matched as they are, not expanded.
    assert_eq!(
        replace("        z"),
        failed(
            "No replacement was performed, old_str `        z` did not appear verbatim in /w/f.txt."
        )
    );
    assert!(replace("\tz").is_ok());
    assert_eq!(sandbox.text(PATH), "x = 1\ny = 2\nx = 1\nq\n");
    assert_eq!(sandbox.writes.len(), 1);
}

#[test]
fn insert_adds_lines_after_insert_line() {
    let (mut editor, mut sandbox) = ten();
    let result = call(
        &mut editor,
        &mut sandbox,
        json!({"command": "insert", "path": PATH, "insert_line": 2, "new_str": "new1\nnew2"}),
    );
    assert_eq!(
        result,
        ok(
            "The file /w/f.txt has been edited. Here's the result of running `cat -n` on a snippet of the edited file:\n     1\talpha\n     2\tbravo\n     3\tnew1\n     4\tnew2\n     5\tcharlie\n     6\tdelta\n     7\techo\n     8\tfoxtrot\nReview the changes and make sure they are as expected (correct indentation, no duplicate lines, etc). Edit the file again if necessary."
        )
    );
    assert_eq!(
        sandbox.text(PATH),
        "alpha\nbravo\nnew1\nnew2\ncharlie\ndelta\necho\nfoxtrot\ngolf\nhotel\nindia\njuliet\n"
    );
}

#[test]
fn insert_at_the_edges() {
    let (mut editor, mut sandbox) = ten();
    let result = call(
        &mut editor,
        &mut sandbox,
        json!({"command": "insert", "path": PATH, "insert_line": 0, "new_str": "top"}),
    );
    assert_eq!(
        result,
        ok(
            "The file /w/f.txt has been edited. Here's the result of running `cat -n` on a snippet of the edited file:\n     1\ttop\n     2\talpha\n     3\tbravo\n     4\tcharlie\n     5\tdelta\nReview the changes and make sure they are as expected (correct indentation, no duplicate lines, etc). Edit the file again if necessary."
        )
    );

    let (mut editor, mut sandbox) = ten();
    let result = call(
        &mut editor,
        &mut sandbox,
        json!({"command": "insert", "path": PATH, "insert_line": 11, "new_str": "end"}),
    );
    assert_eq!(
        result,
        ok(
            "The file /w/f.txt has been edited. Here's the result of running `cat -n` on a snippet of the edited file:\n     8\thotel\n     9\tindia\n    10\tjuliet\n    11\t\n    12\tend\nReview the changes and make sure they are as expected (correct indentation, no duplicate lines, etc). Edit the file again if necessary."
        )
    );
    // OpenManus counts the empty "line" after the final newline.
    assert!(sandbox.text(PATH).ends_with("juliet\n\nend"));
}

#[test]
fn insert_line_must_be_within_the_file() {
    let (mut editor, mut sandbox) = ten();
    for line in [-1, 12] {
        let result = call(
            &mut editor,
            &mut sandbox,
            json!({"command": "insert", "path": PATH, "insert_line": line, "new_str": "x"}),
        );
        assert_eq!(
            result,
            invalid(&format!(
                "Invalid `insert_line` parameter: {line}. It should be within the range of lines of the file: [0, 11]"
            ))
        );
    }
    assert!(sandbox.writes.is_empty());
}

#[test]
fn undo_edit_reverts_edits_one_at_a_time() {
    let (mut editor, mut sandbox) = ten();
    let sandbox = &mut sandbox;
    let undo = json!({"command": "undo_edit", "path": PATH});
    assert_eq!(
        call(&mut editor, sandbox, undo.clone()),
        failed("No edit history found for /w/f.txt.")
    );

    call(
        &mut editor,
        sandbox,
        json!({"command": "str_replace", "path": PATH, "old_str": "alpha", "new_str": "A"}),
    )
    .expect("first edit");
    call(
        &mut editor,
        sandbox,
        json!({"command": "insert", "path": "/w//f.txt", "insert_line": 0, "new_str": "B"}),
    )
    .expect("second edit");
    assert!(sandbox.text(PATH).starts_with("B\nA\nbravo\n"));

    let result = call(&mut editor, sandbox, undo.clone()).expect("undo");
    assert!(
        result.starts_with("Last edit to /w/f.txt undone successfully. Here's the result of running `cat -n` on /w/f.txt:\n     1\tA\n     2\tbravo\n"),
        "{result}"
    );
    assert!(sandbox.text(PATH).starts_with("A\nbravo\n"));
    call(&mut editor, sandbox, undo.clone()).expect("second undo");
    assert_eq!(sandbox.text(PATH), TEN);
    assert_eq!(
        call(&mut editor, sandbox, undo),
        failed("No edit history found for /w/f.txt.")
    );
}

#[test]
fn a_failed_undo_keeps_the_history() {
    let (mut editor, mut sandbox) = ten();
    call(
        &mut editor,
        &mut sandbox,
        json!({"command": "str_replace", "path": PATH, "old_str": "alpha", "new_str": "A"}),
    )
    .expect("edit");
    let broken = Error::new(
        ErrorCode::SandboxFailed,
        "cannot write `/w/f.txt`: disk full",
    );
    sandbox.fail_writes = Some(broken.clone());
    let undo = json!({"command": "undo_edit", "path": PATH});
    assert_eq!(call(&mut editor, &mut sandbox, undo.clone()), Err(broken));
    sandbox.fail_writes = None;
    assert!(call(&mut editor, &mut sandbox, undo).is_ok());
    assert_eq!(sandbox.text(PATH), TEN);
}

#[test]
fn sandbox_errors_pass_through_and_leave_no_history() {
    let (mut editor, mut sandbox) = ten();
    let down = Error::new(ErrorCode::SandboxUnavailable, "docker is not running");
    sandbox.fail_writes = Some(down.clone());
    let result = call(
        &mut editor,
        &mut sandbox,
        json!({"command": "str_replace", "path": PATH, "old_str": "alpha", "new_str": "A"}),
    );
    assert_eq!(result, Err(down));
    assert!(editor.history.last(PATH).is_none());
}

#[test]
fn text_that_is_not_utf8_is_shown_but_not_edited() {
    let mut editor = Editor::new();
    let mut sandbox = FakeSandbox::default();
    sandbox
        .files
        .insert(PATH.to_string(), b"ok\n\xff\xfe\n".to_vec());
    let result = call(
        &mut editor,
        &mut sandbox,
        json!({"command": "view", "path": PATH}),
    );
    assert_eq!(
        result,
        ok(
            "Here's the result of running `cat -n` on /w/f.txt:\n     1\tok\n     2\t\u{fffd}\u{fffd}\n     3\t\n"
        )
    );
    let result = call(
        &mut editor,
        &mut sandbox,
        json!({"command": "str_replace", "path": PATH, "old_str": "ok", "new_str": "no"}),
    );
    assert_eq!(
        result,
        failed(
            "Failed to read /w/f.txt: it is not UTF-8 text (invalid byte at offset 3), so it cannot be edited with this tool"
        )
    );
    assert!(sandbox.writes.is_empty());
}

#[test]
fn long_output_is_clipped_with_openmanus_note() {
    let mut editor = Editor::new();
    let long = "é".repeat(MAX_RESPONSE_LEN + 10);
    let mut sandbox = FakeSandbox::default().with_file(PATH, &long);
    let result = call(
        &mut editor,
        &mut sandbox,
        json!({"command": "view", "path": PATH}),
    )
    .expect("view");
    let expected = format!(
        "Here's the result of running `cat -n` on /w/f.txt:\n     1\t{}{TRUNCATED_MESSAGE}\n",
        "é".repeat(MAX_RESPONSE_LEN)
    );
    assert_eq!(result, expected);
    assert!(TRUNCATED_MESSAGE.starts_with("<response clipped>"));
}

#[test]
fn history_drops_its_oldest_entries_past_its_limit() {
    let mut history = History::new();
    let big = "x".repeat(HISTORY_LIMIT / 2);
    history.push("/a", format!("1{big}"));
    history.push("/b", format!("2{big}"));
    // Over the limit: the oldest entry (of `/a`) goes.
    assert!(history.last("/a").is_none());
    assert!(history.last("/b").is_some_and(|text| text.starts_with('2')));
    history.push("/b", "3".to_string());
    history.pop("/b");
    assert!(history.last("/b").is_some_and(|text| text.starts_with('2')));
    history.pop("/b");
    assert!(history.last("/b").is_none());
    assert_eq!(history.bytes, 0);
    assert!(history.order.is_empty() && history.edits.is_empty());
}

#[test]
fn paths_are_normalized_like_pathlib() {
    assert_eq!(normalize(""), ".");
    assert_eq!(normalize("/"), "/");
    assert_eq!(normalize("//w/./a//b/"), "/w/a/b");
    assert_eq!(normalize("./a/../b"), "a/../b");
}

#[test]
fn shell_quoting_round_trips() {
    for text in [
        "/w/plain",
        "/w/it's",
        "/w/''",
        "/w/$(rm -rf /) `x` \"y\"\n\\",
    ] {
        let quoted = shell_quote(text);
        assert_eq!(unquote(&quoted), Some((text.to_string(), "")), "{quoted}");
    }
}

#[test]
fn python_lists_and_truthiness() {
    assert_eq!(python_list(&[]), "[]");
    assert_eq!(python_list(&[1, 3]), "[1, 3]");
    for falsy in [
        json!(null),
        json!(false),
        json!(0),
        json!(0.0),
        json!(""),
        json!([]),
        json!({}),
    ] {
        assert!(!truthy(&falsy), "{falsy}");
    }
    for truthy_value in [
        json!(true),
        json!(-1),
        json!("x"),
        json!([0]),
        json!({"a": 0}),
    ] {
        assert!(truthy(&truthy_value), "{truthy_value}");
    }
}

#[test]
fn the_spec_is_openmanus_shaped() {
    let spec = StrReplaceEditor::spec();
    assert_eq!(spec.name, StrReplaceEditor::metadata().name);
    let schema: Value = serde_json::from_str(&spec.parameters).expect("parameters are JSON");
    assert_eq!(schema["required"], json!(["command", "path"]));
    assert_eq!(
        schema["properties"]["command"]["enum"],
        json!(["view", "create", "str_replace", "insert", "undo_edit"])
    );
    assert_eq!(
        schema["properties"]["view_range"]["items"]["type"],
        "integer"
    );
}

/// The two commands that reach a shell, run by real ones on a real
/// directory whose names would break naive quoting.
#[cfg(unix)]
#[test]
fn the_shell_commands_work_in_sh_and_busybox() {
    use std::process::Command as Process;

    let root = std::env::temp_dir().join(format!("agentd-editor-{}", std::process::id()));
    let dir = root.join("it's a $(dir) `x`");
    std::fs::create_dir_all(dir.join("sub/deep")).expect("mkdir");
    std::fs::create_dir_all(dir.join(".hidden")).expect("mkdir");
    std::fs::write(dir.join("file \"1\".txt"), "x").expect("write");
    std::fs::write(dir.join("sub/deep/too-deep.txt"), "x").expect("write");
    let dir = dir.to_str().expect("UTF-8 temp dir").to_string();

    let busybox = Process::new("busybox")
        .arg("true")
        .status()
        .is_ok_and(|s| s.success());
    let shells: &[&[&str]] = if busybox {
        &[&["sh", "-c"], &["busybox", "sh", "-c"]]
    } else {
        &[&["sh", "-c"]]
    };
    for shell in shells {
        let run = |command: &str| {
            let output = Process::new(shell[0])
                .args(&shell[1..])
                .arg(command)
                .output()
                .expect("run the shell");
            assert!(output.status.success(), "{shell:?} {command}: {output:?}");
            assert!(output.stderr.is_empty(), "{shell:?} {command}: {output:?}");
            String::from_utf8(output.stdout).expect("UTF-8")
        };
        assert_eq!(run(&probe_command(&dir)), "directory\n", "{shell:?}");
        let file = format!("{dir}/file \"1\".txt");
        assert_eq!(run(&probe_command(&file)), "file\n", "{shell:?}");
        assert_eq!(
            run(&probe_command(&format!("{dir}/nope"))),
            "missing\n",
            "{shell:?}"
        );

        let mut listed: Vec<String> = run(&find_command(&dir)).lines().map(String::from).collect();
        listed.sort();
        let expected = [
            dir.clone(),
            format!("{dir}/file \"1\".txt"),
            format!("{dir}/sub"),
            format!("{dir}/sub/deep"),
        ];
        assert_eq!(listed, expected, "{shell:?}");
    }
    std::fs::remove_dir_all(&root).expect("clean up");
}
