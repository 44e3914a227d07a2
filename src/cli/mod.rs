//! The `agentd` command line.

mod progress;
mod run_local;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// Exit status for bad usage or configuration (clap uses it too).
pub const EXIT_USAGE: i32 = 2;

#[derive(Parser, Debug)]
#[command(
    name = "agentd",
    version,
    about = "Hosts LLM agents whose strategies and tools are WebAssembly components"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run an agent on a request and print its result.
    Run(RunArgs),
    /// List the plugins found in the plugins folder.
    Plugins(PluginsArgs),
}

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// Run in this process instead of through the daemon.
    #[arg(long)]
    pub local: bool,
    /// Configuration file (default: $AGENTD_CONFIG, then /etc/agentd/agentd.toml
    /// for root or ~/.config/agentd/agentd.toml, then built-in defaults).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the run record as JSON instead of the result.
    #[arg(long)]
    pub json: bool,
    /// The agent to run (`toolcall`, `manus`, or one from the configuration).
    pub agent: String,
    /// The request for the agent.
    pub request: String,
}

#[derive(clap::Args, Debug)]
pub struct PluginsArgs {
    /// Load the plugins in this process instead of asking the daemon.
    #[arg(long)]
    pub local: bool,
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs the parsed command and returns the process exit status.
pub async fn main(cli: Cli) -> i32 {
    match cli.command {
        Command::Run(args) => run_local::run(args).await,
        Command::Plugins(args) => run_local::plugins(args).await,
    }
}
