//! Replacing a running Kopf operator with Bosun in Kopf-compatible mode: objects Kopf already
//! handled are not handled again (same diffbase annotation, same finalizer), new objects are
//! handled, and deletion runs the delete handler through Kopf's finalizer. Kopf itself runs
//! against the dev cluster; the test needs a Python with `kopf` (`BOSUN_PYTHON`, default
//! `python3`) and says so when it is missing.

use std::process::{Command, Stdio};
use std::time::Duration;

use bosun_controller::Settings;
use bosun_devcluster::DevCluster;
use bosun_proto::v1 as pb;
use bosun_tests::{Controller, Scripted, kex, spec, succeed};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(60);

const OPERATOR: &str = r#"
import kopf

@kopf.on.create('kopf.dev', 'v1', 'kopfexamples')
def create_fn(**kwargs):
    return {'message': 'hello world'}

@kopf.on.delete('kopf.dev', 'v1', 'kopfexamples')
def delete_fn(**kwargs):
    pass
"#;

fn python() -> String {
    std::env::var("BOSUN_PYTHON").unwrap_or_else(|_| "python3".into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bosun_takes_over_objects_kopf_handled_without_handling_them_again() {
    let has_kopf = Command::new(python()).args(["-c", "import kopf"]).output().is_ok_and(|o| o.status.success());
    if !has_kopf {
        eprintln!("python package `kopf` missing (set BOSUN_PYTHON to a Python that has it); skipping");
        return;
    }
    let cluster = DevCluster::start_local().await.unwrap();
    let client = cluster.client();
    kex::install_crd(&client).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    cluster.write_kubeconfig(&kubeconfig).unwrap();
    let script = dir.path().join("operator.py");
    std::fs::write(&script, OPERATOR).unwrap();

    // Kopf handles the first object: result, diffbase annotation, finalizer.
    let mut kopf = Command::new(python())
        .args(["-m", "kopf", "run", "--standalone", "-A"])
        .arg(&script)
        .env("KUBECONFIG", &kubeconfig)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    kex::create(&client, "default", "from-kopf", json!({})).await;
    let deadline = tokio::time::Instant::now() + T;
    let handled = loop {
        let o = kex::get(&client, "default", "from-kopf").await.unwrap();
        // Kopf writes the main resource and the status separately: wait for both.
        let done = o["metadata"]["annotations"]["kopf.zalando.org/last-handled-configuration"].is_string()
            && o["metadata"]["finalizers"] == json!(["kopf.zalando.org/KopfFinalizerMarker"])
            && o["status"]["create_fn"]["message"].is_string();
        if done || tokio::time::Instant::now() > deadline {
            break o;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let _ = kopf.kill();
    let _ = kopf.wait();
    assert_eq!(handled["status"]["create_fn"]["message"], "hello world", "Kopf handled it: {handled:#}");

    // Bosun replaces Kopf.
    let server = Scripted::new(vec![
        (spec("create_fn", pb::HandlerKind::Create), succeed(json!({"message": "hello from bosun"}))),
        (spec("delete_fn", pb::HandlerKind::Delete), succeed(Value::Null)),
    ]);
    let (addr, stopper) = server.clone().spawn().await;
    let controller = Controller::start(client.clone(), Settings { handlers: vec![addr], kopf_compat: true, ..Default::default() });
    kex::create(&client, "default", "from-bosun", json!({})).await;
    controller.wait_log("[default/from-bosun] Creation is processed: 1 succeeded; 0 failed.", T).await;
    assert_eq!(controller.count("[default/from-kopf]"), 0, "nothing to do for Kopf's object: {:#?}", controller.log());
    assert_eq!(server.count("create_fn"), 1);

    // Kopf's finalizer is Bosun's now: deleting runs Bosun's delete handler, then it goes.
    kex::delete(&client, "default", "from-kopf").await;
    controller.wait_log("[default/from-kopf] Deletion is processed: 1 succeeded; 0 failed.", T).await;
    kex::wait_gone(&client, "default", "from-kopf").await;
    controller.stop().await;
    stopper.stop().await;
}
