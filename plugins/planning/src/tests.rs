use super::*;
use agentd_strategy_sdk::PlanStep;
use agentd_strategy_sdk::testing::ScriptedHost;

/// The SDK's scripted host as the planner agent: `planner`, 30 steps.
fn fake_host() -> ScriptedHost {
    let mut host = ScriptedHost::new();
    host.config.name = "planner".to_string();
    host.config.max_steps = 30;
    host
}

/// A host whose run already has this plan.
fn fake_host_with_plan(steps: &[(&str, StepStatus)]) -> ScriptedHost {
    let mut host = fake_host();
    host.plan = Some(Plan {
        title: "Greet".to_string(),
        steps: steps
            .iter()
            .map(|(text, status)| PlanStep {
                text: text.to_string(),
                status: *status,
                notes: None,
            })
            .collect(),
    });
    host
}

trait PlanOf {
    fn plan(&self) -> &Plan;
    fn statuses(&self) -> Vec<StepStatus>;
}

impl PlanOf for ScriptedHost {
    fn plan(&self) -> &Plan {
        self.plan.as_ref().expect("a plan")
    }

    fn statuses(&self) -> Vec<StepStatus> {
        self.plan().steps.iter().map(|step| step.status).collect()
    }
}

/// The plan kept as agentd keeps it, refusing what it refuses.
impl Plans for ScriptedHost {
    fn current_plan(&mut self) -> Option<Plan> {
        self.plan.clone()
    }
    /// agentd's checks (`plan.publish` in the WIT), the step limit among
    /// them; the same plan again is no change.
    fn publish_plan(&mut self, plan: &Plan) -> Result<(), Error> {
        if plan.steps.is_empty() || plan.title.is_empty() {
            return Err(Error::invalid_input("a plan needs a title and steps"));
        }
        if plan.steps.len() > 100 {
            return Err(Error::invalid_input(format!(
                "a plan has at most 100 steps; this one has {}",
                plan.steps.len()
            )));
        }
        if self.plan.as_ref() != Some(plan) {
            self.plan = Some(plan.clone());
            self.published.push(plan.clone());
        }
        Ok(())
    }
}

fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: id.to_string(),
        name: name.to_string(),
        arguments: arguments.to_string(),
    }
}

const CREATE: &str = r#"{"command":"create","title":"Greet","steps":["Say hello","Say goodbye"]}"#;

fn names(tools: &[ToolSpec]) -> Vec<&str> {
    tools.iter().map(|tool| tool.name.as_str()).collect()
}

#[test]
fn the_first_step_asks_for_a_plan_and_publishes_it() {
    let mut host = fake_host().reply(Some("Here is my plan"), &[("planning", CREATE)]);
    let result = step(&mut host).expect("step");

    assert!(
        result.starts_with("Plan created successfully\n\nPlan: Greet\n"),
        "{result}"
    );
    let request = &host.requests[0];
    assert_eq!(
        request.messages,
        [
            Message::system(PLAN_SYSTEM_PROMPT),
            Message::user(
                "Create a reasonable plan with clear steps to accomplish the task: hello"
            ),
        ]
    );
    assert_eq!(names(&request.tools), ["planning"]);
    assert_eq!(request.tool_choice, ToolChoice::Required);

    assert_eq!(host.published.len(), 1);
    assert_eq!(host.plan().title, "Greet");
    let texts: Vec<_> = host.plan().steps.iter().map(|s| s.text.as_str()).collect();
    assert_eq!(texts, ["Say hello", "Say goodbye"]);
    assert_eq!(host.statuses(), [StepStatus::NotStarted; 2]);

    // The call and its answer are in memory, paired.
    assert_eq!(
        host.added(),
        [
            Message::assistant_with_tools(
                Some("Here is my plan".to_string()),
                vec![call("call_0", "planning", CREATE)]
            ),
            Message::tool(
                format!("Observed output of cmd `planning` executed:\n{result}"),
                "call_0",
                "planning"
            ),
        ]
    );
    assert!(!host.finished);
    assert!(
        host.invoked.is_empty(),
        "the planning tool is the strategy's"
    );
}

#[test]
fn one_plan_per_answer_the_other_calls_still_answered() {
    let mut host = fake_host().reply(None, &[("planning", CREATE), ("planning", CREATE)]);
    step(&mut host).expect("step");
    assert_eq!(host.published.len(), 1);
    let answers: Vec<_> = host.added()[1..].iter().map(|m| m.text()).collect();
    assert_eq!(answers.len(), 2);
    assert!(answers[1].starts_with("Error: not run"), "{answers:?}");
}

fn assert_default_plan(host: &ScriptedHost, result: &str) {
    assert_eq!(host.published.len(), 1);
    assert_eq!(host.plan().title, "Plan for: hello");
    let texts: Vec<_> = host.plan().steps.iter().map(|s| s.text.as_str()).collect();
    assert_eq!(texts, DEFAULT_STEPS);
    assert!(
        result.starts_with("The model gave no valid plan (") && result.contains("default plan"),
        "{result}"
    );
    assert!(
        host.logs
            .iter()
            .any(|l| l.starts_with("warn: no valid plan from the model")),
        "{:?}",
        host.logs
    );
}

#[test]
fn no_call_falls_back_to_the_default_plan() {
    let mut host = fake_host().text("1. say hi 2. leave");
    let result = step(&mut host).expect("step");
    assert_default_plan(&host, &result);
    assert!(result.contains("the model called no tool"), "{result}");
    assert!(host.added().is_empty(), "nothing of a prose plan is kept");
}

#[test]
fn invalid_arguments_fall_back_to_the_default_plan_and_are_answered() {
    let mut host = fake_host().reply(None, &[("planning", r#"{"command":"create","#)]);
    let result = step(&mut host).expect("step");
    assert_default_plan(&host, &result);
    assert_eq!(
        host.added()[1],
        Message::tool(
            "Error: Error parsing arguments for planning: Invalid JSON format",
            "call_0",
            "planning"
        )
    );
}

#[test]
fn a_call_that_is_not_a_valid_create_falls_back() {
    for arguments in [
        r#"{"command":"get"}"#,
        r#"{"command":"create","title":"T","steps":[]}"#,
        r#"{"command":"create","steps":["a"]}"#,
        "",
    ] {
        let mut host = fake_host().reply(None, &[("planning", arguments)]);
        let result = step(&mut host).expect("step");
        assert_default_plan(&host, &result);
        let answer = host.added()[1].text();
        assert!(answer.starts_with("Error: "), "{arguments}: {answer}");
    }
    let mut host = fake_host().reply(None, &[("bash", "{}")]);
    let result = step(&mut host).expect("step");
    assert_default_plan(&host, &result);
    assert_eq!(host.added()[1].text(), "Error: Unknown tool 'bash'");
}

#[test]
fn a_plan_the_host_refuses_falls_back_with_its_reason() {
    let steps: Vec<String> = (0..101).map(|i| format!("step {i}")).collect();
    let arguments = serde_json::json!({"command": "create", "title": "Big", "steps": steps});
    let mut host = fake_host().reply(None, &[("planning", &arguments.to_string())]);
    let result = step(&mut host).expect("step");
    assert_default_plan(&host, &result);
    assert!(result.contains("at most 100 steps"), "{result}");
}

#[test]
fn the_default_title_is_the_request_cut_at_50_characters() {
    assert_eq!(default_title("short"), "Plan for: short");
    let long = "é".repeat(60);
    assert_eq!(
        default_title(&long),
        format!("Plan for: {}...", "é".repeat(50))
    );
    assert_eq!(
        default_title(&"x".repeat(50)),
        format!("Plan for: {}", "x".repeat(50))
    );
}

#[test]
fn a_token_limit_at_planning_ends_the_run() {
    let mut host = fake_host().fail(ChatError::TokenLimit("used 100 of 100".into()));
    step(&mut host).expect("step");
    assert!(host.finished);
    assert!(host.plan.is_none());
    assert!(
        host.added()[0]
            .text()
            .starts_with("Maximum token limit reached")
    );
}

#[test]
fn an_llm_failure_at_planning_fails_the_step() {
    let error = Error::new(ErrorCode::LlmFailed, "503");
    let mut host = fake_host().fail(ChatError::Failed(error.clone()));
    assert_eq!(step(&mut host), Err(error));
    assert!(host.plan.is_none());
}

#[test]
fn the_current_step_goes_in_progress_and_is_the_prompt() {
    let mut host = fake_host_with_plan(&[
        ("Say hello", StepStatus::Completed),
        ("Say goodbye", StepStatus::NotStarted),
        ("Leave", StepStatus::NotStarted),
    ])
    .reply(None, &[("echo", r#"{"text":"bye"}"#)])
    .result("echo", Ok("bye"));
    let result = step(&mut host).expect("step");
    assert_eq!(result, "Observed output of cmd `echo` executed:\nbye");

    assert_eq!(host.published.len(), 1, "in progress, and no more");
    assert_eq!(
        host.statuses(),
        [
            StepStatus::Completed,
            StepStatus::InProgress,
            StepStatus::NotStarted
        ]
    );
    let request = &host.requests[0];
    assert_eq!(request.messages[0], Message::system("be brief"));
    assert_eq!(names(&request.tools), ["echo", "terminate", "planning"]);
    assert_eq!(request.tool_choice, ToolChoice::Auto);
    let prompt = request.messages.last().expect("prompt").text();
    assert!(
        prompt.starts_with("CURRENT PLAN STATUS:\nPlan: Greet\n"),
        "{prompt}"
    );
    assert!(prompt.contains("1. [→] Say goodbye\n"), "{prompt}");
    assert!(
        prompt.ends_with("YOUR CURRENT TASK:\nYou are now working on step 1: \"Say goodbye\"\n\nPlease only execute this current step using the appropriate tools. When you're done, provide a summary of what you accomplished."),
        "{prompt}"
    );
    assert_eq!(host.added()[0], Message::user(prompt));
    assert_eq!(host.invoked, [call("call_0", "echo", r#"{"text":"bye"}"#)]);
    assert!(!host.finished);
}

#[test]
fn an_answer_without_tool_calls_completes_the_step() {
    let mut host = fake_host_with_plan(&[
        ("Say hello", StepStatus::NotStarted),
        ("Say goodbye", StepStatus::NotStarted),
    ])
    .text("I said hello.");
    assert_eq!(step(&mut host), Ok("I said hello.".to_string()));
    assert_eq!(host.published.len(), 2);
    assert_eq!(host.published[0].steps[0].status, StepStatus::InProgress);
    assert_eq!(
        host.plan().steps[0],
        PlanStep {
            text: "Say hello".to_string(),
            status: StepStatus::Completed,
            notes: Some("I said hello.".to_string()),
        }
    );
    assert_eq!(host.plan().steps[1].status, StepStatus::NotStarted);
    assert!(!host.finished, "a step is left");
    assert_eq!(host.requests.len(), 1, "no summary yet");
}

#[test]
fn long_reports_are_shortened_in_the_notes() {
    let report = "word ".repeat(200);
    let mut host =
        fake_host_with_plan(&[("a", StepStatus::InProgress), ("b", StepStatus::NotStarted)])
            .text(&report);
    step(&mut host).expect("step");
    let notes = host.plan().steps[0].notes.clone().expect("notes");
    assert_eq!(notes.chars().count(), NOTES_CHARS + 1);
    assert!(notes.ends_with('…'));
}

#[test]
fn an_empty_answer_completes_nothing() {
    let mut host = fake_host_with_plan(&[("a", StepStatus::NotStarted)]).reply(Some("  "), &[]);
    step(&mut host).expect("step");
    assert_eq!(host.statuses(), [StepStatus::InProgress]);
    assert!(!host.finished);
}

#[test]
fn the_model_marks_steps_through_the_planning_tool() {
    let mark =
        r#"{"command":"mark_step","step_index":1,"step_status":"blocked","step_notes":"no door"}"#;
    let mut host =
        fake_host_with_plan(&[("a", StepStatus::NotStarted), ("b", StepStatus::NotStarted)])
            .reply(None, &[("planning", mark)]);
    let result = step(&mut host).expect("step");
    assert!(
        result.starts_with("Observed output of cmd `planning` executed:\nStep 1 updated in the plan.\n\nPlan: Greet"),
        "{result}"
    );
    assert!(result.contains("1. [!] b\n   Notes: no door\n"), "{result}");
    assert_eq!(
        host.statuses(),
        [StepStatus::InProgress, StepStatus::Blocked]
    );
    assert_eq!(host.plan().steps[1].notes.as_deref(), Some("no door"));
    assert!(host.invoked.is_empty());
}

#[test]
fn planning_mistakes_are_observations() {
    let cases = [
        (
            r#"{"command":"mark_step","step_index":5,"step_status":"completed"}"#,
            "Invalid step_index: 5. Valid indices range from 0 to 1.",
        ),
        (
            r#"{"command":"mark_step","step_index":-1}"#,
            "Invalid step_index: -1. Valid indices range from 0 to 1.",
        ),
        (
            r#"{"command":"mark_step","step_index":0,"step_status":"done"}"#,
            "Invalid step_status: done. Valid statuses are: not_started, in_progress, completed, blocked",
        ),
        (
            r#"{"command":"mark_step"}"#,
            "Parameter `step_index` is required for command: mark_step",
        ),
        (
            CREATE,
            "A plan already exists for this run. Use 'update' to modify it.",
        ),
        (
            r#"{"command":"delete"}"#,
            "Command delete is not available: a run has exactly one plan.",
        ),
        (
            r#"{"command":"fly"}"#,
            "Unrecognized command: fly. Allowed commands are: create, update, get, mark_step",
        ),
        ("[1]", "The arguments must be a JSON object"),
        (
            "{not json",
            "Error parsing arguments for planning: Invalid JSON format",
        ),
    ];
    for (arguments, message) in cases {
        let mut host =
            fake_host_with_plan(&[("a", StepStatus::NotStarted), ("b", StepStatus::NotStarted)])
                .reply(None, &[("planning", arguments)]);
        let result = step(&mut host).expect("step");
        assert!(
            result.starts_with("Error: ") && result.contains(message),
            "{arguments}: {result}"
        );
        assert_eq!(host.added()[2].text(), result, "the model reads it");
        assert_eq!(host.published.len(), 1, "{arguments}: only in_progress");
    }
}

#[test]
fn mark_step_takes_an_index_as_text() {
    let mut host =
        fake_host_with_plan(&[("a", StepStatus::NotStarted), ("b", StepStatus::NotStarted)]);
    let result = tool::invoke(
        &mut &mut host,
        r#"{"command":"mark_step","step_index":"1","step_status":"completed"}"#,
    );
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(
        host.statuses(),
        [StepStatus::NotStarted, StepStatus::Completed]
    );
}

#[test]
fn update_keeps_the_status_of_unchanged_steps() {
    let mut host =
        fake_host_with_plan(&[("a", StepStatus::Completed), ("b", StepStatus::InProgress)]);
    host.plan.as_mut().expect("plan").steps[0].notes = Some("done a".into());
    let result = tool::invoke(
        &mut &mut host,
        r#"{"command":"update","title":"Greet twice","steps":["a","c","d"]}"#,
    )
    .expect("update");
    assert!(
        result.starts_with("Plan updated successfully\n\nPlan: Greet twice\n"),
        "{result}"
    );
    assert_eq!(host.plan().title, "Greet twice");
    assert_eq!(
        host.statuses(),
        [
            StepStatus::Completed,
            StepStatus::NotStarted,
            StepStatus::NotStarted
        ]
    );
    assert_eq!(host.plan().steps[0].notes.as_deref(), Some("done a"));
    // Neither title nor steps: the plan as it was, no new event.
    tool::invoke(&mut &mut host, r#"{"command":"update"}"#).expect("update");
    assert_eq!(host.published.len(), 1);
}

#[test]
fn get_shows_the_plan_and_needs_one() {
    let mut host = fake_host();
    let error =
        tool::invoke(&mut &mut host, r#"{"command":"get","plan_id":"x"}"#).expect_err("no plan");
    assert_eq!(error.code, ErrorCode::InvalidInput);
    assert!(
        error.message.starts_with("No plan exists yet"),
        "{}",
        error.message
    );

    let mut host = fake_host_with_plan(&[("a", StepStatus::Completed)]);
    let plan = tool::invoke(&mut &mut host, r#"{"command":"get"}"#).expect("get");
    assert_eq!(plan, tool::format_plan(host.plan()));
}

#[test]
fn the_plan_reads_as_openmanus_formats_it() {
    let mut host = fake_host_with_plan(&[
        ("Say hello", StepStatus::Completed),
        ("Say goodbye", StepStatus::InProgress),
        ("Wave", StepStatus::Blocked),
        ("Leave", StepStatus::NotStarted),
    ]);
    host.plan.as_mut().expect("plan").steps[0].notes = Some("said it".into());
    assert_eq!(
        tool::format_plan(host.plan()),
        "Plan: Greet\n===========\n\n\
         Progress: 1/4 steps completed (25.0%)\n\
         Status: 1 completed, 1 in progress, 1 blocked, 1 not started\n\n\
         Steps:\n\
         0. [✓] Say hello\n   Notes: said it\n\
         1. [→] Say goodbye\n\
         2. [!] Wave\n\
         3. [ ] Leave\n"
    );
}

#[test]
fn the_last_completion_brings_the_summary_and_the_finish() {
    let mut host = fake_host_with_plan(&[
        ("Say hello", StepStatus::Completed),
        ("Say goodbye", StepStatus::InProgress),
    ])
    .text("I said goodbye.")
    .text("Both greetings were said.");
    assert_eq!(step(&mut host), Ok("Both greetings were said.".to_string()));
    assert_eq!(host.statuses(), [StepStatus::Completed; 2]);
    assert!(host.finished);

    let summary = &host.requests[1];
    assert!(summary.tools.is_empty());
    assert_eq!(summary.messages[0], Message::system(SUMMARY_SYSTEM_PROMPT));
    let prompt = summary.messages[1].text();
    assert!(
        prompt.starts_with(
            "The plan has been completed. Here is the final plan status:\n\nPlan: Greet\n"
        ),
        "{prompt}"
    );
    assert!(
        prompt.contains("1. [✓] Say goodbye\n   Notes: I said goodbye.\n"),
        "{prompt}"
    );
    assert!(prompt.ends_with(
        "\n\nPlease provide a summary of what was accomplished and any final thoughts."
    ));
    assert_eq!(
        host.memory.last(),
        Some(&Message::assistant("Both greetings were said."))
    );
}

#[test]
fn blocked_steps_count_as_done() {
    let mark = r#"{"command":"mark_step","step_index":1,"step_status":"blocked"}"#;
    let mut host =
        fake_host_with_plan(&[("a", StepStatus::Completed), ("b", StepStatus::NotStarted)])
            .reply(None, &[("planning", mark)])
            .text("a was done; b could not be.");
    assert_eq!(
        step(&mut host),
        Ok("a was done; b could not be.".to_string())
    );
    assert_eq!(
        host.statuses(),
        [StepStatus::Completed, StepStatus::Blocked]
    );
    assert!(host.finished);
}

#[test]
fn a_failed_summary_falls_back_to_plan_completed() {
    let mut host = fake_host_with_plan(&[("a", StepStatus::InProgress)])
        .text("did a")
        .fail(ChatError::Failed(Error::new(ErrorCode::LlmFailed, "503")));
    assert_eq!(step(&mut host), Ok(SUMMARY_FALLBACK.to_string()));
    assert_eq!(
        host.memory.last(),
        Some(&Message::assistant("Plan completed."))
    );
    assert!(host.finished);
    assert!(
        host.logs.iter().any(|l| l.contains("503")),
        "{:?}",
        host.logs
    );
}

#[test]
fn a_plan_done_at_the_start_of_a_step_is_summarised() {
    let mut host = fake_host_with_plan(&[("a", StepStatus::Completed), ("b", StepStatus::Blocked)])
        .text("summary");
    assert_eq!(step(&mut host), Ok("summary".to_string()));
    assert_eq!(host.requests.len(), 1);
    assert!(host.published.is_empty());
    assert!(host.finished);
}

#[test]
fn terminate_ends_the_run_without_a_summary() {
    let mut host =
        fake_host_with_plan(&[("a", StepStatus::NotStarted), ("b", StepStatus::NotStarted)])
            .reply(None, &[("terminate", r#"{"status":"success"}"#)])
            .result(
                "terminate",
                Ok("The interaction has been completed with status: success"),
            );
    step(&mut host).expect("step");
    assert!(host.finished);
    assert_eq!(host.requests.len(), 1, "no summary");
    assert_eq!(
        host.statuses(),
        [StepStatus::InProgress, StepStatus::NotStarted]
    );
    assert_eq!(host.invoked.len(), 1);
}

#[test]
fn the_stuck_warning_stays_in_front_of_the_step_prompt() {
    let mut host =
        fake_host_with_plan(&[("a", StepStatus::NotStarted), ("b", StepStatus::NotStarted)])
            .text("did a");
    host.config.next_step_prompt = Some("Observed duplicate responses.".to_string());
    step(&mut host).expect("step");
    let prompt = host.added()[0].text();
    assert!(
        prompt.starts_with("Observed duplicate responses.\nCURRENT PLAN STATUS:\n"),
        "{prompt}"
    );
}

#[test]
fn an_agent_tool_named_planning_is_hidden() {
    let mut host =
        fake_host_with_plan(&[("a", StepStatus::NotStarted), ("b", StepStatus::NotStarted)])
            .text("did a");
    host.tools.push(ToolSpec::new("planning", "mine", "{}"));
    step(&mut host).expect("step");
    let tools = &host.requests[0].tools;
    assert_eq!(names(tools), ["echo", "terminate", "planning"]);
    assert_eq!(tools[2], tool::spec());
    assert!(host.logs.iter().any(|l| l.starts_with("warn: ")));
}

#[test]
fn the_tool_parameters_are_openmanus_commands_as_json_schema() {
    let spec = tool::spec();
    let schema: serde_json::Value = serde_json::from_str(&spec.parameters).expect("JSON");
    assert_eq!(schema["type"], "object");
    assert_eq!(
        schema["properties"]["command"]["enum"],
        serde_json::json!(["create", "update", "get", "mark_step"])
    );
    assert_eq!(
        schema["properties"]["step_status"]["enum"],
        serde_json::json!(["not_started", "in_progress", "completed", "blocked"])
    );
    assert_eq!(schema["required"], serde_json::json!(["command"]));
    assert!(schema["properties"].get("plan_id").is_none());
    assert!(spec.description.contains("no plan_id"));
}

#[test]
fn defaults_leave_the_step_prompt_to_the_strategy() {
    let d = <Planning as Guest>::defaults();
    assert_eq!(d.system_prompt.as_deref(), Some(SYSTEM_PROMPT));
    assert_eq!(d.next_step_prompt, None);
    assert_eq!(d.max_steps, Some(30));
    assert_eq!(d.tool_choice, Some(ToolChoice::Auto));
    assert_eq!(d.special_tools, Some(vec!["terminate".to_string()]));
}
