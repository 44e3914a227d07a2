//! The `agentd` command's exit statuses, in one place (README, "Exit status
//! of `run`"). They are the CLI's promise to scripts: the run loop reports
//! an [`Outcome`] and knows nothing of processes; this module maps it.

use crate::agent::Outcome;

/// Bad usage or configuration, or no daemon to talk to (clap uses 2 too).
pub const USAGE: i32 = 2;

/// The shell's convention for "ended by SIGINT".
pub const INTERRUPTED: i32 = 130;

/// The exit status of `agentd run` (with or without `--local`) for a run
/// that ended this way. 2 is left to [`USAGE`], so a script can tell a run
/// that failed from a command that never ran one.
pub fn for_outcome(outcome: Outcome) -> i32 {
    match outcome {
        Outcome::Finished => 0,
        Outcome::Error => 1,
        Outcome::MaxSteps => 3,
        Outcome::TokenLimit => 4,
        Outcome::Cancelled => 5,
        Outcome::Interrupted => 6,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_outcome_has_its_own_status_and_none_is_usage() {
        let all = [
            Outcome::Finished,
            Outcome::Error,
            Outcome::MaxSteps,
            Outcome::TokenLimit,
            Outcome::Cancelled,
            Outcome::Interrupted,
        ];
        let codes: Vec<i32> = all.iter().map(|o| for_outcome(*o)).collect();
        assert_eq!(codes, [0, 1, 3, 4, 5, 6]);
        assert!(!codes.contains(&USAGE) && !codes.contains(&INTERRUPTED));
    }
}
