//! `agentd plugin ...`: the authoring kit. Everything a plugin author needs
//! with only the installed binary: the contract (`wit`), a project that
//! builds with one command (`new`), the daemon's checks without a daemon
//! (`check`), one tool call without a daemon or a model (`call`), and
//! installing into (and removing from) a running daemon through its API
//! (`install`, `remove`).

mod call;
mod check;
mod embedded;
mod install;
mod new;
mod wit;

use std::path::PathBuf;

use clap::{Subcommand, ValueEnum};

/// `agentd plugin SUBCOMMAND`.
#[derive(clap::Args, Debug)]
pub struct PluginArgs {
    #[command(subcommand)]
    pub command: PluginCommand,
}

#[derive(Subcommand, Debug)]
pub enum PluginCommand {
    /// Print the plugin contract (WIT), or write it with its dependencies into a folder.
    Wit(WitArgs),
    /// Write a new plugin project that builds with one command.
    New(NewArgs),
    /// Load a component as the daemon would and report what it is and what is wrong with it.
    Check(CheckArgs),
    /// Call a tool once, without a daemon or a model, and print its result.
    Call(CallArgs),
    /// Install a component into the daemon's plugins folder, through the daemon.
    Install(InstallArgs),
    /// Remove a plugin from the daemon's plugins folder, through the daemon.
    Remove(RemoveArgs),
}

#[derive(clap::Args, Debug)]
pub struct WitArgs {
    /// Write `agentd.wit` and its `deps/` into this folder instead of
    /// printing `agentd.wit`.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The contract version (default: the newest this agentd knows).
    #[arg(long, value_name = "VERSION")]
    pub contract: Option<String>,
}

/// What a plugin is.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Something the model can call.
    Tool,
    /// An agent's `step()`.
    Strategy,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Tool => "tool",
            Kind::Strategy => "strategy",
        }
    }
}

/// The language of a new project.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    Rust,
    Python,
}

#[derive(clap::Args, Debug)]
pub struct NewArgs {
    /// A tool or a strategy.
    #[arg(long, value_enum)]
    pub kind: Kind,
    /// The language of the project.
    #[arg(long, value_enum, default_value_t = Lang::Rust)]
    pub lang: Lang,
    /// The plugin's name: a lower-case letter, then lower-case letters,
    /// digits or `_` (it is also the crate or module name and the file name).
    pub name: String,
    /// Where to write the project (default: ./NAME); must not exist or be empty.
    pub dir: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    /// The component file.
    pub file: PathBuf,
    /// Configuration file, for `[plugins]` (default: as for `serve`).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
pub struct CallArgs {
    /// A component file, or the name of a tool in the plugins folder.
    pub tool: String,
    /// The arguments, a JSON object (default: `{}`).
    #[arg(default_value = "{}")]
    pub arguments: String,
    /// Configuration file, for `[daemon] plugins_dir`, `[plugins]` and
    /// `[sandbox]` (default: as for `serve`).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print `{"ok": ..., "result"|"error": ...}` as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
pub struct InstallArgs {
    /// The component file.
    pub file: PathBuf,
    /// The plugin's name, which must be its `metadata().name` (default: the
    /// file name without `.wasm`).
    #[arg(long)]
    pub name: Option<String>,
    /// Configuration file, read for `[daemon] socket`.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the daemon's JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
pub struct RemoveArgs {
    /// The plugin's name.
    pub name: String,
    /// Configuration file, read for `[daemon] socket`.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the daemon's JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `agentd plugin ...` and returns the exit status.
pub async fn main(args: PluginArgs, socket: Option<PathBuf>) -> i32 {
    match args.command {
        PluginCommand::Wit(a) => wit::run(&a),
        PluginCommand::New(a) => new::run(&a),
        PluginCommand::Check(a) => check::run(&a).await,
        PluginCommand::Call(a) => call::run(&a).await,
        PluginCommand::Install(a) => {
            let config = a.config.clone();
            super::with_daemon(
                socket,
                config,
                |c| async move { install::install(&c, &a).await },
            )
            .await
        }
        PluginCommand::Remove(a) => {
            let config = a.config.clone();
            super::with_daemon(
                socket,
                config,
                |c| async move { install::remove(&c, &a).await },
            )
            .await
        }
    }
}

/// Prints `message` as the command's error and returns the usage status.
fn usage(message: impl std::fmt::Display) -> i32 {
    eprintln!("agentd: {message}");
    super::exit::USAGE
}
