//! Handler servers that come and go while the controller runs: the real controller against
//! the dev cluster over HTTP, scripted handler servers over gRPC, restarted on one port.

use std::time::Duration;

use bosun_controller::Settings;
use bosun_controller::cluster::Cluster;
use bosun_devcluster::DevCluster;
use bosun_proto::v1 as pb;
use bosun_tests::{Controller, Scripted, kex, spec, succeed, wait_for};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(20);

/// A listener on `port` (0: any); the same port again after the server on it stopped.
fn listen(port: u16) -> std::net::TcpListener {
    std::net::TcpListener::bind(("127.0.0.1", port)).expect("the port is free")
}

/// A raw-event handler on ConfigMaps.
fn configmap_spy(id: &str) -> pb::HandlerSpec {
    pb::HandlerSpec {
        id: id.into(),
        kind: pb::HandlerKind::Event as i32,
        resource: Some(pb::ResourceSelector { group: String::new(), version: "v1".into(), name: "configmaps".into() }),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_restarted_handler_server_brings_its_new_handlers_without_a_controller_restart() {
    let cluster = DevCluster::start_local().await.expect("dev cluster starts");
    let client = cluster.client();
    kex::install_crd(&client).await;

    let first = Scripted::new(vec![(spec("create_a", pb::HandlerKind::Create), succeed(json!({"by": "a"})))]);
    let listener = listen(0);
    let port = listener.local_addr().unwrap().port();
    let (addr, stopper) = first.clone().spawn_on(listener).await;
    let controller = Controller::start(client.clone(), Settings { handlers: vec![addr.clone()], ..Default::default() });
    kex::create(&client, "default", "before", json!({})).await;
    controller.wait_log("[default/before] Handler 'create_a' succeeded.", T).await;

    // The server goes away (as when its developer stops it to edit the code); an object
    // created meanwhile waits for it.
    stopper.stop().await;
    controller.wait_log(&format!("Lost the connection to handler server {addr}"), T).await;
    kex::create(&client, "default", "during", json!({})).await;

    // It comes back on the same address with other handlers: `create_a` is gone, `create_b`
    // is new, and a raw-event handler asks for a resource that was not watched before.
    let second = Scripted::new(vec![
        (spec("create_b", pb::HandlerKind::Create), succeed(json!({"by": "b"}))),
        (configmap_spy("spy_cm"), succeed(Value::Null)),
    ]);
    let (_, stopper) = second.clone().spawn_on(listen(port)).await;
    controller.wait_log(&format!("Handler server {addr} registered 2 handler(s) now; applying the new registry."), T).await;
    controller.wait_log("[default/during] Handler 'create_b' succeeded.", T).await;
    kex::create(&client, "default", "after", json!({})).await;
    controller.wait_log("[default/after] Handler 'create_b' succeeded.", T).await;

    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "watched-now", "namespace": "default"}});
    Cluster::new(client.clone()).create("/api/v1/namespaces/default/configmaps", &cm).await.expect("the ConfigMap is created");
    wait_for("the ConfigMap spy to be called", T, || {
        let n = second
            .calls()
            .iter()
            .filter(|c| c.handler_id == "spy_cm" && String::from_utf8_lossy(&c.object).contains("watched-now"))
            .count();
        async move { n > 0 }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\nlog:\n{}", controller.log().join("\n")));

    // `before` was handled by `create_a` and is not handled again; nothing calls `create_a` now.
    let before = kex::get(&client, "default", "before").await.expect("exists");
    assert_eq!(before["status"]["create_a"], json!({"by": "a"}), "{before:#}");
    assert_eq!(second.count("create_b"), 2, "`during` and `after`, not `before`: {:?}", controller.log());
    assert_eq!(first.count("create_a"), 1);
    assert_eq!(controller.count("Lost the connection to handler server"), 1, "the outage is said once");
    controller.stop().await;
    stopper.stop().await;
}

#[tokio::test]
async fn a_reconnected_server_with_the_same_handlers_changes_nothing() {
    let cluster = DevCluster::start_local().await.expect("dev cluster starts");
    let client = cluster.client();
    kex::install_crd(&client).await;
    let server = || Scripted::new(vec![(spec("create_fn", pb::HandlerKind::Create), succeed(Value::Null))]);
    let listener = listen(0);
    let port = listener.local_addr().unwrap().port();
    let (addr, stopper) = server().spawn_on(listener).await;
    let controller = Controller::start(client.clone(), Settings { handlers: vec![addr.clone()], ..Default::default() });
    kex::create(&client, "default", "one", json!({})).await;
    controller.wait_log("[default/one] Handler 'create_fn' succeeded.", T).await;

    stopper.stop().await;
    let again = server();
    let (_, stopper) = again.clone().spawn_on(listen(port)).await;
    controller.wait_log(&format!("Handler server {addr} has the same 1 handler(s) as before."), T).await;
    kex::create(&client, "default", "two", json!({})).await;
    controller.wait_log("[default/two] Handler 'create_fn' succeeded.", T).await;
    assert_eq!(again.count("create_fn"), 1, "only the new object; the resource was not served anew: {:?}", controller.log());
    assert_eq!(controller.count("serving it anew"), 0);
    controller.stop().await;
    stopper.stop().await;
}

#[tokio::test]
async fn a_server_back_with_other_settings_is_told_once_that_settings_apply_at_start_only() {
    let cluster = DevCluster::start_local().await.expect("dev cluster starts");
    let client = cluster.client();
    kex::install_crd(&client).await;
    let server = |workers: u32| {
        Scripted::new(vec![(spec("create_fn", pb::HandlerKind::Create), succeed(Value::Null))])
            .holding_settings(pb::OperatorSettings { max_workers: Some(workers), ..Default::default() })
    };
    let listener = listen(0);
    let port = listener.local_addr().unwrap().port();
    let (addr, mut stopper) = server(4).spawn_on(listener).await;
    let controller = Controller::start(client.clone(), Settings { handlers: vec![addr.clone()], ..Default::default() });
    controller.wait_log(&format!("Setting execution.max_workers=4 from handler server {addr} is applied."), T).await;
    let told = format!("Handler server {addr} holds other settings now; settings are applied at start only, so they are not.");
    for round in 1..=2 {
        stopper.stop().await;
        controller.wait_log(&format!("Lost the connection to handler server {addr}"), T).await;
        stopper = server(4 + round).spawn_on(listen(port)).await.1;
        let same = format!("Handler server {addr} has the same 1 handler(s) as before.");
        wait_for("the server described again", T, || {
            let n = controller.count(&same);
            async move { n == round as usize }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\nlog:\n{}", controller.log().join("\n")));
    }
    assert_eq!(controller.count(&told), 1, "{:#?}", controller.log());
    assert_eq!(controller.count("max_workers=5"), 0, "{:#?}", controller.log());
    controller.stop().await;
    stopper.stop().await;
}
