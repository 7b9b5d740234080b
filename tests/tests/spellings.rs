//! One resource, however its handlers spell it (`kopfexamples`; `kopf.dev`, `v1`,
//! `kopfexamples`; `kex`), on one handler server or several, is served by one job, as Kopf
//! serves it: two jobs would each add and remove the finalizer for their own handlers, for
//! ever, and a delete handler could be skipped. The real controller against the dev cluster
//! over HTTP, scripted handler servers over gRPC.

use std::time::Duration;

use bosun_controller::Settings;
use bosun_devcluster::DevCluster;
use bosun_proto::v1 as pb;
use bosun_tests::{Controller, Scripted, kex, succeed};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(20);

/// A handler of `kind` on the resource spelled `group`, `version`, `name`.
fn spelled(id: &str, kind: pb::HandlerKind, group: &str, version: &str, name: &str) -> pb::HandlerSpec {
    pb::HandlerSpec {
        id: id.into(),
        kind: kind as i32,
        resource: Some(pb::ResourceSelector { group: group.into(), version: version.into(), name: name.into() }),
        ..Default::default()
    }
}

/// Two servers: a create handler on `kopfexamples` and an update handler on `kex` on one, a
/// delete handler on `kopf.dev`/`v1`/`kopfexamples` on the other.
async fn servers() -> (Scripted, Scripted, Vec<String>, Vec<bosun_tests::Stopper>) {
    let first = Scripted::new(vec![
        (spelled("create_fn", pb::HandlerKind::Create, "", "", "kopfexamples"), succeed(json!({"created": true}))),
        (spelled("update_fn", pb::HandlerKind::Update, "", "", "kex"), succeed(Value::Null)),
    ]);
    let second =
        Scripted::new(vec![(spelled("delete_fn", pb::HandlerKind::Delete, "kopf.dev", "v1", "kopfexamples"), succeed(Value::Null))]);
    let (a, stop_a) = first.clone().spawn().await;
    let (b, stop_b) = second.clone().spawn().await;
    (first, second, vec![a, b], vec![stop_a, stop_b])
}

#[tokio::test]
async fn one_resource_spelled_three_ways_across_two_servers_is_served_once_and_its_delete_handler_runs() {
    let cluster = DevCluster::start_local().await.expect("dev cluster starts");
    let client = cluster.client();
    kex::install_crd(&client).await;
    let (first, second, addrs, stoppers) = servers().await;
    let controller = Controller::start(client.clone(), Settings { handlers: addrs, ..Default::default() });
    controller.wait_log("Serving kopfexamples.v1.kopf.dev with 3 handler(s)", T).await;

    kex::create(&client, "default", "x", json!({})).await;
    controller.wait_log("[default/x] Creation is processed: 1 succeeded; 0 failed.", T).await;
    kex::wait_until(&client, "x", "the finalizer", T, |o| o["metadata"]["finalizers"] == json!(["bosun.dev/finalizer"])).await;
    // Two jobs wrote the finalizer on and off every few milliseconds: a second shows it.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(controller.count("Removing the finalizer"), 0, "{:#?}", controller.log());
    assert_eq!(controller.count("Adding the finalizer"), 1, "{:#?}", controller.log());

    kex::patch(&client, "default", "x", json!({"spec": {"field": "changed"}})).await;
    controller.wait_log("[default/x] Handler 'update_fn' succeeded.", T).await;
    kex::delete(&client, "default", "x").await;
    kex::wait_gone(&client, "default", "x").await;
    controller.wait_log("[default/x] Handler 'delete_fn' succeeded.", T).await;

    assert_eq!(controller.count("Serving kopfexamples"), 1, "one job for the resource: {:#?}", controller.log());
    assert_eq!((first.count("create_fn"), first.count("update_fn"), second.count("delete_fn")), (1, 1, 1));
    controller.stop().await;
    for s in stoppers {
        s.stop().await;
    }
}

#[tokio::test]
async fn spellings_that_resolve_only_when_their_crd_comes_are_served_together() {
    let cluster = DevCluster::start_local().await.expect("dev cluster starts");
    let client = cluster.client();
    let (first, second, addrs, stoppers) = servers().await;
    let controller = Controller::start(client.clone(), Settings { handlers: addrs, ..Default::default() });
    controller.wait_log("Resource 'kopfexamples' is not served by the API server (yet)", T).await;

    kex::install_crd(&client).await;
    controller.wait_log("Serving kopfexamples.v1.kopf.dev with 3 handler(s)", T).await;
    kex::create(&client, "default", "x", json!({})).await;
    controller.wait_log("[default/x] Creation is processed: 1 succeeded; 0 failed.", T).await;
    kex::delete(&client, "default", "x").await;
    kex::wait_gone(&client, "default", "x").await;

    assert_eq!(controller.count("Serving kopfexamples"), 1, "{:#?}", controller.log());
    assert_eq!(controller.count("serving it anew"), 0, "the spellings joined at once: {:#?}", controller.log());
    assert_eq!((first.count("create_fn"), second.count("delete_fn")), (1, 1));
    controller.stop().await;
    for s in stoppers {
        s.stop().await;
    }
}
