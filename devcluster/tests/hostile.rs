//! What a client may send that once got an answer no real API server gives: a `dryRun` list
//! with a bad value after a good one, an unknown resource under a built-in group-version, and
//! objects nested deeper than serde_json reads (the real server reads 10,000 levels). Real
//! HTTP against the dev cluster; each answer is the real server's.

use std::time::Duration;

use bosun_devcluster::depth::{self, MAX_DEPTH};
use bosun_devcluster::{Config, DevCluster};
use http_body_util::BodyExt;
use serde_json::{Value, json};

/// Sends `body` as it is; the status code, content type and body.
async fn send(dc: &DevCluster, method: &str, path: &str, content_type: &str, body: Vec<u8>) -> (u16, String, Vec<u8>) {
    let mut config = dc.kube_config();
    config.default_retry = false;
    let client = kube::Client::try_from(config).unwrap();
    let req = http::Request::builder().method(method).uri(path).header("accept", "application/json").header("content-type", content_type);
    let resp = client.send(req.body(body).unwrap().map(Into::into)).await.unwrap();
    let code = resp.status().as_u16();
    let ct = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    (code, ct, resp.into_body().collect().await.unwrap().to_bytes().to_vec())
}

/// JSON as deep as the objects in a list or a watch event.
fn json_of(bytes: &[u8]) -> Value {
    depth::from_slice_within(bytes, MAX_DEPTH + 2)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&bytes[..bytes.len().min(300)])))
}

async fn post(dc: &DevCluster, path: &str, body: Value) -> (u16, Value) {
    let (code, _, bytes) = send(dc, "POST", path, "application/json", serde_json::to_vec(&body).unwrap()).await;
    (code, json_of(&bytes))
}

const THINGS: &str = "/apis/hostile.bosun.dev/v1/namespaces/default/things";

/// A CRD whose spec keeps anything, served before it returns.
async fn create_crd(dc: &DevCluster) {
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "things.hostile.bosun.dev"},
        "spec": {"group": "hostile.bosun.dev", "scope": "Namespaced",
            "names": {"kind": "Thing", "plural": "things", "singular": "thing"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}
    });
    let (code, status) = post(dc, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd).await;
    assert_eq!(code, 201, "{status}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while send(dc, "GET", THINGS, "application/json", Vec::new()).await.0 != 200 {
        assert!(tokio::time::Instant::now() < deadline, "the CRD is never served");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A Thing whose spec nests so that the whole object is `levels` deep.
fn thing(name: &str, levels: usize) -> Vec<u8> {
    let inner = format!("{}{}", "[".repeat(levels - 2), "]".repeat(levels - 2));
    format!(r#"{{"apiVersion":"hostile.bosun.dev/v1","kind":"Thing","metadata":{{"name":"{name}"}},"spec":{{"v":{inner}}}}}"#).into_bytes()
}

#[tokio::test]
async fn a_dry_run_list_with_any_value_other_than_all_is_refused_and_nothing_is_written() {
    let dc = DevCluster::start_local().await.unwrap();
    let cm = |name: &str| serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})).unwrap();
    let cms = "/api/v1/namespaces/default/configmaps";
    let (code, _, body) = send(&dc, "POST", &format!("{cms}?dryRun=All&dryRun=garbage"), "application/json", cm("c")).await;
    let status = json_of(&body);
    assert_eq!((code, status["reason"].as_str()), (422, Some("Invalid")), "{status}");
    assert_eq!(
        status["message"],
        "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: []string{\"All\", \"garbage\"}: supported values: \"All\""
    );
    assert_eq!(send(&dc, "GET", &format!("{cms}/c"), "application/json", Vec::new()).await.0, 404, "nothing stored");

    assert_eq!(send(&dc, "POST", &format!("{cms}?dryRun=All&dryRun=All"), "application/json", cm("c")).await.0, 201);
    assert_eq!(send(&dc, "GET", &format!("{cms}/c"), "application/json", Vec::new()).await.0, 404, "a dry run stores nothing");
    assert_eq!(send(&dc, "POST", cms, "application/json", cm("c")).await.0, 201);
    let patch = br#"{"data":{"a":"1"}}"#.to_vec();
    let (code, _, body) = send(&dc, "PATCH", &format!("{cms}/c?dryRun=All&dryRun=x"), "application/merge-patch+json", patch).await;
    assert_eq!(code, 422, "{}", String::from_utf8_lossy(&body));
    assert!(json_of(&body)["message"].as_str().unwrap().starts_with("PatchOptions.meta.k8s.io"));
    let (code, _, body) = send(&dc, "DELETE", &format!("{cms}/c?dryRun=All&dryRun=x"), "application/json", Vec::new()).await;
    assert_eq!(code, 422, "{}", String::from_utf8_lossy(&body));
    assert_eq!(send(&dc, "GET", &format!("{cms}/c"), "application/json", Vec::new()).await.0, 200, "not deleted");
}

#[tokio::test]
async fn an_unknown_resource_under_a_built_in_group_version_is_a_status_and_under_other_groups_plain_text() {
    let dc = DevCluster::start_local().await.unwrap();
    create_crd(&dc).await;
    let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "the server could not find the requested resource", "reason": "NotFound", "details": {}, "code": 404});
    for path in [
        "/apis/apps/v1/namespaces/default/nosuchthings",
        "/apis/apps/v1/nosuchthings",
        "/apis/batch/v1/namespaces/default/nosuchthings/x",
        "/api/v1/nosuchthings",
        "/api/v1/namespaces/default/nosuchthings",
    ] {
        let (code, ct, body) = send(&dc, "GET", path, "application/json", Vec::new()).await;
        assert_eq!((code, ct.as_str()), (404, "application/json"), "{path}");
        assert_eq!(json_of(&body), status, "{path}");
    }
    // Custom resources' groups answer unknown paths as a deleted CRD's: plain text.
    for path in ["/apis/hostile.bosun.dev/v1/namespaces/default/nosuchthings", "/apis/nonexistent.bosun.dev/v1/things"] {
        let (code, ct, body) = send(&dc, "GET", path, "application/json", Vec::new()).await;
        assert_eq!((code, ct.as_str(), body.as_slice()), (404, "text/plain; charset=utf-8", b"404 page not found".as_slice()), "{path}");
    }
}

#[tokio::test]
async fn objects_nested_deeper_than_serde_json_reads_are_stored_served_watched_patched_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let config = || Config { data_dir: Some(dir.path().to_path_buf()), ..Default::default() };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dc = DevCluster::start(listener, config()).await.unwrap();
    create_crd(&dc).await;

    for (name, levels) in [("shallow", 3), ("deep", 500), ("deepest", MAX_DEPTH)] {
        let (code, _, body) = send(&dc, "POST", THINGS, "application/json", thing(name, levels)).await;
        assert_eq!(code, 201, "{name}: {}", String::from_utf8_lossy(&body[..body.len().min(300)]));
        // (The spec is one level below the object; managedFields are 7 levels deep.)
        assert_eq!(depth::of_value(&json_of(&body)["spec"]), levels - 1, "{name}");
        let (code, _, body) = send(&dc, "GET", &format!("{THINGS}/{name}"), "", Vec::new()).await;
        assert_eq!((code, depth::of_value(&json_of(&body)["spec"])), (200, levels - 1), "{name}");
    }
    let (code, _, body) = send(&dc, "GET", THINGS, "", Vec::new()).await;
    let list = json_of(&body);
    assert_eq!(code, 200);
    let names: Vec<&str> = list["items"].as_array().unwrap().iter().map(|o| o["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["deep", "deepest", "shallow"]);
    let (code, _, body) = send(&dc, "GET", &format!("{THINGS}?watch=1&resourceVersion=0&timeoutSeconds=1"), "", Vec::new()).await;
    assert_eq!(code, 200);
    let watched: Vec<usize> =
        body.split(|b| *b == b'\n').filter(|l| !l.is_empty()).map(|l| depth::of_value(&json_of(l)["object"]["spec"])).collect();
    assert_eq!(watched.len(), 3, "every object is watched");
    assert!(watched.contains(&(MAX_DEPTH - 1)));

    // Deeper than the limit: a body is refused as the real server refuses one past 10,000 levels.
    let (code, _, body) = send(&dc, "POST", THINGS, "application/json", thing("deeper", MAX_DEPTH + 1)).await;
    let status = json_of(&body);
    assert_eq!((code, status["reason"].as_str()), (400, Some("BadRequest")), "{status}");
    assert!(status["message"].as_str().unwrap().contains("json parse error: exceeded max depth ("), "{status}");
    let (code, _, _) = send(&dc, "POST", THINGS, "application/json", thing("much-deeper", 100_000)).await;
    assert_eq!(code, 400, "not a crash");
    // A patch that would make an object deeper is refused; one within the limit applies.
    let deeper = format!(r#"{{"spec":{{"w":{}}}}}"#, format_args!("{}{}", "[".repeat(MAX_DEPTH - 5), "]".repeat(MAX_DEPTH - 5)));
    let (code, _, body) = send(&dc, "PATCH", &format!("{THINGS}/deep"), "application/merge-patch+json", deeper.clone().into_bytes()).await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body[..body.len().min(300)]));
    // Into the innermost array of `deepest`, one level more.
    let add = format!(r#"[{{"op":"add","path":"/spec/v{}/0","value":[]}}]"#, "/0".repeat(MAX_DEPTH - 3));
    let (code, _, body) = send(&dc, "PATCH", &format!("{THINGS}/deepest"), "application/json-patch+json", add.into_bytes()).await;
    let status = json_of(&body);
    assert_eq!((code, status["reason"].as_str()), (422, Some("Invalid")), "{status}");
    let (code, _, _) = send(&dc, "PATCH", &format!("{THINGS}/deepest"), "application/merge-patch+json", deeper.into_bytes()).await;
    assert_eq!(code, 200, "as deep as the limit");
    dc.shutdown().await;

    // The objects survive a restart from the data directory.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dc = DevCluster::start(listener, config()).await.unwrap();
    let (code, _, body) = send(&dc, "GET", &format!("{THINGS}/deepest"), "", Vec::new()).await;
    assert_eq!((code, depth::of_value(&json_of(&body)["spec"])), (200, MAX_DEPTH - 1));
    let (code, _, body) = send(&dc, "GET", &format!("{THINGS}/shallow"), "", Vec::new()).await;
    assert_eq!(code, 200, "objects after a deep one are restored too: {}", String::from_utf8_lossy(&body));
}
