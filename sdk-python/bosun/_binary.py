"""Where the `bosun` controller binary is.

Nothing here is imported at module level that a handler server does not need: `shutil`
(with bz2 and lzma) is imported when the binary is looked for, which only the embedded
controller and the test runner do."""

from __future__ import annotations

import os
import pathlib
import sys


def bosun_binary() -> str:
    """`$BOSUN_BINARY`, the `bosun` that `pip install` put beside this Python, or the first
    on PATH."""
    explicit = os.environ.get("BOSUN_BINARY")
    if explicit:
        return explicit
    beside = pathlib.Path(sys.executable).parent / "bosun"
    if beside.is_file():
        return str(beside)
    import shutil

    found = shutil.which("bosun")
    if found:
        return found
    raise FileNotFoundError("no `bosun` binary: `pip install ./sdk-python` installs it, or set BOSUN_BINARY")
