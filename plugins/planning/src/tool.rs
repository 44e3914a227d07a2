//! The `planning` tool the strategy gives the model: OpenManus's
//! `PlanningTool` commands over the run's one plan, which the host keeps
//! (`plan::current`, `plan::publish`).
//!
//! OpenManus's tool holds many plans by id (`list`, `set_active`, `delete`);
//! a run has exactly one plan, so there is no `plan_id` (one sent anyway is
//! ignored) and those three commands are not offered. The result texts and
//! error messages are OpenManus's, less the plan id.

use agentd_strategy_sdk::host::Imports;
use agentd_strategy_sdk::{Error, Plan, PlanStep, StepStatus, ToolSpec, plan};
use serde_json::{Map, Value};

/// The tool's name, as the model calls it.
pub const NAME: &str = "planning";

/// OpenManus's description, saying why there is no plan id.
const DESCRIPTION: &str = "A planning tool that allows the agent to create and manage a plan for solving a complex task. The tool provides functionality for creating the plan, updating its steps, and tracking progress. A run has exactly one plan, so no plan_id is needed: every command acts on it.";

/// OpenManus's `PlanningTool.parameters` without `plan_id` and the commands
/// that need one.
const PARAMETERS: &str = r#"{
  "type": "object",
  "properties": {
    "command": {
      "description": "The command to execute. Available commands: create, update, get, mark_step.",
      "enum": ["create", "update", "get", "mark_step"],
      "type": "string"
    },
    "title": {
      "description": "Title for the plan. Required for create command, optional for update command.",
      "type": "string"
    },
    "steps": {
      "description": "List of plan steps. Required for create command, optional for update command (a step whose text is unchanged at the same position keeps its status and notes).",
      "type": "array",
      "items": {"type": "string"}
    },
    "step_index": {
      "description": "Index of the step to update (0-based). Required for mark_step command.",
      "type": "integer"
    },
    "step_status": {
      "description": "Status to set for a step. Used with mark_step command.",
      "enum": ["not_started", "in_progress", "completed", "blocked"],
      "type": "string"
    },
    "step_notes": {
      "description": "Additional notes for a step. Optional for mark_step command.",
      "type": "string"
    }
  },
  "required": ["command"],
  "additionalProperties": false
}"#;

const COMMANDS: &str = "create, update, get, mark_step";

pub fn spec() -> ToolSpec {
    ToolSpec::new(NAME, DESCRIPTION, PARAMETERS)
}

/// The run's plan, as the host keeps it: a trait so the strategy is tested
/// natively, like [`agentd_strategy_sdk::host::Host`].
pub trait Plans {
    fn current_plan(&mut self) -> Option<Plan>;
    /// The host refuses (`invalid-input`, naming the limit) a plan without
    /// steps, with an empty title or step, or past its size limits.
    fn publish_plan(&mut self, plan: &Plan) -> Result<(), Error>;
}

impl Plans for Imports {
    fn current_plan(&mut self) -> Option<Plan> {
        plan::current()
    }
    fn publish_plan(&mut self, plan: &Plan) -> Result<(), Error> {
        plan::publish(plan)
    }
}

impl<P: Plans + ?Sized> Plans for &mut P {
    fn current_plan(&mut self) -> Option<Plan> {
        (**self).current_plan()
    }
    fn publish_plan(&mut self, plan: &Plan) -> Result<(), Error> {
        (**self).publish_plan(plan)
    }
}

/// Runs one call of the tool. `arguments` is JSON (toolcall's step has
/// checked that); anything wrong with it or with the command is an
/// `invalid-input` error, which the model reads as the observation.
pub fn invoke<P: Plans>(plans: &mut P, arguments: &str) -> Result<String, Error> {
    let args = match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(args)) => args,
        Ok(_) => return Err(invalid("The arguments must be a JSON object")),
        Err(_) => return Err(invalid("Invalid JSON format")),
    };
    let command = match args.get("command") {
        Some(Value::String(command)) => command.as_str(),
        _ => {
            return Err(invalid(format!(
                "Parameter `command` is required. Allowed commands are: {COMMANDS}"
            )));
        }
    };
    match command {
        "create" => create(plans, &args),
        "update" => update(plans, &args),
        "get" => Ok(format_plan(&existing(plans)?)),
        "mark_step" => mark_step(plans, &args),
        "list" | "set_active" | "delete" => Err(invalid(format!(
            "Command {command} is not available: a run has exactly one plan. Allowed commands are: {COMMANDS}"
        ))),
        other => Err(invalid(format!(
            "Unrecognized command: {other}. Allowed commands are: {COMMANDS}"
        ))),
    }
}

fn invalid(message: impl Into<String>) -> Error {
    Error::invalid_input(message)
}

fn existing<P: Plans>(plans: &mut P) -> Result<Plan, Error> {
    plans
        .current_plan()
        .ok_or_else(|| invalid("No plan exists yet. Create one with the 'create' command."))
}

/// `Some` title when given as a non-empty string; OpenManus tests it for
/// truthiness, so an empty one counts as none.
fn title(args: &Map<String, Value>) -> Result<Option<String>, Error> {
    match args.get("title") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(title)) if title.trim().is_empty() => Ok(None),
        Some(Value::String(title)) => Ok(Some(title.clone())),
        Some(_) => Err(invalid("Parameter `title` must be a string")),
    }
}

/// `Some` steps when given as a non-empty list; `Err` when it is not a list
/// of non-empty strings.
fn steps(args: &Map<String, Value>, command: &str) -> Result<Option<Vec<String>>, Error> {
    let bad = || {
        invalid(format!(
            "Parameter `steps` must be a list of non-empty strings for command: {command}"
        ))
    };
    match args.get("steps") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) if items.is_empty() => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(text) if !text.trim().is_empty() => Ok(text.clone()),
                _ => Err(bad()),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(bad()),
    }
}

/// A new plan, every step not started: what `create` publishes, and the
/// strategy's fallback plan.
pub fn new_plan(title: String, steps: Vec<String>) -> Plan {
    Plan {
        title,
        steps: steps
            .into_iter()
            .map(|text| PlanStep {
                text,
                status: StepStatus::NotStarted,
                notes: None,
            })
            .collect(),
    }
}

fn create<P: Plans>(plans: &mut P, args: &Map<String, Value>) -> Result<String, Error> {
    if plans.current_plan().is_some() {
        return Err(invalid(
            "A plan already exists for this run. Use 'update' to modify it.",
        ));
    }
    let Some(title) = title(args)? else {
        return Err(invalid("Parameter `title` is required for command: create"));
    };
    let Some(steps) = steps(args, "create")? else {
        return Err(invalid(
            "Parameter `steps` must be a non-empty list of strings for command: create",
        ));
    };
    let plan = new_plan(title, steps);
    plans.publish_plan(&plan)?;
    Ok(format!(
        "Plan created successfully\n\n{}",
        format_plan(&plan)
    ))
}

fn update<P: Plans>(plans: &mut P, args: &Map<String, Value>) -> Result<String, Error> {
    let mut plan = existing(plans)?;
    if let Some(title) = title(args)? {
        plan.title = title;
    }
    if let Some(steps) = steps(args, "update")? {
        // As OpenManus: a step keeps its status and notes only where the
        // same text stays at the same position.
        let old = std::mem::take(&mut plan.steps);
        plan.steps = steps
            .into_iter()
            .enumerate()
            .map(|(i, text)| match old.get(i) {
                Some(step) if step.text == text => step.clone(),
                _ => PlanStep {
                    text,
                    status: StepStatus::NotStarted,
                    notes: None,
                },
            })
            .collect();
    }
    plans.publish_plan(&plan)?;
    Ok(format!(
        "Plan updated successfully\n\n{}",
        format_plan(&plan)
    ))
}

fn mark_step<P: Plans>(plans: &mut P, args: &Map<String, Value>) -> Result<String, Error> {
    let mut plan = existing(plans)?;
    let index = match args.get("step_index") {
        None | Some(Value::Null) => {
            return Err(invalid(
                "Parameter `step_index` is required for command: mark_step",
            ));
        }
        // Models send `"2"` as often as `2`.
        Some(Value::String(text)) => text.trim().parse::<i64>().ok(),
        Some(value) => value.as_i64(),
    };
    let last = plan.steps.len().saturating_sub(1);
    let Some(step) = index
        .and_then(|index| usize::try_from(index).ok())
        .and_then(|index| plan.steps.get_mut(index).map(|step| (index, step)))
    else {
        let given = match args.get("step_index") {
            Some(Value::String(text)) => text.clone(),
            Some(value) => value.to_string(),
            None => String::new(),
        };
        return Err(invalid(format!(
            "Invalid step_index: {given}. Valid indices range from 0 to {last}."
        )));
    };
    let (index, step) = step;
    match args.get("step_status") {
        None | Some(Value::Null) => {}
        Some(Value::String(status)) if status.is_empty() => {}
        Some(Value::String(status)) => match parse_status(status) {
            Some(status) => step.status = status,
            None => {
                return Err(invalid(format!(
                    "Invalid step_status: {status}. Valid statuses are: not_started, in_progress, completed, blocked"
                )));
            }
        },
        Some(other) => {
            return Err(invalid(format!(
                "Invalid step_status: {other}. Valid statuses are: not_started, in_progress, completed, blocked"
            )));
        }
    }
    match args.get("step_notes") {
        None | Some(Value::Null) => {}
        Some(Value::String(notes)) if notes.is_empty() => {}
        Some(Value::String(notes)) => step.notes = Some(notes.clone()),
        Some(_) => return Err(invalid("Parameter `step_notes` must be a string")),
    }
    plans.publish_plan(&plan)?;
    Ok(format!(
        "Step {index} updated in the plan.\n\n{}",
        format_plan(&plan)
    ))
}

fn parse_status(status: &str) -> Option<StepStatus> {
    Some(match status {
        "not_started" => StepStatus::NotStarted,
        "in_progress" => StepStatus::InProgress,
        "completed" => StepStatus::Completed,
        "blocked" => StepStatus::Blocked,
        _ => return None,
    })
}

/// OpenManus's `PlanStepStatus` marks.
fn mark(status: StepStatus) -> &'static str {
    match status {
        StepStatus::NotStarted => "[ ]",
        StepStatus::InProgress => "[→]",
        StepStatus::Completed => "[✓]",
        StepStatus::Blocked => "[!]",
    }
}

/// OpenManus's `_format_plan`, less the plan id: what the tool returns, the
/// step prompt shows and the summary request reports.
pub fn format_plan(plan: &Plan) -> String {
    let count = |status| plan.steps.iter().filter(|s| s.status == status).count();
    let total = plan.steps.len();
    let completed = count(StepStatus::Completed);
    let heading = format!("Plan: {}", plan.title);
    let mut out = format!("{heading}\n{}\n\n", "=".repeat(heading.chars().count()));
    let percent = if total == 0 {
        0.0
    } else {
        completed as f64 * 100.0 / total as f64
    };
    out.push_str(&format!(
        "Progress: {completed}/{total} steps completed ({percent:.1}%)\n"
    ));
    out.push_str(&format!(
        "Status: {completed} completed, {} in progress, {} blocked, {} not started\n\n",
        count(StepStatus::InProgress),
        count(StepStatus::Blocked),
        count(StepStatus::NotStarted),
    ));
    out.push_str("Steps:\n");
    for (i, step) in plan.steps.iter().enumerate() {
        out.push_str(&format!("{i}. {} {}\n", mark(step.status), step.text));
        if let Some(notes) = step.notes.as_deref().filter(|notes| !notes.is_empty()) {
            out.push_str(&format!("   Notes: {notes}\n"));
        }
    }
    out
}
