"""Records Kopf's public API into `tests/data/kopf-<version>-api.json`, for `test_kopf_api.py`
to hold `bosun` against.

Run it with a Python where Kopf is installed, not the SDK's:

    python3 -m venv /tmp/kopfvenv
    /tmp/kopfvenv/bin/pip install kopf==1.45.2
    /tmp/kopfvenv/bin/python sdk-python/tests/record_kopf_api.py

What it records, per module (`kopf`, `kopf.on`, `kopf.testing`, `kopf.lifecycles`):
- the public names: `dir(kopf)` (not only `__all__`: `kopf.harmonize_naming` is public but not
  listed there); `__all__` where a module has one; otherwise the names the module itself
  defines (functions, classes, type aliases; not what it imports, nor plain values);
- for each function and decorator: its parameters (name, kind, whether it has a default) and
  whether it is a coroutine function;
- for each class: its constructor's parameters (when Kopf defines the constructor), whether it
  is a typing.Protocol; enums with their members; TypedDicts with their keys; type aliases
  (with a Literal's values); enum members exposed as names (`PRESENT`).
And `OperatorSettings()`: each section's fields (the dataclass fields and the properties) with
their defaults, storages and other objects as their class and attributes.
"""

from __future__ import annotations

import ast
import dataclasses
import datetime
import enum
import importlib
import inspect
import json
import pathlib
import platform
import sys
import typing

MODULES = ("kopf", "kopf.on", "kopf.testing", "kopf.lifecycles")


def _public_names(module) -> typing.List[str]:
    if module.__name__ == "kopf":
        return sorted(n for n in dir(module) if not n.startswith("_"))
    if hasattr(module, "__all__"):
        return sorted(module.__all__)
    tree = ast.parse(inspect.getsource(module))
    defined = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined.update(t.id for t in targets if isinstance(t, ast.Name))
    names = []
    for name in sorted(defined):
        value = getattr(module, name)
        if name.startswith("_") or inspect.ismodule(value):
            continue
        if callable(value) or isinstance(value, type) or typing.get_origin(value) is not None:
            names.append(name)
    return names


def _params(fn) -> typing.Optional[typing.List[dict]]:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    return [{"name": p.name, "kind": p.kind.name, "default": p.default is not inspect.Parameter.empty}
            for p in signature.parameters.values()]


def _own_constructor(cls: type) -> bool:
    """Whether Kopf itself defines the class's constructor (else its parameters are Python's)."""
    for klass in cls.__mro__:
        if "__init__" in vars(klass) or "__new__" in vars(klass):
            return klass.__module__.startswith("kopf")
    return False


def _plain(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, enum.Enum):
        return {"enum": type(value).__name__, "name": value.name}
    return repr(value)


def describe(value) -> dict:
    if inspect.ismodule(value):
        return {"kind": "module"}
    if isinstance(value, enum.Enum):
        return {"kind": "member", "enum": type(value).__name__, "name": value.name}
    if isinstance(value, type):
        if issubclass(value, enum.Enum):
            return {"kind": "enum", "str": issubclass(value, str), "members": {m.name: _plain(m.value) for m in value}}
        if typing.is_typeddict(value):
            return {"kind": "typeddict", "keys": sorted(value.__required_keys__ | value.__optional_keys__)}
        entry = {"kind": "class", "protocol": bool(getattr(value, "_is_protocol", False))}
        entry["params"] = _params(value) if _own_constructor(value) and not entry["protocol"] else None
        return entry
    if inspect.isfunction(value) or inspect.isbuiltin(value):
        return {"kind": "function", "async": inspect.iscoroutinefunction(value), "params": _params(value)}
    if typing.get_origin(value) is typing.Literal:
        return {"kind": "alias", "literal": [_plain(a) for a in typing.get_args(value)]}
    if typing.get_origin(value) is not None or isinstance(value, typing.NewType):
        return {"kind": "alias"}
    return {"kind": "value", "type": type(value).__name__}


def encode(value):
    """A default as JSON: scalars as they are, collections as lists, objects as their class
    and attributes (an executor as its class alone: its attributes are threads and locks)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple, set, frozenset)):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    if isinstance(value, enum.Enum):
        return {"enum": type(value).__name__, "name": value.name}
    import concurrent.futures

    if isinstance(value, concurrent.futures.Executor):
        return {"class": type(value).__name__}
    attributes = {k: encode(v) for k, v in sorted(vars(value).items()) if not k.startswith(f"_{type(value).__name__}__")}
    return {"class": type(value).__name__, "attributes": attributes}


def settings_defaults() -> dict:
    import kopf

    settings = kopf.OperatorSettings()
    sections = {}
    for field in dataclasses.fields(settings):
        section = getattr(settings, field.name)
        fields = {f.name: encode(getattr(section, f.name)) for f in dataclasses.fields(section)}
        properties = sorted(n for n, v in vars(type(section)).items() if isinstance(v, property))
        sections[field.name] = {"class": type(section).__name__, "fields": fields, "properties": properties}
    aliases = sorted(n for n, v in vars(type(settings)).items() if isinstance(v, property))
    return {"sections": sections, "aliases": aliases}


def record() -> dict:
    import kopf

    modules = {}
    for name in MODULES:
        module = importlib.import_module(name) if name != "kopf.lifecycles" else kopf.lifecycles
        modules[name] = {n: describe(getattr(module, n)) for n in _public_names(module)}
    return {
        "kopf_version": kopf.__version__,
        "python_version": platform.python_version(),
        "recorded": datetime.date.today().isoformat(),
        "modules": modules,
        "settings": settings_defaults(),
    }


def main() -> None:
    data = record()
    out = pathlib.Path(__file__).parent / "data" / f"kopf-{data['kopf_version']}-api.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    counts = {m: len(names) for m, names in data["modules"].items()}
    sys.stdout.write(f"recorded Kopf {data['kopf_version']} ({counts}) into {out}\n")


if __name__ == "__main__":
    main()
