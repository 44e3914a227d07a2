use clap::Parser;
use tracing_subscriber::EnvFilter;

fn main() {
    let cli = agentd::cli::Cli::parse();
    let filter = EnvFilter::try_from_env("AGENTD_LOG")
        .unwrap_or_else(|_| EnvFilter::new("warn,agentd::guest=info,agentd::guest_output=info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("agentd: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    let code = runtime.block_on(agentd::cli::main(cli));
    // Dropping the runtime could wait on blocking tasks (a stuck compile);
    // the run is over, so leave promptly.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    std::process::exit(code);
}
