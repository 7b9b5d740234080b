"""Kopf's own examples and tests, exactly as Kopf 1.45.2 ships them, run under Bosun.

The files come from Kopf's source distribution, fetched at test time with pip by its version
(`pip download kopf==1.45.2 --no-binary :all:`, from whatever index pip is configured with),
checked against the SHA-256 recorded here, and unpacked under `target/kopf-as-shipped/`; none
of them is in this repository. Each `.py` file differs from Kopf's in its `import kopf` line
alone (`import bosun as kopf`; `kopf.testing` → `bosun.testing`): the rewrite is checked to
change that one line and nothing else. Then Kopf's tests run as Kopf runs them, against dev
clusters started here (`bosun dev --cluster-only`), with the real `bosun` controller, the
SDK's handler server and `kubectl`:

- Kopf's end-to-end test (`tests/e2e/test_examples.py`), over every example without tests of
  its own: `KopfRunner(['run', '--all-namespaces', '--standalone', '--verbose', example])`,
  `kubectl apply` and `delete` of `examples/obj.yaml`, then Kopf's checks: no crash, exit code
  0, the finalizer and in-progress lines, every handler succeeded exactly once (or as Kopf's
  table says), none failed, no traceback where none is intended.
- The examples' own tests (`test_example_09.py`, `_10`, `_11`, with `KopfRunner` and
  `kubectl` against `$KUBECONFIG`), each on a fresh dev cluster of its own.

Both need fixtures Kopf's `conftest.py` gives (it imports Kopf's internals): the two
`conftest.py` written below give them from Bosun (`settings` is `bosun.OperatorSettings()`).
The tests run in three groups at once, each on a dev cluster of its own (Kopf's tests use one
object name, so one cluster runs one test at a time).

Needs the network the first time (pip), `kubectl`, the `bosun` binary and the SDK, and the
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
from typing import Dict, List

import pytest

import bosun.testing

VERSION = "1.45.2"
KOPF = f"kopf-{VERSION}"
SDIST_SHA256 = "5baa180cfdebe1c5095d2a0a96d7d91825b6920541a0825c55719c36abb0054f"
ROOT = pathlib.Path(__file__).resolve().parents[2]
CACHE = ROOT / "target" / "kopf-as-shipped"  # the sdist, and the tree unpacked from it

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


#: The cluster of each of Kopf's example tests (`examples/*/test_example_*.py`).
EXAMPLES_CONFTEST = '''"""A fresh dev cluster for each of Kopf's own example tests, in $KUBECONFIG while it runs
(Kopf's tests run `kubectl` and `KopfRunner(['run', ...])` against the cluster there)."""
import pytest

import bosun.testing


@pytest.fixture(autouse=True)
def kopf_test_cluster(tmp_path_factory, monkeypatch):
    where = tmp_path_factory.mktemp("dev-cluster")
    with bosun.testing.KopfRunner(["dev", "--cluster-only", "--dir", str(where)], timeout=60) as cluster:
        cluster.wait_for("export KUBECONFIG=")
        monkeypatch.setenv("KUBECONFIG", cluster.kubeconfig)
        yield
'''


def _fetch() -> bytes:
    """Kopf's sdist: from the cache, else from pip (by its version); checked either way."""
    cached = CACHE / f"{KOPF}.tar.gz"
    if not cached.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        pip = subprocess.run([sys.executable, "-m", "pip", "download", f"kopf=={VERSION}", "--no-binary", ":all:",
                              "--no-deps", "--disable-pip-version-check", "-q", "-d", str(CACHE)],
                             capture_output=True, text=True, timeout=300)
        if pip.returncode != 0 or not cached.exists():  # no network: a failure under CI, as any missing tool
            why = f"pip download kopf=={VERSION} failed: {pip.stderr.strip()[-2000:]}"
            if os.environ.get("CI"):
                raise AssertionError(why)
            pytest.skip(f"{why}; CI fails here")
    data = cached.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != SDIST_SHA256:
        cached.unlink()  # fetched anew next time
        raise AssertionError(f"{cached.name} has SHA-256 {digest}, not the recorded {SDIST_SHA256}")
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


def prepare() -> pathlib.Path:
    """Kopf's examples, their tests and its e2e test, with their imports changed, unpacked
    afresh in `target/kopf-as-shipped/kopf-1.45.2/`."""
    where = CACHE / KOPF
    shutil.rmtree(where, ignore_errors=True)
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
    (where / "examples" / "conftest.py").write_text(EXAMPLES_CONFTEST)
    return where


def test_the_rewrite_changes_only_the_import_line():
    kopf_file = "from typing import Any\n\nimport kopf\n\n\n@kopf.on.create('kex')\ndef fn(**_: Any) -> None:\n    pass\n"
    assert rewrite(kopf_file) == kopf_file.replace("import kopf\n", "import bosun as kopf\n")
    with pytest.raises(AssertionError, match="no Bosun counterpart"):
        rewrite("import kopf._core.intents.registries\n")


def _groups(tree: pathlib.Path) -> List[List[str]]:
    """Kopf's e2e test over every example without tests of its own, and those tests, in
    three groups."""
    examples = sorted(p for p in (tree / "examples").iterdir() if p.is_dir() and (p / "example.py").exists())
    nodes = [f"e2e/test_examples.py::test_all_examples_are_runnable[{p.name}]" for p in examples if not list(p.glob("test*.py"))]
    nodes += [str(test.relative_to(tree)) for p in examples for test in sorted(p.glob("test_example_*.py"))]
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
    tree = prepare()
    groups = _groups(tree)
    assert sum(len(g) for g in groups) >= 17, groups  # 14 examples under the e2e test, and 3 tests of their own
    with concurrent.futures.ThreadPoolExecutor(len(groups)) as pool:
        runs = list(pool.map(lambda ig: _run_group(tree, ig[1], tmp_path / f"cluster-{ig[0]}"), enumerate(groups)))
    report = "\n".join(line for r in runs for line in _summary(r.stdout)) + f"\n(whole logs: {tmp_path}/cluster-*/pytest.log)"
    passed = sorted(line.split(" ", 1)[1] for r in runs for line in r.stdout.splitlines() if line.startswith("PASSED "))
    print(json.dumps(passed, indent=1))
    assert all(r.returncode == 0 for r in runs), report
