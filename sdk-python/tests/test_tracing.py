"""Traces: a handler call continues the caller's W3C trace context (`traceparent` in the gRPC
metadata) in its span; and end to end, the real controller (`bosun dev`, exporting over OTLP)
and this SDK's handler server (`python -m bosun`, exporting when the same variable is set) send
spans of one trace to an OTLP receiver in this test."""

from __future__ import annotations

import concurrent.futures
import os
import pathlib
import threading
import time

import grpc
import pytest
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import bosun
import bosun.testing
from bosun import _tracing
from bosun.v1 import handler_pb2 as pb
from sdk_support import request

ROOT = pathlib.Path(__file__).resolve().parents[2]
TRACE = "0af7651916cd43dd8448eb211c80319c"
PARENT = "b7ad6b7169203331"


@pytest.mark.parametrize("env, wanted", [
    ({}, False),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, True),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4317"}, True),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": " "}, False),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317", "OTEL_SDK_DISABLED": "TRUE"}, False),
])
def test_traces_are_wanted_when_an_endpoint_is_set(env, wanted):
    assert _tracing.wanted(env) is wanted
    if not wanted:
        assert _tracing.setup(env) is None


@pytest.fixture(scope="module")
def spans():
    """This process's spans, in memory (OpenTelemetry takes one provider per process)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return exporter


def test_a_call_continues_the_callers_trace(registry, serve, spans):
    @bosun.on.create("kopf.dev", "v1", "kopfexamples", registry=registry)
    def create_fn(**_):
        # A handler's own span nests under the call's.
        with trace.get_tracer("mine").start_as_current_span("my work"):
            return {"ok": True}

    spans.clear()
    answer = serve(registry).stub.Handle(request("create_fn"), metadata=[("traceparent", f"00-{TRACE}-{PARENT}-01")])
    assert answer.outcome == 0
    by_name = {s.name: s for s in spans.get_finished_spans()}
    call, mine = by_name["Handle create_fn"], by_name["my work"]
    assert format(call.context.trace_id, "032x") == TRACE
    assert format(call.parent.span_id, "016x") == PARENT and call.parent.is_remote
    assert call.attributes["handler"] == "create_fn"
    assert mine.parent.span_id == call.context.span_id and mine.context.trace_id == call.context.trace_id


def test_a_call_without_a_context_starts_a_trace_of_its_own(registry, serve, spans):
    @bosun.on.create("kopf.dev", "v1", "kopfexamples", registry=registry)
    def create_fn(**_):
        return None

    spans.clear()
    serve(registry).stub.Handle(request("create_fn"))
    (call,) = [s for s in spans.get_finished_spans() if s.name == "Handle create_fn"]
    assert call.parent is None


def test_a_daemon_runs_in_a_span_continuing_the_callers_trace(registry, serve, spans):
    @bosun.daemon("kopf.dev", "v1", "kopfexamples", registry=registry)
    async def watch_fn(**_):
        with trace.get_tracer("mine").start_as_current_span("my watch"):
            return None

    spans.clear()
    req = pb.DaemonRequest(handler_id="watch_fn", object=request("watch_fn").object, resource=request("watch_fn").resource)
    messages = list(serve(registry).stub.Daemon(req, metadata=[("traceparent", f"00-{TRACE}-{PARENT}-01")]))
    assert messages[-1].HasField("exit") and messages[-1].exit.outcome == pb.OUTCOME_SUCCESS
    by_name = {s.name: s for s in spans.get_finished_spans()}
    call, mine = by_name["Daemon watch_fn"], by_name["my watch"]
    assert format(call.context.trace_id, "032x") == TRACE
    assert format(call.parent.span_id, "016x") == PARENT and call.parent.is_remote
    assert mine.parent.span_id == call.context.span_id


class Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    """An OTLP receiver: (service, name, trace id, span id, parent id) of every span."""

    def __init__(self):
        self.spans = []
        self.lock = threading.Lock()

    def Export(self, request, context):
        with self.lock:
            for rs in request.resource_spans:
                service = next((a.value.string_value for a in rs.resource.attributes if a.key == "service.name"), "")
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        self.spans.append((service, s.name, s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex()))
        return trace_service_pb2.ExportTraceServiceResponse()


def test_one_trace_runs_from_the_controller_through_the_python_handler_server(tmp_path):
    receiver = Receiver()
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(receiver, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        env = dict(os.environ, OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}", OTEL_BSP_SCHEDULE_DELAY="100")
        args = ["dev", "--dir", str(tmp_path / ".bosun"), "--apply", str(ROOT / "examples/crd.yaml"),
                "--apply", str(ROOT / "examples/obj.yaml"), str(ROOT / "examples/python/01-minimal/example.py")]
        with bosun.testing.Runner(args, env=env, timeout=60) as runner:
            runner.wait_for("Handler 'welcome' succeeded.")
            deadline = time.monotonic() + 30
            while True:
                with receiver.lock:
                    got = list(receiver.spans)
                calls = [s for s in got if s[0] == "bosun" and s[1] == "handler welcome"]
                handled = [s for s in got if s[0] == "bosun-handlers" and s[1] == "Handle welcome"]
                linked = [(c, h) for c in calls for h in handled if h[2] == c[2] and h[4] == c[3]]
                # The cycle's span ends (and is exported) after its handler's: wait for it too.
                cycles = [s for s in got if linked and s[0] == "bosun" and s[3] == linked[0][0][4]]
                if linked and cycles:
                    break
                assert time.monotonic() < deadline, f"no span of the handler server under the controller's call in a cycle: {got}"
                time.sleep(0.1)
        assert cycles[0][1] == "create default/kopf-example-1", got
    finally:
        server.stop(None)
