//! Everything the kit writes, compiled into the binary, so `agentd plugin
//! new` and `agentd plugin wit` need no source tree: the contract's WIT
//! folders, the Rust SDK crates as they are in `plugins/sdk/`, the plugin
//! workspace's manifest and lock file (for its pinned versions and release
//! profile), and the project templates in `kit/templates/`.
//!
//! Files are embedded by path, so a change to the SDK or the contract
//! reaches the kit with the next build. Which contract version a project
//! gets is read from the SDK's own `generate!` path ([`sdk_contract`]), so
//! when the SDK moves to a newer folder the kit follows; the tests below
//! fail if that folder (or a newer one in `wit/`) is not embedded here.

/// One embedded file: its path relative to where it is written, its text.
pub type File = (&'static str, &'static str);

/// The contract versions the kit can write, newest first: each version's
/// `wit/since_vX.Y.Z` folder, relative to it.
pub const CONTRACTS: &[(&str, &[File])] = &[
    (
        "0.2.4",
        &[
            (
                "agentd.wit",
                include_str!("../../../wit/since_v0.2.4/agentd.wit"),
            ),
            (
                "deps/cli.wit",
                include_str!("../../../wit/since_v0.2.4/deps/cli.wit"),
            ),
            (
                "deps/clocks.wit",
                include_str!("../../../wit/since_v0.2.4/deps/clocks.wit"),
            ),
            (
                "deps/filesystem.wit",
                include_str!("../../../wit/since_v0.2.4/deps/filesystem.wit"),
            ),
            (
                "deps/http.wit",
                include_str!("../../../wit/since_v0.2.4/deps/http.wit"),
            ),
            (
                "deps/io.wit",
                include_str!("../../../wit/since_v0.2.4/deps/io.wit"),
            ),
            (
                "deps/random.wit",
                include_str!("../../../wit/since_v0.2.4/deps/random.wit"),
            ),
            (
                "deps/sockets.wit",
                include_str!("../../../wit/since_v0.2.4/deps/sockets.wit"),
            ),
        ],
    ),
    (
        "0.2.3",
        &[
            (
                "agentd.wit",
                include_str!("../../../wit/since_v0.2.3/agentd.wit"),
            ),
            (
                "deps/cli.wit",
                include_str!("../../../wit/since_v0.2.3/deps/cli.wit"),
            ),
            (
                "deps/clocks.wit",
                include_str!("../../../wit/since_v0.2.3/deps/clocks.wit"),
            ),
            (
                "deps/filesystem.wit",
                include_str!("../../../wit/since_v0.2.3/deps/filesystem.wit"),
            ),
            (
                "deps/http.wit",
                include_str!("../../../wit/since_v0.2.3/deps/http.wit"),
            ),
            (
                "deps/io.wit",
                include_str!("../../../wit/since_v0.2.3/deps/io.wit"),
            ),
            (
                "deps/random.wit",
                include_str!("../../../wit/since_v0.2.3/deps/random.wit"),
            ),
            (
                "deps/sockets.wit",
                include_str!("../../../wit/since_v0.2.3/deps/sockets.wit"),
            ),
        ],
    ),
    (
        "0.2.2",
        &[
            (
                "agentd.wit",
                include_str!("../../../wit/since_v0.2.2/agentd.wit"),
            ),
            (
                "deps/cli.wit",
                include_str!("../../../wit/since_v0.2.2/deps/cli.wit"),
            ),
            (
                "deps/clocks.wit",
                include_str!("../../../wit/since_v0.2.2/deps/clocks.wit"),
            ),
            (
                "deps/filesystem.wit",
                include_str!("../../../wit/since_v0.2.2/deps/filesystem.wit"),
            ),
            (
                "deps/http.wit",
                include_str!("../../../wit/since_v0.2.2/deps/http.wit"),
            ),
            (
                "deps/io.wit",
                include_str!("../../../wit/since_v0.2.2/deps/io.wit"),
            ),
            (
                "deps/random.wit",
                include_str!("../../../wit/since_v0.2.2/deps/random.wit"),
            ),
            (
                "deps/sockets.wit",
                include_str!("../../../wit/since_v0.2.2/deps/sockets.wit"),
            ),
        ],
    ),
    (
        "0.2.1",
        &[
            (
                "agentd.wit",
                include_str!("../../../wit/since_v0.2.1/agentd.wit"),
            ),
            (
                "deps/cli.wit",
                include_str!("../../../wit/since_v0.2.1/deps/cli.wit"),
            ),
            (
                "deps/clocks.wit",
                include_str!("../../../wit/since_v0.2.1/deps/clocks.wit"),
            ),
            (
                "deps/filesystem.wit",
                include_str!("../../../wit/since_v0.2.1/deps/filesystem.wit"),
            ),
            (
                "deps/http.wit",
                include_str!("../../../wit/since_v0.2.1/deps/http.wit"),
            ),
            (
                "deps/io.wit",
                include_str!("../../../wit/since_v0.2.1/deps/io.wit"),
            ),
            (
                "deps/random.wit",
                include_str!("../../../wit/since_v0.2.1/deps/random.wit"),
            ),
            (
                "deps/sockets.wit",
                include_str!("../../../wit/since_v0.2.1/deps/sockets.wit"),
            ),
        ],
    ),
    (
        "0.2.0",
        &[(
            "agentd.wit",
            include_str!("../../../wit/since_v0.2.0/agentd.wit"),
        )],
    ),
];

/// The files of contract `version`, if embedded.
pub fn contract(version: &str) -> Option<&'static [File]> {
    CONTRACTS
        .iter()
        .find(|(v, _)| *v == version)
        .map(|(_, files)| *files)
}

/// The newest contract: what `agentd plugin wit` prints by default.
pub fn newest_contract() -> (&'static str, &'static [File]) {
    CONTRACTS[0]
}

/// `plugins/Cargo.toml`: its `[workspace.package]`, `[workspace.dependencies]`
/// (the pinned wit-bindgen) and `[profile.release]` go into each project.
pub const PLUGINS_MANIFEST: &str = include_str!("../../../plugins/Cargo.toml");
/// `plugins/Cargo.lock`: the versions the SDK is built and tested with;
/// cargo drops what a project does not use.
pub const PLUGINS_LOCK: &str = include_str!("../../../plugins/Cargo.lock");

/// `agentd-plugin-types`, which both SDKs build on (`sdk/common`).
pub const SDK_COMMON: &[File] = &[
    (
        "Cargo.toml",
        include_str!("../../../plugins/sdk/common/Cargo.toml"),
    ),
    (
        "src/lib.rs",
        include_str!("../../../plugins/sdk/common/src/lib.rs"),
    ),
];
/// `agentd-tool-sdk` (`sdk/tool`).
pub const SDK_TOOL: &[File] = &[
    (
        "Cargo.toml",
        include_str!("../../../plugins/sdk/tool/Cargo.toml"),
    ),
    (
        "src/lib.rs",
        include_str!("../../../plugins/sdk/tool/src/lib.rs"),
    ),
];
/// `agentd-strategy-sdk` (`sdk/strategy`).
pub const SDK_STRATEGY: &[File] = &[
    (
        "Cargo.toml",
        include_str!("../../../plugins/sdk/strategy/Cargo.toml"),
    ),
    (
        "src/lib.rs",
        include_str!("../../../plugins/sdk/strategy/src/lib.rs"),
    ),
    (
        "src/host.rs",
        include_str!("../../../plugins/sdk/strategy/src/host.rs"),
    ),
    (
        "src/testing.rs",
        include_str!("../../../plugins/sdk/strategy/src/testing.rs"),
    ),
    (
        "src/rules.rs",
        include_str!("../../../plugins/sdk/strategy/src/rules.rs"),
    ),
];

/// agentd's Python SDK (`plugins/python/sdk/agentd/`), as the package
/// `agentd` of a project's `sdk/`.
pub const SDK_PYTHON: &[File] = &[
    (
        "agentd/__init__.py",
        include_str!("../../../plugins/python/sdk/agentd/__init__.py"),
    ),
    (
        "agentd/_bindings.py",
        include_str!("../../../plugins/python/sdk/agentd/_bindings.py"),
    ),
    (
        "agentd/config.py",
        include_str!("../../../plugins/python/sdk/agentd/config.py"),
    ),
    (
        "agentd/errors.py",
        include_str!("../../../plugins/python/sdk/agentd/errors.py"),
    ),
    (
        "agentd/http.py",
        include_str!("../../../plugins/python/sdk/agentd/http.py"),
    ),
    (
        "agentd/human.py",
        include_str!("../../../plugins/python/sdk/agentd/human.py"),
    ),
    (
        "agentd/log.py",
        include_str!("../../../plugins/python/sdk/agentd/log.py"),
    ),
    (
        "agentd/sandbox.py",
        include_str!("../../../plugins/python/sdk/agentd/sandbox.py"),
    ),
    (
        "agentd/schema.py",
        include_str!("../../../plugins/python/sdk/agentd/schema.py"),
    ),
    (
        "agentd/strategy.py",
        include_str!("../../../plugins/python/sdk/agentd/strategy.py"),
    ),
    (
        "agentd/tool.py",
        include_str!("../../../plugins/python/sdk/agentd/tool.py"),
    ),
];

/// The componentize-py a Python project is made for: the version
/// `scripts/ensure-componentize-py.sh` installs for this repository's own
/// Python plugins (a test below holds the two together).
pub const COMPONENTIZE_PY: &str = "0.25.1";

/// The contract version the Python SDK's bindings are generated from, read
/// from its `CONTRACT = "agentd:plugin@X.Y.Z"`.
pub fn python_sdk_contract() -> Option<&'static str> {
    let source = SDK_PYTHON
        .iter()
        .find(|(p, _)| *p == "agentd/__init__.py")?
        .1;
    let start = source.find("CONTRACT = \"agentd:plugin@")? + "CONTRACT = \"agentd:plugin@".len();
    let rest = &source[start..];
    Some(&rest[..rest.find('"')?])
}

/// The Python project templates (`kit/templates/python/`).
pub mod python {
    use super::File;

    pub const README: &str = include_str!("../../../kit/templates/python/common/README.md.tmpl");
    /// Paths relative to the project; `.tmpl` files are filled in.
    pub const COMMON: &[File] = &[
        (
            "build.sh.tmpl",
            include_str!("../../../kit/templates/python/common/build.sh.tmpl"),
        ),
        (
            "Makefile.tmpl",
            include_str!("../../../kit/templates/python/common/Makefile.tmpl"),
        ),
        (
            ".gitignore",
            include_str!("../../../kit/templates/python/common/gitignore"),
        ),
    ];
    pub const TOOL: &[File] = &[
        (
            "src/app.py.tmpl",
            include_str!("../../../kit/templates/python/tool/app.py.tmpl"),
        ),
        (
            "src/logic.py",
            include_str!("../../../kit/templates/python/tool/logic.py"),
        ),
        (
            "tests/test_logic.py",
            include_str!("../../../kit/templates/python/tool/test_logic.py"),
        ),
    ];
    pub const STRATEGY: &[File] = &[
        (
            "src/app.py.tmpl",
            include_str!("../../../kit/templates/python/strategy/app.py.tmpl"),
        ),
        (
            "src/logic.py",
            include_str!("../../../kit/templates/python/strategy/logic.py"),
        ),
        (
            "tests/test_logic.py",
            include_str!("../../../kit/templates/python/strategy/test_logic.py"),
        ),
    ];
}

/// The Rust project templates (`kit/templates/rust/`).
pub mod rust {
    use super::File;

    pub const MANIFEST: &str = include_str!("../../../kit/templates/rust/common/Cargo.toml.tmpl");
    pub const README: &str = include_str!("../../../kit/templates/rust/common/README.md.tmpl");
    pub const COMMON: &[File] = &[
        (
            "rust-toolchain.toml",
            include_str!("../../../kit/templates/rust/common/rust-toolchain.toml"),
        ),
        (
            ".gitignore",
            include_str!("../../../kit/templates/rust/common/gitignore"),
        ),
    ];
    pub const TOOL: &[File] = &[
        (
            "src/lib.rs",
            include_str!("../../../kit/templates/rust/tool/src/lib.rs.tmpl"),
        ),
        (
            "src/tests.rs",
            include_str!("../../../kit/templates/rust/tool/src/tests.rs"),
        ),
    ];
    pub const STRATEGY: &[File] = &[
        (
            "src/lib.rs",
            include_str!("../../../kit/templates/rust/strategy/src/lib.rs.tmpl"),
        ),
        (
            "src/tests.rs",
            include_str!("../../../kit/templates/rust/strategy/src/tests.rs"),
        ),
    ];
}

/// The contract version the SDK builds against, read from the `path:` of
/// its `wit_bindgen::generate!` (`"../../../wit/since_v0.2.0"`): the folder
/// a project must carry for the vendored SDK to build.
pub fn sdk_contract() -> Option<&'static str> {
    let source = SDK_COMMON.iter().find(|(p, _)| *p == "src/lib.rs")?.1;
    let start = source.find("wit/since_v")? + "wit/since_v".len();
    let rest = &source[start..];
    let end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    Some(&rest[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> std::path::PathBuf {
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
    }

    #[test]
    fn the_sdks_contract_is_embedded() {
        let version = sdk_contract().expect("the SDK names its wit folder");
        assert!(
            contract(version).is_some(),
            "the SDK builds against wit/since_v{version}: embed that folder in CONTRACTS"
        );
    }

    #[test]
    fn the_python_sdk_is_embedded_whole_with_its_contract() {
        let version = python_sdk_contract().expect("the Python SDK names its contract");
        assert!(
            contract(version).is_some(),
            "embed wit/since_v{version} in CONTRACTS"
        );
        let mut on_disk: Vec<String> = std::fs::read_dir(repo().join("plugins/python/sdk/agentd"))
            .expect("plugins/python/sdk/agentd")
            .filter_map(|e| {
                let name = e.ok()?.file_name().into_string().ok()?;
                name.ends_with(".py").then(|| format!("agentd/{name}"))
            })
            .collect();
        on_disk.sort();
        let mut listed: Vec<String> = SDK_PYTHON.iter().map(|(p, _)| p.to_string()).collect();
        listed.sort();
        assert_eq!(listed, on_disk, "list every SDK module in SDK_PYTHON");
        // The same componentize-py as the repository's own Python plugins.
        if let Ok(script) =
            std::fs::read_to_string(repo().join("scripts/ensure-componentize-py.sh"))
        {
            assert!(
                script.contains(&format!("VERSION={COMPONENTIZE_PY}\n")),
                "COMPONENTIZE_PY must be the version scripts/ensure-componentize-py.sh installs"
            );
        }
    }

    #[test]
    fn the_newest_contract_folder_is_embedded_whole() {
        let mut versions: Vec<Vec<u32>> = std::fs::read_dir(repo().join("wit"))
            .expect("wit/")
            .filter_map(|e| {
                let name = e.ok()?.file_name().into_string().ok()?;
                let v = name.strip_prefix("since_v")?;
                Some(v.split('.').map(|n| n.parse().unwrap_or(0)).collect())
            })
            .collect();
        versions.sort();
        let newest: Vec<String> = versions
            .last()
            .expect("a contract")
            .iter()
            .map(u32::to_string)
            .collect();
        let newest = newest.join(".");
        let (embedded, files) = newest_contract();
        assert_eq!(
            embedded, newest,
            "embed wit/since_v{newest} first in CONTRACTS"
        );
        // Every file of the folder, deps included.
        let dir = repo().join(format!("wit/since_v{newest}"));
        let mut on_disk = Vec::new();
        for sub in ["", "deps"] {
            if let Ok(entries) = std::fs::read_dir(dir.join(sub)) {
                for e in entries.flatten() {
                    let name = e.file_name().into_string().unwrap_or_default();
                    if name.ends_with(".wit") {
                        on_disk.push(if sub.is_empty() {
                            name
                        } else {
                            format!("{sub}/{name}")
                        });
                    }
                }
            }
        }
        on_disk.sort();
        let mut listed: Vec<String> = files.iter().map(|(p, _)| p.to_string()).collect();
        listed.sort();
        assert_eq!(listed, on_disk);
    }

    /// A project written by `agentd plugin new` builds only if it has every
    /// file of its SDK: a module added to an SDK must be embedded too.
    #[test]
    fn every_source_file_of_the_rust_sdks_is_embedded() {
        for (folder, files) in [
            ("plugins/sdk/common", SDK_COMMON),
            ("plugins/sdk/tool", SDK_TOOL),
            ("plugins/sdk/strategy", SDK_STRATEGY),
        ] {
            let src = repo().join(folder).join("src");
            let mut on_disk: Vec<String> = std::fs::read_dir(&src)
                .unwrap_or_else(|e| panic!("{}: {e}", src.display()))
                .flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|name| name.ends_with(".rs"))
                .map(|name| format!("src/{name}"))
                .collect();
            on_disk.sort();
            let mut listed: Vec<String> = files
                .iter()
                .map(|(p, _)| p.to_string())
                .filter(|p| p.starts_with("src/"))
                .collect();
            listed.sort();
            assert_eq!(listed, on_disk, "{folder}: embed every file of src/");
        }
    }
}
