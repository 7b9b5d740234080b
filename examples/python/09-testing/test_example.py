"""Tests of example 09, as an operator's own tests would be written with `bosun.testing`.

`KopfRunner` runs the `bosun` binary in the background for the `with` block: here `bosun dev`,
so each test has an embedded dev cluster of its own (no cluster, nothing to clean up). The
first test serves `example.py` as a handler file; the second serves handlers declared in the
test itself (`registry=`), from this process, so that the test sees what they were given."""

import hashlib
import json
import pathlib
import subprocess

import bosun
import bosun.testing

HERE = pathlib.Path(__file__).resolve().parent
CRD, OBJ = HERE.parent.parent / "crd.yaml", HERE.parent.parent / "obj.yaml"
SPEC = {"duration": "1m", "field": "value", "items": ["item1", "item2"]}  # obj.yaml's


def kubectl(kubeconfig, *args):
    return subprocess.run(["kubectl", f"--kubeconfig={kubeconfig}", *args], check=True, capture_output=True,
                          text=True, timeout=30).stdout


def test_the_example_stores_the_checksum_of_the_spec(tmp_path):
    args = ["dev", "--dir", str(tmp_path), "--apply", str(CRD), "--apply", str(OBJ), str(HERE / "example.py")]
    with bosun.testing.KopfRunner(args, timeout=60) as runner:
        runner.wait_for("[default/kopf-example-1] Handler 'checksum' succeeded.")
        stored = json.loads(kubectl(tmp_path / "kubeconfig", "get", "-f", str(OBJ), "-o", "json"))
    assert runner.exception is None and runner.exit_code == 0
    expected = hashlib.sha256(json.dumps(SPEC, sort_keys=True).encode()).hexdigest()[:12]
    assert stored["status"]["checksum"] == expected
    assert f"[default/kopf-example-1] The spec's checksum is {expected}." in runner.output


def test_a_handler_of_the_test_sees_the_object(tmp_path):
    registry = bosun.Registry()
    given = []

    @bosun.on.create("kopfexamples", registry=registry)
    def remember(name, spec, **_):
        given.append((name, dict(spec)))

    args = ["dev", "--dir", str(tmp_path), "--apply", str(CRD), "--apply", str(OBJ)]
    with bosun.testing.KopfRunner(args, registry=registry, timeout=60) as runner:
        runner.wait_for("Handler 'remember' succeeded.")
    assert runner.exit_code == 0
    assert given == [("kopf-example-1", SPEC)]
