//! Subresources: the `scale` subresource of custom resources, and
//! the subresources of Pods and ServiceAccounts. Each test sends what a client sends over real
//! HTTP and checks the real server's answer; the kubectl tests run the real binary (they fail
//! under CI and are skipped elsewhere when it is missing).

#[path = "support/http.rs"]
mod http_support;
#[path = "../../tests/src/tools.rs"]
mod tools;

use std::path::Path;
use std::process::Command;

use bosun_devcluster::DevCluster;
use serde_json::{Value, json};

/// Sends one request; the status, the content type and the whole body.
async fn send(dc: &DevCluster, method: &str, path: &str, content_type: Option<&str>, body: Option<Value>) -> (u16, String, String) {
    http_support::send(dc, method, path, content_type, body, false).await
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

// ---- item 6: subresources of Pods and ServiceAccounts ----

const PODS: &str = "/api/v1/namespaces/default/pods";

async fn create_pod(dc: &DevCluster, name: &str) -> Value {
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name}}, "spec": {"containers": [{"name": "app", "image": "nginx:1.25"}]}});
    let (code, pod) = call(dc, "POST", PODS, JSON, Some(pod)).await;
    assert_eq!(code, 201, "{pod}");
    pod
}

#[tokio::test]
async fn discovery_lists_the_pod_and_service_account_subresources() {
    let dc = DevCluster::start_local().await.unwrap();
    let (_, list) = call(&dc, "GET", "/api/v1", None, None).await;
    let find = |name: &str| list["resources"].as_array().unwrap().iter().find(|r| r["name"] == name).cloned();
    assert_eq!(
        find("pods/binding"),
        Some(json!({"name": "pods/binding", "singularName": "", "namespaced": true, "kind": "Binding", "verbs": ["create"]}))
    );
    assert_eq!(
        find("pods/ephemeralcontainers"),
        Some(
            json!({"name": "pods/ephemeralcontainers", "singularName": "", "namespaced": true, "kind": "Pod", "verbs": ["get", "patch", "update"]})
        )
    );
    assert_eq!(
        find("pods/eviction"),
        Some(
            json!({"name": "pods/eviction", "singularName": "", "namespaced": true, "group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"]})
        )
    );
    assert_eq!(
        find("serviceaccounts/token"),
        Some(
            json!({"name": "serviceaccounts/token", "singularName": "", "namespaced": true, "group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest", "verbs": ["create"]})
        )
    );
    // routing reads the same list: a verb a subresource does not list is refused
    create_pod(&dc, "p").await;
    let (code, _) = call(&dc, "GET", &format!("{PODS}/p/eviction"), None, None).await;
    assert_eq!(code, 405);
    let (code, _) = call(&dc, "DELETE", &format!("{PODS}/p/status"), None, None).await;
    assert_eq!(code, 405);
    let (code, _) = call(&dc, "GET", &format!("{PODS}/p"), None, None).await;
    assert_eq!(code, 200, "the pod is still there");
}

#[tokio::test]
async fn ephemeral_containers_change_only_through_their_subresource_and_only_by_addition() {
    let dc = DevCluster::start_local().await.unwrap();
    let before = create_pod(&dc, "p").await;
    let path = format!("{PODS}/p/ephemeralcontainers?fieldManager=kubectl-debug");
    let (code, pod) = call(&dc, "GET", &path, None, None).await;
    assert_eq!((code, &pod["kind"]), (200, &json!("Pod")));
    // kubectl debug's strategic merge patch; other changes sent along are ignored
    let add = json!({
        "metadata": {"labels": {"sneaky": "yes"}},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.26"}], "ephemeralContainers": [{"name": "debugger", "image": "busybox", "targetContainerName": "app", "stdin": true}]},
    });
    let (code, pod) = call(&dc, "PATCH", &path, STRATEGIC, Some(add)).await;
    assert_eq!(code, 200, "{pod}");
    assert_eq!(pod["metadata"]["labels"], json!({"app": "p"}));
    assert_eq!(pod["spec"]["containers"][0]["image"], "nginx:1.25");
    let ec = &pod["spec"]["ephemeralContainers"][0];
    assert_eq!(
        (&ec["name"], &ec["imagePullPolicy"], &ec["terminationMessagePolicy"]),
        (&json!("debugger"), &json!("Always"), &json!("File"))
    );
    assert!(rv(&pod) > rv(&before));
    let entry = pod["metadata"]["managedFields"].as_array().unwrap().iter().find(|e| e["manager"] == "kubectl-debug").cloned().unwrap();
    assert_eq!(entry["subresource"], "ephemeralcontainers");
    // the main resource does not change them
    let (code, main) = call(&dc, "PATCH", &format!("{PODS}/p"), MERGE, Some(json!({"metadata": {"labels": {"b": "c"}}}))).await;
    assert_eq!((code, main["spec"]["ephemeralContainers"].as_array().map(Vec::len)), (200, Some(1)));
    // removing or changing an existing one is refused; a second one is added by merge patch too
    let (code, status) = call(&dc, "PATCH", &path, MERGE, Some(json!({"spec": {"ephemeralContainers": []}}))).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["message"],
        "Pod \"p\" is invalid: spec.ephemeralContainers: Forbidden: existing ephemeral containers \"debugger\" may not be removed\n"
    );
    let changed = json!({"spec": {"ephemeralContainers": [{"name": "debugger", "image": "alpine", "$patch": "merge"}]}});
    let (code, status) = call(&dc, "PATCH", &path, STRATEGIC, Some(changed)).await;
    assert_eq!((code, &status["details"]["causes"][0]["field"]), (422, &json!("spec.ephemeralContainers[debugger]")), "{status}");
    let with_ports = json!({"spec": {"ephemeralContainers": [{"name": "net", "image": "busybox", "ports": [{"containerPort": 80}]}]}});
    let (code, status) = call(&dc, "PATCH", &path, STRATEGIC, Some(with_ports)).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["message"],
        "Pod \"p\" is invalid: spec.ephemeralContainers[1].ports: Forbidden: cannot be set for an Ephemeral Container"
    );
    let duplicate = json!({"spec": {"ephemeralContainers": [{"name": "app", "image": "busybox"}]}});
    let (code, status) = call(&dc, "PATCH", &path, STRATEGIC, Some(duplicate)).await;
    assert_eq!(
        (code, &status["message"]),
        (422, &json!("Pod \"p\" is invalid: spec.ephemeralContainers[1].name: Duplicate value: \"app\""))
    );
    let (_, current) = call(&dc, "GET", &path, None, None).await;
    let mut put = current.clone();
    put["spec"]["ephemeralContainers"].as_array_mut().unwrap().push(json!({"name": "second", "image": "busybox"}));
    let (code, pod) = call(&dc, "PUT", &path, JSON, Some(put)).await;
    assert_eq!((code, pod["spec"]["ephemeralContainers"].as_array().map(Vec::len)), (200, Some(2)), "{pod}");
}

#[tokio::test]
async fn an_eviction_deletes_the_pod_and_answers_201_success() {
    let dc = DevCluster::start_local().await.unwrap();
    create_pod(&dc, "p").await;
    let eviction = |name: &str, options: Value| json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": "default"}, "deleteOptions": options});
    let (code, status) = call(&dc, "POST", &format!("{PODS}/p/eviction"), JSON, Some(eviction("other", json!({})))).await;
    assert_eq!((code, &status["message"]), (400, &json!("name in URL does not match name in Eviction object")));
    let (code, status) = call(&dc, "POST", &format!("{PODS}/p/eviction?dryRun=All"), JSON, Some(eviction("p", json!({})))).await;
    assert_eq!(code, 201, "{status}");
    let stale = json!({"preconditions": {"resourceVersion": "1"}});
    let (code, status) = call(&dc, "POST", &format!("{PODS}/p/eviction"), JSON, Some(eviction("p", stale))).await;
    assert_eq!(code, 409, "{status}");
    let (code, _) = call(&dc, "GET", &format!("{PODS}/p"), None, None).await;
    assert_eq!(code, 200, "a dry run and a failed precondition leave the pod");
    // a running pod without a budget goes too
    let running = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
    let (code, _) = call(&dc, "PATCH", &format!("{PODS}/p/status"), MERGE, Some(running)).await;
    assert_eq!(code, 200);
    let (code, status) =
        call(&dc, "POST", &format!("{PODS}/p/eviction"), JSON, Some(eviction("p", json!({"gracePeriodSeconds": 0})))).await;
    assert_eq!((code, status), (201, json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})));
    let (code, _) = call(&dc, "GET", &format!("{PODS}/p"), None, None).await;
    assert_eq!(code, 404, "evicted");
    let (code, status) = call(&dc, "POST", &format!("{PODS}/p/eviction"), JSON, Some(eviction("p", json!({})))).await;
    assert_eq!((code, &status["message"]), (404, &json!("pods \"p\" not found")));
}

#[tokio::test]
async fn an_eviction_honours_a_pod_disruption_budget_by_its_status() {
    let dc = DevCluster::start_local().await.unwrap();
    create_pod(&dc, "guarded").await;
    let running = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
    let (code, _) = call(&dc, "PATCH", &format!("{PODS}/guarded/status"), MERGE, Some(running)).await;
    assert_eq!(code, 200);
    let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "keep"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}}});
    let pdbs = "/apis/policy/v1/namespaces/default/poddisruptionbudgets";
    let (code, created) = call(&dc, "POST", pdbs, JSON, Some(pdb)).await;
    assert_eq!(code, 201, "{created}");
    let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "guarded", "namespace": "default"}});
    // No disruption controller has observed the budget yet: the real server refuses too.
    let (code, status) = call(&dc, "POST", &format!("{PODS}/guarded/eviction"), JSON, Some(eviction.clone())).await;
    assert_eq!((code, status["reason"].as_str()), (429, Some("TooManyRequests")), "{status}");
    // Once its status allows a disruption, the eviction spends it and the pod goes.
    let allowed =
        json!({"status": {"observedGeneration": 1, "disruptionsAllowed": 1, "currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2}});
    let (code, text) = call(&dc, "PATCH", &format!("{pdbs}/keep/status"), MERGE, Some(allowed)).await;
    assert_eq!(code, 200, "{text}");
    let (code, status) = call(&dc, "POST", &format!("{PODS}/guarded/eviction"), JSON, Some(eviction)).await;
    assert_eq!(code, 201, "{status}");
    let (code, budget) = call(&dc, "GET", &format!("{pdbs}/keep"), None, None).await;
    assert_eq!((code, budget["status"]["disruptionsAllowed"].as_i64()), (200, Some(0)), "{budget}");
    let (code, _) = call(&dc, "GET", &format!("{PODS}/guarded"), None, None).await;
    assert_eq!(code, 404, "evicted");
}

#[tokio::test]
async fn a_binding_assigns_an_unbound_pod_to_its_node_once() {
    let dc = DevCluster::start_local().await.unwrap();
    let before = create_pod(&dc, "p").await;
    let binding = |name: &str, node: &str| json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "annotations": {"scheduled-by": "test"}}, "target": {"apiVersion": "v1", "kind": "Node", "name": node}});
    let path = format!("{PODS}/p/binding");
    let (code, status) = call(&dc, "POST", &path, JSON, Some(binding("p", ""))).await;
    assert_eq!((code, &status["message"]), (500, &json!("target.name: Required value")));
    let (code, status) = call(&dc, "POST", &path, JSON, Some(binding("q", "node-1"))).await;
    assert_eq!((code, &status["message"]), (400, &json!("name in URL does not match name in Binding object")));
    let (code, status) = call(&dc, "POST", &path, JSON, Some(binding("p", "node-1"))).await;
    assert_eq!((code, status), (201, json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})));
    let (_, pod) = call(&dc, "GET", &format!("{PODS}/p"), None, None).await;
    assert_eq!((&pod["spec"]["nodeName"], &pod["metadata"]["annotations"]["scheduled-by"]), (&json!("node-1"), &json!("test")));
    let scheduled = pod["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "PodScheduled").cloned().unwrap();
    assert_eq!(scheduled["status"], "True");
    assert!(rv(&pod) > rv(&before));
    let (code, status) = call(&dc, "POST", &path, JSON, Some(binding("p", "node-2"))).await;
    assert_eq!(code, 409, "{status}");
    assert_eq!(status["message"], "Operation cannot be fulfilled on pods/binding \"p\": pod p is already assigned to node \"node-1\"");
    let (code, _) = call(&dc, "POST", &format!("{PODS}/nope/binding"), JSON, Some(binding("nope", "node-1"))).await;
    assert_eq!(code, 404);
}

fn token_request(expiration: Option<i64>) -> Value {
    let mut spec = json!({});
    if let Some(e) = expiration {
        spec["expirationSeconds"] = json!(e);
    }
    json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec})
}

#[tokio::test]
async fn a_token_request_answers_a_jwt_for_the_service_account() {
    let dc = DevCluster::start_local().await.unwrap();
    let path = "/api/v1/namespaces/default/serviceaccounts/default/token";
    let (code, tr) = call(&dc, "POST", path, JSON, Some(token_request(None))).await;
    assert_eq!(code, 201, "{tr}");
    assert_eq!((&tr["kind"], &tr["apiVersion"]), (&json!("TokenRequest"), &json!("authentication.k8s.io/v1")));
    assert_eq!(
        tr["spec"],
        json!({"audiences": ["https://kubernetes.default.svc.cluster.local"], "expirationSeconds": 3600, "boundObjectRef": null})
    );
    let token = tr["status"]["token"].as_str().unwrap();
    assert_eq!(token.split('.').count(), 3, "{token}");
    let expires = chrono::DateTime::parse_from_rfc3339(tr["status"]["expirationTimestamp"].as_str().unwrap()).unwrap();
    let left = expires.timestamp() - chrono::Utc::now().timestamp();
    assert!((3590..=3600).contains(&left), "{left}");
    use base64::Engine;
    let claims: Value =
        serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(token.split('.').nth(1).unwrap()).unwrap())
            .unwrap();
    assert_eq!(claims["sub"], "system:serviceaccount:default:default");
    let (code, status) = call(&dc, "POST", path, JSON, Some(token_request(Some(599)))).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["message"],
        "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes"
    );
    let (code, status) = call(&dc, "POST", "/api/v1/namespaces/default/serviceaccounts/ghost/token", JSON, Some(token_request(None))).await;
    assert_eq!((code, &status["message"]), (404, &json!("serviceaccounts \"ghost\" not found")));
    // bound to a pod: it must run as the service account
    create_pod(&dc, "p").await;
    let mut bound = token_request(Some(600));
    bound["spec"]["boundObjectRef"] = json!({"apiVersion": "v1", "kind": "Pod", "name": "p"});
    let (code, tr) = call(&dc, "POST", path, JSON, Some(bound.clone())).await;
    assert_eq!((code, &tr["spec"]["boundObjectRef"]["name"]), (201, &json!("p")), "{tr}");
    let (code, status) = call(&dc, "POST", "/api/v1/namespaces/default/serviceaccounts/other/token", JSON, Some(bound)).await;
    assert_eq!(code, 404, "no such account: {status}");
}

/// Sends a GET with `Authorization: Bearer token`; the status code.
async fn get_as(dc: &DevCluster, token: &str, path: &str) -> u16 {
    let client = kube::Client::try_from(kube::Config::new(dc.url().parse().unwrap())).unwrap();
    let req = http::Request::builder().uri(path).header("authorization", format!("Bearer {token}")).body(Vec::new()).unwrap();
    client.send(req.map(Into::into)).await.map(|r| r.status().as_u16()).unwrap_or_else(|e| match e {
        kube::Error::Api(s) => s.code,
        other => panic!("{other}"),
    })
}

#[tokio::test]
async fn issued_tokens_authenticate_while_valid_when_the_cluster_checks_tokens() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let config = bosun_devcluster::Config { token: Some("fixed".into()), ..Default::default() };
    let dc = DevCluster::start(listener, config).await.unwrap();
    let path = "/api/v1/namespaces/default/serviceaccounts/default/token";
    let (code, tr) = call(&dc, "POST", path, JSON, Some(token_request(None))).await;
    assert_eq!(code, 201, "{tr}");
    let token = tr["status"]["token"].as_str().unwrap().to_string();
    assert_eq!(get_as(&dc, &token, "/api").await, 200, "discovery is open to every authenticated caller");
    assert_eq!(get_as(&dc, &token, "/api/v1/namespaces/default/configmaps").await, 403, "authenticated, but RBAC grants nothing more");
    assert_eq!(get_as(&dc, "fixed", "/api/v1/namespaces/default/configmaps").await, 200);
    // tampered: the claims of another account under the same signature
    use base64::Engine;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let parts: Vec<&str> = token.split('.').collect();
    let mut claims: Value = serde_json::from_slice(&b64.decode(parts[1]).unwrap()).unwrap();
    claims["sub"] = json!("system:serviceaccount:kube-system:admin");
    let tampered = format!("{}.{}.{}", parts[0], b64.encode(serde_json::to_vec(&claims).unwrap()), parts[2]);
    assert_eq!(get_as(&dc, &tampered, "/api/v1/namespaces/default/configmaps").await, 401);
    // expired: signed with the cluster's key, but an hour ago
    let mut old = serde_json::from_slice::<Value>(&b64.decode(parts[1]).unwrap()).unwrap();
    let now = chrono::Utc::now().timestamp();
    (old["iat"], old["nbf"], old["exp"]) = (json!(now - 7200), json!(now - 7200), json!(now - 3600));
    let expired = dc.cluster().token_key.sign(&old);
    assert_eq!(get_as(&dc, &expired, "/api/v1/namespaces/default/configmaps").await, 401);
    // a token for another audience is not for the API server
    let mut other = token_request(None);
    other["spec"]["audiences"] = json!(["vault"]);
    let (_, tr) = call(&dc, "POST", path, JSON, Some(other)).await;
    assert_eq!(get_as(&dc, tr["status"]["token"].as_str().unwrap(), "/api/v1/namespaces/default/configmaps").await, 401);
    // once its service account is gone, so is the token
    let (code, _) = call(&dc, "DELETE", "/api/v1/namespaces/default/serviceaccounts/default", None, None).await;
    assert_eq!(code, 200);
    assert_eq!(get_as(&dc, &token, "/api/v1/namespaces/default/configmaps").await, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_a_token_and_debugs_a_pod() {
    if !require_kubectl() {
        return;
    }
    let dc = DevCluster::start_local().await.unwrap();
    create_pod(&dc, "p").await;
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    dc.write_kubeconfig(&kc).unwrap();
    let kc2 = kc.clone();
    tokio::task::spawn_blocking(move || {
        let (ok, out) = kubectl(&kc2, &["create", "token", "default", "--duration=20m"]);
        assert!(ok, "{out}");
        assert_eq!(out.trim().split('.').count(), 3, "a JWT: {out}");
        let (ok, out) = kubectl(&kc2, &["create", "token", "ghost"]);
        assert!(!ok && out.contains("serviceaccounts \"ghost\" not found"), "{out}");
        let (ok, out) = kubectl(&kc2, &["debug", "p", "--image=busybox", "--container=dbg", "--target=app"]);
        assert!(ok, "{out}");
        let (ok, out) = kubectl(
            &kc2,
            &["get", "pod", "p", "-o", "jsonpath={.spec.ephemeralContainers[0].name} {.spec.ephemeralContainers[0].targetContainerName}"],
        );
        assert_eq!((ok, out.trim()), (true, "dbg app"), "{out}");
    })
    .await
    .unwrap();
    dc.shutdown().await;
}
