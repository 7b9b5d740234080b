//! Subresources (issue 9, items 4 and 6): the `scale` subresource of custom resources, and
//! the subresources of Pods and ServiceAccounts. Each test sends what a client sends over real
//! HTTP and checks the real server's answer; the kubectl tests run the real binary (they fail
//! under CI and are skipped elsewhere when it is missing).

#[path = "../../tests/src/tools.rs"]
mod tools;

use std::path::Path;
use std::process::Command;

use bosun_devcluster::DevCluster;
use http_body_util::BodyExt;
use serde_json::{Value, json};

/// Sends one request; the status, the content type and the body.
async fn send(dc: &DevCluster, method: &str, path: &str, content_type: Option<&str>, body: Option<Value>) -> (u16, String, String) {
    let client = dc.client();
    let mut req = http::Request::builder().method(method).uri(path).header("accept", "application/json");
    if let Some(ct) = content_type {
        req = req.header("content-type", ct);
    }
    let body = body.map(|b| serde_json::to_vec(&b).unwrap()).unwrap_or_default();
    let resp = client.send(req.body(body).unwrap().map(Into::into)).await.unwrap();
    let code = resp.status().as_u16();
    let ct = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (code, ct, String::from_utf8_lossy(&bytes).into_owned())
}

/// `send` with a JSON answer.
async fn call(dc: &DevCluster, method: &str, path: &str, content_type: Option<&str>, body: Option<Value>) -> (u16, Value) {
    let (code, _, text) = send(dc, method, path, content_type, body).await;
    let value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{method} {path}: {e}: {text}"));
    (code, value)
}

const JSON: Option<&str> = Some("application/json");
const MERGE: Option<&str> = Some("application/merge-patch+json");
const JSON_PATCH: Option<&str> = Some("application/json-patch+json");
const STRATEGIC: Option<&str> = Some("application/strategic-merge-patch+json");

fn rv(obj: &Value) -> u64 {
    obj["metadata"]["resourceVersion"].as_str().and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("a resourceVersion: {obj}"))
}

fn kubectl(kubeconfig: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new("kubectl").arg("--kubeconfig").arg(kubeconfig).args(args).output().expect("kubectl runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// Whether `kubectl` runs, under the rule of [`tools::require_tool`].
fn require_kubectl() -> bool {
    let works = Command::new("kubectl").arg("version").arg("--client").output().is_ok_and(|o| o.status.success());
    tools::require_tool("`kubectl` on the PATH (Debian's kubernetes-client)", works)
}

// ---- item 4: the scale subresource of custom resources ----

const WIDGETS: &str = "/apis/scale.bosun.dev/v1/namespaces/default/widgets";

/// A CRD `widgets.scale.bosun.dev` with status and scale subresources (`scale` may be null).
fn widget_crd(scale: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.scale.bosun.dev"},
        "spec": {
            "group": "scale.bosun.dev",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}, "scale": scale},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                }}},
            }],
        },
    })
}

fn default_scale() -> Value {
    json!({"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.selector"})
}

async fn widgets_served(dc: &DevCluster, scale: Value) {
    let (code, crd) = call(dc, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", JSON, Some(widget_crd(scale))).await;
    assert_eq!(code, 201, "{crd}");
}

async fn create_widget(dc: &DevCluster, name: &str, spec: Value) -> Value {
    let body = json!({"apiVersion": "scale.bosun.dev/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec});
    let (code, obj) = call(dc, "POST", WIDGETS, JSON, Some(body)).await;
    assert_eq!(code, 201, "{obj}");
    obj
}

#[tokio::test]
async fn a_crd_scale_subresource_answers_an_autoscaling_v1_scale_of_the_paths() {
    let dc = DevCluster::start_local().await.unwrap();
    widgets_served(&dc, default_scale()).await;
    create_widget(&dc, "w1", json!({"replicas": 2})).await;
    let status = json!({"status": {"replicas": 1, "selector": "app=w1"}});
    let (code, w) = call(&dc, "PATCH", &format!("{WIDGETS}/w1/status"), MERGE, Some(status)).await;
    assert_eq!(code, 200, "{w}");
    let (code, scale) = call(&dc, "GET", &format!("{WIDGETS}/w1/scale"), None, None).await;
    assert_eq!(code, 200, "{scale}");
    assert_eq!(
        scale,
        json!({
            "kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {
                "name": "w1", "namespace": "default", "uid": w["metadata"]["uid"],
                "resourceVersion": w["metadata"]["resourceVersion"], "creationTimestamp": w["metadata"]["creationTimestamp"],
            },
            "spec": {"replicas": 2},
            "status": {"replicas": 1, "selector": "app=w1"},
        })
    );
    // discovery lists it, as an autoscaling/v1 Scale
    let (_, list) = call(&dc, "GET", "/apis/scale.bosun.dev/v1", None, None).await;
    let entry = list["resources"].as_array().unwrap().iter().find(|r| r["name"] == "widgets/scale").cloned();
    assert_eq!(
        entry,
        Some(
            json!({"name": "widgets/scale", "singularName": "", "namespaced": true, "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]})
        )
    );
}

#[tokio::test]
async fn a_scale_write_sets_only_the_spec_replicas_and_is_recorded_under_the_scale_subresource() {
    let dc = DevCluster::start_local().await.unwrap();
    widgets_served(&dc, default_scale()).await;
    let before = create_widget(&dc, "w1", json!({"replicas": 2, "size": "big"})).await;
    let path = format!("{WIDGETS}/w1/scale?fieldManager=scaler");
    let (code, scale) = call(&dc, "PATCH", &path, MERGE, Some(json!({"spec": {"replicas": 5}}))).await;
    assert_eq!((code, &scale["spec"]["replicas"]), (200, &json!(5)), "{scale}");
    let (_, after) = call(&dc, "GET", &format!("{WIDGETS}/w1"), None, None).await;
    assert_eq!(after["spec"], json!({"replicas": 5, "size": "big"}));
    assert!(rv(&after) > rv(&before), "the write bumps the resourceVersion");
    assert_eq!(scale["metadata"]["resourceVersion"], after["metadata"]["resourceVersion"]);
    assert_eq!(after["metadata"]["generation"], 2, "a spec change");
    let entry = after["metadata"]["managedFields"].as_array().unwrap().iter().find(|e| e["manager"] == "scaler").cloned().unwrap();
    assert_eq!(
        (&entry["operation"], &entry["subresource"], &entry["apiVersion"], &entry["fieldsV1"]),
        (&json!("Update"), &json!("scale"), &json!("scale.bosun.dev/v1"), &json!({"f:spec": {"f:replicas": {}}}))
    );
    // JSON patch and PUT too; the same replicas again is a no-op
    let (code, scale) = call(&dc, "PATCH", &path, JSON_PATCH, Some(json!([{"op": "replace", "path": "/spec/replicas", "value": 7}]))).await;
    assert_eq!((code, &scale["spec"]["replicas"]), (200, &json!(7)), "{scale}");
    let mut put = scale.clone();
    put["spec"]["replicas"] = json!(3);
    let (code, scale) = call(&dc, "PUT", &path, JSON, Some(put)).await;
    assert_eq!((code, &scale["spec"]["replicas"]), (200, &json!(3)), "{scale}");
    let (code, again) = call(&dc, "PATCH", &path, MERGE, Some(json!({"spec": {"replicas": 3}}))).await;
    assert_eq!((code, &again["metadata"]["resourceVersion"]), (200, &scale["metadata"]["resourceVersion"]), "no-op keeps it");
    // custom resources take no strategic merge patch, /scale included
    let (code, status) = call(&dc, "PATCH", &path, STRATEGIC, Some(json!({"spec": {"replicas": 1}}))).await;
    assert_eq!((code, &status["reason"]), (415, &json!("UnsupportedMediaType")), "{status}");
}

#[tokio::test]
async fn a_resource_version_in_the_scale_is_a_precondition() {
    let dc = DevCluster::start_local().await.unwrap();
    widgets_served(&dc, default_scale()).await;
    let w = create_widget(&dc, "w1", json!({"replicas": 2})).await;
    let stale = w["metadata"]["resourceVersion"].clone();
    let (code, _) = call(&dc, "PATCH", &format!("{WIDGETS}/w1"), MERGE, Some(json!({"spec": {"size": 1}}))).await;
    assert_eq!(code, 200);
    let put = json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "w1", "namespace": "default", "resourceVersion": stale}, "spec": {"replicas": 4}});
    let (code, status) = call(&dc, "PUT", &format!("{WIDGETS}/w1/scale"), JSON, Some(put.clone())).await;
    assert_eq!(code, 409, "{status}");
    assert_eq!(
        status["message"],
        "Operation cannot be fulfilled on widgets.scale.bosun.dev \"w1\": the object has been modified; please apply your changes to the latest version and try again"
    );
    let patch = json!({"metadata": {"resourceVersion": stale}, "spec": {"replicas": 4}});
    let (code, _) = call(&dc, "PATCH", &format!("{WIDGETS}/w1/scale"), MERGE, Some(patch)).await;
    assert_eq!(code, 409);
    let (_, now) = call(&dc, "GET", &format!("{WIDGETS}/w1/scale"), None, None).await;
    assert_eq!(now["spec"]["replicas"], 2, "nothing written");
    let mut fresh = put;
    fresh["metadata"]["resourceVersion"] = now["metadata"]["resourceVersion"].clone();
    let (code, scale) = call(&dc, "PUT", &format!("{WIDGETS}/w1/scale"), JSON, Some(fresh)).await;
    assert_eq!((code, &scale["spec"]["replicas"]), (200, &json!(4)), "{scale}");
}

#[tokio::test]
async fn scale_of_an_object_without_spec_replicas_is_an_error_until_a_write_sets_them() {
    let dc = DevCluster::start_local().await.unwrap();
    widgets_served(&dc, json!({"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"})).await;
    create_widget(&dc, "w1", json!({})).await;
    let (code, status) = call(&dc, "GET", &format!("{WIDGETS}/w1/scale"), None, None).await;
    assert_eq!((code, &status["reason"]), (500, &json!("InternalError")), "{status}");
    assert_eq!(status["message"], "Internal error occurred: the spec replicas field \".spec.replicas\" does not exist");
    let (code, status) = call(&dc, "PATCH", &format!("{WIDGETS}/w1/scale"), MERGE, Some(json!({"metadata": {"labels": {"a": "b"}}}))).await;
    assert_eq!(code, 400, "{status}");
    assert_eq!(status["message"], "the spec replicas field \".spec.replicas\" cannot be empty");
    let (code, scale) = call(&dc, "PATCH", &format!("{WIDGETS}/w1/scale"), MERGE, Some(json!({"spec": {"replicas": 1}}))).await;
    assert_eq!(code, 200, "{scale}");
    assert_eq!((&scale["spec"], &scale["status"]), (&json!({"replicas": 1}), &json!({"replicas": 0})), "no selector path: none");
}

#[tokio::test]
async fn scale_replicas_and_selector_are_validated_as_the_custom_resource_is() {
    let dc = DevCluster::start_local().await.unwrap();
    widgets_served(&dc, default_scale()).await;
    let body = json!({"apiVersion": "scale.bosun.dev/v1", "kind": "Widget", "metadata": {"name": "neg"}, "spec": {"replicas": -1}});
    let (code, status) = call(&dc, "POST", WIDGETS, JSON, Some(body)).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["message"],
        "Widget.scale.bosun.dev \"neg\" is invalid: .spec.replicas: Invalid value: -1: should be a non-negative integer"
    );
    create_widget(&dc, "w1", json!({"replicas": 1})).await;
    let (code, status) = call(&dc, "PATCH", &format!("{WIDGETS}/w1/scale"), MERGE, Some(json!({"spec": {"replicas": -3}}))).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["message"],
        "Widget.scale.bosun.dev \"w1\" is invalid: .spec.replicas: Invalid value: -3: should be a non-negative integer"
    );
    let (code, status) = call(&dc, "PATCH", &format!("{WIDGETS}/w1/scale"), MERGE, Some(json!({"spec": {"replicas": "two"}}))).await;
    assert_eq!(code, 400, "{status}");
    // the selector path must hold a string
    let (code, status) = call(&dc, "PATCH", &format!("{WIDGETS}/w1/status"), MERGE, Some(json!({"status": {"selector": 5}}))).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["message"],
        "Widget.scale.bosun.dev \"w1\" is invalid: .status.selector: Invalid value: \"\": .status.selector accessor error: 5 is of the type int64, expected string"
    );
}

#[tokio::test]
async fn a_crd_with_bad_scale_paths_is_invalid() {
    let dc = DevCluster::start_local().await.unwrap();
    let bad = json!({"specReplicasPath": "spec.replicas", "statusReplicasPath": ".spec.replicas", "labelSelectorPath": ".metadata.labels"});
    let (code, status) = call(&dc, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", JSON, Some(widget_crd(bad))).await;
    assert_eq!(code, 422, "{status}");
    let prefix = "spec.versions[0].subresources.scale";
    assert_eq!(
        status["message"],
        format!(
            "CustomResourceDefinition.apiextensions.k8s.io \"widgets.scale.bosun.dev\" is invalid: [{prefix}.specReplicasPath: Invalid value: \"spec.replicas\": must be a simple json path starting with ., {prefix}.statusReplicasPath: Invalid value: \".spec.replicas\": should be a json path under .status, {prefix}.labelSelectorPath: Invalid value: \".metadata.labels\": should be a json path under either .spec or .status]"
        )
    );
    let (code, status) =
        call(&dc, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", JSON, Some(widget_crd(json!({})))).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["message"],
        format!(
            "CustomResourceDefinition.apiextensions.k8s.io \"widgets.scale.bosun.dev\" is invalid: [{prefix}.specReplicasPath: Required value, {prefix}.statusReplicasPath: Required value]"
        )
    );
}

#[tokio::test]
async fn a_crd_without_scale_answers_404_on_scale_and_lists_none() {
    let dc = DevCluster::start_local().await.unwrap();
    widgets_served(&dc, Value::Null).await;
    create_widget(&dc, "w1", json!({"replicas": 1})).await;
    let (code, status) = call(&dc, "GET", &format!("{WIDGETS}/w1/scale"), None, None).await;
    assert_eq!(code, 404, "{status}");
    assert_eq!(
        (&status["message"], &status["details"]),
        (&json!("widgets.scale.bosun.dev \"w1\" not found"), &json!({"name": "w1", "group": "scale.bosun.dev", "kind": "widgets"}))
    );
    let (code, _) = call(&dc, "PATCH", &format!("{WIDGETS}/w1/scale"), MERGE, Some(json!({"spec": {"replicas": 3}}))).await;
    assert_eq!(code, 404);
    let (_, list) = call(&dc, "GET", "/apis/scale.bosun.dev/v1", None, None).await;
    let names: Vec<&str> = list["resources"].as_array().unwrap().iter().filter_map(|r| r["name"].as_str()).collect();
    assert_eq!(names, ["widgets", "widgets/status"]);
}

#[tokio::test]
async fn a_deployment_scale_honours_its_preconditions_and_validation() {
    let dc = DevCluster::start_local().await.unwrap();
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d1"}, "spec": {
        "selector": {"matchLabels": {"app": "d1"}},
        "template": {"metadata": {"labels": {"app": "d1"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}},
    }});
    let (code, d) = call(&dc, "POST", "/apis/apps/v1/namespaces/default/deployments", JSON, Some(deploy)).await;
    assert_eq!(code, 201, "{d}");
    let path = "/apis/apps/v1/namespaces/default/deployments/d1/scale";
    let (code, scale) = call(&dc, "GET", path, None, None).await;
    assert_eq!((code, &scale["spec"], &scale["status"]), (200, &json!({"replicas": 1}), &json!({"replicas": 0, "selector": "app=d1"})));
    let (code, status) = call(&dc, "PATCH", path, STRATEGIC, Some(json!({"spec": {"replicas": -1}}))).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["message"],
        "Scale.autoscaling \"d1\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"
    );
    let mut stale = scale.clone();
    stale["metadata"]["resourceVersion"] = json!("1");
    stale["spec"]["replicas"] = json!(2);
    let (code, status) = call(&dc, "PUT", path, JSON, Some(stale)).await;
    assert_eq!(code, 409, "{status}");
    assert_eq!(
        status["message"],
        "Operation cannot be fulfilled on deployments.apps \"d1\": the object has been modified; please apply your changes to the latest version and try again"
    );
    let (code, scale) = call(&dc, "PATCH", path, STRATEGIC, Some(json!({"spec": {"replicas": 2}}))).await;
    assert_eq!((code, &scale["spec"]["replicas"]), (200, &json!(2)), "{scale}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_scales_a_custom_resource() {
    if !require_kubectl() {
        return;
    }
    let dc = DevCluster::start_local().await.unwrap();
    widgets_served(&dc, default_scale()).await;
    create_widget(&dc, "w1", json!({"replicas": 1})).await;
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    dc.write_kubeconfig(&kc).unwrap();
    tokio::task::spawn_blocking(move || {
        let (ok, out) = kubectl(&kc, &["scale", "widgets.scale.bosun.dev", "w1", "--replicas=4"]);
        assert!(ok && out.contains("widget.scale.bosun.dev/w1 scaled"), "{out}");
        let (ok, out) = kubectl(&kc, &["scale", "widgets.scale.bosun.dev", "w1", "--current-replicas=4", "--replicas=6"]);
        assert!(ok, "{out}");
        let (ok, out) = kubectl(&kc, &["get", "widgets.scale.bosun.dev", "w1", "-o", "jsonpath={.spec.replicas}"]);
        assert_eq!((ok, out.trim()), (true, "6"), "{out}");
        let (ok, out) = kubectl(&kc, &["scale", "widgets.scale.bosun.dev", "w1", "--current-replicas=1", "--replicas=2"]);
        assert!(!ok && out.contains("Expected replicas to be 1, was 6"), "a failed precondition: {out}");
    })
    .await
    .unwrap();
    dc.shutdown().await;
}
