//! OpenManus's `str_replace_editor` tool, on files in the run's sandbox:
//! `view`, `create`, `str_replace`, `insert` and `undo_edit`, with
//! OpenManus's description, schema and messages, because models and prompts
//! written for OpenManus rely on them.
//!
//! Files go through the sandbox's `read-file` and `write-file`, so their
//! contents never pass through a shell. A shell sees a path twice only: to
//! tell a file from a directory, and to list a directory with `find`; both
//! times single-quoted.
//!
//! The undo history lives in this instance's memory, and the host keeps one
//! instance of a tool for a whole run: edits can be undone for the rest of
//! the run, like OpenManus's `_file_history`.
//!
//! Departures from OpenManus, each marked where it happens:
//! - tabs are kept: OpenManus expands them (`expandtabs()`) in the whole
//!   file on every `str_replace` and `insert`, which silently rewrites a
//!   Makefile's or a Go file's indentation;
//! - files that are not UTF-8 can be viewed (invalid bytes are shown as
//!   `�`) but not edited, since writing them back would corrupt them;
//! - an empty `old_str` is refused rather than matching everywhere;
//! - the lines reported for a repeated `old_str` are those where each
//!   occurrence starts, so they are found for a multi-line `old_str` too;
//! - paths are shown normalized (`/a//b/` as `/a/b`) in every message, as
//!   OpenManus shows them only in its validation messages;
//! - a directory listing is clipped like file contents are;
//! - the undo history is bounded (see [`HISTORY_LIMIT`]).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Mutex, PoisonError};

use agentd_tool_sdk::{
    CommandOutput, Error, Guest, Metadata, ToolSpec, export_tool, parse_args, sandbox,
};
use serde::Deserialize;
use serde_json::Value;

const NAME: &str = "str_replace_editor";
const DESCRIPTION: &str = "Custom editing tool for viewing, creating and editing files
* State is persistent across command calls and discussions with the user
* If `path` is a file, `view` displays the result of applying `cat -n`. If `path` is a directory, `view` lists non-hidden files and directories up to 2 levels deep
* The `create` command cannot be used if the specified `path` already exists as a file
* If a `command` generates a long output, it will be truncated and marked with `<response clipped>`
* The `undo_edit` command will revert the last edit made to the file at `path`

Notes for using the `str_replace` command:
* The `old_str` parameter should match EXACTLY one or more consecutive lines from the original file. Be mindful of whitespaces!
* If the `old_str` parameter is not unique in the file, the replacement will not be performed. Make sure to include enough context in `old_str` to make it unique
* The `new_str` parameter should contain the edited lines that should replace the `old_str`
";
const PARAMETERS: &str = r#"{"type":"object","properties":{"command":{"description":"The commands to run. Allowed options are: `view`, `create`, `str_replace`, `insert`, `undo_edit`.","enum":["view","create","str_replace","insert","undo_edit"],"type":"string"},"path":{"description":"Absolute path to file or directory.","type":"string"},"file_text":{"description":"Required parameter of `create` command, with the content of the file to be created.","type":"string"},"old_str":{"description":"Required parameter of `str_replace` command containing the string in `path` to replace.","type":"string"},"new_str":{"description":"Optional parameter of `str_replace` command containing the new string (if not given, no string will be added). Required parameter of `insert` command containing the string to insert.","type":"string"},"insert_line":{"description":"Required parameter of `insert` command. The `new_str` will be inserted AFTER the line `insert_line` of `path`.","type":"integer"},"view_range":{"description":"Optional parameter of `view` command when `path` points to a file. If none is given, the full file is shown. If provided, the file will be shown in the indicated line number range, e.g. [11, 12] will show lines 11 and 12. Indexing at 1 to start. Setting `[start_line, -1]` shows all lines from `start_line` to the end of the file.","items":{"type":"integer"},"type":"array"}},"required":["command","path"]}"#;

/// Lines of context shown around an edit.
const SNIPPET_LINES: usize = 4;
/// Characters of file content shown before clipping.
const MAX_RESPONSE_LEN: usize = 16000;
const TRUNCATED_MESSAGE: &str = "<response clipped><NOTE>To save on context only part of this file has been shown to you. You should retry this tool after you have searched inside the file with `grep -n` in order to find the line numbers of what you are looking for.</NOTE>";
/// Bytes of old file contents kept for `undo_edit`, oldest dropped first.
/// OpenManus keeps everything; here a long run editing big files would
/// otherwise run the instance out of its linear memory, which loses the
/// whole history at once.
const HISTORY_LIMIT: usize = 32 << 20;

/// Prints what the path is, following symlinks, as OpenManus's `test -d` /
/// `test -e` do; `$p` is set in front of it. POSIX `sh`, so busybox will do.
const PROBE_SCRIPT: &str = r#"if [ -d "$p" ]; then echo directory; elif [ -e "$p" ]; then echo file; else echo missing; fi"#;
/// OpenManus's `find` arguments, with `!` for `-not`, which some busybox
/// builds lack.
const FIND_ARGS: &str = "-maxdepth 2 ! -path '*/.*'";

struct StrReplaceEditor;

impl Guest for StrReplaceEditor {
    fn metadata() -> Metadata {
        Metadata::new(
            NAME,
            env!("CARGO_PKG_VERSION"),
            "OpenManus's str_replace_editor tool: views, creates and edits files in the run's sandbox.",
        )
    }

    fn spec() -> ToolSpec {
        ToolSpec::new(NAME, DESCRIPTION, PARAMETERS)
    }

    fn invoke(arguments: String) -> Result<String, Error> {
        // One call at a time reaches an instance, so the lock never waits;
        // a poisoned lock (impossible with `panic = "abort"`) still holds a
        // usable history.
        let mut editor = EDITOR.lock().unwrap_or_else(PoisonError::into_inner);
        editor.invoke(&mut Imports, &arguments)
    }
}

export_tool!(StrReplaceEditor);

/// The instance's state: it outlives a call, which is what makes undo work.
static EDITOR: Mutex<Editor> = Mutex::new(Editor::new());

/// The sandbox as this tool uses it. A trait rather than direct calls so the
/// logic can be tested natively against an in-memory fake.
trait Sandbox {
    fn run(&mut self, command: &str) -> Result<CommandOutput, Error>;
    fn read_file(&mut self, path: &str) -> Result<Vec<u8>, Error>;
    fn write_file(&mut self, path: &str, contents: &[u8]) -> Result<(), Error>;
}

/// The real sandbox, through the component's imports.
struct Imports;

impl Sandbox for Imports {
    fn run(&mut self, command: &str) -> Result<CommandOutput, Error> {
        sandbox::run(&sandbox::Command::new(command))
    }

    fn read_file(&mut self, path: &str) -> Result<Vec<u8>, Error> {
        sandbox::read_file(path)
    }

    fn write_file(&mut self, path: &str, contents: &[u8]) -> Result<(), Error> {
        sandbox::write_file(path, contents)
    }
}

#[derive(Deserialize)]
struct Args {
    command: String,
    path: String,
    file_text: Option<String>,
    old_str: Option<String>,
    new_str: Option<String>,
    insert_line: Option<i64>,
    /// Any JSON, checked by hand: OpenManus answers a malformed range with
    /// its own message, which a typed field would turn into a parse error.
    view_range: Option<Value>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Command {
    View,
    Create,
    StrReplace,
    Insert,
    UndoEdit,
}

impl Command {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "view" => Command::View,
            "create" => Command::Create,
            "str_replace" => Command::StrReplace,
            "insert" => Command::Insert,
            "undo_edit" => Command::UndoEdit,
            _ => return None,
        })
    }
}

/// What a path is in the sandbox.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Directory,
    File,
    Missing,
}

/// Old contents per path, for `undo_edit`.
struct History {
    edits: BTreeMap<String, Vec<String>>,
    /// The paths in the order their entries were pushed, to drop the oldest
    /// entry of all when the history grows past [`HISTORY_LIMIT`].
    order: VecDeque<String>,
    bytes: usize,
}

impl History {
    const fn new() -> Self {
        History {
            edits: BTreeMap::new(),
            order: VecDeque::new(),
            bytes: 0,
        }
    }

    fn push(&mut self, path: &str, text: String) {
        self.bytes += text.len();
        self.edits.entry(path.to_string()).or_default().push(text);
        self.order.push_back(path.to_string());
        while self.bytes > HISTORY_LIMIT {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            if let Some(texts) = self.edits.get_mut(&oldest) {
                if !texts.is_empty() {
                    self.bytes -= texts.remove(0).len();
                }
                if texts.is_empty() {
                    self.edits.remove(&oldest);
                }
            }
        }
    }

    fn last(&self, path: &str) -> Option<&String> {
        self.edits.get(path).and_then(|texts| texts.last())
    }

    fn pop(&mut self, path: &str) {
        let Some(texts) = self.edits.get_mut(path) else {
            return;
        };
        if let Some(text) = texts.pop() {
            self.bytes -= text.len();
        }
        if texts.is_empty() {
            self.edits.remove(path);
        }
        if let Some(index) = self.order.iter().rposition(|p| p == path) {
            self.order.remove(index);
        }
    }
}

struct Editor {
    history: History,
}

impl Editor {
    const fn new() -> Self {
        Editor {
            history: History::new(),
        }
    }

    /// Sandbox errors are returned unchanged, their code included. Errors
    /// about the arguments themselves are `invalid-input`; those about the
    /// files (missing, already there, no match) are `failed`.
    fn invoke(&mut self, sandbox: &mut impl Sandbox, arguments: &str) -> Result<String, Error> {
        let args: Args = parse_args(arguments)?;
        let Some(command) = Command::parse(&args.command) else {
            // OpenManus checks the path first; an unknown command is reported
            // first here, as it makes the path check pointless.
            return Err(Error::invalid_input(format!(
                "Unrecognized command {}. The allowed commands for the {NAME} tool are: view, create, str_replace, insert, undo_edit",
                args.command
            )));
        };
        let path = normalize(&args.path);
        if !path.starts_with('/') {
            return Err(Error::invalid_input(format!(
                "The path {path} is not an absolute path"
            )));
        }
        if path.contains('\0') {
            return Err(Error::invalid_input(format!(
                "The path {path:?} contains a NUL byte"
            )));
        }

        // The parameters are checked before the path is looked up (OpenManus
        // looks first), which saves a sandbox round trip on a bad call.
        match command {
            Command::View => {
                let kind = check_path(sandbox, command, &path)?;
                view(sandbox, &path, kind, args.view_range.as_ref())
            }
            Command::Create => {
                let file_text = required(args.file_text, "file_text", "create")?;
                check_path(sandbox, command, &path)?;
                sandbox.write_file(&path, file_text.as_bytes())?;
                // As in OpenManus, which makes undo after create a no-op
                // rather than a deletion.
                self.history.push(&path, file_text);
                Ok(format!("File created successfully at: {path}"))
            }
            Command::StrReplace => {
                let old_str = required(args.old_str, "old_str", "str_replace")?;
                if old_str.is_empty() {
                    // OpenManus would find it "in" every line.
                    return Err(Error::invalid_input(
                        "Parameter `old_str` must not be empty for command: str_replace",
                    ));
                }
                check_path(sandbox, command, &path)?;
                let new_str = args.new_str.unwrap_or_default();
                self.str_replace(sandbox, &path, &old_str, &new_str)
            }
            Command::Insert => {
                let insert_line = required(args.insert_line, "insert_line", "insert")?;
                let new_str = required(args.new_str, "new_str", "insert")?;
                check_path(sandbox, command, &path)?;
                self.insert(sandbox, &path, insert_line, &new_str)
            }
            Command::UndoEdit => {
                check_path(sandbox, command, &path)?;
                self.undo_edit(sandbox, &path)
            }
        }
    }

    fn str_replace(
        &mut self,
        sandbox: &mut impl Sandbox,
        path: &str,
        old_str: &str,
        new_str: &str,
    ) -> Result<String, Error> {
        let content = read_text(sandbox, path)?;
        let mut matches = content.match_indices(old_str).map(|(index, _)| index);
        let Some(index) = matches.next() else {
            return Err(Error::failed(format!(
                "No replacement was performed, old_str `{old_str}` did not appear verbatim in {path}."
            )));
        };
        if matches.next().is_some() {
            let mut lines: Vec<usize> = content
                .match_indices(old_str)
                .map(|(index, _)| line_of(&content, index))
                .collect();
            lines.dedup();
            return Err(Error::failed(format!(
                "No replacement was performed. Multiple occurrences of old_str `{old_str}` in lines {}. Please ensure it is unique",
                python_list(&lines)
            )));
        }

        let new_content = format!(
            "{}{new_str}{}",
            &content[..index],
            &content[index + old_str.len()..]
        );
        sandbox.write_file(path, new_content.as_bytes())?;
        // 0-based, as OpenManus counts it.
        let replacement_line = line_of(&content, index) - 1;
        self.history.push(path, content);

        let start = replacement_line.saturating_sub(SNIPPET_LINES);
        let end = replacement_line + SNIPPET_LINES + new_str.matches('\n').count();
        let snippet = new_content
            .split('\n')
            .skip(start)
            .take(end + 1 - start)
            .collect::<Vec<_>>()
            .join("\n");
        Ok(format!(
            "The file {path} has been edited. {}Review the changes and make sure they are as expected. Edit the file again if necessary.",
            make_output(&snippet, &format!("a snippet of {path}"), start + 1)
        ))
    }

    fn insert(
        &mut self,
        sandbox: &mut impl Sandbox,
        path: &str,
        insert_line: i64,
        new_str: &str,
    ) -> Result<String, Error> {
        let text = read_text(sandbox, path)?;
        let lines: Vec<&str> = text.split('\n').collect();
        let n_lines = lines.len();
        let at = usize::try_from(insert_line)
            .ok()
            .filter(|&at| at <= n_lines)
            .ok_or_else(|| {
                Error::invalid_input(format!(
                    "Invalid `insert_line` parameter: {insert_line}. It should be within the range of lines of the file: [0, {n_lines}]"
                ))
            })?;

        let new_lines: Vec<&str> = new_str.split('\n').collect();
        let new_text = [&lines[..at], &new_lines, &lines[at..]].concat().join("\n");
        let snippet = [
            &lines[at.saturating_sub(SNIPPET_LINES)..at],
            &new_lines,
            &lines[at..(at + SNIPPET_LINES).min(n_lines)],
        ]
        .concat()
        .join("\n");

        sandbox.write_file(path, new_text.as_bytes())?;
        self.history.push(path, text);
        Ok(format!(
            "The file {path} has been edited. {}Review the changes and make sure they are as expected (correct indentation, no duplicate lines, etc). Edit the file again if necessary.",
            make_output(
                &snippet,
                "a snippet of the edited file",
                (at + 1).saturating_sub(SNIPPET_LINES).max(1)
            )
        ))
    }

    fn undo_edit(&mut self, sandbox: &mut impl Sandbox, path: &str) -> Result<String, Error> {
        let Some(old_text) = self.history.last(path) else {
            return Err(Error::failed(format!("No edit history found for {path}.")));
        };
        sandbox.write_file(path, old_text.as_bytes())?;
        // Only now: OpenManus pops first, losing the entry if the write fails.
        let output = make_output(old_text, path, 1);
        self.history.pop(path);
        Ok(format!("Last edit to {path} undone successfully. {output}"))
    }
}

/// OpenManus's `validate_path`, less the absolute-path check done earlier.
fn check_path(sandbox: &mut impl Sandbox, command: Command, path: &str) -> Result<Kind, Error> {
    let kind = probe(sandbox, path)?;
    match (command, kind) {
        (Command::Create, Kind::Missing) => Ok(kind),
        // A directory too, as in OpenManus.
        (Command::Create, _) => Err(Error::failed(format!(
            "File already exists at: {path}. Cannot overwrite files using command `create`."
        ))),
        (_, Kind::Missing) => Err(Error::failed(format!(
            "The path {path} does not exist. Please provide a valid path."
        ))),
        (Command::View, _) | (_, Kind::File) => Ok(kind),
        (_, Kind::Directory) => Err(Error::failed(format!(
            "The path {path} is a directory and only the `view` command can be used on directories"
        ))),
    }
}

fn probe(sandbox: &mut impl Sandbox, path: &str) -> Result<Kind, Error> {
    let output = sandbox.run(&probe_command(path))?;
    match (output.exit_code, output.stdout.trim()) {
        (0, "directory") => Ok(Kind::Directory),
        (0, "file") => Ok(Kind::File),
        (0, "missing") => Ok(Kind::Missing),
        _ => Err(Error::failed(format!(
            "cannot check the path {path}: {}",
            output.observation()
        ))),
    }
}

fn probe_command(path: &str) -> String {
    format!("p={}; {PROBE_SCRIPT}", shell_quote(path))
}

fn find_command(path: &str) -> String {
    format!("find {} {FIND_ARGS}", shell_quote(path))
}

fn view(
    sandbox: &mut impl Sandbox,
    path: &str,
    kind: Kind,
    view_range: Option<&Value>,
) -> Result<String, Error> {
    // `if view_range:` in OpenManus: `[]`, `0` and the like mean no range.
    let view_range = view_range.filter(|range| truthy(range));
    if kind == Kind::Directory {
        if view_range.is_some() {
            return Err(Error::invalid_input(
                "The `view_range` parameter is not allowed when `path` points to a directory.",
            ));
        }
        return view_directory(sandbox, path);
    }

    // Viewing changes nothing, so bytes that are not UTF-8 may as well be
    // shown as `�` rather than refused.
    let content = String::from_utf8_lossy(&sandbox.read_file(path)?).into_owned();
    let Some(range) = view_range else {
        return Ok(make_output(&content, path, 1));
    };
    let (init_line, final_line) = match range.as_array().map(Vec::as_slice) {
        Some([first, second]) => match (first.as_i64(), second.as_i64()) {
            (Some(first), Some(second)) => (first, second),
            _ => return Err(invalid_view_range()),
        },
        _ => return Err(invalid_view_range()),
    };

    let lines: Vec<&str> = content.split('\n').collect();
    let n_lines = lines.len() as i64;
    let shown = format!("[{init_line}, {final_line}]");
    if init_line < 1 || init_line > n_lines {
        return Err(Error::invalid_input(format!(
            "Invalid `view_range`: {shown}. Its first element `{init_line}` should be within the range of lines of the file: [1, {n_lines}]"
        )));
    }
    if final_line > n_lines {
        return Err(Error::invalid_input(format!(
            "Invalid `view_range`: {shown}. Its second element `{final_line}` should be smaller than the number of lines in the file: `{n_lines}`"
        )));
    }
    if final_line != -1 && final_line < init_line {
        return Err(Error::invalid_input(format!(
            "Invalid `view_range`: {shown}. Its second element `{final_line}` should be larger or equal than its first `{init_line}`"
        )));
    }
    // Both in range now: 1 <= init_line <= final_line <= n_lines, or -1.
    let start = (init_line - 1) as usize;
    let end = if final_line == -1 {
        lines.len()
    } else {
        final_line as usize
    };
    let shown_lines = lines.get(start..end).unwrap_or_default().join("\n");
    Ok(make_output(&shown_lines, path, start + 1))
}

fn invalid_view_range() -> Error {
    Error::invalid_input("Invalid `view_range`. It should be a list of two integers.")
}

fn view_directory(sandbox: &mut impl Sandbox, path: &str) -> Result<String, Error> {
    let output = sandbox.run(&find_command(path))?;
    let header = |listing: &str| {
        format!(
            "Here's the files and directories up to 2 levels deep in {path}, excluding hidden items:\n{}\n",
            maybe_truncate(listing)
        )
    };
    if output.stderr.is_empty() {
        return Ok(header(&output.stdout));
    }
    // OpenManus shows only stderr then; a listing that came out despite an
    // unreadable subdirectory is worth showing too.
    if output.stdout.is_empty() {
        return Err(Error::failed(output.observation()));
    }
    Ok(format!("{}{}", header(&output.stdout), output.stderr))
}

/// Reads a file for editing. Text that is not UTF-8 is refused: the edit
/// would write it back with every invalid byte replaced.
fn read_text(sandbox: &mut impl Sandbox, path: &str) -> Result<String, Error> {
    String::from_utf8(sandbox.read_file(path)?).map_err(|e| {
        Error::failed(format!(
            "Failed to read {path}: it is not UTF-8 text (invalid byte at offset {}), so it cannot be edited with this tool",
            e.utf8_error().valid_up_to()
        ))
    })
}

fn required<T>(value: Option<T>, name: &str, command: &str) -> Result<T, Error> {
    value.ok_or_else(|| {
        Error::invalid_input(format!(
            "Parameter `{name}` is required for command: {command}"
        ))
    })
}

/// `cat -n` as OpenManus renders it: numbers right-aligned in 6 columns and
/// a tab, after clipping the content (so the note lands on the last line).
fn make_output(content: &str, descriptor: &str, init_line: usize) -> String {
    let content = maybe_truncate(content);
    let numbered = content
        .split('\n')
        .enumerate()
        .map(|(i, line)| format!("{:6}\t{line}", i + init_line))
        .collect::<Vec<_>>()
        .join("\n");
    format!("Here's the result of running `cat -n` on {descriptor}:\n{numbered}\n")
}

/// Clips to [`MAX_RESPONSE_LEN`] characters, as Python's slicing counts
/// them; cutting bytes could split a UTF-8 sequence.
fn maybe_truncate(content: &str) -> std::borrow::Cow<'_, str> {
    match content.char_indices().nth(MAX_RESPONSE_LEN) {
        Some((index, _)) => format!("{}{TRUNCATED_MESSAGE}", &content[..index]).into(),
        None => content.into(),
    }
}

/// The 1-based line `index` (a byte offset) falls on.
fn line_of(text: &str, index: usize) -> usize {
    text.as_bytes()[..index]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// A list as Python's `repr` shows it, as OpenManus's messages do.
fn python_list(items: &[usize]) -> String {
    let items: Vec<String> = items.iter().map(usize::to_string).collect();
    format!("[{}]", items.join(", "))
}

/// Python's truthiness of a JSON value.
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|n| n != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// The path as Python's `Path(path)` prints it: repeated slashes and `.`
/// components dropped, no trailing slash, `.` for nothing at all.
fn normalize(path: &str) -> String {
    let root = if path.starts_with('/') { "/" } else { "" };
    let parts: Vec<&str> = path
        .split('/')
        .filter(|part| !part.is_empty() && *part != ".")
        .collect();
    let normalized = format!("{root}{}", parts.join("/"));
    if normalized.is_empty() {
        ".".to_string()
    } else {
        normalized
    }
}

/// Single-quotes `text` for `sh`: inside single quotes nothing is special,
/// and a single quote is written as `'\''`.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests;
