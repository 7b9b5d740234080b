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
    ((bosun.EVERYTHING,), {}, "not supported yet"),
    ((lambda resource: resource.group == "apps",), {}, "not supported yet"),
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


def _first(**_):
    return "first"


def _second(**_):
    return "second"


def _stacked(registry):  # Kopf's commonest idiom: one function for several causes
    return bosun.on.resume("kex", registry=registry)(bosun.on.update("kex", registry=registry)(
        bosun.on.create("kex", registry=registry)(_first)))


@pytest.mark.parametrize("register, expected", [
    # (kind, resource, id, function) of what is registered, in order
    (_stacked, [("create", "kex", "_first", _first), ("update", "kex", "_first", _first), ("resume", "kex", "_first", _first)]),
    (lambda r: bosun.timer("kex", interval=1, registry=r)(bosun.on.create("kex", registry=r)(_first)),
     [("create", "kex", "_first", _first), ("timer", "kex", "_first", _first)]),
    # The same id for one kind of two resources (docs snippets name every example `create_fn`).
    (lambda r: (bosun.on.create("kex", id="fn", registry=r)(_first), bosun.on.create("pods", id="fn", registry=r)(_second)),
     [("create", "kex", "fn", _first), ("create", "pods", "fn", _second)]),
    # A function defined again under the same name and decorators: Kopf runs the first only.
    (lambda r: (bosun.on.create("kex", id="fn", registry=r)(_first), bosun.on.create("kex", id="fn", registry=r)(_second)),
     [("create", "kex", "fn", _first)]),
    # Field handlers of one function for two fields are two ids.
    (lambda r: bosun.on.field("kex", field="spec.b", registry=r)(bosun.on.field("kex", field="spec.a", registry=r)(_first)),
     [("field", "kex", "_first/spec.a", _first), ("field", "kex", "_first/spec.b", _first)]),
])
def test_ids_are_keyed_as_kopf_keys_them(register, expected):
    registry = bosun.Registry()
    register(registry)
    assert [(h.kind, h.selector.name, h.id, h.fn) for h in registry.handlers] == expected
    keys = [h.key for h in registry.handlers]
    assert len(set(keys)) == len(keys) and all(keys)
    described = [handler_spec(pb, h) for h in registry.handlers]
    assert [(s.id, s.key) for s in described] == [(h.id, h.key) for h in registry.handlers]


@pytest.mark.parametrize("key, handler_id, kinds, expected", [
    ("0", "_first", (), "create"),
    ("1", "_first", (), "update"),
    ("2", "_first", (), "resume"),
    ("1", "other", (), None),  # a key names one registration: its id must agree
    ("9", "_first", (), None),
    ("", "_first", ("update", "field"), "update"),  # a controller that sends no key: by the reason's kinds
    ("", "_first", ("delete", "resume"), "resume"),
    ("", "_first", (), "create"),
])
def test_calls_find_their_registration_by_key_else_by_id_and_kind(key, handler_id, kinds, expected):
    registry = bosun.Registry()
    _stacked(registry)
    found = registry.find(key, handler_id, kinds)
    assert (found.kind if found else None) == expected


def test_a_timer_needs_an_interval():
    with pytest.raises(TypeError, match="interval"):
        bosun.timer("kex")
