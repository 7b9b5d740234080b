//! What other projects' clients expect of a real API server (issue 9): each test sends the
//! request a client sends, over real HTTP, and checks the real server's answer.

use bosun_devcluster::DevCluster;
use http_body_util::BodyExt;
use serde_json::{Value, json};

/// Sends one request; the status, the content type and the body (whole, or the first frame of
/// a stream when `first_frame`).
async fn send(
    dc: &DevCluster,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: Option<Value>,
    first_frame: bool,
) -> (u16, String, String) {
    let client = dc.client();
    let mut req = http::Request::builder().method(method).uri(path).header("accept", "application/json");
    if let Some(ct) = content_type {
        req = req.header("content-type", ct);
    }
    let body = body.map(|b| serde_json::to_vec(&b).unwrap()).unwrap_or_default();
    let resp = client.send(req.body(body).unwrap().map(Into::into)).await.unwrap();
    let code = resp.status().as_u16();
    let ct = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let mut body = resp.into_body();
    let bytes = if first_frame {
        let frame = tokio::time::timeout(std::time::Duration::from_secs(10), body.frame()).await.expect("a first frame in time");
        frame.and_then(Result::ok).and_then(|f| f.into_data().ok()).unwrap_or_default()
    } else {
        body.collect().await.unwrap().to_bytes()
    };
    (code, ct, String::from_utf8_lossy(&bytes).into_owned())
}

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
