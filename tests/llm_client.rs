//! The LLM client against what real servers and proxies do: answers in every
//! shape they send. Runs go through the real `toolcall` strategy component and
//! the scripted fake LLM.

mod common;

use std::time::Duration;

use agentd::agent::{Message, Outcome, Role, RunRecord};
use agentd::llm::{ChatRequest, FinishReason, LlmClient, LlmSettings, ToolChoice};
use agentd::testkit::{FakeLlm, Reply};
use common::{tool_outputs, toolcall_agent, Harness};
use serde_json::json;

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
