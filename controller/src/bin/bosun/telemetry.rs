//! Traces over OTLP, as OpenTelemetry's standard variables say: with
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) set, the controller's
//! spans (each cycle with its object and cause, each handler call, each write) go to that
//! collector over gRPC, named `bosun` unless `OTEL_SERVICE_NAME` says otherwise; the handler
//! calls carry the trace context to the handler server (`bosun_controller::handlers::trace_context`).

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::registry::LookupSpan;

/// Flushes the spans not yet exported when dropped.
pub struct Telemetry {
    provider: SdkTracerProvider,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        // Bounded: an unreachable collector must not hold up the exit.
        if let Err(e) = self.provider.shutdown_with_timeout(std::time::Duration::from_secs(5)) {
            eprintln!("bosun: the last spans could not be exported: {e}");
        }
    }
}

/// Whether the environment asks for traces.
pub fn wanted(var: impl Fn(&str) -> Option<String>) -> bool {
    let set = |name: &str| var(name).is_some_and(|v| !v.trim().is_empty());
    let disabled = var("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    !disabled && (set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
}

/// The OpenTelemetry layer and its guard, when the environment asks for traces.
pub fn layer<S>() -> anyhow::Result<Option<(tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry_sdk::trace::SdkTracer>, Telemetry)>>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    if !wanted(|name| std::env::var(name).ok()) {
        return Ok(None);
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder().with_tonic().build()?;
    let mut resource = opentelemetry_sdk::Resource::builder();
    if std::env::var("OTEL_SERVICE_NAME").is_err() {
        resource = resource.with_service_name("bosun");
    }
    let provider = SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource.build()).build();
    let tracer = provider.tracer("bosun");
    Ok(Some((tracing_opentelemetry::layer().with_tracer(tracer), Telemetry { provider })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traces_are_wanted_when_an_endpoint_is_set_and_the_sdk_not_disabled() {
        let cases: [(&[(&str, &str)], bool); 5] = [
            (&[], false),
            (&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317")], true),
            (&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://collector:4317")], true),
            (&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")], false),
            (&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317"), ("OTEL_SDK_DISABLED", "TRUE")], false),
        ];
        for (env, want) in cases {
            let var = |name: &str| env.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string());
            assert_eq!(wanted(var), want, "{env:?}");
        }
    }
}
