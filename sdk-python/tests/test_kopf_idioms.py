"""Kopf's idioms over real gRPC, as real operators write them: one function for several
causes, the operator memo, Kopf's value callbacks, parents that run to their end after their
sub-handlers, and filtered sub-handlers."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest

import bosun
from bosun.v1 import handler_pb2 as pb
from sdk_support import request


def test_one_function_stacked_for_several_causes_is_called_for_each_by_its_key(registry, serve):
    reasons = []

    @bosun.on.resume("kex", registry=registry)
    @bosun.on.update("kex", registry=registry)
    @bosun.on.create("kex", registry=registry)
    def reconcile(reason, **_):
        reasons.append(reason)

    server = serve(registry)
    described = server.stub.Describe(pb.DescribeRequest())
    keys = {h.kind: h.key for h in described.handlers}
    assert [h.id for h in described.handlers] == ["reconcile"] * 3
    for kind, reason in [(pb.HANDLER_KIND_CREATE, pb.REASON_CREATE), (pb.HANDLER_KIND_UPDATE, pb.REASON_UPDATE),
                         (pb.HANDLER_KIND_RESUME, pb.REASON_RESUME)]:
        answer = server.stub.Handle(request("reconcile", reason=reason, handler_key=keys[kind]))
        assert answer.outcome == pb.OUTCOME_SUCCESS, answer.message
    assert reasons == ["create", "update", "resume"]


def test_one_id_for_two_resources_reaches_each_function(registry, serve):
    @bosun.on.create("kex", id="create_fn", registry=registry)
    def for_kex(**_):
        return "kex"

    @bosun.on.create("pods", id="create_fn", registry=registry)
    def for_pods(**_):
        return "pods"

    server = serve(registry)
    keys = [h.key for h in server.stub.Describe(pb.DescribeRequest()).handlers]
    results = [json.loads(server.stub.Handle(request("create_fn", handler_key=k)).result) for k in keys]
    assert results == ["kex", "pods"]


def test_each_objects_memo_starts_as_a_copy_of_the_operators_memo(registry, serve):
    @bosun.on.startup(registry=registry)
    def startup_fn(memo, **_):
        memo.greeting = "hello"
        memo.shared = []

    @bosun.on.create("kex", registry=registry)
    def create_fn(memo, name, **_):
        memo.shared.append(name)  # shallow: the operator's list itself, as in Kopf
        memo.own = name
        return [memo.greeting, memo.get("own"), sorted(memo)]

    server = serve(registry)
    assert server.stub.Activity(pb.ActivityRequest(handler_id="startup_fn", kind=pb.HANDLER_KIND_STARTUP)).outcome == 0
    first = json.loads(server.stub.Handle(request("create_fn")).result)
    other = {"metadata": {"name": "kex2", "namespace": "default", "uid": "uid-2"}, "spec": {}}
    second = json.loads(server.stub.Handle(request("create_fn", body=other)).result)
    assert first == ["hello", "kex1", ["greeting", "own", "shared"]]
    assert second == ["hello", "kex2", ["greeting", "own", "shared"]]


def _positional_only(v, /, **_):
    return v == "a"


def _value_and_kwargs(value, spec, **_):
    return value == "value" and spec["field"] == "value"


@pytest.mark.parametrize("filters, runs", [
    ({"labels": {"app": _positional_only}}, True),
    ({"labels": {"app": lambda x, **_: x == "b"}}, False),
    ({"labels": {"absent": lambda value, **_: value is None}}, True),
    ({"field": "spec.field", "value": _value_and_kwargs}, True),
    ({"when": lambda body, **_: body["spec"]["field"] == "value"}, True),
])
def test_value_callbacks_get_the_value_positionally_as_in_kopf(registry, serve, filters, runs):
    bosun.on.create("kex", id="create_fn", registry=registry, **filters)(lambda **_: "ran")
    answer = serve(registry).stub.Handle(request(registry.handlers[0].id))
    assert answer.outcome == (pb.OUTCOME_SUCCESS if runs else pb.OUTCOME_SKIPPED), answer.message


def test_a_parent_runs_to_its_end_once_its_subhandlers_are_finished(registry, serve):
    ran_after = []

    @bosun.on.create("kex", registry=registry)
    async def create_fn(spec, patch, **_):
        for item in spec["items"]:
            @bosun.subhandler(id=item)
            def create_item(item=item, **_):
                return item

        await bosun.execute()
        ran_after.append("after")
        patch.status["children"] = "all done"
        return {"count": len(spec["items"])}

    server = serve(registry)
    assert server.stub.Describe(pb.DescribeRequest()).finishes_parents
    first = server.stub.Handle(request("create_fn"))
    assert (first.outcome, [s.id for s in first.subhandlers], first.result) == (pb.OUTCOME_SUCCESS, ["item1", "item2"], b"")
    partly = server.stub.Handle(request("create_fn", finished_subhandlers=["item1"]))
    assert (partly.result, ran_after) == (b"", []), "execute() waits while a sub-handler is unfinished"
    done = server.stub.Handle(request("create_fn", finished_subhandlers=["item1", "item2"]))
    assert done.outcome == pb.OUTCOME_SUCCESS, done.message
    assert json.loads(done.result) == {"count": 2} and ran_after == ["after"]
    assert json.loads(done.merge_patch) == {"status": {"children": "all done"}}


def test_an_implicit_execute_stores_the_result_only_when_the_subhandlers_are_done(registry, serve):
    @bosun.on.create("kex", registry=registry)
    def create_fn(spec, **_):  # Kopf's example 07: no execute(), it runs when the handler returns
        for item in spec["items"]:
            @bosun.subhandler(id=item)
            def create_item(item=item, **_):
                pass
        return "parent result"

    server = serve(registry)
    first = server.stub.Handle(request("create_fn"))
    assert ([s.id for s in first.subhandlers], first.result) == (["item1", "item2"], b"")
    done = server.stub.Handle(request("create_fn", finished_subhandlers=["item1", "item2"]))
    assert json.loads(done.result) == "parent result"


def test_a_finishing_call_may_declare_new_subhandlers(registry, serve):
    @bosun.on.create("kex", registry=registry)
    async def create_fn(**_):
        await bosun.execute(fns={"one": lambda **_: 1})
        await bosun.execute(fns={"two": lambda **_: 2})  # a second wave, after the first is done
        return "both"

    server = serve(registry)
    assert [s.id for s in server.stub.Handle(request("create_fn")).subhandlers] == ["one"]
    second = server.stub.Handle(request("create_fn", finished_subhandlers=["one"]))
    assert ([s.id for s in second.subhandlers], second.result) == (["one", "two"], b"")
    done = server.stub.Handle(request("create_fn", finished_subhandlers=["one", "two"]))
    assert json.loads(done.result) == "both"


def test_a_subhandler_whose_filters_do_not_hold_is_not_declared(registry, serve):
    @bosun.on.create("kex", registry=registry)
    def create_fn(**_):
        @bosun.subhandler(id="for_a", labels={"app": "a"})
        def for_a(**_):
            pass

        @bosun.subhandler(id="for_b", labels={"app": "b"})
        def for_b(**_):
            pass

        @bosun.subhandler(id="when_no", when=lambda spec, **_: spec["field"] == "other")
        def when_no(**_):
            pass

        @bosun.subhandler(id="with_field", field="spec.field", value="value")
        def with_field(**_):
            pass

    answer = serve(registry).stub.Handle(request("create_fn"))
    assert [s.id for s in answer.subhandlers] == ["for_a", "with_field"]


@pytest.mark.parametrize("is_async", [False, True])
def test_a_stopped_daemon_runs_to_its_end_on_its_open_stream(registry, serve, is_async):
    if is_async:  # Kopf's example 14: an async daemon is cancelled (after its backoff)
        @bosun.daemon("kex", id="d", cancellation_backoff=0.1, registry=registry)
        async def daemon_fn(logger, patch, **_):
            logger.info("started")
            try:
                await asyncio.Event().wait()
            finally:
                patch.status["message"] = "cancelled"
    else:  # a sync daemon sees its flag and returns
        @bosun.daemon("kex", id="d", registry=registry)
        def daemon_fn(stopped, logger, patch, **_):
            logger.info("started")
            while not stopped.wait(10):
                pass
            patch.status["message"] = "Accompanying is finished."

    server = serve(registry)
    key = server.stub.Describe(pb.DescribeRequest()).handlers[0].key
    req = pb.DaemonRequest(handler_id="d", handler_key=key, object=request("d").object, resource=request("d").resource)
    stream = server.stub.Daemon(req)
    assert next(stream).log.message == "started"
    other = server.stub.StopDaemon(pb.StopDaemonRequest(handler_id="d", handler_key=key, uid="another-object"))
    assert not other.stopping
    assert server.stub.StopDaemon(pb.StopDaemonRequest(handler_id="d", handler_key=key, uid="uid-1")).stopping
    rest = list(stream)  # the stream goes on to the daemon's end
    assert json.loads(rest[0].merge_patch)["status"]["message"] in ("cancelled", "Accompanying is finished.")
    assert rest[-1].exit.outcome == pb.OUTCOME_SUCCESS
    gone = server.stub.StopDaemon(pb.StopDaemonRequest(handler_id="d", handler_key=key, uid="uid-1"))
    assert not gone.stopping, "an ended daemon is forgotten"


def test_admission_handlers_get_the_webhook_requests_headers(registry, serve):
    @bosun.on.validate("kex", registry=registry)
    def authhook(headers: bosun.Headers, sslpeer: bosun.SSLPeer, warnings, **_):
        warnings.append(f"Accessing as user-agent: {headers.get('User-Agent', '(unidentified)')}")
        warnings.append("SSL peer is not identified." if not sslpeer.get("subject") else "peer")

    review = {"uid": "u", "operation": "CREATE", "object": json.loads(request("authhook").object),
              "resource": {"group": "kopf.dev", "version": "v1", "resource": "kopfexamples"}}
    answer = serve(registry).stub.Admit(pb.AdmitRequest(handler_id="authhook", request=json.dumps(review).encode(),
                                                        headers={"user-agent": "kube-apiserver-admission"}))
    assert answer.allowed and list(answer.warnings) == [
        "Accessing as user-agent: kube-apiserver-admission", "SSL peer is not identified."]


def test_settings_held_when_described_go_to_the_controller(registry, serve):
    from bosun import _settings

    bosun.on.create("kex", id="create_fn", registry=registry)(lambda **_: None)
    settings = bosun.OperatorSettings()
    settings.persistence.finalizer = "example.com/finalizer"
    previous = _settings.replace(settings)
    try:
        described = serve(registry).stub.Describe(pb.DescribeRequest())
    finally:
        _settings.replace(previous)
    assert described.settings.finalizer == "example.com/finalizer"


def test_kopfs_command_line_runs_the_bosun_binary(tmp_path, monkeypatch):
    import bosun.cli

    fake = tmp_path / "bosun"  # a stand-in binary that prints what it was given
    fake.write_text("#!/bin/sh\necho \"$@\"\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("BOSUN_BINARY", str(fake))
    out = subprocess.run([sys.executable, "-m", "bosun.cli", "run", "-A", "handlers.py"], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert out.returncode == 3
    assert out.stdout.split() == ["run", "--python", sys.executable, "-A", "handlers.py"]
    assert bosun.cli.main(["freeze", "--lifetime", "5"]) == 3
