use clap::Parser;
use tracing::subscriber::Interest;
use tracing::Metadata;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::{Context, Filter, Layer as _, SubscriberExt as _};
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::EnvFilter;

fn main() {
    let cli = agentd::cli::Cli::parse();
    let env = EnvFilter::try_from_env("AGENTD_LOG")
        .unwrap_or_else(|_| EnvFilter::new("warn,agentd::guest=info,agentd::guest_output=info"));
    // The log shows what AGENTD_LOG selects, never the spans meant for
    // OpenTelemetry only.
    let filter = LogFilter(env);
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false);
    // The journal stamps every line itself; a second timestamp is noise.
    let fmt = if stderr_is_journal() {
        fmt.without_time().with_filter(filter).boxed()
    } else {
        fmt.with_filter(filter).boxed()
    };
    // Traces only from the daemon, and only when OTEL_* asks (no layer otherwise).
    let (otel, exporting, otel_error) = match &cli.command {
        agentd::cli::Command::Serve(_) => match agentd::otel::export::layer() {
            Ok(Some((layer, exporting))) => (Some(layer), Some(exporting), None),
            Ok(None) => (None, None, None),
            Err(e) => (None, None, Some(e)),
        },
        _ => (None, None, None),
    };
    // Not `.with(otel)` of an `Option`: a `None` layer enables every
    // callsite, so the spans meant for OpenTelemetry only would be made,
    // formatted and entered on every step with nobody to export them, and,
    // entered, they would hide the run's span from the log's context.
    let logs = tracing_subscriber::registry().with(fmt);
    match otel {
        Some(otel) => logs.with(otel).init(),
        None => logs.init(),
    }
    if let Some(e) = otel_error {
        tracing::warn!("{e}");
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
    if let Some(exporting) = exporting {
        exporting.shutdown();
    }
    // Dropping the runtime could wait on blocking tasks (a stuck compile);
    // the run is over, so leave promptly.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    std::process::exit(code);
}

/// The log's filter: `AGENTD_LOG`'s, less the spans meant for OpenTelemetry
/// only (a per-layer filter, so the OpenTelemetry layer sees them).
struct LogFilter(EnvFilter);

/// The spans of `agentd::otel`, which only the OpenTelemetry layer shows.
fn is_otel(meta: &Metadata<'_>) -> bool {
    meta.target() == agentd::otel::TARGET
}

impl<S> Filter<S> for LogFilter
where
    EnvFilter: Filter<S>,
{
    fn enabled(&self, meta: &Metadata<'_>, cx: &Context<'_, S>) -> bool {
        !is_otel(meta) && Filter::enabled(&self.0, meta, cx)
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        if is_otel(meta) {
            return Interest::never();
        }
        Filter::<S>::callsite_enabled(&self.0, meta)
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Filter::<S>::max_level_hint(&self.0)
    }

    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        cx: Context<'_, S>,
    ) {
        Filter::on_new_span(&self.0, attrs, id, cx)
    }

    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        cx: Context<'_, S>,
    ) {
        Filter::on_record(&self.0, id, values, cx)
    }

    fn on_enter(&self, id: &tracing::span::Id, cx: Context<'_, S>) {
        Filter::on_enter(&self.0, id, cx)
    }

    fn on_exit(&self, id: &tracing::span::Id, cx: Context<'_, S>) {
        Filter::on_exit(&self.0, id, cx)
    }

    fn on_close(&self, id: tracing::span::Id, cx: Context<'_, S>) {
        Filter::on_close(&self.0, id, cx)
    }
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
