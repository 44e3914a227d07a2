//! The LLM client against what real servers and proxies do: answers in every
//! shape they send, and retries as the README states them. Runs go through the
//! real `toolcall` strategy component and the scripted fake LLM.

mod common;

use std::time::{Duration, SystemTime};

use agentd::agent::{Message, Outcome, Role, RunOptions, RunRecord};
use agentd::llm::{ChatRequest, FinishReason, LlmClient, LlmError, LlmSettings, ToolChoice};
use agentd::testkit::{FakeLlm, Reply};
use common::{tool_outputs, toolcall_agent, Harness};
use serde_json::json;

async fn run_with(h: &Harness, settings: LlmSettings, request: &str) -> RunRecord {
    h.agent_with(toolcall_agent(5), settings)
        .run(request, RunOptions::default())
        .await
        .expect("run")
}

fn assistant_texts(r: &RunRecord) -> Vec<String> {
    r.messages
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .map(|m| m.content_str().to_string())
        .collect()
}

// ---- Responses from real servers and proxies parse ----

#[tokio::test]
async fn a_text_answer_with_null_fields_finishes_normally() {
    let h = Harness::new().await;
    h.llm.push_all([
        // LiteLLM's text-only answer.
        Reply::message(json!({"role": null, "content": "Hello", "tool_calls": null,
                              "function_call": null, "refusal": null})),
        Reply::Choice(json!({"index": 0, "finish_reason": null, "message": {
            "role": "assistant", "content": null,
            "tool_calls": [{"id": null, "type": null,
                            "function": {"name": "terminate", "arguments": "{\"status\":\"success\"}"}}]}})),
    ]);
    let r = h.run(toolcall_agent(5), "greet").await;
    assert_eq!(r.outcome, Outcome::Finished, "{r:?}");
    assert_eq!(r.steps, 2);
    assert!(r.result.starts_with("Step 1: Hello\n"), "{}", r.result);
    assert_eq!(assistant_texts(&r)[0], "Hello");
    // What was stored is sent back as a valid conversation.
    assert!(h.llm.rejected().is_empty(), "{:?}", h.llm.rejected());
}

#[tokio::test]
async fn content_parts_are_joined_into_the_stored_answer() {
    let h = Harness::new().await;
    h.llm.push_all([
        Reply::message(json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": [{"type": "text", "text": "let me see"}]},
            {"type": "text", "text": "Part one, "},
            {"type": "text", "text": "part two."},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]})),
        Reply::terminate(),
    ]);
    let r = h.run(toolcall_agent(5), "parts").await;
    assert_eq!(r.outcome, Outcome::Finished, "{r:?}");
    let expected = "[thinking part omitted]\nPart one, part two.\n[image_url part omitted]";
    assert_eq!(assistant_texts(&r)[0], expected);
    let second = &h.llm.requests()[1];
    let sent = second["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "assistant"))
        .expect("the answer is sent back");
    assert_eq!(sent["content"], expected, "sent back as one string");
}

#[tokio::test]
async fn a_refusal_is_the_stored_answer_and_the_step_observes_it() {
    let h = Harness::new().await;
    h.llm.push_all([
        Reply::message(json!({"role": "assistant", "content": null,
                              "refusal": "I can't help with that."})),
        Reply::terminate(),
    ]);
    let r = h.run(toolcall_agent(5), "something forbidden").await;
    assert_eq!(r.outcome, Outcome::Finished, "{r:?}");
    assert_eq!(assistant_texts(&r)[0], "I can't help with that.");
    assert!(
        r.result.starts_with("Step 1: I can't help with that.\n"),
        "{}",
        r.result
    );
}

#[tokio::test]
async fn a_legacy_function_call_runs_the_tool() {
    let h = Harness::new().await;
    h.llm.push_all([
        Reply::message(json!({"role": "assistant", "content": null, "tool_calls": null,
            "function_call": {"name": "echo", "arguments": "{\"text\":\"from the legacy field\"}"}})),
        Reply::message(json!({"role": "assistant", "content": null,
            "function_call": {"name": "terminate", "arguments": "{\"status\":\"success\"}"}})),
    ]);
    let r = h.run(toolcall_agent(5), "legacy").await;
    assert_eq!(r.outcome, Outcome::Finished, "{r:?}");
    assert_eq!(
        tool_outputs(&r)[0],
        "Observed output of cmd `echo` executed:\nfrom the legacy field"
    );
    let second = &h.llm.requests()[1];
    let messages = second["messages"].as_array().expect("messages");
    let call = messages
        .iter()
        .find(|m| m["role"] == "assistant")
        .expect("the call is sent back");
    assert_eq!(call["tool_calls"][0]["id"], "call_0");
    assert_eq!(call["tool_calls"][0]["function"]["name"], "echo");
    assert!(messages
        .iter()
        .any(|m| m["role"] == "tool" && m["tool_call_id"] == "call_0"));
    assert!(h.llm.rejected().is_empty(), "{:?}", h.llm.rejected());
}

#[tokio::test]
async fn finish_reason_is_exposed() {
    let llm = FakeLlm::start().await.expect("fake LLM");
    let settings = settings_for(&llm);
    let client = LlmClient::new(settings).expect("client");
    let ask = || ChatRequest {
        messages: std::slice::from_ref(&USER),
        tools: &[],
        tool_choice: ToolChoice::Auto,
    };
    llm.push_all([
        Reply::Choice(
            json!({"message": {"role": "assistant", "content": "The answer is cut sh"},
                             "finish_reason": "length"}),
        ),
        Reply::text("done"),
        Reply::Choice(json!({"message": {"content": "x"}, "finish_reason": "eos"})),
    ]);
    let cut = client.chat(ask()).await.expect("answer");
    assert_eq!(cut.finish_reason, Some(FinishReason::Length));
    assert_eq!(cut.message.content_str(), "The answer is cut sh");
    let whole = client.chat(ask()).await.expect("answer");
    assert_eq!(whole.finish_reason, Some(FinishReason::Stop));
    let other = client.chat(ask()).await.expect("answer");
    assert_eq!(other.finish_reason, Some(FinishReason::Other("eos".into())));
}

static USER: std::sync::LazyLock<Message> = std::sync::LazyLock::new(|| Message::user("hi"));

fn settings_for(llm: &FakeLlm) -> LlmSettings {
    LlmSettings {
        model: "fake".into(),
        base_url: llm.base_url(),
        api_key: None,
        max_tokens: None,
        temperature: None,
        max_input_tokens: None,
        request_timeout: Duration::from_secs(10),
        retry: agentd::llm::RetryPolicy {
            initial_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(200),
            ..Default::default()
        },
    }
}

// ---- Retries that match the documentation ----

#[tokio::test]
async fn an_http_date_retry_after_is_honoured() {
    let h = Harness::new().await;
    let started = SystemTime::now();
    let at = httpdate::fmt_http_date(started + Duration::from_secs(2));
    h.llm.push_all([
        Reply::Error {
            status: 503,
            message: "warming up".into(),
            retry_after: Some(at),
        },
        Reply::terminate(),
    ]);
    let r = h.run(toolcall_agent(3), "wait for the date").await;
    assert_eq!(r.outcome, Outcome::Finished, "{r:?}");
    assert_eq!(h.llm.requests().len(), 2, "one 503, then the retry");
    // Lower bound only (the date has one-second resolution): the retry did
    // not come before the server asked, as the 10 ms backoff would have.
    let waited = SystemTime::now()
        .duration_since(started)
        .unwrap_or_default();
    assert!(waited >= Duration::from_secs(1), "retried after {waited:?}");
}

#[tokio::test]
async fn request_timeout_and_conflict_statuses_are_retried() {
    let h = Harness::new().await;
    h.llm.push_all([
        Reply::error(408, "request timeout"),
        Reply::error(409, "conflict"),
        Reply::terminate(),
    ]);
    let r = h.run(toolcall_agent(3), "retry 408 and 409").await;
    assert_eq!(r.outcome, Outcome::Finished, "{r:?}");
    assert_eq!(h.llm.requests().len(), 3);
}

#[tokio::test]
async fn a_retry_after_beyond_retry_max_wait_fails_naming_the_key() {
    let h = Harness::new().await;
    h.llm.push_all([
        Reply::Error {
            status: 429,
            message: "quota resets in ten minutes".into(),
            retry_after: Some("600".into()),
        },
        Reply::terminate(),
    ]);
    let mut settings = h.settings();
    settings.retry.max_wait = Duration::from_secs(1);
    let r = run_with(&h, settings, "too long a wait").await;
    assert_eq!(r.outcome, Outcome::Error, "{r:?}");
    assert_eq!(h.llm.requests().len(), 1, "not retried early");
    let err = r.error.expect("error");
    assert!(
        err.contains("quota resets in ten minutes")
            && err.contains("after 600 s")
            && err.contains("[llm] retry_max_wait"),
        "{err}"
    );
}

#[tokio::test]
async fn a_timed_out_request_is_tried_one_plus_timeout_retries_times() {
    for timeout_retries in [0, 1, 2] {
        let h = Harness::new().await;
        h.llm.set_fallback(Reply::Delayed(
            Duration::from_secs(5),
            Box::new(Reply::terminate()),
        ));
        let mut settings = h.settings();
        settings.request_timeout = Duration::from_millis(300);
        settings.retry.timeout_retries = timeout_retries;
        assert_eq!(settings.retry.max_retries, 3, "more than timeout_retries");
        let r = run_with(&h, settings, "slow model").await;
        assert_eq!(r.outcome, Outcome::Error, "{r:?}");
        assert!(
            r.error.as_deref().unwrap_or("").contains("timed out"),
            "{r:?}"
        );
        assert_eq!(
            h.llm.requests().len(),
            1 + timeout_retries as usize,
            "timeout_retries = {timeout_retries}"
        );
    }
}

#[tokio::test]
async fn a_malformed_base_url_is_refused_before_any_request() {
    for url in [
        "localhost:11434/v1",
        "ftp://example.com/v1",
        "http://",
        "api.openai.com/v1",
    ] {
        let settings = LlmSettings {
            base_url: url.into(),
            ..settings_for(&FakeLlm::start().await.expect("fake LLM"))
        };
        match LlmClient::new(settings) {
            Err(LlmError::NotConfigured(msg)) => {
                assert!(msg.contains(&format!("base_url `{url}`")), "{msg}")
            }
            Err(other) => panic!("{url}: expected NotConfigured, got {other}"),
            Ok(_) => panic!("{url}: accepted"),
        }
    }
}
