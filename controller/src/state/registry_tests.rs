//! Table tests of the registry: what is refused, what filters match, which handlers are due.

use super::*;
use crate::state::diff::diff;
use serde_json::json;

fn spec(id: &str, kind: pb::HandlerKind) -> pb::HandlerSpec {
    pb::HandlerSpec {
        id: id.into(),
        kind: kind as i32,
        resource: Some(pb::ResourceSelector { group: "kopf.dev".into(), version: "v1".into(), name: "kopfexamples".into() }),
        ..Default::default()
    }
}

fn eq(v: Value) -> pb::ValueFilter {
    pb::ValueFilter { check: Some(pb::value_filter::Check::Equals(serde_json::to_vec(&v).unwrap())) }
}
fn present() -> pb::ValueFilter {
    pb::ValueFilter { check: Some(pb::value_filter::Check::Present(true)) }
}
fn absent() -> pb::ValueFilter {
    pb::ValueFilter { check: Some(pb::value_filter::Check::Absent(true)) }
}

/// Servers' registries, as `Describe` answers them.
fn servers(specs: Vec<Vec<pb::HandlerSpec>>) -> Vec<pb::DescribeResponse> {
    specs.into_iter().map(|handlers| pb::DescribeResponse { handlers, ..Default::default() }).collect()
}

fn keyed(id: &str, kind: pb::HandlerKind, key: &str) -> pb::HandlerSpec {
    pb::HandlerSpec { key: key.into(), ..spec(id, kind) }
}

#[test]
fn build_rejects_bad_registrations_with_clear_errors() {
    use pb::HandlerKind::{Create, Update};
    let mut field = spec("f", pb::HandlerKind::Field);
    field.field = String::new();
    let mut nores = spec("n", Create);
    nores.resource = None;
    let twice =
        |key: &str, first: &str, second: &str| Err(Error::DuplicateKey { key: key.into(), first: first.into(), second: second.into() });
    let cases = vec![
        (vec![vec![spec("a", Create)], vec![spec("a", Create)]], Err(Error::DuplicateId("a".into()))),
        (vec![vec![spec("a", Create), spec("a", Update)]], Ok(())),
        (vec![vec![spec("", Create)]], Err(Error::EmptyId(Create))),
        (vec![vec![spec("u", pb::HandlerKind::Unspecified)]], Err(Error::UnknownKind("u".into()))),
        (vec![vec![field]], Err(Error::NoField("f".into()))),
        (vec![vec![nores]], Err(Error::NoResource("n".into()))),
        // Keys: unique within a server, free across servers; no key is no key.
        (vec![vec![keyed("a", Create, "k1"), keyed("a", Update, "k2")]], Ok(())),
        (vec![vec![keyed("a", Create, "k"), keyed("b", Update, "k")]], twice("k", "a", "b")),
        (vec![vec![keyed("a", Create, "k")], vec![keyed("b", Create, "k")]], Ok(())),
        (vec![vec![keyed("a", Create, ""), keyed("b", Create, "")]], Ok(())),
        // The id rule stays whatever the keys.
        (vec![vec![keyed("a", Create, "k1"), keyed("a", Create, "k2")]], Err(Error::DuplicateId("a".into()))),
    ];
    for (described, want) in cases {
        assert_eq!(build(&servers(described.clone())).map(|_| ()), want, "{described:?}");
    }
    let err = build(&servers(vec![vec![keyed("a", Create, "fn"), keyed("b", Update, "fn")]])).unwrap_err();
    assert_eq!(err.to_string(), "handler key 'fn' is given to both 'a' and 'b' by one handler server; a server's keys must be unique");
    let ok = build(&servers(vec![vec![keyed("a", Create, "k")], vec![spec("b", pb::HandlerKind::Delete)]])).unwrap();
    assert_eq!(ok.iter().map(|h| (h.id.as_str(), h.key.as_str(), h.server)).collect::<Vec<_>>(), vec![("a", "k", 0), ("b", "", 1)]);
}

#[test]
fn handlers_know_whether_their_server_finishes_parents() {
    let mut described = servers(vec![vec![spec("a", pb::HandlerKind::Create)], vec![spec("b", pb::HandlerKind::Create)]]);
    described[1].finishes_parents = true;
    let built = build(&described).unwrap();
    assert_eq!(built.iter().map(|h| (h.id.as_str(), h.finishes_parents)).collect::<Vec<_>>(), vec![("a", false), ("b", true)]);
}

#[test]
fn admission_operations_are_checked_and_normalised() {
    let with = |ops: &[&str]| {
        let mut s = spec("v", pb::HandlerKind::Validate);
        s.admission = Some(pb::AdmissionOptions { operations: ops.iter().map(|o| o.to_string()).collect(), ..Default::default() });
        Handler::from_spec(&s, 0).map(|h| h.admission.operations)
    };
    type Case<'a> = (&'a [&'a str], Result<Vec<&'a str>, Error>);
    let cases: [Case; 5] = [
        (&[], Ok(vec![])),
        (&["create", " UPDATE ", "CREATE"], Ok(vec!["CREATE", "UPDATE"])),
        (&["CREATE", "*"], Ok(vec![])),
        (&["CONNECT", "DELETE"], Ok(vec!["CONNECT", "DELETE"])),
        (&["PATCH"], Err(Error::BadOperation("v".into(), "PATCH".into()))),
    ];
    for (ops, want) in cases {
        let want = want.map(|w| w.into_iter().map(String::from).collect::<Vec<_>>());
        assert_eq!(with(ops), want, "{ops:?}");
    }
}

#[test]
fn object_filters_check_labels_annotations_and_field_values() {
    let mut s = spec("h", pb::HandlerKind::Create);
    let mut f = pb::Filters::default();
    f.labels.insert("app".into(), eq(json!("web")));
    f.labels.insert("skip".into(), absent());
    f.annotations.insert("note".into(), present());
    f.field = "spec.mode".into();
    f.value = Some(eq(json!("on")));
    s.filters = Some(f);
    let h = Handler::from_spec(&s, 0).unwrap();
    let body = |labels: Value, ann: Value, mode: Value| json!({"metadata": {"labels": labels, "annotations": ann}, "spec": {"mode": mode}});
    let cases = [
        (body(json!({"app": "web"}), json!({"note": ""}), json!("on")), true),
        (body(json!({"app": "db"}), json!({"note": ""}), json!("on")), false),
        (body(json!({"app": "web", "skip": "1"}), json!({"note": ""}), json!("on")), false),
        (body(json!({"app": "web"}), json!({}), json!("on")), false),
        (body(json!({"app": "web"}), json!({"note": "x"}), json!("off")), false),
        (body(json!({"app": "web"}), json!({"note": "x"}), Value::Null), false),
    ];
    for (b, want) in cases {
        assert_eq!(h.matches_object(&b), want, "{b}");
    }
}

#[test]
fn due_selects_handlers_by_reason_field_and_old_new() {
    let mut field = spec("fld/spec.size", pb::HandlerKind::Field);
    field.field = "spec.size".into();
    let mut grow = spec("grow", pb::HandlerKind::Update);
    grow.field = "spec.size".into();
    grow.filters = Some(pb::Filters { new: Some(eq(json!(3))), ..Default::default() });
    let hs = build(&servers(vec![vec![
        spec("c", pb::HandlerKind::Create),
        spec("u", pb::HandlerKind::Update),
        spec("d", pb::HandlerKind::Delete),
        spec("r", pb::HandlerKind::Resume),
        field,
        grow,
    ]]))
    .unwrap();
    let old = json!({"spec": {"size": 1, "x": 1}});
    let size3 = json!({"spec": {"size": 3, "x": 1}});
    let x2 = json!({"spec": {"size": 1, "x": 2}});
    let due = |reason, old: Option<&Value>, new: &Value| -> Vec<String> {
        let d = diff(old, Some(new));
        hs.iter().filter(|h| h.due(reason, old, new, &d).is_some()).map(|h| h.id.clone()).collect()
    };
    assert_eq!(due(Reason::Create, None, &old), vec!["c", "fld/spec.size"]);
    assert_eq!(due(Reason::Create, None, &json!({"spec": {}})), vec!["c"]);
    // Resume handlers fit updates too; the plan keeps them only on first sight.
    assert_eq!(due(Reason::Update, Some(&old), &size3), vec!["u", "r", "fld/spec.size", "grow"]);
    assert_eq!(due(Reason::Update, Some(&old), &x2), vec!["u", "r"]);
    // Resume handlers fit deletions too; the plan keeps only those marked `deleted`.
    assert_eq!(due(Reason::Delete, Some(&old), &old), vec!["d", "r"]);
    assert_eq!(due(Reason::Resume, Some(&old), &old), vec!["r"]);
    assert!(due(Reason::Noop, Some(&old), &old).is_empty());
    let f = hs.iter().find(|h| h.id == "fld/spec.size").unwrap();
    let d = diff(Some(&old), Some(&size3));
    assert_eq!(f.due(Reason::Update, Some(&old), &size3, &d), Some((Some(json!(1)), Some(json!(3)))));
}

#[test]
fn label_selectors_are_pushed_down_only_when_all_handlers_share_them() {
    let with = |id: &str, labels: Vec<(&str, pb::ValueFilter)>| {
        let mut s = spec(id, pb::HandlerKind::Create);
        let mut f = pb::Filters::default();
        for (k, v) in labels {
            f.labels.insert(k.into(), v);
        }
        s.filters = Some(f);
        Handler::from_spec(&s, 0).unwrap()
    };
    let a = with("a", vec![("app", eq(json!("web"))), ("tier", present()), ("skip", absent())]);
    let b = with("b", vec![("app", eq(json!("web"))), ("skip", absent())]);
    let c = with("c", vec![("app", eq(json!("db")))]);
    let n = with("n", vec![("num", eq(json!(5)))]);
    let none = with("x", vec![]);
    let cases: Vec<(Vec<&Handler>, Option<&str>)> = vec![
        (vec![&a], Some("app=web,!skip,tier")),
        (vec![&a, &b], Some("app=web,!skip")),
        (vec![&a, &c], None),
        (vec![&a, &none], None),
        (vec![&n], None),
        (vec![], None),
    ];
    for (hs, want) in cases {
        let got = common_label_selector(&hs);
        let ids: Vec<&str> = hs.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(got.as_deref(), want, "{ids:?}");
    }
}

#[test]
fn finalizer_is_required_by_blocking_delete_handlers_timers_and_daemons() {
    let mut optional = spec("o", pb::HandlerKind::Delete);
    optional.options = Some(pb::HandlerOptions { optional: true, ..Default::default() });
    let cases = [
        (spec("c", pb::HandlerKind::Create), false),
        (spec("d", pb::HandlerKind::Delete), true),
        (optional, false),
        (spec("t", pb::HandlerKind::Timer), true),
        (spec("m", pb::HandlerKind::Daemon), true),
    ];
    for (s, want) in cases {
        assert_eq!(Handler::from_spec(&s, 0).unwrap().requires_finalizer(), want, "{}", s.id);
    }
}
