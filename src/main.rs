use clap::Parser;
use tracing_subscriber::EnvFilter;

fn main() {
    let cli = agentd::cli::Cli::parse();
    let filter = EnvFilter::try_from_env("AGENTD_LOG")
        .unwrap_or_else(|_| EnvFilter::new("warn,agentd::guest=info,agentd::guest_output=info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false);
    // The journal stamps every line itself; a second timestamp is noise.
    if stderr_is_journal() {
        builder.without_time().init();
    } else {
        builder.init();
    }
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

/// systemd sets `JOURNAL_STREAM=dev:inode` for a service whose stderr goes
/// to the journal; it only counts if stderr is still that very stream.
fn stderr_is_journal() -> bool {
    use std::os::unix::fs::MetadataExt;
    let Some(value) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let value = value.to_string_lossy();
    let Some((dev, ino)) = value.split_once(':') else {
        return false;
    };
    let (Ok(dev), Ok(ino)) = (dev.parse::<u64>(), ino.parse::<u64>()) else {
        return false;
    };
    std::fs::metadata("/proc/self/fd/2")
        .or_else(|_| std::fs::metadata("/dev/stderr"))
        .is_ok_and(|m| m.dev() == dev && m.ino() == ino)
}
