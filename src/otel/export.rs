//! The OTLP pipeline: on when `OTEL_EXPORTER_OTLP_ENDPOINT` or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set, off (no layer at all)
//! otherwise. The other standard variables are read by the SDK and the
//! exporter themselves: `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`,
//! `OTEL_EXPORTER_OTLP_HEADERS` (and `_TRACES_HEADERS`),
//! `OTEL_EXPORTER_OTLP_TIMEOUT`, `OTEL_TRACES_SAMPLER` (and `_ARG`),
//! `OTEL_BSP_*`. `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`
//! turn it off as the specification says.
//!
//! Spans leave through the SDK's batch span processor: a thread of its own
//! with a bounded queue (`OTEL_BSP_MAX_QUEUE_SIZE`, 2048) that drops spans
//! when full, so a collector that is down or slow costs a run nothing but
//! the lost spans; each export is bounded by the exporter's timeout.

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::trace::{BatchSpanProcessor, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use tracing::Subscriber;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::layer::{Filter, Layer};
use tracing_subscriber::registry::LookupSpan;

/// How long shutdown waits for the last spans to leave: a collector that is
/// down must not hold the daemon's exit.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(2);

/// Why the pipeline could not be built (the daemon then runs without it).
#[derive(Debug, thiserror::Error)]
#[error("OpenTelemetry traces are off: {0}")]
pub struct ExportError(String);

/// The running pipeline; [`Exporting::shutdown`] flushes it.
pub struct Exporting {
    provider: SdkTracerProvider,
}

impl Exporting {
    /// Sends what is queued and stops the processor, waiting at most
    /// [`SHUTDOWN_TIMEOUT`]. Call it outside the async runtime (the exporter's
    /// blocking client must not be dropped on one of its threads).
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT) {
            tracing::warn!(error = %e, "OpenTelemetry: the last spans were not all sent");
        }
    }
}

/// The OpenTelemetry layer, filtered to [`super::TARGET`]'s spans.
pub type BoxedLayer<S> = Box<dyn Layer<S> + Send + Sync>;

/// Whether the environment asks for traces.
pub fn wanted() -> bool {
    let set = |name: &str| std::env::var(name).is_ok_and(|v| !v.trim().is_empty());
    let is = |name: &str, value: &str| {
        std::env::var(name).is_ok_and(|v| v.trim().eq_ignore_ascii_case(value))
    };
    (set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
        && !is("OTEL_SDK_DISABLED", "true")
        && !is("OTEL_TRACES_EXPORTER", "none")
}

/// The filter of the OpenTelemetry layer: the spans of [`super::TARGET`]
/// only, never log events (they stay in the log).
pub fn only_otel_spans<S>() -> impl Filter<S> {
    filter_fn(|meta| meta.is_span() && meta.target() == super::TARGET)
}

/// The layer to add to the subscriber, and the handle that flushes it, or
/// `None` when the environment does not ask for traces.
pub fn layer<S>() -> Result<Option<(BoxedLayer<S>, Exporting)>, ExportError>
where
    S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    if !wanted() {
        return Ok(None);
    }
    if let Ok(p) = std::env::var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|_| std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL"))
    {
        if p.trim() != "http/protobuf" {
            // Reported once the log is up (this runs before it is).
            eprintln!("agentd: OTEL_EXPORTER_OTLP_PROTOCOL={p} is not supported; exporting over http/protobuf");
        }
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .build()
        .map_err(|e| ExportError(e.to_string()))?;
    let mut resource = Resource::builder();
    // The SDK reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; without
    // either, the service is agentd rather than `unknown_service`.
    let named = std::env::var_os("OTEL_SERVICE_NAME").is_some()
        || std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|a| a.contains("service.name="));
    if !named {
        resource = resource.with_service_name("agentd");
    }
    let resource = resource
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(BatchSpanProcessor::builder(exporter).build())
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("agentd");
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_tracked_inactivity(false)
        .with_level(false)
        .with_target(false)
        .with_filter(only_otel_spans());
    Ok(Some((Box::new(layer), Exporting { provider })))
}
