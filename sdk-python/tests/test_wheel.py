"""The release wheel (`sdk-python/build-wheel`, into dist/) on a machine without Rust: the
README's wheel commands, run as written in a fresh venv whose PATH holds no cargo and no rustc,
go from the wheel to Kopf's example 01 handled on the embedded dev cluster within a minute, and
the binary, the SDK and the workspace report one version.

CI builds the wheel before the tests (`.ci/run`); elsewhere, without a wheel in dist/, these
tests are skipped (under CI=true they fail)."""

from __future__ import annotations

import os
import pathlib
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
# A fresh machine's minute: from an empty folder to `Handler 'welcome' succeeded.`
BUDGET = 60.0


def under_ci() -> bool:
    return os.environ.get("CI", "") not in ("", "0", "false")


def require(what: str, present: bool) -> None:
    """As tests/src/tools.rs: a missing tool fails under CI and skips elsewhere."""
    if present:
        return
    if under_ci():
        pytest.fail(f"{what} is missing; under CI that fails the test: .ci/run must provide it")
    pytest.skip(f"{what} is missing (under CI=true this fails)")


def workspace_version() -> str:
    text = (ROOT / "Cargo.toml").read_text()
    return re.search(r'^\[workspace\.package\][^\[]*?^version\s*=\s*"([^"]+)"', text, re.S | re.M).group(1)


@pytest.fixture(scope="module")
def wheel() -> pathlib.Path:
    wheels = sorted((ROOT / "dist").glob("bosun_operator-*.whl"))
    require("the release wheel in dist/ (sdk-python/build-wheel)", len(wheels) == 1)
    return wheels[0]


def readme_wheel_commands() -> list[str]:
    """The README's first Python block: build-wheel, the venv with the wheel, `bosun dev`."""
    text = README.read_text()
    section = text[text.index("**Python, for Kopf users**"):]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    return [line.split("  #")[0].strip() for line in block.strip().splitlines()]


@pytest.fixture
def rustless(tmp_path) -> dict:
    """An environment whose PATH has a `python3` (this interpreter's base) and nothing else:
    no cargo, no rustc, no bosun, no pip but the venv's."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    base = pathlib.Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    (bin_dir / "python3").symlink_to(base)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CARGO", "RUSTUP", "RUSTC", "BOSUN_", "VIRTUAL_ENV", "PYTHON"))}
    env["PATH"] = str(bin_dir)
    for tool in ("cargo", "rustc", "rustup", "bosun", "pip"):
        assert shutil.which(tool, path=env["PATH"]) is None, f"{tool} is on the test's PATH"
    return env


def test_the_wheel_is_tagged_for_any_linux_of_its_architecture_and_holds_the_static_controller(wheel):
    name = wheel.name
    version = workspace_version()
    arch = os.uname().machine
    assert name == (f"bosun_operator-{version}-py3-none-manylinux2014_{arch}."
                    f"manylinux_2_17_{arch}.musllinux_1_1_{arch}.whl"), name
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        scripts = [n for n in names if n.endswith(".data/scripts/bosun")]
        assert len(scripts) == 1, names
        binary = archive.read(scripts[0])
        wheel_meta = archive.read(f"bosun_operator-{version}.dist-info/WHEEL").decode()
    assert binary[:4] == b"\x7fELF"
    assert b"/ld-linux" not in binary[:4096] and b"/ld-musl" not in binary[:4096], "no ELF interpreter: static"
    assert "Root-Is-Purelib: false" in wheel_meta
    assert "bosun/v1/handler_pb2.py" in names and "bosun/v1/handler_pb2_grpc.py" in names, "the stubs"


def test_the_readme_wheel_commands_handle_example_01_within_a_minute_without_rust(wheel, rustless, tmp_path):
    commands = readme_wheel_commands()
    assert len(commands) == 3 and commands[0] == "sdk-python/build-wheel", commands
    install, dev = commands[1], commands[2]
    assert "pip install dist/bosun_operator-*.whl" in install and dev.startswith(".venv/bin/bosun dev "), commands

    # A folder of the user's with the repository's dist/ and examples/ in it.
    work = tmp_path / "work"
    work.mkdir()
    (work / "dist").symlink_to(wheel.parent)
    (work / "examples").symlink_to(ROOT / "examples")

    started = time.monotonic()
    done = subprocess.run(["/bin/bash", "-c", install], cwd=work, env=rustless, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = run_until(["/bin/bash", "-c", f"exec {dev}"], work, rustless, "Handler 'welcome' succeeded.",
                      started + BUDGET)
    took = time.monotonic() - started
    assert took < BUDGET, f"{took:.1f} s from the wheel to the handled object"
    assert any("[default/kopf-example-1] Handler 'welcome' succeeded." in line for line in lines), lines

    # One version: the binary's, the SDK's and the workspace's.
    venv = work / ".venv" / "bin"
    assert not (venv / "cargo").exists()
    binary = subprocess.run([venv / "bosun", "--version"], env=rustless, capture_output=True, text=True, check=True)
    sdk = subprocess.run([venv / "python", "-c", "import bosun; print(bosun.__version__)"],
                         env=rustless, capture_output=True, text=True, check=True)
    version = workspace_version()
    assert (binary.stdout.strip(), sdk.stdout.strip()) == (f"bosun {version}", version)


def test_uvx_runs_the_controller_from_the_wheel(wheel, rustless, tmp_path):
    uvx = shutil.which("uvx", path=f"{pathlib.Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    require("uv (`pip install uv`; it is in the SDK's test extra)", uvx is not None)
    env = dict(rustless, UV_CACHE_DIR=str(tmp_path / "uv-cache"), UV_PYTHON_DOWNLOADS="never",
               UV_TOOL_DIR=str(tmp_path / "uv-tools"), HOME=str(tmp_path))
    done = subprocess.run([uvx, "--from", wheel, "bosun", "--version"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"bosun {workspace_version()}"


def run_until(argv, cwd, env, text, deadline) -> list[str]:
    """Starts `argv`, collects its output lines until one contains `text`, then interrupts it
    (Ctrl-C) and waits for it to exit; the lines seen. Fails at `deadline` with the output."""
    process = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: queue.Queue = queue.Queue()

    def pump():
        for line in process.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    seen: list[str] = []
    try:
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"no line with {text!r} in time; output:\n" + "\n".join(seen))
            if line is None:
                pytest.fail(f"exited ({process.wait()}) before a line with {text!r}; output:\n" + "\n".join(seen))
            seen.append(line)
            if text in line:
                return seen
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
