//! A strategy that misbehaves on request, so the host's fuel/epoch limits,
//! trap handling, stdio capture and limits on what it keeps can be tested.
//! The system prompt picks the behaviour because it is the one input a test
//! sets per agent.

use agentd_strategy_sdk::{
    Defaults, Error, Guest, Message, Metadata, Plan, PlanStep, StepStatus, agent, export_strategy,
    human, plan,
};

struct Misbehave;

impl Guest for Misbehave {
    fn metadata() -> Metadata {
        Metadata::new(
            "misbehave",
            env!("CARGO_PKG_VERSION"),
            "Test strategy: loops forever, traps or prints, as its system prompt asks.",
        )
    }

    /// No defaults: the daemon's keep tests of the step limit about the
    /// daemon, and the system prompt (the behaviour) is always the agent's.
    fn defaults() -> Defaults {
        Defaults {
            system_prompt: None,
            next_step_prompt: None,
            max_steps: None,
            tool_choice: None,
            special_tools: None,
        }
    }

    fn step() -> Result<String, Error> {
        let prompt = agent::config().system_prompt.unwrap_or_default();
        if let Some(ended) = wasm_limits::misbehave(&prompt) {
            return ended;
        }
        if prompt.contains("loop-forever") {
            // black_box keeps the optimiser from proving the loop pointless
            // and deleting it (an empty infinite loop is UB-free but foldable).
            let mut counter: u64 = 0;
            loop {
                counter = core::hint::black_box(counter.wrapping_add(1));
            }
        }
        if prompt.contains("trap") {
            panic!("misbehave: deliberate trap");
        }
        if prompt.contains("probe-wasi") {
            // What ambient authority does the host grant? Each should be none.
            let fs = match std::fs::read_dir("/") {
                Ok(_) => "fs=open",
                Err(_) => "fs=denied",
            };
            let file = match std::fs::read("/etc/passwd") {
                Ok(_) => "file=read",
                Err(_) => "file=denied",
            };
            let env = format!("env={}", std::env::vars().count());
            let args = format!("args={}", std::env::args().count());
            agent::finish();
            return Ok(format!("{fs} {file} {env} {args}"));
        }
        // Messages and requests a real server would refuse: the host must
        // refuse them first, naming this strategy.
        if prompt.contains("empty-assistant") {
            agent::add_message(&Message {
                content: None,
                ..Message::assistant("")
            })?;
            return Ok("added an empty assistant message".to_string());
        }
        if prompt.contains("tool-without-name") {
            agent::add_message(&Message {
                name: None,
                ..Message::tool("out", "call_1", "echo")
            })?;
            return Ok("added a tool message without name".to_string());
        }
        if prompt.contains("no-user") {
            let request = agentd_strategy_sdk::ChatRequest {
                messages: vec![Message::system("no user here")],
                tools: Vec::new(),
                tool_choice: agentd_strategy_sdk::ToolChoice::None,
            };
            return match agent::chat(&request) {
                Ok(_) => Ok("the host sent a request without a user message".to_string()),
                Err(agentd_strategy_sdk::ChatError::Failed(e)) => Err(e),
                Err(agentd_strategy_sdk::ChatError::TokenLimit(m)) => Err(Error::failed(m)),
            };
        }
        if let Some(rest) = prompt.split("add-message-flood").nth(1) {
            // `add-message-flood 3`: messages of 3 MiB; 100 MiB by default.
            let mib = rest
                .split_whitespace()
                .next()
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or(100);
            return add_message_flood(mib << 20);
        }
        if prompt.contains("step-result-flood") {
            // The step's result line is kept by the host too. 10 MiB: past
            // max_message_bytes, under the 16 MiB a call may hand over.
            agent::finish();
            return Ok("R".repeat(10 << 20));
        }
        if prompt.contains("chat-loop") {
            return chat_loop();
        }
        if let Some(rest) = prompt.split("log-lines").nth(1) {
            // `log-lines 1000`: that many lines through `logging.log` and
            // as many on stdout, as fast as the guest can.
            let n = rest
                .split_whitespace()
                .next()
                .and_then(|n| n.parse::<u32>().ok())
                .unwrap_or(100_000);
            for i in 0..n {
                agentd_strategy_sdk::log::info(&format!("misbehave log line {i}"));
                println!("misbehave stdout line {i}");
            }
            agent::finish();
            return Ok(format!("logged {n} lines twice"));
        }
        if let Some(question) = prompt.split("ask-human").nth(1) {
            // A strategy asking a person itself (contract 0.2.2), not
            // through the `ask_human` tool: the host's error is the step's.
            return human::ask(question.trim()).map(|answer| format!("the person said: {answer}"));
        }
        if prompt.contains("plan-story") {
            return plan_story(agent::config().current_step);
        }
        if prompt.contains("print") {
            println!("hello from stdout");
            eprintln!("hello from stderr");
            agent::finish();
            return Ok("printed".to_string());
        }
        agent::finish();
        Ok("misbehave is fine".to_string())
    }
}

/// A strategy that makes the host keep more than it should: one message of
/// `bytes`, sent again and again whatever the host answers. The import
/// takes the message by reference, so each call costs the guest nothing;
/// the host must refuse it before it keeps (or copies) anything, and end
/// the run.
fn add_message_flood(bytes: usize) -> Result<String, Error> {
    let big = Message::user("A".repeat(bytes));
    loop {
        // Refusals are ignored on purpose: a hostile strategy would.
        let _ = core::hint::black_box(agent::add_message(&big));
    }
}

/// A strategy that asks the model again and again whatever it answers:
/// every request waits on the host (which pauses the step clock) and
/// spends tokens. Never returns.
fn chat_loop() -> Result<String, Error> {
    let request = agentd_strategy_sdk::ChatRequest {
        messages: agent::memory(),
        tools: Vec::new(),
        tool_choice: agentd_strategy_sdk::ToolChoice::None,
    };
    loop {
        // Refusals are ignored on purpose, as above.
        let _ = core::hint::black_box(agent::chat(&request));
    }
}

/// The plan's story, one move per step (contract 0.2.3), for the host's
/// tests: step 1 publishes a two-step plan; step 2 marks its first step
/// completed with notes; step 3 publishes that same plan again (the host
/// must record nothing); step 4 publishes 101 steps and returns the host's
/// refusal; from step 5 on it returns what `plan::current()` says (a
/// resumed run's is its predecessor's) and finishes.
fn plan_story(step: u32) -> Result<String, Error> {
    let step_of = |text: &str, status, notes: Option<&str>| PlanStep {
        text: text.to_string(),
        status,
        notes: notes.map(str::to_string),
    };
    let greet = |first| Plan {
        title: "Greet the user".to_string(),
        steps: vec![
            step_of(
                "say hi",
                first,
                (first == StepStatus::Completed).then_some("said hi"),
            ),
            step_of("say bye", StepStatus::NotStarted, None),
        ],
    };
    match step {
        1 => {
            plan::publish(&greet(StepStatus::NotStarted)).map(|()| "published a 2-step plan".into())
        }
        2 => {
            plan::publish(&greet(StepStatus::Completed)).map(|()| "marked step 1 completed".into())
        }
        3 => plan::publish(&greet(StepStatus::Completed))
            .map(|()| "published the same plan again".into()),
        4 => {
            let huge = Plan {
                title: "Too long".to_string(),
                steps: (1..=101)
                    .map(|i| step_of(&format!("step {i}"), StepStatus::NotStarted, None))
                    .collect(),
            };
            Ok(match plan::publish(&huge) {
                Ok(()) => "the host took a 101-step plan".to_string(),
                Err(e) => format!("refused: {}", e.message),
            })
        }
        _ => {
            agent::finish();
            Ok(match plan::current() {
                None => "current plan: none".to_string(),
                Some(p) => {
                    let steps: Vec<String> = p
                        .steps
                        .iter()
                        .map(|s| {
                            let status = match s.status {
                                StepStatus::NotStarted => "not_started",
                                StepStatus::InProgress => "in_progress",
                                StepStatus::Completed => "completed",
                                StepStatus::Blocked => "blocked",
                            };
                            match &s.notes {
                                Some(n) => format!("{} ({status}: {n})", s.text),
                                None => format!("{} ({status})", s.text),
                            }
                        })
                        .collect();
                    format!("current plan: {}: {}", p.title, steps.join(", "))
                }
            })
        }
    }
}

export_strategy!(Misbehave);

/// Modes that attack the wasm-level limits of the host (`[plugins]
/// memory_limit`, the stack, handle caps, the bytes one call may pass): the
/// host must stop each with an error naming this plugin and the limit.
mod wasm_limits {
    use agentd_strategy_sdk::{Error, agent, log};

    // `wasi:cli/stdout.get-stdout`, imported directly so the handles it
    // returns can be kept (the standard library drops each one).
    #[link(wasm_import_module = "wasi:cli/stdout@0.2.0")]
    unsafe extern "C" {
        #[link_name = "get-stdout"]
        fn get_stdout() -> i32;
    }

    pub fn misbehave(prompt: &str) -> Option<Result<String, Error>> {
        if prompt.contains("grow-memory") {
            // Keeps every MiB it gets (touched, so it is real memory) until
            // an allocation fails, which aborts: a trap.
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                let mut chunk = vec![0u8; 1 << 20];
                chunk[0] = 1;
                hoard.push(core::hint::black_box(chunk));
                if hoard.len() > 1 << 14 {
                    agent::finish();
                    return Some(Ok(format!("grew to {} MiB unhindered", hoard.len())));
                }
            }
        }
        if prompt.contains("deep-recursion") {
            let depth = recurse(core::hint::black_box(0));
            agent::finish();
            return Some(Ok(format!("recursed {depth} deep unhindered")));
        }
        if prompt.contains("stdout-handles") {
            let mut held = 0u32;
            for _ in 0..1_000_000 {
                // SAFETY: the import takes nothing and returns a handle,
                // which is deliberately never dropped.
                let handle = unsafe { get_stdout() };
                core::hint::black_box(handle);
                held += 1;
            }
            agent::finish();
            return Some(Ok(format!("held {held} stdout handles unhindered")));
        }
        if prompt.contains("log-flood") {
            // One call handing the host 32 MiB.
            let big = "A".repeat(32 << 20);
            log::info(&big);
            agent::finish();
            return Some(Ok("passed 32 MiB to the host unhindered".to_string()));
        }
        None
    }

    /// Never returns: each frame keeps a buffer live across the call, so
    /// the recursion can be neither turned into a loop nor folded away.
    #[allow(unconditional_recursion)] // the point: it must be stopped by the host
    fn recurse(depth: u64) -> u64 {
        let frame = core::hint::black_box([depth; 32]);
        let below = recurse(core::hint::black_box(depth + 1));
        below.wrapping_add(frame[(depth % 32) as usize])
    }
}
