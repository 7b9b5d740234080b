"""Operator settings handed to a handler server in another process: what a test gives
`KopfRunner(settings=...)` reaches the `python -m bosun` that the controller starts, through
the environment variable `BOSUN_SETTINGS` (JSON of the changed settings), and is applied to
that process's settings before the handlers are loaded."""

from __future__ import annotations

import importlib
import json
import os
from typing import Any, Dict

from . import _settings

ENV = "BOSUN_SETTINGS"


def _encode(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {"__dict__": [[_encode(k), _encode(v)] for k, v in value.items()]}
    if hasattr(value, "__dict__") and type(value).__module__.startswith("bosun."):
        return {"__class__": f"{type(value).__module__}:{type(value).__qualname__}",
                "attrs": {k: _encode(v) for k, v in vars(value).items()}}
    raise TypeError(f"{type(value).__name__} cannot be passed to another process")


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if isinstance(value, dict) and "__dict__" in value:
        return {_decode(k): _decode(v) for k, v in value["__dict__"]}
    if isinstance(value, dict) and "__class__" in value:
        module, _, name = value["__class__"].partition(":")
        if not module.startswith("bosun."):
            raise ValueError(f"not a settings class of Bosun's: {value['__class__']}")
        cls = getattr(importlib.import_module(module), name)
        obj = cls.__new__(cls)
        obj.__dict__.update({k: _decode(v) for k, v in value["attrs"].items()})
        return obj
    return value


def dumps(settings: Any) -> str:
    """The settings that differ from Kopf's defaults, as JSON; those that cannot cross to
    another process (an executor object) are left out."""
    out: Dict[str, Any] = {}
    for name, value in _settings.changes(settings).items():
        try:
            out[name] = _encode(value)
        except TypeError:
            continue
    return json.dumps(out)


def apply(text: str, settings: Any) -> None:
    """Sets each dumped setting on `settings`."""
    for name, value in json.loads(text).items():
        section, _, field = name.partition(".")
        setattr(getattr(settings, section), field, _decode(value))


def apply_environment() -> None:
    """Applies `$BOSUN_SETTINGS` to this process's settings, when it is set."""
    text = os.environ.get(ENV)
    if text:
        apply(text, _settings.current())
