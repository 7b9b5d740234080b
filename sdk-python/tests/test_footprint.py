"""The handler server's footprint: what `python -m bosun` imports is what it needs to serve.
Each module kept out here is memory every handler server would carry for nothing (the bench's
bar: the controller and the Python server together use less memory than Kopf)."""

import json
import os
import subprocess
import sys

import pytest

# Pulled in by importlib.metadata (email, zipfile, csv), tempfile (random, shutil) and shutil
# (bz2, lzma): about 3.5 MiB together. Only the embedded controller and the test runner need
# them, and import them when they run.
# OpenTelemetry (when installed) comes only when traces are asked for.
NOT_FOR_SERVING = ["importlib.metadata", "email", "zipfile", "tempfile", "shutil", "bz2", "lzma", "random", "opentelemetry"]


def test_serving_imports_nothing_it_does_not_need():
    code = "import json, sys, bosun, bosun.__main__; print(json.dumps(sorted(sys.modules)))"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    loaded = set(json.loads(out.stdout))
    assert "grpc" in loaded and "bosun._server" in loaded, "the check itself must see the server's imports"
    assert sorted(set(NOT_FOR_SERVING) & loaded) == []


def test_the_version_is_found_when_asked():
    import bosun

    assert isinstance(bosun.__version__, str) and bosun.__version__
    with pytest.raises(AttributeError):
        getattr(bosun, "no_such_attribute")
