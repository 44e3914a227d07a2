//! The settings a run uses: each one is the agent's own key, else its
//! strategy's default (what the strategy plugin says it needs, as
//! OpenManus's `ToolCallAgent` carries its prompts in the class), else the
//! daemon's. Resolved once when a run starts, from the plugin snapshot the
//! run keeps, and reported with where each value came from.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::human::{Approve, DEFAULT_APPROVAL_TIMEOUT, DEFAULT_INPUT_TIMEOUT};
use super::memory::DEFAULT_MAX_MESSAGES;
use super::stuck::DEFAULT_DUPLICATE_THRESHOLD;
use crate::chat::ToolChoice;
use crate::plugin::StrategyDefaults;

/// An agent as configured (`[agents.X]` over the bundled presets): what it
/// runs and what it overrides of its strategy's defaults. Owned here; the
/// `config` module builds it from the file.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentConfig {
    /// The agent's name: the `X` of `[agents.X]`, how run requests and records
    /// refer to it.
    pub name: String,
    /// The strategy plugin that decides its steps (default `toolcall`).
    pub strategy: String,
    /// The tool plugins its runs may call, by name (default `["terminate"]`);
    /// a run whose tool is not loaded ends as `error`.
    pub tools: Vec<String>,
    /// This and the other `Option`s below: `None` defers to the strategy's
    /// default, then to the daemon's (`agent::settings`). A prompt set to
    /// `""` sends no prompt even when the strategy has one.
    pub system_prompt: Option<String>,
    /// Added as a `user` message before each step's request.
    pub next_step_prompt: Option<String>,
    /// The run's step limit.
    pub max_steps: Option<u32>,
    /// Truncate tool observations to this many characters; handed to the
    /// strategy, which applies it.
    pub max_observe: Option<u32>,
    /// How many earlier copies of an action make a step stuck (default 2);
    /// 0 turns stuck detection off. Not layered: no strategy sets it.
    pub duplicate_threshold: u32,
    /// The memory window, in messages besides the pinned request (default 100,
    /// at least 1). Not layered: no strategy sets it.
    pub max_messages: u32,
    /// How the model may use tools in the strategy's requests.
    pub tool_choice: Option<ToolChoice>,
    /// Tools whose successful execution finishes the run.
    pub special_tools: Option<Vec<String>>,
    /// `[agents.X] max_run_time`: this agent's wall-clock limit per run,
    /// over `[daemon] max_run_time` (an agent known to need long runs, or
    /// one that must never hold a slot for long). `None`: the daemon's.
    pub max_run_time: Option<Duration>,
    /// `[agents.X] max_tool_calls_per_step`, over the daemon's. `None`:
    /// the daemon's.
    pub max_tool_calls_per_step: Option<u32>,
    /// `[agents.X] max_host_calls_per_step`, over the daemon's. `None`:
    /// the daemon's.
    pub max_host_calls_per_step: Option<u32>,
    /// `[agents.X] approve`: the tool calls that wait for an operator's
    /// approval before they run. Not layered: an operator's rule, not a
    /// strategy's.
    pub approve: Approve,
    /// `[agents.X] input_timeout`: how long a question waits for a person
    /// before the asking plugin gets "no answer within N".
    pub input_timeout: Duration,
    /// `[agents.X] approval_timeout`: how long a held call waits for a
    /// decision before it is denied.
    pub approval_timeout: Duration,
    /// `[agents.X] keep_files`: globs (relative to the work dir) of the
    /// files a run leaves behind when it ends, whatever the ending.
    /// Empty (the default): nothing is kept.
    pub keep_files: Vec<String>,
    /// `[agents.X] keep_limit`: bytes of kept files per run; what would
    /// go past it is left out and listed in the run's record.
    pub keep_limit: u64,
    /// `[agents.X] daily_token_budget`: tokens (input plus output) this
    /// agent's runs may use per UTC day, all runs together; the daemon
    /// enforces it (`daemon::budget`). `None`: no budget of its own.
    pub daily_token_budget: Option<u64>,
}

impl AgentConfig {
    /// An agent named `name` running `toolcall` with `terminate`, deferring
    /// every layered setting to the strategy.
    pub fn with_defaults(name: &str) -> Self {
        AgentConfig {
            name: name.into(),
            strategy: "toolcall".into(),
            tools: vec!["terminate".into()],
            system_prompt: None,
            next_step_prompt: None,
            max_steps: None,
            max_observe: None,
            duplicate_threshold: DEFAULT_DUPLICATE_THRESHOLD as u32,
            max_messages: DEFAULT_MAX_MESSAGES as u32,
            tool_choice: None,
            special_tools: None,
            max_run_time: None,
            max_tool_calls_per_step: None,
            max_host_calls_per_step: None,
            approve: Approve::Nothing,
            input_timeout: DEFAULT_INPUT_TIMEOUT,
            approval_timeout: DEFAULT_APPROVAL_TIMEOUT,
            keep_files: Vec::new(),
            keep_limit: super::files::DEFAULT_KEEP_LIMIT,
            daily_token_budget: None,
        }
    }
}

/// `[daemon] max_run_time`: an hour is far more than any sensible agent
/// task, and short enough that a stuck run frees its slot the same day.
pub const DEFAULT_MAX_RUN_TIME: Duration = Duration::from_secs(3600);
/// `[daemon] max_run_bytes`: a long run's transcript and events fit many
/// times over; hundreds of concurrent runs at this size still fit in RAM.
pub const DEFAULT_MAX_RUN_BYTES: u64 = 64 << 20;
/// `[daemon] max_tool_calls_per_step`: models ask for a handful of parallel
/// calls; hundreds in one reply is a loop or an attack.
pub const DEFAULT_MAX_TOOL_CALLS_PER_STEP: u32 = 32;
/// `[daemon] max_host_calls_per_step`: LLM requests of the strategy plus
/// sandbox operations of its tools in one step. A real step makes one or
/// two requests and a tool a handful of operations per call (32 calls of
/// `str_replace_editor` are about a hundred); a thousand is a loop.
pub const DEFAULT_MAX_HOST_CALLS_PER_STEP: u32 = 1024;
/// `[daemon] max_message_bytes` is at least this: a message's content (the
/// review's suggestion; a whole book chapter fits).
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 1 << 20;
/// `[daemon] max_tool_arguments_bytes`: one call's arguments. A model
/// writing a long file does it in pieces well under this.
pub const DEFAULT_MAX_TOOL_ARGUMENTS_BYTES: usize = 256 << 10;
/// `[daemon] max_tool_result_bytes` is at least this, even when
/// `[sandbox] output_limit` is smaller.
pub const MIN_TOOL_RESULT_BYTES: usize = 64 << 10;
/// Room a message needs above a tool result: a strategy frames the result
/// (`Observed output of cmd ...`) before it adds it as a `tool` message,
/// so `max_message_bytes` must exceed `max_tool_result_bytes` by this.
pub const MESSAGE_FRAMING_BYTES: usize = 64 << 10;

/// The limits that keep one run from taking the daemon or the host down:
/// how much a plugin or the model can make the host keep, and for how long
/// a run may go on. Data is capped where it crosses into the host (the run
/// context), before it is stored, put in an event or sent to followers.
/// Built by `config` from `[daemon]` keys; three of them can be set per agent
/// ([`RunLimits::for_agent`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunLimits {
    /// Wall clock from the moment the run leaves the queue: LLM waits,
    /// sandbox waits and plugin time all count. Past it the run ends
    /// `error` and its sandbox is removed.
    pub max_run_time: Duration,
    /// Bytes of transcript plus events one run may make the daemon keep;
    /// past it the run ends `error`.
    pub max_run_bytes: u64,
    /// Tool calls run per step; further calls get an error instead of
    /// running (counted host-side, whatever the strategy does).
    pub max_tool_calls_per_step: u32,
    /// Host calls that wait per step: each LLM request the strategy makes
    /// and each sandbox operation its tools make. The step deadline counts
    /// plugin time only, so without this a plugin calling them in a loop
    /// would wait (and spend tokens, and load the engine) until
    /// `max_run_time`; past it the calls are refused at once, the plugin's
    /// time counts again and the step deadline ends such a loop.
    pub max_host_calls_per_step: u32,
    /// A message's content, as a strategy adds it or the model returns it.
    pub max_message_bytes: usize,
    /// One tool call's arguments, as the model returns them or a strategy
    /// passes them to a tool.
    pub max_tool_arguments_bytes: usize,
    /// A tool's result (or error text); longer ones are cut with a note.
    pub max_tool_result_bytes: usize,
}

impl RunLimits {
    /// The defaults for a sandbox whose commands keep `output_limit` bytes
    /// per stream: a tool result may carry that much (at least 64 KiB), and
    /// a message twice that (at least 1 MiB), room for such a result and
    /// the strategy's words around it: 2 MiB with the default 1 MiB.
    pub fn with_output_limit(output_limit: usize) -> Self {
        let max_tool_result_bytes = output_limit.max(MIN_TOOL_RESULT_BYTES);
        RunLimits {
            max_run_time: DEFAULT_MAX_RUN_TIME,
            max_run_bytes: DEFAULT_MAX_RUN_BYTES,
            max_tool_calls_per_step: DEFAULT_MAX_TOOL_CALLS_PER_STEP,
            max_host_calls_per_step: DEFAULT_MAX_HOST_CALLS_PER_STEP,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES
                .max(max_tool_result_bytes.saturating_mul(2)),
            max_tool_arguments_bytes: DEFAULT_MAX_TOOL_ARGUMENTS_BYTES,
            max_tool_result_bytes,
        }
    }

    /// These limits with `agent`'s own keys over them.
    pub fn for_agent(&self, agent: &AgentConfig) -> RunLimits {
        RunLimits {
            max_run_time: agent.max_run_time.unwrap_or(self.max_run_time),
            max_tool_calls_per_step: agent
                .max_tool_calls_per_step
                .unwrap_or(self.max_tool_calls_per_step),
            max_host_calls_per_step: agent
                .max_host_calls_per_step
                .unwrap_or(self.max_host_calls_per_step),
            ..*self
        }
    }
}

impl Default for RunLimits {
    /// The defaults for the default `[sandbox] output_limit` (1 MiB).
    fn default() -> Self {
        RunLimits::with_output_limit(1 << 20)
    }
}

/// Used when neither the agent's configuration nor its strategy sets a limit.
pub const DAEMON_DEFAULT_MAX_STEPS: u32 = 10;
/// Used when neither the agent nor its strategy sets a tool choice.
pub const DAEMON_DEFAULT_TOOL_CHOICE: ToolChoice = ToolChoice::Auto;
/// Used when neither the agent nor its strategy names special tools.
pub const DAEMON_DEFAULT_SPECIAL_TOOLS: &[&str] = &["terminate"];

/// Where a setting's value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The agent's own configuration.
    Agent,
    /// The strategy plugin's `defaults()`.
    Strategy,
    /// The daemon's built-in default.
    Daemon,
    /// Nobody set it (a prompt that is not sent at all).
    None,
}

impl Source {
    /// The snake_case name, as `GET /v1/agents` and `agentd agents` show it.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Agent => "agent",
            Source::Strategy => "strategy",
            Source::Daemon => "daemon",
            Source::None => "none",
        }
    }
}

/// The resolved settings of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSettings {
    /// The agent's name.
    pub name: String,
    /// The system prompt to send; `None` sends none.
    pub system_prompt: Option<String>,
    /// The prompt before each step's request; `None` sends none (the stuck
    /// warning is added to it for one step when needed).
    pub next_step_prompt: Option<String>,
    /// The step limit, at least 1.
    pub max_steps: u32,
    /// Observation truncation, from the agent only (strategies have no default
    /// for it); `None`: no limit.
    pub max_observe: Option<u32>,
    /// How the model may use tools.
    pub tool_choice: ToolChoice,
    /// Tools whose successful execution finishes the run.
    pub special_tools: Vec<String>,
    /// From the agent only; see [`AgentConfig::duplicate_threshold`].
    pub duplicate_threshold: u32,
    /// From the agent only; see [`AgentConfig::max_messages`].
    pub max_messages: u32,
    /// From the agent only; see [`AgentConfig::approve`].
    pub approve: Approve,
    /// From the agent only; see [`AgentConfig::input_timeout`].
    pub input_timeout: Duration,
    /// From the agent only; see [`AgentConfig::approval_timeout`].
    pub approval_timeout: Duration,
}

/// Where each layered setting of [`RunSettings`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sources {
    /// Where [`RunSettings::system_prompt`] came from.
    pub system_prompt: Source,
    /// Where [`RunSettings::next_step_prompt`] came from.
    pub next_step_prompt: Source,
    /// Where [`RunSettings::max_steps`] came from.
    pub max_steps: Source,
    /// Where [`RunSettings::tool_choice`] came from.
    pub tool_choice: Source,
    /// Where [`RunSettings::special_tools`] came from.
    pub special_tools: Source,
}

/// Layers `agent` over `strategy` (its loaded plugin's defaults; `None`
/// when the plugin is not loaded) over the daemon's defaults.
pub fn resolve(agent: &AgentConfig, strategy: Option<&StrategyDefaults>) -> (RunSettings, Sources) {
    let empty = StrategyDefaults::default();
    let strategy = strategy.unwrap_or(&empty);
    let (system_prompt, system_src) = prompt(&agent.system_prompt, &strategy.system_prompt);
    let (next_step_prompt, next_src) = prompt(&agent.next_step_prompt, &strategy.next_step_prompt);
    let (max_steps, steps_src) = layer(
        agent.max_steps,
        strategy.max_steps,
        DAEMON_DEFAULT_MAX_STEPS,
    );
    let (tool_choice, choice_src) = layer(
        agent.tool_choice,
        strategy.tool_choice,
        DAEMON_DEFAULT_TOOL_CHOICE,
    );
    let (special_tools, special_src) = layer(
        agent.special_tools.clone(),
        strategy.special_tools.clone(),
        DAEMON_DEFAULT_SPECIAL_TOOLS
            .iter()
            .map(|s| s.to_string())
            .collect(),
    );
    let settings = RunSettings {
        name: agent.name.clone(),
        system_prompt,
        next_step_prompt,
        // A strategy asking for 0 steps gets one: a run always steps once.
        max_steps: max_steps.max(1),
        max_observe: agent.max_observe,
        tool_choice,
        special_tools,
        duplicate_threshold: agent.duplicate_threshold,
        max_messages: agent.max_messages,
        approve: agent.approve.clone(),
        input_timeout: agent.input_timeout,
        approval_timeout: agent.approval_timeout,
    };
    let sources = Sources {
        system_prompt: system_src,
        next_step_prompt: next_src,
        max_steps: steps_src,
        tool_choice: choice_src,
        special_tools: special_src,
    };
    (settings, sources)
}

fn layer<T>(agent: Option<T>, strategy: Option<T>, daemon: T) -> (T, Source) {
    match (agent, strategy) {
        (Some(v), _) => (v, Source::Agent),
        (None, Some(v)) => (v, Source::Strategy),
        (None, None) => (daemon, Source::Daemon),
    }
}

/// An agent's prompt key set to `""` means "send none", even when the
/// strategy has a default: that is how an agent opts out of it.
fn prompt(agent: &Option<String>, strategy: &Option<String>) -> (Option<String>, Source) {
    match (agent, strategy) {
        (Some(a), _) if a.is_empty() => (None, Source::Agent),
        (Some(a), _) => (Some(a.clone()), Source::Agent),
        (None, Some(s)) if !s.is_empty() => (Some(s.clone()), Source::Strategy),
        (None, _) => (None, Source::None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toolcall_defaults() -> StrategyDefaults {
        StrategyDefaults {
            system_prompt: Some("sys".into()),
            next_step_prompt: Some("next".into()),
            max_steps: Some(30),
            tool_choice: None,
            special_tools: Some(vec!["finish".into()]),
        }
    }

    #[test]
    fn agent_then_strategy_then_daemon() {
        let mut agent = AgentConfig::with_defaults("mine");
        let (s, src) = resolve(&agent, Some(&toolcall_defaults()));
        assert_eq!(s.system_prompt.as_deref(), Some("sys"));
        assert_eq!(s.next_step_prompt.as_deref(), Some("next"));
        assert_eq!((s.max_steps, src.max_steps), (30, Source::Strategy));
        assert_eq!(
            (s.tool_choice, src.tool_choice),
            (ToolChoice::Auto, Source::Daemon)
        );
        assert_eq!(s.special_tools, ["finish"]);
        assert_eq!(src.system_prompt, Source::Strategy);

        agent.system_prompt = Some("mine".into());
        agent.max_steps = Some(3);
        agent.tool_choice = Some(ToolChoice::Required);
        let (s, src) = resolve(&agent, Some(&toolcall_defaults()));
        assert_eq!(s.system_prompt.as_deref(), Some("mine"));
        assert_eq!((s.max_steps, src.max_steps), (3, Source::Agent));
        assert_eq!(
            (s.tool_choice, src.tool_choice),
            (ToolChoice::Required, Source::Agent)
        );

        let (s, src) = resolve(&AgentConfig::with_defaults("x"), None);
        assert_eq!(
            (s.max_steps, src.max_steps),
            (DAEMON_DEFAULT_MAX_STEPS, Source::Daemon)
        );
        assert_eq!((s.system_prompt, src.system_prompt), (None, Source::None));
        assert_eq!(s.special_tools, ["terminate"]);
    }

    #[test]
    fn an_empty_prompt_opts_out_of_the_strategy_default() {
        let mut agent = AgentConfig::with_defaults("quiet");
        agent.next_step_prompt = Some(String::new());
        let (s, src) = resolve(&agent, Some(&toolcall_defaults()));
        assert_eq!(
            (s.next_step_prompt, src.next_step_prompt),
            (None, Source::Agent)
        );
        assert_eq!(s.system_prompt.as_deref(), Some("sys"));
    }
}
