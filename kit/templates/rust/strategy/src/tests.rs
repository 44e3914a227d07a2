//! Native tests: `cargo test` runs `step` on your machine against the SDK's
//! scripted host, whose model replies from a script and whose tools answer
//! from a table, and which records everything the step did.

use super::*;
use agentd_strategy_sdk::testing::ScriptedHost;
use agentd_strategy_sdk::{Role, ToolCall};

fn call(name: &str) -> ToolCall {
    ToolCall {
        id: format!("call-{name}"),
        name: name.into(),
        arguments: "{}".into(),
    }
}

#[test]
fn tool_calls_are_run_and_answered() {
    let mut host = ScriptedHost::new()
        .message(Message::assistant_with_tools(None, vec![call("count")]))
        .result("count", Ok("ran count"));
    host.memory = vec![Message::user("do it")];
    let result = step(&mut host).unwrap();
    assert_eq!(result, "count: ran count");
    assert_eq!(host.requests[0].messages[0].role, Role::System);
    assert_eq!(host.invoked, [call("count")]);
    assert!(!host.finished);
    let answer = host.memory.last().unwrap();
    assert_eq!(answer.role, Role::Tool);
    assert_eq!(answer.tool_call_id.as_deref(), Some("call-count"));
}

#[test]
fn a_special_tool_or_a_plain_answer_finishes() {
    let mut host = ScriptedHost::new()
        .message(Message::assistant_with_tools(None, vec![call("terminate")]))
        .text("all done");
    host.memory = vec![Message::user("do it")];
    step(&mut host).unwrap();
    assert!(host.finished);
    host.finished = false;
    assert_eq!(step(&mut host).unwrap(), "all done");
    assert!(host.finished);
    assert!(
        host.requests
            .iter()
            .all(|request| request.messages[0].role == Role::System)
    );
}
