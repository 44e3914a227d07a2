//! Loading plugin components: the right worlds, names from metadata, and bad
//! files refused with a reason while the others load.

mod common;

use agentd::chat::ToolChoice;
use agentd::plugin::{Contract, EngineLimits, PluginHost, PluginKind, StrategyDefaults};
use common::{
    built_plugins, plugins_dir, ALL_TEST_PLUGINS, TOOLCALL_NEXT_STEP_PROMPT, TOOLCALL_SYSTEM_PROMPT,
};

fn host() -> PluginHost {
    PluginHost::new(EngineLimits {
        max_concurrent_runs: 2,
    })
    .expect("plugin host")
}

#[tokio::test]
async fn built_plugins_are_components_of_the_wit_worlds() {
    let dir = plugins_dir(ALL_TEST_PLUGINS);
    let host = host();
    let report = host.load_dir(dir.path()).await.expect("load");
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    let set = host.snapshot();
    let toolcall = set.strategy("toolcall").expect("toolcall strategy");
    // OpenManus's ToolCallAgent defaults come from the plugin itself.
    assert_eq!(
        toolcall.defaults,
        StrategyDefaults {
            system_prompt: Some(TOOLCALL_SYSTEM_PROMPT.into()),
            next_step_prompt: Some(TOOLCALL_NEXT_STEP_PROMPT.into()),
            max_steps: Some(30),
            tool_choice: Some(ToolChoice::Auto),
            special_tools: Some(vec!["terminate".into()]),
        }
    );
    assert_eq!(toolcall.meta.contract, Contract::V0_2_2);
    assert_eq!(toolcall.meta.contract, Contract::CURRENT);
    assert!(!toolcall.meta.version.is_empty());
    let terminate = set.tool("terminate").expect("terminate tool");
    assert_eq!(terminate.meta.kind, PluginKind::Tool);
    let schema: serde_json::Value =
        serde_json::from_str(&terminate.spec.parameters).expect("schema is JSON");
    assert_eq!(
        schema["properties"]["status"]["enum"],
        serde_json::json!(["success", "failure"])
    );
    assert_eq!(schema["required"], serde_json::json!(["status"]));
    assert!(set.strategy("misbehave").is_some());
    assert!(set.tool("echo").is_some() && set.tool("fail_tool").is_some());
}

#[tokio::test]
async fn components_built_against_older_contracts_still_load() {
    let dir = plugins_dir(&["legacy_strategy", "legacy_tool", "legacy_v0_2_tool", "echo"]);
    let host = host();
    let report = host.load_dir(dir.path()).await.expect("load");
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    let set = host.snapshot();
    let strategy = set.strategy("legacy_strategy").expect("0.1.0 strategy");
    assert_eq!(strategy.meta.contract, Contract::V0_1);
    // 0.1.0 could only say its step limit; it has no default prompts.
    assert_eq!(
        strategy.defaults,
        StrategyDefaults {
            max_steps: Some(7),
            ..StrategyDefaults::default()
        }
    );
    let tool = set.tool("legacy_tool").expect("0.1.0 tool");
    assert_eq!(tool.meta.contract, Contract::V0_1);
    // 0.2.0 is served by the 0.2.2 bindings through wasmtime's semver
    // matching of its export and imports.
    let v0_2 = set.tool("legacy_v0_2_tool").expect("0.2.0 tool");
    assert_eq!(v0_2.meta.contract, Contract::V0_2);
    assert_eq!(
        set.tool("echo").expect("echo").meta.contract,
        Contract::V0_2_2
    );
}

#[tokio::test]
async fn the_name_comes_from_metadata_not_the_file_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::copy(
        built_plugins().join("terminate.wasm"),
        dir.path().join("renamed-by-user.wasm"),
    )
    .expect("copy");
    let host = host();
    host.load_dir(dir.path()).await.expect("load");
    assert!(host.snapshot().tool("terminate").is_some());
    assert!(host.snapshot().tool("renamed-by-user").is_none());
}

#[tokio::test]
async fn a_component_importing_what_agentd_lacks_is_refused_naming_the_import() {
    let dir = plugins_dir(&["foreign_import", "echo"]);
    let host = host();
    let report = host.load_dir(dir.path()).await.expect("load");
    assert!(host.snapshot().tool("echo").is_some());
    assert!(host.snapshot().tool("foreign_import").is_none());
    let (_, error) = report
        .failed
        .iter()
        .find(|(path, _)| path.ends_with("foreign_import.wasm"))
        .expect("refused");
    let text = error.to_string();
    assert!(
        text.contains("example:elsewhere/clock@1.0.0") && text.contains("foreign_import.wasm"),
        "{text}"
    );
}

#[tokio::test]
async fn a_tool_importing_wasi_http_loads_without_any_grant_and_says_what_it_needs() {
    let dir = plugins_dir(&["grant_probe"]);
    let host = host();
    let report = host.load_dir(dir.path()).await.expect("load");
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    let probe = host.snapshot().tool("grant_probe").expect("loaded");
    assert!(
        probe
            .meta
            .imports
            .iter()
            .any(|i| i.starts_with("wasi:http/outgoing-handler@")),
        "{:?}",
        probe.meta.imports
    );
    assert_eq!(
        probe.meta.grants_needed(),
        ["allow_hosts", "config", "env", "secrets"]
    );
}

#[tokio::test]
async fn bad_files_are_refused_with_a_reason_and_the_rest_load() {
    let dir = plugins_dir(&["toolcall", "terminate"]);
    let full = std::fs::read(built_plugins().join("echo.wasm")).expect("read");
    std::fs::write(dir.path().join("truncated.wasm"), &full[..full.len() / 2]).expect("write");
    std::fs::write(dir.path().join("random.wasm"), b"\x13\x37 not wasm at all").expect("write");
    // A core module (not a component): `(module)` in binary form.
    std::fs::write(
        dir.path().join("core.wasm"),
        [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00],
    )
    .expect("write");
    // The same plugin twice: the first (by file name order) wins.
    std::fs::copy(
        built_plugins().join("terminate.wasm"),
        dir.path().join("zz-terminate-copy.wasm"),
    )
    .expect("copy");
    let host = host();
    let report = host.load_dir(dir.path()).await.expect("load");
    let names: Vec<_> = report.loaded.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["terminate", "toolcall"]);
    let failed: Vec<(String, String)> = report
        .failed
        .iter()
        .map(|(p, e)| {
            (
                p.file_name().expect("name").to_string_lossy().into_owned(),
                e.to_string(),
            )
        })
        .collect();
    assert_eq!(failed.len(), 4, "{failed:?}");
    for (file, error) in &failed {
        assert!(
            error.contains(file.as_str()),
            "the error names the file: {error}"
        );
    }
    let find = |f: &str| {
        failed
            .iter()
            .find(|(n, _)| n == f)
            .map(|(_, e)| e.clone())
            .unwrap_or_default()
    };
    assert!(find("truncated.wasm").contains("not a valid WebAssembly component"));
    assert!(find("random.wasm").contains("not a valid WebAssembly component"));
    assert!(
        find("core.wasm").contains("not a valid WebAssembly component")
            || find("core.wasm").contains("exports neither")
    );
    assert!(find("zz-terminate-copy.wasm").contains("two plugins are named `terminate`"));
}

#[tokio::test]
async fn a_missing_folder_is_an_error_naming_it() {
    let host = host();
    let err = host
        .load_dir(std::path::Path::new("/nonexistent/agentd-plugins"))
        .await
        .expect_err("missing dir");
    assert!(err.to_string().contains("/nonexistent/agentd-plugins"));
}
