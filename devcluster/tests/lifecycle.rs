//! Deletion semantics over HTTP with kube-rs: finalizers and deletionTimestamp, garbage
//! collection of dependents (background, orphan, foreground) and namespace deletion.

use std::future::Future;
use std::time::Duration;

use bosun_devcluster::DevCluster;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

/// Wait until `check` holds, failing after a deadline.
async fn eventually<F: Future<Output = bool>>(mut check: impl FnMut() -> F) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "condition not reached before the deadline");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn create(api: &Api<ConfigMap>, body: serde_json::Value) -> ConfigMap {
    api.create(&PostParams::default(), &serde_json::from_value(body).unwrap()).await.unwrap()
}

#[tokio::test]
async fn an_object_with_a_finalizer_stays_until_the_finalizer_is_removed() {
    let dc = DevCluster::start_local().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(dc.client(), "default");
    create(&api, json!({"metadata": {"name": "a", "finalizers": ["x/hold"]}})).await;
    api.delete("a", &DeleteParams::default()).await.unwrap();
    let held = api.get("a").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    api.patch("a", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}}))).await.unwrap();
    assert!(api.get_opt("a").await.unwrap().is_none());
}

#[tokio::test]
async fn dependents_of_a_deleted_owner_are_collected() {
    let dc = DevCluster::start_local().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(dc.client(), "default");
    let owner = create(&api, json!({"metadata": {"name": "owner"}})).await;
    let uid = owner.metadata.uid.unwrap();
    create(
        &api,
        json!({"metadata": {"name": "child", "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}]}}),
    )
    .await;
    api.delete("owner", &DeleteParams::default()).await.unwrap();
    eventually(|| async { api.get_opt("child").await.unwrap().is_none() }).await;
}

#[tokio::test]
async fn orphan_deletion_removes_the_owner_reference_and_keeps_the_dependent() {
    let dc = DevCluster::start_local().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(dc.client(), "default");
    let owner = create(&api, json!({"metadata": {"name": "owner"}})).await;
    let uid = owner.metadata.uid.unwrap();
    create(
        &api,
        json!({"metadata": {"name": "child", "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}]}}),
    )
    .await;
    api.delete("owner", &DeleteParams::orphan()).await.unwrap();
    eventually(|| async { api.get_opt("owner").await.unwrap().is_none() }).await;
    let child = api.get("child").await.unwrap();
    assert!(child.metadata.owner_references.unwrap_or_default().is_empty());
}

#[tokio::test]
async fn foreground_deletion_waits_for_blocking_dependents() {
    let dc = DevCluster::start_local().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(dc.client(), "default");
    let owner = create(&api, json!({"metadata": {"name": "owner"}})).await;
    let uid = owner.metadata.uid.unwrap();
    create(&api, json!({"metadata": {"name": "child", "finalizers": ["x/hold"], "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid, "blockOwnerDeletion": true}]}})).await;
    api.delete("owner", &DeleteParams::foreground()).await.unwrap();
    eventually(|| async { api.get("child").await.unwrap().metadata.deletion_timestamp.is_some() }).await;
    assert!(api.get_opt("owner").await.unwrap().is_some(), "the owner waits for its blocking dependent");
    api.patch("child", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}}))).await.unwrap();
    eventually(|| async { api.get_opt("owner").await.unwrap().is_none() }).await;
}

#[tokio::test]
async fn deleting_a_namespace_deletes_its_content_then_the_namespace() {
    let dc = DevCluster::start_local().await.unwrap();
    let namespaces: Api<Namespace> = Api::all(dc.client());
    namespaces.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "doomed"}})).unwrap()).await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(dc.client(), "doomed");
    create(&api, json!({"metadata": {"name": "a"}})).await;
    namespaces.delete("doomed", &DeleteParams::default()).await.unwrap();
    let err = api.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "b"}})).unwrap()).await;
    assert!(matches!(err, Err(kube::Error::Api(s)) if s.code == 403 || s.code == 404));
    eventually(|| async { namespaces.get_opt("doomed").await.unwrap().is_none() }).await;
    assert!(api.get_opt("a").await.unwrap().is_none());
}
