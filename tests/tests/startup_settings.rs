//! What handler servers decide beyond their handlers, end to end against the dev cluster:
//! operator settings held when described and from startup handlers (Kopf's `settings` kwarg),
//! and parents finished by their server (Kopf's `kopf.execute()`).

use std::sync::Arc;
use std::time::Duration;

use bosun_controller::Settings;
use bosun_devcluster::DevCluster;
use bosun_proto::v1 as pb;
use bosun_tests::{Behaviour, Controller, Scripted, kex, spec, success, wait_for};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(20);

async fn setup() -> (DevCluster, kube::Client) {
    let cluster = DevCluster::start_local().await.expect("dev cluster starts");
    let client = cluster.client();
    kex::install_crd(&client).await;
    (cluster, client)
}

async fn wait_obj(client: &kube::Client, what: &str, cond: impl Fn(&Value) -> bool) -> Value {
    kex::wait_until(client, "obj", what, T, cond).await
}

#[tokio::test]
async fn startup_settings_choose_the_finalizer_where_state_is_kept_and_posting_and_explicit_flags_win() {
    let (_cluster, client) = setup().await;
    let storage = || {
        Some(pb::StateStorage {
            kind: pb::state_storage::Kind::Annotations as i32,
            prefix: "my.op.example".into(),
            v1: true,
            key: "last-handled-configuration".into(),
            ..Default::default()
        })
    };
    let chosen = pb::OperatorSettings {
        finalizer: Some("my.op.example/finalizer".into()),
        progress_storage: storage(),
        diffbase_storage: storage(),
        posting_loggers: Some(true),
        max_workers: Some(4),
        ignored: vec!["batching.batch_window: the controller batches nothing".into()],
        ..Default::default()
    };
    let server = Scripted::new(vec![
        (spec("configure", pb::HandlerKind::Startup), bosun_tests::succeed(Value::Null)),
        (spec("create_fn", pb::HandlerKind::Create), bosun_tests::succeed(json!({"made": true}))),
        (spec("delete_fn", pb::HandlerKind::Delete), bosun_tests::succeed(Value::Null)),
    ])
    .with_startup_settings("configure", chosen);
    let (addr, stopper) = server.clone().spawn().await;
    let settings = Settings { handlers: vec![addr], explicit: ["--max-workers".to_string()].into(), ..Default::default() };
    let controller = Controller::start(client.clone(), settings);
    kex::create(&client, "default", "obj", json!({})).await;
    let obj = wait_obj(&client, "the creation handled", |o| {
        o["metadata"]["annotations"]["my.op.example/last-handled-configuration"].is_string() && o["status"]["create_fn"].is_object()
    })
    .await;
    assert_eq!(obj["metadata"]["finalizers"], json!(["my.op.example/finalizer"]), "{obj:#}");
    assert!(obj["status"].get("bosun.dev").is_none(), "the state is in annotations only: {obj:#}");
    assert_eq!(obj["metadata"]["annotations"]["my.op.example/kopf-managed"], "yes", "the prefix marked as Kopf marks it: {obj:#}");
    for line in [
        "Setting persistence.finalizer=my.op.example/finalizer from the startup handlers is applied.",
        "Setting persistence.progress_storage=annotations from the startup handlers is applied.",
        "Setting persistence.progress_storage.prefix=my.op.example from the startup handlers is applied.",
        "Setting persistence.diffbase_storage=annotations from the startup handlers is applied.",
        "Setting posting.loggers=true from the startup handlers is applied.",
        "Setting execution.max_workers=4 from the startup handlers is overridden by --max-workers.",
        "Setting batching.batch_window from the startup handlers is ignored: the controller batches nothing.",
    ] {
        assert_eq!(controller.count(line), 1, "{line}: {:#?}", controller.log());
    }
    // With loggers on, the cycle's lines are events about the object.
    let cluster = bosun_controller::cluster::Cluster::new(client.clone());
    let posted = wait_for("the success posted as an event", T, || {
        let cluster = cluster.clone();
        async move {
            let events = cluster.get("/api/v1/namespaces/default/events").await.unwrap_or(Value::Null);
            events["items"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|e| e["type"] == "Normal" && e["reason"] == "Logging" && e["message"] == "Handler 'create_fn' succeeded.")
        }
    })
    .await;
    assert!(posted.is_ok(), "{posted:?}");
    // The chosen finalizer is the one released after the delete handler.
    kex::delete(&client, "default", "obj").await;
    kex::wait_gone(&client, "default", "obj").await;
    assert_eq!(controller.count("Deletion is processed: 1 succeeded; 0 failed."), 1, "{:#?}", controller.log());
    controller.stop().await;
    stopper.stop().await;
}

#[tokio::test]
async fn settings_held_when_described_apply_under_the_startup_handlers_ones() {
    let (_cluster, client) = setup().await;
    let held = pb::OperatorSettings {
        finalizer: Some("held.op.example/finalizer".into()),
        posting_level: Some(pb::log_line::Level::Warning as i32),
        ..Default::default()
    };
    let chosen = pb::OperatorSettings { finalizer: Some("my.op.example/finalizer".into()), ..Default::default() };
    let server = Scripted::new(vec![
        (spec("configure", pb::HandlerKind::Startup), bosun_tests::succeed(Value::Null)),
        (spec("delete_fn", pb::HandlerKind::Delete), bosun_tests::succeed(Value::Null)),
    ])
    .holding_settings(held)
    .with_startup_settings("configure", chosen);
    let (addr, stopper) = server.clone().spawn().await;
    let controller = Controller::start(client.clone(), Settings { handlers: vec![addr.clone()], ..Default::default() });
    kex::create(&client, "default", "obj", json!({})).await;
    let obj = wait_obj(&client, "the finalizer", |o| o["metadata"]["finalizers"].is_array()).await;
    assert_eq!(obj["metadata"]["finalizers"], json!(["my.op.example/finalizer"]), "the startup handler's wins: {obj:#}");
    for line in [
        "Setting persistence.finalizer=my.op.example/finalizer from the startup handlers is applied.".to_string(),
        format!("Setting posting.level=WARNING from handler server {addr} is applied."),
    ] {
        assert_eq!(controller.count(&line), 1, "{line}: {:#?}", controller.log());
    }
    assert_eq!(controller.count("held.op.example"), 0, "{:#?}", controller.log());
    controller.stop().await;
    stopper.stop().await;
}

#[tokio::test]
async fn a_server_that_finishes_parents_gets_its_parent_called_again_with_the_finished_sub_handlers() {
    let (_cluster, client) = setup().await;
    let parent: Behaviour = Arc::new(|req| {
        if req.finished_subhandlers.is_empty() {
            let child = |id: &str| pb::SubHandler { id: id.into(), ..Default::default() };
            pb::HandleResponse { subhandlers: vec![child("a"), child("b")], ..success(Value::Null) }
        } else {
            success(json!({"finished": req.finished_subhandlers}))
        }
    });
    let broken: Behaviour =
        Arc::new(|_| pb::HandleResponse { outcome: pb::Outcome::PermanentError as i32, message: "b broke".into(), ..Default::default() });
    let server = Scripted::new(vec![(pb::HandlerSpec { key: "p-on-create".into(), ..spec("p", pb::HandlerKind::Create) }, parent)])
        .also("p/a", bosun_tests::succeed(Value::Null))
        .also("p/b", broken)
        .finishing_parents();
    let (addr, stopper) = server.clone().spawn().await;
    let controller = Controller::start(client.clone(), Settings { handlers: vec![addr], ..Default::default() });
    kex::create(&client, "default", "obj", json!({})).await;
    let obj = wait_obj(&client, "the parent's result", |o| o["status"]["p"].is_object()).await;
    assert_eq!(obj["status"]["p"], json!({"finished": ["a", "b"]}), "a failed sub-handler is finished too: {obj:#}");
    controller.wait_log("[default/obj] Creation is processed: 1 succeeded; 0 failed.", T).await;
    let calls: Vec<(String, String, Vec<String>)> =
        server.calls().into_iter().map(|c| (c.handler_id, c.handler_key, c.finished_subhandlers)).collect();
    let call = |id: &str, finished: &[&str]| (id.to_string(), "p-on-create".to_string(), finished.iter().map(|f| f.to_string()).collect());
    assert_eq!(calls, [call("p", &[]), call("p/a", &[]), call("p/b", &[]), call("p", &["a", "b"])]);
    controller.stop().await;
    stopper.stop().await;
}
