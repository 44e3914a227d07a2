//! Token budgets wider than one run: the loop asks before each LLM request
//! and reports each response's usage, the caller (the daemon, with its
//! daily budgets counted over all runs) decides. The per-run input-token
//! budget (`max_input_tokens`) stays the loop's own (`context.rs`); this is
//! what a run cannot know alone.

use crate::chat::Usage;

/// A budget shared with other runs, as one run sees it. Implemented above
/// the loop (`daemon::budget`), so the loop needs to know nothing of days,
/// agents or the history.
pub trait TokenBudget: Send + Sync {
    /// Asked before each LLM request: `Err(why)` refuses it, and the run
    /// ends `token_limit` with `why` (which names the budget).
    fn admit(&self) -> Result<(), String>;
    /// The usage of one LLM response, as soon as it arrives.
    fn charge(&self, usage: Usage);
}
