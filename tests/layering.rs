//! The layering of `src/`, frozen: data flows one way, API -> runs -> loop
//! -> plugin host -> (LLM | sandbox), over a shared chat vocabulary at the
//! bottom, and `config` on top only parses and builds each subsystem's
//! settings. This test reads every source file and fails on an import that
//! goes the wrong way, so the layering in ARCHITECTURE.md cannot drift back.
//! It reads `use crate::...` and `crate::...` paths; comments are skipped.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The top-level modules of `src/`, lowest first. A module may depend only
/// on modules of a lower layer (or on itself).
const LAYERS: &[(&str, u32)] = &[
    ("chat", 0),
    ("plan", 0),
    ("time", 0),
    ("sync", 0),
    ("size", 0),
    ("otel", 0),
    ("llm", 1),
    ("sandbox", 1),
    ("plugin", 2),
    ("agent", 3),
    ("mcp", 4),
    ("api", 4),
    ("testkit", 4),
    ("config", 5),
    ("doctor", 6),
    ("daemon", 7),
    ("cli", 8),
];

/// Edges allowed although they go up, each with its reason.
const EXCEPTIONS: &[(&str, &str, &str)] = &[(
    "config",
    "daemon::settings",
    "config builds the daemon's own settings type, which lives with the daemon",
)];

/// External crates a module must not use at all.
const FORBIDDEN_CRATES: &[(&str, &str)] = &[
    ("agent", "wasmtime"),
    ("agent", "wasmtime_wasi"),
    ("chat", "reqwest"),
    ("chat", "wasmtime"),
];

fn layer(module: &str) -> Option<u32> {
    LAYERS.iter().find(|(m, _)| *m == module).map(|(_, l)| *l)
}

/// `src/agent/run.rs` -> `agent`; `src/api.rs` -> `api`; `src/lib.rs` and
/// `src/main.rs` -> `None` (the crate root may name everything).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "lib" && name != "main").then(|| name.to_string())
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Comments removed (line comments; doc comments are line comments too).
fn code_of(text: &str) -> String {
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `crate::a::b` path in `code`, as "a::b"; a group
/// `crate::{a::X, b::{Y, Z}}` gives "a::X" and "b::{Y, Z}".
fn crate_paths(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let after = &rest[i + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            let mut depth = 1;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => {}
                }
                if depth == 0 || (depth == 1 && c == ',') {
                    let trimmed = item.trim();
                    if !trimmed.is_empty() {
                        found.insert(trimmed.to_string());
                    }
                    item.clear();
                    if depth == 0 {
                        break;
                    }
                    continue;
                }
                item.push(c);
            }
        } else {
            let path: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let path = path.trim_end_matches(':');
            if !path.is_empty() {
                found.insert(path.to_string());
            }
        }
        rest = after;
    }
    found
}

/// Whether a `super::` path climbs out of the file's module: `depth` is
/// how many `super::` the file itself may take (its depth below
/// `src/<module>/`), and each inline `mod x { ... }` it is inside allows one
/// more (`use super::*` in a `mod tests`).
fn escapes_module(depth: usize, code: &str) -> bool {
    let bytes = code.as_bytes();
    let mut braces = 0usize;
    let mut inline_mods: Vec<usize> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        // Inside a multi-byte character: not the start of a keyword.
        let Some(rest) = code.get(i..) else {
            i += 1;
            continue;
        };
        if rest.starts_with("mod ") && (i == 0 || !bytes[i - 1].is_ascii_alphanumeric()) {
            let header: String = rest
                .chars()
                .take_while(|c| *c != ';' && *c != '{')
                .collect();
            if rest[header.len()..].starts_with('{') {
                inline_mods.push(braces + 1);
            }
        }
        if rest.starts_with("super::") && (i == 0 || !bytes[i - 1].is_ascii_alphanumeric()) {
            let climbs = rest
                .as_bytes()
                .chunks(7)
                .take_while(|c| *c == b"super::")
                .count();
            if climbs > depth + inline_mods.len() {
                return true;
            }
            i += climbs * 7;
            continue;
        }
        match bytes[i] {
            b'{' => braces += 1,
            b'}' => {
                if inline_mods.last() == Some(&braces) {
                    inline_mods.pop();
                }
                braces = braces.saturating_sub(1);
            }
            _ => {}
        }
        i += 1;
    }
    false
}

#[test]
fn every_module_depends_only_downward() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut violations = Vec::new();
    for file in &files {
        let Some(module) = module_of(&src, file) else {
            continue;
        };
        let Some(own) = layer(&module) else {
            violations.push(format!(
                "{}: module `{module}` has no layer in tests/layering.rs",
                file.display()
            ));
            continue;
        };
        let code = code_of(&std::fs::read_to_string(file).expect("read"));
        for path in crate_paths(&code) {
            let target = path.split("::").next().unwrap_or("");
            if target == module || target.is_empty() {
                continue;
            }
            let Some(theirs) = layer(target) else {
                continue;
            };
            let excepted = EXCEPTIONS
                .iter()
                .any(|(from, to, _)| *from == module && path.starts_with(to));
            if theirs >= own && !excepted {
                violations.push(format!(
                    "{}: `{module}` (layer {own}) uses `crate::{path}` (layer {theirs})",
                    file.display()
                ));
            }
        }
        for (from, krate) in FORBIDDEN_CRATES {
            let uses = code.contains(&format!(" {krate}::"))
                || code.contains(&format!("({krate}::"))
                || code.contains(&format!("<{krate}::"))
                || code.contains(&format!("&{krate}::"));
            if *from == module && uses {
                violations.push(format!(
                    "{}: `{module}` uses the `{krate}` crate",
                    file.display()
                ));
            }
        }
        // How many `super::` stay inside the module: a file's depth below
        // `src/<module>/`, where `mod.rs` is the module itself.
        let below = file
            .strip_prefix(&src)
            .map(|r| r.components().count().saturating_sub(1))
            .unwrap_or(0);
        let depth = if file.ends_with("mod.rs") {
            below.saturating_sub(1)
        } else {
            below
        };
        if escapes_module(depth, &code) {
            violations.push(format!(
                "{}: `super::` climbs out of `{module}`; write `crate::` so it is checked",
                file.display()
            ));
        }
    }
    assert!(
        violations.is_empty(),
        "imports against the layering (ARCHITECTURE.md, \"Layers\"):\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_check_sees_a_violation() {
    // The scanner itself: a `crate::agent` path in plugin code is found.
    let code = code_of("use crate::agent::message::Message; // crate::llm in a comment");
    let paths = crate_paths(&code);
    assert_eq!(
        paths.into_iter().collect::<Vec<_>>(),
        ["agent::message::Message"]
    );
    let grouped = crate_paths("use crate::{\n    agent::X,\n    llm::{A, B},\n};");
    assert_eq!(
        grouped.into_iter().collect::<Vec<_>>(),
        ["agent::X", "llm::{A, B}"]
    );
    assert!(layer("plugin") < layer("agent"));
    assert!(escapes_module(1, "use super::super::x;"));
    assert!(!escapes_module(1, "use super::x;"));
    assert!(escapes_module(0, "use super::x;"));
    assert!(!escapes_module(0, "mod tests {\n use super::*;\n}"));
    assert!(escapes_module(0, "mod tests {\n}\nuse super::x;"));
}
