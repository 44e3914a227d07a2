//! OpenTelemetry traces (issue 17 §2): `agentd serve` with the standard
//! `OTEL_EXPORTER_OTLP_ENDPOINT` set exports its runs' spans over OTLP
//! http/protobuf. A test receiver on loopback decodes what arrives
//! (`ExportTraceServiceRequest`, the collector's own message) and the tests
//! check the GenAI names, attributes and parent links; a receiver that is
//! down costs the runs nothing; `OTEL_SDK_DISABLED` and `OTEL_TRACES_EXPORTER=none`
//! turn it off;
//! and every log line of a run carries its run id.

use crate::common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentd::testkit::{FakeLlm, Reply};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use common::daemon::Daemon;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode as OtelStatus;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::{json, Value};

const AGENTS: &str = "\n[agents.echoer]\nstrategy = \"toolcall\"\ntools = [\"echo\", \"terminate\"]\nmax_steps = 5\n";

/// What the receiver got: each span with its resource's `service.name`.
#[derive(Default)]
struct Received {
    requests: usize,
    spans: Vec<(String, Span)>,
}

/// A small OTLP/HTTP traces receiver on 127.0.0.1 (`POST /v1/traces`).
struct Receiver {
    port: u16,
    got: Arc<Mutex<Received>>,
}

impl Receiver {
    async fn start() -> Receiver {
        let got = Arc::new(Mutex::new(Received::default()));
        let app = axum::Router::new()
            .route("/v1/traces", axum::routing::post(receive))
            .with_state(got.clone());
        let port = common::serve_loopback(app).await.port();
        Receiver { port, got }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn requests(&self) -> usize {
        self.got.lock().expect("receiver").requests
    }

    /// The spans received so far, once `ready` holds of them (polled; the
    /// batch processor sends every `OTEL_BSP_SCHEDULE_DELAY`).
    fn wait_for(
        &self,
        d: &Daemon,
        ready: impl Fn(&[(String, Span)]) -> bool,
    ) -> Vec<(String, Span)> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            {
                let got = self.got.lock().expect("receiver");
                if ready(&got.spans) {
                    return got.spans.clone();
                }
                assert!(
                    Instant::now() < deadline,
                    "the spans expected never arrived ({} requests); got: {:#?}\n{}",
                    got.requests,
                    got.spans
                        .iter()
                        .map(|(_, s)| s.name.as_str())
                        .collect::<Vec<_>>(),
                    d.log_text()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

async fn receive(State(got): State<Arc<Mutex<Received>>>, body: Bytes) -> impl IntoResponse {
    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
        return (StatusCode::BAD_REQUEST, "not an ExportTraceServiceRequest").into_response();
    };
    let mut got = got.lock().expect("receiver");
    got.requests += 1;
    for resource_spans in request.resource_spans {
        let service = resource_spans
            .resource
            .as_ref()
            .and_then(|r| r.attributes.iter().find(|kv| kv.key == "service.name"))
            .map(|kv| value_of(kv.value.as_ref()))
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        for scope in resource_spans.scope_spans {
            for span in scope.spans {
                got.spans.push((service.clone(), span));
            }
        }
    }
    (
        [(header::CONTENT_TYPE, "application/x-protobuf")],
        ExportTraceServiceResponse::default().encode_to_vec(),
    )
        .into_response()
}

fn value_of(v: Option<&opentelemetry_proto::tonic::common::v1::AnyValue>) -> Value {
    match v.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => json!(s),
        Some(any_value::Value::IntValue(i)) => json!(i),
        Some(any_value::Value::BoolValue(b)) => json!(b),
        Some(any_value::Value::DoubleValue(d)) => json!(d),
        other => json!(format!("{other:?}")),
    }
}

/// A span's attribute, as JSON (`Null` when absent).
fn attr(span: &Span, key: &str) -> Value {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .map_or(Value::Null, |kv| value_of(kv.value.as_ref()))
}

/// The daemon, with traces exported to `endpoint` every 50 ms, and `more`
/// variables.
fn daemon(llm: &FakeLlm, endpoint: &str, more: &[(&str, &str)]) -> Daemon {
    let mut d = Daemon::unstarted(llm, AGENTS);
    let mut env = vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
        ("OTEL_SERVICE_NAME", "agentd-under-test"),
        ("OTEL_BSP_SCHEDULE_DELAY", "50"),
    ];
    env.extend_from_slice(more);
    d.spawn(&env);
    d
}

/// The version the daemon reports for plugin `name`.
fn plugin_version(d: &Daemon, name: &str) -> String {
    let (status, plugins) = d.get("/v1/plugins");
    assert_eq!(status, 200, "{plugins}");
    let list = plugins
        .get("plugins")
        .and_then(Value::as_array)
        .or(plugins.as_array())
        .expect("a plugin list")
        .clone();
    list.iter()
        .find(|p| p["name"] == name)
        .and_then(|p| p["version"].as_str())
        .unwrap_or_else(|| panic!("no version for {name} in {plugins}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_exports_invoke_agent_chat_and_execute_tool_spans_linked_in_one_trace() {
    let receiver = Receiver::start().await;
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.set_prompt_tokens(42);
    llm.push_for(
        "say hi",
        [
            Reply::call("echo", r#"{"text":"hi there"}"#),
            Reply::terminate(),
        ],
    );
    let endpoint = receiver.endpoint();
    tokio::task::block_in_place(|| {
        let d = daemon(&llm, &endpoint, &[]);
        let id = d.create_run("echoer", "say hi");
        let record = d.wait_run(&id, Duration::from_secs(60));
        assert_eq!(record["outcome"], "finished", "{record}");
        let echo_call = d
            .events(&id)
            .into_iter()
            .find(|e| e["type"] == "tool_call" && e["name"] == "echo")
            .expect("the echo call");
        let call_id = echo_call["id"].as_str().expect("call id").to_string();

        // The run span ends last: once it is here, the others are too.
        let spans = receiver.wait_for(&d, |spans| {
            spans.iter().any(|(_, s)| {
                s.name == "invoke_agent echoer" && attr(s, "agentd.run.id") == id.as_str()
            })
        });
        let by_id: HashMap<&[u8], &Span> = spans
            .iter()
            .map(|(_, s)| (s.span_id.as_slice(), s))
            .collect();
        let (service, run) = spans
            .iter()
            .find(|(_, s)| s.name == "invoke_agent echoer")
            .expect("invoke_agent");
        assert_eq!(service, "agentd-under-test");
        assert_eq!(run.kind, SpanKind::Internal as i32);
        assert!(
            run.parent_span_id.is_empty(),
            "the run's span is its trace's root"
        );
        assert_eq!(attr(run, "gen_ai.operation.name"), "invoke_agent");
        assert_eq!(attr(run, "gen_ai.agent.name"), "echoer");
        assert_eq!(attr(run, "gen_ai.provider.name"), "openai");
        assert_eq!(attr(run, "gen_ai.request.model"), "fake");
        assert_eq!(attr(run, "agentd.outcome"), "finished");
        assert_eq!(attr(run, "agentd.steps"), 2);
        assert_eq!(
            attr(run, "agentd.plugin.strategy.version"),
            plugin_version(&d, "toolcall").as_str()
        );

        // Every other span of the run belongs to its trace and hangs from
        // it through the step it ran in.
        let in_run: Vec<&Span> = spans
            .iter()
            .map(|(_, s)| s)
            .filter(|s| s.trace_id == run.trace_id && s.span_id != run.span_id)
            .collect();
        let step_of = |s: &Span| -> u64 {
            let parent = by_id
                .get(s.parent_span_id.as_slice())
                .unwrap_or_else(|| panic!("the parent of {} was not exported", s.name));
            assert!(
                parent.name.starts_with("step "),
                "{} under {}",
                s.name,
                parent.name
            );
            assert_eq!(parent.parent_span_id, run.span_id, "step under the run");
            assert_eq!(attr(parent, "agentd.run.id"), id.as_str());
            attr(parent, "agentd.step").as_u64().expect("agentd.step")
        };

        let chats: Vec<&&Span> = in_run
            .iter()
            .filter(|s| s.name.starts_with("chat"))
            .collect();
        assert_eq!(chats.len(), 2, "one chat span per LLM call");
        let mut chat_steps = Vec::new();
        for chat in &chats {
            assert_eq!(chat.name, "chat fake");
            assert_eq!(chat.kind, SpanKind::Client as i32);
            assert_eq!(attr(chat, "gen_ai.operation.name"), "chat");
            assert_eq!(attr(chat, "gen_ai.provider.name"), "openai");
            assert_eq!(attr(chat, "gen_ai.request.model"), "fake");
            assert_eq!(attr(chat, "gen_ai.response.model"), "fake");
            assert_eq!(attr(chat, "gen_ai.usage.input_tokens"), 42);
            assert_eq!(attr(chat, "gen_ai.usage.output_tokens"), 5);
            assert_eq!(attr(chat, "agentd.run.id"), id.as_str());
            chat_steps.push(step_of(chat));
        }
        chat_steps.sort();
        assert_eq!(chat_steps, [1, 2]);
        // The trace and the record count the same tokens.
        assert_eq!(record["usage"]["prompt_tokens"], 84, "{record}");
        assert_eq!(record["usage"]["completion_tokens"], 10, "{record}");

        let echo = in_run
            .iter()
            .find(|s| s.name == "execute_tool echo")
            .expect("execute_tool echo");
        assert_eq!(echo.kind, SpanKind::Internal as i32);
        assert_eq!(attr(echo, "gen_ai.operation.name"), "execute_tool");
        assert_eq!(attr(echo, "gen_ai.tool.name"), "echo");
        assert_eq!(attr(echo, "gen_ai.tool.call.id"), call_id.as_str());
        assert_eq!(attr(echo, "agentd.run.id"), id.as_str());
        assert_eq!(
            attr(echo, "agentd.plugin.tool.version"),
            plugin_version(&d, "echo").as_str()
        );
        assert_ne!(
            echo.status.as_ref().map(|s| s.code),
            Some(OtelStatus::Error as i32)
        );
        assert_eq!(step_of(echo), 1);
        let terminate = in_run
            .iter()
            .find(|s| s.name == "execute_tool terminate")
            .expect("execute_tool terminate");
        assert_eq!(step_of(terminate), 2);
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_finish_and_the_daemon_serves_with_the_collector_down() {
    // A loopback port nothing listens on: every export is refused.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("address").port()
    };
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.set_fallback(Reply::terminate());
    let endpoint = format!("http://127.0.0.1:{closed}");
    tokio::task::block_in_place(|| {
        let mut d = daemon(&llm, &endpoint, &[]);
        let ids: Vec<String> = (0..4)
            .map(|i| d.create_run("echoer", &format!("run {i}")))
            .collect();
        for id in &ids {
            let record = d.wait_run(id, Duration::from_secs(60));
            assert_eq!(record["outcome"], "finished", "{record}");
        }
        let (status, body) = d.get("/v1/status");
        assert_eq!(status, 200, "{body}");
        let id = d.create_run("echoer", "one more");
        let record = d.wait_run(&id, Duration::from_secs(60));
        assert_eq!(record["outcome"], "finished", "{record}");
        // The last spans cannot leave; shutdown does not wait for them long.
        assert_eq!(d.stop(), Some(0), "{}", d.log_text());
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn nothing_is_exported_when_the_sdk_is_disabled() {
    for off in [
        ("OTEL_SDK_DISABLED", "true"),
        ("OTEL_TRACES_EXPORTER", "none"),
    ] {
        let receiver = Receiver::start().await;
        let llm = FakeLlm::start().await.expect("fake llm");
        llm.set_fallback(Reply::terminate());
        let endpoint = receiver.endpoint();
        tokio::task::block_in_place(|| {
            let mut d = daemon(&llm, &endpoint, &[off]);
            let id = d.create_run("echoer", "quietly");
            let record = d.wait_run(&id, Duration::from_secs(60));
            assert_eq!(record["outcome"], "finished", "{record}");
            // An exporter would have sent the run's spans at shutdown.
            assert_eq!(d.stop(), Some(0), "{}", d.log_text());
        });
        assert_eq!(receiver.requests(), 0, "{off:?}");
    }
}

/// The fake LLM scripted for a run asking `retried`: a 500 first (the
/// client logs its retry inside the run), then an echo and the end.
async fn retrying_llm() -> FakeLlm {
    let llm = FakeLlm::start().await.expect("fake llm");
    llm.push_for(
        "retried",
        [
            Reply::error(500, "try again"),
            Reply::call("echo", r#"{"text":"hi"}"#),
            Reply::terminate(),
        ],
    );
    llm
}

/// Every line a run logs at `AGENTD_LOG=info` carries its run id: the
/// loop's, the LLM client's retries, the strategy's own (`logging.log`),
/// a guest's stdout. Logs and traces then join on it. Both with traces
/// exported and without: exported, the spans current in a run are
/// OpenTelemetry ones, which the log leaves out.
#[tokio::test(flavor = "multi_thread")]
async fn every_log_line_of_a_run_carries_its_run_id() {
    log_lines_carry_their_run_id(None).await;
    let receiver = Receiver::start().await;
    log_lines_carry_their_run_id(Some(&receiver.endpoint())).await;
    assert!(receiver.requests() > 0, "the runs' spans were exported");
}

async fn log_lines_carry_their_run_id(otlp_endpoint: Option<&str>) {
    const LOGGER: &str = "\n[agents.logger]\nstrategy = \"misbehave\"\ntools = []\nsystem_prompt = \"log-lines 3\"\nmax_steps = 1\n";
    let llm = retrying_llm().await;
    tokio::task::block_in_place(|| {
        // `Daemon` runs `agentd serve` with AGENTD_LOG=info.
        let mut d = Daemon::unstarted(&llm, &format!("{AGENTS}{LOGGER}"));
        match otlp_endpoint {
            Some(endpoint) => d.spawn(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
                ("OTEL_BSP_SCHEDULE_DELAY", "50"),
            ]),
            None => d.spawn(&[]),
        }
        let echoer = d.create_run("echoer", "retried");
        let record = d.wait_run(&echoer, Duration::from_secs(60));
        assert_eq!(record["outcome"], "finished", "{record}");
        let logger = d.create_run("logger", "log");
        d.wait_run(&logger, Duration::from_secs(60));
        assert_eq!(d.stop(), Some(0));
        let log = d.log_text();
        let of = |needle: &str, id: &str| {
            let lines: Vec<&str> = log.lines().filter(|l| l.contains(needle)).collect();
            assert!(!lines.is_empty(), "no `{needle}` line:\n{log}");
            for line in lines {
                assert!(
                    line.contains(&format!("run_id={id}")),
                    "without its run id: {line}\n{log}"
                );
            }
        };
        of("LLM request failed; retrying", &echoer);
        of("misbehave log line", &logger);
        // Between the daemon's start and its stop only the two runs logged,
        // so every line in between is one of theirs.
        let during = log
            .lines()
            .skip_while(|l| !l.contains("agentd listening"))
            .skip(1)
            .take_while(|l| !l.contains("shutting down"));
        // A guest's stdout among them: wasmtime writes it from a task of its
        // own, and the line still names the run.
        let mut lines = 0;
        for line in during {
            lines += 1;
            assert!(
                line.contains(&format!("run_id={echoer}"))
                    || line.contains(&format!("run_id={logger}")),
                "a line of neither run: {line}\n{log}"
            );
        }
        assert!(lines > 0, "no line between start and stop:\n{log}");
        assert!(
            log.contains("stream=\"stdout\""),
            "the guest's stdout is not in the log:\n{log}"
        );
    });
}

/// Under the default filter (`warn`, no `AGENTD_LOG`), a warning inside a
/// run still carries the run's id: the run's span is a `warn` span.
#[tokio::test(flavor = "multi_thread")]
async fn a_warning_of_a_run_carries_its_run_id_at_the_default_level() {
    let llm = retrying_llm().await;
    tokio::task::block_in_place(|| {
        let mut d = Daemon::unstarted(&llm, AGENTS);
        d.spawn_with(&[], |cmd| {
            cmd.env_remove("AGENTD_LOG");
        });
        let echoer = d.create_run("echoer", "retried");
        let record = d.wait_run(&echoer, Duration::from_secs(60));
        assert_eq!(record["outcome"], "finished", "{record}");
        assert_eq!(d.stop(), Some(0));
        let log = d.log_text();
        let retried: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("LLM request failed; retrying"))
            .collect();
        assert!(!retried.is_empty(), "no retry warning:\n{log}");
        for line in retried {
            assert!(
                line.contains(&format!("run_id={echoer}")),
                "without its run id: {line}"
            );
            // One `run{..}`, not the daemon's and the loop's both.
            assert_eq!(line.matches("run{").count(), 1, "{line}");
        }
    });
}
