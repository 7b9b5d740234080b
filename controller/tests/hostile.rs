//! Values from outside that once crashed the `bosun` binary: each is that object's error, the
//! controller stays up and handles the other objects. The real `bosun` process against a dev
//! cluster over HTTP, with a Rust SDK handler server over gRPC.

mod support;

use std::path::PathBuf;

use bosun_controller::cluster::Cluster;
use serde_json::{Value, json};
use support::{Bosun, T};

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

const KEX: &str = "/apis/kopf.dev/v1/namespaces/default/kopfexamples";

async fn create(api: &Cluster, name: &str, annotations: Value) {
    let obj = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
        "metadata": {"name": name, "annotations": annotations}, "spec": {}});
    api.create(KEX, &obj).await.unwrap();
}

/// The events about `name` in `default`.
async fn events_of(api: &Cluster, name: &str) -> Vec<Value> {
    let list = api.get("/api/v1/namespaces/default/events").await.unwrap();
    list["items"].as_array().unwrap().iter().filter(|e| e["involvedObject"]["name"] == name).cloned().collect()
}

/// Waits until `name`'s events include one with this type and a message containing `text`.
async fn wait_event(api: &Cluster, name: &str, kind: &str, text: &str) -> Value {
    let deadline = tokio::time::Instant::now() + T;
    loop {
        let events = events_of(api, name).await;
        if let Some(e) = events.iter().find(|e| e["type"] == kind && e["message"].as_str().is_some_and(|m| m.contains(text))) {
            return e.clone();
        }
        assert!(tokio::time::Instant::now() < deadline, "no {kind} event {text:?} about {name}; events: {events:#?}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Asserts that bosun still runs, and stops it.
async fn still_running_then_stop(bosun: Bosun) {
    let pid = bosun.child.id().expect("bosun runs");
    assert!(support::running(pid), "bosun exited; output:\n{}", bosun.seen.join("\n"));
    let status = bosun.interrupt().await;
    assert!(status.success(), "bosun exits cleanly on Ctrl-C: {status:?}");
}

#[tokio::test]
async fn a_cycle_in_the_sub_handler_records_of_one_object_fails_its_handler_and_the_other_objects_are_handled() {
    let dir = tempfile::tempdir().unwrap();
    let (_cluster, api, kubeconfig) = support::dev_cluster(dir.path(), &[examples().join("crd.yaml")]).await;
    // The issue's annotation: the handler lists itself as its own sub-handler.
    create(&api, "itself", json!({"bosun.dev/create_fn": r#"{"purpose":"create","subrefs":["create_fn"]}"#})).await;
    // A longer cycle, in the status stanza: create_fn → create_fn/a → create_fn.
    create(&api, "round", json!({})).await;
    let progress = json!({"status": {"bosun.dev": {"progress": {
        "create_fn": {"purpose": "create", "subrefs": ["create_fn/a"]},
        "create_fn/a": {"purpose": "create", "subrefs": ["create_fn"]}}}}});
    api.patch(&format!("{KEX}/round/status"), "application/merge-patch+json", &progress).await.unwrap();
    create(&api, "healthy", json!({})).await;

    let addr = support::succeeding_server().await;
    let mut bosun = Bosun::start(dir.path(), &["run", "--kubeconfig", &kubeconfig, "--handler", &addr]);
    bosun.wait_line("[default/healthy] Creation is processed: 1 succeeded; 0 failed.").await;
    for name in ["itself", "round"] {
        let line = bosun.wait_line(&format!("[default/{name}] Handler 'create_fn' failed permanently: its progress records")).await;
        assert!(line.contains("cycle"), "{line}");
        bosun.wait_line(&format!("[default/{name}] Creation is processed: 0 succeeded; 1 failed.")).await;
        wait_event(&api, name, "Warning", "its progress records").await;
    }
    // The malformed records are gone with the cause: the next change is handled as usual.
    let obj = api.get(&format!("{KEX}/itself")).await.unwrap();
    assert!(obj["metadata"]["annotations"].get("bosun.dev/create_fn").is_none(), "{obj:#}");
    still_running_then_stop(bosun).await;
}

/// A KopfExample whose spec nests so that the whole object is `levels` deep.
async fn create_deep(api: &Cluster, name: &str, levels: usize) {
    let inner = format!("{}{}", "[".repeat(levels - 2), "]".repeat(levels - 2));
    let text = format!(r#"{{"apiVersion":"kopf.dev/v1","kind":"KopfExample","metadata":{{"name":"{name}"}},"spec":{{"v":{inner}}}}}"#);
    // Sent and answered as text: the answer is as deep as the object.
    let req = http::Request::post(KEX).header("content-type", "application/json").body(text.into_bytes()).unwrap();
    let r = api.client().request_text(req).await;
    assert!(r.is_ok(), "{name}: {r:?}");
}

#[tokio::test]
async fn an_object_deeper_than_the_controller_reads_is_skipped_with_a_warning_and_its_page_is_handled() {
    let dir = tempfile::tempdir().unwrap();
    let (_cluster, api, kubeconfig) = support::dev_cluster(dir.path(), &[examples().join("crd.yaml")]).await;
    let max = bosun_controller::json::MAX_DEPTH;
    // Listed in one page with the others, and then watched.
    create(&api, "before", json!({})).await;
    create_deep(&api, "deep", max + 200).await;
    create_deep(&api, "deepish", max - 100).await;
    let addr = support::succeeding_server().await;
    let mut bosun = Bosun::start(dir.path(), &["run", "--kubeconfig", &kubeconfig, "--handler", &addr]);
    bosun.wait_line("[default/before] Creation is processed: 1 succeeded; 0 failed.").await;
    bosun.wait_line(&format!("[default/deep] The object is nested {} levels deep, deeper than the {max} levels", max + 200)).await;
    // Deep but within the limit: the controller handles it (its handler may fail to read it).
    bosun.wait_line("[default/deepish] Handler 'create_fn'").await;
    create_deep(&api, "deep-too", max + 1).await;
    create(&api, "after", json!({})).await;
    bosun.wait_line("[default/deep-too] The object is nested").await;
    bosun.wait_line("[default/after] Creation is processed: 1 succeeded; 0 failed.").await;
    assert_eq!(bosun.count("[default/deep] "), 1, "warned once: {:#?}", bosun.seen);
    still_running_then_stop(bosun).await;
}
