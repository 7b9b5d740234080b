"""Kopf's own examples and tests, exactly as Kopf 1.45.2 ships them, run under Bosun.

The files come from Kopf's source distribution on PyPI (fetched once, checked against the
SHA-256 recorded here), never from this repository. Each `.py` file differs from Kopf's in its
`import kopf` line alone (`import bosun as kopf`; `kopf.testing` → `bosun.testing`): the
rewrite is checked to change that one line and nothing else. Then Kopf's tests run as Kopf runs
them, against dev clusters started here (`bosun dev --cluster-only`), with the real `bosun`
controller, the SDK's handler server and `kubectl`:

- Kopf's end-to-end test (`tests/e2e/test_examples.py`), over every example without tests of
  its own: `KopfRunner(['run', '--all-namespaces', '--standalone', '--verbose', example])`,
  `kubectl apply` and `delete` of `examples/obj.yaml`, then Kopf's checks: no crash, exit code
  0, the finalizer and in-progress lines, every handler succeeded exactly once (or as Kopf's
  table says), none failed, no traceback where none is intended.
- That `examples/python/` holds the same files (Kopf's, but for the import line), whose own
  tests (`test_example_09.py`, `_10`, `_11`, run with `KopfRunner`) run from there.

Kopf's e2e test needs a few fixtures of Kopf's `conftest.py` (which imports Kopf's internals):
the `conftest.py` written below gives them from Bosun (`settings` is `bosun.OperatorSettings()`).
The examples run in three groups at once, each on a dev cluster of its own (Kopf's tests use
one object name, so one cluster runs one test at a time).

Needs the network the first time (PyPI), `kubectl`, the `bosun` binary and the SDK, and the
examples' requirements (`pykube-ng`, `pyyaml`, `kubernetes`)."""

from __future__ import annotations

import concurrent.futures
import hashlib
import io
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import urllib.request
from typing import Dict, List

import pytest

import bosun.testing

KOPF = "kopf-1.45.2"
SDIST_URL = ("https://files.pythonhosted.org/packages/3d/39/cb8df5038e7d1916d29c2f48933cf346ea1af3a28755ece48d9dfafee759/"
             "kopf-1.45.2.tar.gz")
SDIST_SHA256 = "5baa180cfdebe1c5095d2a0a96d7d91825b6920541a0825c55719c36abb0054f"
ROOT = pathlib.Path(__file__).resolve().parents[2]
CACHE = ROOT / "target" / "kopf-as-shipped"

#: The one line each file may differ in: Kopf's imports of itself, and what they become.
IMPORTS = {
    "import kopf": "import bosun as kopf",
    "import kopf.testing": "import bosun as kopf, bosun.testing",
    "from kopf.testing import KopfRunner": "from bosun.testing import KopfRunner",
}

#: Fixtures Kopf's e2e test takes from Kopf's conftest.py, given here by Bosun.
E2E_CONFTEST = '''"""Fixtures of Kopf's e2e test, from Bosun (Kopf's own conftest imports Kopf's internals)."""
import glob
import os
import pathlib
import subprocess

import pytest

import bosun

ROOT = os.path.relpath(os.path.dirname(os.path.dirname(__file__)))
EXAMPLES = sorted(path for path in glob.glob(os.path.join(ROOT, "examples/*/"))
                  if not glob.glob(os.path.join(path, "test*.py")))


@pytest.fixture
def settings():
    return bosun.OperatorSettings()


@pytest.fixture(params=EXAMPLES, ids=[os.path.basename(p.rstrip("/")) for p in EXAMPLES])
def exampledir(request):
    return pathlib.Path(request.param)


@pytest.fixture
def with_crd():
    subprocess.run("kubectl apply -f examples/crd.yaml", shell=True, check=True, timeout=10, capture_output=True)
'''


def _fetch() -> bytes:
    """Kopf's sdist: from the cache, else from PyPI; checked either way."""
    cached = CACHE / f"{KOPF}.tar.gz"
    if cached.exists():
        data = cached.read_bytes()
    else:
        try:
            with urllib.request.urlopen(SDIST_URL, timeout=60) as response:
                data = response.read()
        except OSError as e:  # no network: a failure under CI, as any missing tool
            if os.environ.get("CI"):
                raise AssertionError(f"Kopf's sdist could not be fetched from {SDIST_URL}: {e}") from e
            pytest.skip(f"Kopf's sdist could not be fetched ({e}); CI fails here")
    digest = hashlib.sha256(data).hexdigest()
    assert digest == SDIST_SHA256, f"{SDIST_URL} has SHA-256 {digest}, not the recorded {SDIST_SHA256}"
    if not cached.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        cached.write_bytes(data)
    return data


def rewrite(text: str) -> str:
    """Kopf's file with its import of Kopf changed, and nothing else."""
    lines = text.split("\n")
    out = [IMPORTS.get(line, line) for line in lines]
    changed = [i for i, (a, b) in enumerate(zip(lines, out)) if a != b]
    assert len(changed) <= 1, f"more than one import of Kopf: lines {changed}"
    leftover = [line for line in out if re.match(r"\s*(import|from)\s+kopf\b", line)]
    assert not leftover, f"an import of Kopf that has no Bosun counterpart here: {leftover}"
    return "\n".join(out)


def prepare(where: pathlib.Path) -> pathlib.Path:
    """Kopf's examples and its e2e test, with their imports changed, in `where`."""
    with tarfile.open(fileobj=io.BytesIO(_fetch()), mode="r:gz") as sdist:
        for member in sdist.getmembers():
            name = member.name
            if not member.isfile() or not (name.startswith(f"{KOPF}/examples/") or name == f"{KOPF}/tests/e2e/test_examples.py"):
                continue
            relative = name[len(KOPF) + 1:].replace("tests/e2e/", "e2e/")
            target = where / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            data = sdist.extractfile(member).read()
            if target.suffix == ".py":
                data = rewrite(data.decode()).encode()
            target.write_bytes(data)
    (where / "e2e" / "conftest.py").write_text(E2E_CONFTEST)
    return where


def test_the_rewrite_changes_only_the_import_line():
    kopf_file = "from typing import Any\n\nimport kopf\n\n\n@kopf.on.create('kex')\ndef fn(**_: Any) -> None:\n    pass\n"
    assert rewrite(kopf_file) == kopf_file.replace("import kopf\n", "import bosun as kopf\n")
    with pytest.raises(AssertionError, match="no Bosun counterpart"):
        rewrite("import kopf._core.intents.registries\n")


def test_the_examples_here_are_kopfs_with_the_import_line_changed(tmp_path):
    """`examples/python/` holds Kopf's examples and their tests as Kopf ships them, but for the
    import line: the files, byte for byte, against the sdist."""
    tree = prepare(tmp_path / "kopf")
    shipped = sorted(path.relative_to(tree / "examples") for path in (tree / "examples").glob("*/*.py")
                     if path.name != "test_nothing.py")
    assert len(shipped) >= 21, shipped
    here = ROOT / "examples" / "python"
    differing = [str(path) for path in shipped if (here / path).read_bytes() != (tree / "examples" / path).read_bytes()]
    assert differing == []


def _groups(tree: pathlib.Path) -> List[List[str]]:
    """Kopf's e2e test over every example without tests of its own, in three groups (the
    examples' own tests run from `examples/python/`, the same files)."""
    e2e = sorted(p.name for p in (tree / "examples").iterdir()
                 if p.is_dir() and not list(p.glob("test*.py")) and (p / "example.py").exists())
    nodes = [f"e2e/test_examples.py::test_all_examples_are_runnable[{name}]" for name in e2e]
    return [nodes[i::3] for i in range(3)]


def _dev_cluster(tmp: pathlib.Path) -> bosun.testing.KopfRunner:
    runner = bosun.testing.KopfRunner(["dev", "--cluster-only", "--dir", str(tmp)], timeout=60)
    runner.__enter__()
    runner.wait_for("export KUBECONFIG=")
    return runner


def _run_group(tree: pathlib.Path, nodes: List[str], tmp: pathlib.Path) -> subprocess.CompletedProcess:
    cluster = _dev_cluster(tmp)
    try:
        env: Dict[str, str] = dict(os.environ, KUBECONFIG=cluster.kubeconfig or "", PYTHONDONTWRITEBYTECODE="1")
        ini = tmp / "pytest.ini"
        ini.write_text("[pytest]\n")
        run = subprocess.run([sys.executable, "-m", "pytest", "-c", str(ini), "--rootdir", str(tree), "-p", "no:cacheprovider",
                              "-v", "-rA", "--tb=short", *nodes], cwd=tree, env=env, capture_output=True, text=True, timeout=900)
        (tmp / "pytest.log").write_text(run.stdout + run.stderr)
        return run
    finally:
        cluster.__exit__(None, None, None)


def _summary(output: str) -> List[str]:
    """The outcome of each test and the assertion lines of each failure (its `E ` lines that
    are not captured log lines)."""
    keep = []
    for line in output.splitlines():
        if re.match(r"(PASSED|FAILED|ERROR) ", line) or (re.match(r"E\s", line) and "bosun.runner" not in line):
            keep.append(line[:300])
    return keep


def test_kopfs_examples_and_tests_as_kopf_ships_them(tmp_path):
    if not shutil.which("kubectl"):
        if os.environ.get("CI"):
            pytest.fail("kubectl is needed on PATH")
        pytest.skip("kubectl is not on PATH")
    tree = prepare(tmp_path / "kopf")
    groups = _groups(tree)
    assert sum(len(g) for g in groups) >= 14, groups
    with concurrent.futures.ThreadPoolExecutor(len(groups)) as pool:
        runs = list(pool.map(lambda ig: _run_group(tree, ig[1], tmp_path / f"cluster-{ig[0]}"), enumerate(groups)))
    report = "\n".join(line for r in runs for line in _summary(r.stdout)) + f"\n(whole logs: {tmp_path}/cluster-*/pytest.log)"
    passed = sorted(line.split(" ", 1)[1] for r in runs for line in r.stdout.splitlines() if line.startswith("PASSED "))
    print(json.dumps(passed, indent=1))
    assert all(r.returncode == 0 for r in runs), report
