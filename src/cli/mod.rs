//! The `agentd` command line.

mod ask;
mod client;
mod doctor;
mod endpoint;
pub mod exit;
mod files;
mod follow;
mod info;
mod live;
mod local_record;
mod mcp;
mod mcp_serve;
mod ndjson;
mod out;
mod paths;
mod plugin_kit;
mod progress;
mod remote_run;
mod resume;
mod run_local;
mod runs;
mod sanitize;
mod table;
mod transcript;
mod view;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use client::{Client, ClientError};

#[derive(Parser, Debug)]
#[command(
    name = "agentd",
    version,
    about = "Hosts LLM agents whose strategies and tools are WebAssembly components"
)]
pub struct Cli {
    /// The daemon's socket (default: `[daemon] socket` from the configuration
    /// file, else $AGENTD_SOCKET, else the user's daemon in $XDG_RUNTIME_DIR
    /// if it has a socket, else /run/agentd/agentd.sock).
    #[arg(long, global = true, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the daemon in the foreground (what the systemd service starts).
    Serve(ServeArgs),
    /// Run an agent on a request and print its result.
    Run(RunArgs),
    /// List the runs, newest first.
    Runs(RunsArgs),
    /// Show a run's transcript.
    Show(ShowArgs),
    /// Print a run's events.
    Logs(LogsArgs),
    /// Cancel a run.
    Cancel(CancelArgs),
    /// Answer the question a run waits on.
    Reply(ReplyArgs),
    /// Approve (or deny) the tool call a run holds for approval.
    Approve(ApproveArgs),
    /// Continue an ended run in a new run, from its last completed step.
    Resume(ResumeArgs),
    /// List or download the files a run kept (`[agents.X] keep_files`).
    Files(FilesArgs),
    /// List the agents the daemon can run.
    Agents(JsonArgs),
    /// List the plugins found in the plugins folder.
    Plugins(PluginsArgs),
    /// Write, check, call, install and remove plugins (the authoring kit).
    Plugin(plugin_kit::PluginArgs),
    /// Show the daemon's state.
    Status(JsonArgs),
    /// The Model Context Protocol: the MCP servers agents use.
    Mcp(mcp::McpArgs),
    /// Check that everything an agent's runs need is in place, one line
    /// each with the fix (exit 0 only when all is).
    Doctor(DoctorArgs),
    /// Print where a daemon with this configuration keeps its state,
    /// plugins and socket (`key=value` lines, for scripts).
    Paths(PathsArgs),
}

#[derive(clap::Args, Debug)]
pub struct PathsArgs {
    /// Configuration file (default: $AGENTD_CONFIG, then /etc/agentd/agentd.toml
    /// for root or ~/.config/agentd/agentd.toml, then built-in defaults).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print a JSON object instead of `key=value` lines.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
pub struct DoctorArgs {
    /// Configuration file (default: $AGENTD_CONFIG, then /etc/agentd/agentd.toml
    /// for root or ~/.config/agentd/agentd.toml, then built-in defaults).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print `{"ok": ..., "checks": [{"name", "ok", "detail", "fix"}]}`.
    #[arg(long)]
    pub json: bool,
    /// The agent whose strategy, tools and model are checked.
    #[arg(long, value_name = "NAME", default_value = "manus")]
    pub agent: String,
    /// Run the checks in this process even when a daemon answers (by
    /// default a running daemon runs them as itself; `--config` implies
    /// this).
    #[arg(long)]
    pub local: bool,
}

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Configuration file (default: $AGENTD_CONFIG, then /etc/agentd/agentd.toml
    /// for root or ~/.config/agentd/agentd.toml, then built-in defaults).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
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
    /// Print the run's id and leave it running in the daemon.
    #[arg(long, conflicts_with = "local")]
    pub detach: bool,
    /// A file the run starts with in its work dir: LOCAL[:REMOTE], REMOTE
    /// relative to the work dir (default: LOCAL's file name). Repeatable.
    #[arg(long = "file", value_name = "LOCAL[:REMOTE]")]
    pub files: Vec<String>,
    /// The agent to run (`toolcall`, `manus`, `react`, `planner`, or one from the configuration).
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

/// For commands that only talk to the daemon: the configuration file is
/// read for `[daemon] socket` only.
#[derive(clap::Args, Debug)]
pub struct JsonArgs {
    /// Configuration file, read for `[daemon] socket`.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the daemon's JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
pub struct RunsArgs {
    #[command(flatten)]
    pub common: JsonArgs,
    /// How many runs to list.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    pub limit: u32,
    /// List runs older than this sequence number (the next page).
    #[arg(long, value_name = "SEQ", conflicts_with = "waiting")]
    pub before: Option<i64>,
    /// Only the runs waiting for a person (a question, an approval).
    #[arg(long)]
    pub waiting: bool,
}

#[derive(clap::Args, Debug)]
pub struct ReplyArgs {
    /// Configuration file, read for `[daemon] socket`.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The run's id, or a unique prefix of it.
    pub run: String,
    /// The answer.
    pub text: String,
}

#[derive(clap::Args, Debug)]
pub struct ApproveArgs {
    /// Configuration file, read for `[daemon] socket`.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Deny the call instead; the reason, if given, is what the model reads.
    #[arg(long, value_name = "REASON", num_args = 0..=1, default_missing_value = "")]
    pub deny: Option<String>,
    /// The run's id, or a unique prefix of it.
    pub run: String,
}

#[derive(clap::Args, Debug)]
pub struct ShowArgs {
    #[command(flatten)]
    pub common: JsonArgs,
    /// The run's id, or a unique prefix of it.
    pub run: String,
}

#[derive(clap::Args, Debug)]
pub struct LogsArgs {
    #[command(flatten)]
    pub common: JsonArgs,
    /// Keep printing events until the run ends.
    #[arg(short, long)]
    pub follow: bool,
    /// The run's id, or a unique prefix of it.
    pub run: String,
}

#[derive(clap::Args, Debug)]
pub struct CancelArgs {
    /// Configuration file, read for `[daemon] socket`.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The run's id, or a unique prefix of it.
    pub run: String,
}

#[derive(clap::Args, Debug)]
pub struct ResumeArgs {
    /// Configuration file, read for `[daemon] socket`.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Steps the new run may take (default: what is left of the agent's
    /// step limit, at least 1).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub steps: Option<u32>,
    /// Print the new run's record as JSON instead of its result.
    #[arg(long)]
    pub json: bool,
    /// Print the new run's id and leave it running in the daemon.
    #[arg(long)]
    pub detach: bool,
    /// Start the new run without the old run's kept files in its work dir.
    #[arg(long)]
    pub no_files: bool,
    /// The run to resume: its id, or a unique prefix of it.
    pub run: String,
}

#[derive(clap::Args, Debug)]
pub struct FilesArgs {
    #[command(flatten)]
    pub common: JsonArgs,
    /// Into this folder (with PATH: that file; without: every kept file),
    /// keeping the paths under the work dir.
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// The run's id, or a unique prefix of it.
    pub run: String,
    /// A kept file (relative to the work dir) to download; without it,
    /// the kept files are listed.
    pub path: Option<String>,
}

/// Runs the parsed command and returns the process exit status.
pub async fn main(cli: Cli) -> i32 {
    let socket = cli.socket;
    match cli.command {
        Command::Serve(args) => crate::daemon::serve(args.config, socket).await,
        Command::Run(args) if args.local => run_local::run(args).await,
        Command::Plugins(args) if args.local => run_local::plugins(args).await,
        Command::Plugin(args) => plugin_kit::main(args, socket).await,
        Command::Doctor(args) => doctor::run(args, socket).await,
        Command::Paths(args) => paths::run(args),
        Command::Run(args) => {
            with_daemon(socket, args.config.clone(), |c| async move {
                remote_run::run(&c, &args).await
            })
            .await
        }
        Command::Plugins(args) => {
            with_daemon(socket, args.config.clone(), |c| async move {
                info::plugins(&c, args.json).await
            })
            .await
        }
        Command::Runs(args) => {
            with_daemon(socket, args.common.config.clone(), |c| async move {
                runs::list(&c, &args).await
            })
            .await
        }
        Command::Show(args) => {
            with_daemon(socket, args.common.config.clone(), |c| async move {
                runs::show(&c, &args.run, args.common.json).await
            })
            .await
        }
        Command::Logs(args) => {
            with_daemon(socket, args.common.config.clone(), |c| async move {
                runs::logs(&c, &args.run, args.follow, args.common.json).await
            })
            .await
        }
        Command::Cancel(args) => {
            with_daemon(socket, args.config.clone(), |c| async move {
                runs::cancel(&c, &args.run).await
            })
            .await
        }
        Command::Reply(args) => {
            with_daemon(socket, args.config.clone(), |c| async move {
                ask::reply(&c, &args).await
            })
            .await
        }
        Command::Approve(args) => {
            with_daemon(socket, args.config.clone(), |c| async move {
                ask::approve(&c, &args).await
            })
            .await
        }
        Command::Resume(args) => {
            with_daemon(socket, args.config.clone(), |c| async move {
                resume::resume(&c, &args).await
            })
            .await
        }
        Command::Files(args) => {
            with_daemon(socket, args.common.config.clone(), |c| async move {
                files::files(&c, &args).await
            })
            .await
        }
        Command::Agents(args) => {
            with_daemon(socket, args.config.clone(), |c| async move {
                info::agents(&c, args.json).await
            })
            .await
        }
        Command::Mcp(mcp::McpArgs {
            command: mcp::McpCommand::Serve(args),
        }) => mcp_serve::run(socket.as_deref(), args.config.as_deref()).await,
        Command::Status(args) => {
            with_daemon(socket, args.config.clone(), |c| async move {
                info::status(&c, args.json).await
            })
            .await
        }
        Command::Mcp(mcp::McpArgs {
            command: mcp::McpCommand::List(args),
        }) => {
            with_daemon(socket, args.config.clone(), |c| async move {
                mcp::list(&c, args.json).await
            })
            .await
        }
    }
}

/// Finds the daemon, runs the command against it, and turns its failure
/// into a message and an exit status.
async fn with_daemon<F, Fut>(socket: Option<PathBuf>, config: Option<PathBuf>, command: F) -> i32
where
    F: FnOnce(Client) -> Fut,
    Fut: std::future::Future<Output = Result<i32, ClientError>>,
{
    let path = match endpoint::socket_path(socket.as_deref(), config.as_deref()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("agentd: {e}");
            return exit::USAGE;
        }
    };
    match command(Client::new(path)).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("agentd: {e}");
            e.exit_code()
        }
    }
}
