"""`bosun.operator()`: the operator inside your own program, as Kopf's `kopf.operator()`
(Kopf's example 12). The handlers are served from this process and the `bosun` controller
runs as a child process talking to them over a Unix socket; both stop when `stop_flag` is
set (or the coroutine is cancelled)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
from typing import Any, Optional, Sequence, Union

from . import _settings
from ._binary import bosun_binary
from ._registry import Registry, get_default_registry
from ._server import serve

Flag = Union[threading.Event, asyncio.Event, None]

log = logging.getLogger("bosun")


def configure(debug: Optional[bool] = None, verbose: Optional[bool] = None, quiet: Optional[bool] = None,
              log_format: Any = None, log_prefix: Optional[bool] = False, log_refkey: Optional[str] = None) -> None:
    """Log formatting of the handler server's own lines (Kopf's `kopf.configure`). The
    controller formats the object lines itself (`bosun run --log-format`); `log_format`,
    `log_prefix` and `log_refkey` are accepted for Kopf's sake."""
    level = logging.DEBUG if (verbose or debug) else logging.WARNING if quiet else logging.INFO
    logging.basicConfig(level=level, format="%(levelname)s %(message)s")


async def _wait_flag(flag: Flag) -> None:
    if flag is None:
        await asyncio.Event().wait()
    elif isinstance(flag, asyncio.Event):
        await flag.wait()
    else:
        await asyncio.get_running_loop().run_in_executor(None, flag.wait)


def _set_flag(flag: Flag) -> None:
    if flag is not None:
        flag.set()


async def operator(*, lifecycle: Any = None, indexers: Any = None, registry: Optional[Registry] = None, settings: Any = None,
                   memories: Any = None, insights: Any = None, identity: Any = None, standalone: Optional[bool] = None,
                   priority: Optional[int] = None, peering_name: Optional[str] = None,
                   liveness_endpoint: Optional[str] = None, clusterwide: bool = False, namespaces: Sequence[str] = (),
                   namespace: Optional[str] = None, stop_flag: Flag = None, ready_flag: Flag = None, vault: Any = None,
                   memo: Any = None, _command: Any = None, args: Sequence[str] = ()) -> int:
    """Runs the operator until `stop_flag` is set (Kopf's `kopf.operator`): the handlers
    served from this process, the controller as a child (`bosun run`, with `args` added).
    `ready_flag` is set once the controller has asked for the handlers; `memo` is the
    operator's memo, which each object's memo copies. Kopf's internals (`lifecycle`,
    `indexers`, `memories`, `insights`, `vault`) are accepted and unused: the controller keeps
    that state. Returns the controller's exit code."""
    registry = registry if registry is not None else get_default_registry()
    if settings is not None:
        _settings.replace(settings)
    import tempfile  # here: a handler server alone never needs it (nor random, shutil)

    with tempfile.TemporaryDirectory(prefix="bosun-") as tmp:
        address = f"unix://{os.path.join(tmp, 'handlers.sock')}"
        served = asyncio.Event()
        stop_serving = asyncio.Event()
        described = asyncio.Event()
        server = asyncio.ensure_future(serve(registry, address, ready=served, stop=stop_serving, on_describe=described.set,
                                             memo=memo))
        await asyncio.wait([server, asyncio.ensure_future(served.wait())], return_when=asyncio.FIRST_COMPLETED)
        if server.done():
            server.result()  # raises what went wrong
        command = [bosun_binary(), "run", "--handler", address, *args]
        for pattern in [*namespaces, *([namespace] if namespace else [])]:
            command += ["-n", str(getattr(pattern, "pattern", pattern))]
        if clusterwide:
            command.append("-A")
        if standalone:
            command.append("--standalone")
        if priority is not None:
            command += ["--priority", str(priority)]
        if peering_name:
            command += ["--peering", peering_name]
        if liveness_endpoint:
            command += ["--liveness", liveness_endpoint]
        controller = await asyncio.create_subprocess_exec(*command, stdin=asyncio.subprocess.DEVNULL, stdout=sys.stdout,
                                                          stderr=sys.stderr)
        exited = asyncio.ensure_future(controller.wait())
        try:
            ready = asyncio.ensure_future(described.wait())
            await asyncio.wait([ready, exited], return_when=asyncio.FIRST_COMPLETED)
            if ready.done():
                _set_flag(ready_flag)
            else:
                ready.cancel()
            stopping = asyncio.ensure_future(_wait_flag(stop_flag))
            await asyncio.wait([stopping, exited], return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
        finally:
            if controller.returncode is None:
                controller.send_signal(signal.SIGINT)
                try:
                    await asyncio.wait_for(asyncio.shield(exited), 30)
                except asyncio.TimeoutError:
                    controller.kill()
                    await exited
            stop_serving.set()
            await server
        return controller.returncode or 0


def run(*, loop: Optional[asyncio.AbstractEventLoop] = None, registry: Optional[Registry] = None, **kwargs) -> int:
    """Runs `operator()` (which takes the same arguments) until SIGINT/SIGTERM, in `loop` or a
    new event loop (Kopf's `kopf.run`)."""

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        return await operator(stop_flag=stop, registry=registry, **kwargs)

    if loop is not None:
        return loop.run_until_complete(main())
    return asyncio.run(main())
