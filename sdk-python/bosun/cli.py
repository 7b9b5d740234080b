"""Kopf's command line (`kopf.cli`), as a front of the `bosun` binary: `kopf run handlers.py
-A --verbose` is `bosun run handlers.py -A --verbose`, and `kopf freeze` / `kopf resume` are
Bosun's too. `main()` runs the binary with the given arguments (the command line's, by
default), handler files served by this Python, and returns its exit code;
`python -m bosun.cli run handlers.py` does the same from a shell."""

from __future__ import annotations

import subprocess
import sys
from typing import Optional, Sequence

from ._binary import bosun_binary


def main(args: Optional[Sequence[str]] = None) -> int:
    """Runs `bosun ARGS…` until it exits; its exit code."""
    args = list(sys.argv[1:] if args is None else args)
    if args and args[0] in ("run", "dev") and "--python" not in args:
        args[1:1] = ["--python", sys.executable]
    try:
        return subprocess.call([bosun_binary(), *args])
    except KeyboardInterrupt:  # the child got the Ctrl-C too and stops on its own
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
