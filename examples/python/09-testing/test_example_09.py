"""Kopf's example 09: an operator tested end to end with pytest, Bosun's way.

`bosun.testing.Runner` is Kopf's `KopfRunner`: it runs `bosun dev` (the embedded dev
cluster, the controller and this example's handlers) in the background of the test and
collects the output. Kopf's original sleeps to let the operator react; here the test waits
for the lines it expects, so it is as fast as the operator and never flaky."""

import json
import pathlib
import subprocess

import bosun.testing

here = pathlib.Path(__file__).resolve().parent
crd_yaml = here.parent.parent / 'crd.yaml'
obj_yaml = here.parent.parent / 'obj.yaml'
example_py = here / 'example.py'


def kubectl(kubeconfig, *args):
    return subprocess.run(['kubectl', f'--kubeconfig={kubeconfig}', *args],
                          check=True, capture_output=True, text=True, timeout=60).stdout


def test_resource_lifecycle(tmp_path):
    kubeconfig = tmp_path / 'kubeconfig'

    # Run an operator on a dev cluster of its own, and simulate some activity with the operated resource.
    with bosun.testing.Runner(['dev', '--verbose', '--standalone', '--dir', str(tmp_path),
                               '--apply', str(crd_yaml), str(example_py)], timeout=60) as runner:
        runner.wait_for('Serving kopfexamples.v1.kopf.dev')
        kubectl(kubeconfig, 'create', '-f', str(obj_yaml))
        runner.wait_for('[default/kopf-example-1] Creation is processed:')
        kubectl(kubeconfig, 'delete', '-f', str(obj_yaml), '--wait=true', '--timeout=30s')

    # Ensure that the operator did not die on start, or during the operation.
    assert runner.exception is None
    assert runner.exit_code == 0

    # There are usually more than these messages, but we only check for the certain ones.
    assert '[default/kopf-example-1] Something was logged here.' in runner.output
    assert 'failed permanently' not in runner.output
    assert 'failed temporarily' not in runner.output


def test_the_handled_state_is_stored_on_the_object(tmp_path):
    kubeconfig = tmp_path / 'kubeconfig'

    with bosun.testing.Runner(['dev', '--dir', str(tmp_path), '--apply', str(crd_yaml),
                               '--apply', str(obj_yaml), str(example_py)], timeout=60) as runner:
        runner.wait_for('[default/kopf-example-1] Creation is processed:')
        obj = json.loads(kubectl(kubeconfig, 'get', '-f', str(obj_yaml), '-o', 'json'))

    assert runner.exit_code == 0
    # What was handled (the diffbase), so a restarted controller does not handle it again.
    assert 'last-handled-configuration' in obj['status']['bosun.dev']
    assert runner.output.count("Handler 'create_fn' succeeded.") == 1
