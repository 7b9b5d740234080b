"""Kopf's `OperatorSettings`: what startup handlers change (`changes`), and how the changes
become the contract's `OperatorSettings` (`to_contract`), each unsupported one named in
`ignored`. Kopf's defaults themselves are checked against the recorded API (test_kopf_api)."""

import concurrent.futures
import logging
import warnings

import pytest

import bosun
from bosun import _settings
from bosun._settings_contract import to_contract
from bosun.v1 import handler_pb2 as pb


def set_batch_window(s):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        s.batching.batch_window = 0.5


@pytest.mark.parametrize("change, expected", [
    (lambda s: None, {}),
    (lambda s: setattr(s.posting, "level", logging.WARNING), {"posting.level": logging.WARNING}),
    (lambda s: setattr(s.posting, "level", logging.INFO), {}),  # Kopf's default again: no change
    (lambda s: setattr(s.persistence, "finalizer", "x/y"), {"persistence.finalizer": "x/y"}),
    (lambda s: setattr(s.peering, "namespaced", False), {"peering.clusterwide": True}),
    (set_batch_window, {"queueing.batch_window": 0.5}),
    (lambda s: setattr(s.execution, "max_workers", 3), {"execution.max_workers": 3}),
    (lambda s: s.watching.label_selectors.__setitem__("kopfexamples", "a=b"), {"watching.label_selectors": ...}),
    (lambda s: setattr(s.persistence, "progress_storage", bosun.SmartProgressStorage()), {}),
    (lambda s: setattr(s.persistence, "progress_storage", bosun.SmartProgressStorage(prefix="my.dev")),
     {"persistence.progress_storage": ...}),
    (lambda s: setattr(s.persistence, "diffbase_storage", bosun.AnnotationsDiffBaseStorage()), {}),
    (lambda s: setattr(s.persistence, "diffbase_storage", bosun.StatusDiffBaseStorage()),
     {"persistence.diffbase_storage": ...}),
    (lambda s: setattr(s.admission, "server", bosun.WebhookServer(port=1234)), {"admission.server": ...}),
    (lambda s: setattr(s.execution, "executor", concurrent.futures.ThreadPoolExecutor(max_workers=2)),
     {"execution.executor": ...}),
])
def test_changes_are_what_differs_from_kopfs_defaults(change, expected):
    settings = bosun.OperatorSettings()
    change(settings)
    found = _settings.changes(settings)
    assert set(found) == set(expected)
    for name, value in expected.items():
        if value is not ...:
            assert found[name] == value


def test_the_process_has_one_settings_object():
    previous = _settings.replace(None)
    try:
        first = _settings.current()
        assert _settings.current() is first and isinstance(first, bosun.OperatorSettings)
    finally:
        _settings.replace(previous)


def test_deprecated_names_warn_as_in_kopf():
    settings = bosun.OperatorSettings()
    with pytest.warns(DeprecationWarning):
        assert settings.batching is settings.queueing
    with pytest.raises(ValueError):
        settings.execution.max_workers = 0


@pytest.mark.parametrize("changes, expected", [
    ({"persistence.finalizer": "my.dev/fin"}, pb.OperatorSettings(finalizer="my.dev/fin")),
    ({"posting.enabled": False, "posting.loggers": True},
     pb.OperatorSettings(posting_enabled=False, posting_loggers=True)),
    ({"posting.level": logging.DEBUG}, pb.OperatorSettings(posting_level=pb.LogLine.LEVEL_DEBUG)),
    ({"posting.level": logging.WARNING}, pb.OperatorSettings(posting_level=pb.LogLine.LEVEL_WARNING)),
    ({"posting.level": 25}, pb.OperatorSettings(posting_level=pb.LogLine.LEVEL_WARNING)),
    ({"posting.level": "error"}, pb.OperatorSettings(posting_level=pb.LogLine.LEVEL_ERROR)),
    ({"posting.level": logging.CRITICAL}, pb.OperatorSettings(
        posting_level=pb.LogLine.LEVEL_ERROR, ignored=["posting.level: 50 is above ERROR; the controller posts ERROR and up"])),
    ({"watching.server_timeout": 300}, pb.OperatorSettings(watching_server_timeout_seconds=300.0)),
    ({"watching.server_timeout": None}, pb.OperatorSettings(
        ignored=["watching.server_timeout: None; the controller's own value applies"])),
    ({"execution.max_workers": 8}, pb.OperatorSettings(max_workers=8)),
    ({"peering.name": "p", "peering.priority": 10, "peering.standalone": True, "peering.mandatory": True},
     pb.OperatorSettings(peering_name="p", peering_priority=10, peering_standalone=True, peering_mandatory=True)),
    ({"admission.managed": "auto.example.com"}, pb.OperatorSettings(admission_managed="auto.example.com")),
    ({"queueing.batch_window": 0.5}, pb.OperatorSettings(ignored=["queueing.batch_window: the controller batches nothing"])),
    ({"queueing.worker_limit": 5}, pb.OperatorSettings(
        ignored=["queueing.worker_limit: the controller runs one worker per object and schedules them itself"])),
    ({"networking.request_timeout": 10, "peering.lifetime": 30}, pb.OperatorSettings(ignored=[
        "networking.request_timeout: the controller makes its own API requests, with its own timeouts and retries",
        "peering.lifetime: give it as `bosun run --peering-lifetime`"])),
])
def test_changes_map_onto_the_contract(changes, expected):
    assert to_contract(pb, changes) == expected


ANNOTATIONS = pb.StateStorage.KIND_ANNOTATIONS
STATUS = pb.StateStorage.KIND_STATUS


@pytest.mark.parametrize("name, storage, expected, ignored", [
    ("progress_storage", bosun.AnnotationsProgressStorage(prefix="my.dev", v1=False),
     pb.StateStorage(kind=ANNOTATIONS, prefix="my.dev", v1=False), []),
    ("progress_storage", bosun.SmartProgressStorage(prefix="my.dev"),
     pb.StateStorage(kind=ANNOTATIONS, prefix="my.dev", v1=True), []),
    ("progress_storage", bosun.StatusProgressStorage(name="my"),
     pb.StateStorage(kind=STATUS, field="status.my.progress"), []),
    ("progress_storage", bosun.StatusProgressStorage(field="status.x.y"), pb.StateStorage(kind=STATUS, field="status.x.y"), []),
    ("progress_storage", bosun.AnnotationsProgressStorage(verbose=True),
     pb.StateStorage(kind=ANNOTATIONS, prefix="kopf.zalando.org", v1=True),
     ["persistence.progress_storage.verbose: the controller writes compact records"]),
    ("progress_storage", bosun.MultiProgressStorage([bosun.StatusProgressStorage(), bosun.AnnotationsProgressStorage()]),
     pb.StateStorage(kind=STATUS, field="status.kopf.progress"),
     ["persistence.progress_storage: a MultiProgressStorage is kept in its first storage only"]),
    ("diffbase_storage", bosun.AnnotationsDiffBaseStorage(prefix="my.dev", key="last"),
     pb.StateStorage(kind=ANNOTATIONS, prefix="my.dev", key="last", v1=True), []),
    ("diffbase_storage", bosun.StatusDiffBaseStorage(), pb.StateStorage(
        kind=STATUS, field="status.kopf.last-handled-configuration"), []),
    ("diffbase_storage", bosun.AnnotationsDiffBaseStorage(ignored_fields=["spec.x"]),
     pb.StateStorage(kind=ANNOTATIONS, prefix="kopf.zalando.org", key="last-handled-configuration", v1=True),
     ["persistence.diffbase_storage.ignored_fields: the controller ignores no fields of its own"]),
])
def test_storages_map_onto_state_storages(name, storage, expected, ignored):
    contract = to_contract(pb, {f"persistence.{name}": storage})
    assert getattr(contract, name) == expected
    assert list(contract.ignored) == ignored


class CustomStorage(bosun.ProgressStorage):
    def fetch(self, **_):
        return None


def test_custom_storages_are_ignored_with_why():
    contract = to_contract(pb, {"persistence.progress_storage": CustomStorage()})
    assert not contract.HasField("progress_storage")
    assert list(contract.ignored) == [
        "persistence.progress_storage: CustomStorage is custom code; the controller keeps progress itself"]


@pytest.mark.parametrize("server, expected, ignored", [
    (bosun.WebhookServer(addr="127.0.0.1", port=9443, certfile="c.pem", pkeyfile="k.pem", cafile="ca.pem"),
     pb.AdmissionServer(listen="127.0.0.1:9443", certfile="c.pem", pkeyfile="k.pem", cafile="ca.pem"), []),
    (bosun.WebhookServer(port=8443, host="op.example.com"), pb.AdmissionServer(listen="0.0.0.0:8443", host="op.example.com"), []),
    (bosun.WebhookServer(addr="::1"), pb.AdmissionServer(listen="[::1]:0"), []),
    (bosun.WebhookK3dServer(), pb.AdmissionServer(host="host.k3d.internal"), []),
    (bosun.WebhookMinikubeServer(host="mine"), pb.AdmissionServer(host="mine"), []),
    (bosun.WebhookDockerDesktopServer(), pb.AdmissionServer(host="host.docker.internal"), []),
    (bosun.WebhookServer(path="/hooks", insecure=True), pb.AdmissionServer(), [
        "admission.server.path: the controller's webhook server has no such option",
        "admission.server.insecure: the controller's webhook server has no such option"]),
    (bosun.WebhookAutoServer(port=1), pb.AdmissionServer(listen="0.0.0.0:1"), [
        "admission.server: no cluster guessing; the controller's default address applies"]),
])
def test_webhook_servers_map_onto_the_admission_server(server, expected, ignored):
    contract = to_contract(pb, {"admission.server": server})
    assert contract.admission_server == expected
    assert list(contract.ignored) == ignored


@pytest.mark.parametrize("tunnel", [bosun.WebhookNgrokTunnel(token="t"), bosun.WebhookAutoTunnel(),
                                    lambda fn: iter(())])
def test_tunnels_and_custom_servers_are_ignored_with_why(tunnel):
    contract = to_contract(pb, {"admission.server": tunnel})
    assert not contract.HasField("admission_server")
    [why] = contract.ignored
    assert why.startswith("admission.server: ") and "cannot run in the controller" in why


def test_a_startup_handlers_whole_story_maps_end_to_end():
    settings = bosun.OperatorSettings()
    settings.persistence.finalizer = "example.com/finalizer"
    settings.persistence.progress_storage = bosun.AnnotationsProgressStorage(prefix="example.com")
    settings.posting.level = logging.ERROR
    settings.watching.inactivity_timeout = 30
    contract = to_contract(pb, _settings.changes(settings))
    assert contract.finalizer == "example.com/finalizer" and contract.posting_level == pb.LogLine.LEVEL_ERROR
    assert contract.progress_storage == pb.StateStorage(kind=ANNOTATIONS, prefix="example.com", v1=True)
    assert [line.split(":")[0] for line in contract.ignored] == ["watching.inactivity_timeout"]


@pytest.mark.parametrize("server", [bosun.WebhookServer(), bosun.WebhookNgrokTunnel(), bosun.WebhookAutoTunnel()])
def test_webhook_servers_serve_nothing_themselves(server):
    with pytest.raises(RuntimeError, match="the controller serves the admission webhooks"):
        server(lambda *a, **k: None)
