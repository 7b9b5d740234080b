"""Kopf's helpers for children (`adopt`, `label`, `harmonize_naming`, `adjust_namespace`,
owner references) and reference builders, on dicts, kubernetes client models and pykube
objects, with Kopf's rules."""

import pytest

import bosun
from bosun import _context

kubernetes = pytest.importorskip("kubernetes")
pykube = pytest.importorskip("pykube")
from kubernetes.client import (V1CronJob, V1CronJobSpec, V1JobTemplateSpec, V1ObjectMeta,  # noqa: E402
                               V1OwnerReference, V1Pod)

OWNER = {"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
         "metadata": {"name": "kex1", "namespace": "ns1", "uid": "uid-1", "labels": {"app": "a", "tier": "t"}}}
REF = {"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "name": "kex1", "uid": "uid-1", "controller": True,
       "blockOwnerDeletion": True}


def as_dict(obj):
    """What the helpers did, read the same from each kind of object."""
    if isinstance(obj, dict):
        return obj
    if isinstance(obj, pykube.objects.APIObject):
        return obj.obj
    return kubernetes.client.ApiClient().sanitize_for_serialization(obj)


def pod_dict(**meta):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": dict(meta)}


def pod_model(**meta):
    snake = {"generateName": "generate_name"}  # older clients take only Python names
    meta = {snake.get(key, key): value for key, value in meta.items()}
    return V1Pod(api_version="v1", kind="Pod", metadata=V1ObjectMeta(**meta) if meta else None)


def pod_pykube(**meta):
    return pykube.Pod(None, pod_dict(**meta))


KINDS = [pytest.param(pod_dict, id="dict"), pytest.param(pod_model, id="model"), pytest.param(pod_pykube, id="pykube")]


@pytest.mark.parametrize("make", KINDS)
@pytest.mark.parametrize("meta, action, expected", [
    ({}, lambda o: bosun.adopt(o, owner=OWNER),
     {"namespace": "ns1", "generateName": "kex1-", "labels": {"app": "a", "tier": "t"}, "ownerReferences": [REF]}),
    ({"name": "own", "namespace": "other", "labels": {"app": "mine"}}, lambda o: bosun.adopt(o, owner=OWNER),
     {"name": "own", "namespace": "other", "labels": {"app": "mine", "tier": "t"}, "ownerReferences": [REF]}),
    ({"name": "own", "namespace": "other", "labels": {"app": "mine"}}, lambda o: bosun.adopt(o, owner=OWNER, forced=True),
     {"generateName": "kex1-", "namespace": "ns1", "labels": {"app": "a", "tier": "t"}, "ownerReferences": [REF]}),
    ({}, lambda o: bosun.adopt(o, owner=OWNER, strict=True),
     {"name": "kex1", "namespace": "ns1", "labels": {"app": "a", "tier": "t"}, "ownerReferences": [REF]}),
    ({"labels": {"x": "1"}}, lambda o: bosun.label(o, {"x": "2", "y": "3"}), {"labels": {"x": "1", "y": "3"}}),
    ({"labels": {"x": "1"}}, lambda o: bosun.label(o, {"x": "2"}, forced=True), {"labels": {"x": "2"}}),
    ({"generateName": "g-"}, lambda o: bosun.harmonize_naming(o, "n"), {"generateName": "g-"}),
    ({"generateName": "g-"}, lambda o: bosun.harmonize_naming(o, "n", forced=True, strict=True), {"name": "n"}),
    ({"namespace": "a"}, lambda o: bosun.adjust_namespace(o, "b"), {"namespace": "a"}),
    ({"namespace": "a"}, lambda o: bosun.adjust_namespace(o, "b", forced=True), {"namespace": "b"}),
    ({}, lambda o: [bosun.append_owner_reference(o, owner=OWNER, controller=False, block_owner_deletion=None)] * 2,
     {"ownerReferences": [{"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "name": "kex1", "uid": "uid-1",
                           "controller": False}]}),
    ({}, lambda o: (bosun.append_owner_reference(o, owner=OWNER), bosun.remove_owner_reference(o, owner=OWNER)),
     {"ownerReferences": []}),
])
def test_helpers_treat_every_kind_of_object_alike(make, meta, action, expected):
    obj = make(**meta)
    action(obj)
    assert as_dict(obj)["metadata"] == expected


@pytest.mark.parametrize("objs", [
    pytest.param(lambda: [pod_dict(), [pod_model(), (pod_pykube(),)]], id="nested-iterables"),
    pytest.param(lambda: (pod_dict() for _ in range(2)), id="generator"),
])
def test_helpers_walk_any_nesting_of_objects(objs):
    objs = list(objs())
    bosun.adjust_namespace(objs, "ns9")
    flat = []

    def flatten(items):
        for item in items:
            flatten(item) if isinstance(item, (list, tuple)) else flat.append(item)
    flatten(objs)
    assert [as_dict(o)["metadata"]["namespace"] for o in flat] == ["ns9"] * len(flat)


def test_labels_reach_nested_sections_that_exist():
    deployment = {"spec": {"template": {"metadata": {"labels": {"own": "1"}}}}}
    bosun.label(deployment, {"app": "a"}, nested="spec.template")
    bosun.label(deployment, {"more": "m"}, nested=["spec.jobTemplate"])  # absent: nothing created
    assert deployment["spec"] == {"template": {"metadata": {"labels": {"own": "1", "app": "a"}}}}

    model = V1CronJob(spec=V1CronJobSpec(schedule="* * * * *", job_template=V1JobTemplateSpec()))
    bosun.label(model, {"app": "a"}, nested="spec.jobTemplate")  # JSON names, as in dicts
    assert model.metadata.labels == {"app": "a"} and model.spec.job_template.metadata.labels == {"app": "a"}


def test_label_accepts_kopfs_deprecated_force():
    obj = pod_dict(labels={"x": "1"})
    with pytest.warns(DeprecationWarning):
        bosun.label(obj, {"x": "2"}, force=True)
    assert obj["metadata"]["labels"] == {"x": "2"}


def test_models_get_model_owner_references():
    pod = pod_model()
    bosun.append_owner_reference(pod, owner=OWNER)
    [ref] = pod.metadata.owner_references
    assert isinstance(ref, V1OwnerReference) and (ref.uid, ref.controller, ref.block_owner_deletion) == ("uid-1", True, True)


@pytest.mark.parametrize("action", [
    lambda: bosun.adopt(pod_dict()), lambda: bosun.label(pod_dict()), lambda: bosun.harmonize_naming(pod_dict()),
    lambda: bosun.adjust_namespace(pod_dict()), lambda: bosun.append_owner_reference(pod_dict()),
])
def test_outside_a_handler_the_owner_must_be_given(action):
    with pytest.raises(LookupError):
        action()


def test_inside_a_handler_the_owner_is_the_handled_object():
    child = pod_dict()
    with _context.calling(OWNER, lambda *_: None):
        bosun.adopt(child)
    assert child["metadata"]["ownerReferences"] == [REF] and child["metadata"]["namespace"] == "ns1"


def test_an_explicitly_missing_name_is_an_error_as_in_kopf():
    with pytest.raises(LookupError):
        bosun.harmonize_naming(pod_dict(), None)


def test_unsupported_objects_are_refused():
    with pytest.raises(TypeError):
        bosun.label(object(), {"a": "b"})


@pytest.mark.parametrize("build, expected", [
    (lambda: bosun.build_object_reference(OWNER),
     {"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "name": "kex1", "uid": "uid-1", "namespace": "ns1"}),
    (lambda: bosun.build_object_reference({"kind": "Node", "metadata": {"name": "n"}}), {"kind": "Node", "name": "n"}),
    (lambda: bosun.build_owner_reference(OWNER), REF),
    (lambda: bosun.build_owner_reference(OWNER, controller=None, block_owner_deletion=False),
     {"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "name": "kex1", "uid": "uid-1", "blockOwnerDeletion": False}),
    (lambda: bosun.build_owner_reference(bosun.Body(OWNER)), REF),
])
def test_references_are_built_as_kopf_builds_them(build, expected):
    assert build() == expected
