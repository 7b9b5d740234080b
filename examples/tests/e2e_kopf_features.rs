//! The example handler servers of Kopf's feature examples — 02 children, 07 sub-handlers,
//! 08 raw-event spies, 10 built-in resources, 11 filtering, 16 indexing — run the way Kopf's e2e runs its
//! examples: the example's binary as a real process serving gRPC, the controller and the dev
//! cluster in this test; apply the object, wait, change it, delete it, and judge from the
//! controller's log (each handler `succeeded` as often as expected, nothing `failed
//! permanently`) and from the objects.

mod support;

use support::*;

use std::time::Duration;

use bosun_controller::cluster::Cluster;
use bosun_tests::{kex, wait_for};
use serde_json::json;

#[tokio::test]
async fn example_02_children_creates_an_owned_pod_that_goes_with_its_owner() {
    let run = start("children").await;
    run.apply_obj().await;
    run.controller.wait_log(&format!("{OBJ} Creation is processed: 1 succeeded; 0 failed."), T).await;
    let owner = kex::get(&run.client, "default", "kopf-example-1").await.unwrap();
    let pod_path = "/api/v1/namespaces/default/pods/kopf-example-1-pod";
    let pod = run.cluster().get(pod_path).await.unwrap_or_else(|e| panic!("no child pod: {e}\n{}", run.dump()));

    assert_eq!(owner["status"]["create_fn"], json!({"children": [pod["metadata"]["uid"]]}), "{owner:#}");
    let refs = pod["metadata"]["ownerReferences"].as_array().unwrap();
    assert_eq!(refs.len(), 1, "{pod:#}");
    assert_eq!(refs[0]["uid"], owner["metadata"]["uid"]);
    assert_eq!(
        (&refs[0]["kind"], &refs[0]["controller"], &refs[0]["blockOwnerDeletion"]),
        (&json!("KopfExample"), &json!(true), &json!(true))
    );
    assert_eq!(pod["metadata"]["labels"]["somelabel"], "somevalue", "the owner's labels are copied");
    let container = &pod["spec"]["containers"][0];
    assert_eq!(container["env"], json!([{"name": "FIELD", "value": "value"}]));
    assert_eq!(container["args"], json!(["echo \"FIELD=$FIELD\"\nsleep 1m\n"]));
    assert_eq!(run.succeeded("create_fn"), 1);
    assert_eq!(run.controller.count("Adding the finalizer"), 0, "no delete handler, no finalizer");

    run.delete_obj().await;
    run.wait_gone("the child pod to be garbage-collected", pod_path).await;
    assert_eq!(run.succeeded("create_fn"), 1);
    run.assert_clean();
    run.controller.stop().await;
}

#[tokio::test]
async fn example_07_subhandlers_handle_each_item_with_its_own_subhandler() {
    let run = start("subhandlers").await;
    run.apply_obj().await;
    run.controller.wait_log(&format!("{OBJ} Creation is processed: 1 succeeded; 0 failed."), T).await;
    for item in ["item1", "item2"] {
        assert_eq!(run.controller.count(&format!("{OBJ} === Handling creation for {item}. ===")), 1, "{item}\n{}", run.dump());
        assert_eq!(run.succeeded(&format!("create_fn/{item}")), 1, "{item}\n{}", run.dump());
    }
    assert_eq!(run.succeeded("create_fn"), 1);
    let log = run.controller.log();
    let pos = |text: &str| log.iter().position(|l| l.contains(text)).unwrap_or_else(|| panic!("{text} missing"));
    assert!(pos("Handler 'create_fn/item1' succeeded.") < pos("Handler 'create_fn' succeeded."));
    assert!(pos("Handler 'create_fn/item2' succeeded.") < pos("Handler 'create_fn' succeeded."));

    // More items, more sub-handlers (Kopf's README: re-create it with more items).
    kex::create(&run.client, "default", "kopf-example-2", json!({"spec": {"items": ["a", "b", "c"]}})).await;
    run.controller.wait_log("[default/kopf-example-2] Creation is processed: 1 succeeded; 0 failed.", T).await;
    for item in ["a", "b", "c"] {
        assert_eq!(run.controller.count(&format!("[default/kopf-example-2] Handler 'create_fn/{item}' succeeded.")), 1);
    }

    run.delete_obj().await;
    assert_eq!(run.succeeded("create_fn"), 1, "once succeeded, never called again");
    run.assert_clean();
    run.controller.stop().await;
}

/// The spies' lines for one event type: `null` for the initial listing.
fn events_of(run: &Run, event_type: &str) -> usize {
    run.controller.count(&format!(
        "{OBJ} Event received: {{\"type\":{event_type},\"object\":{{\"apiVersion\":\"kopf.dev/v1\",\"kind\":\"KopfExample\""
    ))
}

#[tokio::test]
async fn example_08_spies_see_every_event_type_and_store_nothing() {
    // The object exists before the controller starts: the spies see it in the initial listing.
    let stage = stage("spies").await;
    apply_obj(&stage.client).await;
    let run = stage.start().await;
    let wait_event = |event_type: &'static str| {
        let run = &run;
        async move {
            wait_for(&format!("a {event_type} event"), T, || async move { events_of(run, event_type) >= 1 })
                .await
                .unwrap_or_else(|e| panic!("{e}\n{}", run.dump()));
        }
    };
    wait_event("null").await;
    kex::patch(&run.client, "default", "kopf-example-1", json!({"spec": {"field": "changed"}})).await;
    wait_event("\"MODIFIED\"").await;

    let obj = kex::get(&run.client, "default", "kopf-example-1").await.unwrap();
    let annotations = obj["metadata"]["annotations"].as_object().unwrap();
    assert_eq!(annotations.keys().collect::<Vec<_>>(), ["someannotation"], "nothing stored: {obj:#}");
    assert!(obj["status"].as_object().is_none_or(|s| s.is_empty()), "nothing stored: {obj:#}");
    assert!(obj["metadata"]["finalizers"].as_array().is_none_or(Vec::is_empty), "no finalizer: {obj:#}");

    run.delete_obj().await;
    wait_event("\"DELETED\"").await;
    run.apply_obj().await;
    wait_event("\"ADDED\"").await;

    // Each event went to both spies: the failing one is logged and ignored.
    let events: usize = ["null", "\"ADDED\"", "\"MODIFIED\"", "\"DELETED\""].iter().map(|t| events_of(&run, t)).sum();
    let c = &run.controller;
    let failed = || c.count(&format!("{OBJ} Handler 'event_fn_with_error' failed: Oops!; ignored."));
    wait_for("both spies to have seen every event", T, || async { failed() >= events && run.succeeded("normal_event_fn") >= events })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", run.dump()));
    assert_eq!((failed(), run.succeeded("normal_event_fn")), (events, events), "{}", run.dump());
    assert_eq!(c.count("is processed"), 0, "spies are no changing handlers");
    run.assert_clean();
    run.controller.stop().await;
}

const POD: &str = "/api/v1/namespaces/default/pods";

async fn create_pod(run: &Run) -> String {
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "kopf-pod-", "namespace": "default"},
        "spec": {"containers": [{"name": "the-only-one", "image": "busybox", "command": ["sh", "-x", "-c", "sleep 1"]}]},
    });
    let created = run.cluster().create(POD, &pod).await.unwrap();
    created["metadata"]["name"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn example_10_builtins_schedules_and_cancels_pod_killers_with_state_in_annotations() {
    let mut run = start("builtins").await;
    let name = create_pod(&run).await;
    let obj = format!("[default/{name}]");
    run.controller.wait_log(&format!("{obj} Creation is processed: 1 succeeded; 0 failed."), T).await;
    assert_eq!(run.controller.count(&format!("{obj} === Pod killing happens in 30s.")), 1);
    assert_eq!(run.controller.count(&format!("{obj} Handler 'pod_in_sight' succeeded.")), 1);
    assert_eq!(run.controller.count(&format!("{obj} Adding the finalizer, thus preventing the actual deletion.")), 1);

    // A Pod's status keeps no foreign fields: the controller's state is in annotations.
    let pod = run.cluster().get(&format!("{POD}/{name}")).await.unwrap();
    assert!(pod["metadata"]["annotations"]["bosun.dev/last-handled-configuration"].is_string(), "{pod:#}");
    assert!(pod["status"].get("bosun.dev").is_none(), "{pod:#}");
    assert!(pod["metadata"]["finalizers"].as_array().is_some_and(|f| !f.is_empty()), "{pod:#}");

    // A restarted controller resumes the Pod; the killer already scheduled is kept.
    run.restart_controller().await;
    run.controller.wait_log(&format!("{obj} Resuming is processed: 1 succeeded; 0 failed."), T).await;
    assert_eq!(run.controller.count(&format!("{obj} Handler 'pod_in_sight_on_resume' succeeded.")), 1);

    run.cluster().call(http::Method::DELETE, &format!("{POD}/{name}"), None, None).await.unwrap();
    run.wait_gone("the pod to go", &format!("{POD}/{name}")).await;
    let c = &run.controller;
    assert_eq!(c.count(&format!("{obj} === Pod killing is cancelled!")), 1, "{}", run.dump());
    assert_eq!(c.count(&format!("{obj} Handler 'pod_deleted' succeeded.")), 1);
    assert_eq!(c.count(&format!("{obj} Deletion is processed: 1 succeeded; 0 failed.")), 1);
    run.assert_clean();
    run.controller.stop().await;
}

#[tokio::test]
async fn example_10_builtins_kills_pods_after_their_time() {
    // Kopf's 30 s, shortened for the test through the example's own setting.
    let run = stage_with("builtins", &[("POD_KILL_AFTER_SECONDS", "2")]).await.start().await;
    let name = create_pod(&run).await;
    run.controller.wait_log(&format!("[default/{name}] === Pod killing happens in 2s."), T).await;
    run.controller.wait_log(&format!("[default/{name}] Creation is processed: 1 succeeded; 0 failed."), T).await;
    let cluster = run.cluster();
    let path = format!("{POD}/{name}");
    wait_for("the pod to be killed", Duration::from_secs(20), || {
        let (cluster, path) = (cluster.clone(), path.clone());
        async move { matches!(cluster.get(&path).await, Err(e) if e.code() == Some(404)) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", run.dump()));
    run.controller.stop().await;
}

#[tokio::test]
async fn example_11_filtering_runs_only_the_handlers_whose_filters_match() {
    let run = start("filtering").await;
    run.apply_obj().await;
    run.controller.wait_log(&format!("{OBJ} Creation is processed: 10 succeeded; 0 failed."), T).await;
    kex::patch(&run.client, "default", "kopf-example-1", json!({"spec": {"field": "changed"}})).await;
    run.controller.wait_log(&format!("{OBJ} Updating is processed: 1 succeeded; 0 failed."), T).await;

    let c = &run.controller;
    let said = |line: &str| c.count(&format!("{OBJ} {line}"));
    for line in [
        "Label is matching.",
        "Label is present.",
        "Label is absent.",
        "Label callback matching.",
        "Annotation is matching.",
        "Annotation is present.",
        "Annotation is absent.",
        "Filter satisfied.",
        "Field value is satisfied.",
        "Field presence is satisfied.",
        "Field change is satisfied.",
    ] {
        assert_eq!(said(line), 1, "{line}\n{}", run.dump());
    }
    for line in
        ["Annotation callback mismatch.", "Filter not satisfied.", "Field value is not satisfied.", "Field presence is not satisfied."]
    {
        assert_eq!(said(line), 0, "{line}\n{}", run.dump());
    }
    for id in [
        "create_with_labels_matching",
        "create_with_filter_satisfied",
        "create_with_field_value_satisfied/spec.field",
        "update_with_field_change_satisfied/spec.field",
    ] {
        assert_eq!(run.succeeded(id), 1, "{id}");
    }
    // `when` predicates run in the handler server: it answers "skipped", and nothing is recorded.
    // They are asked in every cycle of the cause, as Kopf asks them each time it picks the next
    // handler (one handler's outcome is written per cycle).
    for id in ["create_with_annotations_callback_matching", "create_with_filter_not_satisfied"] {
        let skipped = c.count(&format!("{OBJ} Handler '{id}' is skipped: its `when` filter does not match."));
        assert!(skipped >= 1, "{id}: skipped {skipped} times\n{}", run.dump());
    }
    for id in [
        "create_with_annotations_callback_matching",
        "create_with_filter_not_satisfied",
        "create_with_field_value_not_satisfied/spec.field",
        "create_with_field_presence_not_satisfied/spec.inexistent",
    ] {
        assert_eq!(c.count(&format!("Handler '{id}' succeeded")) + c.count(&format!("Handler '{id}' failed")), 0, "{id}\n{}", run.dump());
    }
    // Field filters are the controller's: such handlers are never called.
    for id in ["create_with_field_value_not_satisfied/spec.field", "create_with_field_presence_not_satisfied/spec.inexistent"] {
        assert_eq!(c.count(&format!("Handler '{id}'")), 0, "{id}\n{}", run.dump());
    }

    // Without labels and annotations, only the absence, `when` and field filters match.
    kex::create(&run.client, "default", "kopf-example-2", json!({})).await;
    c.wait_log("[default/kopf-example-2] Creation is processed: 5 succeeded; 0 failed.", T).await;
    let other: Vec<String> =
        c.log().into_iter().filter(|l| l.contains("[default/kopf-example-2] Handler '") && l.ends_with("' succeeded.")).collect();
    let mut ids: Vec<&str> = other.iter().filter_map(|l| l.split('\'').nth(1)).collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        [
            "create_with_annotations_absent",
            "create_with_field_presence_satisfied/spec.field",
            "create_with_field_value_satisfied/spec.field",
            "create_with_filter_satisfied",
            "create_with_labels_absent",
        ]
    );

    run.delete_obj().await;
    run.assert_clean();
    run.controller.stop().await;
}

#[tokio::test]
async fn example_11_filtering_runs_the_daemon_whose_field_filter_matches() {
    let run = start("filtering").await;
    run.apply_obj().await;
    run.controller.wait_log(&format!("{OBJ} Field daemon is satisfied."), T).await;
    run.delete_obj().await;
    run.controller.stop().await;
}

/// The KopfExample's `status.running-pods`, once it equals `want`.
async fn wait_running_pods(run: &Run, want: serde_json::Value) {
    let path = format!("{}/kopf-example-1", kex::path("default"));
    let cluster = run.cluster();
    wait_for(&format!("status.running-pods to be {want}"), T, || {
        let (cluster, path, want) = (cluster.clone(), path.clone(), want.clone());
        async move { cluster.get(&path).await.is_ok_and(|o| o["status"]["running-pods"] == want) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", run.dump()));
}

#[tokio::test]
async fn example_16_indexing_fills_the_index_before_any_handler_and_follows_pods() {
    let stage = stage_with("indexing", &[("INDEXING_INTERVAL_SECONDS", "0.5")]).await;
    // A Pod that exists before the controller starts is in its first listing.
    let cluster = Cluster::new(stage.client.clone());
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "early", "namespace": "default", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]}});
    cluster.create(POD, &pod).await.unwrap();
    apply_obj(&stage.client).await;
    let mut run = stage.start().await;
    wait_running_pods(&run, json!([])).await;
    let log = run.controller.log();
    let indexed = log.iter().position(|l| l.contains("Indexed 1 object(s) of")).unwrap_or_else(|| panic!("{}", run.dump()));
    let first_tick = log.iter().position(|l| l.contains("Timer 'intervalled' succeeded.")).unwrap_or_else(|| panic!("{}", run.dump()));
    assert!(indexed < first_tick, "the index is filled before any other handler runs:\n{}", run.dump());
    assert!(log.iter().any(|l| l.contains(r#"{"app=web": [String("early")]}"#)), "the timer reads by_label:\n{}", run.dump());

    // The Pod runs: the index follows, and so does the timer's view of it.
    let merge = bosun_controller::cluster::content::MERGE;
    cluster.patch(&format!("{POD}/early/status"), merge, &json!({"status": {"phase": "Running"}})).await.unwrap();
    wait_running_pods(&run, json!(["default::early"])).await;
    // A restarted handler server lost its index: the controller lists the Pods again for it.
    run.restart_server("indexing", &[("INDEXING_INTERVAL_SECONDS", "0.5")]).await;
    run.controller.wait_log("The index handlers of 'pods' lost their index; listing it again.", T).await;
    let indexed_twice = || async { run.controller.count("Indexed 1 object(s) of pods.v1; the other handlers may go on.") == 2 };
    wait_for("the Pods to be indexed again", T, indexed_twice).await.unwrap_or_else(|e| panic!("{e}\n{}", run.dump()));
    cluster.patch(&format!("{}/kopf-example-1", kex::path("default")), merge, &json!({"status": {"running-pods": null}})).await.unwrap();
    wait_running_pods(&run, json!(["default::early"])).await;
    // Not asserted: that no handler saw the restarted server's empty index. The server answers
    // UNAVAILABLE until it is described and the controller then holds every handler until the
    // index is filled, but a timer call already in flight across the restart can reach the
    // new server just after it was described.
    // The Pod goes: the index drops it.
    cluster.call(http::Method::DELETE, &format!("{POD}/early"), None, None).await.unwrap();
    run.wait_gone("the pod to go", &format!("{POD}/early")).await;
    wait_running_pods(&run, json!([])).await;
    run.assert_clean();
    run.controller.stop().await;
}
