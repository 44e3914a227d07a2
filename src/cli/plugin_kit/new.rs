//! `agentd plugin new`: a standalone plugin project that builds with one
//! command, outside any agentd source tree. It carries everything it needs:
//! the example plugin and its native tests, the SDK (vendored for Rust, so
//! no registry has to publish it and its version matches this agentd), the
//! contract's WIT, and a README that says how to build, check, call and
//! install it.

use std::path::{Path, PathBuf};

use super::{embedded, usage, wit, Kind, Lang, NewArgs};

pub fn run(args: &NewArgs) -> i32 {
    if !is_project_name(&args.name) {
        return usage(format!(
            "{:?} cannot name a new plugin: use a lower-case letter, then lower-case letters, digits or `_`, at most 64 (it is also the crate or module name and the component's file name)",
            args.name
        ));
    }
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(&args.name));
    if let Err(e) = check_empty(&dir) {
        return usage(e);
    }
    let written = match args.lang {
        Lang::Rust => rust_project(args.kind, &args.name),
        Lang::Python => python_project(args.kind, &args.name),
    }
    .and_then(|files| write_project(&dir, &files));
    match written {
        Ok(()) => {
            println!("{}", next_steps(args, &dir));
            0
        }
        Err(e) => usage(e),
    }
}

/// Stricter than a plugin name (which may hold `-` and capitals): the name
/// is also a Rust crate or Python module name, and cargo writes a crate's
/// component as its name with `-` turned into `_`, which would then differ
/// from the plugin's name that `agentd plugin install` takes from the file.
fn is_project_name(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= 64
        && chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

fn check_empty(dir: &Path) -> Result<(), String> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                Err(format!(
                    "{} exists and is not empty: give a new folder",
                    dir.display()
                ))
            } else {
                Ok(())
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("cannot use {}: {e}", dir.display())),
    }
}

/// A file of the project: its path in it, its contents.
type Owned = (String, String);

fn write_project(dir: &Path, files: &[Owned]) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    wit::write_files(dir, files)?;
    // Scripts are run as `./build.sh`.
    for (path, _) in files.iter().filter(|(p, _)| p.ends_with(".sh")) {
        let file = dir.join(path);
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| format!("cannot make {} executable: {e}", file.display()))?;
    }
    Ok(())
}

fn fill(template: &str, vars: &[(&str, &str)]) -> String {
    let mut text = template.to_string();
    for (key, value) in vars {
        text = text.replace(&format!("{{{{{key}}}}}"), value);
    }
    text
}

/// The lines of `manifest` from the line `header` to the next table header.
fn section(manifest: &str, header: &str) -> Option<String> {
    let mut out = String::new();
    let mut inside = false;
    for line in manifest.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            if inside {
                break;
            }
            inside = trimmed == header;
        }
        if inside {
            out.push_str(line);
            out.push('\n');
        }
    }
    (!out.is_empty()).then(|| out.trim_end().to_string() + "\n")
}

/// The SDK source with its WIT paths moved from the repository's layout
/// (`plugins/sdk/X` → `../../../wit/since_vV`) to the project's (`sdk/X` →
/// `../../wit`): one level less deep, and one folder of one version.
fn rewrite_wit_paths(text: &str, version: &str) -> String {
    text.replace(&format!("../wit/since_v{version}"), "wit")
        .replace(&format!("wit/since_v{version}"), "wit")
}

fn rust_project(kind: Kind, name: &str) -> Result<Vec<Owned>, String> {
    let contract_version = embedded::sdk_contract()
        .ok_or("this agentd's SDK does not name its contract version (a build problem)")?;
    let wit_files = embedded::contract(contract_version).ok_or_else(|| {
        format!("this agentd does not carry the contract {contract_version} its SDK needs")
    })?;
    let contract = format!("agentd:plugin@{contract_version}");
    let mut tables = String::new();
    for header in [
        "[workspace.package]",
        "[workspace.dependencies]",
        "[profile.release]",
    ] {
        let text = section(embedded::PLUGINS_MANIFEST, header)
            .ok_or_else(|| format!("the SDK's workspace has no {header} (a build problem)"))?;
        tables.push_str(&text);
        tables.push('\n');
    }
    let (sdk, sdk_package, sources, description, exports, try_it, agent_toml) = match kind {
        Kind::Tool => (
            embedded::SDK_TOOL,
            "agentd-tool-sdk",
            embedded::rust::TOOL,
            "An agentd tool",
            "`spec` (what the model is shown) and `invoke` (one call)",
            format!(
                "agentd plugin call target/wasm32-wasip2/release/{name}.wasm '{{\"text\": \"one two three\"}}'"
            ),
            format!(
                "[agents.{name}_agent]\nstrategy = \"toolcall\"\ntools = [\"{name}\", \"terminate\"]"
            ),
        ),
        Kind::Strategy => (
            embedded::SDK_STRATEGY,
            "agentd-strategy-sdk",
            embedded::rust::STRATEGY,
            "An agentd strategy",
            "`defaults` (what an agent gets when its configuration is silent) and `step` (one step of a run)",
            "# a strategy needs a model: install it, then `agentd run NAME \"...\"` with the agent below".replace("NAME", name),
            format!("[agents.{name}]\nstrategy = \"{name}\"\ntools = [\"terminate\"]"),
        ),
    };
    let vars: Vec<(&str, &str)> = vec![
        ("name", name),
        ("kind", kind.as_str()),
        ("contract", &contract),
        ("agentd_version", env!("CARGO_PKG_VERSION")),
        ("description", description),
        ("sdk_crate", sdk_package),
        ("sdk_package", sdk_package),
        ("workspace_tables", tables.trim_end()),
        ("exports", exports),
        ("try_it", &try_it),
        ("agent_toml", &agent_toml),
    ];
    let mut files: Vec<Owned> = vec![
        ("Cargo.toml".into(), fill(embedded::rust::MANIFEST, &vars)),
        ("README.md".into(), fill(embedded::rust::README, &vars)),
        ("Cargo.lock".into(), embedded::PLUGINS_LOCK.to_string()),
    ];
    for (path, text) in embedded::rust::COMMON.iter().chain(sources) {
        let path = path.strip_suffix(".tmpl").unwrap_or(path);
        files.push((path.to_string(), fill(text, &vars)));
    }
    for (folder, crate_files) in [
        ("sdk/common", embedded::SDK_COMMON),
        (&*format!("sdk/{}", kind.as_str()), sdk),
    ] {
        for (path, text) in crate_files {
            files.push((
                format!("{folder}/{path}"),
                rewrite_wit_paths(text, contract_version),
            ));
        }
    }
    for (path, text) in wit_files {
        files.push((format!("wit/{path}"), text.to_string()));
    }
    Ok(files)
}

fn python_project(kind: Kind, name: &str) -> Result<Vec<Owned>, String> {
    let contract_version = embedded::python_sdk_contract()
        .ok_or("this agentd's Python SDK does not name its contract version (a build problem)")?;
    let wit_files = embedded::contract(contract_version).ok_or_else(|| {
        format!("this agentd does not carry the contract {contract_version} its Python SDK needs")
    })?;
    let contract = format!("agentd:plugin@{contract_version}");
    let (sources, try_it, agent_toml) = match kind {
        Kind::Tool => (
            embedded::python::TOOL,
            format!("agentd plugin call {name}.wasm '{{\"text\": \"one two three\"}}'"),
            format!(
                "[agents.{name}_agent]\nstrategy = \"toolcall\"\ntools = [\"{name}\", \"terminate\"]"
            ),
        ),
        Kind::Strategy => (
            embedded::python::STRATEGY,
            format!("# a strategy needs a model: install it, then `agentd run {name} \"...\"` with the agent below"),
            format!("[agents.{name}]\nstrategy = \"{name}\"\ntools = [\"terminate\"]"),
        ),
    };
    let vars: Vec<(&str, &str)> = vec![
        ("name", name),
        ("kind", kind.as_str()),
        ("world", kind.as_str()),
        ("contract", &contract),
        ("contract_version", contract_version),
        ("agentd_version", env!("CARGO_PKG_VERSION")),
        ("componentize_py", embedded::COMPONENTIZE_PY),
        ("try_it", &try_it),
        ("agent_toml", &agent_toml),
    ];
    let mut files: Vec<Owned> = vec![("README.md".into(), fill(embedded::python::README, &vars))];
    for (path, text) in embedded::python::COMMON.iter().chain(sources) {
        let path = path.strip_suffix(".tmpl").unwrap_or(path);
        files.push((path.to_string(), fill(text, &vars)));
    }
    for (path, text) in embedded::SDK_PYTHON {
        files.push((format!("sdk/{path}"), text.to_string()));
    }
    for (path, text) in wit_files {
        files.push((format!("wit/{path}"), text.to_string()));
    }
    Ok(files)
}

fn next_steps(args: &NewArgs, dir: &Path) -> String {
    let d = dir.display();
    let name = &args.name;
    match args.lang {
        Lang::Rust => format!(
            "wrote a Rust {} plugin `{name}` into {d}\n\n  cd {d}\n  cargo build --release --target wasm32-wasip2\n  agentd plugin check target/wasm32-wasip2/release/{name}.wasm\n  agentd plugin install target/wasm32-wasip2/release/{name}.wasm\n\n(see {d}/README.md)",
            args.kind.as_str()
        ),
        Lang::Python => format!(
            "wrote a Python {} plugin `{name}` into {d}\n\n  cd {d}\n  pip install componentize-py=={}   # once\n  ./build.sh\n  agentd plugin check {name}.wasm\n  agentd plugin install {name}.wasm\n\n(see {d}/README.md)",
            args.kind.as_str(),
            embedded::COMPONENTIZE_PY
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sdk_paths_move_one_level_up_into_the_projects_wit() {
        let text = r#"path: "../../../wit/since_v0.2.0", include_str!("../../../../wit/since_v0.2.0/agentd.wit")"#;
        assert_eq!(
            rewrite_wit_paths(text, "0.2.0"),
            r#"path: "../../wit", include_str!("../../../wit/agentd.wit")"#
        );
    }

    #[test]
    fn a_project_names_nothing_of_the_repository() {
        let files = rust_project(Kind::Tool, "demo").expect("project");
        for (path, text) in &files {
            if path.ends_with(".rs") || path.ends_with(".toml") {
                assert!(
                    !text.contains("since_v"),
                    "{path} points into the repository"
                );
                assert!(!text.contains("{{"), "{path} has an unfilled placeholder");
            }
        }
        let manifest = &files
            .iter()
            .find(|(p, _)| p == "Cargo.toml")
            .expect("manifest")
            .1;
        for want in [
            "[workspace]",
            "wit-bindgen = ",
            "[profile.release]",
            "name = \"demo\"",
        ] {
            assert!(manifest.contains(want), "{want}: {manifest}");
        }
    }

    #[test]
    fn project_names_are_crate_module_and_file_names() {
        for good in ["demo", "word_count", "a1"] {
            assert!(is_project_name(good), "{good}");
        }
        for bad in ["", "1a", "Demo", "my-tool", "_x", "a/b", &"a".repeat(65)] {
            assert!(!is_project_name(bad), "{bad}");
        }
    }
}
