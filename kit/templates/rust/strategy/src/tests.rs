//! Native tests: `cargo test` runs `step` on your machine against a fake
//! host that answers with scripted model replies.

use super::*;
use agentd_strategy_sdk::{ErrorCode, Role, Usage};
use std::collections::VecDeque;

#[derive(Default)]
struct FakeHost {
    replies: VecDeque<Message>,
    memory: Vec<Message>,
    invoked: Vec<String>,
    finished: bool,
}

impl Host for FakeHost {
    fn config(&mut self) -> AgentConfig {
        AgentConfig {
            name: "test".into(),
            system_prompt: Some("be brief".into()),
            next_step_prompt: None,
            current_step: 1,
            max_steps: 10,
            max_observe: None,
            tool_choice: ToolChoice::Auto,
            special_tools: vec!["terminate".into()],
        }
    }
    fn memory(&mut self) -> Vec<Message> {
        self.memory.clone()
    }
    fn add_message(&mut self, message: Message) -> Result<(), Error> {
        self.memory.push(message);
        Ok(())
    }
    fn chat(&mut self, request: &ChatRequest) -> Result<ChatResponse, ChatError> {
        assert_eq!(request.messages[0].role, Role::System);
        let message = self.replies.pop_front().ok_or_else(|| {
            ChatError::Failed(Error::new(ErrorCode::LlmFailed, "no reply scripted"))
        })?;
        Ok(ChatResponse {
            message,
            usage: Usage {
                prompt_tokens: 1,
                completion_tokens: 1,
            },
            finish_reason: None,
        })
    }
    fn tools(&mut self) -> Vec<ToolSpec> {
        Vec::new()
    }
    fn invoke_tool(&mut self, call: &ToolCall) -> Result<String, Error> {
        self.invoked.push(call.name.clone());
        Ok(format!("ran {}", call.name))
    }
    fn finish(&mut self) {
        self.finished = true;
    }
}

fn call(name: &str) -> ToolCall {
    ToolCall {
        id: format!("call-{name}"),
        name: name.into(),
        arguments: "{}".into(),
    }
}

#[test]
fn tool_calls_are_run_and_answered() {
    let mut host = FakeHost {
        memory: vec![Message::user("do it")],
        replies: VecDeque::from([Message::assistant_with_tools(None, vec![call("count")])]),
        ..FakeHost::default()
    };
    let result = step(&mut host).unwrap();
    assert_eq!(result, "count: ran count");
    assert_eq!(host.invoked, ["count"]);
    assert!(!host.finished);
    let answer = host.memory.last().unwrap();
    assert_eq!(answer.role, Role::Tool);
    assert_eq!(answer.tool_call_id.as_deref(), Some("call-count"));
}

#[test]
fn a_special_tool_or_a_plain_answer_finishes() {
    let mut host = FakeHost {
        memory: vec![Message::user("do it")],
        replies: VecDeque::from([
            Message::assistant_with_tools(None, vec![call("terminate")]),
            Message::assistant("all done"),
        ]),
        ..FakeHost::default()
    };
    step(&mut host).unwrap();
    assert!(host.finished);
    host.finished = false;
    assert_eq!(step(&mut host).unwrap(), "all done");
    assert!(host.finished);
}
