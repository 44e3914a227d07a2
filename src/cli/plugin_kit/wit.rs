//! `agentd plugin wit`: the contract, for authors in other languages or
//! using `wit-bindgen` (or `componentize-py`, `jco`, ...) directly.

use std::path::Path;

use super::{embedded, usage, WitArgs};

pub fn run(args: &WitArgs) -> i32 {
    let (version, files) = match &args.contract {
        None => embedded::newest_contract(),
        Some(v) => {
            let v = v.trim_start_matches('v');
            match embedded::contract(v) {
                Some(files) => (v, files),
                None => {
                    let known: Vec<&str> = embedded::CONTRACTS.iter().map(|(v, _)| *v).collect();
                    return usage(format!(
                        "this agentd carries no contract {v} (it has {})",
                        known.join(", ")
                    ));
                }
            }
        }
    };
    match &args.out {
        None => {
            let main = files.iter().find(|(p, _)| *p == "agentd.wit");
            print!("{}", main.map_or("", |(_, text)| *text));
            0
        }
        Some(dir) => match write_files(dir, files) {
            Ok(()) => {
                println!(
                    "wrote agentd:plugin@{version} ({} files) into {}",
                    files.len(),
                    dir.display()
                );
                0
            }
            Err(e) => usage(e),
        },
    }
}

/// Writes `files` under `dir`, making folders as needed; existing files of
/// the same names are replaced (they are generated, not edited).
pub(super) fn write_files<P: AsRef<str>, T: AsRef<str>>(
    dir: &Path,
    files: &[(P, T)],
) -> Result<(), String> {
    for (path, text) in files {
        let to = dir.join(path.as_ref());
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        std::fs::write(&to, text.as_ref())
            .map_err(|e| format!("cannot write {}: {e}", to.display()))?;
    }
    Ok(())
}
