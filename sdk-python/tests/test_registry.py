"""Kopf's decorator arguments → the contract's HandlerSpec (table tests)."""

from __future__ import annotations

import json

import pytest

import bosun
from bosun._registry import Selector, handler_spec
from bosun.v1 import handler_pb2 as pb


@pytest.mark.parametrize("args, kwargs, expected", [
    (("kopfexamples",), {}, Selector("", "", "kopfexamples")),
    (("kex",), {}, Selector("", "", "kex")),
    (("KopfExample",), {}, Selector("", "", "KopfExample")),
    (("kopfexamples.kopf.dev",), {}, Selector("", "", "kopfexamples.kopf.dev")),
    (("kopf.dev/v1/kopfexamples",), {}, Selector("", "", "kopf.dev/v1/kopfexamples")),
    (("kopf.dev", "v1", "kopfexamples"), {}, Selector("kopf.dev", "v1", "kopfexamples")),
    (("kopf.dev/v1", "kopfexamples"), {}, Selector("kopf.dev", "v1", "kopfexamples")),
    (("kopf.dev", "kopfexamples"), {}, Selector("kopf.dev", "", "kopfexamples")),
    (("v1", "pods"), {}, Selector("", "", "v1/pods")),
    ((), {"kind": "Pod"}, Selector("", "", "Pod")),
    ((), {"group": "kopf.dev", "plural": "kopfexamples"}, Selector("kopf.dev", "", "kopfexamples")),
])
def test_resources_are_named_as_in_kopf(args, kwargs, expected):
    assert Selector.of(args, **kwargs) == expected


@pytest.mark.parametrize("args, kwargs, error", [
    ((), {}, "which resource"),
    (("a", "b", "c", "d"), {}, "at most 3"),
    (("pods",), {"kind": "Pod"}, "either positionally"),
])
def test_bad_resources_are_rejected_at_registration(args, kwargs, error):
    with pytest.raises(TypeError, match=error):
        Selector.of(args, **kwargs)


def spec_of(decorator, fn=None):
    registry = bosun.Registry()

    def handler(**_):
        pass

    decorator(registry)(fn or handler)
    return handler_spec(pb, registry.handlers[0])


@pytest.mark.parametrize("decorator, check", [
    (lambda r: bosun.on.create("kex", registry=r),
     lambda s: (s.id, s.kind, s.resource.name) == ("handler", pb.HANDLER_KIND_CREATE, "kex")),
    (lambda r: bosun.on.create("kex", id="x", retries=3, backoff=1.5, timeout=10, errors=bosun.ErrorsMode.PERMANENT, registry=r),
     lambda s: (s.id, s.options.retries, s.options.backoff_seconds, s.options.timeout_seconds, s.options.errors)
     == ("x", 3, 1.5, 10.0, pb.ERRORS_MODE_PERMANENT)),
    (lambda r: bosun.on.create("kex", registry=r),
     lambda s: not s.options.HasField("retries") and not s.options.HasField("backoff_seconds")),
    (lambda r: bosun.on.delete("kex", optional=True, registry=r), lambda s: s.options.optional),
    (lambda r: bosun.on.resume("kex", deleted=True, registry=r), lambda s: s.options.deleted),
    (lambda r: bosun.on.field("kex", field="spec.field", registry=r),
     lambda s: (s.id, s.kind, s.field) == ("handler/spec.field", pb.HANDLER_KIND_FIELD, "spec.field")),
    (lambda r: bosun.on.update("kex", field="spec.field", old="a", new=bosun.PRESENT, registry=r),
     lambda s: s.id == "handler/spec.field" and s.field == "spec.field" and json.loads(s.filters.old.equals) == "a" and s.filters.new.present),
    (lambda r: bosun.on.create("kex", labels={"a": "b", "c": bosun.PRESENT, "d": bosun.ABSENT}, registry=r),
     lambda s: json.loads(s.filters.labels["a"].equals) == "b" and s.filters.labels["c"].present and s.filters.labels["d"].absent and not s.filters.has_when),
    (lambda r: bosun.on.create("kex", annotations={"a": lambda value, **_: True}, registry=r),
     lambda s: "a" not in s.filters.annotations and s.filters.has_when),
    (lambda r: bosun.on.create("kex", when=lambda **_: True, registry=r), lambda s: s.filters.has_when),
    (lambda r: bosun.on.create("kex", field="spec.field", value="value", registry=r),
     lambda s: s.filters.field == "spec.field" and json.loads(s.filters.value.equals) == "value"),
    (lambda r: bosun.on.create("kex", field="spec.field", registry=r),
     lambda s: s.filters.field == "spec.field" and s.filters.value.present),
    (lambda r: bosun.timer("kex", interval=5, idle=2, initial_delay=1, sharp=True, registry=r),
     lambda s: (s.kind, s.timer.interval_seconds, s.timer.idle_seconds, s.timer.initial_delay_seconds, s.timer.sharp)
     == (pb.HANDLER_KIND_TIMER, 5.0, 2.0, 1.0, True)),
    (lambda r: bosun.daemon("kex", initial_delay=1, cancellation_timeout=3, backoff=2, registry=r),
     lambda s: (s.kind, s.daemon.initial_delay_seconds, s.daemon.cancellation_timeout_seconds, s.daemon.backoff_seconds)
     == (pb.HANDLER_KIND_DAEMON, 1.0, 3.0, 2.0)),
    (lambda r: bosun.on.startup(registry=r), lambda s: s.kind == pb.HANDLER_KIND_STARTUP and not s.HasField("resource")),
    (lambda r: bosun.on.probe(id="p", registry=r), lambda s: (s.kind, s.id) == (pb.HANDLER_KIND_PROBE, "p")),
    (lambda r: bosun.on.validate("kex", operation="CREATE", ignore_failures=True, registry=r),
     lambda s: list(s.admission.operations) == ["CREATE"] and not s.admission.fail_closed),
    (lambda r: bosun.on.event("kex", registry=r), lambda s: s.kind == pb.HANDLER_KIND_EVENT),
])
def test_decorators_become_handler_specs(decorator, check):
    spec = spec_of(decorator)
    assert check(spec), spec


def test_two_handlers_with_one_id_are_rejected():
    registry = bosun.Registry()

    def fn(**_):
        pass

    bosun.on.create("kex", registry=registry)(fn)
    with pytest.raises(ValueError, match="registered already"):
        bosun.on.update("kex", registry=registry)(fn)


def test_a_timer_needs_an_interval():
    with pytest.raises(TypeError, match="interval"):
        bosun.timer("kex")
