"""Kopf's login and settings in the handler server: the `kubernetes` client configured as Kopf's
default login does, `@on.login` handlers run when the server starts, and what startup handlers
(or a test's `KopfRunner(settings=...)`) set reaches the controller."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap

import pytest

import bosun
from bosun import _login, _settings, _settings_env
from bosun.v1 import handler_pb2 as pb
from sdk_support import request

KUBECONFIG = textwrap.dedent("""\
    apiVersion: v1
    kind: Config
    clusters: [{name: c, cluster: {server: "http://127.0.0.1:6553"}}]
    users: [{name: u, user: {token: secret-token}}]
    contexts: [{name: x, context: {cluster: c, user: u, namespace: team}}]
    current-context: x
""")


def _run(code: str, kubeconfig) -> subprocess.CompletedProcess:
    env = dict(os.environ, KUBECONFIG=str(kubeconfig), PYTHONPATH=os.pathsep.join(sys.path))
    env.pop("KUBERNETES_SERVICE_HOST", None)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, timeout=60)


def test_the_default_login_configures_the_kubernetes_client_at_start_as_kopfs_does(tmp_path):
    pytest.importorskip("kubernetes")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    code = """
        import asyncio, logging
        import bosun
        from bosun import _login, _settings
        logging.basicConfig(level=logging.INFO, format="%(message)s")
        asyncio.run(_login.login(bosun.Registry(), _settings.current()))
        import kubernetes
        config = kubernetes.client.Configuration.get_default_copy()
        print(config.host, config.api_key.get("authorization") or config.api_key.get("BearerToken"))
    """
    out = _run(code, kubeconfig)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["http://127.0.0.1:6553", "Bearer", "secret-token"]
    assert "Activity 'login_via_client' succeeded." in out.stderr.splitlines()


def test_the_default_login_passes_over_client_libraries_that_are_not_installed(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    out = _run("""
        import asyncio, logging, sys
        class NotInstalled:  # as if neither client library were installed
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("kubernetes", "pykube"):
                    raise ModuleNotFoundError(name)
        sys.meta_path.insert(0, NotInstalled())
        import bosun
        from bosun import _login, _settings
        logging.basicConfig(level=logging.INFO, format="%(message)s")
        asyncio.run(_login.login(bosun.Registry(), _settings.current()))
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("kubernetes", "pykube")))
    """, kubeconfig)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]" and "succeeded" not in out.stderr


def test_login_handlers_run_instead_of_the_default_and_are_retried():
    registry = bosun.Registry()
    calls = []

    @bosun.on.login(registry=registry)
    def login_fn(retry, **_):
        calls.append(retry)
        if retry < 2:
            raise bosun.TemporaryError("not yet", delay=0)
        return bosun.ConnectionInfo(server="https://example:443", token="t")

    asyncio.run(_login.login(registry, _settings.OperatorSettings()))
    assert calls == [0, 1, 2]
    # A registered login handler replaces Kopf's defaults: nothing else is logged in.


def test_a_login_handler_that_fails_for_good_stops_the_server():
    registry = bosun.Registry()

    @bosun.on.login(registry=registry, errors=bosun.ErrorsMode.PERMANENT)
    def login_fn(**_):
        raise RuntimeError("no credentials")

    with pytest.raises(bosun.LoginError, match="login_fn.*no credentials"):
        asyncio.run(_login.login(registry, _settings.OperatorSettings()))


def test_login_handlers_are_not_described_to_the_controller(registry, serve):
    bosun.on.login(registry=registry)(lambda **_: None)
    bosun.on.create("kex", id="create_fn", registry=registry)(lambda **_: None)
    assert [h.id for h in serve(registry).stub.Describe(pb.DescribeRequest()).handlers] == ["create_fn"]


def test_login_with_kubeconfig_reads_the_current_context(tmp_path, monkeypatch):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    info = bosun.login_with_kubeconfig()
    assert (info.server, info.token, info.default_namespace) == ("http://127.0.0.1:6553", "secret-token", "team")


@pytest.fixture
def fresh_settings():
    previous = _settings.replace(_settings.OperatorSettings())
    yield _settings.current()
    _settings.replace(previous)


def test_what_startup_handlers_set_goes_to_the_controller(registry, serve, fresh_settings):
    @bosun.on.startup(registry=registry)
    def configure(settings: bosun.OperatorSettings, **_):
        settings.persistence.finalizer = "example.com/finalizer"
        settings.persistence.progress_storage = bosun.AnnotationsProgressStorage(prefix="example.com")
        settings.posting.level = 30  # logging.WARNING
        settings.watching.server_timeout = 10

    answer = serve(registry).stub.Activity(pb.ActivityRequest(handler_id="configure", kind=pb.HANDLER_KIND_STARTUP))
    assert answer.outcome == pb.OUTCOME_SUCCESS, answer.message
    sent = answer.settings
    assert sent.finalizer == "example.com/finalizer"
    assert (sent.progress_storage.kind, sent.progress_storage.prefix) == (pb.StateStorage.KIND_ANNOTATIONS, "example.com")
    assert sent.posting_level == pb.LogLine.LEVEL_WARNING
    assert sent.watching_server_timeout_seconds == 10


def test_kopfs_default_backoff_applies_to_handlers_without_their_own(registry, serve, fresh_settings):
    @bosun.on.create("kex", registry=registry)
    def create_fn(**_):
        raise ValueError("boom")

    bosun.on.update("kex", backoff=5, registry=registry)(create_fn)
    server = serve(registry)
    assert not server.stub.Describe(pb.DescribeRequest()).handlers[0].options.HasField("backoff_seconds")
    fresh_settings.execution.default_backoff = 1  # as Kopf's e2e test sets it
    described = server.stub.Describe(pb.DescribeRequest()).handlers
    assert [h.options.backoff_seconds for h in described] == [1.0, 5.0]
    failed = server.stub.Handle(request("create_fn", handler_key=described[0].key))
    assert (failed.outcome, failed.delay_seconds) == (pb.OUTCOME_UNEXPECTED_ERROR, 1.0)


def test_settings_given_to_a_runner_reach_the_handler_server_process():
    settings = bosun.OperatorSettings()
    settings.execution.default_backoff = 1
    settings.watching.server_timeout = 10
    settings.persistence.diffbase_storage = bosun.AnnotationsDiffBaseStorage(prefix="example.com", key="last")
    text = _settings_env.dumps(settings)
    other = bosun.OperatorSettings()
    _settings_env.apply(text, other)
    assert _settings.changes(other).keys() == _settings.changes(settings).keys()
    assert other.execution.default_backoff == 1 and other.watching.server_timeout == 10
    storage = other.persistence.diffbase_storage
    assert (type(storage), storage.prefix, storage.key) == (bosun.AnnotationsDiffBaseStorage, "example.com", "last")
    assert json.loads(_settings_env.dumps(bosun.OperatorSettings())) == {}
