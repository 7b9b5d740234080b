//! The Python `kubernetes` client and Kopf against the dev cluster. They need a Python with
//! those packages: set `BOSUN_PYTHON` to its interpreter (default `python3`; `.ci/run` makes a
//! venv). Without them the tests fail under CI and are skipped, with a message, elsewhere.

#[path = "../../tests/src/tools.rs"]
mod tools;

use std::process::{Command, Stdio};
use std::time::Duration;

use bosun_devcluster::DevCluster;

fn python() -> String {
    std::env::var("BOSUN_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Whether the Python package `module` imports, under the rule of [`tools::require_tool`].
fn require_module(module: &str) -> bool {
    let python = python();
    let imports = Command::new(&python).args(["-c", &format!("import {module}")]).output().is_ok_and(|o| o.status.success());
    tools::require_tool(&format!("the Python package `{module}` in {python} (set BOSUN_PYTHON)"), imports)
}

const CLIENT_SCRIPT: &str = r#"
import sys
from kubernetes import client, config, watch
config.load_kube_config(config_file=sys.argv[1])
v1 = client.CoreV1Api()
v1.create_namespaced_config_map("default", {"metadata": {"name": "py1"}, "data": {"a": "1"}})
rv = v1.list_namespaced_config_map("default").metadata.resource_version
v1.patch_namespaced_config_map("py1", "default", {"data": {"a": "2"}})
events = [(e["type"], e["object"].data["a"]) for e in watch.Watch().stream(
    v1.list_namespaced_config_map, "default", resource_version=rv, timeout_seconds=1)]
assert events == [("MODIFIED", "2")], events
try:
    v1.create_namespaced_config_map("default", {"metadata": {"name": "py1"}})
    raise SystemExit("expected a conflict")
except client.exceptions.ApiException as e:
    assert e.status == 409, e.status
v1.delete_namespaced_config_map("py1", "default")
print("python client ok")
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_client_creates_patches_watches_and_sees_conflicts() {
    if !require_module("kubernetes") {
        return;
    }
    let dc = DevCluster::start_local().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    dc.write_kubeconfig(&kc).unwrap();
    let out =
        tokio::task::spawn_blocking(move || Command::new(python()).arg("-c").arg(CLIENT_SCRIPT).arg(&kc).output().unwrap()).await.unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains("python client ok"), "{text}");
}

const CRD: &str = r#"{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
 "metadata": {"name": "kopfexamples.kopf.dev"},
 "spec": {"scope": "Namespaced", "group": "kopf.dev",
  "names": {"kind": "KopfExample", "plural": "kopfexamples", "singular": "kopfexample", "shortNames": ["kex"]},
  "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
   "schema": {"openAPIV3Schema": {"type": "object", "properties": {
     "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
     "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}}"#;

const OPERATOR: &str = r#"
import kopf

@kopf.on.create('kopfexamples')
def create_fn(spec, **kwargs):
    return {'message': 'hello world'}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kopfs_minimal_operator_handles_a_created_object() {
    if !require_module("kopf") {
        return;
    }
    let dc = DevCluster::start_local().await.unwrap();
    let client = dc.client();
    let crds: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(
        client.clone(),
        &kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition")),
    );
    crds.create(&Default::default(), &serde_json::from_str(CRD).unwrap()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    dc.write_kubeconfig(&kc).unwrap();
    let script = dir.path().join("operator.py");
    std::fs::write(&script, OPERATOR).unwrap();
    let mut kopf = Command::new(python())
        .args(["-m", "kopf", "run", "--standalone", "-A"])
        .arg(&script)
        .env("KUBECONFIG", &kc)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        client,
        "default",
        &kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk("kopf.dev", "v1", "KopfExample")),
    );
    let obj =
        serde_json::json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "kex1"}, "spec": {"field": "value"}});
    api.create(&Default::default(), &serde_json::from_value(obj).unwrap()).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let handled = loop {
        let o = api.get("kex1").await.unwrap();
        if o.data.pointer("/status/create_fn/message").is_some() {
            break true;
        }
        if tokio::time::Instant::now() > deadline {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let _ = kopf.kill();
    let out = kopf.wait_with_output().unwrap();
    let log = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(handled, "Kopf did not handle the object: {log}");
    assert!(log.contains("Handler 'create_fn' succeeded."), "{log}");
}
