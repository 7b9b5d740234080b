"""HandleStream over real gRPC: each call on the stream answers what the unary Handle answers,
by its id, in one message or several; a cancelled call gets no answer; a slow sync handler does
not hold up the other calls of its message."""

from __future__ import annotations

import queue
import threading
import time

import grpc
import pytest

import bosun
from bosun import _streaming
from bosun.v1 import handler_pb2 as pb
from sdk_support import request


class Stream:
    """One HandleStream: calls go out as messages; answers are read in a thread."""

    def __init__(self, server):
        self.out: "queue.Queue" = queue.Queue()
        self.answers: "queue.Queue" = queue.Queue()
        self.messages = 0
        self.call = server.stub.HandleStream(iter(self.out.get, None))
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        try:
            for message in self.call:
                self.messages += 1
                for answer in message.answers:
                    self.answers.put(answer)
        except grpc.RpcError:
            pass

    def send(self, *calls):
        self.out.put(pb.HandleCalls(calls=list(calls)))

    def collect(self, n, timeout=10.0):
        got, end = {}, time.monotonic() + timeout
        while len(got) < n:
            answer = self.answers.get(timeout=max(0.01, end - time.monotonic()))
            got[answer.id] = answer
        return got

    def close(self):
        self.out.put(None)


def call(id, handler_id, **fields):
    return pb.HandleCall(id=id, request=request(handler_id, **fields))


@pytest.fixture
def stream(serve):
    streams = []

    def open_(registry):
        s = Stream(serve(registry))
        streams.append(s)
        return s

    yield open_
    for s in streams:
        s.close()


def test_the_server_says_it_takes_calls_on_a_stream(registry, serve):
    bosun.on.create("kex", registry=registry)(lambda **_: None)
    assert serve(registry).stub.Describe(pb.DescribeRequest()).handle_stream


def test_calls_in_one_message_are_each_answered_by_id_as_the_unary_call_would(registry, serve, stream):
    @bosun.on.create("kex", registry=registry)
    def create_fn(name, **_):
        return {"sync": name}

    @bosun.on.update("kex", registry=registry)
    async def update_fn(name, **_):
        return {"async": name}

    @bosun.on.delete("kex", registry=registry)
    def delete_fn(**_):
        raise bosun.TemporaryError("not yet", delay=7)

    s = stream(registry)
    s.send(call(1, "create_fn"), call(2, "update_fn", reason=pb.REASON_UPDATE), call(3, "delete_fn", reason=pb.REASON_DELETE),
           call(4, "no_such_fn"))
    got = s.collect(4)
    assert got[1].response.outcome == pb.OUTCOME_SUCCESS and got[1].response.result == b'{"sync":"kex1"}'
    assert got[2].response.result == b'{"async":"kex1"}'
    assert (got[3].response.outcome, got[3].response.message, got[3].response.delay_seconds) == (pb.OUTCOME_TEMPORARY_ERROR, "not yet", 7)
    # The unary call's NOT_FOUND, as a status on the stream.
    assert got[4].WhichOneof("answer") == "error" and got[4].error.code == grpc.StatusCode.NOT_FOUND.value[0]
    assert "no_such_fn" in got[4].error.message
    # The same calls, unary: the same answers.
    unary = serve(registry).stub.Handle(request("create_fn"))
    assert unary == got[1].response


def test_many_calls_go_back_in_fewer_messages(registry, stream):
    @bosun.on.create("kex", registry=registry)
    def create_fn(**_):
        return 1

    s = stream(registry)
    s.send(*[call(i, "create_fn") for i in range(1, 201)])
    got = s.collect(200)
    assert sorted(got) == list(range(1, 201))
    assert all(a.response.result == b"1" for a in got.values())
    assert s.messages < 200, "answers that finished together share a message"


def test_a_cancelled_call_gets_no_answer_and_the_stream_goes_on(registry, stream):
    started, cancelled = threading.Event(), threading.Event()

    @bosun.on.create("kex", registry=registry)
    async def create_fn(**_):
        import asyncio

        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    @bosun.on.update("kex", registry=registry)
    def update_fn(**_):
        return "after"

    s = stream(registry)
    s.send(call(1, "create_fn"))
    assert started.wait(10)
    s.send(pb.HandleCall(id=1, cancel=True))
    assert cancelled.wait(10), "the async handler was cancelled"
    s.send(call(2, "update_fn", reason=pb.REASON_UPDATE))
    got = s.collect(1)
    assert list(got) == [2] and got[2].response.result == b'"after"'
    with pytest.raises(queue.Empty):
        s.answers.get(timeout=0.3)


def test_a_slow_sync_handler_does_not_hold_up_the_other_calls_of_its_message(registry, stream):
    release = threading.Event()

    @bosun.on.create("kex", registry=registry)
    def create_fn(name, **_):
        if name == "slow":
            release.wait(30)
        return name

    s = stream(registry)
    body = lambda name: {"metadata": {"name": name, "namespace": "default", "uid": name}}  # noqa: E731
    s.send(pb.HandleCall(id=1, request=request("create_fn", body=body("slow"))),
           *[pb.HandleCall(id=i, request=request("create_fn", body=body(f"quick{i}"))) for i in range(2, 6)])
    quick = s.collect(4, timeout=5 + _streaming.HELP_AFTER)
    assert sorted(quick) == [2, 3, 4, 5], "the quick calls were answered while the slow one ran"
    release.set()
    assert s.collect(1)[1].response.result == b'"slow"'


def test_sync_handlers_on_the_stream_see_their_call(registry, stream):
    @bosun.on.create("kex", registry=registry)
    def create_fn(logger, patch, **_):
        logger.info("hello from a thread")
        patch.status["seen"] = True
        bosun.info({"kind": "Pod", "metadata": {"name": "p"}}, reason="Seen", message="it was seen")

    s = stream(registry)
    s.send(call(1, "create_fn"))
    answer = s.collect(1)[1].response
    assert answer.outcome == pb.OUTCOME_SUCCESS, answer.message
    assert [line.message for line in answer.logs] == ["hello from a thread"]
    assert answer.merge_patch == b'{"status":{"seen":true}}'
    assert [e.reason for e in answer.events] == ["Seen"]


def test_a_stopping_server_ends_its_open_stream_at_once_and_refuses_new_calls(registry, serve):
    """`serve` stopping (SIGTERM under `bosun dev`) does not wait out its grace for an open
    stream: the stream ends with OK once its calls are answered, and the server exits."""

    @bosun.on.create("kex", registry=registry)
    def create_fn(**_):
        return 1

    server = serve(registry)
    s = Stream(server)
    s.send(call(1, "create_fn"))
    assert s.collect(1)[1].response.result == b"1"
    started = time.monotonic()
    server.loop.call_soon_threadsafe(server.stop_event.set)
    server.thread.join(10)
    assert not server.thread.is_alive() and time.monotonic() - started < 3, "the stop did not wait for the stream's grace"
    s.reader.join(5)
    assert not s.reader.is_alive(), "the stream ended"
    assert s.call.code() == grpc.StatusCode.OK


def test_a_call_that_comes_while_the_server_stops_is_refused_as_unavailable(registry, serve):
    @bosun.on.create("kex", registry=registry)
    def create_fn(**_):
        return 1

    from bosun import _server

    servicer = _server.Servicer(registry)
    servicer.stopping = True

    class Context:
        async def send_initial_metadata(self, _):
            pass

    async def calls():
        yield pb.HandleCalls(calls=[call(7, "create_fn")])

    async def run():
        return [m async for m in _streaming.serve(servicer, calls(), Context())]

    import asyncio

    messages = asyncio.run(run())
    answers = [a for m in messages for a in m.answers]
    assert [(a.id, a.error.code) for a in answers] == [(7, grpc.StatusCode.UNAVAILABLE.value[0])]
