//! A run's plan (contract 0.2.3's `plan` interface), as the rest of the
//! crate speaks it: a title and steps, each with a status and notes, and
//! the checks a published plan must pass. It sits at the bottom beside
//! `chat`, because the plugin host (which checks what a strategy
//! publishes), the run loop (which keeps the current plan and reports each
//! change as an event), the API and the history (which serialise it) and
//! the CLI (which shows it) all use the same type, and none of them may
//! depend on the others for it. Its serde shape is the `/v1` one: statuses
//! in snake_case, `notes` always present (`null` when unset).

use serde::{Deserialize, Serialize};

/// A plan has at most this many steps: it is read by people, and
/// OpenManus's plans have a handful.
pub const MAX_PLAN_STEPS: usize = 100;

/// At most this many bytes of text in all (the title, every step's text and
/// notes), so a runaway model cannot fill the run's record with plans: each
/// change is kept whole in an event.
pub const MAX_PLAN_TEXT_BYTES: usize = 64 << 10;

/// A step's status: OpenManus's `PlanningTool` statuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// Not begun.
    NotStarted,
    /// Being worked on.
    InProgress,
    /// Done; its notes usually say with what result.
    Completed,
    /// Cannot go on; its notes usually say why.
    Blocked,
}

impl StepStatus {
    /// The snake_case name, as serialised.
    pub fn as_str(self) -> &'static str {
        match self {
            StepStatus::NotStarted => "not_started",
            StepStatus::InProgress => "in_progress",
            StepStatus::Completed => "completed",
            StepStatus::Blocked => "blocked",
        }
    }
}

/// One step of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanStep {
    /// What the step is to do, as the plan states it.
    pub text: String,
    /// Where it is.
    pub status: StepStatus,
    /// What the strategy noted when it last changed the step (a result, why
    /// it is blocked).
    #[serde(default)]
    pub notes: Option<String>,
}

/// A run's plan, as its strategy last published it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// What the plan is for.
    pub title: String,
    /// Its steps, in order.
    pub steps: Vec<PlanStep>,
}

/// Why a published plan was refused; each message names the limit, so the
/// strategy (and the model behind it) can tell what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The plan has no steps.
    #[error("the plan has no steps; a plan needs at least one")]
    NoSteps,
    /// The title is empty (or only white space).
    #[error("the plan's title is empty")]
    EmptyTitle,
    /// A step's text is empty (or only white space).
    #[error("step {index} of the plan has no text")]
    EmptyStep {
        /// 1-based.
        index: usize,
    },
    /// More than [`MAX_PLAN_STEPS`] steps.
    #[error("the plan has {steps} steps, more than the {MAX_PLAN_STEPS} a plan may have")]
    TooManySteps {
        /// How many it has.
        steps: usize,
    },
    /// More than [`MAX_PLAN_TEXT_BYTES`] of text in all.
    #[error(
        "the plan has {bytes} bytes of text (title, steps and notes), more than the {MAX_PLAN_TEXT_BYTES} (64 KiB) a plan may have"
    )]
    TooMuchText {
        /// How many it has.
        bytes: usize,
    },
}

impl Plan {
    /// Bytes of text in the plan: its title, and each step's text and notes.
    pub fn text_bytes(&self) -> usize {
        self.steps.iter().fold(self.title.len(), |n, s| {
            n.saturating_add(s.text.len())
                .saturating_add(s.notes.as_ref().map_or(0, String::len))
        })
    }

    /// Whether the plan may be published: at least one step, a title and
    /// every step's text not empty, at most [`MAX_PLAN_STEPS`] steps and
    /// [`MAX_PLAN_TEXT_BYTES`] of text. The step count is checked before
    /// anything is summed, so a huge plan is refused cheaply.
    pub fn check(&self) -> Result<(), PlanError> {
        if self.steps.len() > MAX_PLAN_STEPS {
            return Err(PlanError::TooManySteps {
                steps: self.steps.len(),
            });
        }
        if self.steps.is_empty() {
            return Err(PlanError::NoSteps);
        }
        if self.title.trim().is_empty() {
            return Err(PlanError::EmptyTitle);
        }
        if let Some(i) = self.steps.iter().position(|s| s.text.trim().is_empty()) {
            return Err(PlanError::EmptyStep { index: i + 1 });
        }
        let bytes = self.text_bytes();
        if bytes > MAX_PLAN_TEXT_BYTES {
            return Err(PlanError::TooMuchText { bytes });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(steps: usize) -> Plan {
        Plan {
            title: "Ship it".into(),
            steps: (1..=steps)
                .map(|i| PlanStep {
                    text: format!("step {i}"),
                    status: StepStatus::NotStarted,
                    notes: None,
                })
                .collect(),
        }
    }

    #[test]
    fn a_plan_within_the_limits_passes() {
        assert_eq!(plan(1).check(), Ok(()));
        assert_eq!(plan(MAX_PLAN_STEPS).check(), Ok(()));
    }

    #[test]
    fn each_limit_is_refused_naming_it() {
        let e = plan(MAX_PLAN_STEPS + 1).check().expect_err("101 steps");
        assert_eq!(e, PlanError::TooManySteps { steps: 101 });
        assert!(e.to_string().contains("more than the 100"), "{e}");
        assert_eq!(plan(0).check(), Err(PlanError::NoSteps));
        let mut p = plan(2);
        p.title = "  ".into();
        assert_eq!(p.check(), Err(PlanError::EmptyTitle));
        let mut p = plan(2);
        p.steps[1].text = String::new();
        assert_eq!(p.check(), Err(PlanError::EmptyStep { index: 2 }));
        let mut p = plan(2);
        p.steps[0].notes = Some("n".repeat(MAX_PLAN_TEXT_BYTES));
        let e = p.check().expect_err("too much text");
        assert!(matches!(e, PlanError::TooMuchText { .. }), "{e}");
        assert!(e.to_string().contains("64 KiB"), "{e}");
    }

    #[test]
    fn the_wire_shape_is_snake_case_with_notes_always_present() {
        let mut p = plan(2);
        p.steps[0].status = StepStatus::Completed;
        p.steps[0].notes = Some("done".into());
        p.steps[1].status = StepStatus::InProgress;
        let json = serde_json::to_string(&p).expect("json");
        assert_eq!(
            json,
            r#"{"title":"Ship it","steps":[{"text":"step 1","status":"completed","notes":"done"},{"text":"step 2","status":"in_progress","notes":null}]}"#
        );
        assert_eq!(serde_json::from_str::<Plan>(&json).expect("back"), p);
        assert_eq!(StepStatus::NotStarted.as_str(), "not_started");
        assert_eq!(StepStatus::Blocked.as_str(), "blocked");
    }
}
