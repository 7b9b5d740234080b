//! Every example handler server, run the way Kopf's e2e runs its examples: the example's
//! binary as a real process serving gRPC, the controller and the dev cluster in this test;
//! apply `examples/obj.yaml`, wait, change it, delete it, and judge from the controller's log
//! (each handler `succeeded` as often as expected, no unexpected `failed permanently`,
//! `Adding the finalizer` when a delete handler exists) and from the object.

mod support;

use support::*;

use bosun_controller::cluster::Cluster;
use bosun_tests::{kex, wait_for};
use serde_json::json;

#[tokio::test]
async fn example_01_minimal_handles_creation_once() {
    let run = start("minimal").await;
    run.apply_obj().await;
    run.controller.wait_log(&format!("{OBJ} Creation is processed: 1 succeeded; 0 failed."), T).await;
    let obj = kex::get(&run.client, "default", "kopf-example-1").await.unwrap();
    assert_eq!(obj["status"]["create_fn"], json!({"message": "hello world"}));
    assert!(obj["metadata"]["annotations"]["bosun.dev/last-handled-configuration"].is_string(), "{obj:#}");
    run.delete_obj().await;
    assert_eq!(run.succeeded("create_fn"), 1);
    assert_eq!(run.controller.count("Adding the finalizer"), 0, "no delete handler, no finalizer");
    run.assert_clean();
    run.controller.stop().await;
}

#[tokio::test]
async fn example_06_peering_pauses_a_controller_in_favour_of_a_dev_one_and_resumes_it() {
    let stage = stage("peering").await;
    let peering = bosun_tests::examples_dir().join("../deploy/peering.yaml");
    bosun_controller::cluster::apply::apply_path(&Cluster::new(stage.client.clone()), &peering).await.unwrap();
    let settings = |who: &str, priority: i64| bosun_controller::Settings {
        handlers: vec![format!("http://127.0.0.1:{}", stage.port())],
        standalone: false,
        identity: Some(who.into()),
        peering: bosun_controller::coordination::PeeringSetup { priority, ..Default::default() },
        ..Default::default()
    };
    let deployed = bosun_tests::Controller::start(stage.client.clone(), settings("deployed", 0));
    deployed.wait_log("Peering in ClusterBosunPeering default as deployed with priority 0.", T).await;
    let dev = bosun_tests::Controller::start(stage.client.clone(), settings("laptop", 666));
    deployed.wait_log("Pausing operations in favour of [<Peer laptop: priority=666, lifetime=60", T).await;
    apply_obj(&stage.client).await;
    dev.wait_log(&format!("{OBJ} Handler 'create_fn' succeeded."), T).await;
    assert_eq!(dev.count("Handler 'create_fn' succeeded."), 1);
    dev.stop().await;
    deployed.wait_log("Resuming operations after the pause.", T).await;
    assert_eq!(deployed.count("Handler 'create_fn'"), 0, "the paused controller handled nothing");
    deployed.stop().await;
}

#[tokio::test]
async fn example_03_exceptions_retries_and_fails_as_kopf_does() {
    let run = start("exceptions").await;
    run.apply_obj().await;
    run.controller.wait_log(&format!("{OBJ} Creation is processed: 1 succeeded; 3 failed."), T).await;
    let c = &run.controller;
    assert_eq!(c.count("Handler 'instant_failure_with_only_a_message' failed permanently: Fail once and for all."), 1);
    assert_eq!(c.count("Handler 'eventual_success_with_a_few_messages' failed temporarily: Expected recoverable error."), 3);
    assert_eq!(run.succeeded("eventual_success_with_a_few_messages"), 1);
    assert_eq!(c.count("Handler 'eventual_failure_with_tracebacks' failed with an exception. Will retry."), 3);
    assert_eq!(c.count("Handler 'eventual_failure_with_tracebacks' failed permanently: Handler 'eventual_failure_with_tracebacks' has exceeded 3 retries."), 1);
    assert_eq!(c.count("Handler 'instant_failure_with_traceback' failed permanently: An error that is supposed to be recoverable."), 1);
    run.delete_obj().await;
    run.controller.stop().await;
}

#[tokio::test]
async fn example_04_events_posts_its_events() {
    let run = start("events").await;
    run.apply_obj().await;
    run.controller.wait_log(&format!("{OBJ} Creation is processed: 1 succeeded; 0 failed."), T).await;
    let cluster = Cluster::new(run.client.clone());
    wait_for("the example's events", T, || {
        let cluster = cluster.clone();
        async move {
            let events = cluster.get("/api/v1/namespaces/default/events").await.unwrap();
            let ours = events["items"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["involvedObject"]["name"] == "kopf-example-1" && e["reason"] == "SomeReason")
                .count();
            ours >= 4
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", run.controller.log().join("\n")));
    assert_eq!(run.succeeded("create_fn"), 1);
    run.delete_obj().await;
    run.assert_clean();
    run.controller.stop().await;
}

#[tokio::test]
async fn example_05_handlers_run_in_order_on_create_update_and_delete() {
    let run = start("handlers").await;
    run.apply_obj().await;
    run.controller.wait_log(&format!("{OBJ} Creation is processed: 3 succeeded; 0 failed."), T).await;
    kex::patch(&run.client, "default", "kopf-example-1", json!({"spec": {"field": "changed"}})).await;
    run.controller.wait_log(&format!("{OBJ} Updating is processed: 2 succeeded; 0 failed."), T).await;
    run.delete_obj().await;
    run.controller.wait_log(&format!("{OBJ} Deletion is processed: 2 succeeded; 0 failed."), T).await;
    let c = &run.controller;
    assert_eq!(c.count(&format!("{OBJ} Adding the finalizer, thus preventing the actual deletion.")), 1);
    for id in ["create_fn_1", "create_fn_2", "update_fn", "delete_fn_1", "delete_fn_2"] {
        assert_eq!(run.succeeded(id), 1, "{id}\n{}", c.log().join("\n"));
    }
    assert_eq!(run.succeeded("field_fn/spec.field"), 2, "on creation and on the change");
    assert_eq!(run.succeeded("resume_fn_1") + run.succeeded("resume_fn_2"), 0, "a new object is not resumed");
    let log = c.log();
    let pos = |text: &str| log.iter().position(|l| l.contains(text)).unwrap_or_else(|| panic!("{text} missing"));
    assert!(pos("CREATED 1st") < pos("CREATED 2nd"), "registration order");
    assert!(pos("FIELD CHANGED: \"value\" -> \"changed\"") > pos("CREATED 2nd"));
    run.assert_clean();
    run.controller.stop().await;
}
