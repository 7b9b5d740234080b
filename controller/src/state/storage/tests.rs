//! Table tests of the storage: places, key versions, Kopf's exact writes, odd inputs.

use super::*;
use crate::state::keys::{annotation_key_v1, annotation_key_v2};
use serde_json::json;

/// Kopf's mark of the prefix, written with the first state annotation under it.
const MARK: &str = "bosun.dev/kopf-managed";

fn rec(purpose: &str) -> ProgressRecord {
    ProgressRecord { purpose: Some(purpose.into()), retries: Some(1), ..Default::default() }
}

#[test]
fn state_is_read_from_annotations_and_status() {
    let s = Storage::bosun("bosun.dev", StorageKind::Status);
    let body = json!({"metadata": {"annotations": {
        "bosun.dev/last-handled-configuration": "{}\n",
        "bosun.dev/a": rec("create").encode(),
        "bosun.dev/p.c": rec("update").encode(),
    }}, "status": {"bosun.dev": {"progress": {"b": {"purpose": "create", "retries": 1}}}}});
    let st = s.read(&body, ["a", "b", "p/c", "missing"]);
    assert_eq!(st.diffbase.as_deref(), Some("{}\n"));
    assert_eq!(st.progress.keys().collect::<Vec<_>>(), vec!["a", "b", "p/c"]);
    assert_eq!(st.progress["b"], rec("create"));
    let body = json!({"status": {"bosun.dev": {"last-handled-configuration": "{\"spec\":{}}\n"}}});
    assert_eq!(s.read(&body, []).diffbase.as_deref(), Some("{\"spec\":{}}\n"));
}

#[test]
fn recorded_ids_are_found_in_both_places_without_the_controllers_other_marks() {
    let s = Storage::bosun("bosun.dev", StorageKind::Status);
    let body = json!({"metadata": {"annotations": {
        "bosun.dev/last-handled-configuration": "{}\n",
        "bosun.dev/touch-dummy": "1",
        "bosun.dev/a": rec("create").encode(),
        "bosun.dev/a.result": "{\"x\":1}",
        "bosun.dev/p.c": rec("update").encode(),
        "bosun.dev/garbage": "not json",
        "other.io/z": rec("create").encode(),
    }}, "status": {"bosun.dev": {"progress": {"b": {"purpose": "create"}}}}});
    assert_eq!(s.recorded_ids(&body), ["a", "b", "p.c"]);
    assert_eq!(s.read(&body, s.recorded_ids(&body).iter().map(String::as_str)).progress.len(), 3);
    assert!(s.recorded_ids(&json!({"metadata": {"annotations": "odd"}, "status": 5})).is_empty());
}

/// Bosun's storage with progress in `kind` and the diffbase in `diffbase_kind`.
fn bosun(kind: StorageKind, diffbase_kind: StorageKind) -> Storage {
    Storage { diffbase_kind, ..Storage::bosun("bosun.dev", kind) }
}

#[test]
fn patches_write_to_the_chosen_place_and_purge_the_other() {
    use StorageKind::{Annotations, Status};
    let ann_body = json!({"metadata": {"annotations": {"bosun.dev/a": rec("create").encode()}}});
    let st_body = json!({"status": {"bosun.dev": {"progress": {"a": {"purpose": "create", "retries": 1}}}}});
    let done = ObjectState { diffbase: Some("{}\n".into()), progress: BTreeMap::new() };
    let in_annotation =
        json!({"metadata": {"annotations": {"bosun.dev/last-handled-configuration": "{}\n", "bosun.dev/kopf-managed": "yes"}}});
    // (progress kind, diffbase kind, body, desired) → (main patch, status patch)
    let cases = [
        (Annotations, Annotations, json!({}), done.clone(), in_annotation.clone(), json!({})),
        // The default: progress in status, the diffbase in its annotation.
        (Status, Annotations, json!({}), done.clone(), in_annotation.clone(), json!({})),
        (Status, Status, json!({}), done.clone(), json!({}), json!({"status": {"bosun.dev": {"last-handled-configuration": "{}\n"}}})),
        (
            Status,
            Status,
            ann_body.clone(),
            done.clone(),
            json!({"metadata": {"annotations": {"bosun.dev/a": null}}}),
            json!({"status": {"bosun.dev": {"last-handled-configuration": "{}\n"}}}),
        ),
        (
            Annotations,
            Annotations,
            st_body.clone(),
            ObjectState { diffbase: None, progress: [("a".to_string(), rec("create"))].into() },
            json!({"metadata": {"annotations": {"bosun.dev/a": rec("create").encode(), MARK: "yes"}}}),
            json!({"status": {"bosun.dev": {"progress": {"a": null}}}}),
        ),
        (
            Status,
            Annotations,
            st_body.clone(),
            ObjectState { diffbase: None, progress: [("a".to_string(), rec("create"))].into() },
            json!({}),
            json!({}),
        ),
        // Nothing of ours left in the stanza: it goes whole, rather than stay as `{}`.
        (Status, Annotations, st_body.clone(), ObjectState::default(), json!({}), json!({"status": {"bosun.dev": null}})),
    ];
    for (kind, diffbase_kind, body, desired, want_main, want_status) in cases {
        let s = bosun(kind, diffbase_kind);
        let (mut main, mut status) = (json!({}), json!({}));
        s.patch(&body, &desired, &["a"], &mut main, &mut status);
        assert_eq!((main, status), (want_main, want_status), "{kind:?} {diffbase_kind:?} {body}");
    }
}

#[test]
fn a_diffbase_in_the_old_place_is_read_and_moves_with_the_next_write_only() {
    use StorageKind::{Annotations, Status};
    let old = "{\"spec\":{\"a\":1}}\n";
    let new = "{\"spec\":{\"a\":2}}\n";
    let db = "bosun.dev/last-handled-configuration";
    // As Bosun's builds before the diffbase moved left a handled object: all in status.
    let old_layout = json!({"status": {"bosun.dev": {"last-handled-configuration": old}, "create_fn": {"x": 1}}});
    let retrying = json!({"status": {"bosun.dev": {"last-handled-configuration": old, "progress": {"a": rec("update")}}}});
    let both = json!({"metadata": {"annotations": {db: new}}, "status": {"bosun.dev": {"last-handled-configuration": old}}});
    let s = bosun(Status, Annotations);
    assert_eq!(s.read(&old_layout, []).diffbase.as_deref(), Some(old), "read from status without the annotation");
    assert_eq!(s.read(&both, []).diffbase.as_deref(), Some(new), "the annotation first");
    let state = |diffbase: &str, progress: Option<ProgressRecord>| ObjectState {
        diffbase: Some(diffbase.into()),
        progress: progress.into_iter().map(|r| ("a".to_string(), r)).collect(),
    };
    let retried = ProgressRecord { retries: Some(2), ..rec("update") };
    // (body, desired, what the cycle writes anyway: main, status) → (main patch, status patch)
    let cases = [
        // Nothing else to write: no write of its own for a move.
        (old_layout.clone(), state(old, None), json!({}), json!({}), json!({}), json!({})),
        (both.clone(), state(new, None), json!({}), json!({}), json!({}), json!({})),
        // A write anyway: it moves into the annotation; the status copy stays until a write
        // made against a body whose annotation holds it (the status write goes before the
        // main write: should the main write fail, the copy still says the cause is handled).
        (
            old_layout.clone(),
            state(old, None),
            json!({}),
            json!({"status": {"create_fn": {"x": 2}}}),
            json!({"metadata": {"annotations": {db: old, MARK: "yes"}}}),
            json!({"status": {"create_fn": {"x": 2}}}),
        ),
        (
            retrying.clone(),
            state(old, Some(retried.clone())),
            json!({}),
            json!({}),
            json!({"metadata": {"annotations": {db: old, MARK: "yes"}}}),
            json!({"status": {"bosun.dev": {"progress": {"a": serde_json::to_value(&retried).unwrap()}}}}),
        ),
        (
            both.clone(),
            state(new, None),
            json!({"spec": {"b": 1}}),
            json!({}),
            json!({"spec": {"b": 1}}),
            json!({"status": {"bosun.dev": null}}),
        ),
        // A changed diffbase moves at once, whatever else is written; the copy follows it.
        (
            old_layout.clone(),
            state(new, None),
            json!({}),
            json!({}),
            json!({"metadata": {"annotations": {db: new, MARK: "yes"}}}),
            json!({"status": {"bosun.dev": {"last-handled-configuration": new}}}),
        ),
        // The annotation holds it: the copy goes with the next write of the status.
        (
            json!({"metadata": {"annotations": {db: old}}, "status": {"bosun.dev": {"last-handled-configuration": old}}}),
            state(old, None),
            json!({}),
            json!({"status": {"create_fn": {"x": 2}}}),
            json!({}),
            json!({"status": {"create_fn": {"x": 2}, "bosun.dev": null}}),
        ),
    ];
    for (body, desired, main_in, status_in, want_main, want_status) in cases {
        let (mut main, mut status) = (main_in.clone(), status_in.clone());
        s.patch(&body, &desired, &["a"], &mut main, &mut status);
        assert_eq!((&main, &status), (&want_main, &want_status), "{body} → {desired:?} with {main_in} {status_in}");
    }
    // The other way (`--diffbase-storage status`): from the annotation into status, likewise.
    let s = bosun(Status, Status);
    let in_annotation = json!({"metadata": {"annotations": {db: old}}});
    assert_eq!(s.read(&in_annotation, []).diffbase.as_deref(), Some(old));
    let (mut main, mut status) = (json!({}), json!({}));
    s.patch(&in_annotation, &state(old, None), &[], &mut main, &mut status);
    assert_eq!((main, status), (json!({}), json!({})), "no write of its own");
    let (mut main, mut status) = (json!({}), json!({}));
    s.patch(&in_annotation, &state(new, None), &[], &mut main, &mut status);
    assert_eq!(
        (main, status),
        (json!({"metadata": {"annotations": {db: null}}}), json!({"status": {"bosun.dev": {"last-handled-configuration": new}}}))
    );
}

#[test]
fn kopfs_diffbase_is_its_annotation_alone_and_a_status_copy_is_not_kopfs() {
    // What Kopf 1.45.2's `AnnotationsDiffBaseStorage().store()` patches (the e2e test
    // `kopf_compat` compares Bosun's essence with Kopf's own `build()` over many bodies).
    let s = Storage::kopf();
    let body = json!({"status": {"kopf": {"last-handled-configuration": "{\"spec\":{}}\n"}}, "create_fn": {"x": 1}});
    assert_eq!(s.read(&body, []).diffbase, None, "Kopf reads no diffbase from status");
    let desired = ObjectState { diffbase: Some("{\"spec\":{\"a\":1}}\n".into()), progress: BTreeMap::new() };
    let (mut main, mut status) = (json!({}), json!({"status": {"create_fn": {"x": 2}}}));
    s.patch(&body, &desired, &[], &mut main, &mut status);
    assert_eq!(main, json!({"metadata": {"annotations": {"kopf.zalando.org/last-handled-configuration": "{\"spec\":{\"a\":1}}\n"}}}));
    assert_eq!(status, json!({"status": {"create_fn": {"x": 2}}}), "status.kopf is left alone, as Kopf leaves it");
}

#[test]
fn diffbases_too_large_for_annotations_are_caught_before_writing() {
    let body = json!({"metadata": {"annotations": {"big": "x".repeat(200_000)}}});
    let cases = [(StorageKind::Annotations, 1_000, true), (StorageKind::Annotations, 70_000, false), (StorageKind::Status, 70_000, true)];
    for (kind, size, fits) in cases {
        // Where the progress goes does not matter: the diffbase's place does.
        let s = bosun(StorageKind::Status, kind);
        assert_eq!(s.diffbase_fits(&body, &"d".repeat(size)).is_ok(), fits, "{kind:?} {size}");
    }
}

#[test]
fn finalizer_names_differ_between_bosun_and_kopf_modes() {
    let body = json!({"metadata": {"finalizers": ["x", "kopf.zalando.org/KopfFinalizerMarker"]}});
    assert!(Storage::kopf().has_finalizer(&body));
    assert!(!Storage::bosun("bosun.dev", StorageKind::Status).has_finalizer(&body));
    assert_eq!(Storage::bosun("bosun.dev", StorageKind::Status).finalizer, "bosun.dev/finalizer");
}

/// A sub-handler id over V1's length limit, and its keys as Kopf 1.45.2 computes them.
const SUB: &str = "create_children/child_child_child_child_child_child_child_child_";
const SUB_V2: &str = "kopf.zalando.org/create_children.child_child_child_child_child_child_chil-pMHxXA";
const SUB_V1: &str = "kopf.zalando.org/create_children.child_child_child_child-9ZgH3g";
/// A field handler's id over both limits.
const FIELD: &str = "on_field_update/spec.template.spec.containers.resources.limits.memory";
const FIELD_V2: &str = "kopf.zalando.org/on_field_update.spec.template.spec.containers.resources.-du9bng";
const FIELD_V1: &str = "kopf.zalando.org/on_field_update.spec.template.spec.cont-smD37A";

fn retries(n: u32) -> ProgressRecord {
    ProgressRecord { retries: Some(n), ..Default::default() }
}

#[test]
fn kopf_convention_reads_long_ids_from_either_key_version_and_old_status() {
    let s = Storage::kopf();
    let ann = |pairs: &[(&str, u32)]| {
        let a: Map<String, Value> = pairs.iter().map(|(k, n)| (k.to_string(), Value::String(retries(*n).encode()))).collect();
        json!({"metadata": {"annotations": a}})
    };
    let cases = [
        (ann(&[(SUB_V2, 1), (SUB_V1, 1), (FIELD_V2, 2), (FIELD_V1, 2)]), Some(1), Some(2)),
        (ann(&[(SUB_V2, 1), (SUB_V1, 9)]), Some(1), None),
        (ann(&[(SUB_V1, 3), (FIELD_V1, 4)]), Some(3), Some(4)),
        (json!({"status": {"kopf": {"progress": {SUB: {"retries": 5}, FIELD: {"retries": 6, "stopped": null}}}}}), Some(5), Some(6)),
        // Annotations before status, as Kopf reads them.
        (
            json!({"metadata": {"annotations": {SUB_V2: retries(1).encode()}}, "status": {"kopf": {"progress": {SUB: {"retries": 5}}}}}),
            Some(1),
            None,
        ),
        // Bosun's own status stanza is not Kopf's.
        (json!({"status": {"kopf.zalando.org": {"progress": {SUB: {"retries": 5}}}}}), None, None),
    ];
    for (body, sub, field) in cases {
        let st = s.read(&body, [SUB, FIELD]);
        assert_eq!((st.progress.get(SUB).and_then(|r| r.retries), st.progress.get(FIELD).and_then(|r| r.retries)), (sub, field), "{body}");
    }
    // Kopf's diffbase lives in annotations only.
    let body = json!({"status": {"kopf": {"last-handled-configuration": "{}"}}});
    assert_eq!(s.read(&body, []).diffbase, None);
    let body = json!({"metadata": {"annotations": {"kopf.zalando.org/last-handled-configuration": "{}\n"}}});
    assert_eq!(s.read(&body, []).diffbase.as_deref(), Some("{}\n"));
}

#[test]
fn kopf_convention_writes_and_purges_what_kopf_writes_and_purges() {
    let s = Storage::kopf();
    let started = ProgressRecord {
        started: Some("2026-01-01T00:00:00.000000+00:00".into()),
        purpose: Some("create".into()),
        retries: Some(1),
        ..Default::default()
    };
    // Kopf 1.45.2, `SmartProgressStorage().store(key=SUB, record=..., body={}, patch=p)`:
    let kopf_store = json!({"metadata": {"annotations": {
        SUB_V2: "{\"started\":\"2026-01-01T00:00:00.000000+00:00\",\"purpose\":\"create\",\"retries\":1}",
        SUB_V1: "{\"started\":\"2026-01-01T00:00:00.000000+00:00\",\"purpose\":\"create\",\"retries\":1}",
    }}});
    let desired = ObjectState { diffbase: None, progress: [(SUB.to_string(), started)].into() };
    let (mut main, mut status) = (json!({}), json!({}));
    s.patch(&json!({}), &desired, &[SUB], &mut main, &mut status);
    assert_eq!((main, status), (kopf_store, json!({})));

    // Kopf 1.45.2, `purge(key=SUB, ...)` then `touch(value=None)` on an object carrying both
    // keys, the old status record and the wake-up annotation:
    let body = json!({"metadata": {"annotations": {SUB_V2: "{}", SUB_V1: "{}", "kopf.zalando.org/touch-dummy": "2026"}},
        "status": {"kopf": {"progress": {SUB: {"retries": 1}, "other-operator": {"retries": 1}}}}});
    let kopf_purge_main = json!({"metadata": {"annotations": {SUB_V2: null, SUB_V1: null, "kopf.zalando.org/touch-dummy": null}}});
    let kopf_purge_status = json!({"status": {"kopf": {"progress": {SUB: null}}}});
    let (mut main, mut status) = (json!({}), json!({}));
    s.patch(&body, &ObjectState::default(), &[SUB], &mut main, &mut status);
    assert_eq!((main, status), (kopf_purge_main, kopf_purge_status));

    // The wake-up annotation is not worth a write of its own.
    let body = json!({"metadata": {"annotations": {"kopf.zalando.org/touch-dummy": "2026"}}});
    let (mut main, mut status) = (json!({}), json!({}));
    s.patch(&body, &ObjectState::default(), &[SUB], &mut main, &mut status);
    assert_eq!((main, status), (json!({}), json!({})));

    // Kopf 1.45.2, `AnnotationsDiffBaseStorage().store(...)`: one key, V1 and V2 being equal.
    let desired = ObjectState { diffbase: Some("{}\n".into()), progress: BTreeMap::new() };
    let (mut main, mut status) = (json!({}), json!({}));
    s.patch(&json!({}), &desired, &[], &mut main, &mut status);
    assert_eq!(main, json!({"metadata": {"annotations": {"kopf.zalando.org/last-handled-configuration": "{}\n"}}}));
}

#[test]
fn bosun_convention_writes_v2_keys_and_moves_v1_copies_of_older_builds() {
    let s = Storage::bosun("bosun.dev", StorageKind::Annotations);
    // 54 characters: over V1's room after `bosun.dev/` (53), under V2's limit (63).
    let id = "parent/child_with_a_name_that_is_rather_long_for_v1_ok";
    let (v2, v1) = (annotation_key_v2("bosun.dev", id), annotation_key_v1("bosun.dev", id));
    assert_eq!(v2, "bosun.dev/parent.child_with_a_name_that_is_rather_long_for_v1_ok");
    assert_ne!(v1, v2);
    let desired = ObjectState { diffbase: None, progress: [(id.to_string(), rec("create"))].into() };
    let cases = [
        (json!({}), json!({"metadata": {"annotations": {v2.clone(): rec("create").encode(), MARK: "yes"}}})),
        (
            json!({"metadata": {"annotations": {v1.clone(): rec("create").encode()}}}),
            json!({"metadata": {"annotations": {v2.clone(): rec("create").encode(), v1.clone(): null, MARK: "yes"}}}),
        ),
        (json!({"metadata": {"annotations": {v2.clone(): rec("create").encode()}}}), json!({})),
    ];
    for (body, want) in cases {
        if body != json!({}) {
            assert_eq!(s.read(&body, [id]), desired, "{body}");
        }
        let (mut main, mut status) = (json!({}), json!({}));
        s.patch(&body, &desired, &[id], &mut main, &mut status);
        assert_eq!((main, status), (want, json!({})), "{body}");
    }
}

#[test]
fn replicasets_of_deployments_keep_their_state_under_marked_keys() {
    let s = Storage::kopf();
    let owned = |kind: &str, owner: Value| json!({"kind": kind, "metadata": {"ownerReferences": [owner]}});
    let cases = [
        (owned("ReplicaSet", json!({"kind": "Deployment"})), "kopf.zalando.org/create_fn-ofDRS"),
        (owned("ReplicaSet", json!({"kind": "Other"})), "kopf.zalando.org/create_fn"),
        (owned("Pod", json!({"kind": "Deployment"})), "kopf.zalando.org/create_fn"),
        (owned("ReplicaSet", json!("odd")), "kopf.zalando.org/create_fn"),
        (json!({"kind": "ReplicaSet", "metadata": {"ownerReferences": 5}}), "kopf.zalando.org/create_fn"),
    ];
    for (body, key) in cases {
        assert_eq!(s.annotation_keys(&body, "create_fn"), vec![key.to_string()], "{body}");
    }
    let rs = owned("ReplicaSet", json!({"kind": "Deployment"}));
    assert_eq!(s.annotation_keys(&rs, "last-handled-configuration"), vec!["kopf.zalando.org/last-handled-configuration-ofDRS"]);
    // The Deployment's state, copied by Kubernetes, is not the ReplicaSet's.
    let mut copied = rs.clone();
    copied["metadata"]["annotations"] = json!({"kopf.zalando.org/last-handled-configuration": "{}\n", "kopf.zalando.org/create_fn": "{}"});
    assert_eq!(s.read(&copied, ["create_fn"]), ObjectState::default());
}

#[test]
fn patches_holding_non_objects_where_the_state_goes_are_overridden_without_panicking() {
    let done = ObjectState { diffbase: Some("{}\n".into()), progress: [("a".to_string(), rec("create"))].into() };
    let a = rec("create").encode();
    let db = "bosun.dev/last-handled-configuration";
    let cases = [
        (StorageKind::Status, json!({}), json!({"status": "x"}), json!({}), vec!["(status)/status"]),
        (StorageKind::Status, json!({}), json!({"status": {"bosun.dev": 5}}), json!({}), vec!["(status)/status/bosun.dev"]),
        (
            StorageKind::Status,
            json!({}),
            json!({"status": {"bosun.dev": {"progress": []}}}),
            json!({}),
            vec!["(status)/status/bosun.dev/progress"],
        ),
        (StorageKind::Status, json!({}), json!("garbage"), json!({}), vec!["(status)/"]),
        (
            StorageKind::Annotations,
            json!({"metadata": 5}),
            json!({}),
            json!({"metadata": {"annotations": {db: "{}\n", "bosun.dev/a": a, MARK: "yes"}}}),
            vec!["/metadata"],
        ),
        (
            StorageKind::Annotations,
            json!({"metadata": {"annotations": null}}),
            json!({}),
            json!({"metadata": {"annotations": {db: "{}\n", "bosun.dev/a": a, MARK: "yes"}}}),
            vec!["/metadata/annotations"],
        ),
        (
            StorageKind::Annotations,
            json!({"metadata": {"annotations": "x", "labels": {"l": "1"}}, "spec": 1}),
            json!({"status": "x"}),
            json!({"metadata": {"annotations": {db: "{}\n", "bosun.dev/a": a, MARK: "yes"}, "labels": {"l": "1"}}, "spec": 1}),
            vec!["/metadata/annotations"],
        ),
        (
            StorageKind::Annotations,
            json!(null),
            json!({}),
            json!({"metadata": {"annotations": {db: "{}\n", "bosun.dev/a": a, MARK: "yes"}}}),
            vec!["/"],
        ),
        // A handler's own value for one of our keys is simply replaced: no path needed room.
        (
            StorageKind::Annotations,
            json!({"metadata": {"annotations": {"bosun.dev/a": 5, "mine": "kept"}}}),
            json!({}),
            json!({"metadata": {"annotations": {db: "{}\n", "bosun.dev/a": a, "mine": "kept", MARK: "yes"}}}),
            vec![],
        ),
    ];
    for (kind, main_in, status_in, want_main, want_overrides) in cases {
        let s = bosun(kind, kind);
        let (mut main, mut status) = (main_in.clone(), status_in.clone());
        let overrides = s.patch(&json!({}), &done, &["a"], &mut main, &mut status);
        assert_eq!(overrides, want_overrides, "{kind:?} {main_in} {status_in}");
        match kind {
            StorageKind::Annotations => assert_eq!(main, want_main, "{main_in}"),
            StorageKind::Status => {
                assert_eq!(main, want_main, "{status_in}");
                assert_eq!(
                    status["status"]["bosun.dev"],
                    json!({"last-handled-configuration": "{}\n", "progress": {"a": {"purpose": "create", "retries": 1}}})
                );
            }
        }
    }
}

#[test]
fn odd_bodies_hold_no_state_and_never_panic() {
    let bodies = [
        json!(null),
        json!("x"),
        json!({"metadata": 5}),
        json!({"metadata": {"annotations": "x", "finalizers": "x"}}),
        json!({"metadata": {"annotations": {"bosun.dev/a": 5, "bosun.dev/last-handled-configuration": {"x": 1}, "kopf.zalando.org/a": null}}}),
        json!({"metadata": {"annotations": {"bosun.dev/a": "not json", "kopf.zalando.org/a": "[1]"}, "finalizers": [1, null]}}),
        json!({"status": "x"}),
        json!({"status": {"bosun.dev": "x", "kopf": 5}}),
        json!({"status": {"bosun.dev": {"progress": "x", "last-handled-configuration": 5}, "kopf": {"progress": []}}}),
        json!({"status": {"bosun.dev": {"progress": {"a": "garbage"}}, "kopf": {"progress": {"a": 1}}}}),
        json!({"kind": 5, "metadata": {"ownerReferences": [null, 1, {"kind": 2}]}}),
    ];
    let desired = ObjectState { diffbase: Some("{}\n".into()), progress: [("a".to_string(), rec("create"))].into() };
    let storages = [
        bosun(StorageKind::Annotations, StorageKind::Annotations),
        bosun(StorageKind::Status, StorageKind::Annotations),
        bosun(StorageKind::Status, StorageKind::Status),
        Storage::kopf(),
    ];
    for body in &bodies {
        for s in &storages {
            let st = s.read(body, ["a"]);
            assert_eq!(st, ObjectState::default(), "{s:?} {body}");
            assert!(!s.has_finalizer(body), "{body}");
            assert!(s.diffbase_fits(body, "{}\n").is_ok(), "{body}");
            let (mut main, mut status) = (json!({}), json!({}));
            let overrides = s.patch(body, &desired, &["a"], &mut main, &mut status);
            assert!(overrides.is_empty(), "{body}: {overrides:?}");
            let written = match s.kind {
                StorageKind::Annotations => main["metadata"]["annotations"][&annotation_key_v2(&s.prefix, "a")].clone(),
                StorageKind::Status => status["status"][s.status_stanza()]["progress"]["a"].clone(),
            };
            assert!(!written.is_null(), "{s:?} {body}: {main} {status}");
            // Dropping the state again works on the same bodies.
            let (mut main, mut status) = (json!({}), json!({}));
            s.patch(body, &ObjectState::default(), &["a"], &mut main, &mut status);
        }
    }
}

#[test]
fn chosen_persistence_goes_over_the_default_naming_and_an_unchosen_stanza_follows_the_convention() {
    let (bosun, kopf) = (Storage::bosun("bosun.dev", StorageKind::Status), Storage::kopf());
    let annotations = |prefix: &str, v1: bool| Persistence {
        prefix: Some(prefix.into()),
        kopf_keys: Some(v1),
        kind: Some(StorageKind::Annotations),
        ..Default::default()
    };
    let status = |stanza: &str| Persistence { stanza: Some(stanza.into()), kind: Some(StorageKind::Status), ..Default::default() };
    let finalizer = Persistence { finalizer: Some("my.op/done".into()), ..Default::default() };
    // (chosen, base) → (prefix, finalizer, kind, convention, stanza)
    type Want<'a> = (&'a str, &'a str, StorageKind, Convention, &'a str);
    let cases: Vec<(Persistence, &Storage, Want)> = vec![
        (Persistence::default(), &bosun, ("bosun.dev", "bosun.dev/finalizer", StorageKind::Status, Convention::Bosun, "bosun.dev")),
        (
            Persistence::default(),
            &kopf,
            ("kopf.zalando.org", "kopf.zalando.org/KopfFinalizerMarker", StorageKind::Annotations, Convention::Kopf, "kopf"),
        ),
        // Kopf's `AnnotationsProgressStorage(prefix=…)`: v1 keys by default; the finalizer is its own setting.
        (annotations("my.op", true), &bosun, ("my.op", "bosun.dev/finalizer", StorageKind::Annotations, Convention::Kopf, "kopf")),
        (
            annotations("my.op", false),
            &kopf,
            ("my.op", "kopf.zalando.org/KopfFinalizerMarker", StorageKind::Annotations, Convention::Bosun, "my.op"),
        ),
        // Kopf's `StatusProgressStorage(field='status.my-op.progress')`.
        (
            status("my-op"),
            &kopf,
            ("kopf.zalando.org", "kopf.zalando.org/KopfFinalizerMarker", StorageKind::Status, Convention::Kopf, "my-op"),
        ),
        (status("my-op"), &bosun, ("bosun.dev", "bosun.dev/finalizer", StorageKind::Status, Convention::Bosun, "my-op")),
        (finalizer, &kopf, ("kopf.zalando.org", "my.op/done", StorageKind::Annotations, Convention::Kopf, "kopf")),
    ];
    for (chosen, base, (prefix, fin, kind, convention, stanza)) in cases {
        let s = chosen.over(base.clone());
        assert_eq!(
            (s.prefix.as_str(), s.finalizer.as_str(), s.kind, s.convention, s.stanza.as_str()),
            (prefix, fin, kind, convention, stanza),
            "{chosen:?} over {base:?}"
        );
        assert_eq!(s.diffbase_kind, StorageKind::Annotations, "the diffbase stays in its annotation: {chosen:?} over {base:?}");
    }
    // Kopf's `StatusDiffBaseStorage()`: only the diffbase moves.
    let s = Persistence { diffbase_kind: Some(StorageKind::Status), ..Default::default() }.over(Storage::kopf());
    assert_eq!((s.kind, s.diffbase_kind), (StorageKind::Annotations, StorageKind::Status));
}

#[test]
fn a_chosen_stanza_holds_the_state_in_status() {
    let s = Persistence { stanza: Some("my-op".into()), ..Default::default() }.over(Storage::kopf());
    let s = Storage { kind: StorageKind::Status, diffbase_kind: StorageKind::Status, ..s };
    let desired = ObjectState { diffbase: Some("{}\n".into()), progress: [("a".to_string(), rec("create"))].into() };
    let (mut main, mut status) = (json!({}), json!({}));
    s.patch(&json!({}), &desired, &["a"], &mut main, &mut status);
    assert_eq!(status, json!({"status": {"my-op": {"last-handled-configuration": "{}\n", "progress": {"a": rec("create")}}}}));
    let body = json!({"status": {"my-op": {"progress": {"a": rec("create")}, "last-handled-configuration": "{}\n"}}});
    assert_eq!(s.read(&body, ["a"]), desired);
}
