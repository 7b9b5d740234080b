"""The handler server: `bosun.v1.HandlerServer` over grpc.aio, plus `grpc.health.v1`
(service `""` SERVING). It answers Describe from the registry and routes each call to its
Python function. Whatever a handler does ends as an answer, never as a gRPC error: Kopf's
errors map to outcomes, anything else is an unexpected error with its traceback."""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
import os
import signal
import socket
import traceback
from typing import Any, Dict, List, Optional, Tuple

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from . import (_context, _index, _kwargs, _login, _matching, _resources, _reviews, _settings, _settings_contract,
               _streaming, _tracing)
from ._errors import AdmissionError, PermanentError, TemporaryError
from ._registry import Handler, Registry, default_backoff, get_default_registry, handler_spec, options_spec
from ._collector import Collector, _event
from ._subhandlers import SubhandlersDeclared
from ._wire import Unusable as _Unusable, diff as _diff, dumps as _dumps, json_value as _json, resource as _resource

LISTEN_ENV = "BOSUN_LISTEN"
DEFAULT_LISTEN = "127.0.0.1:50051"

log = logging.getLogger("bosun")

_REASONS = {1: "create", 2: "update", 3: "delete", 4: "resume", 5: "event", 6: "timer", 7: "index"}
#: The kinds of handler a reason may call (for a controller that sends no `handler_key`).
_KINDS_OF_REASON = {1: ("create", "field"), 2: ("update", "field"), 3: ("delete", "resume"), 4: ("resume",),
                    5: ("event",), 6: ("timer",), 7: ("index",)}
#: Handlers the controller never calls: login runs in this server when it starts.
_LOCAL_KINDS = ("login",)


_PB = None


def _pb():
    global _PB
    if _PB is None:
        from .v1 import handler_pb2  # generated at build time

        _PB = handler_pb2
    return _PB


def _grpc():
    from .v1 import handler_pb2_grpc

    return handler_pb2_grpc


class _NoSuchHandler(Exception):
    """The controller asked for a handler this server does not have: gRPC's NOT_FOUND, as the
    Rust SDK answers."""


def _fail(pb, answer, exc: BaseException) -> None:
    """Sets what a handler's exception means on its answer (a HandleResponse, DaemonExit or
    ActivityResponse: each has outcome, message and delay_seconds)."""
    if isinstance(exc, TemporaryError):
        answer.outcome = pb.OUTCOME_TEMPORARY_ERROR
        answer.message = str(exc)
        if exc.delay is not None:
            answer.delay_seconds = float(exc.delay)
    elif isinstance(exc, PermanentError):
        answer.outcome = pb.OUTCOME_PERMANENT_ERROR
        answer.message = str(exc)
    elif isinstance(exc, _Unusable):
        answer.outcome = pb.OUTCOME_UNEXPECTED_ERROR
        answer.message = str(exc)
    else:
        answer.outcome = pb.OUTCOME_UNEXPECTED_ERROR
        answer.message = _traceback(exc)


def _traceback(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip()


class Servicer:
    """`bosun.v1.HandlerServer` for a registry of Python handlers."""

    def __init__(self, registry: Registry, server_name: str = "", on_describe=None, memo: Any = None):
        self.registry = registry
        self.on_describe = on_describe
        self.server_name = server_name or f"python:{os.getpid()}@{socket.gethostname()}"
        self.memos: Dict[str, Any] = {}
        #: Running daemons by (handler key, object uid): how to stop each.
        self.daemons: Dict[Tuple[str, str], Any] = {}
        #: The operator's memo (Kopf's `memo=` of `kopf.operator()`, filled by startup
        #: handlers): each object's memo starts as a shallow copy of it, as in Kopf.
        self.operator_memo = memo if memo is not None else _kwargs.Memo()
        self.indices: Dict[str, _index.Index] = {h.id: _index.Index() for h in registry.handlers if h.kind == "index"}
        # Whether a controller described this server since it started: until then, a server
        # with indices has empty ones (it restarted and the controller has not noticed yet),
        # so it answers other calls UNAVAILABLE: the controller then waits for it, describes
        # it again and fills the indices first.
        self.described = False
        #: The open HandleStreams (each's wake-up), and whether the server is stopping: they
        #: then end once their calls are answered, instead of holding the stop's grace.
        self.streams: set = set()
        self.stopping = False

    def stop_streams(self) -> None:
        """The server stops: open HandleStreams answer new calls UNAVAILABLE (the controller
        retries them once a server is back) and end once their running calls are answered."""
        self.stopping = True
        for wake in list(self.streams):
            wake.set()

    # ---- Describe ------------------------------------------------------------------------

    async def Describe(self, request, context):
        pb = _pb()
        if self.on_describe is not None:
            self.on_describe()
        self.described = True
        # Settings held now (`operator(settings=…)`, a test's `KopfRunner(settings=…)`).
        settings = _settings_contract.to_contract(pb, _settings.changes(_settings.current()))
        return pb.DescribeResponse(handlers=[handler_spec(pb, h) for h in self.registry.handlers if h.kind not in _LOCAL_KINDS],
                                   server_name=self.server_name, resources=self.registry.resource_settings(pb),
                                   finishes_parents=True, settings=settings, handle_stream=True)

    # ---- Handle --------------------------------------------------------------------------

    def _memo(self, uid: Optional[str]) -> Any:
        """The object's memo: kept between its calls, a shallow copy of the operator's memo
        at first."""
        import copy

        memo = self.memos.get(uid) if uid else None
        if memo is None:
            operator = self.operator_memo
            memo = _kwargs.Memo(operator) if type(operator) is _kwargs.Memo else copy.copy(operator)
            if uid:
                self.memos[uid] = memo
        return memo

    def _object_kwargs(self, request, body, collector: Collector, reason: str) -> Dict[str, Any]:
        kwargs = _kwargs.object_kwargs(body)
        kwargs.update(
            resource=_resource(request.resource),
            patch=_kwargs.Patch(body=body),
            logger=_context.object_logger(kwargs["namespace"], kwargs["name"], collector.send_log),
            memo=self._memo(kwargs["uid"]),
            reason=reason,
            cause=reason,
            retry=getattr(request, "retry", 0),
        )
        return kwargs

    def _with_indices(self, kwargs: Dict[str, Any]) -> Dict[str, Any]:
        """Adds the indices, which override the framework's kwargs of the same name (Kopf)."""
        kwargs.update(self.indices)
        return kwargs

    async def Handle(self, request, context):
        with _tracing.call_span("Handle", request.handler_id, context):
            return await self._handle_call(request, context)

    # ---- HandleStream ----------------------------------------------------------------------

    async def HandleStream(self, request_iterator, context):
        """Handle calls on one stream (see `bosun._streaming`)."""
        async for batch in _streaming.serve(self, request_iterator, context):
            yield batch

    async def _handle_call(self, request, context, invoke=_kwargs.invoke):
        """One Handle call. `invoke` calls the handler's function (the stream's worker threads
        call sync handlers directly: then nothing here suspends)."""
        pb = _pb()
        if self.indices and not self.described and request.reason != pb.REASON_INDEX:
            await context.abort(grpc.StatusCode.UNAVAILABLE,
                                "this handler server has just started and its indices are empty: it waits to be described")
        response = pb.HandleResponse()
        collector = Collector()
        body = {}
        try:
            body = _json(request.object, {}) or {}
            meta = body.get("metadata") or {}
            collector.prefix = f"[{meta.get('namespace') or ''}/{meta.get('name') or ''}] " if meta.get("namespace") else f"[{meta.get('name') or ''}] "
            reason = _REASONS.get(request.reason, "")
            kwargs = self._object_kwargs(request, body, collector, reason)
            kwargs.update(
                old=_json(request.old), new=_json(request.new), diff=_diff(request.diff),
                started=_kwargs.timestamp(request.started) if request.HasField("started") else None,
                runtime=_kwargs.duration(request.runtime) if request.HasField("runtime") else datetime.timedelta(0),
                param=_json(request.param),
            )
            if request.reason == 5:  # EVENT
                kwargs["type"] = request.event_type or None
                kwargs["event"] = {"type": request.event_type or None, "object": body}
            await self._handle(request, self._with_indices(kwargs), body, collector, response, invoke)
        except _NoSuchHandler as e:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(e))
        except _Unusable as e:
            response.Clear()
            response.outcome = pb.OUTCOME_UNEXPECTED_ERROR
            response.message = str(e)
        except Exception as e:  # a defect of the SDK or an unparseable request: still an answer
            response.Clear()
            response.outcome = pb.OUTCOME_UNEXPECTED_ERROR
            response.message = f"the handler server could not run {request.handler_id!r}: {_traceback(e)}"
        collector.fill(pb, response)
        return response

    def top_handler(self, request) -> Optional[Handler]:
        """The registered handler a top-level call names (None for a sub-handler's call)."""
        if request.parent_id:
            return None
        return self.registry.find(request.handler_key, request.handler_id, _KINDS_OF_REASON.get(request.reason, ()))

    async def _handle(self, request, kwargs, body, collector: Collector, response, invoke=_kwargs.invoke) -> None:
        pb = _pb()
        handler_id = request.handler_id
        if request.parent_id:
            routed = self.registry.route(request.handler_key, request.parent_id)
            if routed is None:
                raise LookupError(f"no handler {request.parent_id!r} for the sub-handler {handler_id!r}")
            top, chain = routed
            chain = chain + [request.subhandler_id]
        else:
            top, chain = self.top_handler(request), []
            if top is None:
                known = ", ".join(h.id for h in self.registry.handlers)
                raise _NoSuchHandler(f"handler server {json.dumps(self.server_name)} has no handler {json.dumps(handler_id)}; it has: {known}")
        if not chain:
            kwargs["param"] = top.param if top.param is not None else kwargs.get("param")
            if top.kind == "index":
                await self._index(top, request, kwargs, body, collector, response)
                return
            skipped = self._check_local(top, kwargs, body)
            if skipped is not None:
                response.outcome = pb.OUTCOME_SKIPPED
                response.message = skipped
                return

        fn = top.fn
        for depth, child_id in enumerate(chain):
            declared = await self._rebuild(fn, kwargs, body)
            decl = declared.get(child_id)
            if decl is None:
                response.outcome = pb.OUTCOME_PERMANENT_ERROR
                parent = "/".join([top.id] + chain[:depth])
                response.message = (f"the handler {parent!r} no longer declares the sub-handler {child_id!r} "
                                    f"(it declares: {', '.join(declared) or 'none'})")
                return
            fn = decl.fn
            if decl.param is not None:
                kwargs["param"] = decl.param

        with _context.calling(body, collector.emit, kwargs=kwargs, finished=request.finished_subhandlers) as call:
            try:
                result = await invoke(fn, kwargs)
                # Kopf's implicit `execute()` when the handler returns: its sub-handlers first.
                waiting = not set(call.subhandlers) <= call.finished
            except SubhandlersDeclared:
                result, waiting = None, True
            except Exception as e:
                _fail(pb, response, e)
                if response.outcome == pb.OUTCOME_UNEXPECTED_ERROR and top.backoff is None and default_backoff() is not None:
                    response.delay_seconds = default_backoff()  # the operator's, changed since it was described
                self._patch(response, kwargs)  # a failed attempt's patch is applied too
                return
        response.outcome = pb.OUTCOME_SUCCESS
        if result is not None and not waiting:  # a parent's result counts once its sub-handlers are done
            response.result = _dumps(result, "return value")
        self._patch(response, kwargs)
        for decl in call.subhandlers.values():
            sub = pb.SubHandler(id=decl.id, options=options_spec(pb, **decl.options))
            if decl.param is not None:
                try:
                    sub.param = json.dumps(decl.param).encode()
                except (TypeError, ValueError):
                    pass  # a Python-only parameter: the child gets it when its parent is re-entered
            response.subhandlers.append(sub)

    async def _index(self, handler: Handler, request, kwargs, body, collector: Collector, response) -> None:
        """One event of an object for an index handler: drop it, or call the handler and keep
        what it returns (Kopf's rules for failures)."""
        pb = _pb()
        index, obj = self.indices[handler.id], _index.object_key(body)
        response.outcome = pb.OUTCOME_SUCCESS
        if request.event_type == "DELETED":
            index.forget(obj)
            return
        if index.excluded(obj):
            response.outcome = pb.OUTCOME_SKIPPED
            return
        skipped = self._check_local(handler, kwargs, body)
        if skipped is not None:  # it stopped matching
            index.forget(obj)
            response.outcome = pb.OUTCOME_SKIPPED
            response.message = skipped
            return
        with _context.calling(body, collector.emit):
            try:
                result = await _kwargs.invoke(handler.fn, kwargs)
            except Exception as e:
                index.failed(obj, e, errors=handler.errors, backoff=handler.backoff, retries=handler.retries,
                             timeout=handler.timeout)
                _fail(pb, response, e)
                return
        index.replace(obj, result)

    @staticmethod
    def _patch(response, kwargs) -> None:
        patch = _kwargs.prune(kwargs.get("patch") or {})
        if patch:
            response.merge_patch = _dumps(patch, "patch")

    async def _rebuild(self, fn, kwargs, body) -> Dict[str, _context.SubhandlerDecl]:
        """Re-enters a parent with a throwaway answer to get its sub-handlers' closures."""
        scratch = dict(kwargs, patch=_kwargs.Patch(body=body), logger=_context.object_logger(None, None, lambda *_: None))
        with _context.calling(body, lambda *_: None, kwargs=scratch, rebuilding=True) as call:
            try:
                await _kwargs.invoke(fn, scratch)
            except SubhandlersDeclared:
                pass
        return call.subhandlers

    @staticmethod
    def _check_local(handler: Handler, kwargs, body) -> Optional[str]:
        """Evaluates the filters only Python can (callables, which get the value positionally,
        as in Kopf); a reason to skip, or None."""
        for name, check in handler.local_checks:
            if name == "when":
                holds = bool(_kwargs.call_sync(check, kwargs))
            else:
                if name.startswith("labels.") or name.startswith("annotations."):
                    section, key = name.split(".", 1)
                    meta = kwargs.get(section) or {}
                    value = meta[key] if key in meta else _matching.MISSING
                elif name == "value":
                    value = _matching.value_at(body, handler.field)
                else:  # old, new
                    value = kwargs.get(name)
                holds = _matching.call_filter(check, value, kwargs)
            if not holds:
                return f"the {name} filter does not hold"
        return None

    # ---- Daemon --------------------------------------------------------------------------

    async def Daemon(self, request, context):
        pb = _pb()
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()

        def put(msg) -> None:
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is loop:
                queue.put_nowait(msg)
            else:
                loop.call_soon_threadsafe(queue.put_nowait, msg)

        def emit(what: str, item: Any) -> None:
            if what == "log":
                put(pb.DaemonMessage(log=pb.LogLine(level=item[0], message=item[1])))
            elif what == "event":
                put(pb.DaemonMessage(event=_event(pb, item)))

        handler = self.registry.find(request.handler_key, request.handler_id, ("daemon",))
        if handler is None:
            yield pb.DaemonMessage(exit=pb.DaemonExit(outcome=pb.OUTCOME_PERMANENT_ERROR,
                                                      message=f"this handler server has no daemon {request.handler_id!r}"))
            return
        body = _json(request.object, {}) or {}
        stopped = _kwargs.DaemonStopped(loop)
        kwargs = _kwargs.object_kwargs(body)
        kwargs.update(resource=_resource(request.resource), patch=_kwargs.Patch(body=body), memo=self._memo(kwargs["uid"]),
                      logger=_context.object_logger(kwargs["namespace"], kwargs["name"],
                                                    lambda level, message: emit("log", (level, message))),
                      retry=request.retry, stopped=stopped, param=handler.param, reason="daemon",
                      started=datetime.datetime.utcnow(), runtime=datetime.timedelta(0))
        self._with_indices(kwargs)
        skipped = self._check_local(handler, kwargs, body)
        if skipped is not None:
            yield pb.DaemonMessage(exit=pb.DaemonExit(outcome=pb.OUTCOME_SKIPPED, message=skipped))
            return

        # The exit is the daemon's real end: sent only once its function has returned (a sync
        # daemon's thread included), with `stopped` when it was asked to stop before; the
        # controller holds the object (its finalizer, a handover) until it comes.
        exited = []

        def send_exit(exit_) -> None:
            if not exited:
                exited.append(exit_)
                exit_.stopped = stopped.is_set()
                put(pb.DaemonMessage(exit=exit_))

        async def run() -> None:
            exit_ = pb.DaemonExit(outcome=pb.OUTCOME_SUCCESS)
            # The daemon's own task runs in the span of the call (`Daemon watch_fn`), a child of
            # the controller's `daemon` span: attached and detached in this task alone.
            with _tracing.call_span("Daemon", request.handler_id, context), _context.calling(body, emit):
                try:
                    await _kwargs.invoke(handler.fn, kwargs)
                except asyncio.CancelledError:
                    exit_.message = "cancelled"
                except Exception as e:
                    _fail(pb, exit_, e)
            patch = _kwargs.prune(kwargs["patch"])
            if patch:
                try:
                    put(pb.DaemonMessage(merge_patch=json.dumps(patch).encode()))
                except (TypeError, ValueError) as e:
                    log.warning("Daemon %r: its patch is not JSON-serialisable: %s", handler.id, e)
            send_exit(exit_)

        task = asyncio.ensure_future(run())
        # A task cancelled before it ever ran never reaches its own exit: it ended all the same.
        task.add_done_callback(lambda _: send_exit(pb.DaemonExit(outcome=pb.OUTCOME_SUCCESS, message="cancelled")))

        def stop() -> None:
            """The daemon's stop, as Kopf's: a sync daemon sees the flag; an async one is also
            cancelled after its cancellation backoff."""
            if stopped.is_set():
                return
            stopped.set()
            if _kwargs.is_async(handler.fn):
                backoff = float(handler.cancellation_backoff or 0)
                if backoff > 0:
                    loop.call_later(backoff, task.cancel)
                else:
                    task.cancel()

        running = (handler.key or handler.id, kwargs["uid"] or "")
        self.daemons[running] = stop
        try:
            while True:
                msg = await queue.get()
                yield msg
                if msg.HasField("exit"):
                    return
        except asyncio.CancelledError:
            stop()  # the controller cancelled the stream: that too is the daemon's stop
            raise
        finally:
            if self.daemons.get(running) is stop:
                del self.daemons[running]

    async def StopDaemon(self, request, context):
        """Stops a running daemon while its stream stays open, so the controller sees its end."""
        stop = self.daemons.get((request.handler_key or request.handler_id, request.uid))
        if stop is not None:
            stop()
        return _pb().StopDaemonResponse(stopping=stop is not None)

    # ---- Activity ------------------------------------------------------------------------

    async def Activity(self, request, context):
        with _tracing.call_span("Activity", request.handler_id, context):
            return await self._activity(request)

    async def _activity(self, request):
        pb = _pb()
        response = pb.ActivityResponse()
        collector = Collector()
        handler = self.registry.find(request.handler_key, request.handler_id, ("startup", "cleanup", "probe"))
        if handler is None:
            response.outcome = pb.OUTCOME_PERMANENT_ERROR
            response.message = f"this handler server has no activity {request.handler_id!r}"
            return response
        settings = _settings.current()
        kwargs = self._with_indices(dict(logger=_context.object_logger(None, None, collector.send_log), retry=request.retry,
                                         memo=self.operator_memo, param=handler.param, activity=handler.kind,
                                         settings=settings))
        with _context.calling({}, collector.emit):
            try:
                result = await _kwargs.invoke(handler.fn, kwargs)
                response.outcome = pb.OUTCOME_SUCCESS
                if result is not None:
                    response.result = _dumps(result, "return value")
                if handler.kind == "startup":  # what startup handlers set reaches the controller
                    response.settings.CopyFrom(_settings_contract.to_contract(pb, _settings.changes(settings)))
            except Exception as e:
                _fail(pb, response, e)
        collector.fill(pb, response)
        return response

    # ---- Admit ---------------------------------------------------------------------------

    async def Admit(self, request, context):
        pb = _pb()
        response = pb.AdmitResponse(allowed=True)
        handler = self.registry.find(request.handler_key, request.handler_id, ("validate", "mutate"))
        if handler is None:
            return pb.AdmitResponse(allowed=False, code=500,
                                    message=f"this handler server has no admission handler {request.handler_id!r}")
        review = _json(request.request, {}) or {}
        body = review.get("object") or review.get("oldObject") or {}
        warnings: List[str] = []
        collector = Collector()
        kwargs = _kwargs.object_kwargs(body)
        kwargs.update(
            patch=_kwargs.Patch(body=body), warnings=warnings, old=review.get("oldObject"), new=review.get("object"),
            operation=review.get("operation"), dryrun=bool(review.get("dryRun")), uid=review.get("uid"),
            userinfo=review.get("userInfo") or {}, subresource=review.get("subResource"),
            resource=_resources.review_resource(review.get("resource") or {}), headers=_reviews.RequestHeaders(request.headers), sslpeer={},
            logger=_context.object_logger(kwargs["namespace"], kwargs["name"], collector.send_log),
            memo=self._memo((body.get("metadata") or {}).get("uid")), param=handler.param, reason="admission",
        )
        with _context.calling(body, collector.emit):
            try:
                skipped = self._check_local(handler, kwargs, body)
                if skipped is None:
                    await _kwargs.invoke(handler.fn, kwargs)
                    patch = _kwargs.prune(kwargs["patch"])
                    if patch and handler.kind == "mutate":
                        response.merge_patch = _dumps(patch, "patch")
            except AdmissionError as e:
                response = pb.AdmitResponse(allowed=False, message=str(e), code=int(e.code or 500))
            except Exception as e:
                response = pb.AdmitResponse(allowed=False, message=str(e) or type(e).__name__, code=500)
        response.warnings.extend(str(w) for w in warnings)
        return response


def listen_address(value: Optional[str] = None) -> str:
    """`BOSUN_LISTEN` as grpc wants it: `host:port`, `http://host:port` or `unix:///path`."""
    value = (value if value is not None else os.environ.get(LISTEN_ENV, "")).strip() or DEFAULT_LISTEN
    if value.startswith("http://"):
        value = value[len("http://"):]
    if value.startswith("unix:"):
        return value
    if value.startswith("https://") or ":" not in value:
        raise ValueError(f"invalid listen address {value!r}: expected `host:port`, `http://host:port` or `unix:///path`")
    return value


async def serve(registry: Optional[Registry] = None, listen: Optional[str] = None, *, ready: Optional[asyncio.Event] = None,
                stop: Optional[asyncio.Event] = None, server_name: str = "", on_describe=None, memo: Any = None) -> None:
    """Serves the handlers until SIGINT/SIGTERM (or `stop`): in-flight calls get a few
    seconds to finish. It logs the server's own clients in first (`@bosun.on.login`, or the
    default login of the `kubernetes` client); `memo` is the operator's memo, which each
    object's memo copies."""
    registry = registry if registry is not None else get_default_registry()
    if not registry.handlers:
        raise RuntimeError("no handlers are registered: decorate functions with @bosun.on.create(...) and the like")
    for handler in registry.handlers:
        if handler.kind not in _LOCAL_KINDS:
            handler_spec(_pb(), handler)  # raises here, at start, on a registration the contract cannot carry
    address = listen_address(listen)
    await _login.login(registry, _settings.current())
    tracing = _tracing.setup()
    server = grpc.aio.server()
    servicer = Servicer(registry, server_name, on_describe, memo)
    _grpc().add_HandlerServerServicer_to_server(servicer, server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    if server.add_insecure_port(address) == 0 and not address.startswith("unix:"):
        raise OSError(f"cannot listen on {address}")
    await server.start()
    await health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    await health_servicer.set("bosun.v1.HandlerServer", health_pb2.HealthCheckResponse.SERVING)
    log.info("Serving %d handler(s) on %s.", len(registry.handlers), address)
    if ready is not None:
        ready.set()
    stopping = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    installed = []
    if stop is None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stopping.set)
                installed.append(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass
    try:
        await stopping.wait()
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
        servicer.stop_streams()
        await server.stop(grace=5)
        if tracing is not None:
            tracing.shutdown()  # exports what is left


def serve_forever(registry: Optional[Registry] = None, listen: Optional[str] = None) -> None:
    """Serves the handlers (alone, without a controller) in a new event loop until
    SIGINT/SIGTERM."""
    asyncio.run(serve(registry, listen))
