//! Tests of `watching.rs`.

use super::*;
use watcher::Event::{Apply, Delete, Init, InitApply, InitDone};

/// An object `ns/name` with a uid and a resourceVersion.
fn obj(name: &str, uid: &str, rv: &str) -> RawObject {
    serde_json::from_value(json!({
        "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
        "metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": rv},
        "spec": {"rv": rv},
    }))
    .unwrap()
}

/// Deliveries in short: `Listed a@1`, `Upsert a@2`, `Deleted a@1` (`!` marks a minimal body).
fn short(seen: &[Seen]) -> Vec<String> {
    seen.iter()
        .map(|s| {
            let b = s.body();
            let kind = match s {
                Seen::Listed(_) => "Listed",
                Seen::Upsert(_) => "Upsert",
                Seen::Deleted(_) => "Deleted",
            };
            let minimal = if b.get("spec").is_none() { "!" } else { "" };
            let m = &b["metadata"];
            format!("{kind} {}@{}{minimal}", m["name"].as_str().unwrap(), m["resourceVersion"].as_str().unwrap())
        })
        .collect()
}

fn known() -> Known {
    Known::new("kopf.dev/v1".into(), "KopfExample".into())
}

fn run(known: &mut Known, events: Vec<watcher::Event<RawObject>>) -> Vec<String> {
    events.into_iter().flat_map(|e| short(&known.apply(e))).collect()
}

fn listing(objects: Vec<RawObject>) -> Vec<watcher::Event<RawObject>> {
    std::iter::once(Init).chain(objects.into_iter().map(InitApply)).chain(std::iter::once(InitDone)).collect()
}

#[test]
fn the_first_listing_is_delivered_and_a_relist_delivers_only_what_changed() {
    let (a1, a2, b1, c1) = (obj("a", "ua", "1"), obj("a", "ua", "2"), obj("b", "ub", "1"), obj("c", "uc", "1"));
    let a_again = obj("a", "ua-2", "7");
    type Case = (&'static str, Vec<watcher::Event<RawObject>>, Vec<&'static str>);
    let cases: Vec<Case> = vec![
        ("first listing", listing(vec![a1.clone(), b1.clone()]), vec!["Listed a@1", "Listed b@1"]),
        (
            "unchanged relist",
            [listing(vec![a1.clone(), b1.clone()]), listing(vec![a1.clone(), b1.clone()])].concat(),
            vec!["Listed a@1", "Listed b@1"],
        ),
        (
            "changed, new and missing",
            [listing(vec![a1.clone(), b1.clone()]), listing(vec![a2.clone(), c1.clone()])].concat(),
            vec!["Listed a@1", "Listed b@1", "Upsert a@2", "Upsert c@1", "Deleted b@1!"],
        ),
        (
            "recreated under the same name",
            [listing(vec![a1.clone()]), listing(vec![a_again.clone()])].concat(),
            vec!["Listed a@1", "Deleted a@1!", "Upsert a@7"],
        ),
        (
            "live events as they come",
            [listing(vec![a1.clone()]), vec![Apply(a2.clone()), Apply(b1.clone()), Delete(a2.clone())]].concat(),
            vec!["Listed a@1", "Upsert a@2", "Upsert b@1", "Deleted a@2"],
        ),
        (
            "deleted live, not again on a relist",
            [listing(vec![a1.clone()]), vec![Delete(a1.clone())], listing(vec![])].concat(),
            vec!["Listed a@1", "Deleted a@1"],
        ),
        (
            "a relist restarted midway",
            [listing(vec![a1.clone(), b1.clone()]), vec![Init, InitApply(a1.clone())], listing(vec![b1.clone()])].concat(),
            vec!["Listed a@1", "Listed b@1", "Deleted a@1!"],
        ),
        (
            "a first listing restarted midway",
            [vec![Init, InitApply(a1.clone())], listing(vec![a1.clone(), b1.clone()])].concat(),
            vec!["Listed a@1", "Listed b@1"],
        ),
    ];
    for (what, events, want) in cases {
        assert_eq!(run(&mut known(), events), want, "{what}");
    }
}

#[test]
fn an_object_too_deep_to_read_is_skipped_with_its_name_and_the_others_are_delivered() {
    let deep = |rv: &str| {
        let spec = crate::json::nested(crate::json::MAX_DEPTH + 5);
        let text = format!(r#"{{"metadata":{{"name":"d","namespace":"ns","uid":"ud","resourceVersion":"{rv}"}},"spec":{spec}}}"#);
        serde_json::from_str::<RawObject>(&text).unwrap()
    };
    let mut k = known();
    let seen = run(&mut k, listing(vec![obj("a", "ua", "1"), deep("1")]));
    assert_eq!(seen, ["Listed a@1"]);
    let skipped = k.take_skipped();
    assert_eq!(skipped, [(crate::logs::ObjectRef { namespace: "ns".into(), name: "d".into() }, crate::json::MAX_DEPTH + 6)]);
    assert_eq!(k.len(), 2, "remembered, so that a relist does not take it for new");
    assert_eq!(run(&mut k, vec![Apply(deep("2")), Apply(obj("d", "ud", "3"))]), ["Upsert d@3"], "once less deep, it is delivered");
    assert_eq!(k.take_skipped().len(), 1);
    assert!(k.take_skipped().is_empty());
    assert_eq!(run(&mut k, vec![Delete(deep("4"))]), ["Deleted d@4!"], "its deletion is delivered with its identity");
}

#[test]
fn a_relist_is_known_as_one_and_memory_follows_the_objects() {
    let mut k = known();
    assert!(!k.is_watching() && !k.is_relisting());
    run(&mut k, listing(vec![obj("a", "ua", "1"), obj("b", "ub", "1")]));
    assert!(k.is_watching());
    assert_eq!(k.len(), 2);
    k.apply(Init);
    assert!(k.is_relisting());
    k.apply(InitApply(obj("a", "ua", "1")));
    k.apply(InitDone);
    assert!(k.is_watching());
    assert_eq!(k.len(), 1);
    k.apply(Delete(obj("a", "ua", "2")));
    assert!(k.is_empty());
}

#[test]
fn an_object_missing_from_a_relist_is_delivered_with_a_minimal_body() {
    let mut k = known();
    let full: RawObject = serde_json::from_value(json!({
        "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
        "metadata": {
            "name": "a", "namespace": "ns", "uid": "ua", "resourceVersion": "5",
            "finalizers": ["bosun.dev/finalizer"], "labels": {"app": "x"},
            "annotations": {"big": "..."}, "generation": 3,
        },
        "spec": {"field": "value"}, "status": {"done": true},
    }))
    .unwrap();
    let cluster_scoped = serde_json::from_value(json!({"metadata": {"name": "c", "uid": "uc", "resourceVersion": "6"}})).unwrap();
    k.apply(Init);
    k.apply(InitApply(full));
    k.apply(InitApply(cluster_scoped));
    k.apply(InitDone);
    k.apply(Init);
    let gone: Vec<Value> = k.apply(InitDone).iter().map(|s| s.body().clone()).collect();
    assert_eq!(
        gone,
        vec![
            json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "c", "uid": "uc", "resourceVersion": "6"}}),
            json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {
                "name": "a", "namespace": "ns", "uid": "ua", "resourceVersion": "5",
                "finalizers": ["bosun.dev/finalizer"], "labels": {"app": "x"},
            }}),
        ]
    );
}

#[test]
fn the_inactivity_timeout_is_the_server_side_timeout_of_each_watch() {
    let scope = |secs: u64, sel: Option<&str>| WatchScope {
        namespace: None,
        label_selector: sel.map(String::from),
        inactivity_timeout: Duration::from_secs(secs),
    };
    let cases = [(60, None, 60), (2, Some("app=x"), 2), (0, None, 1), (u64::MAX, None, u32::MAX)];
    for (secs, sel, want) in cases {
        let c = config(&scope(secs, sel));
        assert_eq!(c.timeout, Some(want), "{secs}");
        assert_eq!(c.label_selector.as_deref(), sel);
        assert!(c.bookmarks, "bookmarks keep the resume point fresh");
    }
}

#[test]
fn api_errors_are_told_apart_by_their_status_code() {
    let api = |code: u16| kube::Error::Api(kube::core::Status::failure("x", "y").with_code(code).boxed());
    let cases = [
        (watcher::Error::InitialListFailed(api(404)), Some(404)),
        (watcher::Error::WatchStartFailed(api(404)), Some(404)),
        (watcher::Error::WatchFailed(api(500)), Some(500)),
        (watcher::Error::WatchError(kube::core::Status::failure("too old", "Expired").with_code(410).boxed()), Some(410)),
        (watcher::Error::NoResourceVersion, None),
    ];
    for (e, want) in cases {
        assert_eq!(status_code(&e), want, "{e}");
    }
}

#[test]
fn objects_become_the_json_they_came_as() {
    let cases = [
        serde_json::json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"f": [1]}, "status": {"s": true}}),
        serde_json::json!({"metadata": {"name": "b", "namespace": "ns"}, "data": {"k": "v"}}),
    ];
    for want in cases {
        let o: RawObject = serde_json::from_str(&want.to_string()).unwrap();
        let got = o.into_body();
        assert_eq!(got, want);
        let keys: Vec<&String> = got.as_object().unwrap().keys().collect();
        let metadata_at = keys.iter().position(|k| *k == "metadata").unwrap();
        assert!(keys[..metadata_at].iter().all(|k| *k == "apiVersion" || *k == "kind"), "usual order: {keys:?}");
    }
}
