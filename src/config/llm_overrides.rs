//! Per-agent LLM overrides, from either of two places:
//!
//! - `[llm.<agent>]`, OpenManus's layout, kept so its files load as they are;
//! - `[agents.<agent>.llm]`, which works for every agent name: under `[llm]`
//!   a sub-table named like one of its keys (`[llm.timeout]`) cannot be
//!   told apart from that key, so an agent called `timeout` could not have
//!   overrides there.
//!
//! An override naming no agent is a typo (`[llm.mnaus]`): it is refused here,
//! once the agents are known, rather than silently never applying.

use std::collections::BTreeMap;
use std::ops::Range;

use super::file::{AgentKeys, LlmKeys, LlmSection};

/// One agent's overrides and the table they came from, for messages.
pub(super) struct Override {
    pub table: String,
    pub keys: LlmKeys,
}

/// A refusal and the byte offset of the table it is about.
pub(super) struct Refusal {
    pub at: usize,
    pub message: String,
}

/// The overrides by agent name in lower case (as [`super::LlmConfig::for_agent`]
/// looks them up). `agents` are the names of every agent, bundled ones
/// included; `text` is the file, to name the other line when two tables
/// override the same agent.
pub(super) fn resolve(
    section: &LlmSection,
    agent_tables: &BTreeMap<String, AgentKeys>,
    agents: &[&str],
    text: &str,
) -> Result<BTreeMap<String, Override>, Refusal> {
    let known: BTreeMap<String, &str> = agents.iter().map(|a| (a.to_lowercase(), *a)).collect();
    let mut out: BTreeMap<String, (Override, Range<usize>)> = BTreeMap::new();
    for (lower, keys) in &section.overrides {
        let (written, span) = section
            .override_sites
            .get(lower)
            .cloned()
            .unwrap_or_else(|| (lower.clone(), 0..0));
        if !known.contains_key(lower) {
            return Err(Refusal {
                at: span.start,
                message: format!(
                    "[llm.{written}] names no agent (known agents: {}); per-agent overrides go in [llm.<agent>] or [agents.<agent>.llm]",
                    agents.join(", ")
                ),
            });
        }
        let table = format!("[llm.{written}]");
        out.insert(
            lower.clone(),
            (
                Override {
                    table,
                    keys: keys.clone(),
                },
                span,
            ),
        );
    }
    for (name, agent) in agent_tables {
        let Some(llm) = &agent.llm else { continue };
        let table = format!("[agents.{name}.llm]");
        let span = llm.span();
        let lower = name.to_lowercase();
        if let Some((other, other_span)) = out.get(&lower) {
            return Err(Refusal {
                at: span.start,
                message: format!(
                    "{table} and {} (line {}) both set LLM overrides for agent `{name}` (names compare in lower case); keep one{}",
                    other.table,
                    super::line_of(text, other_span.start),
                    if other.table.starts_with("[llm.") {
                        ", preferably the [agents.<agent>.llm] one"
                    } else {
                        ""
                    }
                ),
            });
        }
        out.insert(
            lower,
            (
                Override {
                    table,
                    keys: llm.get_ref().clone(),
                },
                span,
            ),
        );
    }
    Ok(out.into_iter().map(|(k, (o, _))| (k, o)).collect())
}
