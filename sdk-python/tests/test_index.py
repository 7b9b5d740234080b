"""Indices (Kopf's `@kopf.index`): the Index itself by table, and through the real server:
what the controller's INDEX calls do to it and how every kind of handler sees it."""

from __future__ import annotations

import json

import pytest

import bosun
from bosun import _index
from bosun.v1 import handler_pb2 as pb

from sdk_support import request


def test_results_are_merged_per_key_and_replaced_per_object():
    index = _index.Index()
    index.replace("a", {"key1": "valueA"})
    index.replace("b", {"key1": "valueB"})
    index.replace("c", {"key2": {"key3": "valueC"}})
    index.replace("d", ("ns", "name"))
    assert {k: list(v) for k, v in index.items()} == {
        "key1": ["valueA", "valueB"], "key2": [{"key3": "valueC"}], None: [("ns", "name")]}
    index.replace("a", None)
    assert list(index["key1"]) == ["valueA", "valueB"], "None keeps what the object had"
    index.replace("a", bosun.Memo(x=1))
    assert list(index[None]) == [("ns", "name"), bosun.Memo(x=1)], "only a dict is keyed, not a dict's subclass"
    index.forget("b")
    index.forget("d")
    assert "key1" not in index and len(index[None]) == 1, "empty keys go"
    index.replace("e", {(1, 2): None})
    assert list(index[(1, 2)]) == [None], "None values are kept; any hashable key works"


PERM, TEMP, IGN = bosun.ErrorsMode.PERMANENT, bosun.ErrorsMode.TEMPORARY, bosun.ErrorsMode.IGNORED


@pytest.mark.parametrize("exc, errors, retries, kept, at5, at100", [
    (ValueError("x"), None, None, True, False, False),  # ignored by default: stale values stay
    (ValueError("x"), IGN, None, True, False, False),
    (ValueError("x"), PERM, None, False, True, True),
    (ValueError("x"), TEMP, None, False, True, False),  # the backoff (10 s here)
    (bosun.PermanentError("x"), IGN, None, False, True, True),
    (bosun.TemporaryError("x", delay=30), IGN, None, False, True, False),
    (bosun.TemporaryError("x", delay=0), IGN, None, False, False, False),
    (bosun.TemporaryError("x", delay=30), IGN, 1, False, True, True),  # out of retries: for good
])
def test_failures_follow_kopf(exc, errors, retries, kept, at5, at100):
    index = _index.Index()
    index.replace("a", {"k": "v"})
    index.failed("a", exc, errors=errors, backoff=10, retries=retries, timeout=None, now=0)
    assert ("k" in index) == kept
    assert (index.excluded("a", now=5), index.excluded("a", now=100)) == (at5, at100)
    index.forget("a")
    assert not index.excluded("a", now=5), "a deletion forgets the failures"


def pod(name, phase="Pending", uid=None, labels=None):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": uid or f"uid-{name}", "labels": labels or {}},
            "status": {"phase": phase}}


def index_call(handler_id, body, event_type=""):
    return request(handler_id, body, reason=pb.REASON_INDEX, event_type=event_type)


def test_the_server_keeps_indices_that_every_handler_gets_by_name(registry, serve):
    @bosun.index("pods", registry=registry)
    def is_running(namespace, name, status, **_):
        return {(namespace, name): status.get("phase") == "Running"}

    @bosun.index("pods", registry=registry, labels={"app": bosun.PRESENT})
    async def by_app(labels, name, **_):
        return {labels["app"]: name}

    seen = {}

    @bosun.on.create("kex", registry=registry)
    def create_fn(is_running: bosun.Index, by_app: bosun.Index, **_):
        seen["create"] = (dict((k, list(v)) for k, v in is_running.items()), {k: list(v) for k, v in by_app.items()})

    @bosun.on.probe(registry=registry)
    def pod_count(is_running, **_):
        return len(is_running)

    server = serve(registry)
    described = {h.id: h for h in server.stub.Describe(pb.DescribeRequest()).handlers}
    assert described["is_running"].kind == pb.HANDLER_KIND_INDEX
    assert described["is_running"].options.errors == pb.ERRORS_MODE_IGNORED, "Kopf's default for indices"
    for call in [index_call("is_running", pod("a")), index_call("is_running", pod("b", "Running")),
                 index_call("by_app", pod("b", "Running", labels={"app": "web"})),
                 index_call("is_running", pod("a", "Running"), "MODIFIED")]:
        answer = server.stub.Handle(call)
        assert (answer.outcome, answer.result) == (pb.OUTCOME_SUCCESS, b""), answer.message
    assert server.stub.Handle(request("create_fn")).outcome == pb.OUTCOME_SUCCESS
    assert seen["create"] == ({("default", "a"): [True], ("default", "b"): [True]}, {"web": ["b"]})
    probe = server.stub.Activity(pb.ActivityRequest(handler_id="pod_count", kind=pb.HANDLER_KIND_PROBE))
    assert json.loads(probe.result) == 2
    # A deletion (or an object that stops matching) drops the object without calling the handler.
    assert server.stub.Handle(index_call("is_running", pod("a"), "DELETED")).outcome == pb.OUTCOME_SUCCESS
    assert server.stub.Handle(index_call("by_app", pod("b"), "DELETED")).outcome == pb.OUTCOME_SUCCESS
    server.stub.Handle(request("create_fn"))
    assert seen["create"] == ({("default", "b"): [True]}, {})


def test_a_failing_index_handler_reports_its_outcome_and_is_skipped_while_excluded(registry, serve):
    calls = []

    @bosun.index("pods", registry=registry, errors=bosun.ErrorsMode.PERMANENT)
    def broken(name, **_):
        calls.append(name)
        raise ValueError("cannot index")

    server = serve(registry)
    first = server.stub.Handle(index_call("broken", pod("a")))
    assert first.outcome == pb.OUTCOME_UNEXPECTED_ERROR and "ValueError: cannot index" in first.message
    again = server.stub.Handle(index_call("broken", pod("a"), "MODIFIED"))
    assert (again.outcome, calls) == (pb.OUTCOME_SKIPPED, ["a"]), "excluded for good: not called again"
    server.stub.Handle(index_call("broken", pod("a"), "DELETED"))
    server.stub.Handle(index_call("broken", pod("a"), "ADDED"))
    assert calls == ["a", "a"], "a deleted object is indexed anew when it comes back"


def test_a_server_with_indices_waits_to_be_described_before_other_calls(registry, serve):
    import grpc

    @bosun.index("pods", registry=registry)
    def names(name, **_):
        return name

    @bosun.on.create("kex", registry=registry)
    def create_fn(names, **_):
        return sorted(names[None])

    server = serve(registry)
    # Just (re)started: the controller has not described it, so its indices may be empty.
    with pytest.raises(grpc.RpcError) as e:
        server.stub.Handle(request("create_fn"))
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE and "indices are empty" in e.value.details()
    assert server.stub.Handle(index_call("names", pod("a"))).outcome == pb.OUTCOME_SUCCESS, "index calls go on"
    server.stub.Describe(pb.DescribeRequest())
    answer = server.stub.Handle(request("create_fn"))
    assert (answer.outcome, json.loads(answer.result)) == (pb.OUTCOME_SUCCESS, ["a"])
