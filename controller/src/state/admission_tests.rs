//! Tests of `admission.rs`.

use super::*;
use crate::state::registry::Admission;

fn handler(id: &str, kind: pb::HandlerKind, admission: Admission) -> Handler {
    let spec = pb::HandlerSpec {
        id: id.into(),
        kind: kind as i32,
        resource: Some(pb::ResourceSelector { group: "kopf.dev".into(), version: "v1".into(), name: "kopfexamples".into() }),
        ..Default::default()
    };
    Handler { admission, ..Handler::from_spec(&spec, 0).unwrap() }
}

fn review(operation: &str, sub: &str, object: Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "kind": {"group": "kopf.dev", "version": "v1", "kind": "KopfExample"},
            "resource": {"group": "kopf.dev", "version": "v1", "resource": "kopfexamples"},
            "subResource": sub,
            "operation": operation,
            "dryRun": false,
            "object": object,
            "userInfo": {"username": "admin"},
        }
    })
}

fn said(allowed: bool, message: &str, code: i32, patch: &str) -> Answer {
    Answer::Said(pb::AdmitResponse { allowed, message: message.into(), code, merge_patch: patch.as_bytes().to_vec(), warnings: Vec::new() })
}

fn decoded_patch(response: &Value) -> Option<Value> {
    let text = response["response"]["patch"].as_str()?;
    serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(text).unwrap()).ok()
}

#[test]
fn a_review_is_read_or_refused_with_what_is_missing() {
    let ok = review("CREATE", "", json!({"metadata": {"name": "a"}}));
    let r = Request::parse(&ok).unwrap();
    assert_eq!(
        (r.uid.as_str(), r.group.as_str(), r.resource.as_str(), r.operation.as_str()),
        ("u-1", "kopf.dev", "kopfexamples", "CREATE")
    );
    let mut delete = review("DELETE", "", Value::Null);
    delete["request"]["oldObject"] = json!({"metadata": {"name": "old"}});
    assert_eq!(Request::parse(&delete).unwrap().object, Some(json!({"metadata": {"name": "old"}})), "DELETE shows the old object");
    let without = |k: &str| {
        let mut r = ok.clone();
        r["request"].as_object_mut().unwrap().remove(k);
        r
    };
    let cases = [
        (json!("text"), BadReview::NoRequest),
        (json!({"request": 1}), BadReview::NoRequest),
        (without("uid"), BadReview::Missing("uid")),
        (without("operation"), BadReview::Missing("operation")),
        (without("resource"), BadReview::Missing("resource")),
    ];
    for (input, want) in cases {
        assert_eq!(Request::parse(&input), Err(want), "{input}");
    }
}

#[test]
fn handlers_review_their_kind_resource_operations_and_subresources() {
    let ops = |o: &[&str]| Admission { operations: o.iter().map(|s| s.to_string()).collect(), ..Admission::default() };
    let subs = |s: &[&str]| Admission { subresources: s.iter().map(|s| s.to_string()).collect(), ..Admission::default() };
    let ours = ("kopf.dev", "v1", "kopfexamples");
    let object = json!({"metadata": {"name": "a"}});
    /// Handler kind and options, its resolved resource, a mutating webhook's call,
    /// operation, subresource: whether the handler reviews the request.
    type Case<'a> = (pb::HandlerKind, Admission, (&'a str, &'a str, &'a str), bool, &'a str, &'a str, bool);
    let cases: [Case; 12] = [
        (pb::HandlerKind::Validate, Admission::default(), ours, false, "CREATE", "", true),
        (pb::HandlerKind::Validate, Admission::default(), ours, true, "CREATE", "", false),
        (pb::HandlerKind::Mutate, Admission::default(), ours, true, "UPDATE", "", true),
        (pb::HandlerKind::Validate, Admission::default(), ("kopf.dev", "v2", "kopfexamples"), false, "CREATE", "", false),
        (pb::HandlerKind::Validate, ops(&["CREATE"]), ours, false, "UPDATE", "", false),
        (pb::HandlerKind::Validate, ops(&["CREATE", "UPDATE"]), ours, false, "UPDATE", "", true),
        (pb::HandlerKind::Validate, Admission::default(), ours, false, "UPDATE", "status", false),
        (pb::HandlerKind::Validate, subs(&["status"]), ours, false, "UPDATE", "status", true),
        (pb::HandlerKind::Validate, subs(&["status"]), ours, false, "UPDATE", "", false),
        // Kopf's `subresource='*'` (example 17's `validate_subresources`): any of them.
        (pb::HandlerKind::Validate, subs(&["*"]), ours, false, "UPDATE", "status", true),
        (pb::HandlerKind::Validate, subs(&["*"]), ours, false, "UPDATE", "scale", true),
        (pb::HandlerKind::Validate, subs(&["*"]), ours, false, "CREATE", "", true),
    ];
    for (kind, admission, resolved, mutating, op, sub, want) in cases {
        let h = handler("h", kind, admission.clone());
        let req = Request::parse(&review(op, sub, object.clone())).unwrap();
        assert_eq!(reviews(&h, resolved, mutating, &req), want, "{kind:?} {admission:?} {resolved:?} mutating={mutating} {op} {sub:?}");
    }
}

#[test]
fn label_filters_choose_the_objects_reviewed() {
    let mut spec = pb::HandlerSpec {
        id: "v".into(),
        kind: pb::HandlerKind::Validate as i32,
        resource: Some(pb::ResourceSelector { name: "kopfexamples".into(), ..Default::default() }),
        ..Default::default()
    };
    let filters = spec.filters.get_or_insert_default();
    filters.labels.insert("app".into(), pb::ValueFilter { check: Some(pb::value_filter::Check::Present(true)) });
    let h = Handler::from_spec(&spec, 0).unwrap();
    let with = Request::parse(&review("CREATE", "", json!({"metadata": {"labels": {"app": "x"}}}))).unwrap();
    let without = Request::parse(&review("CREATE", "", json!({"metadata": {}}))).unwrap();
    let ours = ("kopf.dev", "v1", "kopfexamples");
    assert!(reviews(&h, ours, false, &with));
    assert!(!reviews(&h, ours, false, &without));
}

#[test]
fn answers_combine_into_one_response() {
    let object = json!({"metadata": {"name": "a"}, "spec": {"field": 1}});
    let v = handler("check", pb::HandlerKind::Validate, Admission::default());
    let v2 = handler("check2", pb::HandlerKind::Validate, Admission::default());
    let m = handler("defaults", pb::HandlerKind::Mutate, Admission::default());
    let m2 = handler("more", pb::HandlerKind::Mutate, Admission::default());
    let closed = handler("strict", pb::HandlerKind::Validate, Admission { fail_closed: true, ..Admission::default() });
    let open = handler("lenient", pb::HandlerKind::Mutate, Admission::default());
    type Want = (bool, Option<(i64, &'static str)>, Option<Value>, Vec<&'static str>);
    let cases: Vec<(Vec<(&Handler, Answer)>, Want)> = vec![
        (vec![], (true, None, None, vec![])),
        (vec![(&v, said(true, "", 0, ""))], (true, None, None, vec![])),
        (vec![(&v, said(false, "spec.field must be even", 0, ""))], (false, Some((400, "spec.field must be even")), None, vec![])),
        (vec![(&v, said(false, "no", 403, "")), (&v2, said(false, "also no", 422, ""))], (false, Some((403, "no")), None, vec![])),
        (vec![(&v, said(false, "odd code", 42, ""))], (false, Some((400, "odd code")), None, vec![])),
        (
            vec![(&m, said(true, "", 0, r#"{"spec": {"default": "x"}}"#)), (&m2, said(true, "", 0, r#"{"spec": {"field": null}}"#))],
            (
                true,
                None,
                Some(json!([{"op": "add", "path": "/spec/default", "value": "x"}, {"op": "remove", "path": "/spec/field"}])),
                vec![],
            ),
        ),
        (vec![(&m, said(true, "", 0, r#"{"spec": {"field": 1}}"#))], (true, None, None, vec![])),
        (
            vec![(&m, said(true, "", 0, r#"{"spec": {"default": "x"}}"#)), (&v, said(false, "no", 0, ""))],
            (false, Some((400, "no")), None, vec![]),
        ),
        (
            vec![(&closed, Answer::Failed("the handler server is unreachable".into()))],
            (false, Some((500, "Handler 'strict' failed: the handler server is unreachable")), None, vec![]),
        ),
        (
            vec![(&open, Answer::Failed("timed out after 10s".into()))],
            (true, None, None, vec!["Handler 'lenient' was skipped: timed out after 10s"]),
        ),
        (
            vec![(&open, said(true, "", 0, "[1]"))],
            (true, None, None, vec!["Handler 'lenient' was skipped: its patch is not a JSON object"]),
        ),
        (
            vec![(&closed, Answer::Failed("down".into())), (&v, said(false, "spec says no", 400, ""))],
            (false, Some((400, "spec says no")), None, vec![]),
        ),
    ];
    let review = review("CREATE", "", object);
    let req = Request::parse(&review).unwrap();
    for (answers, (allowed, status, patch, warnings)) in cases {
        let ids: Vec<&str> = answers.iter().map(|(h, _)| h.id.as_str()).collect();
        let got = respond(&review, &req, &answers);
        assert_eq!(got["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(got["kind"], "AdmissionReview");
        assert_eq!(got["response"]["uid"], "u-1");
        assert_eq!(got["response"]["allowed"], allowed, "{ids:?}: {got}");
        let st = got["response"].get("status").map(|s| (s["code"].as_i64().unwrap(), s["message"].as_str().unwrap()));
        assert_eq!(st, status, "{ids:?}: {got}");
        assert_eq!(decoded_patch(&got), patch, "{ids:?}: {got}");
        assert_eq!(got["response"].get("patchType").is_some(), patch.is_some(), "{ids:?}: {got}");
        let w: Vec<&str> = got["response"]["warnings"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        assert_eq!(w, warnings, "{ids:?}: {got}");
    }
}

#[test]
fn the_patch_applied_to_the_object_gives_the_mutated_object() {
    let object = json!({"metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"list": [1, 2], "keep": true}});
    let m = handler("defaults", pb::HandlerKind::Mutate, Admission::default());
    let patch = r#"{"metadata": {"labels": {"x": null, "y": "2"}}, "spec": {"list": [3], "new": {"deep": 1}}}"#;
    let review = review("UPDATE", "", object.clone());
    let req = Request::parse(&review).unwrap();
    let got = respond(&review, &req, &[(&m, said(true, "", 0, patch))]);
    let ops: json_patch::Patch = serde_json::from_value(decoded_patch(&got).unwrap()).unwrap();
    let mut applied = object.clone();
    json_patch::patch(&mut applied, &ops).unwrap();
    let mut merged = object;
    json_patch::merge(&mut merged, &serde_json::from_str(patch).unwrap());
    assert_eq!(applied, merged);
}

#[test]
fn warnings_of_every_handler_are_kept_in_order() {
    let v = handler("a", pb::HandlerKind::Validate, Admission::default());
    let v2 = handler("b", pb::HandlerKind::Validate, Admission::default());
    let warn = |w: &str| Answer::Said(pb::AdmitResponse { allowed: true, warnings: vec![w.into()], ..Default::default() });
    let review = review("CREATE", "", json!({}));
    let req = Request::parse(&review).unwrap();
    let got = respond(&review, &req, &[(&v, warn("first")), (&v2, warn("second"))]);
    assert_eq!(got["response"]["warnings"], json!(["first", "second"]));
}

#[test]
fn webhook_names_are_dns_subdomains() {
    let cases = [
        ("validate", "bosun.dev", "validate.bosun.dev"),
        ("Check_Spec/sub", "bosun.dev", "check-spec.sub.bosun.dev"),
        ("a b", "x.y", "a20b.x.y"),
        ("ünï", "", "c3bcnc3af"),
    ];
    for (id, suffix, want) in cases {
        assert_eq!(webhook_name(id, suffix), want);
    }
    assert_eq!(webhook_path("check/sub"), "/check/sub");
    assert_eq!(webhook_path("a b?"), "/a%20b%3F");
}

#[test]
fn webhook_configurations_follow_the_handlers_options() {
    let mut strict = handler(
        "strict",
        pb::HandlerKind::Validate,
        Admission { operations: vec!["CREATE".into()], side_effects: true, fail_closed: true, ..Admission::default() },
    );
    strict.call_timeout = std::time::Duration::from_secs(5);
    strict.filters.labels = vec![
        ("app".into(), crate::state::registry::ValueCheck::Equals(json!("web"))),
        ("skip".into(), crate::state::registry::ValueCheck::Absent),
    ];
    let status = handler("on-status", pb::HandlerKind::Validate, Admission { subresources: vec!["status".into()], ..Admission::default() });
    let defaults = handler("defaults", pb::HandlerKind::Mutate, Admission::default());
    let res = ("kopf.dev", "v1", "kopfexamples");
    let all = [(&strict, res), (&status, res), (&defaults, res)];
    let service = Endpoint::Service { namespace: "ops".into(), name: "bosun".into(), port: 443 };
    let validating = webhooks(&all, false, &service, "PEM", "bosun.dev", Some("ops"));
    assert_eq!(validating.len(), 2, "the mutating handler is not in the validating configuration");
    let s = &validating[0];
    assert_eq!(s["name"], "strict.bosun.dev");
    assert_eq!(
        s["clientConfig"],
        json!({"service": {"namespace": "ops", "name": "bosun", "port": 443, "path": "/strict"}, "caBundle": "UEVN"})
    );
    assert_eq!(
        s["rules"],
        json!([{"apiGroups": ["kopf.dev"], "apiVersions": ["v1"], "resources": ["kopfexamples"], "operations": ["CREATE"], "scope": "*"}])
    );
    assert_eq!(
        (s["sideEffects"].as_str(), s["failurePolicy"].as_str(), s["timeoutSeconds"].as_u64()),
        (Some("NoneOnDryRun"), Some("Fail"), Some(5))
    );
    assert_eq!(
        s["namespaceSelector"]["matchExpressions"][0],
        json!({"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["ops"]})
    );
    assert_eq!(
        s["objectSelector"],
        json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}, {"key": "skip", "operator": "DoesNotExist"}]})
    );
    assert!(s.get("reinvocationPolicy").is_none());
    let st = &validating[1];
    assert_eq!(st["rules"][0]["resources"], json!(["kopfexamples/status"]));
    assert_eq!(st["rules"][0]["operations"], json!(["*"]));
    assert_eq!(
        (st["sideEffects"].as_str(), st["failurePolicy"].as_str(), st["timeoutSeconds"].as_u64()),
        (Some("None"), Some("Ignore"), Some(30))
    );
    let dev = Endpoint::Url("https://127.0.0.1:9443/".into());
    let mutating = webhooks(&all, true, &dev, "PEM", "bosun.dev", None);
    assert_eq!(mutating.len(), 1);
    assert_eq!(mutating[0]["clientConfig"]["url"], "https://127.0.0.1:9443/defaults");
    assert_eq!(mutating[0]["namespaceSelector"], json!({}));
    assert_eq!(mutating[0]["reinvocationPolicy"], "Never");
    let whole = configuration("bosun.dev", true, mutating, false);
    assert_eq!((whole["kind"].as_str(), whole["metadata"]["name"].as_str()), (Some("MutatingWebhookConfiguration"), Some("bosun.dev")));
    assert!(!is_dev_run(&whole));
}

#[test]
fn a_dev_runs_webhooks_fail_open_within_a_short_timeout_and_say_whose_they_are() {
    let mut strict = handler("strict", pb::HandlerKind::Validate, Admission { fail_closed: true, ..Admission::default() });
    strict.call_timeout = std::time::Duration::from_secs(20);
    let quick = {
        let mut h = handler("quick", pb::HandlerKind::Validate, Admission { fail_closed: true, ..Admission::default() });
        h.call_timeout = std::time::Duration::from_secs(2);
        h
    };
    let url = Endpoint::Url("https://127.0.0.1:9443".into());
    let res = ("kopf.dev", "v1", "kopfexamples");
    // (dev, the failure policies, the timeouts, labelled a dev run's)
    let cases = [(false, ["Fail", "Fail"], [20, 2], false), (true, ["Ignore", "Ignore"], [DEV_TIMEOUT_SECONDS, 2], true)];
    for (dev, policies, timeouts, labelled) in cases {
        let (s, q) = (for_setup(&strict, dev), for_setup(&quick, dev));
        // The controller's own answer comes before the API server's timeout, whatever it is.
        assert!(call_deadline(&s) < std::time::Duration::from_secs(timeout_seconds(&s)), "dev {dev}");
        // A fail-closed handler still denies when it fails: only the API server's policy changes.
        assert!(s.admission.fail_closed, "dev {dev}");
        let hooks = webhooks(&[(&s, res), (&q, res)], false, &url, "PEM", "bosun.dev", None);
        let whole = configuration("bosun.dev", false, hooks, dev);
        let got: Vec<(&str, u64)> = whole["webhooks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| (h["failurePolicy"].as_str().unwrap(), h["timeoutSeconds"].as_u64().unwrap()))
            .collect();
        assert_eq!(got, vec![(policies[0], timeouts[0]), (policies[1], timeouts[1])], "dev {dev}");
        assert_eq!(is_dev_run(&whole), labelled, "dev {dev}");
    }
}

#[test]
fn configurations_are_created_patched_left_or_removed() {
    let hook = json!({"name": "v.auto.bosun.dev", "failurePolicy": "Fail", "rules": [{"operations": ["CREATE"]}]});
    let desired = |hooks: Vec<Value>| configuration("auto.bosun.dev", false, hooks, false);
    // As stored: with the API server's defaults filled in.
    let stored = json!({
        "metadata": {"name": "auto.bosun.dev", "labels": {"app.kubernetes.io/managed-by": "bosun"}, "resourceVersion": "7"},
        "webhooks": [{"name": "v.auto.bosun.dev", "failurePolicy": "Fail", "matchPolicy": "Equivalent",
                      "rules": [{"operations": ["CREATE"], "scope": "*"}]}],
    });
    let other_hook = json!({"name": "v.auto.bosun.dev", "failurePolicy": "Ignore", "rules": [{"operations": ["CREATE"]}]});
    let unlabelled = json!({"metadata": {"name": "auto.bosun.dev"}, "webhooks": stored["webhooks"]});
    let patch = |hooks: Value| json!({"metadata": {"labels": {"app.kubernetes.io/managed-by": "bosun"}}, "webhooks": hooks});
    // Left by a `bosun dev` (fail open, labelled), taken back by a controller that is none.
    let dev_stored = configuration("auto.bosun.dev", false, vec![hook.clone()], true);
    let undev = json!({"metadata": {"labels": {"app.kubernetes.io/managed-by": "bosun", DEV_RUN_LABEL: null}}, "webhooks": [hook]});
    let cases = [
        ("absent, nothing to serve", None, desired(vec![]), Write::Nothing),
        ("absent", None, desired(vec![hook.clone()]), Write::Create(desired(vec![hook.clone()]))),
        ("stored with defaults", Some(&stored), desired(vec![hook.clone()]), Write::Nothing),
        ("a field changed", Some(&stored), desired(vec![other_hook.clone()]), Write::Patch(patch(json!([other_hook])))),
        ("one more webhook", Some(&stored), desired(vec![hook.clone(), hook.clone()]), Write::Patch(patch(json!([hook, hook])))),
        ("our label is gone", Some(&unlabelled), desired(vec![hook.clone()]), Write::Patch(patch(json!([hook])))),
        ("no handler left", Some(&stored), desired(vec![]), Write::Delete),
        ("a dev run's, taken back", Some(&dev_stored), desired(vec![hook.clone()]), Write::Patch(undev)),
        (
            "a dev run's, again a dev run's",
            Some(&dev_stored),
            configuration("auto.bosun.dev", false, vec![hook.clone()], true),
            Write::Nothing,
        ),
    ];
    for (name, existing, desired, want) in cases {
        assert_eq!(write_for(existing, desired), want, "{name}");
    }
    assert_eq!(
        configuration_path("auto.bosun.dev", true),
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/auto.bosun.dev"
    );
}
