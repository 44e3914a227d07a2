//! OpenManus's `PlanningFlow` as an agentd strategy: the first step asks the
//! model for a plan; each later step carries out the plan's current step
//! with the agent's tools, by `toolcall`'s method (`toolcall-core`: think,
//! then act), and marks its progress; when every step is completed or
//! blocked, the model summarises the plan and the run finishes.
//!
//! OpenManus's flow loops over the plan inside one `execute()`, running a
//! whole agent (`executor.run`) per plan step. Here a run's steps are the
//! host's (its step limit, deadline, stuck detection and checkpoints hold
//! for each), so one agentd step is one step of that loop: the plan's
//! creation, one think/act round on the current plan step, or the summary
//! (which comes in the step that completes the last plan step).
//!
//! The plan lives in the host (`plan::current`, `plan::publish`), never in
//! this instance: the host records each change as a `plan_changed` event and
//! keeps it in the run record, and a resumed run carries on with its
//! predecessor's plan. The model sees and changes it through the `planning`
//! tool ([`tool`]), which [`PlanningHost`] adds to the agent's tools.
//!
//! The prompts are OpenManus's (`app/flow/planning.py`), quoted.

use agentd_strategy_sdk::host::{Host, Imports};
use agentd_strategy_sdk::rules;
use agentd_strategy_sdk::{
    AgentConfig, ChatError, ChatRequest, ChatResponse, Defaults, Error, ErrorCode, Guest,
    MemoryChatRequest, Message, Metadata, Plan, Role, StepStatus, ToolCall, ToolChoice, ToolSpec,
    export_strategy,
};

pub mod tool;

use tool::Plans;

/// The system prompt of the execution steps: OpenManus's `ToolCallAgent`
/// prompt, plus what this strategy adds to it (the step prompt, how a step
/// is reported done, the `planning` tool).
pub const SYSTEM_PROMPT: &str = "You are an agent that can execute tool calls, working through a plan one step at a time. Each step's prompt shows the plan and the step you are working on: carry out only that step with your tools, then reply with a summary of what you accomplished and no tool call, which marks the step completed. Use the `planning` tool to mark a step blocked (mark_step) when it cannot be done, or to change the plan (update) when it no longer fits the task. If you want to stop the interaction, use the `terminate` tool/function call.";

/// OpenManus's `_create_initial_plan` system prompt.
pub const PLAN_SYSTEM_PROMPT: &str = "You are a planning assistant. Create a concise, actionable plan with clear steps. Focus on key milestones rather than detailed sub-steps. Optimize for clarity and efficiency.";

/// OpenManus's `_finalize_plan` system prompt.
pub const SUMMARY_SYSTEM_PROMPT: &str =
    "You are a planning assistant. Your task is to summarize the completed plan.";

/// OpenManus's fallback when the summary request fails.
pub const SUMMARY_FALLBACK: &str = "Plan completed.";

/// OpenManus's default plan, for a model that gave no valid `create` call.
pub const DEFAULT_STEPS: [&str; 3] = ["Analyze request", "Execute task", "Verify results"];

/// A step's notes keep this many characters of the model's report: the
/// plan is read by people and shown in every step prompt, and the host
/// refuses a plan past 64 KiB.
const NOTES_CHARS: usize = 500;

/// OpenManus's `_create_initial_plan` user prompt.
fn plan_prompt(request: &str) -> String {
    format!("Create a reasonable plan with clear steps to accomplish the task: {request}")
}

/// OpenManus's `_execute_step` prompt (its indentation, which Python's
/// f-string kept, left out). `index` is 0-based, as the plan shows it.
fn step_prompt(plan: &Plan, index: usize) -> String {
    let text = plan.steps.get(index).map_or("", |step| step.text.as_str());
    format!(
        "CURRENT PLAN STATUS:\n{}\nYOUR CURRENT TASK:\nYou are now working on step {index}: \"{text}\"\n\nPlease only execute this current step using the appropriate tools. When you're done, provide a summary of what you accomplished.",
        tool::format_plan(plan)
    )
}

/// OpenManus's `_finalize_plan` user prompt.
fn summary_prompt(plan: &Plan) -> String {
    format!(
        "The plan has been completed. Here is the final plan status:\n\n{}\n\nPlease provide a summary of what was accomplished and any final thoughts.",
        tool::format_plan(plan)
    )
}

struct Planning;

impl Guest for Planning {
    fn metadata() -> Metadata {
        Metadata::new(
            "planning",
            env!("CARGO_PKG_VERSION"),
            "OpenManus's PlanningFlow: asks the model for a plan, carries out each step with the agent's tools, then summarises.",
        )
    }

    /// No next-step prompt: each step's prompt is the plan and its current
    /// step, which the strategy writes itself.
    fn defaults() -> Defaults {
        Defaults {
            system_prompt: Some(SYSTEM_PROMPT.to_string()),
            next_step_prompt: None,
            max_steps: Some(30),
            tool_choice: Some(ToolChoice::Auto),
            special_tools: Some(vec!["terminate".to_string()]),
        }
    }

    fn step() -> Result<String, Error> {
        step(Imports)
    }
}

export_strategy!(Planning);

/// One step: the plan's creation when there is none yet, else the work on
/// its current step (or the summary, when nothing is left to do).
pub fn step<H: Host + Plans>(mut host: H) -> Result<String, Error> {
    match host.current_plan() {
        None => create_plan(host),
        Some(plan) => execute(host, plan),
    }
}

/// OpenManus's `_create_initial_plan`: the run's request to the model with
/// only the `planning` tool, which it must call. Its call and the tool's
/// answer go into memory, so later steps see how the plan came about and
/// the conversation stays well-formed.
fn create_plan<H: Host + Plans>(mut host: H) -> Result<String, Error> {
    let request = host
        .memory()
        .into_iter()
        .find(|message| message.role == Role::User)
        .and_then(|message| message.content)
        .unwrap_or_default();
    let chat = ChatRequest {
        messages: vec![
            Message::system(PLAN_SYSTEM_PROMPT),
            Message::user(plan_prompt(&request)),
        ],
        tools: vec![tool::spec()],
        // OpenManus asks with `auto` and falls back when no call comes;
        // `required` makes the call what the model must produce.
        tool_choice: ToolChoice::Required,
    };
    let response = match host.chat(&chat) {
        Ok(response) => response,
        Err(ChatError::TokenLimit(message)) => return rules::token_limit(&mut host, &message),
        Err(ChatError::Failed(error)) => return Err(error),
    };
    let content = response.message.content.filter(|text| !text.is_empty());
    let calls = response.message.tool_calls;

    let mut created = None;
    let mut problem = None;
    let mut answers = Vec::with_capacity(calls.len());
    for call in &calls {
        let answer = if created.is_some() {
            // Every call needs its answer, but one plan is enough.
            "Error: not run: the plan was already created by an earlier call.".to_string()
        } else {
            match create_call(&mut host, call) {
                Ok(result) => {
                    let answer =
                        format!("Observed output of cmd `{}` executed:\n{result}", call.name);
                    created = Some(result);
                    answer
                }
                Err(reason) => {
                    let answer = format!("Error: {reason}");
                    problem.get_or_insert(reason);
                    answer
                }
            }
        };
        answers.push(answer);
    }
    if !calls.is_empty() {
        host.add_message(Message::assistant_with_tools(content, calls.clone()))?;
        for (call, answer) in calls.iter().zip(answers) {
            host.add_message(Message::tool(answer, call.id.clone(), call.name.clone()))?;
        }
    }
    if let Some(result) = created {
        host.info(&format!("📋 Plan created: {result}"));
        return Ok(result);
    }

    // OpenManus's fallback: a default plan, so the run goes on.
    let reason = problem.unwrap_or_else(|| "the model called no tool".to_string());
    host.warn(&format!(
        "no valid plan from the model ({reason}); using the default plan"
    ));
    let plan = tool::new_plan(
        default_title(&request),
        DEFAULT_STEPS.iter().map(|step| step.to_string()).collect(),
    );
    host.publish_plan(&plan)?;
    Ok(format!(
        "The model gave no valid plan ({reason}), so the default plan is used.\n\n{}",
        tool::format_plan(&plan)
    ))
}

/// Runs one of the model's calls in the plan request, which must be the
/// `planning` tool's `create`. `Err` is why it is not a plan, which the
/// model reads as the call's answer.
fn create_call<H: Host + Plans>(host: &mut H, call: &ToolCall) -> Result<String, String> {
    if call.name != tool::NAME {
        return Err(format!("Unknown tool '{}'", call.name));
    }
    let arguments = if call.arguments.is_empty() {
        "{}"
    } else {
        call.arguments.as_str()
    };
    let command = match serde_json::from_str::<serde_json::Value>(arguments) {
        Ok(args) => args
            .get("command")
            .and_then(|command| command.as_str())
            .map(str::to_string),
        Err(_) => {
            host.error(&format!(
                "📝 Oops! The arguments for '{}' don't make sense - invalid JSON, arguments:{arguments}",
                call.name
            ));
            return Err(format!(
                "Error parsing arguments for {}: Invalid JSON format",
                call.name
            ));
        }
    };
    if command.as_deref() != Some("create") {
        return Err(format!(
            "There is no plan yet: call `{}` with command `create` first",
            tool::NAME
        ));
    }
    tool::invoke(host, arguments).map_err(|error| {
        format!(
            "⚠️ Tool '{}' encountered a problem: {}",
            call.name, error.message
        )
    })
}

/// OpenManus's default plan's title: the request, cut at 50 characters.
fn default_title(request: &str) -> String {
    let mut chars = request.chars();
    let head: String = chars.by_ref().take(50).collect();
    let more = if chars.next().is_some() { "..." } else { "" };
    format!("Plan for: {head}{more}")
}

fn is_done(status: StepStatus) -> bool {
    matches!(status, StepStatus::Completed | StepStatus::Blocked)
}

/// OpenManus's `_get_current_step_info`: the first step neither completed
/// nor blocked.
fn current_step(plan: &Plan) -> Option<usize> {
    plan.steps.iter().position(|step| !is_done(step.status))
}

/// One think/act round on the plan's current step, then the summary if
/// that finished the plan.
fn execute<H: Host + Plans>(mut host: H, mut plan: Plan) -> Result<String, Error> {
    let Some(index) = current_step(&plan) else {
        // All done already (a resumed run whose summary step was lost).
        return finalize(host, &plan);
    };
    if let Some(step) = plan.steps.get_mut(index)
        && step.status != StepStatus::InProgress
    {
        step.status = StepStatus::InProgress;
        host.publish_plan(&plan)?;
    }

    let mut planning = PlanningHost::new(host, step_prompt(&plan, index));
    let result = toolcall_core::step(&mut planning)?;
    let PlanningHost {
        inner: mut host,
        finished,
        reported,
        ..
    } = planning;
    if finished {
        // `terminate` (or the token budget) ended the run.
        return Ok(result);
    }
    if let Some(report) = reported {
        complete(&mut host, index, &report)?;
    }
    match host.current_plan() {
        Some(plan) if current_step(&plan).is_none() => finalize(host, &plan),
        _ => Ok(result),
    }
}

/// OpenManus's `_mark_step_completed`, for a model that reported the step
/// done (an answer without tool calls): its report becomes the notes.
fn complete<H: Host + Plans>(host: &mut H, index: usize, report: &str) -> Result<(), Error> {
    let Some(mut plan) = host.current_plan() else {
        return Ok(());
    };
    let Some(step) = plan
        .steps
        .get_mut(index)
        .filter(|step| !is_done(step.status))
    else {
        return Ok(());
    };
    step.status = StepStatus::Completed;
    step.notes = Some(shorten(report));
    if let Err(error) = host.publish_plan(&plan) {
        // A refused plan (`invalid-input`: the notes pushed it past the
        // host's size limit): the progress matters more than the notes.
        // Any other failure (the run's byte budget spent) is the step's.
        if error.code != ErrorCode::InvalidInput {
            return Err(error);
        }
        host.warn(&format!(
            "the plan with step {index}'s notes was refused ({}); publishing it without them",
            error.message
        ));
        if let Some(step) = plan.steps.get_mut(index) {
            step.notes = None;
        }
        host.publish_plan(&plan)?;
    }
    host.info(&format!("✅ Marked step {index} as completed"));
    Ok(())
}

/// The first [`NOTES_CHARS`] characters, with an ellipsis when cut.
fn shorten(text: &str) -> String {
    let text = text.trim();
    let mut short = text.to_string();
    rules::truncate_chars(&mut short, NOTES_CHARS);
    if short.len() < text.len() {
        short.push('…');
    }
    short
}

/// OpenManus's `_finalize_plan`: the model summarises the plan, without
/// tools; the summary goes into memory and is the step's result, and the
/// run finishes.
fn finalize<H: Host + Plans>(mut host: H, plan: &Plan) -> Result<String, Error> {
    let chat = ChatRequest {
        messages: vec![
            Message::system(SUMMARY_SYSTEM_PROMPT),
            Message::user(summary_prompt(plan)),
        ],
        tools: Vec::new(),
        tool_choice: ToolChoice::None,
    };
    let summary = match host.chat(&chat) {
        Ok(response) => response
            .message
            .content
            .filter(|text| !text.trim().is_empty())
            .unwrap_or_else(|| SUMMARY_FALLBACK.to_string()),
        Err(ChatError::Failed(error)) if error.code == ErrorCode::Cancelled => return Err(error),
        Err(ChatError::Failed(Error { message, .. }) | ChatError::TokenLimit(message)) => {
            // As OpenManus: the plan is done whatever the summary's fate.
            host.error(&format!("Error finalizing plan with LLM: {message}"));
            SUMMARY_FALLBACK.to_string()
        }
    };
    host.add_message(Message::assistant(summary.clone()))?;
    host.info("🏁 Plan completed");
    host.finish();
    Ok(summary)
}

/// The host as `toolcall`'s step sees it during a plan step: the agent's
/// tools plus `planning`, whose calls it answers itself; this step's prompt
/// as the next-step prompt; and a note of what the model answered and
/// whether the run was finished, for the strategy to act on afterwards.
/// Everything else goes to the real host.
pub struct PlanningHost<H> {
    inner: H,
    step_prompt: String,
    /// The model's answer, when it had text and no tool calls: the step
    /// reported done.
    reported: Option<String>,
    finished: bool,
}

impl<H> PlanningHost<H> {
    pub fn new(inner: H, step_prompt: String) -> Self {
        PlanningHost {
            inner,
            step_prompt,
            reported: None,
            finished: false,
        }
    }

    /// Keeps the model's text when it is the step's report: text and no
    /// tool calls. With tool choice `none`, toolcall drops the calls: the
    /// text is the whole answer.
    fn note(&mut self, response: &ChatResponse, tool_choice: ToolChoice) {
        let message = &response.message;
        let calls = !message.tool_calls.is_empty() && tool_choice != ToolChoice::None;
        self.reported = message
            .content
            .as_deref()
            .filter(|text| !calls && !text.trim().is_empty())
            .map(str::to_string);
    }
}

impl<H: Host + Plans> Host for PlanningHost<H> {
    /// The step prompt after whatever the host put there: the agent's own
    /// next-step prompt, or the stuck warning, which must reach the model.
    fn config(&mut self) -> AgentConfig {
        let mut config = self.inner.config();
        config.next_step_prompt = Some(match config.next_step_prompt.as_deref() {
            Some(prompt) if !prompt.is_empty() => format!("{prompt}\n{}", self.step_prompt),
            _ => self.step_prompt.clone(),
        });
        config
    }
    fn memory(&mut self) -> Vec<Message> {
        self.inner.memory()
    }
    fn add_message(&mut self, message: Message) -> Result<(), Error> {
        self.inner.add_message(message)
    }
    fn chat(&mut self, request: &ChatRequest) -> Result<ChatResponse, ChatError> {
        let response = self.inner.chat(request)?;
        self.note(&response, request.tool_choice);
        Ok(response)
    }
    /// The agent's tools as [`Self::tools`] shows them (with `planning` in
    /// place of any of the agent's of that name) are the real host's, with
    /// `planning` first among the extra tools.
    fn chat_with_memory(&mut self, request: &MemoryChatRequest) -> Result<ChatResponse, ChatError> {
        let mut forwarded = request.clone();
        if request.agent_tools
            && !request
                .extra_tools
                .iter()
                .any(|extra| extra.name == tool::NAME)
        {
            forwarded.extra_tools.insert(0, tool::spec());
        }
        let response = self.inner.chat_with_memory(&forwarded)?;
        self.note(&response, request.tool_choice);
        Ok(response)
    }
    /// A tool of the agent's own named `planning` is hidden: the model
    /// would not know which one it calls.
    fn tools(&mut self) -> Vec<ToolSpec> {
        let mut tools = self.inner.tools();
        if tools.iter().any(|spec| spec.name == tool::NAME) {
            self.inner.warn(&format!(
                "the agent's own tool `{}` is hidden by the planning strategy's",
                tool::NAME
            ));
            tools.retain(|spec| spec.name != tool::NAME);
        }
        tools.push(tool::spec());
        tools
    }
    fn invoke_tool(&mut self, call: &ToolCall) -> Result<String, Error> {
        if call.name == tool::NAME {
            tool::invoke(&mut self.inner, &call.arguments)
        } else {
            self.inner.invoke_tool(call)
        }
    }
    fn finish(&mut self) {
        self.finished = true;
        self.inner.finish();
    }
    fn info(&mut self, message: &str) {
        self.inner.info(message);
    }
    fn warn(&mut self, message: &str) {
        self.inner.warn(message);
    }
    fn error(&mut self, message: &str) {
        self.inner.error(message);
    }
}

#[cfg(test)]
mod tests;
