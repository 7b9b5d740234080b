"""Handlers' kwargs as Kopf's: read-only views of the object, the writable `patch`, `diff` and
`resource`; and that handlers really get them from the server."""

import copy
import json

import pytest

import bosun
from bosun import _kwargs, _patches
from bosun._server import _diff, _resource
from bosun.v1 import handler_pb2 as pb

from sdk_support import request

BODY = {
    "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
    "metadata": {"name": "kex1", "namespace": "ns1", "uid": "uid-1", "labels": {"app": "a"},
                 "annotations": {"note": "n"}, "creationTimestamp": "2026-01-01T00:00:00Z"},
    "spec": {"field": "value"},
}
BARE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns1"}}


@pytest.mark.parametrize("body, read, expected", [
    (BODY, lambda kw: kw["body"].metadata.labels["app"], "a"),
    (BODY, lambda kw: kw["body"].meta.name, "kex1"),
    (BODY, lambda kw: kw["body"].spec["field"], "value"),
    (BODY, lambda kw: kw["body"]["kind"], "KopfExample"),
    (BODY, lambda kw: kw["meta"].uid, "uid-1"),
    (BODY, lambda kw: kw["meta"].namespace, "ns1"),
    (BODY, lambda kw: kw["meta"].creation_timestamp, "2026-01-01T00:00:00Z"),
    (BODY, lambda kw: kw["meta"].deletion_timestamp, None),
    (BODY, lambda kw: kw["meta"].annotations.get("note"), "n"),
    (BODY, lambda kw: dict(kw["labels"]), {"app": "a"}),
    (BODY, lambda kw: kw["annotations"]["note"], "n"),
    (BODY, lambda kw: (kw["uid"], kw["name"], kw["namespace"]), ("uid-1", "kex1", "ns1")),
    (BODY, lambda kw: "field" in kw["spec"] and len(kw["spec"]) == 1 and list(kw["spec"]) == ["field"], True),
    (BODY, lambda kw: kw["spec"] == {"field": "value"}, True),
    (BODY, lambda kw: repr(kw["spec"]), "{'field': 'value'}"),
    (BODY, lambda kw: dict(kw["body"]) == BODY, True),
    # Empty sections read as empty mappings and are not created by looking.
    (BARE, lambda kw: (dict(kw["spec"]), dict(kw["status"]), dict(kw["labels"]), kw["spec"].get("x", 1)), ({}, {}, {}, 1)),
    (BARE, lambda kw: (kw["namespace"], kw["uid"], bool(kw["annotations"])), (None, None, False)),
    (BARE, lambda kw: kw["body"].status.get("phase"), None),
    (BARE, lambda kw: "spec" in kw["body"], False),
])
def test_object_kwargs_read_as_kopf_views(body, read, expected):
    body = copy.deepcopy(body)
    kwargs = _kwargs.object_kwargs(body)
    assert read(kwargs) == expected
    assert set(kwargs) == {"body", "spec", "meta", "status", "uid", "name", "namespace", "labels", "annotations"}


@pytest.mark.parametrize("key, cls", [("body", bosun.Body), ("spec", bosun.Spec), ("meta", bosun.Meta),
                                      ("status", bosun.Status)])
def test_views_are_kopf_classes_and_read_only(key, cls):
    view = _kwargs.object_kwargs(copy.deepcopy(BODY))[key]
    assert isinstance(view, cls)
    with pytest.raises(TypeError):
        view["new"] = 1


def test_views_serialise_as_json_with_the_default():
    from bosun._bodies import json_default

    kwargs = _kwargs.object_kwargs(copy.deepcopy(BODY))
    assert json.loads(json.dumps({"spec": kwargs["spec"], "labels": kwargs["labels"]}, default=json_default)) == {
        "spec": {"field": "value"}, "labels": {"app": "a"}}
    with pytest.raises(TypeError):
        json.dumps(object(), default=json_default)


def test_views_follow_their_source():
    body = {"metadata": {"name": "n"}}
    kwargs = _kwargs.object_kwargs(body)
    body["spec"] = {"late": True}
    body["metadata"]["labels"] = {"x": "y"}
    assert kwargs["spec"]["late"] is True and kwargs["labels"]["x"] == "y"


@pytest.mark.parametrize("fill, expected", [
    (lambda p: p.spec.__setitem__("x", 1), {"spec": {"x": 1}}),
    (lambda p: p.status.__setitem__("phase", None), {"status": {"phase": None}}),
    (lambda p: p.meta.labels.__setitem__("l", "v"), {"metadata": {"labels": {"l": "v"}}}),
    (lambda p: p.metadata.annotations.__setitem__("a", None), {"metadata": {"annotations": {"a": None}}}),
    (lambda p: (p.spec.get("x"), p.status.get("y"), dict(p.meta.labels)), {}),  # looking creates nothing
    (lambda p: p.update(spec={"y": 2}), {"spec": {"y": 2}}),
])
def test_patch_sections_are_created_by_writing_only(fill, expected):
    patch = bosun.Patch()
    fill(patch)
    assert dict(patch) == expected
    assert _patches.prune(patch) == expected


def test_patch_fns_become_merge_patch_changes_against_the_object():
    body = {"metadata": {"name": "n", "finalizers": ["other"]}, "spec": {"keep": 1}}

    def add_finalizer(raw):
        raw["metadata"]["finalizers"].append("mine")

    patch = bosun.Patch(body=body)
    patch.status["phase"] = "done"
    patch.fns.append(add_finalizer)
    assert bool(patch) and patch.fns == [add_finalizer]
    assert _patches.prune(patch) == {"metadata": {"finalizers": ["other", "mine"]}, "status": {"phase": "done"}}
    assert body["metadata"]["finalizers"] == ["other"]  # the object itself is untouched
    assert bool(bosun.Patch(fns=[add_finalizer])) and not bosun.Patch()


@pytest.mark.parametrize("fill, expected", [
    (lambda p: None, []),
    (lambda p: p.spec.__setitem__("x", 2), [{"op": "replace", "path": "/spec/x", "value": 2}]),
    (lambda p: p.meta.labels.__setitem__("a/b", "v"), [{"op": "add", "path": "/metadata/labels", "value": {"a/b": "v"}}]),
    (lambda p: p.spec.__setitem__("x", None), [{"op": "remove", "path": "/spec/x"}]),
    (lambda p: p.fns.append(lambda raw: raw["metadata"].setdefault("finalizers", []).append("f")),
     [{"op": "add", "path": "/metadata/finalizers", "value": ["f"]}]),
    (lambda p: p.status.__setitem__("n", {"a~b": 1}), [{"op": "add", "path": "/status", "value": {"n": {"a~b": 1}}}]),
])
def test_patches_read_as_json_patches_as_in_kopf(fill, expected):
    patch = bosun.Patch(body={"metadata": {"name": "n"}, "spec": {"x": 1}})
    fill(patch)
    assert patch.as_json_patch() == expected


def test_json_patch_paths_escape_slashes_and_tildes():
    assert _patches.json_patch({"a": {}}, {"a": {"x/y~": 1}}) == [{"op": "add", "path": "/a/x~1y~0", "value": 1}]


def test_a_json_patch_needs_an_object():
    patch = bosun.Patch({"spec": {"x": 1}})
    with pytest.raises(ValueError):
        patch.as_json_patch()
    assert patch.as_json_patch({"spec": {"x": 0}}) == [{"op": "replace", "path": "/spec/x", "value": 1}]


def test_patch_fns_without_the_object_are_dropped_with_a_warning(caplog):
    patch = bosun.Patch()
    patch.fns.append(lambda raw: raw.update(x=1))
    patch.spec["y"] = 2
    assert _patches.prune(patch) == {"spec": {"y": 2}}
    assert "patch.fns are dropped" in caplog.text


def _pb_diff(op, path, old, new):
    return pb.DiffItem(operation=op, path=path, old=json.dumps(old).encode() if old is not None else b"",
                       new=json.dumps(new).encode() if new is not None else b"")


@pytest.mark.parametrize("item, check", [
    (_pb_diff(pb.DiffItem.OPERATION_ADD, ["spec", "x"], None, 1), lambda d: d.operation is bosun.DiffOperation.ADD),
    (_pb_diff(pb.DiffItem.OPERATION_CHANGE, ["spec", "x"], 1, 2), lambda d: d.op == "change" and d.operation == "change"),
    (_pb_diff(pb.DiffItem.OPERATION_REMOVE, ["spec", "x"], 1, None), lambda d: str(d.operation) == "remove"),
    (_pb_diff(pb.DiffItem.OPERATION_CHANGE, ["spec", "x"], 1, 2), lambda d: d.field == ("spec", "x")),
    (_pb_diff(pb.DiffItem.OPERATION_CHANGE, ["spec", "x"], 1, 2), lambda d: d == ("change", ("spec", "x"), 1, 2)),
    (_pb_diff(pb.DiffItem.OPERATION_CHANGE, ["spec", "x"], 1, 2), lambda d: d == ["change", ("spec", "x"), 1, 2]),
    (_pb_diff(pb.DiffItem.OPERATION_CHANGE, ["spec", "x"], {"a": 1}, [2]), lambda d: (d.old, d.new) == ({"a": 1}, [2])),
])
def test_diff_items_are_kopfs(item, check):
    diff = _diff([item])
    assert isinstance(diff, bosun.Diff) and len(diff) == 1 and isinstance(diff[0], bosun.DiffItem)
    op, field, old, new = diff[0]
    assert (op, field, old, new) == tuple(diff[0])
    assert check(diff[0])


def test_a_diff_equals_any_sequence_of_its_items():
    diff = bosun.Diff([("add", ("spec",), None, {"x": 1})])
    assert diff == [("add", ("spec",), None, {"x": 1})] and diff == (("add", ("spec",), None, {"x": 1}),)
    assert diff != [] and hash(bosun.Diff([("add", ("spec", "x"), None, 1)])) == hash(bosun.Diff([("add", ("spec", "x"), None, 1)]))
    assert repr(diff) == "(('add', ('spec',), None, {'x': 1}),)"


@pytest.mark.parametrize("resource, check", [
    (pb.Resource(group="kopf.dev", version="v1", plural="kopfexamples", kind="KopfExample", namespaced=True),
     lambda r: (r.group, r.version, r.plural, r.kind, r.namespaced) == ("kopf.dev", "v1", "kopfexamples", "KopfExample", True)),
    (pb.Resource(group="kopf.dev", version="v1", plural="kopfexamples"),
     lambda r: (r.api_version, r.name, repr(r), tuple(r)) == ("kopf.dev/v1", "kopfexamples.kopf.dev",
                                                            "kopfexamples.v1.kopf.dev", ("kopf.dev", "v1", "kopfexamples"))),
    (pb.Resource(group="", version="v1", plural="pods", kind="Pod", namespaced=True),
     lambda r: (r.api_version, r.name, r.get_url(namespace="ns", name="p")) == ("v1", "pods", "/api/v1/namespaces/ns/pods/p")),
    (pb.Resource(group="apps", version="v1", plural="deployments", namespaced=True),
     lambda r: r.get_url(server="https://k:6443/") == "https://k:6443/apis/apps/v1/deployments"),
    (pb.Resource(group="", version="v1", plural="namespaces", namespaced=False),
     lambda r: r.get_url(name="x", subresource="status", params={"a": "b"}) == "/api/v1/namespaces/x/status?a=b"),
    (pb.Resource(group="kopf.dev", version="v1", plural="kopfexamples"),
     lambda r: r == bosun.Resource("kopf.dev", "v1", "kopfexamples", kind="Other") and len({r, bosun.Resource("kopf.dev", "v1", "kopfexamples")}) == 1),
    (pb.Resource(group="kopf.dev", version="v1", plural="kopfexamples"),
     lambda r: r["plural"] == "kopfexamples"),  # Bosun's earlier dict form still reads
])
def test_the_resource_is_kopfs(resource, check):
    converted = _resource(resource)
    assert isinstance(converted, bosun.Resource)
    assert check(converted)


def test_handlers_get_kopfs_kwargs(registry, serve):
    seen = {}

    @bosun.on.update("kopfexamples", registry=registry)
    def update_fn(body, spec, meta, status, labels, diff, resource, reason, patch, **_):
        seen.update(body=body, spec=spec, meta=meta, status=status, labels=labels, diff=diff, resource=resource,
                    reason=reason, patch=patch)
        patch.status["seen"] = body.metadata.labels["app"]

    diff = [pb.DiffItem(operation=pb.DiffItem.OPERATION_CHANGE, path=["spec", "field"], old=b'"a"', new=b'"b"')]
    answer = serve(registry).stub.Handle(request("update_fn", reason=pb.REASON_UPDATE, diff=diff))
    assert answer.outcome == pb.OUTCOME_SUCCESS, answer.message
    assert isinstance(seen["body"], bosun.Body) and isinstance(seen["spec"], bosun.Spec)
    assert isinstance(seen["meta"], bosun.Meta) and isinstance(seen["status"], bosun.Status)
    assert seen["meta"].labels == {"app": "a"} and dict(seen["status"]) == {}
    assert isinstance(seen["diff"], bosun.Diff) and seen["diff"][0].op is bosun.DiffOperation.CHANGE
    assert isinstance(seen["resource"], bosun.Resource) and seen["resource"].plural == "kopfexamples"
    assert seen["reason"] == bosun.Reason.UPDATE and isinstance(seen["patch"], bosun.Patch)
    assert json.loads(answer.merge_patch) == {"status": {"seen": "a"}}
