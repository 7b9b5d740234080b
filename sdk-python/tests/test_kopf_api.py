"""API parity with Kopf: every public name of Kopf 1.45.2 (recorded in
`data/kopf-1.45.2-api.json` by `record_kopf_api.py`) exists in `bosun` where Kopf has it, and
takes what Kopf's takes: each function and class accepts each of Kopf's parameters with a
compatible kind, enums have Kopf's members, TypedDicts Kopf's keys, type aliases work as type
hints, and `OperatorSettings()` has Kopf's sections, fields and defaults."""

import dataclasses
import enum
import importlib
import inspect
import json
import pathlib
import sys
import typing

import pytest

import bosun
from record_kopf_api import encode

API = json.loads((pathlib.Path(__file__).parent / "data" / "kopf-1.45.2-api.json").read_text())
OURS = {"kopf": "bosun", "kopf.on": "bosun.on", "kopf.testing": "bosun.testing", "kopf.lifecycles": "bosun.lifecycles"}
P = inspect.Parameter
POSITIONAL = (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)

NAMES = [pytest.param(module, name, entry, id=f"{module}.{name}")
         for module, names in sorted(API["modules"].items()) for name, entry in sorted(names.items())]


def ours(module: str, name: str):
    our_module = importlib.import_module(OURS[module])
    assert hasattr(our_module, name), f"{OURS[module]}.{name} is missing (Kopf has {module}.{name})"
    return getattr(our_module, name)


def incompatibilities(kopf_params, fn) -> typing.List[str]:
    """Why a call that Kopf's signature allows would fail on `fn`'s (empty: none)."""
    params = [p for p in inspect.signature(fn).parameters.values()]
    positional = [p for p in params if p.kind in POSITIONAL]
    by_name = {p.name: p for p in params if p.kind in (P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY)}
    var_positional = any(p.kind is P.VAR_POSITIONAL for p in params)
    var_keyword = any(p.kind is P.VAR_KEYWORD for p in params)
    problems, matched = [], set()
    index = 0
    for kp in kopf_params:
        name, kind = kp["name"], getattr(P, kp["kind"])
        ours_param = None
        if kind in POSITIONAL:
            at = positional[index] if index < len(positional) else None
            index += 1
            by_position_only = kind is P.POSITIONAL_ONLY or name.startswith("_")
            if by_position_only:
                ours_param = at
                ok = at is not None or var_positional
            else:
                ours_param = at if at is not None and at.name == name else None
                ok = ours_param is not None or (var_positional and var_keyword and name not in by_name)
            if not ok:
                problems.append(f"{name!r} (positional #{index}) is not accepted there")
        elif kind is P.KEYWORD_ONLY:
            ours_param = by_name.get(name)
            if ours_param is None and not var_keyword:
                problems.append(f"keyword {name!r} is not accepted")
        elif kind is P.VAR_POSITIONAL and not var_positional:
            problems.append(f"*{name} is not accepted")
        elif kind is P.VAR_KEYWORD and not var_keyword:
            problems.append(f"**{name} is not accepted")
        if ours_param is not None:
            matched.add(ours_param.name)
            if kp["default"] and ours_param.default is P.empty:
                problems.append(f"{name!r} is optional in Kopf, required here")
    for p in params:
        if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY) and p.default is P.empty \
                and p.name not in matched:
            problems.append(f"{p.name!r} is required here, unknown to Kopf")
    return problems


def usable_as_hint(value) -> None:
    typing.Optional[value]
    if sys.version_info >= (3, 10) and not isinstance(value, str):
        value | None  # users' `kopf.Body | None`


@pytest.mark.parametrize("module, name, entry", NAMES)
def test_kopfs_name_exists_and_takes_what_kopfs_takes(module, name, entry):
    value = ours(module, name)
    kind = entry["kind"]
    if kind == "module":
        assert inspect.ismodule(value)
    elif kind == "function":
        assert callable(value) and not isinstance(value, type)
        assert inspect.iscoroutinefunction(value) == entry["async"], "async as in Kopf"
        assert incompatibilities(entry["params"], value) == []
    elif kind == "class":
        assert isinstance(value, type), "a class, so that isinstance() and subclassing work"
        usable_as_hint(value)
        if entry["params"] is not None:
            assert incompatibilities(entry["params"], value) == []
    elif kind == "enum":
        assert isinstance(value, type) and issubclass(value, enum.Enum)
        assert sorted(m.name for m in value) == sorted(entry["members"])
        assert issubclass(value, str) == entry["str"], "equal to strings as in Kopf"
        for member, kopf_value in entry["members"].items():
            if isinstance(kopf_value, str):
                assert value[member].value == kopf_value
    elif kind == "typeddict":
        assert isinstance(value, type) and issubclass(value, dict)
        assert sorted(value.__required_keys__ | value.__optional_keys__) == entry["keys"]
    elif kind == "alias":
        usable_as_hint(value)
        if "literal" in entry:
            assert list(typing.get_args(value)) == entry["literal"]
    elif kind == "member":
        assert isinstance(value, enum.Enum) and type(value).__name__ == entry["enum"] and value.name == entry["name"]
    else:
        pytest.fail(f"unknown kind {kind!r} in the recording")


SECTIONS = [pytest.param(name, section, id=name) for name, section in sorted(API["settings"]["sections"].items())]


@pytest.mark.parametrize("name, section", SECTIONS)
def test_settings_have_kopfs_fields_and_defaults(name, section):
    settings = bosun.OperatorSettings()
    ours_section = getattr(settings, name)
    assert type(ours_section).__name__ == section["class"]
    fields = {f.name: encode(getattr(ours_section, f.name)) for f in dataclasses.fields(ours_section)}
    assert fields == section["fields"]
    for prop in section["properties"]:
        assert isinstance(getattr(type(ours_section), prop, None), property), f"settings.{name}.{prop}"


def test_settings_have_kopfs_aliases():
    for alias in API["settings"]["aliases"]:
        assert isinstance(getattr(bosun.OperatorSettings, alias, None), property)


def test_the_recording_is_of_kopf_1_45_2():
    assert API["kopf_version"] == "1.45.2" and len(API["modules"]["kopf"]) == 110
    assert {"python_version", "recorded"} <= set(API)


@pytest.mark.parametrize("kopf_params, fn, expected", [
    ([{"name": "a", "kind": "POSITIONAL_OR_KEYWORD", "default": False}], lambda a: 0, []),
    ([{"name": "a", "kind": "POSITIONAL_OR_KEYWORD", "default": False}], lambda b: 0,
     ["'a' (positional #1) is not accepted there", "'b' is required here, unknown to Kopf"]),
    ([{"name": "a", "kind": "POSITIONAL_OR_KEYWORD", "default": True}], lambda a: 0, ["'a' is optional in Kopf, required here"]),
    ([{"name": "a", "kind": "KEYWORD_ONLY", "default": True}], lambda **kw: 0, []),
    ([{"name": "a", "kind": "KEYWORD_ONLY", "default": True}], lambda *, b=1: 0, ["keyword 'a' is not accepted"]),
    ([{"name": "arg1", "kind": "POSITIONAL_ONLY", "default": True}], lambda __x=None: 0, []),
    ([{"name": "_C__x", "kind": "POSITIONAL_OR_KEYWORD", "default": False}], lambda message: 0, []),
    ([{"name": "d", "kind": "POSITIONAL_OR_KEYWORD", "default": True},
      {"name": "v", "kind": "POSITIONAL_OR_KEYWORD", "default": True}], lambda v=0, d=0: 0,
     ["'d' (positional #1) is not accepted there", "'v' (positional #2) is not accepted there"]),
    ([{"name": "args", "kind": "VAR_POSITIONAL", "default": False}], lambda a=1: 0, ["*args is not accepted"]),
])
def test_the_compatibility_check_itself(kopf_params, fn, expected):
    assert incompatibilities(kopf_params, fn) == expected
