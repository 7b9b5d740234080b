"""Traces: each call from the controller carries the W3C trace context of the controller's span
(`traceparent` in the gRPC metadata). With OpenTelemetry installed (`pip install
'bosun-operator[otel]'`), each handler call runs in a span that continues it (`Handle create_fn`),
so one trace shows the controller's cycle, this handler and the controller's write; handlers'
own spans nest under it. With `OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`) set,
`serve` exports the spans over OTLP/gRPC, named by `OTEL_SERVICE_NAME`, else `bosun-handlers`.
Without OpenTelemetry, or without the variable, nothing is exported and nothing is recorded."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import Any, Iterator, Mapping, Optional

log = logging.getLogger("bosun")

# OpenTelemetry is optional, and imported only when traces are asked for (a call that carries a
# context, an exporter set up, or a program that uses OpenTelemetry itself): it pulls in
# importlib.metadata and more, which a handler server without traces should not carry.
_otel: Optional[Any] = None


def _opentelemetry(needed: bool) -> Optional[Any]:
    """OpenTelemetry's `trace` module and the W3C propagator: imported when `needed` or when
    OpenTelemetry is imported already; else None."""
    global _otel
    if _otel is None and (needed or "opentelemetry.trace" in sys.modules):
        try:
            from opentelemetry import trace
            from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
        except ImportError:
            return None
        _otel = (trace, TraceContextTextMapPropagator())
    return _otel


def wanted(env: Mapping[str, str]) -> bool:
    """Whether the environment asks for traces (OpenTelemetry's standard variables)."""
    def given(name: str) -> bool:
        return bool((env.get(name) or "").strip())
    disabled = (env.get("OTEL_SDK_DISABLED") or "").strip().lower() == "true"
    return not disabled and (given("OTEL_EXPORTER_OTLP_ENDPOINT") or given("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def setup(env: Mapping[str, str] = os.environ) -> Optional[Any]:
    """Installs a tracer provider that exports over OTLP when the environment asks for traces;
    returns it (to be shut down at the end), or None."""
    if not wanted(env):
        return None
    try:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        log.warning("OTEL_EXPORTER_OTLP_ENDPOINT is set, but OpenTelemetry is not installed: "
                    "pip install 'bosun-operator[otel]' to export traces.")
        return None
    resource = Resource.create({} if (env.get("OTEL_SERVICE_NAME") or "").strip() else {"service.name": "bosun-handlers"})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace, _ = _opentelemetry(True)
    trace.set_tracer_provider(provider)
    return provider


@contextlib.contextmanager
def call_span(rpc: str, handler_id: str, context: Any) -> Iterator[None]:
    """Runs the body in the span of one call (`Handle create_fn`), a child of the controller's
    span when the call carries its context."""
    carrier = {}
    try:
        for key, value in context.invocation_metadata() or ():
            carrier[key] = value
    except Exception:  # a context without metadata (tests call the servicer directly)
        pass
    otel = _opentelemetry("traceparent" in carrier)
    if otel is None:
        yield
        return
    trace, propagator = otel
    parent = propagator.extract(carrier)
    with trace.get_tracer("bosun").start_as_current_span(f"{rpc} {handler_id}", context=parent, kind=trace.SpanKind.SERVER,
                                                          attributes={"handler": handler_id}):
        yield
