//! Loading plugin components: the right worlds, names from metadata, and bad
//! files refused with a reason while the others load.

use crate::common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentd::chat::{Message, ToolCall, ToolChoice, ToolSpec};
use agentd::llm::ChatResponse;
use agentd::plugin::bindings::types::ErrorCode;
use agentd::plugin::clock::StepClock;
use agentd::plugin::run_host::{ChatFailure, ProbeHost, Refused, RunHost, StepConfig};
use agentd::plugin::session::{StepEnd, StrategySession};
use agentd::plugin::tool::{call_once, CallFailure, ToolBox, ToolFailure};
use agentd::plugin::{
    AskFailure, AskHuman, Contract, EngineLimits, Grants, NoHuman, NoPlan, PluginGrant, PluginHost,
    PluginKind, RunTools, StrategyDefaults,
};
use agentd::sandbox::{NoSandbox, Sandbox, SandboxProvider};
use common::{
    built_plugins, plugins_dir, ALL_TEST_PLUGINS, TOOLCALL_NEXT_STEP_PROMPT, TOOLCALL_SYSTEM_PROMPT,
};
use tokio_util::sync::CancellationToken;

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
    assert_eq!(toolcall.meta.contract, Contract::V0_2_4);
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
    // OpenManus's AskHuman, as the model sees it.
    let ask = set.tool("ask_human").expect("ask_human tool");
    assert_eq!(ask.meta.contract, Contract::V0_2_4);
    assert_eq!(ask.spec.description, "Use this tool to ask human for help.");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&ask.spec.parameters).expect("schema is JSON"),
        serde_json::json!({
            "type": "object",
            "properties": {"inquire": {"type": "string", "description": "The question you want to ask human."}},
            "required": ["inquire"]
        })
    );
    assert!(
        ask.meta
            .imports
            .iter()
            .any(|i| i == "agentd:plugin/human@0.2.4"),
        "{:?}",
        ask.meta.imports
    );
}

#[tokio::test]
async fn components_built_against_older_contracts_still_load() {
    let dir = plugins_dir(&[
        "legacy_strategy",
        "legacy_tool",
        "legacy_v0_2_tool",
        "legacy_v0_2_1_tool",
        "legacy_v0_2_2_strategy",
        "legacy_v0_2_3_strategy",
        "echo",
        "misbehave",
    ]);
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
    // 0.2.0 to 0.2.3 are served by the 0.2.4 bindings through
    // wasmtime's semver matching of their exports and imports.
    let v0_2 = set.tool("legacy_v0_2_tool").expect("0.2.0 tool");
    assert_eq!(v0_2.meta.contract, Contract::V0_2);
    let v0_2_1 = set.tool("legacy_v0_2_1_tool").expect("0.2.1 tool");
    assert_eq!(v0_2_1.meta.contract, Contract::V0_2_1);
    assert!(
        v0_2_1
            .meta
            .imports
            .iter()
            .any(|i| i == "agentd:plugin/config@0.2.1"),
        "{:?}",
        v0_2_1.meta.imports
    );
    let v0_2_2 = set
        .strategy("legacy_v0_2_2_strategy")
        .expect("0.2.2 strategy");
    assert_eq!(v0_2_2.meta.contract, Contract::V0_2_2);
    assert!(
        v0_2_2
            .meta
            .imports
            .iter()
            .any(|i| i == "agentd:plugin/agent@0.2.2"),
        "{:?}",
        v0_2_2.meta.imports
    );
    // Its own defaults, read through the 0.2.4 bindings.
    assert_eq!(v0_2_2.defaults.max_steps, Some(3));
    let v0_2_3 = set
        .strategy("legacy_v0_2_3_strategy")
        .expect("0.2.3 strategy");
    assert_eq!(v0_2_3.meta.contract, Contract::V0_2_3);
    assert!(
        v0_2_3
            .meta
            .imports
            .iter()
            .any(|i| i == "agentd:plugin/plan@0.2.3"),
        "{:?}",
        v0_2_3.meta.imports
    );
    assert_eq!(
        set.tool("echo").expect("echo").meta.contract,
        Contract::V0_2_4
    );
    assert_eq!(
        set.strategy("misbehave").expect("misbehave").meta.contract,
        Contract::V0_2_4
    );
    // And it runs: its 0.2.1 `config` import is served by the 0.2.4 host.
    let grants = Grants::new(BTreeMap::from([(
        "legacy_v0_2_1_tool".to_string(),
        PluginGrant {
            config: BTreeMap::from([("greeting".to_string(), "hi".to_string())]),
            ..PluginGrant::default()
        },
    )]));
    let answer = call_once(
        v0_2_1,
        no_sandbox(),
        Arc::new(grants),
        Arc::new(NoHuman("tests ask no one")),
        r#"{"text":"older"}"#,
        Duration::from_secs(10),
    )
    .await
    .expect("0.2.1 tool answers");
    assert_eq!(answer, r#"v0.2.1 (1 config keys): {"text":"older"}"#);
}

fn no_sandbox() -> Arc<dyn Sandbox> {
    NoSandbox::new("plugin tests have no sandbox").for_run("test")
}

/// A person who answers every question after `delay`, or fails with
/// `failure`; it records who asked what.
struct TestHuman {
    delay: Duration,
    failure: Option<AskFailure>,
    asked: Mutex<Vec<(String, String)>>,
}

impl TestHuman {
    fn answering_after(delay: Duration) -> Arc<Self> {
        Arc::new(TestHuman {
            delay,
            failure: None,
            asked: Mutex::new(Vec::new()),
        })
    }

    fn failing(failure: AskFailure) -> Arc<Self> {
        Arc::new(TestHuman {
            delay: Duration::ZERO,
            failure: Some(failure),
            asked: Mutex::new(Vec::new()),
        })
    }

    fn asked(&self) -> Vec<(String, String)> {
        self.asked.lock().expect("lock").clone()
    }
}

#[async_trait::async_trait]
impl AskHuman for TestHuman {
    async fn ask(&self, plugin: &str, question: String) -> Result<String, AskFailure> {
        self.asked
            .lock()
            .expect("lock")
            .push((plugin.to_string(), question.clone()));
        tokio::time::sleep(self.delay).await;
        match &self.failure {
            Some(f) => Err(f.clone()),
            None => Ok(format!("answer to {question:?}")),
        }
    }
}

/// How long the test person takes, against a plugin-time limit of `TINY`:
/// a wait that counted would pass the limit several times over.
const SLOW: Duration = Duration::from_millis(600);
const TINY: Duration = Duration::from_millis(100);

async fn loaded(names: &[&str]) -> (tempfile::TempDir, PluginHost) {
    let dir = plugins_dir(names);
    let host = host();
    let report = host.load_dir(dir.path()).await.expect("load");
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    (dir, host)
}

#[tokio::test]
async fn a_tool_asking_a_person_gets_the_answer_and_the_wait_is_not_its_time() {
    let (_dir, host) = loaded(&["ask_human"]).await;
    let tool = host.snapshot().tool("ask_human").expect("ask_human");
    // The tool's own `timeout` is far shorter than the person's answer:
    // only the plugin's time counts against it.
    let grants = Arc::new(Grants::new(BTreeMap::from([(
        "ask_human".to_string(),
        PluginGrant {
            timeout: Some(TINY),
            ..PluginGrant::default()
        },
    )])));
    let human = TestHuman::answering_after(SLOW);
    let clock = StepClock::new();
    clock.start(&"a strategy".into());
    let mut tools = ToolBox::new(
        vec![tool.clone()],
        no_sandbox(),
        clock.clone(),
        grants.clone(),
        human.clone(),
    );
    let started = Instant::now();
    let answer = tools
        .invoke("ask_human", r#"{"inquire": "Which branch?"}"#)
        .await
        .expect("answered");
    assert!(started.elapsed() >= SLOW, "{:?}", started.elapsed());
    assert_eq!(answer, r#"answer to "Which branch?""#);
    assert_eq!(
        human.asked(),
        [("ask_human".to_string(), "Which branch?".to_string())]
    );
    assert!(clock.guest_time() < TINY, "{:?}", clock.guest_time());
    // One call outside a run, under a step deadline shorter than the wait.
    let answer = call_once(
        tool,
        no_sandbox(),
        Arc::new(Grants::default()),
        human.clone(),
        r#"{"inquire": "Again?"}"#,
        TINY,
    )
    .await
    .expect("answered within the deadline");
    assert_eq!(answer, r#"answer to "Again?""#);
}

#[tokio::test]
async fn a_tool_asking_sees_why_there_is_no_answer() {
    let (_dir, host) = loaded(&["ask_human"]).await;
    let tool = host.snapshot().tool("ask_human").expect("ask_human");
    let cases = [
        (
            AskFailure::NoAnswer("no answer within 1h (input_timeout)".into()),
            ErrorCode::Failed,
            "no answer within 1h (input_timeout)",
        ),
        (
            AskFailure::Cancelled,
            ErrorCode::Cancelled,
            "the run was cancelled while waiting for an answer",
        ),
        (
            AskFailure::Unavailable("nobody here".into()),
            ErrorCode::Failed,
            "nobody here",
        ),
    ];
    for (failure, code, message) in cases {
        let got = call_once(
            tool.clone(),
            no_sandbox(),
            Arc::new(Grants::default()),
            TestHuman::failing(failure.clone()),
            r#"{"inquire": "?"}"#,
            Duration::from_secs(10),
        )
        .await;
        match got {
            Err(CallFailure::Tool(ToolFailure::Reported(e))) => {
                assert_eq!((e.code, e.message.as_str()), (code, message), "{failure:?}")
            }
            other => panic!("{failure:?}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn ask_human_outside_a_run_fails_saying_no_one_can_be_asked() {
    let (_dir, host) = loaded(&["ask_human"]).await;
    let tool = host.snapshot().tool("ask_human").expect("ask_human");
    let call = |arguments: &'static str| {
        call_once(
            tool.clone(),
            no_sandbox(),
            Arc::new(Grants::default()),
            Arc::new(NoHuman("an MCP client's tool call has no person to ask")),
            arguments,
            Duration::from_secs(10),
        )
    };
    match call(r#"{"inquire": "Anyone?"}"#).await {
        Err(CallFailure::Tool(ToolFailure::Reported(e))) => {
            assert_eq!(e.code, ErrorCode::Failed);
            assert_eq!(e.message, "an MCP client's tool call has no person to ask");
        }
        other => panic!("{other:?}"),
    }
    // Bad arguments are refused before anyone is asked, saying what is wrong.
    for (arguments, says) in [
        ("{", "invalid arguments: "),
        ("{}", "missing field `inquire`"),
        (r#"{"inquire": 42}"#, "invalid type"),
        (r#"{"inquire": "  "}"#, "`inquire` is empty"),
    ] {
        match call(arguments).await {
            Err(CallFailure::Tool(ToolFailure::Reported(e))) => {
                assert_eq!(e.code, ErrorCode::InvalidInput, "{arguments}: {e:?}");
                assert!(
                    e.message.starts_with("invalid arguments: ") && e.message.contains(says),
                    "{arguments}: {e:?}"
                );
            }
            other => panic!("{arguments}: {other:?}"),
        }
    }
}

/// A run host for one strategy step whose system prompt is `prompt` (what
/// `misbehave` reads to pick its behaviour); the rest is the probe's.
struct PromptHost(String);

#[async_trait::async_trait]
impl RunHost for PromptHost {
    fn step_config(&self) -> StepConfig {
        StepConfig {
            system_prompt: Some(self.0.clone()),
            current_step: 1,
            max_steps: 1,
            ..ProbeHost.step_config()
        }
    }
    fn memory(&self) -> Vec<Message> {
        ProbeHost.memory()
    }
    fn add_message(&self, message: Message) -> Result<(), Refused> {
        ProbeHost.add_message(message)
    }
    async fn chat(
        &self,
        messages: Vec<Message>,
        tools: Vec<ToolSpec>,
        tool_choice: ToolChoice,
    ) -> Result<ChatResponse, ChatFailure> {
        ProbeHost.chat(messages, tools, tool_choice).await
    }
    fn tool_specs(&self) -> std::sync::Arc<[ToolSpec]> {
        ProbeHost.tool_specs()
    }
    fn admit_tool_call(&self, call: &ToolCall) -> Result<(), String> {
        ProbeHost.admit_tool_call(call)
    }
    fn tool_started(&self, _call: &ToolCall) {}
    fn tool_finished(&self, _call: &ToolCall, _ok: bool, output: String) -> String {
        output
    }
    fn finish(&self) {}
}

#[tokio::test]
async fn a_strategy_asking_a_person_gets_the_answer_and_the_wait_is_not_step_time() {
    let (_dir, host) = loaded(&["misbehave"]).await;
    let strategy = host.snapshot().strategy("misbehave").expect("misbehave");
    let human = TestHuman::answering_after(SLOW);
    let mut session = StrategySession::start(
        &strategy,
        RunTools::default(),
        no_sandbox(),
        Arc::new(PromptHost("ask-human Which way?".into())),
        human.clone(),
        Arc::new(NoPlan("tests keep no plan")),
        Arc::new(Grants::default()),
        Duration::from_secs(10),
    )
    .await
    .expect("session");
    // A step deadline far shorter than the person's answer.
    let ended = session.step(TINY, &CancellationToken::new()).await;
    assert_eq!(
        ended,
        StepEnd::Done(r#"the person said: answer to "Which way?""#.into())
    );
    assert_eq!(
        human.asked(),
        [("misbehave".to_string(), "Which way?".to_string())]
    );
    // The failure is the strategy's to handle: misbehave fails its step with it.
    let mut session = StrategySession::start(
        &strategy,
        RunTools::default(),
        no_sandbox(),
        Arc::new(PromptHost("ask-human Still there?".into())),
        TestHuman::failing(AskFailure::NoAnswer(
            "no answer within 1h (input_timeout)".into(),
        )),
        Arc::new(NoPlan("tests keep no plan")),
        Arc::new(Grants::default()),
        Duration::from_secs(10),
    )
    .await
    .expect("session");
    let ended = session.step(TINY, &CancellationToken::new()).await;
    assert_eq!(
        ended,
        StepEnd::Failed("no answer within 1h (input_timeout)".into())
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
