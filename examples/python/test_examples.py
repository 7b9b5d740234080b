"""Kopf's examples in Python, end to end, Kopf's e2e way but stricter. The examples are Kopf
1.45.2's files as Kopf ships them, with `import kopf` changed to `import bosun as kopf`. Each
runs under `bosun dev` (the real controller, the embedded dev cluster, the SDK's handler server
over real gRPC) with `examples/crd.yaml` applied and, as in Kopf's e2e test, the settings
`execution.default_backoff = 1` and `watching.server_timeout = 10`; the test creates
`examples/obj.yaml`, checks from the log that each handler succeeded exactly once (and the
intended ones failed), that a delete handler means `Adding the finalizer`, that deleting the
object completes, that no traceback shows where none is intended, and what each example does
besides (its status, its events, its children, its reaction to a patch).

Needs: the `bosun` binary and SDK (`pip install ./sdk-python`), `kubectl`, and the examples'
requirements (`requirements.txt`: `pykube-ng`, `pyyaml`)."""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import subprocess
import sys
import time
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

    def __str__(self) -> str:
        return self.folder


def patch_field(cluster: Cluster, runner: bosun.testing.Runner) -> None:
    cluster("patch", "-f", str(OBJ), "--type=merge", "-p", '{"spec": {"field": "changed", "lst": ["a"]}}')


def update_05(cluster, runner):
    patch_field(cluster, runner)
    runner.wait_for(f"{OBJECT} Handler 'update_fn' succeeded.")
    runner.wait_for(f"{OBJECT} Handler 'field_fn/spec.field' succeeded.", count=2)
    runner.wait_for("FIELD CHANGED: value -> changed")


def update_11(cluster, runner):
    patch_field(cluster, runner)
    runner.wait_for(f"{OBJECT} Field change is satisfied.")
    runner.wait_for(f"{OBJECT} Handler 'update_with_field_change_satisfied/spec.field' succeeded.")


def update_99(cluster, runner):
    patch_field(cluster, runner)
    runner.wait_for(f"{OBJECT} Handler 'update' succeeded.")
    runner.wait_for("Handling the FIELD = None -> ['a']")


POD = """{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "example-pod", "namespace": "default"},
 "spec": {"containers": [{"name": "c", "image": "busybox"}]}}"""


def pods_10(cluster, runner):
    # Kopf's example kills every pod 30 s after it shows up. As Kopf's own test_example_10.py
    # does, check that the kill is scheduled and that deleting the pod first cancels it
    # (`Pod killing happens NOW!` must never show: Case.absent).
    runner.wait_for("Listed 0 object(s) of pods.v1")  # so that the pod is seen created, not listed
    subprocess.run(["kubectl", f"--kubeconfig={cluster.kubeconfig}", "create", "-f", "-"], input=POD, text=True,
                   check=True, capture_output=True, timeout=60)
    runner.wait_for("[default/example-pod] Handler 'pod_in_sight' succeeded.")
    runner.wait_for("[default/example-pod] === Pod killing happens in 30s.")
    cluster("delete", "pod", "example-pod", "--wait=true", "--timeout=30s")
    runner.wait_for("[default/example-pod] Handler 'pod_deleted' succeeded.")
    runner.wait_for("[default/example-pod] === Pod killing is cancelled!")
    output = runner.output
    assert "[default/example-pod] Adding the finalizer" in output, output
    for handler in ("pod_in_sight", "pod_deleted"):
        assert output.count(f"[default/example-pod] Handler '{handler}' succeeded.") == 1, output


def pods_13(cluster, runner):
    subprocess.run(["kubectl", f"--kubeconfig={cluster.kubeconfig}", "create", "-f", "-"], input=POD, text=True,
                   check=True, capture_output=True, timeout=60)
    runner.wait_for("Served by the background task.", timeout=30)


def events_04(cluster, runner):
    def reasons():
        events = cluster.get("events", "-n", "default", "--field-selector", "involvedObject.name=kopf-example-1")
        return [(e["type"], e["reason"], e["message"]) for e in events["items"]]

    # Kopf's four: kopf.event's own type, kopf.info's Normal, kopf.warn's Warning, and
    # kopf.exception's Error with the exception's text appended.
    expected = {("SomeType", "SomeReason", "Some message"), ("Normal", "SomeReason", "Some message"),
                ("Warning", "SomeReason", "Some message"), ("Error", "SomeReason", "Some exception: Exception text.")}
    cluster.wait_until("the events are posted", lambda: expected <= set(reasons()))


def status_02(cluster, runner):
    obj = cluster.get("-f", str(OBJ))
    children = obj["status"]["create_fn"]["children"]
    pod = cluster.get("pods", "-n", "default", "-l", "somelabel=somevalue")["items"][0]
    assert children == [pod["metadata"]["uid"]]
    assert pod["metadata"]["ownerReferences"][0]["name"] == "kopf-example-1"


def running_pods(cluster) -> list:
    return cluster.get("-f", str(OBJ)).get("status", {}).get("running-pods")


def indices_16(cluster, runner):
    # The index is filled before any other handler runs: the timer's first tick comes after.
    runner.wait_for(f"{OBJECT} Timer 'intervalled' succeeded.")
    output = runner.output
    assert output.index("Indexed 0 object(s) of pods.v1") < output.index("Timer 'intervalled' succeeded."), output
    cluster.wait_until("the timer lists no pods", lambda: running_pods(cluster) == [])
    labelled = POD.replace('"namespace": "default"}', '"namespace": "default", "labels": {"app": "web"}}')
    subprocess.run(["kubectl", f"--kubeconfig={cluster.kubeconfig}", "create", "-f", "-"], input=labelled, text=True,
                   check=True, capture_output=True, timeout=60)
    # Kopf's example lists every pod of the namespace: a Store of [False] is not empty, so true.
    cluster.wait_until("the index has the pod", lambda: running_pods(cluster) == ["default::example-pod"])
    runner.wait_for("{('app', 'web'): ['example-pod']}")
    cluster("delete", "pod", "example-pod", "--wait=true", "--timeout=30s")
    cluster.wait_until("the index drops the pod", lambda: running_pods(cluster) == [])


def kex(name: str, field: str, labels: str = "") -> str:
    return (f"apiVersion: kopf.dev/v1\nkind: KopfExample\nmetadata:\n  name: {name}\n  namespace: default\n"
            f"  labels: {{{labels}}}\nspec:\n  field: {field}\n")


def admission_17(cluster, runner):
    # Kopf's example sets `settings.admission.managed = 'auto.kopf.dev'` in its startup handler
    # (after trying every kind of webhook server; the last, WebhookAutoServer, is the one).
    runner.wait_for("MutatingWebhookConfiguration 'auto.kopf.dev' is created: 1 webhook(s).")

    def apply(yaml: str, *extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(["kubectl", f"--kubeconfig={cluster.kubeconfig}", "apply", "-f", "-", *extra], input=yaml,
                              text=True, capture_output=True, timeout=60)

    denied = apply(kex("wrong-1", "wrong"))
    assert denied.returncode != 0, denied.stdout
    assert ('admission webhook "validate1.auto.kopf.dev" denied the request: '
            "Meh! I don't like it. Change the field.") in denied.stderr, denied.stderr
    runner.wait_for("[default/wrong-1] Handler 'validate1' denied the CREATE request: Meh! I don't like it. Change the field.")
    lazy = apply(kex("lazy-1", "not-allowed"))
    assert lazy.returncode != 0 and "denied the request: I'm too lazy anyway. Go away!" in lazy.stderr, lazy.stderr
    dry = apply(kex("dry-1", "wrong"), "--dry-run=server")
    assert dry.returncode == 0, dry.stderr
    assert cluster("get", "kex", "dry-1", check=False).returncode != 0, "a dry run stores nothing"
    good = apply(kex("good-1", "value", "somelabel: somevalue"))
    assert good.returncode == 0, good.stderr
    assert "Warning: Accessing as user-agent: " in good.stderr, good.stderr  # authhook's warnings
    assert "Warning: SSL peer " in good.stderr, good.stderr
    assert cluster.get("kex", "good-1")["spec"]["injected"] == 123
    # validate_subresources (subresource='*': Kopf's webhook rule is `kopfexamples/*`, the
    # subresources only) guards the status.
    status = cluster("patch", "kex", "good-1", "--subresource=status", "--type=merge", "-p",
                     '{"status": {"field": "other"}}', check=False)
    assert status.returncode != 0 and "status.field MUST be equal to spec.field!" in status.stderr, status.stderr
    cluster("patch", "kex", "good-1", "--subresource=status", "--type=merge", "-p", '{"status": {"field": "value"}}')


def daemons_14(cluster, runner):
    runner.wait_for(f"{OBJECT} => Ping from a sync daemon: field='value', retry=3")
    runner.wait_for(f"{OBJECT} => Ping from an async daemon: field='value'")


CASES = [
    Case("01-minimal", succeeded=["create_fn"], lines=["And here we are! Creating: {'duration': '1m'"]),
    Case("02-children", succeeded=["create_fn"], then=status_02),
    Case("03-exceptions", succeeded=["eventual_success_with_a_few_messages"],
         failed=["instant_failure_with_only_a_message", "eventual_failure_with_tracebacks", "instant_failure_with_traceback"],
         tracebacks=True),
    Case("04-events", succeeded=["create_fn"], then=events_04),
    Case("05-handlers", succeeded=["create_fn_1", "create_fn_2"], deletes=["delete_fn_1", "delete_fn_2"],
         lines=["CREATED 1st", "CREATED 2nd"], then=update_05),
    Case("06-peering", succeeded=["create_fn"],
         lines=["Default peering object is not found, falling back to the standalone mode."]),
    Case("07-subhandlers", succeeded=["create_fn/item1", "create_fn/item2", "create_fn"],
         lines=["=== Handling creation for item1. ===", "=== Handling creation for item2. ==="]),
    Case("08-events", lines=["Event received: {'type': 'ADDED'", "Handler 'event_fn_with_error' failed"], tracebacks=True),
    Case("10-builtins", create_object=False, then=pods_10, absent=["Pod killing happens NOW!"]),
    Case("11-filtering-handlers",
         succeeded=["create_with_labels_matching", "create_with_labels_present", "create_with_labels_absent",
                    "create_with_labels_callback_matching", "create_with_annotations_matching",
                    "create_with_annotations_present", "create_with_annotations_absent", "create_with_filter_satisfied",
                    "create_with_field_value_satisfied/spec.field", "create_with_field_presence_satisfied/spec.field"],
         absent=["Annotation callback mismatch.", "Filter not satisfied.", "Field value is not satisfied.",
                 "Field presence is not satisfied."],
         lines=["Field daemon is satisfied."], then=update_11),
    Case("13-hooks", create_object=False, then=pods_13,
         lines=["Logging in in 2s...", "Activity 'startup_fn_simple' succeeded.", "Starting retried...",
                "Activity 'startup_fn_retried' succeeded."],
         activities=["startup_fn_simple", "startup_fn_retried", "cleanup_fn"],
         at_exit=["Cleaning up...", "All pod-tasks are requested to stop..."]),
    # Deleting the object stops the daemons (StopDaemon) and waits for them: the sync one returns
    # and succeeds, as in Kopf, before the object goes.
    Case("14-daemons", then=daemons_14, lines=["Simulated failure."],
         at_exit=[f"{OBJECT} Daemon 'background_sync' succeeded."]),
    Case("15-timers", lines=[f"{OBJECT} Ping from a sync timer: field='value'", f"{OBJECT} Ping from an async timer: field='value'"]),
    Case("16-indexing", then=indices_16),
    Case("17-admission", create_object=False, then=admission_17),
    Case("99-all-at-once", succeeded=["create_1", "create_2", "create_pod"], deletes=["delete"], tracebacks=True,
         lines=["Starting retried...", "Handler 'create_2' failed with an exception. Will retry.",
                "This pod is special for us."], then=update_99,
         activities=["startup_fn_simple", "startup_fn_retried", "cleanup_fn"], at_exit=["Cleaning up in 3s..."]),
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
    args = ["dev", "--dir", str(tmp_path), "--apply", str(CRD), str(HERE / case.folder / "example.py")]
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
    """The operator inside an application (`bosun.operator()` in a thread): the app creates
    and deletes three objects; each is handled once and its deletion completes."""
    cluster = ["dev", "--cluster-only", "--dir", str(tmp_path), "--apply", str(CRD)]
    with bosun.testing.Runner(cluster, timeout=60) as dev:
        dev.wait_for("Serving the dev cluster only")
        env = dict(os.environ, KUBECONFIG=str(tmp_path / "kubeconfig"))
        app = subprocess.run([sys.executable, str(HERE / "12-embedded" / "example.py")], env=env, capture_output=True,
                             text=True, timeout=120)
    output = app.stdout + app.stderr
    assert app.returncode == 0, output
    assert dev.exit_code == 0, dev.output
    assert "Starting the main app." in output and "Exiting the main app." in output
    for step in range(3):
        assert output.count(f"[default/kopf-example-{step}] Handler 'create_fn' succeeded.") == 1, output
        assert output.count(f"[default/kopf-example-{step}] Handler 'delete_fn' succeeded.") == 1, output
        # The handlers print the templates of the operator's memo (kopf.operator(memo=...)).
        assert output.count(f"Hello, kopf-example-{step}!") == 1, output
        assert output.count(f"Good bye, kopf-example-{step}!") == 1, output
    assert "Traceback" not in output, output
    assert "The controller has stopped." in output, output
