//! Daily token budgets and the prices runs are costed at.
//!
//! `[agents.X] daily_token_budget` and `[daemon] daily_token_budget` bound
//! the tokens (input plus output) used per UTC calendar day: by one agent's
//! runs, and by all runs. The count is kept here, in memory, charged as each
//! LLM response's usage arrives (through the loop's [`TokenBudget`], so a
//! running run counts as it goes); it starts, when the daemon starts, from
//! the history's runs active today, so a restart does not reset it; and it
//! starts again from zero at UTC midnight.
//!
//! Two places ask: creating a run ([`Budgets::check`], refused with `429
//! budget_exhausted` when today's use is already at a budget) and each LLM
//! request of a running run ([`TokenBudget::admit`], which ends the run
//! `token_limit` once a budget is used up). The budgets are those of the
//! configuration loaded now, so SIGHUP's new values apply to runs in
//! flight at their next request; a run's prices are taken when it is
//! created and kept (its cost is what it cost then).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, UNIX_EPOCH};

use super::history::{History, HistoryError};
use crate::agent::TokenBudget;
use crate::api::{BudgetUse, TokenBudgets};
use crate::chat::Usage;
use crate::config::Config;
use crate::llm::Price;
use crate::sync::{LockExt, RwLockExt};
use crate::time::now_ms;

const DAY_MS: i64 = 86_400_000;

/// The UTC day `ms` falls on, as days since 1970-01-01.
fn day_of(ms: i64) -> i64 {
    ms.div_euclid(DAY_MS)
}

/// Tokens used on one UTC day: in all, and per agent.
#[derive(Debug, Default, Clone, PartialEq)]
struct DayCount {
    day: i64,
    total: u64,
    agents: HashMap<String, u64>,
}

impl DayCount {
    fn new(now_ms: i64) -> Self {
        DayCount {
            day: day_of(now_ms),
            ..Default::default()
        }
    }

    /// Moves the count to the day of `now_ms`: a later day starts from zero.
    /// A clock stepped back to an earlier day keeps counting where it is
    /// (counting too much for a while is safer than forgetting the day).
    fn roll(&mut self, now_ms: i64) {
        let day = day_of(now_ms);
        if day > self.day {
            *self = DayCount {
                day,
                ..Default::default()
            };
        }
    }

    fn add(&mut self, agent: &str, tokens: u64, now_ms: i64) {
        self.roll(now_ms);
        self.total = self.total.saturating_add(tokens);
        // Looked up first: the key is copied only the first time an agent
        // spends on a given day, not on every answer.
        match self.agents.get_mut(agent) {
            Some(used) => *used = used.saturating_add(tokens),
            None => {
                self.agents.insert(agent.to_string(), tokens);
            }
        }
    }

    fn agent(&self, agent: &str) -> u64 {
        self.agents.get(agent).copied().unwrap_or(0)
    }

    /// Unix time in ms of the next UTC midnight: when this day's count ends.
    fn resets_at_ms(&self) -> i64 {
        (self.day + 1) * DAY_MS
    }
}

/// A budget used up: which one, its size, today's use and when it resets.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "the daily token budget {which} ({key} = {budget}) is used up: {used} tokens used today (UTC); it resets at {} (in {})",
    http_date(*resets_at_ms),
    until(*resets_at_ms, *now_ms)
)]
pub struct Exhausted {
    /// `of agent `coder`` or `of the daemon`.
    pub which: String,
    /// The key that sets it, for the operator: `[agents.coder] daily_token_budget`.
    pub key: String,
    pub budget: u64,
    pub used: u64,
    /// The next UTC midnight, Unix time in ms.
    pub resets_at_ms: i64,
    /// When it was found used up.
    pub now_ms: i64,
}

impl Exhausted {
    /// Whole seconds until it resets, at least 1: a `Retry-After`.
    pub fn retry_after_secs(&self) -> i64 {
        ((self.resets_at_ms - self.now_ms + 999) / 1000).max(1)
    }
}

fn http_date(ms: i64) -> String {
    let at = UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    httpdate::fmt_http_date(at)
}

/// `3h 12m`, `45m`, `20s`: the wait until the reset, for people.
fn until(at_ms: i64, now_ms: i64) -> String {
    let secs = ((at_ms - now_ms) / 1000).max(0);
    let (h, m) = (secs / 3600, secs % 3600 / 60);
    match (h, m) {
        (0, 0) => format!("{secs}s"),
        (0, m) => format!("{m}m"),
        (h, m) => format!("{h}h {m}m"),
    }
}

/// The budgets and prices of one configuration.
#[derive(Debug, Default, Clone, PartialEq)]
struct Limits {
    daemon: Option<u64>,
    agents: HashMap<String, u64>,
    prices: HashMap<String, Price>,
}

impl Limits {
    fn of(config: &Config) -> Self {
        Limits {
            daemon: config.daemon.daily_token_budget,
            agents: config
                .agents
                .values()
                .filter_map(|a| a.daily_token_budget.map(|b| (a.name.clone(), b)))
                .collect(),
            prices: config
                .agents
                .keys()
                .map(|name| (name.clone(), config.llm.price_for(name)))
                .collect(),
        }
    }
}

/// The daemon's daily budgets: the count of today's tokens and the limits
/// of the configuration loaded now. One per daemon, kept across reloads.
pub struct Budgets {
    limits: RwLock<Limits>,
    count: Mutex<DayCount>,
}

impl Budgets {
    pub fn new(config: &Config) -> Self {
        Budgets {
            limits: RwLock::new(Limits::of(config)),
            count: Mutex::new(DayCount::new(now_ms())),
        }
    }

    /// SIGHUP: the new configuration's budgets and prices; today's count
    /// is kept.
    pub fn configure(&self, config: &Config) {
        *self.limits.write_unpoisoned() = Limits::of(config);
    }

    /// Starts today's count from the history: the tokens of the runs active
    /// today, each counted whole (see `History::tokens_since`). Called at
    /// start-up, before any run can be created.
    pub async fn load(&self, history: &History) -> Result<(), HistoryError> {
        let now = now_ms();
        let used = history.tokens_since(day_of(now) * DAY_MS).await?;
        let mut count = DayCount::new(now);
        for (agent, tokens) in used {
            count.add(&agent, tokens, now);
        }
        *self.count.lock_unpoisoned() = count;
        Ok(())
    }

    /// The prices `agent`'s runs are costed at now.
    pub fn price(&self, agent: &str) -> Price {
        self.limits
            .read_unpoisoned()
            .prices
            .get(agent)
            .copied()
            .unwrap_or_default()
    }

    /// Whether a run of `agent` may go on: refused once today's use is at or
    /// over the agent's budget or the daemon's (the agent's is named first).
    pub fn check(&self, agent: &str) -> Result<(), Exhausted> {
        self.check_at(agent, now_ms())
    }

    fn check_at(&self, agent: &str, now: i64) -> Result<(), Exhausted> {
        let limits = self.limits.read_unpoisoned();
        let mut count = self.count.lock_unpoisoned();
        count.roll(now);
        let exhausted = |which: String, key: String, budget: u64, used: u64| Exhausted {
            which,
            key,
            budget,
            used,
            resets_at_ms: count.resets_at_ms(),
            now_ms: now,
        };
        if let Some(&budget) = limits.agents.get(agent) {
            let used = count.agent(agent);
            if used >= budget {
                return Err(exhausted(
                    format!("of agent `{agent}`"),
                    format!("[agents.{agent}] daily_token_budget"),
                    budget,
                    used,
                ));
            }
        }
        if let Some(budget) = limits.daemon {
            if count.total >= budget {
                return Err(exhausted(
                    "of the daemon (all agents)".into(),
                    "[daemon] daily_token_budget".into(),
                    budget,
                    count.total,
                ));
            }
        }
        Ok(())
    }

    /// Adds one LLM response's tokens to today's count.
    pub fn charge(&self, agent: &str, tokens: u64) {
        self.count.lock_unpoisoned().add(agent, tokens, now_ms());
    }

    /// One run's view of the budgets, for the loop: asked before each
    /// request, charged each response's usage.
    pub fn for_run(self: &Arc<Self>, agent: &str) -> Arc<dyn TokenBudget> {
        Arc::new(RunBudget {
            budgets: self.clone(),
            agent: agent.to_string(),
        })
    }

    /// Today's use against every budget set (`GET /v1/status`).
    pub fn view(&self) -> TokenBudgets {
        let limits = self.limits.read_unpoisoned();
        let mut count = self.count.lock_unpoisoned();
        count.roll(now_ms());
        let mut agents: Vec<BudgetUse> = limits
            .agents
            .iter()
            .map(|(name, &budget)| BudgetUse {
                agent: Some(name.clone()),
                budget,
                used: count.agent(name),
            })
            .collect();
        agents.sort_by(|a, b| a.agent.cmp(&b.agent));
        TokenBudgets {
            used_today: count.total,
            resets_at_ms: count.resets_at_ms(),
            daemon: limits.daemon.map(|budget| BudgetUse {
                agent: None,
                budget,
                used: count.total,
            }),
            agents,
        }
    }
}

/// The daily budgets as one run of one agent sees them.
struct RunBudget {
    budgets: Arc<Budgets>,
    agent: String,
}

impl TokenBudget for RunBudget {
    fn admit(&self) -> Result<(), String> {
        self.budgets
            .check(&self.agent)
            .map_err(|e| format!("Maximum token limit reached: {e}"))
    }

    fn charge(&self, usage: Usage) {
        self.budgets.charge(
            &self.agent,
            usage.prompt_tokens.saturating_add(usage.completion_tokens),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-12-03T00:00:00Z.
    const DAY_START: i64 = 20_790 * DAY_MS;
    const HOUR: i64 = 3_600_000;

    fn budgets(daemon: Option<u64>, agent: Option<u64>) -> Budgets {
        Budgets {
            limits: RwLock::new(Limits {
                daemon,
                agents: agent
                    .map(|b| ("coder".to_string(), b))
                    .into_iter()
                    .collect(),
                prices: HashMap::new(),
            }),
            count: Mutex::new(DayCount::new(DAY_START)),
        }
    }

    fn charge_at(b: &Budgets, agent: &str, tokens: u64, at: i64) {
        b.count.lock_unpoisoned().add(agent, tokens, at);
    }

    #[test]
    fn a_day_is_a_utc_calendar_day() {
        assert_eq!(day_of(DAY_START), day_of(DAY_START + DAY_MS - 1));
        assert_eq!(day_of(DAY_START) + 1, day_of(DAY_START + DAY_MS));
        assert_eq!(day_of(-1), -1, "before 1970 still rounds down");
        assert_eq!(http_date(DAY_START), "Thu, 03 Dec 2026 00:00:00 GMT");
    }

    #[test]
    fn the_count_starts_again_at_utc_midnight() {
        let mut count = DayCount::new(DAY_START + 23 * HOUR);
        count.add("coder", 700, DAY_START + 23 * HOUR);
        count.add("other", 50, DAY_START + 23 * HOUR);
        assert_eq!((count.total, count.agent("coder")), (750, 700));
        assert_eq!(count.resets_at_ms(), DAY_START + DAY_MS);
        // One millisecond before midnight: still today.
        count.add("coder", 1, DAY_START + DAY_MS - 1);
        assert_eq!(count.total, 751);
        // At midnight: a new day, from zero.
        count.add("coder", 10, DAY_START + DAY_MS);
        assert_eq!(
            (count.total, count.agent("coder"), count.agent("other")),
            (10, 10, 0)
        );
        assert_eq!(count.resets_at_ms(), DAY_START + 2 * DAY_MS);
    }

    #[test]
    fn a_clock_stepped_back_keeps_the_count() {
        let mut count = DayCount::new(DAY_START + HOUR);
        count.add("coder", 100, DAY_START + HOUR);
        count.roll(DAY_START - HOUR);
        assert_eq!(count.total, 100);
    }

    #[test]
    fn a_budget_refuses_at_its_size_and_names_itself() {
        let b = budgets(Some(1_000), Some(300));
        let now = DAY_START + 21 * HOUR;
        charge_at(&b, "coder", 299, now);
        assert_eq!(b.check_at("coder", now), Ok(()));
        charge_at(&b, "coder", 1, now);
        let e = b.check_at("coder", now).expect_err("at the agent's budget");
        assert_eq!((e.budget, e.used), (300, 300));
        assert_eq!(e.key, "[agents.coder] daily_token_budget");
        assert_eq!(e.retry_after_secs(), 3 * 3600);
        let text = e.to_string();
        assert!(text.contains("agent `coder`") && text.contains("300 tokens used today"));
        assert!(
            text.contains("Fri, 04 Dec 2026 00:00:00 GMT") && text.contains("in 3h 0m"),
            "{text}"
        );
        // Another agent is under the daemon's budget until the total reaches it.
        assert_eq!(b.check_at("other", now), Ok(()));
        charge_at(&b, "other", 700, now);
        let e = b
            .check_at("other", now)
            .expect_err("at the daemon's budget");
        assert_eq!(
            (e.key.as_str(), e.budget, e.used),
            ("[daemon] daily_token_budget", 1_000, 1_000)
        );
        // The next day both are free again.
        assert_eq!(b.check_at("coder", DAY_START + DAY_MS), Ok(()));
        assert_eq!(b.check_at("other", DAY_START + DAY_MS), Ok(()));
    }

    #[test]
    fn no_budget_never_refuses() {
        let b = budgets(None, None);
        charge_at(&b, "coder", u64::MAX, DAY_START);
        charge_at(&b, "coder", 5, DAY_START);
        assert_eq!(b.check_at("coder", DAY_START), Ok(()));
    }
}
