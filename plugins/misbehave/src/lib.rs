//! A strategy that misbehaves on request, so the host's fuel/epoch limits,
//! trap handling and stdio capture can be tested. The system prompt picks
//! the behaviour because it is the one input a test sets per agent.

use agentd_strategy_sdk::{Error, Guest, Metadata, agent, export_strategy};

struct Misbehave;

impl Guest for Misbehave {
    fn metadata() -> Metadata {
        Metadata::new(
            "misbehave",
            env!("CARGO_PKG_VERSION"),
            "Test strategy: loops forever, traps or prints, as its system prompt asks.",
        )
    }

    /// The daemon's default keeps tests of the step limit about the daemon.
    fn default_max_steps() -> Option<u32> {
        None
    }

    fn step() -> Result<String, Error> {
        let prompt = agent::config().system_prompt.unwrap_or_default();
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

export_strategy!(Misbehave);
