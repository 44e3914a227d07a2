//! The `RunPlan` trait: what a strategy's `plan` import (contract 0.2.3)
//! needs from the run it serves. The run loop implements it (it keeps the
//! current plan, records a `plan_changed` event when it changes, and puts
//! the latest in the run record); the plugin host converts the WIT types,
//! checks what is published against the contract's limits
//! ([`crate::plan::Plan::check`]) before the run sees it, and turns a
//! refusal into the contract's error (`strategy_host.rs`). Defined here,
//! below the strategy world's host, so neither the host depends on the loop
//! nor the loop on wasmtime.

use super::bindings::types::{self as wit, ErrorCode};
use super::bindings::v0_2::strategy::agentd::plugin::plan as wit_plan;
use crate::plan::{Plan, PlanError, PlanStep, StepStatus};

/// Why `plan.publish` did not replace the run's plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanRefused {
    /// The plan breaks one of the contract's rules (no steps, an empty
    /// title or step, over 100 steps or 64 KiB of text).
    #[error("strategy `{plugin}` published a plan that was refused: {error}")]
    Invalid {
        /// The publishing strategy.
        plugin: String,
        /// Which rule, naming the limit.
        error: PlanError,
    },
    /// There is no run to keep a plan (a load-time probe); the text says why.
    #[error("{0}")]
    Unavailable(String),
    /// Keeping the change would take the run over one of its limits
    /// (`max_run_bytes`): the run ends with this reason.
    #[error("{0}")]
    OverLimit(String),
}

impl PlanRefused {
    /// The error the strategy sees: a plan it can fix is `invalid-input`
    /// (the contract's promise); the rest are `failed`.
    pub fn into_wit(self) -> wit::Error {
        let code = match self {
            PlanRefused::Invalid { .. } => ErrorCode::InvalidInput,
            PlanRefused::Unavailable(_) | PlanRefused::OverLimit(_) => ErrorCode::Failed,
        };
        wit::Error {
            code,
            message: self.to_string(),
        }
    }
}

/// What a strategy's `plan` import needs from its run; the run loop
/// implements it. Neither call waits, so neither pauses the step clock.
pub trait RunPlan: Send + Sync {
    /// The run's current plan: the last one published, a resumed run's
    /// predecessor's until it publishes its own, or `None`.
    fn current(&self) -> Option<Plan>;
    /// `plugin` (the strategy's name) replaces the run's plan with `plan`,
    /// which the host has already checked. Publishing the current plan
    /// again changes nothing and records nothing.
    fn publish(&self, plugin: &str, plan: Plan) -> Result<(), PlanRefused>;
}

/// For strategy stores with no run behind them (load-time probes): no
/// plan, and publishing one fails saying why.
pub struct NoPlan(pub &'static str);

impl NoPlan {
    /// What a strategy publishing a plan at load time (in `metadata` or
    /// `defaults`) is told.
    pub const PROBE: NoPlan = NoPlan("a load-time probe has no run to keep a plan");
}

impl RunPlan for NoPlan {
    fn current(&self) -> Option<Plan> {
        None
    }

    fn publish(&self, _plugin: &str, _plan: Plan) -> Result<(), PlanRefused> {
        Err(PlanRefused::Unavailable(self.0.to_string()))
    }
}

/// The WIT plan in the crate's type.
pub fn plan_from_wit(p: wit_plan::Plan) -> Plan {
    Plan {
        title: p.title,
        steps: p
            .steps
            .into_iter()
            .map(|s| PlanStep {
                text: s.text,
                status: match s.status {
                    wit_plan::StepStatus::NotStarted => StepStatus::NotStarted,
                    wit_plan::StepStatus::InProgress => StepStatus::InProgress,
                    wit_plan::StepStatus::Completed => StepStatus::Completed,
                    wit_plan::StepStatus::Blocked => StepStatus::Blocked,
                },
                notes: s.notes,
            })
            .collect(),
    }
}

/// The crate's plan as the WIT's.
pub fn plan_to_wit(p: Plan) -> wit_plan::Plan {
    wit_plan::Plan {
        title: p.title,
        steps: p
            .steps
            .into_iter()
            .map(|s| wit_plan::PlanStep {
                text: s.text,
                status: match s.status {
                    StepStatus::NotStarted => wit_plan::StepStatus::NotStarted,
                    StepStatus::InProgress => wit_plan::StepStatus::InProgress,
                    StepStatus::Completed => wit_plan::StepStatus::Completed,
                    StepStatus::Blocked => wit_plan::StepStatus::Blocked,
                },
                notes: s.notes,
            })
            .collect(),
    }
}

/// What the `publish` import does with a plan: checked first, so a run
/// only ever sees plans within the contract's limits.
pub fn publish_checked(run: &dyn RunPlan, plugin: &str, plan: Plan) -> Result<(), PlanRefused> {
    plan.check().map_err(|error| PlanRefused::Invalid {
        plugin: plugin.to_string(),
        error,
    })?;
    run.publish(plugin, plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(steps: usize) -> Plan {
        Plan {
            title: "t".into(),
            steps: (0..steps)
                .map(|i| PlanStep {
                    text: format!("s{i}"),
                    status: StepStatus::Blocked,
                    notes: Some("why".into()),
                })
                .collect(),
        }
    }

    #[test]
    fn an_invalid_plan_is_invalid_input_naming_the_plugin_and_the_limit() {
        let e = publish_checked(&NoPlan::PROBE, "planning", plan(101)).expect_err("refused");
        let e = e.into_wit();
        assert_eq!(e.code, ErrorCode::InvalidInput);
        assert!(
            e.message.contains("`planning`") && e.message.contains("more than the 100"),
            "{}",
            e.message
        );
    }

    #[test]
    fn no_plan_has_none_and_says_why_it_keeps_none() {
        assert_eq!(NoPlan::PROBE.current(), None);
        let e = publish_checked(&NoPlan::PROBE, "planning", plan(1))
            .expect_err("refused")
            .into_wit();
        assert_eq!(e.code, ErrorCode::Failed);
        assert_eq!(e.message, "a load-time probe has no run to keep a plan");
    }

    #[test]
    fn the_wit_round_trip_keeps_everything() {
        let p = plan(3);
        assert_eq!(plan_from_wit(plan_to_wit(p.clone())), p);
    }
}
