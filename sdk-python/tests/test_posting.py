"""Events posted from handlers, as Kopf posts them: their types and reasons, and what
`settings.posting.enabled` and `settings.posting.level` let through."""

import logging

import pytest

import bosun
from bosun import _context, _settings
from bosun.v1 import handler_pb2 as pb

from sdk_support import request

BODY = {"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "kex1", "namespace": "ns", "uid": "u1"}}
OTHER = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "uid": "u2"}}


@pytest.fixture
def settings():
    fresh = bosun.OperatorSettings()
    previous = _settings.replace(fresh)
    yield fresh
    _settings.replace(previous)


def posted(post):
    events = []
    with _context.calling(BODY, lambda what, item: events.append(item) if what == "event" else None):
        post()
    return [(e["type"], e["reason"]) for e in events]


INFO = lambda: bosun.info(BODY, reason="R", message="m")  # noqa: E731
WARN = lambda: bosun.warn(BODY, reason="R", message="m")  # noqa: E731
ERROR = lambda: bosun.exception(BODY, reason="R", message="m", exc=ValueError("x"))  # noqa: E731
EVENT = lambda: bosun.event(BODY, type="Custom", reason="R", message="m")  # noqa: E731


@pytest.mark.parametrize("enabled, level, post, expected", [
    (True, logging.INFO, INFO, [("Normal", "R")]),
    (True, logging.INFO, WARN, [("Warning", "R")]),
    (True, logging.INFO, ERROR, [("Error", "R")]),
    (True, logging.INFO, EVENT, [("Custom", "R")]),
    (True, logging.DEBUG, INFO, [("Normal", "R")]),
    (True, logging.WARNING, INFO, []),
    (True, logging.WARNING, WARN, [("Warning", "R")]),
    (True, logging.ERROR, WARN, []),
    (True, logging.ERROR, ERROR, [("Error", "R")]),
    (True, logging.CRITICAL, ERROR, []),
    (True, logging.CRITICAL, EVENT, [("Custom", "R")]),  # Kopf checks no level in event()
    (False, logging.INFO, INFO, []),
    (False, logging.INFO, WARN, []),
    (False, logging.INFO, ERROR, []),
    (False, logging.INFO, EVENT, []),
])
def test_posting_follows_the_settings(settings, enabled, level, post, expected):
    settings.posting.enabled = enabled
    settings.posting.level = level
    assert posted(post) == expected


@pytest.mark.parametrize("call, expected", [
    (lambda: bosun.exception(BODY, exc=ValueError("boom")), ("ValueError", "boom")),
    (lambda: bosun.exception(BODY, message="Failed:", exc=ValueError("boom")), ("ValueError", "Failed: boom")),
    (lambda: bosun.exception(BODY, reason="Mine", message="Only"), ("Mine", "Only")),
])
def test_exception_events_are_kopfs(settings, call, expected):
    events = []
    with _context.calling(BODY, lambda what, item: events.append(item)):
        call()
    assert (events[0]["type"], events[0]["reason"], events[0]["message"]) == ("Error", *expected)


def test_the_exception_being_handled_is_the_default(settings):
    events = []
    with _context.calling(BODY, lambda what, item: events.append(item)):
        try:
            raise RuntimeError("Exception text.")
        except RuntimeError:
            bosun.exception(BODY, reason="SomeReason", message="Some exception:")
    assert events[0]["message"] == "Some exception: Exception text."


def test_events_about_other_objects_carry_their_reference(settings):
    events = []
    with _context.calling(BODY, lambda what, item: events.append(item)):
        bosun.info([BODY, OTHER, bosun.Body(OTHER)], reason="R", backoffs=[1, 2])
    assert [e["regarding"] for e in events] == [None] + [
        {"api_version": "v1", "kind": "Pod", "namespace": "ns", "name": "p", "uid": "u2"}] * 2


def test_events_about_kubernetes_models_carry_their_reference(settings):
    kubernetes = pytest.importorskip("kubernetes")
    pod = kubernetes.client.V1Pod(api_version="v1", kind="Pod", metadata=kubernetes.client.V1ObjectMeta(
        name="p", namespace="ns", uid="u2"))
    events = []
    with _context.calling(BODY, lambda what, item: events.append(item)):
        bosun.warn(pod, reason="R")
    assert events[0]["regarding"]["uid"] == "u2"


def test_a_startup_handler_changing_posting_changes_what_handlers_post(registry, serve, settings):
    @bosun.on.create("kopfexamples", registry=registry)
    def create_fn(body, **_):
        bosun.info(body, reason="Hello")
        bosun.warn(body, reason="Careful")

    settings.posting.level = logging.WARNING  # as a startup handler would set it
    answer = serve(registry).stub.Handle(request("create_fn"))
    assert [(e.type, e.reason) for e in answer.events] == [("Warning", "Careful")]
    assert answer.outcome == pb.OUTCOME_SUCCESS
