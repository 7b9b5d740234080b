"""`bosun.testing.Runner`: Kopf's `KopfRunner` for Bosun. It runs the `bosun` binary (the
controller, and with `dev` the embedded dev cluster) with the given arguments in the
background of a test, with handler files served by this Python, and collects its output.

    with bosun.testing.Runner(['dev', '--apply', 'crd.yaml', 'example.py']) as runner:
        runner.wait_for("Handler 'create_fn' succeeded.")
    assert runner.exit_code == 0
    assert 'And here we are!' in runner.output
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import Dict, List, Optional, Sequence

from ._binary import bosun_binary


class Runner:
    """Runs `bosun ARGS…` until the `with` block ends, then stops it as Ctrl-C does.

    `output` (also `stdout`) is everything it printed, the handler server's lines included;
    `exit_code` its exit status; `exception` what went wrong running it (None when it ran
    and stopped; it is raised at exit unless `reraise=False`). `wait_for(text)` waits until
    the output has `text`. `kubeconfig` is the dev cluster's, once it printed it."""

    def __init__(self, args: Sequence[str], *, timeout: Optional[float] = 30, env: Optional[Dict[str, str]] = None,
                 cwd: Optional[str] = None, reraise: bool = True, binary: Optional[str] = None):
        self.args = list(args)
        self.timeout = timeout
        self.env = env
        self.cwd = cwd
        self.reraise = reraise
        self.binary = binary
        self.exit_code: Optional[int] = None
        self.exception: Optional[BaseException] = None
        self._lines: List[str] = []
        self._changed = threading.Condition()
        self._process: Optional[subprocess.Popen] = None
        self._reader: Optional[threading.Thread] = None

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

    def __enter__(self) -> "Runner":
        args = list(self.args)
        if args and args[0] in ("run", "dev") and "--python" not in args:
            args[1:1] = ["--python", sys.executable]  # handler files are served by this Python
        env = dict(os.environ if self.env is None else self.env)
        env["NO_COLOR"] = "1"
        try:
            self._process = subprocess.Popen([self.binary or bosun_binary(), *args], stdout=subprocess.PIPE,
                                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.cwd, env=env,
                                             text=True, bufsize=1)
        except BaseException as e:
            self.exception = e
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
        with self._changed:
            self._changed.notify_all()

    def wait_for(self, text: str, timeout: Optional[float] = None, count: int = 1) -> None:
        """Waits until `text` occurs `count` times in the output (default timeout: the
        runner's); fails with the output so far when it does not, or when bosun exited."""
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
        if self.exception is not None and self.reraise and exc_type is None:
            raise self.exception
        return False


KopfRunner = Runner  # for tests ported from Kopf
