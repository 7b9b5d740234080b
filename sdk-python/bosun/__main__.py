"""`python -m bosun FILE.py… [-m MODULE…]`: imports the handler files or modules (their
decorators register the handlers) and serves them where `BOSUN_LISTEN` says. This is what
`bosun dev FILE.py` and `bosun run FILE.py` start as the handler server."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.util
import logging
import os
import sys
from typing import List, Optional

from . import _settings_env
from ._login import LoginError
from ._registry import get_default_registry
from ._server import serve


def load(paths: List[str], modules: List[str]) -> None:
    """Imports handler files (as Kopf's loader does: the file's folder joins sys.path) and
    modules."""
    for index, path in enumerate(paths):
        path = os.path.abspath(path)
        if not os.path.isfile(path):
            raise SystemExit(f"bosun: no such handler file: {path}")
        folder = os.path.dirname(path)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        name = f"__bosun_handlers_{index}__"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise SystemExit(f"bosun: cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    for name in modules:
        importlib.import_module(name)


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bosun", description=__doc__)
    parser.add_argument("paths", nargs="*", help="Python files with handlers")
    parser.add_argument("-m", "--module", action="append", default=[], help="a module with handlers (repeatable)")
    parser.add_argument("--listen", default=None, help="host:port or unix:///path (default: $BOSUN_LISTEN)")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    # Handlers' print() lines reach the controller's log as they happen, not when a pipe's
    # buffer fills.
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(line_buffering=True)
        except (AttributeError, ValueError):
            pass
    # --verbose is for this server's and the handlers' lines, not for grpc's own debug chatter.
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    if args.verbose:
        logging.getLogger("bosun").setLevel(logging.DEBUG)
    if not args.paths and not args.module:
        parser.error("give a handler file or -m MODULE")
    _settings_env.apply_environment()  # KopfRunner(settings=...) of a test
    load(args.paths, args.module)
    try:
        asyncio.run(serve(get_default_registry(), args.listen))
    except (RuntimeError, ValueError, OSError, LoginError) as e:
        raise SystemExit(f"bosun: {e}") from None


if __name__ == "__main__":
    main()
