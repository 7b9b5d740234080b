"""`bosun.testing.KopfRunner` (also `Runner`): Kopf's `KopfRunner` for Bosun. It runs the
`bosun` binary with the given arguments in the background of a test — Kopf's own
(`['run', '-A', '--verbose', 'example.py']`, against the cluster of `$KUBECONFIG`) or `dev`
ones (`['dev', '--apply', 'crd.yaml', 'example.py']`, on an embedded dev cluster) — with
handler files served by this Python, and collects what it prints.

    with bosun.testing.KopfRunner(['run', '-A', '--verbose', 'example.py']) as runner:
        runner.wait_for("Handler 'create_fn' succeeded.")
    assert runner.exit_code == 0 and runner.exception is None
    assert 'And here we are!' in runner.output

As in Kopf: `registry=` serves that registry's handlers from this process (a test's own
handlers), `settings=` gives the operator those settings (Kopf's `OperatorSettings`), and each
line the operator prints also goes to Python's `logging` (logger `bosun.runner`), so pytest's
`caplog` sees it. Unlike Kopf's, the operator runs in processes of its own, so a test cannot
mock what the handlers call."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Sequence

from ._binary import bosun_binary

log = logging.getLogger("bosun.runner")
log.setLevel(logging.DEBUG)  # its records reach the root's handlers (caplog) whatever the root's level



class KopfRunner:
    """Runs `bosun ARGS…` until the `with` block ends, then stops it as Ctrl-C does.

    `output` (also `stdout`) is everything it printed, the handler server's lines included;
    `exit_code` its exit status; `exception` what went wrong running it (None when it ran and
    stopped cleanly; raised at exit unless `reraise=False`). `wait_for(text)` waits until the
    output has `text`. `kubeconfig` is the dev cluster's, once it printed it. `timeout` bounds
    the stop (and `wait_for`, by default); `env`, `cwd` and `binary` set how bosun runs."""

    def __init__(self, args: Sequence[str] = (), *more_args: Any, reraise: bool = True, timeout: Optional[float] = None,
                 registry: Any = None, settings: Any = None, env: Optional[Dict[str, str]] = None, cwd: Optional[str] = None,
                 binary: Optional[str] = None, **_click: Any):
        self.args = list(args)
        self.timeout = timeout
        self.env = env
        self.cwd = cwd
        self.reraise = reraise
        self.binary = binary
        self.registry = registry
        self.settings = settings
        self.exit_code: Optional[int] = None
        self.exception: Optional[BaseException] = None
        self._lines: List[str] = []
        self._changed = threading.Condition()
        self._process: Optional[subprocess.Popen] = None
        self._reader: Optional[threading.Thread] = None
        self._served: Optional[_InProcess] = None

    # Kopf's names
    @property
    def output(self) -> str:
        with self._changed:
            return "".join(self._lines)

    stdout = output

    @property
    def kubeconfig(self) -> Optional[str]:
        for line in self.output.splitlines():
            if line.startswith("export KUBECONFIG="):
                return line[len("export KUBECONFIG="):]
        return None

    def _command(self) -> List[str]:
        args = list(self.args)
        if args and args[0] in ("run", "dev"):
            if "--python" not in args:
                args[1:1] = ["--python", sys.executable]  # handler files are served by this Python
            if self._served is not None:
                args[1:1] = ["--handler", self._served.address]
        return [self.binary or bosun_binary(), *args]

    def __enter__(self) -> "KopfRunner":
        env = dict(os.environ if self.env is None else self.env)
        env["NO_COLOR"] = "1"
        try:
            if self.settings is not None:  # for the handler server the controller starts
                from . import _settings_env

                env[_settings_env.ENV] = _settings_env.dumps(self.settings)
            if self.registry is not None:
                self._served = _InProcess(self.registry, self.settings)
                self._served.start()
            self._process = subprocess.Popen(self._command(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, cwd=self.cwd, env=env, text=True, bufsize=1)
        except BaseException as e:
            self.exception = e
            if self._served is not None:
                self._served.stop()
            raise
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            with self._changed:
                self._lines.append(line)
                self._changed.notify_all()
            log.info("%s", line.rstrip("\n"))
        with self._changed:
            self._changed.notify_all()

    def wait_for(self, text: str, timeout: Optional[float] = None, count: int = 1) -> None:
        """Waits until `text` occurs `count` times in the output (default timeout: the
        runner's, else 30 s); fails with the output so far when it does not, or when bosun
        exited."""
        limit = timeout if timeout is not None else (self.timeout or 30)
        deadline = time.monotonic() + limit
        with self._changed:
            while "".join(self._lines).count(text) < count:
                if self._process is not None and self._process.poll() is not None and not (self._reader and self._reader.is_alive()):
                    raise AssertionError(f"bosun exited ({self._process.returncode}) before printing {text!r}:\n{''.join(self._lines)}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{text!r} did not appear within {limit} s:\n{''.join(self._lines)}")
                self._changed.wait(min(left, 0.5))

    def __exit__(self, exc_type, exc, tb) -> bool:
        process = self._process
        if process is None:
            return False
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
        try:
            self.exit_code = process.wait(self.timeout)
        except subprocess.TimeoutExpired as e:
            process.kill()
            self.exit_code = process.wait()
            self.exception = TimeoutError(f"bosun did not stop within {self.timeout} s of SIGINT")
            self.exception.__cause__ = e
        if self._reader is not None:
            self._reader.join(10)
        if self._served is not None:
            self._served.stop()
        if self.exception is None and self.exit_code not in (0, None):
            self.exception = RuntimeError(f"bosun exited with {self.exit_code}:\n{self.output[-4000:]}")
        if self.exception is not None and self.reraise and exc_type is None:
            raise self.exception
        return False


Runner = KopfRunner


class _InProcess:
    """A registry served from this process (a thread with its own event loop) on a Unix
    socket, for `KopfRunner(registry=...)`."""

    def __init__(self, registry: Any, settings: Any):
        import tempfile

        self.registry = registry
        self.settings = settings
        self._dir = tempfile.TemporaryDirectory(prefix="bosun-runner-")
        self.address = f"unix://{os.path.join(self._dir.name, 'handlers.sock')}"
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: Optional[asyncio.Event] = None
        self._error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from ._server import serve

        asyncio.set_event_loop(self._loop)

        async def main() -> None:
            self._stop = asyncio.Event()
            ready = asyncio.Event()
            task = asyncio.ensure_future(serve(self.registry, self.address, ready=ready, stop=self._stop))
            waiter = asyncio.ensure_future(ready.wait())
            await asyncio.wait([task, waiter], return_when=asyncio.FIRST_COMPLETED)
            self._ready.set()
            await task

        try:
            self._loop.run_until_complete(main())
        except BaseException as e:  # reported by start()
            self._error = e
            self._ready.set()

    def start(self) -> None:
        if self.settings is not None:
            from . import _settings

            _settings.replace(self.settings)
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise self._error

    def stop(self) -> None:
        if self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)
        self._dir.cleanup()
