"""This project's Python examples, end to end. Each runs under `bosun dev` (the real controller,
the embedded dev cluster, the SDK's handler server over real gRPC) with `examples/crd.yaml`
applied and, as in Kopf's e2e test, `execution.default_backoff = 1` and
`watching.server_timeout = 10`; the test creates `examples/obj.yaml` (or Pods, or objects the
webhooks judge), checks from the log that each handler succeeded exactly once (and the intended
ones failed), that a delete handler means `Adding the finalizer`, that deleting the object
completes, that no traceback shows where none is intended, and what each example does besides
(its status, its events, its children, its reaction to a patch). Example 09 has tests of its
own (`09-testing/test_example.py`), as an operator's tests would be written.

Needs: the `bosun` binary and SDK (`pip install ./sdk-python`), `kubectl`, and the examples'
requirements (`requirements.txt`)."""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import socket
import subprocess
import sys
import time
import urllib.request
from typing import Callable, List, Optional

import pytest

import bosun
import bosun.testing

HERE = pathlib.Path(__file__).resolve().parent
CRD = HERE.parent / "crd.yaml"
OBJ = HERE.parent / "obj.yaml"
OBJECT = "[default/kopf-example-1]"


class Cluster:
    """kubectl against the dev cluster of one test."""

    def __init__(self, kubeconfig: pathlib.Path):
        self.kubeconfig = kubeconfig

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        result = subprocess.run(["kubectl", f"--kubeconfig={self.kubeconfig}", *args], capture_output=True, text=True,
                                timeout=60)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
        return result

    def get(self, *args: str) -> dict:
        return json.loads(self("get", *args, "-o", "json").stdout)

    def wait_until(self, what: str, predicate: Callable[[], bool], timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout} s waiting until {what}")
            time.sleep(0.2)


@dataclasses.dataclass
class Case:
    folder: str
    #: Handlers that must succeed exactly once for the object (ids).
    succeeded: List[str] = dataclasses.field(default_factory=list)
    #: Handlers that must fail permanently (exactly once).
    failed: List[str] = dataclasses.field(default_factory=list)
    #: Lines that must show up (waited for) after the object is created.
    lines: List[str] = dataclasses.field(default_factory=list)
    #: Lines that must never show up.
    absent: List[str] = dataclasses.field(default_factory=list)
    #: Whether tracebacks are intended (handlers that raise unexpected errors).
    tracebacks: bool = False
    #: Whether the example has a delete handler (so a finalizer).
    deletes: List[str] = dataclasses.field(default_factory=list)
    #: What to do after creation (patch the object, create pods…) and what that must show.
    then: Optional[Callable[[Cluster, bosun.testing.Runner], None]] = None
    #: Activities (startup, cleanup) that must succeed exactly once.
    activities: List[str] = dataclasses.field(default_factory=list)
    #: Lines that must show up once bosun stopped (cleanup handlers).
    at_exit: List[str] = dataclasses.field(default_factory=list)
    create_object: bool = True
    #: More arguments of `bosun dev` (manifests to apply, the liveness endpoint).
    extra: List[str] = dataclasses.field(default_factory=list)

    def __str__(self) -> str:
        return self.folder


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def create(cluster: Cluster, yaml: str) -> None:
    subprocess.run(["kubectl", f"--kubeconfig={cluster.kubeconfig}", "create", "-f", "-"], input=yaml, text=True,
                   check=True, capture_output=True, timeout=60)


def pod(name: str, labels: str = "") -> str:
    return (f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n  labels: {{{labels}}}\n"
            "spec:\n  containers: [{name: c, image: busybox}]\n")


def kex(name: str, spec: str) -> str:
    return f"apiVersion: kopf.dev/v1\nkind: KopfExample\nmetadata:\n  name: {name}\n  namespace: default\nspec: {spec}\n"


def patch_spec(cluster: Cluster, spec: str) -> None:
    cluster("patch", "-f", str(OBJ), "--type=merge", "-p", f'{{"spec": {spec}}}')


def status(cluster: Cluster) -> dict:
    return cluster.get("-f", str(OBJ)).get("status", {})


def welcome_01(cluster, runner):
    assert status(cluster)["welcome"] == {"message": "welcome, kopf-example-1"}
    assert "welcome, kopf-example-1" in cluster("get", "kex").stdout  # the CRD's WELCOME column


def children_02(cluster, runner):
    workers = cluster.get("pods", "-n", "default", "-l", "role=worker")["items"]
    assert [w["metadata"]["uid"] for w in workers] == status(cluster)["spawn_worker"]["workers"]
    cluster.wait_until("the controller creates the config map",
                       lambda: cluster("get", "configmap", "kopf-example-1-configmap", check=False).returncode == 0)
    configmap = cluster.get("configmap", "kopf-example-1-configmap")
    assert configmap["data"] == {"items": "item1,item2"}
    for child in (workers[0], configmap):
        assert [r["name"] for r in child["metadata"]["ownerReferences"]] == ["kopf-example-1"]
    assert workers[0]["metadata"]["labels"]["somelabel"] == "somevalue"  # the parent's labels, by kopf.adopt


def events_04(cluster, runner):
    def posted():
        events = cluster.get("events", "-n", "default", "--field-selector", "involvedObject.name=kopf-example-1")
        return {(e["type"], e["reason"], e["message"]) for e in events["items"]}

    expected = {("Normal", "Inspected", "2 item(s) to serve"),
                ("Warning", "NoDeadline", "spec.deadline is not set; serving without one"),
                ("Error", "Unparsed", "spec.duration is not a number of seconds: invalid literal for int() with base 10: '1m'"),
                ("Audit", "Reported", "all checks are done")}
    cluster.wait_until("the events are posted", lambda: expected <= posted())


def lifecycle_05(cluster, runner):
    runner.wait_for("1/2 reserving resources for kopf-example-1")
    assert runner.output.index("1/2 reserving") < runner.output.index("2/2 announcing"), runner.output
    runner.wait_for("spec.field went from None to 'value'")  # a field handler sees the creation too
    patch_spec(cluster, '{"field": "changed"}')
    runner.wait_for(f"{OBJECT} Handler 'reconcile' succeeded.")
    runner.wait_for("reconciling 1 change(s): [('change', 'spec.field')]")
    runner.wait_for("spec.field went from 'value' to 'changed'")


def peering_06(cluster, runner):
    peers = cluster.get("clusterbosunpeering", "default").get("status", {})
    assert [p["priority"] for p in peers.values()] == [50], peers


def subhandlers_07(cluster, runner):
    output = runner.output
    assert output.index("Handler 'provision/item1' succeeded.") < output.index("Handler 'provision' succeeded."), output


def spies_08(cluster, runner):
    patch_spec(cluster, '{"field": "changed"}')
    runner.wait_for("MODIFIED of kopf-example-1")
    assert "Handler 'count_events' failed" not in runner.output, runner.output


def builtins_10(cluster, runner):
    runner.wait_for("Listed 0 object(s) of pods.v1")  # so that the pod is seen created, not listed
    create(cluster, pod("example-pod"))
    runner.wait_for("[default/example-pod] Pod example-pod is marked as seen.")
    cluster.wait_until("the label is written", lambda: cluster.get("pod", "example-pod")["metadata"].get("labels", {})
                       .get("examples.bosun.dev/seen") == "yes")
    cluster("delete", "pod", "example-pod", "--wait=true", "--timeout=30s")
    runner.wait_for("[default/example-pod] Pod example-pod is gone in phase Pending.")
    output = runner.output
    assert "[default/example-pod] Adding the finalizer" in output, output
    for handler in ("mark_seen", "report_gone"):
        assert output.count(f"[default/example-pod] Handler '{handler}' succeeded.") == 1, output


def filters_11(cluster, runner):
    patch_spec(cluster, '{"field": "changed"}')
    runner.wait_for(f"{OBJECT} Handler 'field_change_matches/spec.field' succeeded.")
    runner.wait_for(f"{OBJECT} matched: a daemon for as long as spec.field=changed")


HOOKS_PORT = free_port()


def liveness(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as response:
        return json.loads(response.read())


def hooks_13(cluster, runner):
    runner.wait_for("The inventory has 0 pod(s): []")
    create(cluster, pod("example-pod"))
    runner.wait_for("The inventory has 1 pod(s): ['default/example-pod']")
    probed = liveness(HOOKS_PORT)
    assert probed["pods"] == 1 and isinstance(probed["uptime"], int), probed


def daemons_14(cluster, runner):
    runner.wait_for(f"{OBJECT} Heartbeat 2 of kopf-example-1.")
    runner.wait_for(f"{OBJECT} Pulse: field='value'", count=2)


def timers_15(cluster, runner):
    runner.wait_for(f"{OBJECT} Tick for kopf-example-1: field='value'", count=3)
    runner.wait_for(f"{OBJECT} kopf-example-1 has not changed for 3 s or more.")
    output = runner.output
    # idle=3: the first call of `settled` comes after the third tick (interval 1, delayed 1 s).
    assert output.index("has not changed") > output.index("Tick for kopf-example-1", output.index("Tick for") + 1), output


def indices_16(cluster, runner):
    create(cluster, pod("web-1", "app: value"))  # obj.yaml's spec.field is 'value'
    create(cluster, pod("db-1", "app: db"))
    cluster.wait_until("the timer lists the app's pods", lambda: status(cluster).get("pods") == ["default/web-1"])
    runner.wait_for("Timer 'list_the_apps_pods' succeeded.")
    cluster("delete", "pod", "web-1", "--wait=true", "--timeout=30s")
    cluster.wait_until("the index drops the pod", lambda: status(cluster).get("pods") == [])


def admission_17(cluster, runner):
    runner.wait_for("ValidatingWebhookConfiguration 'examples.bosun.dev' is created")
    runner.wait_for("MutatingWebhookConfiguration 'examples.bosun.dev' is created")

    def apply(yaml: str, *extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(["kubectl", f"--kubeconfig={cluster.kubeconfig}", "apply", "-f", "-", *extra], input=yaml,
                              text=True, capture_output=True, timeout=60)

    empty = apply(kex("empty-1", "{field: ''}"))
    assert empty.returncode != 0 and "denied the request: spec.field must not be empty." in empty.stderr, empty.stderr
    reserved = apply(kex("reserved-1", "{field: reserved}"))
    assert reserved.returncode != 0 and "'reserved' is reserved for the operator." in reserved.stderr, reserved.stderr
    dry = apply(kex("dry-1", "{field: value}"), "--dry-run=server")
    assert dry.returncode == 0 and "Warning: A dry run: nothing is stored." in dry.stderr, dry.stderr
    assert cluster("get", "kex", "dry-1", check=False).returncode != 0, "a dry run stores nothing"
    good = apply(kex("good-1", "{field: value}"))
    assert good.returncode == 0 and "Warning: spec.items is empty: there is nothing to serve." in good.stderr, good.stderr
    assert cluster.get("kex", "good-1")["spec"] == {"field": "value", "duration": "1m"}  # mutated
    bad = cluster("patch", "kex", "good-1", "--subresource=status", "--type=merge", "-p", '{"status": {"approved": "yes"}}',
                  check=False)
    assert bad.returncode != 0 and "status.approved must be true or false." in bad.stderr, bad.stderr
    cluster("patch", "kex", "good-1", "--subresource=status", "--type=merge", "-p", '{"status": {"approved": true}}')


def all_99(cluster, runner):
    cluster.wait_until("the controller creates the config map",
                       lambda: cluster("get", "configmap", "kopf-example-1-configmap", check=False).returncode == 0)
    runner.wait_for(f"{OBJECT} kopf-example-1 has the config maps ['kopf-example-1-configmap'].")
    runner.wait_for(f"{OBJECT} kopf-example-1 is alive.")
    patch_spec(cluster, '{"items": ["item1", "item3"]}')
    for item in ("item2", "item3"):
        runner.wait_for(f"{OBJECT} Handler 'resync_items/spec.items/sync-{item}' succeeded.")
    runner.wait_for(f"{OBJECT} Handler 'audit' succeeded.")
    obj = cluster.get("-f", str(OBJ))
    assert obj["metadata"]["finalizers"] == ["examples.bosun.dev/all-at-once"], obj["metadata"]
    events = cluster.get("events", "-n", "default", "--field-selector", "involvedObject.name=kopf-example-1")["items"]
    assert {"Opened"} <= {e["reason"] for e in events}, events


CASES = [
    Case("01-minimal", succeeded=["welcome"], lines=[f"{OBJECT} Welcoming kopf-example-1, whose spec is {{'duration': '1m'"],
         then=welcome_01),
    Case("02-children", succeeded=["spawn_worker"], lines=["Started the worker pod kopf-example-1-"], then=children_02),
    Case("03-exceptions", succeeded=["wait_for_the_quota"],
         failed=["refuse_the_spec", "call_a_flaky_service", "parse_strictly"], tracebacks=True,
         lines=["Handler 'wait_for_the_quota' failed temporarily: no quota yet (attempt 1)", "Got the quota at attempt 2."]),
    Case("04-events", succeeded=["report"], then=events_04),
    Case("05-handlers", succeeded=["reserve", "announce"], deletes=["release", "farewell"], then=lifecycle_05,
         absent=["reattaching to"]),
    Case("06-peering", succeeded=["take_turn"], extra=["--apply", str(HERE.parent.parent / "deploy" / "peering.yaml")],
         lines=["Peering in ClusterBosunPeering default as ", "Activity 'join_the_peering' succeeded."], then=peering_06),
    Case("07-subhandlers", succeeded=["provision/item1", "provision/item2", "provision"],
         lines=[f"{OBJECT} Provisioned item1.", f"{OBJECT} Provisioned item2."], then=subhandlers_07),
    Case("08-events", lines=["ADDED of kopf-example-1; so far {'ADDED': 1}", "Handler 'stumble' failed"], tracebacks=True,
         then=spies_08),
    Case("10-builtins", create_object=False, then=builtins_10),
    Case("11-filtering-handlers",
         succeeded=["label_value_matches", "label_presence_matches", "label_callbacks_match", "annotation_callback_matches",
                    "when_matches", "field_value_matches/spec.field"],
         absent=["never: "], then=filters_11),
    Case("13-hooks", create_object=False, then=hooks_13,
         extra=["--liveness", f"http://127.0.0.1:{HOOKS_PORT}/healthz"],
         lines=["Logging in with the kubeconfig's current context.", "The dependency is up."],
         activities=["login", "start_reporting", "wait_for_a_dependency", "stop_reporting"],
         at_exit=["Stopped reporting; 1 pod(s) in the inventory at the end."]),
    # Deleting the object stops its daemons and waits for them: the sync one returns (and
    # succeeds) before the object goes, the async one is cancelled.
    Case("14-daemons", then=daemons_14, lines=["Daemon 'heartbeat' failed temporarily: not ready to beat yet (attempt 1)"],
         at_exit=[f"{OBJECT} Heartbeat of kopf-example-1 stops after ", f"{OBJECT} Daemon 'heartbeat' succeeded.",
                  "Pulse is cancelled."]),
    Case("15-timers", then=timers_15),
    Case("16-indexing", then=indices_16),
    Case("17-admission", create_object=False, then=admission_17),
    Case("99-all-at-once", succeeded=["open_account"], deletes=["close_account"], then=all_99,
         lines=["Configured: events from INFO, our own finalizer."],
         activities=["configure", "say_goodbye"], at_exit=["The operator of accounts stops."]),
]


def e2e_settings() -> bosun.OperatorSettings:
    """The settings Kopf's e2e test runs its examples with."""
    settings = bosun.OperatorSettings()
    settings.execution.default_backoff = 1  # to prevent lengthy sleeps on the simulated retries
    settings.watching.server_timeout = 10
    return settings


@pytest.mark.parametrize("case", CASES, ids=str)
def test_example(case: Case, tmp_path: pathlib.Path) -> None:
    cluster = Cluster(tmp_path / "kubeconfig")
    args = ["dev", "--dir", str(tmp_path), "--apply", str(CRD), *case.extra, str(HERE / case.folder / "example.py")]
    with bosun.testing.Runner(args, timeout=60, settings=e2e_settings()) as runner:
        runner.wait_for("export KUBECONFIG=")
        if case.create_object:
            runner.wait_for("Serving kopfexamples.v1.kopf.dev")
            cluster("create", "-f", str(OBJ))
        for handler in case.succeeded:
            runner.wait_for(f"Handler '{handler}' succeeded.")
        for handler in case.failed:
            runner.wait_for(f"Handler '{handler}' failed permanently")
        for line in case.lines:
            runner.wait_for(line)
        if case.then is not None:
            case.then(cluster, runner)
        if case.create_object:
            cluster("delete", "-f", str(OBJ), "--wait=true", "--timeout=30s")
            for handler in case.deletes:
                runner.wait_for(f"{OBJECT} Handler '{handler}' succeeded.")
    output = runner.output
    assert runner.exception is None
    assert runner.exit_code == 0, output
    for handler in case.succeeded + case.deletes:
        assert output.count(f"Handler '{handler}' succeeded.") == 1, f"{handler} succeeded more or less than once:\n{output}"
    for handler in case.failed:
        assert output.count(f"Handler '{handler}' failed permanently") == 1, output
    if not case.failed:
        assert "failed permanently" not in output, output
    if case.deletes:
        assert f"{OBJECT} Adding the finalizer" in output, output
    if not case.tracebacks:
        assert "Traceback (most recent call last)" not in output, output
    for line in case.absent:
        assert line not in output, output
    for line in case.at_exit:
        assert line in output, output
    for activity in case.activities:
        assert output.count(f"Activity '{activity}' succeeded.") == 1, f"{activity} succeeded more or less than once:\n{output}"


def test_example_12_embedded(tmp_path: pathlib.Path) -> None:
    """The operator inside an application (`bosun.operator()` as a task of the app's event
    loop): the app creates three objects, sees each stamped, deletes them, and stops the
    operator; each object is handled once and its deletion completes."""
    cluster = ["dev", "--cluster-only", "--dir", str(tmp_path), "--apply", str(CRD)]
    with bosun.testing.Runner(cluster, timeout=60) as dev:
        dev.wait_for("Serving the dev cluster only")
        env = dict(os.environ, KUBECONFIG=str(tmp_path / "kubeconfig"))
        app = subprocess.run([sys.executable, str(HERE / "12-embedded" / "example.py")], env=env, capture_output=True,
                             text=True, timeout=120)
    output = app.stdout + app.stderr
    assert app.returncode == 0, output
    assert dev.exit_code == 0, dev.output
    assert "The operator is ready; the app starts its work." in output, output
    for n in range(3):
        assert output.count(f"[default/embedded-{n}] Handler 'stamp' succeeded.") == 1, output
        assert output.count(f"[default/embedded-{n}] Handler 'unstamp' succeeded.") == 1, output
        # The result is the operator's memo's template (kopf.operator(memo=...)), filled in.
        assert f"The app sees embedded-{n} stamped 'embedded-{n}, seen by the embedded operator'" in output, output
    assert "Traceback" not in output, output
    assert "The operator has stopped with exit code 0." in output, output
