//! The trace context of calls to handler servers: W3C `traceparent` (and `tracestate`) in the
//! gRPC metadata, from the span the call is made in, so that the handler server (any language)
//! continues the controller's trace. The spans themselves are `tracing` spans (a cycle, each
//! handler call, each write); the `bosun` binary exports them over OTLP when asked
//! (`OTEL_EXPORTER_OTLP_ENDPOINT`). Without an exporter nothing is sent and nothing recorded.

use opentelemetry::propagation::{Injector, TextMapPropagator};
use opentelemetry::trace::{TraceContextExt, TraceId};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tonic::metadata::{MetadataKey, MetadataMap, MetadataValue};
use tracing_opentelemetry::OpenTelemetrySpanExt;

struct Metadata<'a>(&'a mut MetadataMap);

impl Injector for Metadata<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(key), Ok(value)) = (MetadataKey::from_bytes(key.as_bytes()), MetadataValue::try_from(value)) {
            self.0.insert(key, value);
        }
    }
}

/// Puts the current span's trace context into `metadata` (nothing when it has none).
pub fn inject(metadata: &mut MetadataMap) {
    let cx = tracing::Span::current().context();
    TraceContextPropagator::new().inject_context(&cx, &mut Metadata(metadata));
}

/// The current span's `traceparent` (empty when it has none), for a call on a stream.
pub fn traceparent() -> String {
    let mut metadata = MetadataMap::new();
    inject(&mut metadata);
    metadata.get("traceparent").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string()
}

/// Records the span's trace id in its `trace_id` field (for log lines), when it has one.
pub fn record_trace_id(span: &tracing::Span) {
    let id = span.context().span().span_context().trace_id();
    if id != TraceId::INVALID {
        span.record("trace_id", tracing::field::display(id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceState};

    #[test]
    fn a_context_travels_as_traceparent_and_none_travels_as_nothing() {
        let sampled = SpanContext::new(
            TraceId::from_hex("0af7651916cd43dd8448eb211c80319c").unwrap(),
            SpanId::from_hex("b7ad6b7169203331").unwrap(),
            TraceFlags::SAMPLED,
            true,
            TraceState::default(),
        );
        let cases = [
            (
                opentelemetry::Context::new().with_remote_span_context(sampled),
                Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
            ),
            (opentelemetry::Context::new(), None),
        ];
        for (cx, want) in cases {
            let mut metadata = MetadataMap::new();
            TraceContextPropagator::new().inject_context(&cx, &mut Metadata(&mut metadata));
            assert_eq!(metadata.get("traceparent").and_then(|v| v.to_str().ok()), want);
        }
    }
}
