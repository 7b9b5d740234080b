"""The handler server over real gRPC: what each call answers for what a handler does."""

from __future__ import annotations

import asyncio
import json
import threading
import time



import grpc
import pytest

import bosun
from bosun.v1 import handler_pb2 as pb
from sdk_support import request


def test_describe_lists_the_handlers_in_order(registry, serve):
    @bosun.on.create("kex", registry=registry)
    def create_fn(**_):
        pass

    @bosun.on.delete("kex", registry=registry)
    def delete_fn(**_):
        pass

    answer = serve(registry).stub.Describe(pb.DescribeRequest())
    assert [h.id for h in answer.handlers] == ["create_fn", "delete_fn"]
    assert answer.server_name.startswith("python:")


def test_health_reports_serving_for_the_empty_service_name(registry, serve):
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    bosun.on.create("kex", registry=registry)(lambda **_: None)
    server = serve(registry)
    status = health_pb2_grpc.HealthStub(server.channel).Check(health_pb2.HealthCheckRequest(service=""))
    assert status.status == health_pb2.HealthCheckResponse.SERVING


def test_kwargs_are_kopfs(registry, serve):
    seen = {}

    @bosun.on.update("kex", registry=registry)
    def update_fn(body, spec, meta, status, uid, name, namespace, labels, annotations, patch, logger, retry, started,
                  runtime, reason, diff, old, new, param, memo, resource, **kwargs):
        seen.update(spec=spec, uid=uid, name=name, namespace=namespace, labels=labels, retry=retry, reason=reason,
                    diff=diff, old=old, new=new, kind=body["kind"], started=started, runtime=runtime,
                    plural=resource["plural"], memo=type(memo).__name__)

    diff = [pb.DiffItem(operation=pb.DiffItem.OPERATION_CHANGE, path=["spec", "field"], old=b'"a"', new=b'"b"')]
    req = request("update_fn", reason=pb.REASON_UPDATE, retry=2, old=b'{"spec":{"field":"a"}}',
                  new=b'{"spec":{"field":"b"}}', diff=diff)
    req.started.FromSeconds(1_700_000_000)
    req.runtime.FromSeconds(5)
    answer = serve(registry).stub.Handle(req)
    assert answer.outcome == pb.OUTCOME_SUCCESS, answer.message
    assert seen["spec"]["field"] == "value" and seen["uid"] == "uid-1" and seen["name"] == "kex1"
    assert seen["namespace"] == "default" and seen["labels"] == {"app": "a"} and seen["retry"] == 2
    assert seen["reason"] == "update" and seen["kind"] == "KopfExample" and seen["plural"] == "kopfexamples"
    assert seen["diff"] == (("change", ("spec", "field"), "a", "b"),)
    assert seen["diff"][0].operation == "change"
    assert seen["old"] == {"spec": {"field": "a"}} and seen["new"] == {"spec": {"field": "b"}}
    assert seen["started"].year == 2023 and seen["runtime"].total_seconds() == 5
    assert seen["memo"] == "Memo"


def test_a_handler_without_kwargs_gets_only_what_it_names(registry, serve):
    @bosun.on.create("kex", registry=registry)
    def create_fn(spec):
        return spec["field"]

    answer = serve(registry).stub.Handle(request("create_fn"))
    assert answer.outcome == pb.OUTCOME_SUCCESS, answer.message
    assert json.loads(answer.result) == "value"


def test_the_result_patch_logs_and_events_travel_back(registry, serve):
    @bosun.on.create("kex", registry=registry)
    async def create_fn(body, patch, logger, **_):
        patch.status["progress"] = 1
        patch.meta.labels["touched"] = "yes"
        patch.spec  # looked at, left empty: not sent
        logger.info("hello %s", "world")
        logger.warning("careful")
        bosun.info(body, reason="SomeReason", message="Some message")
        bosun.warn({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default", "uid": "u2"}},
                   reason="Other", message="about a pod")
        return {"message": "hello world"}

    answer = serve(registry).stub.Handle(request("create_fn"))
    assert answer.outcome == pb.OUTCOME_SUCCESS, answer.message
    assert json.loads(answer.result) == {"message": "hello world"}
    assert json.loads(answer.merge_patch) == {"status": {"progress": 1}, "metadata": {"labels": {"touched": "yes"}}}
    assert [(line.level, line.message) for line in answer.logs] == [
        (pb.LogLine.LEVEL_INFO, "hello world"), (pb.LogLine.LEVEL_WARNING, "careful")]
    assert [(e.type, e.reason, e.HasField("regarding")) for e in answer.events] == [
        ("Normal", "SomeReason", False), ("Warning", "Other", True)]
    assert answer.events[1].regarding.name == "p"


def test_sync_handlers_run_in_threads_and_still_post_events(registry, serve):
    threads = []

    @bosun.on.create("kex", registry=registry)
    def create_fn(body, **_):
        threads.append(threading.current_thread().name)
        bosun.info(body, reason="FromThread", message="m")

    answer = serve(registry).stub.Handle(request("create_fn"))
    assert answer.outcome == pb.OUTCOME_SUCCESS, answer.message
    assert threads and threads[0] != "MainThread"
    assert [e.reason for e in answer.events] == ["FromThread"]


@pytest.mark.parametrize("raise_, outcome, message, delay", [
    (bosun.TemporaryError("later", delay=7), pb.OUTCOME_TEMPORARY_ERROR, "later", 7.0),
    (bosun.TemporaryError("later, default delay"), pb.OUTCOME_TEMPORARY_ERROR, "later, default delay", 60.0),
    (bosun.PermanentError("never"), pb.OUTCOME_PERMANENT_ERROR, "never", None),
    (ValueError("boom"), pb.OUTCOME_UNEXPECTED_ERROR, "ValueError: boom", None),
])
def test_errors_become_outcomes_never_grpc_errors(registry, serve, raise_, outcome, message, delay):
    @bosun.on.create("kex", registry=registry)
    def create_fn(patch, **_):
        patch.status["tried"] = True
        raise raise_

    answer = serve(registry).stub.Handle(request("create_fn"))
    assert answer.outcome == outcome
    assert message in answer.message
    assert (answer.delay_seconds if answer.HasField("delay_seconds") else None) == delay
    assert json.loads(answer.merge_patch) == {"status": {"tried": True}}, "a failed attempt's patch is still applied"
    if outcome == pb.OUTCOME_UNEXPECTED_ERROR:
        assert "Traceback (most recent call last)" in answer.message and "create_fn" in answer.message


@pytest.mark.parametrize("returned, text", [
    (lambda: {"x": object()}, "return value is not JSON-serialisable"),
])
def test_an_unusable_result_is_an_unexpected_error(registry, serve, returned, text):
    bosun.on.create("kex", id="create_fn", registry=registry)(lambda **_: returned())
    answer = serve(registry).stub.Handle(request("create_fn"))
    assert answer.outcome == pb.OUTCOME_UNEXPECTED_ERROR and text in answer.message


def test_an_unknown_handler_is_not_found_naming_the_known_ones_as_the_rust_sdk_answers(registry, serve):
    bosun.on.create("kex", id="create_fn", registry=registry)(lambda **_: None)
    with pytest.raises(grpc.RpcError) as failed:
        serve(registry).stub.Handle(request("nope"))
    assert failed.value.code() == grpc.StatusCode.NOT_FOUND
    assert 'has no handler "nope"; it has: create_fn' in failed.value.details()


@pytest.mark.parametrize("filters, skipped", [
    ({"when": lambda spec, **_: spec["field"] == "value"}, False),
    ({"when": lambda spec, **_: spec["field"] == "other"}, True),
    ({"labels": {"app": lambda value, **_: value == "a"}}, False),
    ({"labels": {"app": lambda value, **_: value == "b"}}, True),
    ({"field": "spec.field", "value": lambda value, **_: value == "value"}, False),
])
def test_callable_filters_are_checked_by_the_server(registry, serve, filters, skipped):
    bosun.on.create("kex", id="create_fn", registry=registry, **filters)(lambda **_: "ran")
    answer = serve(registry).stub.Handle(request(registry.handlers[0].id))
    assert answer.outcome == (pb.OUTCOME_SKIPPED if skipped else pb.OUTCOME_SUCCESS), answer.message


def test_memo_is_kept_per_object_between_calls(registry, serve):
    @bosun.on.create("kex", registry=registry)
    def create_fn(memo, **_):
        memo.count = memo.get("count", 0) + 1
        return memo.count

    server = serve(registry)
    assert json.loads(server.stub.Handle(request("create_fn")).result) == 1
    assert json.loads(server.stub.Handle(request("create_fn")).result) == 2


def test_subhandlers_declared_by_decorator_are_reached_through_their_parent(registry, serve):
    entered = []

    @bosun.on.create("kex", registry=registry)
    def create_fn(spec, **_):
        entered.append("parent")
        for item in spec["items"]:
            @bosun.subhandler(id=item, retries=2)
            def create_item_fn(item=item, patch=None, **_):
                patch.status[item] = "done"
                return item.upper()

    server = serve(registry)
    answer = server.stub.Handle(request("create_fn"))
    assert answer.outcome == pb.OUTCOME_SUCCESS, answer.message
    assert [(s.id, s.options.retries) for s in answer.subhandlers] == [("item1", 2), ("item2", 2)]

    child = server.stub.Handle(request("create_fn/item2", parent_id="create_fn", subhandler_id="item2"))
    assert child.outcome == pb.OUTCOME_SUCCESS, child.message
    assert json.loads(child.result) == "ITEM2"
    assert json.loads(child.merge_patch) == {"status": {"item2": "done"}}
    assert entered == ["parent", "parent"], "the parent is re-entered to rebuild the closures"


def test_subhandlers_of_execute_and_a_vanished_child(registry, serve):
    after = []

    @bosun.on.create("kex", registry=registry)
    async def create_fn(spec, patch, **_):
        patch.status["parent"] = "ran"

        def one(**_):
            return 1

        fns = {"one": one} if spec.get("field") == "value" else {}
        await bosun.execute(fns=fns)
        after.append("after execute")

    server = serve(registry)
    answer = server.stub.Handle(request("create_fn"))
    assert [s.id for s in answer.subhandlers] == ["one"]
    assert after == []
    child = server.stub.Handle(request("create_fn/one", parent_id="create_fn", subhandler_id="one"))
    assert (child.outcome, json.loads(child.result)) == (pb.OUTCOME_SUCCESS, 1)
    assert not child.merge_patch, "the re-entered parent's patch is not sent again"

    body = {"metadata": {"name": "k", "namespace": "default", "uid": "u"}, "spec": {"field": "changed"}}
    gone = server.stub.Handle(request("create_fn/one", body=body, parent_id="create_fn", subhandler_id="one"))
    assert gone.outcome == pb.OUTCOME_PERMANENT_ERROR and "no longer declares" in gone.message


def test_owned_objects_are_sent_for_the_controller_to_create(registry, serve):
    @bosun.on.create("kex", registry=registry)
    def create_fn(**_):
        bosun.own({"apiVersion": "v1", "kind": "Pod", "spec": {}}, apply=True)

    answer = serve(registry).stub.Handle(request("create_fn"))
    assert len(answer.owned) == 1 and answer.owned[0].apply
    assert json.loads(answer.owned[0].object)["kind"] == "Pod"


def test_event_handlers_get_the_event(registry, serve):
    seen = []

    @bosun.on.event("kex", registry=registry)
    def event_fn(event, type, **_):
        seen.append((type, event["type"], event["object"]["metadata"]["name"]))

    answer = serve(registry).stub.Handle(request("event_fn", reason=pb.REASON_EVENT, event_type="MODIFIED"))
    assert answer.outcome == pb.OUTCOME_SUCCESS, answer.message
    assert seen == [("MODIFIED", "MODIFIED", "kex1")]


def test_activities_retry_and_probe_results(registry, serve):
    @bosun.on.startup(registry=registry)
    async def startup_fn(retry, logger, **_):
        logger.info("starting")
        if retry < 1:
            raise bosun.TemporaryError("not yet", delay=1)

    @bosun.on.probe(id="now", registry=registry)
    def probe_fn(**_):
        return 42

    server = serve(registry)
    first = server.stub.Activity(pb.ActivityRequest(handler_id="startup_fn", kind=pb.HANDLER_KIND_STARTUP, retry=0))
    assert (first.outcome, first.delay_seconds, [l.message for l in first.logs]) == (pb.OUTCOME_TEMPORARY_ERROR, 1.0, ["starting"])
    second = server.stub.Activity(pb.ActivityRequest(handler_id="startup_fn", kind=pb.HANDLER_KIND_STARTUP, retry=1))
    assert second.outcome == pb.OUTCOME_SUCCESS
    probe = server.stub.Activity(pb.ActivityRequest(handler_id="now", kind=pb.HANDLER_KIND_PROBE))
    assert json.loads(probe.result) == 42


def test_admission_denies_with_the_handlers_message_and_mutates(registry, serve):
    @bosun.on.validate("kex", registry=registry)
    def check(spec, **_):
        if spec.get("field") == "bad":
            raise bosun.AdmissionError("field must not be bad", code=422)

    @bosun.on.mutate("kex", registry=registry)
    def fill(patch, warnings, **_):
        patch.spec["defaulted"] = True
        warnings.append("defaulted")

    server = serve(registry)
    review = {"uid": "r1", "operation": "CREATE", "object": {"metadata": {"name": "k"}, "spec": {"field": "bad"}}}
    denied = server.stub.Admit(pb.AdmitRequest(handler_id="check", request=json.dumps(review).encode()))
    assert (denied.allowed, denied.code, denied.message) == (False, 422, "field must not be bad")
    mutated = server.stub.Admit(pb.AdmitRequest(handler_id="fill", request=json.dumps(review).encode()))
    assert mutated.allowed and json.loads(mutated.merge_patch) == {"spec": {"defaulted": True}}
    assert list(mutated.warnings) == ["defaulted"]


def waiting_daemon(registry, is_async, done, cleanup=0.0):
    """Registers daemon `d` on `kex`: it logs "started", waits until stopped, takes `cleanup`
    seconds to clean up (in its task or thread), and sets `done` as it returns."""
    if is_async:
        @bosun.daemon("kex", id="d", registry=registry)
        async def daemon_fn(stopped, logger, **_):
            logger.info("started")
            try:
                while not stopped:
                    await stopped.wait(10)
                await asyncio.sleep(cleanup)
            finally:
                done.set()
    else:
        @bosun.daemon("kex", id="d", registry=registry)
        def daemon_fn(stopped, logger, **_):
            logger.info("started")
            try:
                while not stopped.wait(10):
                    pass
                time.sleep(cleanup)
            finally:
                done.set()


@pytest.mark.parametrize("is_async", [False, True])
def test_a_daemon_streams_logs_and_stops_when_the_stream_is_cancelled(registry, serve, is_async):
    stopped_seen = threading.Event()
    waiting_daemon(registry, is_async, stopped_seen)

    server = serve(registry)
    req = pb.DaemonRequest(handler_id="d", object=request("d").object, resource=request("d").resource)
    stream = server.stub.Daemon(req)
    first = next(stream)
    assert first.log.message == "started"
    stream.cancel()
    assert stopped_seen.wait(10), "the daemon saw `stopped` within 10 s of the cancellation"


def test_a_daemon_that_exits_reports_its_outcome(registry, serve):
    @bosun.daemon("kex", id="d", registry=registry)
    def daemon_fn(patch, **_):
        patch.status["daemon"] = "was here"
        raise bosun.TemporaryError("again", delay=3)

    server = serve(registry)
    messages = list(server.stub.Daemon(pb.DaemonRequest(handler_id="d", object=request("d").object)))
    assert json.loads(messages[0].merge_patch) == {"status": {"daemon": "was here"}}
    assert (messages[-1].exit.outcome, messages[-1].exit.message, messages[-1].exit.delay_seconds) == (
        pb.OUTCOME_TEMPORARY_ERROR, "again", 3.0)


def test_serving_without_handlers_is_a_clear_error():
    with pytest.raises(RuntimeError, match="no handlers are registered"):
        asyncio.run(bosun.serve(bosun.Registry(), "127.0.0.1:0"))


@pytest.mark.parametrize("value, expected", [
    ("127.0.0.1:5", "127.0.0.1:5"), ("http://127.0.0.1:5", "127.0.0.1:5"), ("unix:///tmp/s", "unix:///tmp/s"),
    ("", "127.0.0.1:50051"),
])
def test_listen_addresses(value, expected):
    from bosun._server import listen_address
    assert listen_address(value) == expected


def test_a_bad_listen_address_is_rejected():
    from bosun._server import listen_address
    with pytest.raises(ValueError, match="invalid listen address"):
        listen_address("https://x:1")




def test_owned_kinds_are_declared_per_resource_in_describe(registry, serve):
    @bosun.on.create("kopfexamples", registry=registry)
    def create_fn(**_):
        pass

    bosun.owns("kopfexamples", "v1/pods", "deployments.apps", registry=registry)
    bosun.owns("kopfexamples", "v1/pods", registry=registry)  # declared twice: listed once
    answer = serve(registry).stub.Describe(pb.DescribeRequest())
    [settings] = answer.resources
    assert settings.resource.name == "kopfexamples"
    assert [k.name for k in settings.owns] == ["v1/pods", "deployments.apps"]
    with pytest.raises(TypeError, match="at least one owned kind"):
        bosun.owns("kopfexamples", registry=registry)


@pytest.mark.parametrize("is_async", [False, True])
def test_a_stopped_daemons_exit_comes_only_after_its_function_returned_and_says_it_was_stopped(registry, serve, is_async):
    returned = threading.Event()
    waiting_daemon(registry, is_async, returned, cleanup=0.3)

    server = serve(registry)
    key = server.stub.Describe(pb.DescribeRequest()).handlers[0].key
    req = request("d")
    stream = server.stub.Daemon(pb.DaemonRequest(handler_id="d", handler_key=key, object=req.object, resource=req.resource))
    assert next(stream).log.message == "started"
    stop = pb.StopDaemonRequest(handler_id="d", handler_key=key, uid="uid-1")
    assert server.stub.StopDaemon(stop).stopping
    rest = list(stream)
    assert rest[-1].HasField("exit") and rest[-1].exit.stopped, rest
    assert returned.is_set(), "the exit came only after the function returned"
    assert not server.stub.StopDaemon(stop).stopping, "an ended daemon is forgotten"


def test_a_daemon_that_returns_on_its_own_says_it_was_not_stopped(registry, serve):
    @bosun.daemon("kex", id="d", registry=registry)
    def daemon_fn(**_):
        pass

    server = serve(registry)
    messages = list(server.stub.Daemon(pb.DaemonRequest(handler_id="d", object=request("d").object)))
    assert messages[-1].HasField("exit") and not messages[-1].exit.stopped
