//! Create, get, update and patch over HTTP with kube-rs: conflicts, no-op updates,
//! generateName, AlreadyExists, JSON patch `test`, and the Status errors clients match on.

use bosun_devcluster::DevCluster;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"a": "1"}})).unwrap()
}

#[tokio::test]
async fn create_then_get_returns_the_stored_object_with_server_metadata() {
    let dc = DevCluster::start_local().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(dc.client(), "default");
    let created = api.create(&PostParams::default(), &cm("a")).await.unwrap();
    let got = api.get("a").await.unwrap();
    assert_eq!(created.metadata.uid, got.metadata.uid);
    assert!(got.metadata.creation_timestamp.is_some());
    assert_eq!(got.metadata.resource_version, created.metadata.resource_version);
    dc.shutdown().await;
}

#[tokio::test]
async fn creating_an_existing_name_is_already_exists() {
    let dc = DevCluster::start_local().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(dc.client(), "default");
    api.create(&PostParams::default(), &cm("a")).await.unwrap();
    let err = api.create(&PostParams::default(), &cm("a")).await.unwrap_err();
    let kube::Error::Api(status) = err else { panic!("expected an API error") };
    assert_eq!(status.code, 409);
    assert_eq!(status.reason, "AlreadyExists");
}

#[tokio::test]
async fn update_with_a_stale_resource_version_is_a_conflict() {
    let dc = DevCluster::start_local().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(dc.client(), "default");
    let first = api.create(&PostParams::default(), &cm("a")).await.unwrap();
    let mut second = first.clone();
    second.data.as_mut().unwrap().insert("a".into(), "2".into());
    api.replace("a", &PostParams::default(), &second).await.unwrap();
    let mut stale = first.clone();
    stale.data.as_mut().unwrap().insert("a".into(), "3".into());
    let kube::Error::Api(status) = api.replace("a", &PostParams::default(), &stale).await.unwrap_err() else { panic!() };
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
}

#[tokio::test]
async fn a_no_op_patch_keeps_the_resource_version() {
    let dc = DevCluster::start_local().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(dc.client(), "default");
    let created = api.create(&PostParams::default(), &cm("a")).await.unwrap();
    let patched = api.patch("a", &PatchParams::default(), &Patch::Merge(json!({"data": {"a": "1"}}))).await.unwrap();
    assert_eq!(created.metadata.resource_version, patched.metadata.resource_version);
    let changed = api.patch("a", &PatchParams::default(), &Patch::Merge(json!({"data": {"a": "2"}}))).await.unwrap();
    let rv = |c: &ConfigMap| c.metadata.resource_version.clone().unwrap().parse::<u64>().unwrap();
    assert!(rv(&changed) > rv(&created));
}

#[tokio::test]
async fn generate_name_makes_a_unique_name() {
    let dc = DevCluster::start_local().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(dc.client(), "default");
    let obj: ConfigMap = serde_json::from_value(json!({"metadata": {"generateName": "x-"}})).unwrap();
    let a = api.create(&PostParams::default(), &obj).await.unwrap();
    let b = api.create(&PostParams::default(), &obj).await.unwrap();
    let (a, b) = (a.metadata.name.unwrap(), b.metadata.name.unwrap());
    assert!(a.starts_with("x-") && a.len() == 7, "{a}");
    assert_ne!(a, b);
}

#[tokio::test]
async fn a_failing_json_patch_test_changes_nothing() {
    let dc = DevCluster::start_local().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(dc.client(), "default");
    api.create(&PostParams::default(), &cm("a")).await.unwrap();
    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/data/a", "value": "nope"},
        {"op": "replace", "path": "/data/a", "value": "2"}
    ]))
    .unwrap();
    let kube::Error::Api(status) = api.patch("a", &PatchParams::default(), &Patch::<()>::Json(ops)).await.unwrap_err() else { panic!() };
    assert_eq!(status.code, 422);
    assert_eq!(api.get("a").await.unwrap().data.unwrap()["a"], "1");
}

#[tokio::test]
async fn creating_in_a_missing_namespace_is_not_found() {
    let dc = DevCluster::start_local().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(dc.client(), "nowhere");
    let kube::Error::Api(status) = api.create(&PostParams::default(), &cm("a")).await.unwrap_err() else { panic!() };
    assert_eq!(status.code, 404);
    assert_eq!(status.message, "namespaces \"nowhere\" not found");
}

#[tokio::test]
async fn dry_run_create_stores_nothing() {
    let dc = DevCluster::start_local().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(dc.client(), "default");
    let pp = PostParams { dry_run: true, ..Default::default() };
    api.create(&pp, &cm("a")).await.unwrap();
    assert!(api.get_opt("a").await.unwrap().is_none());
}

async fn raw(dc: &DevCluster, method: &str, path: &str, content_type: &str, body: Vec<u8>) -> (u16, serde_json::Value) {
    let req = http::Request::builder().method(method).uri(path).header("content-type", content_type).body(body).unwrap();
    let resp = dc.client().send(req.map(Into::into)).await.unwrap();
    let code = resp.status().as_u16();
    let bytes = http_body_util::BodyExt::collect(resp.into_body()).await.unwrap().to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null))
}

#[tokio::test]
async fn bad_input_gets_a_clear_4xx_and_stores_nothing() {
    let dc = DevCluster::start_local().await.unwrap();
    let path = "/api/v1/namespaces/default/configmaps";
    let table = [
        ("malformed json", b"{\"metadata\": {".to_vec(), "application/json", 400, "BadRequest"),
        ("wrong kind", br#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"x"}}"#.to_vec(), "application/json", 400, "BadRequest"),
        ("missing name", br#"{"metadata":{}}"#.to_vec(), "application/json", 422, "Invalid"),
        ("invalid label key", br#"{"metadata":{"name":"x","labels":{"bad key":"v"}}}"#.to_vec(), "application/json", 422, "Invalid"),
        ("not an object", b"[1,2]".to_vec(), "application/json", 400, "BadRequest"),
        ("unknown media type", b"x".to_vec(), "text/plain", 415, "UnsupportedMediaType"),
    ];
    for (what, body, ct, code, reason) in table {
        let (got, status) = raw(&dc, "POST", path, ct, body).await;
        assert_eq!((got, status["reason"].as_str().unwrap_or("")), (code, reason), "{what}: {status}");
    }
    let big = format!(r#"{{"metadata":{{"name":"big"}},"data":{{"a":"{}"}}}}"#, "x".repeat(4 * 1024 * 1024));
    let (got, _) = raw(&dc, "POST", path, "application/json", big.into_bytes()).await;
    assert_eq!(got, 413, "oversized body");
    let api: Api<ConfigMap> = Api::namespaced(dc.client(), "default");
    assert!(api.list(&Default::default()).await.unwrap().items.is_empty(), "nothing was stored");
}
