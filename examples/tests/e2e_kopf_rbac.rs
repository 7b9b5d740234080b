//! The examples that make the controller create objects, run as a service account bound only to
//! what `bosun rbac` prints for them (`rbac::servers::render`, with the controller's settings),
//! on the dev cluster, which authorizes a service account's requests as a real API server does:
//! example 02 (Pods, declared with `owns`) and example 17 (the webhook configurations). Each
//! works, and the controller is forbidden nothing.

mod support;

use support::*;

use bosun_controller::Settings;
use bosun_controller::cluster::{Cluster, apply};
use bosun_controller::rbac::servers::{Output, render};
use bosun_tests::{kex, wait_for};
use serde_json::json;

/// Prints the roles for the staged example's handler server as `bosun rbac` does, applies them
/// (with the namespace and service account they bind), and returns a client that is that
/// service account.
async fn bound_to_its_roles(stage: &Stage) -> kube::Client {
    let admin = Cluster::new(stage.client.clone());
    let settings = Settings { handlers: vec![format!("http://127.0.0.1:{}", stage.port())], ..Default::default() };
    let output = Output { name: "bosun".into(), service_account: "bosun-system/bosun".into(), owns: vec![] };
    let printed = render(&admin, &settings, &output).await.expect("the roles are printed");
    let dir = tempfile::tempdir().unwrap();
    let account = "apiVersion: v1\nkind: Namespace\nmetadata: {name: bosun-system}\n---\n\
                   apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: bosun, namespace: bosun-system}\n";
    std::fs::write(dir.path().join("rbac.yaml"), format!("{account}{printed}")).unwrap();
    apply::apply_path(&admin, &dir.path().join("rbac.yaml")).await.expect("the roles apply");
    let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}});
    let token = admin.create("/api/v1/namespaces/bosun-system/serviceaccounts/bosun/token", &request).await.expect("a token");
    let token = token["status"]["token"].as_str().expect("the token").to_string();
    let mut config = kube::Config::new(stage.url().parse().unwrap());
    config.auth_info = serde_json::from_value(json!({"token": token})).unwrap();
    kube::Client::try_from(config).unwrap()
}

/// No request of the controller was forbidden: it says each missing permission once.
fn assert_never_forbidden(run: &Run) {
    let log = run.controller.log();
    let forbidden: Vec<&String> = log.iter().filter(|l| l.contains("Forbidden") || l.contains("forbidden")).collect();
    assert!(forbidden.is_empty(), "forbidden under its generated roles: {forbidden:#?}\n{}", run.dump());
}

#[tokio::test]
async fn example_02_children_works_under_the_roles_bosun_rbac_prints_for_it() {
    let stage = stage("children").await;
    let account = bound_to_its_roles(&stage).await;
    // Its account cannot do what the roles do not say.
    let pods: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        account.clone(),
        "default",
        &kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk("", "v1", "Pod")),
    );
    let listed = pods.list(&Default::default()).await.expect_err("the roles give no list of pods");
    assert!(matches!(&listed, kube::Error::Api(s) if s.code == 403), "{listed:?}");

    let run = stage.start_as(&account).await;
    run.apply_obj().await;
    run.controller.wait_log(&format!("{OBJ} Handler 'create_fn' succeeded."), T).await;
    let cluster = run.cluster();
    wait_for("the child Pod, owned by the object", T, || {
        let cluster = cluster.clone();
        async move {
            let pods = cluster.get("/api/v1/namespaces/default/pods").await.unwrap();
            pods["items"].as_array().unwrap().iter().any(|p| p["metadata"]["ownerReferences"][0]["name"] == "kopf-example-1")
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", run.dump()));
    let stored = kex::get(&run.client, "default", "kopf-example-1").await.expect("stored");
    assert_eq!(stored["status"]["create_fn"]["children"].as_array().map(Vec::len), Some(1), "{stored:#}");
    assert_never_forbidden(&run);
}

#[tokio::test]
async fn example_17_admission_works_under_the_roles_bosun_rbac_prints_for_it() {
    let stage = stage("admission").await;
    let account = bound_to_its_roles(&stage).await;
    let run = stage.start_as(&account).await;
    run.controller.wait_log("MutatingWebhookConfiguration 'auto.bosun.dev' is created: 1 webhook(s).", T).await;
    run.controller.wait_log("ValidatingWebhookConfiguration 'auto.bosun.dev' is created: 3 webhook(s).", T).await;
    let cluster = run.cluster();
    let object = |name: &str, field: &str, labels: serde_json::Value| {
        json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
               "metadata": {"name": name, "namespace": "default", "labels": labels}, "spec": {"field": field}})
    };
    let denied = cluster.create(&kex::path("default"), &object("wrong-1", "wrong", json!({}))).await.expect_err("denied");
    assert!(denied.to_string().contains("Meh! I don't like it. Change the field."), "{denied}");
    cluster.create(&kex::path("default"), &object("good-1", "value", json!({"somelabel": "somevalue"}))).await.expect("allowed");
    let stored = kex::get(&run.client, "default", "good-1").await.expect("stored");
    assert_eq!(stored["spec"]["injected"], 123, "mutated: {stored:#}");
    assert_never_forbidden(&run);
}
