//! Timers and daemons are given the object as it is now, including what the controller itself
//! wrote on it: the real controller against the dev cluster over HTTP and a scripted handler
//! server over gRPC.
//!
//! Found by the conformance suite (`tests/conformance/`): a timer that counted its ticks in
//! `status.ticks` stopped counting when its first write landed while a cycle was writing.

use std::time::Duration;

use bosun_controller::Settings;
use bosun_devcluster::DevCluster;
use bosun_proto::v1 as pb;
use bosun_tests::{Controller, Scripted, kex, spec, succeed, wait_for};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(10);

/// The worker skips the watch events of its own writes as echoes (`worker.rs`), and only
/// `process` feeds bodies to the background tasks (`Background::sync`), so a body the
/// controller wrote itself never reaches them: after the creation cycle stored `create_fn`'s
/// result, a timer that writes nothing keeps being called with the body from before the
/// handlers ran, until someone else changes the object.
#[tokio::test]
#[ignore = "controller bug: timers and daemons never see the controller's own last write (see the doc comment)"]
async fn timers_see_the_results_the_objects_cycle_stored() {
    let cluster = DevCluster::start_local().await.expect("dev cluster starts");
    let client = cluster.client();
    kex::install_crd(&client).await;
    let mut timer = spec("tick_fn", pb::HandlerKind::Timer);
    timer.timer = Some(pb::TimerOptions { interval_seconds: 0.1, ..Default::default() });
    let server = Scripted::new(vec![
        (spec("create_fn", pb::HandlerKind::Create), succeed(json!({"message": "hello"}))),
        (timer, succeed(Value::Null)),
    ]);
    let (addr, stopper) = server.clone().spawn().await;
    let controller = Controller::start(client.clone(), Settings { handlers: vec![addr], ..Default::default() });
    kex::create(&client, "default", "obj", json!({})).await;
    controller.wait_log("[default/obj] Creation is processed: 1 succeeded; 0 failed.", T).await;

    let saw_result = || {
        server.calls().iter().filter(|c| c.handler_id == "tick_fn").any(|c| {
            let object: Value = serde_json::from_slice(&c.object).unwrap_or_default();
            object["status"]["create_fn"]["message"] == "hello"
        })
    };
    let seen = wait_for("a tick that sees status.create_fn", T, || {
        let seen = saw_result();
        async move { seen }
    })
    .await;
    let ticks = server.count("tick_fn");
    controller.stop().await;
    stopper.stop().await;
    seen.unwrap_or_else(|e| panic!("{e}: none of {ticks} ticks did"));
}
