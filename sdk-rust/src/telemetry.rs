//! Traces: each call from the controller carries the W3C trace context of the controller's
//! span (`traceparent` in the gRPC metadata); the handler runs in a span that continues it, so
//! one trace shows the controller's cycle, this handler and the controller's write. The spans
//! are `tracing` spans: exported over OTLP when `OTEL_EXPORTER_OTLP_ENDPOINT` is set and the
//! logging is the SDK's ([`init_logging`](crate::init_logging), `serve`, `serve_default`;
//! feature `otlp`), or through whatever OpenTelemetry layer the program installs itself.

use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tonic::metadata::{KeyRef, MetadataMap};
use tracing_opentelemetry::OpenTelemetrySpanExt;

struct Metadata<'a>(&'a MetadataMap);

impl Extractor for Metadata<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0
            .keys()
            .filter_map(|k| match k {
                KeyRef::Ascii(k) => Some(k.as_str()),
                KeyRef::Binary(_) => None,
            })
            .collect()
    }
}

/// The span a call runs in: `rpc` (`Handle`, `Daemon`, `Activity`) of `handler`, a child of
/// the controller's span when the call carries its context.
pub(crate) fn call_span(rpc: &str, handler: &str, metadata: &MetadataMap) -> tracing::Span {
    let span = tracing::info_span!("handler", otel.name = %format_args!("{rpc} {handler}"), otel.kind = "server", handler = %handler);
    // A call without a context (or no OpenTelemetry layer at all) leaves the span a root.
    if metadata.contains_key("traceparent") {
        let parent = TraceContextPropagator::new().extract(&Metadata(metadata));
        let _ = span.set_parent(parent);
    }
    span
}

/// The OTLP exporter behind the SDK's logging, once set up.
#[cfg(feature = "otlp")]
static PROVIDER: std::sync::OnceLock<opentelemetry_sdk::trace::SdkTracerProvider> = std::sync::OnceLock::new();

/// The OpenTelemetry layer when `OTEL_EXPORTER_OTLP_ENDPOINT` (or `…_TRACES_ENDPOINT`) is set
/// (and `OTEL_SDK_DISABLED` is not `true`); named by `OTEL_SERVICE_NAME`, else `bosun-handlers`.
#[cfg(feature = "otlp")]
pub(crate) fn otlp_layer<S>() -> Option<tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry_sdk::trace::SdkTracer>>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    use opentelemetry::trace::TracerProvider as _;
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let disabled = var("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    if disabled || (var("OTEL_EXPORTER_OTLP_ENDPOINT").is_none() && var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_none()) {
        return None;
    }
    let exporter = match opentelemetry_otlp::SpanExporter::builder().with_tonic().build() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("bosun-sdk: no traces: the OTLP exporter cannot be built: {e}");
            return None;
        }
    };
    let mut resource = opentelemetry_sdk::Resource::builder();
    if var("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("bosun-handlers");
    }
    let provider =
        opentelemetry_sdk::trace::SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource.build()).build();
    let tracer = provider.tracer("bosun-sdk");
    let _ = PROVIDER.set(provider);
    Some(tracing_opentelemetry::layer().with_tracer(tracer))
}

/// Exports the spans not yet exported (at the end of `serve`, `serve_default`).
pub fn flush_traces() {
    #[cfg(feature = "otlp")]
    if let Some(provider) = PROVIDER.get() {
        let _ = provider.force_flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::TraceContextExt as _;

    #[test]
    fn the_controllers_traceparent_is_read_back() {
        let cases =
            [("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", Some("0af7651916cd43dd8448eb211c80319c")), ("garbage", None)];
        for (traceparent, want) in cases {
            let mut metadata = MetadataMap::new();
            metadata.insert("traceparent", traceparent.parse().unwrap());
            let cx = TraceContextPropagator::new().extract(&Metadata(&metadata));
            let sc = cx.span().span_context().clone();
            assert_eq!(sc.is_valid().then(|| sc.trace_id().to_string()).as_deref(), want, "{traceparent}");
        }
    }
}
