//! The last handled configuration (the diffbase) survives losing the status, with the real
//! `bosun` binary on the dev cluster and a Rust SDK handler server over gRPC: a status wiped
//! with `kubectl patch --subresource=status --type merge -p '{"status": null}'` (as a Velero
//! restore, another controller's typed status update or `kubectl replace --subresource=status`
//! would) runs no create handler again, and a later change of the spec is an update with the
//! right diff. An object handled by an older build (its diffbase in `status.bosun.dev`) goes on
//! from there: no creation again, and its diffbase moves to the annotation with the next write.

mod support;

use std::path::PathBuf;
use std::sync::Arc;

use bosun_sdk::{Cause, Change, HandlerError, Operation, Operator};
use parking_lot::Mutex;
use serde_json::{Value, json};
use support::{Bosun, T, kubectl};

const DIFFBASE: &str = "bosun.dev/last-handled-configuration";

/// What the handler server saw: the objects its create handler ran for, and each update's diff.
#[derive(Default)]
struct Seen {
    created: Vec<String>,
    updates: Vec<(String, Vec<Change>)>,
}

/// A Rust SDK handler server with `create_fn` (returns a result, as Kopf's example 01 does) and
/// `update_fn`, noting what it saw; its address.
async fn handler_server(seen: Arc<Mutex<Seen>>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = format!("http://{}", listener.local_addr().unwrap());
    let (on_create, on_update) = (seen.clone(), seen);
    let op = Operator::new()
        .on_create("kopf.dev/v1/kopfexamples", move |cause: Cause| {
            on_create.lock().created.push(cause.name().to_string());
            async { Ok::<_, HandlerError>(json!({"message": "hello world"})) }
        })
        .id("create_fn")
        .on_update("kopf.dev/v1/kopfexamples", move |cause: Cause| {
            on_update.lock().updates.push((cause.name().to_string(), cause.diff().to_vec()));
            async { Ok::<_, HandlerError>(json!({"updated": true})) }
        })
        .id("update_fn");
    tokio::spawn(op.serve_with_listener(listener, std::future::pending()));
    addr
}

/// The dev cluster with the examples' CRD (status subresource, unknown fields kept), its API
/// and kubeconfig.
async fn cluster(dir: &std::path::Path) -> (bosun_devcluster::DevCluster, bosun_controller::cluster::Cluster, String) {
    let crd = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/crd.yaml");
    support::dev_cluster(dir, &[crd]).await
}

/// The PATCH requests on kopfexamples the dev cluster answered so far (the main resource and
/// `/status`), as `apiserver_request_total` counts them.
fn kex_patches(cluster: &bosun_devcluster::DevCluster) -> u64 {
    let text = cluster.cluster().metrics.render();
    text.lines()
        .filter(|l| l.starts_with("apiserver_request_total{") && l.contains("resource=\"kopfexamples\"") && l.contains("verb=\"PATCH\""))
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, n)| n.parse::<u64>().ok()))
        .sum()
}

fn path(name: &str) -> String {
    format!("/apis/kopf.dev/v1/namespaces/default/kopfexamples/{name}")
}

/// `bosun run` at debug level (Kopf's line of a cause seen with nothing to do is a debug line;
/// the tests' `RUST_LOG=info` would override `--verbose`).
fn start_bosun(dir: &std::path::Path, kubeconfig: &str, handlers: &str) -> Bosun {
    let args = ["run", "--kubeconfig", kubeconfig, "--handler", handlers, "--standalone", "--verbose", "-n", "default"];
    Bosun::start_with_env(dir, &args, &[("RUST_LOG", "bosun_controller=debug,bosun=debug,info")])
}

/// Wipes the object's status as the issue's reproduction does, with kubectl.
fn wipe_status(kubeconfig: &str, name: &str) -> Value {
    let wiped = kubectl(
        kubeconfig,
        &["patch", "kex", name, "-n", "default", "--subresource=status", "--type", "merge", "-p", r#"{"status": null}"#],
    );
    assert!(wiped.get("status").is_none_or(Value::is_null), "the status is gone: {wiped:#}");
    wiped
}

/// Waits until the object at `path` satisfies `cond`.
async fn wait_obj(api: &bosun_controller::cluster::Cluster, name: &str, what: &str, cond: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + T;
    loop {
        let obj = api.get(&path(name)).await.unwrap();
        if cond(&obj) {
            return obj;
        }
        assert!(tokio::time::Instant::now() < deadline, "not {what} within {T:?}: {obj:#}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The one change of `spec.field` from `old` to `new`.
fn field_change(old: &str, new: &str) -> Vec<Change> {
    vec![Change { operation: Operation::Change, path: vec!["spec".into(), "field".into()], old: Some(json!(old)), new: Some(json!(new)) }]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wiped_status_runs_no_create_handler_again_and_a_spec_change_is_an_update_with_its_diff() {
    let dir = tempfile::tempdir().unwrap();
    let (dev, api, kubeconfig) = cluster(dir.path()).await;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let handlers = handler_server(seen.clone()).await;
    let mut bosun = start_bosun(dir.path(), &kubeconfig, &handlers);
    bosun.wait_line("Serving kopfexamples.v1.kopf.dev with 2 handler(s); progress in status.bosun.dev, the diffbase in annotations.").await;

    let obj = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "w"}, "spec": {"field": "value"}});
    api.create("/apis/kopf.dev/v1/namespaces/default/kopfexamples", &obj).await.unwrap();
    bosun.wait_line("[default/w] Creation is processed: 1 succeeded; 0 failed.").await;
    let handled = wait_obj(&api, "w", "handled", |o| o["status"]["create_fn"]["message"] == "hello world").await;
    assert_eq!(handled["metadata"]["annotations"][DIFFBASE], "{\"spec\":{\"field\":\"value\"}}\n", "{handled:#}");
    assert!(handled["status"].get("bosun.dev").is_none(), "nothing of the state in status: {handled:#}");
    // The cost: the diffbase in the main write, the result in the status write.
    assert_eq!(kex_patches(&dev), 2, "{}", dev.cluster().metrics.render());

    // The status is wiped; nothing else changes: the controller sees it, and does nothing. (The
    // line may also be that of a look at the body its own writes returned: then the wipe is
    // seen with the change below, which tells the same.)
    wipe_status(&kubeconfig, "w");
    let seen_next = first_line(&mut bosun, &["[default/w] Something has changed, but we are not interested", "[default/w] Creation"]).await;
    assert!(seen_next.contains("Something has changed"), "{seen_next}");

    // The spec changes: an update, with the diff against what was handled.
    api.patch(&path("w"), bosun_controller::cluster::content::MERGE, &json!({"spec": {"field": "changed"}})).await.unwrap();
    bosun.wait_line("[default/w] Updating is processed: 1 succeeded; 0 failed.").await;
    let updated = wait_obj(&api, "w", "updated", |o| o["status"]["update_fn"]["updated"] == true).await;
    assert_eq!(seen.lock().created, ["w"], "the create handler ran once: {:#?}", bosun.seen);
    assert_eq!(seen.lock().updates, [("w".to_string(), field_change("value", "changed"))]);
    assert_eq!(updated["metadata"]["annotations"][DIFFBASE], "{\"spec\":{\"field\":\"changed\"}}\n", "{updated:#}");

    // Wiped and changed at once: still an update, never a creation.
    wipe_status(&kubeconfig, "w");
    api.patch(&path("w"), bosun_controller::cluster::content::MERGE, &json!({"spec": {"field": "again"}})).await.unwrap();
    bosun.wait_count("[default/w] Updating is processed: 1 succeeded; 0 failed.", 2).await;
    assert_eq!(seen.lock().created, ["w"], "the create handler ran once: {:#?}", bosun.seen);
    assert_eq!(seen.lock().updates[1], ("w".to_string(), field_change("changed", "again")));
    assert!(bosun.interrupt().await.success());

    // Wiped while no controller runs (a restore): the next one resumes, it does not create.
    wipe_status(&kubeconfig, "w");
    let mut bosun = start_bosun(dir.path(), &kubeconfig, &handlers);
    let first = first_line(&mut bosun, &["[default/w] Resuming is in progress", "[default/w] Creation is in progress"]).await;
    assert!(first.contains("Resuming"), "{first}");
    assert_eq!(seen.lock().created, ["w"], "the create handler ran once: {:#?}", bosun.seen);
    assert!(bosun.interrupt().await.success());
}

/// The first line of `bosun` from now on that contains one of `texts`.
async fn first_line(bosun: &mut Bosun, texts: &[&str]) -> String {
    let deadline = tokio::time::Instant::now() + T;
    loop {
        let line = bosun.next_line(deadline, &format!("a line containing one of {texts:?}")).await;
        if texts.iter().any(|t| line.contains(t)) {
            return line;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_handled_with_its_diffbase_in_status_goes_on_and_the_diffbase_moves_to_the_annotation() {
    let dir = tempfile::tempdir().unwrap();
    let (_cluster, api, kubeconfig) = cluster(dir.path()).await;
    // Handled by an older build: the result and the diffbase in status, no annotation.
    let obj = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "old"}, "spec": {"field": "value"}});
    api.create("/apis/kopf.dev/v1/namespaces/default/kopfexamples", &obj).await.unwrap();
    let old_state = json!({"status": {
        "create_fn": {"message": "hello world"},
        "bosun.dev": {"last-handled-configuration": "{\"spec\":{\"field\":\"value\"}}\n"},
    }});
    api.patch(&format!("{}/status", path("old")), bosun_controller::cluster::content::MERGE, &old_state).await.unwrap();

    let seen = Arc::new(Mutex::new(Seen::default()));
    let handlers = handler_server(seen.clone()).await;
    let mut bosun = start_bosun(dir.path(), &kubeconfig, &handlers);
    // First sight, nothing changed: a resume (with no resume handler), not a creation.
    let first = first_line(&mut bosun, &["[default/old] Resuming is in progress", "[default/old] Creation is in progress"]).await;
    assert!(first.contains("Resuming"), "{first}");

    // The spec changes: an update against the old diffbase; the new one goes to the
    // annotation, and the status copy follows it (the status write lands first: should the
    // annotation's write fail, the copy still says the update is handled), until a write made
    // once the annotation holds it.
    api.patch(&path("old"), bosun_controller::cluster::content::MERGE, &json!({"spec": {"field": "changed"}})).await.unwrap();
    bosun.wait_line("[default/old] Updating is processed: 1 succeeded; 0 failed.").await;
    let moved = wait_obj(&api, "old", "the diffbase moved", |o| {
        let copy = &o["status"]["bosun.dev"]["last-handled-configuration"];
        o["metadata"]["annotations"][DIFFBASE].is_string()
            && o["status"]["update_fn"].is_object()
            && (copy.is_null() || *copy == o["metadata"]["annotations"][DIFFBASE])
    })
    .await;
    assert_eq!(moved["metadata"]["annotations"][DIFFBASE], "{\"spec\":{\"field\":\"changed\"}}\n", "{moved:#}");
    assert_eq!(seen.lock().updates, [("old".to_string(), field_change("value", "changed"))]);

    // From now on a wiped status loses nothing.
    wipe_status(&kubeconfig, "old");
    let seen_next =
        first_line(&mut bosun, &["[default/old] Something has changed, but we are not interested", "[default/old] Creation"]).await;
    assert!(seen_next.contains("Something has changed"), "{seen_next}");
    assert!(seen.lock().created.is_empty(), "no creation for an object handled before: {:#?}", bosun.seen);
    assert_eq!(bosun.count("[default/old] Creation"), 0, "{:#?}", bosun.seen);
    assert!(bosun.interrupt().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_diffbase_kept_in_status_a_cause_writes_once_and_a_wiped_status_creates_again() {
    let dir = tempfile::tempdir().unwrap();
    let (dev, api, kubeconfig) = cluster(dir.path()).await;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let handlers = handler_server(seen.clone()).await;
    let args =
        ["run", "--kubeconfig", &kubeconfig, "--handler", &handlers, "--standalone", "-n", "default", "--diffbase-storage", "status"];
    let mut bosun = Bosun::start(dir.path(), &args);
    bosun
        .wait_line("Serving kopfexamples.v1.kopf.dev with 2 handler(s); progress in status.bosun.dev, the diffbase in status.bosun.dev.")
        .await;
    let obj = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "s"}, "spec": {"field": "value"}});
    api.create("/apis/kopf.dev/v1/namespaces/default/kopfexamples", &obj).await.unwrap();
    bosun.wait_line("[default/s] Creation is processed: 1 succeeded; 0 failed.").await;
    let handled = wait_obj(&api, "s", "handled", |o| o["status"]["create_fn"].is_object()).await;
    assert_eq!(handled["status"]["bosun.dev"]["last-handled-configuration"], "{\"spec\":{\"field\":\"value\"}}\n", "{handled:#}");
    assert!(handled["metadata"].get("annotations").is_none(), "nothing in annotations: {handled:#}");
    // One write: the status write, the result and the diffbase together.
    assert_eq!(kex_patches(&dev), 1, "{}", dev.cluster().metrics.render());

    // What that costs: a wiped status loses the diffbase, and the create handler runs again.
    wipe_status(&kubeconfig, "s");
    bosun.wait_count("[default/s] Creation is processed: 1 succeeded; 0 failed.", 2).await;
    assert_eq!(seen.lock().created, ["s", "s"]);
    assert!(bosun.interrupt().await.success());
}
