"""setup.py's BuildRust against the setuptools-rust installed here, without compiling Rust.

BuildRust overrides setuptools-rust's `build_rust.build_extension`, which is not a stable API:
1.12.1 dropped its `forced_target_triple` argument and 1.13.0 returns `(modules, out_dir)`.
CI's installs always set BOSUN_BINARY, so the cargo path's TypeError (since 1.12.1) was first
seen by a from-source install on a fresh machine (issue 46). These tests drive BuildRust through that version's
own `run_for_extension`, the caller whose arguments and unpacking of the result are the contract:
with BOSUN_BINARY the file becomes the `bosun` script, and without it the call reaches
setuptools-rust's `build_extension` with arguments its signature takes (bound and recorded there
instead of running cargo).
"""

from __future__ import annotations

import inspect
import pathlib
import runpy

import pytest
import setuptools_rust.build as setuptools_rust_build  # the test extra's: the build's bound

SETUP = pathlib.Path(__file__).resolve().parents[1] / "setup.py"


@pytest.fixture
def declared(monkeypatch):
    """What setup.py passes to setup(), from running it with setup() a recorder: importing it
    would build the package."""
    import setuptools

    kwargs = {}
    monkeypatch.setattr(setuptools, "setup", lambda **given: kwargs.update(given))
    monkeypatch.delenv("BOSUN_STUBS_ONLY", raising=False)
    monkeypatch.chdir(SETUP.parent)
    runpy.run_path(str(SETUP), run_name="bosun_setup")
    return kwargs


def command(declared, build_base: pathlib.Path):
    """setup.py's build_rust command, finalized over a distribution that builds into `build_base`."""
    from setuptools import Distribution

    dist = Distribution({"name": "bosun-operator", "version": declared["version"], "script_name": str(SETUP)})
    dist.rust_extensions = declared["rust_extensions"]
    dist.get_command_obj("build").build_base = str(build_base)
    cmd = declared["cmdclass"]["build_rust"](dist)
    cmd.ensure_finalized()
    (ext,) = declared["rust_extensions"]
    return cmd, ext


def test_bosun_binary_is_the_built_bosun_script(declared, tmp_path, monkeypatch):
    binary = tmp_path / "prebuilt-bosun"
    binary.write_text("#!/bin/sh\necho prebuilt bosun\n")
    binary.chmod(0o755)
    monkeypatch.setenv("BOSUN_BINARY", str(binary))
    cmd, ext = command(declared, tmp_path / "build")

    returned = []
    build_extension = cmd.build_extension

    def spy(*args, **kwargs):
        returned.append(build_extension(*args, **kwargs))
        return returned[-1]

    monkeypatch.setattr(cmd, "build_extension", spy)
    # setuptools-rust's own caller unpacks the result: a shape this version does not expect fails here.
    cmd.run_for_extension(ext)

    (result,) = returned
    modules = result[0] if isinstance(result, tuple) else result
    assert [tuple(module) for module in modules] == [("bosun", str(binary))]
    script = pathlib.Path(cmd.get_finalized_command("install_scripts").build_dir) / "bosun"
    assert script.read_bytes() == binary.read_bytes()


def test_bosun_binary_must_be_executable(declared, tmp_path, monkeypatch):
    binary = tmp_path / "not-executable"
    binary.write_text("")
    monkeypatch.setenv("BOSUN_BINARY", str(binary))
    cmd, ext = command(declared, tmp_path / "build")
    with pytest.raises(RuntimeError, match="is not an executable file"):
        cmd.run_for_extension(ext)


class Delegated(Exception):
    """Raised in place of setuptools-rust's cargo build, once its arguments are bound."""


def test_without_bosun_binary_cargo_builds_through_setuptools_rust(declared, tmp_path, monkeypatch):
    monkeypatch.delenv("BOSUN_BINARY", raising=False)
    original = setuptools_rust_build.build_rust.build_extension
    signature = inspect.signature(original)
    calls = []

    def recording(self, *args, **kwargs):
        try:
            calls.append(signature.bind(self, *args, **kwargs))
        except TypeError as error:
            raise AssertionError(
                f"BuildRust calls setuptools-rust's build_extension{signature} with {args!r} {kwargs!r}: {error}"
            ) from None
        raise Delegated

    monkeypatch.setattr(setuptools_rust_build.build_rust, "build_extension", recording)
    cmd, ext = command(declared, tmp_path / "build")
    with pytest.raises(Delegated):
        cmd.run_for_extension(ext)

    (bound,) = calls
    assert bound.arguments["self"] is cmd
    assert bound.arguments["ext"] is ext


def test_the_runtime_requirements_follow_the_generator_but_health_checking_only_its_minor(declared, monkeypatch):
    """grpcio-tools 1.85.4 was released without a grpcio-health-checking 1.85.4: a requirement
    of the generator's full version made `pip install ./sdk-python` fail on a fresh machine."""
    import importlib.metadata

    versions = {"grpcio-tools": "1.85.4", "protobuf": "6.33.5"}
    monkeypatch.setattr(importlib.metadata, "version", lambda name: versions[name])
    namespace = runpy.run_path(str(SETUP), run_name="bosun_setup")
    assert namespace["dependencies"]() == ["grpcio>=1.85.4", "grpcio-health-checking>=1.85", "protobuf>=6.33.5,<7"]
