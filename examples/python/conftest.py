"""A cluster for Kopf's own example tests (`09-testing/test_example_09.py`,
`10-builtins/test_example_10.py`, `11-filtering-handlers/test_example_11.py`).

Kopf's tests run `kubectl` and `KopfRunner(['run', ...])` against the cluster of `$KUBECONFIG`.
Here each of them gets a fresh embedded dev cluster (`bosun dev --cluster-only`), and
`$KUBECONFIG` points at it while the test runs; the tests themselves are Kopf's, unchanged but
for their import line. To run them against a cluster of your own instead, set
`BOSUN_EXAMPLES_KUBECONFIG` to its kubeconfig (with `crd.yaml` applicable there)."""

from __future__ import annotations

import os

import pytest

import bosun.testing


@pytest.fixture(autouse=True)
def kopf_test_cluster(request, tmp_path_factory, monkeypatch):
    if not request.node.path.name.startswith("test_example_"):  # Kopf's test files only
        yield
        return
    own = os.environ.get("BOSUN_EXAMPLES_KUBECONFIG")
    if own:
        monkeypatch.setenv("KUBECONFIG", own)
        yield
        return
    where = tmp_path_factory.mktemp("dev-cluster")
    with bosun.testing.KopfRunner(["dev", "--cluster-only", "--dir", str(where)], timeout=60) as cluster:
        cluster.wait_for("export KUBECONFIG=")
        monkeypatch.setenv("KUBECONFIG", cluster.kubeconfig)
        yield
