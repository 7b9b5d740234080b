//! What other projects' clients expect of a real API server: each test sends the
//! request a client sends, over real HTTP, and checks the real server's answer.

#[path = "support/http.rs"]
mod http_support;
use bosun_devcluster::DevCluster;
use http_body_util::BodyExt;
use http_support::send;
use serde_json::{Value, json};

async fn create_cm(dc: &DevCluster, name: &str, labels: Value) {
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}, "data": {"a": "1"}});
    let (code, _, text) = send(dc, "POST", "/api/v1/namespaces/default/configmaps", Some("application/json"), Some(cm), false).await;
    assert_eq!(code, 201, "{text}");
}

#[tokio::test]
async fn boolean_parameters_are_true_unless_absent_0_or_false_as_the_python_client_sends_them() {
    let dc = DevCluster::start_local().await.unwrap();
    create_cm(&dc, "a", json!({})).await;
    // The Python client sends `watch=True`: a watch stream, not a List.
    let (code, _, first) = send(&dc, "GET", "/api/v1/namespaces/default/configmaps?watch=True&resourceVersion=0", None, None, true).await;
    assert_eq!(code, 200);
    let event: Value = serde_json::from_str(first.lines().next().unwrap_or("")).unwrap_or_else(|e| panic!("{e}: {first}"));
    assert_eq!((event["type"].as_str(), event["object"]["metadata"]["name"].as_str()), (Some("ADDED"), Some("a")));
    for off in ["watch=False", "watch=0", "watch=FALSE"] {
        let (code, _, list) = send(&dc, "GET", &format!("/api/v1/namespaces/default/configmaps?{off}"), None, None, false).await;
        let list: Value = serde_json::from_str(&list).unwrap();
        assert_eq!((code, list["kind"].as_str()), (200, Some("ConfigMapList")), "{off}");
    }
    // `force=True` on an apply patch takes the field from its other manager.
    let apply = |value: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": {"k": value}});
    let path = |manager: &str, force: &str| format!("/api/v1/namespaces/default/configmaps/applied?fieldManager={manager}{force}");
    let (code, _, text) = send(&dc, "PATCH", &path("one", ""), Some("application/apply-patch+yaml"), Some(apply("1")), false).await;
    assert_eq!(code, 201, "{text}");
    let (code, _, text) = send(&dc, "PATCH", &path("two", ""), Some("application/apply-patch+yaml"), Some(apply("2")), false).await;
    assert_eq!(code, 409, "a conflict without force: {text}");
    let (code, _, text) =
        send(&dc, "PATCH", &path("two", "&force=True"), Some("application/apply-patch+yaml"), Some(apply("2")), false).await;
    assert_eq!(code, 200, "{text}");
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap()["data"]["k"], "2");
}

#[tokio::test]
async fn a_watch_timeout_beyond_int64_is_a_400_and_the_server_goes_on() {
    let dc = DevCluster::start_local().await.unwrap();
    let (code, _, text) = send(&dc, "GET", "/api/v1/configmaps?watch=1&timeoutSeconds=18446744073709551615", None, None, false).await;
    assert_eq!(code, 400, "{text}");
    let status: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(status["message"], "strconv.ParseInt: parsing \"18446744073709551615\": value out of range");
    // The largest int64 is a watch that never times out, not a panic.
    create_cm(&dc, "b", json!({})).await;
    let (code, _, first) = send(
        &dc,
        "GET",
        "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=0&timeoutSeconds=9223372036854775807",
        None,
        None,
        true,
    )
    .await;
    assert_eq!(code, 200);
    assert!(first.contains("\"ADDED\""), "{first}");
    let (code, _, _) = send(&dc, "GET", "/api/v1/namespaces/default/configmaps/b", None, None, false).await;
    assert_eq!(code, 200, "the server still answers");
}

#[tokio::test]
async fn a_set_selector_on_a_key_that_holds_in_selects_by_that_key() {
    let dc = DevCluster::start_local().await.unwrap();
    create_cm(&dc, "foo", json!({"app.kubernetes.io/instance": "foo"})).await;
    create_cm(&dc, "bar", json!({"app.kubernetes.io/instance": "bar"})).await;
    let selector = "app.kubernetes.io%2Finstance%20in%20(foo)";
    let (code, _, text) =
        send(&dc, "GET", &format!("/api/v1/namespaces/default/configmaps?labelSelector={selector}"), None, None, false).await;
    assert_eq!(code, 200, "{text}");
    let list: Value = serde_json::from_str(&text).unwrap();
    let names: Vec<&str> = list["items"].as_array().unwrap().iter().filter_map(|i| i["metadata"]["name"].as_str()).collect();
    assert_eq!(names, ["foo"]);
}

#[tokio::test]
async fn every_cluster_has_the_kubernetes_service_and_every_namespace_a_default_service_account() {
    let dc = DevCluster::start_local().await.unwrap();
    let (code, _, text) = send(&dc, "GET", "/api/v1/namespaces/default/services/kubernetes", None, None, false).await;
    assert_eq!(code, 200, "{text}");
    let svc: Value = serde_json::from_str(&text).unwrap();
    assert_eq!((svc["spec"]["clusterIP"].as_str(), svc["spec"]["ports"][0]["port"].as_i64()), (Some("10.96.0.1"), Some(443)));
    assert_eq!(svc["metadata"]["labels"]["component"], "apiserver");
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let (code, _, text) = send(&dc, "GET", &format!("/api/v1/namespaces/{ns}/serviceaccounts/default"), None, None, false).await;
        assert_eq!(code, 200, "{ns}: {text}");
    }
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fresh"}});
    let (code, _, text) = send(&dc, "POST", "/api/v1/namespaces", Some("application/json"), Some(ns), false).await;
    assert_eq!(code, 201, "{text}");
    let (code, _, text) = send(&dc, "GET", "/api/v1/namespaces/fresh/serviceaccounts/default", None, None, false).await;
    assert_eq!(code, 200, "{text}");
    let sa: Value = serde_json::from_str(&text).unwrap();
    assert_eq!((sa["kind"].as_str(), sa["metadata"]["namespace"].as_str()), (Some("ServiceAccount"), Some("fresh")));
    // A dry-run namespace gets nothing.
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dry"}});
    let (code, _, _) = send(&dc, "POST", "/api/v1/namespaces?dryRun=All", Some("application/json"), Some(ns), false).await;
    assert_eq!(code, 201);
    let (code, _, _) = send(&dc, "GET", "/api/v1/namespaces/dry/serviceaccounts/default", None, None, false).await;
    assert_eq!(code, 404);
}

/// The body of a 200/201 answer as JSON, or a panic with the answer.
fn ok_json(answer: (u16, String, String), code: u16) -> Value {
    assert_eq!(answer.0, code, "{}", answer.2);
    serde_json::from_str(&answer.2).unwrap()
}

#[tokio::test]
async fn events_k8s_io_events_are_updated_and_patched_through_their_own_group() {
    let dc = DevCluster::start_local().await.unwrap();
    let v1 = "/apis/events.k8s.io/v1/namespaces/default/events";
    let event = json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "repeated"},
        "eventTime": "2026-11-23T10:00:00.000000Z", "reportingController": "example.com/recorder",
        "reportingInstance": "recorder-1", "action": "Reconcile", "reason": "Started", "type": "Normal",
        "note": "started", "regarding": {"kind": "ConfigMap", "namespace": "default", "name": "target", "apiVersion": "v1"},
    });
    let created = ok_json(send(&dc, "POST", v1, Some("application/json"), Some(event), false).await, 201);
    // A client-side recorder that sees the event again updates `series` with a PUT ...
    let mut again = created.clone();
    again["series"] = json!({"count": 2, "lastObservedTime": "2026-11-23T10:00:05.000000Z"});
    let put = ok_json(send(&dc, "PUT", &format!("{v1}/repeated"), Some("application/json"), Some(again), false).await, 200);
    assert_eq!((put["apiVersion"].as_str(), put["series"]["count"].as_i64()), (Some("events.k8s.io/v1"), Some(2)));
    // ... or with a patch, in each format.
    let series = |n: i64| json!({"series": {"count": n, "lastObservedTime": "2026-11-23T10:00:09.000000Z"}});
    for (n, ct, body) in [
        (3, "application/merge-patch+json", series(3)),
        (4, "application/strategic-merge-patch+json", series(4)),
        (5, "application/json-patch+json", json!([{"op": "replace", "path": "/series/count", "value": 5}])),
    ] {
        let patched = ok_json(send(&dc, "PATCH", &format!("{v1}/repeated"), Some(ct), Some(body), false).await, 200);
        assert_eq!(patched["series"]["count"], n, "{ct}");
        assert_eq!(patched["note"], "started", "{ct}");
    }
    // The same event through core/v1 carries the series too.
    let core = ok_json(send(&dc, "GET", "/api/v1/namespaces/default/events/repeated", None, None, false).await, 200);
    assert_eq!((core["series"]["count"].as_i64(), core["message"].as_str()), (Some(5), Some("started")));
    // managedFields name the group's fields, in the group's version.
    let fields = core["metadata"]["managedFields"].as_array().unwrap();
    assert!(fields.iter().all(|f| f["apiVersion"] == "events.k8s.io/v1"), "{fields:?}");
    assert!(fields.iter().any(|f| f["fieldsV1"].get("f:note").is_some()), "{fields:?}");
    assert!(fields.iter().any(|f| f["fieldsV1"].get("f:series").is_some()), "{fields:?}");

    // What the real server keeps immutable on update is refused, each with its field.
    for (field, value, path) in [
        ("note", json!("changed"), "message"),
        ("reason", json!("Other"), "reason"),
        ("type", json!("Warning"), "type"),
        ("action", json!("Other"), "action"),
        ("reportingController", json!("example.com/other"), "reportingController"),
        ("reportingInstance", json!("recorder-2"), "reportingInstance"),
        ("eventTime", json!("2026-11-23T11:00:00.000000Z"), "eventTime"),
    ] {
        let answer =
            send(&dc, "PATCH", &format!("{v1}/repeated"), Some("application/merge-patch+json"), Some(json!({field: value})), false).await;
        let status = ok_json(answer, 422);
        assert_eq!(status["details"]["causes"][0]["field"], path, "{field}: {status}");
        assert!(status["message"].as_str().unwrap().contains("field is immutable"), "{field}: {status}");
    }
    // A series must say it is one.
    let answer = send(&dc, "PATCH", &format!("{v1}/repeated"), Some("application/merge-patch+json"), Some(series(1)), false).await;
    let status = ok_json(answer, 422);
    assert_eq!(status["details"]["causes"][0]["field"], "series.count", "{status}");

    // An Event created through core/v1 (no eventTime: required on create only) takes a series
    // patch through events.k8s.io/v1.
    let legacy = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "legacy"}, "reason": "Created",
        "message": "hello", "type": "Normal", "involvedObject": {"kind": "ConfigMap", "namespace": "default", "name": "target"},
        "count": 1, "source": {"component": "kopf"}});
    ok_json(send(&dc, "POST", "/api/v1/namespaces/default/events", Some("application/json"), Some(legacy), false).await, 201);
    let patched =
        ok_json(send(&dc, "PATCH", &format!("{v1}/legacy"), Some("application/merge-patch+json"), Some(series(2)), false).await, 200);
    assert_eq!((patched["series"]["count"].as_i64(), patched["deprecatedCount"].as_i64()), (Some(2), Some(1)));
    // A PUT with apiVersion v1 to the group's endpoint is still the version mismatch.
    let mut wrong = patched.clone();
    wrong["apiVersion"] = json!("v1");
    let (code, _, text) = send(&dc, "PUT", &format!("{v1}/legacy"), Some("application/json"), Some(wrong), false).await;
    assert_eq!(code, 400, "{text}");
    assert!(text.contains("does not match the expected API version"), "{text}");
}

/// Sends one request with an `Accept` header; the status and the body as JSON.
async fn send_accept(dc: &DevCluster, method: &str, path: &str, accept: &str, patch: Option<(&str, Value)>) -> (u16, Value) {
    let mut req = http::Request::builder().method(method).uri(path).header("accept", accept);
    let mut body = Vec::new();
    if let Some((ct, b)) = patch {
        req = req.header("content-type", ct);
        body = serde_json::to_vec(&b).unwrap();
    }
    let resp = dc.client().send(req.body(body).unwrap().map(Into::into)).await.unwrap();
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&bytes))))
}

#[tokio::test]
async fn metadata_only_clients_get_partial_object_metadata_on_get_list_watch_and_patch() {
    use futures::{StreamExt, TryStreamExt};
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, ListParams, Patch, PatchParams, WatchEvent, WatchParams};

    let dc = DevCluster::start_local().await.unwrap();
    create_cm(&dc, "meta", json!({"app": "x"})).await;
    let one = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
    let many = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
    let path = "/api/v1/namespaces/default/configmaps";

    let (code, got) = send_accept(&dc, "GET", &format!("{path}/meta"), one, None).await;
    assert_eq!(code, 200, "{got}");
    assert_eq!((got["kind"].as_str(), got["apiVersion"].as_str()), (Some("PartialObjectMetadata"), Some("meta.k8s.io/v1")));
    assert_eq!(got["metadata"]["labels"]["app"], "x");
    assert!(got.get("data").is_none(), "{got}");

    let (code, list) = send_accept(&dc, "GET", &format!("{path}?limit=1"), many, None).await;
    assert_eq!(code, 200, "{list}");
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    assert!(list["metadata"]["resourceVersion"].is_string(), "{list}");
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!((items[0]["kind"].as_str(), items[0]["metadata"]["name"].as_str()), (Some("PartialObjectMetadata"), Some("meta")));
    assert!(items[0].get("data").is_none());

    // The list kind of one object, or the reverse, is the real server's 406.
    let (code, status) = send_accept(&dc, "GET", &format!("{path}/meta"), many, None).await;
    assert_eq!((code, status["reason"].as_str()), (406, Some("NotAcceptable")), "{status}");
    let (code, status) = send_accept(&dc, "GET", path, one, None).await;
    assert_eq!((code, status["reason"].as_str()), (406, Some("NotAcceptable")), "{status}");
    // Errors pass as they are.
    let (code, status) = send_accept(&dc, "GET", &format!("{path}/missing"), one, None).await;
    assert_eq!((code, status["reason"].as_str()), (404, Some("NotFound")), "{status}");

    let patch = json!({"metadata": {"annotations": {"seen": "yes"}}});
    let (code, patched) = send_accept(&dc, "PATCH", &format!("{path}/meta"), one, Some(("application/merge-patch+json", patch))).await;
    assert_eq!(code, 200, "{patched}");
    assert_eq!(
        (patched["kind"].as_str(), patched["metadata"]["annotations"]["seen"].as_str()),
        (Some("PartialObjectMetadata"), Some("yes"))
    );

    // kube-rs's own metadata calls, as an operator uses them.
    let api: Api<ConfigMap> = Api::namespaced(dc.client(), "default");
    let meta = api.get_metadata("meta").await.unwrap();
    assert_eq!(meta.metadata.annotations.unwrap()["seen"], "yes");
    let listed = api.list_metadata(&ListParams::default().labels("app=x")).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    let pp = PatchParams::default();
    let patched = api.patch_metadata("meta", &pp, &Patch::Merge(json!({"metadata": {"labels": {"more": "1"}}}))).await.unwrap();
    assert_eq!(patched.metadata.labels.unwrap()["more"], "1");
    let rv = listed.metadata.resource_version.unwrap();
    let mut events = api.watch_metadata(&WatchParams::default().timeout(10), &rv).await.unwrap().boxed();
    create_cm(&dc, "later", json!({})).await;
    let added = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while let Some(event) = events.try_next().await.unwrap() {
            if let WatchEvent::Added(m) = event {
                return m;
            }
        }
        panic!("the watch ended without an ADDED event")
    })
    .await
    .expect("an ADDED event in time");
    assert_eq!(added.metadata.name.as_deref(), Some("later"));
    assert_eq!(added.types.as_ref().map(|t| t.kind.as_str()), Some("PartialObjectMetadata"));
}

#[tokio::test]
async fn a_deleted_default_service_account_comes_back_as_the_real_controller_makes_it_again() {
    let dc = DevCluster::start_local().await.unwrap();
    let path = "/api/v1/namespaces/default/serviceaccounts/default";
    let before = ok_json(send(&dc, "GET", path, None, None, false).await, 200);
    ok_json(send(&dc, "DELETE", path, None, None, false).await, 200);
    let after = ok_json(send(&dc, "GET", path, None, None, false).await, 200);
    assert_ne!(before["metadata"]["uid"], after["metadata"]["uid"], "a new ServiceAccount");
    // A dry-run delete leaves the one there is.
    ok_json(send(&dc, "DELETE", &format!("{path}?dryRun=All"), None, None, false).await, 200);
    let still = ok_json(send(&dc, "GET", path, None, None, false).await, 200);
    assert_eq!(still["metadata"]["uid"], after["metadata"]["uid"]);
    // Other ServiceAccounts stay deleted.
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "other"}});
    ok_json(send(&dc, "POST", "/api/v1/namespaces/default/serviceaccounts", Some("application/json"), Some(sa), false).await, 201);
    ok_json(send(&dc, "DELETE", "/api/v1/namespaces/default/serviceaccounts/other", None, None, false).await, 200);
    let (code, _, _) = send(&dc, "GET", "/api/v1/namespaces/default/serviceaccounts/other", None, None, false).await;
    assert_eq!(code, 404);
}
