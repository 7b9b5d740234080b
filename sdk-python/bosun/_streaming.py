"""`HandleStream`: Handle calls on one long-lived stream (the controller uses it because the
server says `handle_stream` when described). grpcio spends ~0.3 ms of CPU on a unary call and
less than half of that on a stream message, and a message carries every call the controller
had waiting. Each call means what the unary Handle means: its answer, or the status the unary
call would have ended with; a `cancel` stops waiting for it.

A call of a sync handler (Kopf runs those in the operator's thread pool) is run whole in a
worker thread: its kwargs, the handler, its answer; the loop only reads, dispatches and writes.
The sync calls of one message go to one worker, one after the other (a thread hand-over costs
more than such a call); those still waiting after `HELP_AFTER` get a worker each, so a slow
handler holds the others up for no longer than that.
Every other call (async handlers, sub-handlers, index handlers, a custom executor) runs as a
task on the loop, through the same code as the unary call."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextvars
import inspect
import traceback
from typing import Any, Deque, Dict, Optional

import grpc

from . import _kwargs, _settings, _tracing

#: The marker of a call that runs in a worker thread (instead of its task).
_IN_THREAD = object()

#: How long the sync calls of one message may wait behind each other in one worker before
#: the rest are spread over more workers (seconds).
HELP_AFTER = 0.005


class Aborted(Exception):
    """A call on the stream ended with a gRPC status (what `context.abort` does to a unary
    call)."""

    def __init__(self, code: grpc.StatusCode, details: str):
        super().__init__(details)
        self.code = code.value[0]
        self.details = details


class StreamCall:
    """The `context` of one call on the stream: its trace context, and `abort`."""

    __slots__ = ("traceparent",)

    def __init__(self, traceparent: str):
        self.traceparent = traceparent

    def invocation_metadata(self):
        return (("traceparent", self.traceparent),) if self.traceparent else ()

    async def abort(self, code: grpc.StatusCode, details: str = ""):
        raise Aborted(code, details)


def _pb():
    from .v1 import handler_pb2

    return handler_pb2


def _thread_pool() -> Optional[concurrent.futures.ThreadPoolExecutor]:
    """The operator's thread pool when its calls can run there whole (the default kind)."""
    executor = _settings.current().execution.executor
    if type(executor) is concurrent.futures.ThreadPoolExecutor and not getattr(executor, "_shutdown", False):
        return executor
    return None


async def serve(servicer: Any, request_iterator, context):
    """The stream's answers, as they are ready (every answer that finished by the time the
    stream is written next goes in one message)."""
    pb = _pb()
    loop = asyncio.get_running_loop()
    await context.send_initial_metadata(())
    answers: Deque[Any] = collections.deque()
    ready = asyncio.Event()
    woken = [False]
    running: Dict[int, Any] = {}
    reading = [True]

    def wake_from_thread() -> None:
        if not woken[0]:
            woken[0] = True
            try:
                loop.call_soon_threadsafe(ready.set)
            except RuntimeError:  # the loop is closed: nobody reads any more
                pass

    def finished_in_thread(call_id: int, answer: Any) -> None:
        if running.pop(call_id, None) is _IN_THREAD and answer is not None:
            answers.append(answer)
        wake_from_thread()

    async def in_task(call) -> None:
        ctx = StreamCall(call.traceparent)
        try:
            response = await servicer.Handle(call.request, ctx)
            answers.append(pb.HandleAnswer(id=call.id, response=response))
        except Aborted as e:
            answers.append(pb.HandleAnswer(id=call.id, error=pb.CallError(code=e.code, message=e.details)))
        except asyncio.CancelledError:
            return  # the controller stopped waiting: no answer
        finally:
            running.pop(call.id, None)
        ready.set()

    def in_thread(call) -> None:
        finished_in_thread(call.id, _answer_in_thread(servicer, pb, loop, call))

    def run_queued(queue: Deque[Any]) -> None:
        """Runs the calls of `queue` one after the other until it is empty (other workers may
        take calls from it too)."""
        while True:
            try:
                call, context = queue.popleft()
            except IndexError:
                return
            context.run(in_thread, call)

    def dropped(queue: Deque[Any]) -> None:
        """The pool dropped a job at shutdown: its calls get no answer."""
        while queue:
            call, _ = queue.popleft()
            finished_in_thread(call.id, None)

    def spread(pool, queue: Deque[Any]) -> None:
        """The calls of a message still queued after HELP_AFTER: one more worker for each, so
        that a slow handler holds up none of the others for longer."""
        for _ in range(len(queue)):
            if not _kwargs.submit(pool, lambda: run_queued(queue), lambda: dropped(queue)):
                break

    def start(calls) -> None:
        """Starts a message's calls: the sync handlers' calls queued for one worker (one
        thread wake-up, not one per call), the others as tasks."""
        pool = _thread_pool()
        queue: Deque[Any] = collections.deque()
        for call in calls:
            top = servicer.top_handler(call.request) if pool is not None else None
            if top is not None and top.kind != "index" and not _kwargs.is_async(top.fn):
                running[call.id] = _IN_THREAD
                queue.append((call, contextvars.copy_context()))
            else:
                running[call.id] = loop.create_task(in_task(call))
        if not queue:
            return
        if not _kwargs.submit(pool, lambda: run_queued(queue), lambda: dropped(queue)):
            for call, _ in queue:
                running[call.id] = loop.create_task(in_task(call))
            return
        if len(queue) > 1:
            loop.call_later(HELP_AFTER, spread, pool, queue)

    def refuse(calls) -> None:
        """The server is stopping: the controller is to retry these once a server is back."""
        for call in calls:
            answers.append(pb.HandleAnswer(id=call.id, error=pb.CallError(code=grpc.StatusCode.UNAVAILABLE.value[0],
                                                                            message="the handler server is stopping")))
        ready.set()

    async def read() -> None:
        try:
            async for batch in request_iterator:
                calls = [call for call in batch.calls if not call.cancel]
                if servicer.stopping:
                    refuse(calls)
                else:
                    start(calls)
                for call in batch.calls:
                    if not call.cancel:
                        continue
                    task = running.pop(call.id, None)
                    if task is not None and task is not _IN_THREAD:
                        task.cancel()  # a call in a thread cannot be stopped: its answer is dropped
        finally:
            reading[0] = False
            ready.set()

    reader = loop.create_task(read())
    servicer.streams.add(ready)
    try:
        while reading[0] or running or answers:
            await ready.wait()
            ready.clear()
            woken[0] = False
            if answers:
                out = []
                while answers:
                    out.append(answers.popleft())
                yield pb.HandleAnswers(answers=out)
            if servicer.stopping and not running and not answers:
                return  # the stream ends with OK; the controller opens another when it needs one
    finally:
        servicer.streams.discard(ready)
        reader.cancel()
        for task in list(running.values()):
            if task is not _IN_THREAD:
                task.cancel()


def _answer_in_thread(servicer: Any, pb, loop: asyncio.AbstractEventLoop, call) -> Any:
    """Runs one call of a sync handler whole in this worker thread: the unary call's code,
    whose only suspension points (the handler's invocation, an abort) do not suspend here."""

    async def invoke(fn, kwargs):
        result = fn(**_kwargs.accepted(fn, kwargs))
        if inspect.isawaitable(result):  # a sync function that returned an awaitable: the loop runs it
            result = asyncio.run_coroutine_threadsafe(_awaited(result), loop).result()
        return result

    ctx = StreamCall(call.traceparent)
    try:
        with _tracing.call_span("Handle", call.request.handler_id, ctx):
            running = servicer._handle_call(call.request, ctx, invoke=invoke)
            try:
                running.send(None)
            except StopIteration as done:
                return pb.HandleAnswer(id=call.id, response=done.value)
            running.close()
            raise RuntimeError("the call waited for the event loop in a worker thread")
    except Aborted as e:
        return pb.HandleAnswer(id=call.id, error=pb.CallError(code=e.code, message=e.details))
    except BaseException as e:  # a defect of the SDK: still an answer, as the unary call's
        message = "".join(traceback.format_exception(type(e), e, e.__traceback__)).rstrip()
        return pb.HandleAnswer(id=call.id, error=pb.CallError(code=grpc.StatusCode.UNKNOWN.value[0], message=message))


async def _awaited(awaitable) -> Any:
    return await awaitable
