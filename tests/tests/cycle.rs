//! The handling cycle end to end: the real controller against the dev cluster over HTTP and
//! a scripted handler server over gRPC.
//!
//! Scripted handlers never assert nor panic: a panic there kills a server task and surfaces
//! later as a misleading timeout. They answer, the server records each request
//! (`Scripted::calls`), and the test body asserts on what was recorded.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bosun_controller::Settings;
use bosun_devcluster::DevCluster;
use bosun_proto::v1 as pb;
use bosun_tests::{Behaviour, Controller, Scripted, kex, spec, success, wait_for};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(20);

fn ok(result: Value) -> Behaviour {
    bosun_tests::succeed(result)
}

async fn setup() -> (DevCluster, kube::Client) {
    let cluster = DevCluster::start_local().await.expect("dev cluster starts");
    let client = cluster.client();
    kex::install_crd(&client).await;
    (cluster, client)
}

fn settings(addr: &str) -> Settings {
    Settings { handlers: vec![addr.to_string()], ..Default::default() }
}

/// The `metadata.name` of a request's object; `None` when the object is not JSON or has none.
fn name_of(object: &[u8]) -> Option<String> {
    serde_json::from_slice::<Value>(object).ok()?["metadata"]["name"].as_str().map(String::from)
}

async fn wait_obj(client: &kube::Client, name: &str, what: &str, cond: impl Fn(&Value) -> bool) -> Value {
    kex::wait_until(client, name, what, T, cond).await
}

#[tokio::test]
async fn create_handler_result_and_diffbase_are_stored_and_not_redone_after_restart() {
    let (_cluster, client) = setup().await;
    let server = Scripted::new(vec![(spec("create_fn", pb::HandlerKind::Create), ok(json!({"message": "hello world"})))]);
    let (addr, stopper) = server.clone().spawn().await;
    kex::create(&client, "default", "kopf-example-1", json!({})).await;

    let controller = Controller::start(client.clone(), settings(&addr));
    controller.wait_log("[default/kopf-example-1] Creation is processed: 1 succeeded; 0 failed.", T).await;
    let obj = wait_obj(&client, "kopf-example-1", "result stored", |o| o["status"]["create_fn"]["message"] == "hello world").await;
    let diffbase = obj["metadata"]["annotations"]["bosun.dev/last-handled-configuration"].as_str().expect("diffbase in its annotation");
    assert_eq!(diffbase, "{\"spec\":{\"field\":\"value\"}}\n");
    assert!(obj["status"].get("bosun.dev").is_none(), "progress is purged, nothing left in status.bosun.dev: {obj:#}");
    assert_eq!(controller.count("Handler 'create_fn' succeeded."), 1);
    assert!(obj["metadata"].get("finalizers").is_none(), "no delete handler, no finalizer");
    controller.stop().await;

    // A new controller resumes: nothing changed, so nothing is called again.
    let controller = Controller::start(client.clone(), settings(&addr));
    kex::create(&client, "default", "kopf-example-2", json!({})).await;
    controller.wait_log("[default/kopf-example-2] Creation is processed", T).await;
    assert_eq!(server.count("create_fn"), 2, "once per object: {:?}", controller.log());
    controller.stop().await;
    stopper.stop().await;
}

#[tokio::test]
async fn update_and_field_handlers_get_the_diff_and_old_new_values() {
    let (_cluster, client) = setup().await;
    let mut field = spec("field_fn/spec.field", pb::HandlerKind::Field);
    field.field = "spec.field".into();
    let server = Scripted::new(vec![
        (spec("create_fn", pb::HandlerKind::Create), ok(Value::Null)),
        (spec("update_fn", pb::HandlerKind::Update), ok(json!({"updated": true}))),
        (field, ok(Value::Null)),
    ]);
    let (addr, stopper) = server.clone().spawn().await;
    let controller = Controller::start(client.clone(), settings(&addr));
    kex::create(&client, "default", "obj", json!({})).await;
    controller.wait_log("[default/obj] Creation is processed: 2 succeeded; 0 failed.", T).await;
    kex::patch(&client, "default", "obj", json!({"spec": {"field": "changed"}})).await;
    controller.wait_log("[default/obj] Updating is processed: 2 succeeded; 0 failed.", T).await;

    let calls = server.calls();
    let update = calls.iter().find(|c| c.handler_id == "update_fn").expect("update called");
    assert_eq!(update.reason, pb::Reason::Update as i32);
    assert_eq!(update.diff.len(), 1);
    assert_eq!(update.diff[0].path, vec!["spec", "field"]);
    assert_eq!(update.diff[0].operation, pb::diff_item::Operation::Change as i32);
    let field_calls: Vec<_> = calls.iter().filter(|c| c.handler_id == "field_fn/spec.field").collect();
    assert_eq!(field_calls.len(), 2, "on creation and on the change");
    assert_eq!(field_calls[1].old, b"\"value\"");
    assert_eq!(field_calls[1].new, b"\"changed\"");
    wait_obj(&client, "obj", "update result", |o| o["status"]["update_fn"]["updated"] == true).await;
    controller.stop().await;
    stopper.stop().await;
}

#[tokio::test]
async fn delete_handler_holds_a_finalizer_until_it_succeeded() {
    let (_cluster, client) = setup().await;
    let server = Scripted::new(vec![
        (spec("create_fn", pb::HandlerKind::Create), ok(Value::Null)),
        (spec("delete_fn", pb::HandlerKind::Delete), ok(Value::Null)),
    ]);
    let (addr, stopper) = server.clone().spawn().await;
    let controller = Controller::start(client.clone(), settings(&addr));
    kex::create(&client, "default", "obj", json!({})).await;
    controller.wait_log("[default/obj] Adding the finalizer, thus preventing the actual deletion.", T).await;
    wait_obj(&client, "obj", "finalizer", |o| o["metadata"]["finalizers"] == json!(["bosun.dev/finalizer"])).await;
    controller.wait_log("[default/obj] Creation is processed: 1 succeeded; 0 failed.", T).await;

    kex::delete(&client, "default", "obj").await;
    controller.wait_log("[default/obj] Handler 'delete_fn' succeeded.", T).await;
    controller.wait_log("[default/obj] Deletion is processed: 1 succeeded; 0 failed.", T).await;
    kex::wait_gone(&client, "default", "obj").await;
    assert_eq!(server.count("delete_fn"), 1);
    controller.stop().await;
    stopper.stop().await;
}

#[tokio::test]
async fn temporary_errors_retry_after_their_delay_and_permanent_errors_stop() {
    let (_cluster, client) = setup().await;
    let attempts = Arc::new(AtomicUsize::new(0));
    let a = attempts.clone();
    let flaky: Behaviour = Arc::new(move |_| {
        if a.fetch_add(1, Ordering::SeqCst) < 2 {
            pb::HandleResponse {
                outcome: pb::Outcome::TemporaryError as i32,
                message: "not yet".into(),
                delay_seconds: Some(0.2),
                ..Default::default()
            }
        } else {
            success(json!({"attempts": 3}))
        }
    });
    let doomed: Behaviour =
        Arc::new(|_| pb::HandleResponse { outcome: pb::Outcome::PermanentError as i32, message: "never".into(), ..Default::default() });
    let server = Scripted::new(vec![(spec("flaky", pb::HandlerKind::Create), flaky), (spec("doomed", pb::HandlerKind::Create), doomed)]);
    let (addr, stopper) = server.clone().spawn().await;
    let controller = Controller::start(client.clone(), settings(&addr));
    kex::create(&client, "default", "obj", json!({})).await;
    controller.wait_log("[default/obj] Creation is processed: 1 succeeded; 1 failed.", T).await;
    assert_eq!(controller.count("Handler 'flaky' failed temporarily: not yet"), 2);
    assert_eq!(controller.count("Handler 'doomed' failed permanently: never"), 1);
    let retries: Vec<u32> = server.calls().iter().filter(|c| c.handler_id == "flaky").map(|c| c.retry).collect();
    assert_eq!(retries, [0, 1, 2], "each attempt is told its retry number");
    assert_eq!(server.count("doomed"), 1);
    wait_obj(&client, "obj", "flaky result", |o| o["status"]["flaky"]["attempts"] == 3).await;
    controller.stop().await;
    stopper.stop().await;
}

#[tokio::test]
async fn retries_limit_fails_the_handler_permanently() {
    let (_cluster, client) = setup().await;
    let mut s = spec("limited", pb::HandlerKind::Create);
    s.options = Some(pb::HandlerOptions { retries: Some(2), ..Default::default() });
    let always: Behaviour = Arc::new(|_| pb::HandleResponse {
        outcome: pb::Outcome::TemporaryError as i32,
        message: "again".into(),
        delay_seconds: Some(0.05),
        ..Default::default()
    });
    let server = Scripted::new(vec![(s, always)]);
    let (addr, stopper) = server.clone().spawn().await;
    let controller = Controller::start(client.clone(), settings(&addr));
    kex::create(&client, "default", "obj", json!({})).await;
    controller.wait_log("Handler 'limited' failed permanently: Handler 'limited' has exceeded 2 retries.", T).await;
    controller.wait_log("[default/obj] Creation is processed: 0 succeeded; 1 failed.", T).await;
    assert_eq!(server.count("limited"), 2);
    controller.stop().await;
    stopper.stop().await;
}

#[tokio::test]
async fn garbage_from_a_handler_is_a_clear_failure_and_other_objects_go_on() {
    let (_cluster, client) = setup().await;
    let garbage: Behaviour = Arc::new(|req| {
        if name_of(&req.object).as_deref() == Some("bad") {
            pb::HandleResponse { outcome: pb::Outcome::Success as i32, result: b"{not json".to_vec(), ..Default::default() }
        } else {
            success(json!({"fine": true}))
        }
    });
    let mut s = spec("create_fn", pb::HandlerKind::Create);
    s.options = Some(pb::HandlerOptions { errors: pb::ErrorsMode::Permanent as i32, ..Default::default() });
    let server = Scripted::new(vec![(s, garbage)]);
    let (addr, stopper) = server.clone().spawn().await;
    let controller = Controller::start(client.clone(), settings(&addr));
    kex::create(&client, "default", "bad", json!({})).await;
    kex::create(&client, "default", "good", json!({})).await;
    controller
        .wait_log("[default/bad] Handler 'create_fn' failed permanently: the handler server returned invalid JSON in `result`", T)
        .await;
    wait_obj(&client, "good", "good result", |o| o["status"]["create_fn"]["fine"] == true).await;
    let mut seen: Vec<Option<String>> = server.calls().iter().map(|c| name_of(&c.object)).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen, [Some("bad".into()), Some("good".into())], "the handler got each object, as JSON");
    controller.stop().await;
    stopper.stop().await;
}

#[tokio::test]
async fn a_patch_the_api_server_rejects_fails_its_handler_and_keeps_the_others() {
    let (_cluster, client) = setup().await;
    let merge_patch = serde_json::to_vec(&json!({"metadata": {"labels": {"bad key!": "x"}}})).unwrap();
    let bad_patch: Behaviour = Arc::new(move |_| pb::HandleResponse {
        outcome: pb::Outcome::Success as i32,
        merge_patch: merge_patch.clone(),
        ..Default::default()
    });
    let server = Scripted::new(vec![
        (spec("patcher", pb::HandlerKind::Create), bad_patch),
        (spec("fine", pb::HandlerKind::Create), ok(json!({"ok": 1}))),
    ]);
    let (addr, stopper) = server.clone().spawn().await;
    let controller = Controller::start(client.clone(), settings(&addr));
    kex::create(&client, "default", "obj", json!({})).await;
    controller.wait_log("[default/obj] Handler 'patcher' failed permanently: its patch was rejected by the API server", T).await;
    controller.wait_log("[default/obj] Creation is processed: 1 succeeded; 1 failed.", T).await;
    wait_obj(&client, "obj", "the other result", |o| o["status"]["fine"]["ok"] == 1).await;
    controller.stop().await;
    stopper.stop().await;
}

#[tokio::test]
async fn an_unreachable_handler_server_is_retried_and_nothing_is_lost() {
    let (_cluster, client) = setup().await;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = Scripted::new(vec![(spec("create_fn", pb::HandlerKind::Create), ok(json!({"late": true})))]);
    let (addr, stopper) = server.clone().spawn_on(listener).await;
    let controller = Controller::start(client.clone(), settings(&addr));
    controller.wait_log("registered 1 handler(s)", T).await;
    stopper.stop().await; // The server goes away after registration.
    kex::create(&client, "default", "obj", json!({})).await;
    controller.wait_log(&format!("Handler server {addr} is unreachable"), T).await;
    let listener = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    let (_, stopper) = server.clone().spawn_on(listener).await;
    wait_obj(&client, "obj", "late result", |o| o["status"]["create_fn"]["late"] == true).await;
    controller.stop().await;
    stopper.stop().await;
}

#[tokio::test]
async fn objects_no_handler_matches_are_never_written() {
    let (_cluster, client) = setup().await;
    let mut s = spec("create_fn", pb::HandlerKind::Create);
    let mut f = pb::Filters::default();
    f.labels.insert("handled".into(), pb::ValueFilter { check: Some(pb::value_filter::Check::Present(true)) });
    s.filters = Some(f);
    let server = Scripted::new(vec![(s, ok(json!({"done": true})))]);
    let (addr, stopper) = server.clone().spawn().await;
    let controller = Controller::start(client.clone(), settings(&addr));
    let ignored = kex::create(&client, "default", "ignored", json!({})).await;
    kex::create(&client, "default", "handled", json!({"metadata": {"labels": {"handled": "yes"}}})).await;
    wait_obj(&client, "handled", "handled", |o| o["status"]["create_fn"]["done"] == true).await;
    let after = kex::get(&client, "default", "ignored").await.unwrap();
    assert_eq!(after["metadata"]["resourceVersion"], ignored["metadata"]["resourceVersion"], "untouched: {after:#}");
    controller.stop().await;
    stopper.stop().await;
}

#[tokio::test]
async fn kopf_compat_mode_writes_kopf_keys_in_annotations() {
    let (_cluster, client) = setup().await;
    let server = Scripted::new(vec![
        (spec("create_fn", pb::HandlerKind::Create), ok(json!({"message": "hello world"}))),
        (spec("delete_fn", pb::HandlerKind::Delete), ok(Value::Null)),
    ]);
    let (addr, stopper) = server.clone().spawn().await;
    let controller = Controller::start(client.clone(), Settings { kopf_compat: true, ..settings(&addr) });
    kex::create(&client, "default", "obj", json!({})).await;
    let obj = wait_obj(&client, "obj", "kopf diffbase", |o| {
        o["metadata"]["annotations"]["kopf.zalando.org/last-handled-configuration"].is_string()
    })
    .await;
    assert_eq!(obj["metadata"]["finalizers"], json!(["kopf.zalando.org/KopfFinalizerMarker"]));
    wait_obj(&client, "obj", "result", |o| o["status"]["create_fn"]["message"] == "hello world").await;
    controller.stop().await;
    stopper.stop().await;
}

#[tokio::test]
async fn deletion_supersedes_an_unfinished_creation_and_failures_are_posted_as_error_events_with_loggers_on() {
    let (_cluster, client) = setup().await;
    let stuck: Behaviour = Arc::new(|_| pb::HandleResponse {
        outcome: pb::Outcome::TemporaryError as i32,
        message: "waiting for something".into(),
        delay_seconds: Some(3600.0),
        ..Default::default()
    });
    let doomed: Behaviour =
        Arc::new(|_| pb::HandleResponse { outcome: pb::Outcome::PermanentError as i32, message: "cannot".into(), ..Default::default() });
    let server = Scripted::new(vec![
        (spec("create_fn", pb::HandlerKind::Create), stuck),
        (spec("doomed", pb::HandlerKind::Create), doomed),
        (spec("delete_fn", pb::HandlerKind::Delete), ok(Value::Null)),
    ]);
    let (addr, stopper) = server.clone().spawn().await;
    let posting = bosun_controller::cluster::posting::Posting { loggers: true, ..Default::default() };
    let controller = Controller::start(client.clone(), Settings { posting, ..settings(&addr) });
    kex::create(&client, "default", "obj", json!({})).await;
    controller.wait_log("[default/obj] Handler 'create_fn' failed temporarily: waiting for something", T).await;
    let obj = wait_obj(&client, "obj", "progress stored", |o| !o["status"]["bosun.dev"]["progress"]["create_fn"].is_null()).await;
    let progress = &obj["status"]["bosun.dev"]["progress"]["create_fn"];
    assert_eq!(progress["purpose"], "create");
    assert_eq!(progress["retries"], 1);
    assert!(progress["delayed"].is_string(), "{progress}");

    // With loggers on, the failure's line is posted as Kopf posts it: an Error event.
    let cluster = bosun_controller::cluster::Cluster::new(client.clone());
    wait_for("a warning event", T, || {
        let cluster = cluster.clone();
        async move {
            let events = cluster.get("/api/v1/namespaces/default/events").await.unwrap();
            events["items"].as_array().unwrap().iter().any(|e| {
                e["type"] == "Error"
                    && e["reason"] == "Logging"
                    && e["involvedObject"]["name"] == "obj"
                    && e["message"].as_str().unwrap_or("").contains("Handler 'doomed' failed permanently: cannot")
            })
        }
    })
    .await
    .unwrap();

    kex::delete(&client, "default", "obj").await;
    controller.wait_log("[default/obj] Deletion is processed: 1 succeeded; 0 failed.", T).await;
    kex::wait_gone(&client, "default", "obj").await;
    assert_eq!(server.count("create_fn"), 1, "the creation is not retried once the deletion superseded it");
    controller.stop().await;
    stopper.stop().await;
}

#[tokio::test]
async fn spies_see_every_event_with_its_type_and_their_failures_block_nothing() {
    let (_cluster, client) = setup().await;
    kex::create(&client, "default", "early", json!({})).await;
    let failing_spy: Behaviour = Arc::new(|_| pb::HandleResponse {
        outcome: pb::Outcome::UnexpectedError as i32,
        message: "spy trouble".into(),
        ..Default::default()
    });
    let server = Scripted::new(vec![
        (spec("spy", pb::HandlerKind::Event), ok(json!({"ignored": true}))),
        (spec("bad_spy", pb::HandlerKind::Event), failing_spy),
        (spec("create_fn", pb::HandlerKind::Create), ok(json!({"created": true}))),
    ]);
    let (addr, stopper) = server.clone().spawn().await;
    let controller = Controller::start(client.clone(), settings(&addr));
    wait_obj(&client, "early", "early handled", |o| o["status"]["create_fn"]["created"] == true).await;
    kex::create(&client, "default", "late", json!({})).await;
    wait_obj(&client, "late", "late handled", |o| o["status"]["create_fn"]["created"] == true).await;
    kex::delete(&client, "default", "late").await;
    let types_of = |name: &str| -> Vec<String> {
        server
            .calls()
            .iter()
            .filter(|c| c.handler_id == "spy" && name_of(&c.object).as_deref() == Some(name))
            .map(|c| c.event_type.clone())
            .collect()
    };
    wait_for("the DELETED event reaches the spy", T, || {
        let t = types_of("late");
        async move { t.last().map(String::as_str) == Some("DELETED") }
    })
    .await
    .unwrap();
    assert_eq!(types_of("early").first().map(String::as_str), Some(""), "the initial listing has no type");
    let late = types_of("late");
    assert_eq!(late.first().map(String::as_str), Some("ADDED"), "{late:?}");
    assert!(late.iter().skip(1).take(late.len() - 2).all(|t| t == "MODIFIED"), "{late:?}");
    assert!(controller.count("Handler 'bad_spy' failed: spy trouble; ignored.") >= 3);
    let early = kex::get(&client, "default", "early").await.unwrap();
    assert!(early["status"].get("spy").is_none(), "spy results are not stored: {early:#}");
    controller.stop().await;
    stopper.stop().await;
}

#[tokio::test]
async fn sub_handlers_are_tracked_retried_alone_and_finish_their_parent() {
    let (_cluster, client) = setup().await;
    let parent: Behaviour = Arc::new(|req| {
        let obj: Value = serde_json::from_slice(&req.object).unwrap_or_default();
        let items = obj["spec"]["items"].as_array().cloned().unwrap_or_default();
        pb::HandleResponse {
            outcome: pb::Outcome::Success as i32,
            subhandlers: items
                .iter()
                .filter_map(|i| i.as_str())
                .map(|i| pb::SubHandler { id: i.into(), param: serde_json::to_vec(i).unwrap_or_default(), options: None })
                .collect(),
            ..Default::default()
        }
    });
    let b_attempts = Arc::new(AtomicUsize::new(0));
    let b = b_attempts.clone();
    let item_b: Behaviour = Arc::new(move |_| {
        if b.fetch_add(1, Ordering::SeqCst) == 0 {
            pb::HandleResponse {
                outcome: pb::Outcome::TemporaryError as i32,
                message: "b is not ready".into(),
                delay_seconds: Some(0.2),
                ..Default::default()
            }
        } else {
            success(json!({"item": "b"}))
        }
    });
    let server = Scripted::new(vec![(spec("create_fn", pb::HandlerKind::Create), parent)])
        .also("create_fn/a", ok(json!({"item": "a"})))
        .also("create_fn/b", item_b);
    let (addr, stopper) = server.clone().spawn().await;
    let controller = Controller::start(client.clone(), settings(&addr));
    kex::create(&client, "default", "obj", json!({"spec": {"items": ["a", "b"]}})).await;
    controller.wait_log("[default/obj] Handler 'create_fn/b' failed temporarily: b is not ready", T).await;
    controller.wait_log("[default/obj] Creation is processed: 1 succeeded; 0 failed.", T).await;
    assert_eq!(server.count("create_fn"), 1, "the parent is not called again");
    assert_eq!(server.count("create_fn/a"), 1, "a succeeded at once and is not retried");
    assert_eq!(server.count("create_fn/b"), 2, "b alone is retried");
    let b_call = server.calls().into_iter().find(|c| c.handler_id == "create_fn/b").unwrap();
    assert_eq!(b_call.param, b"\"b\"", "the child gets its parameter");
    assert_eq!(controller.count("[default/obj] Handler 'create_fn' succeeded."), 1);
    let obj = wait_obj(&client, "obj", "children results", |o| o["status"]["create_fn/b"]["item"] == "b").await;
    assert_eq!(obj["status"]["create_fn/a"]["item"], "a");
    assert!(obj["status"]["bosun.dev"].get("progress").is_none(), "all progress purged: {obj:#}");
    controller.stop().await;
    stopper.stop().await;
}

#[tokio::test]
async fn an_object_that_stops_matching_a_pushed_down_label_filter_gets_its_finalizer_back() {
    let (_cluster, client) = setup().await;
    let mut s = spec("delete_fn", pb::HandlerKind::Delete);
    let mut f = pb::Filters::default();
    f.labels.insert("handled".into(), pb::ValueFilter { check: Some(pb::value_filter::Check::Equals(b"\"yes\"".to_vec())) });
    s.filters = Some(f);
    let server = Scripted::new(vec![(s, ok(Value::Null))]);
    let (addr, stopper) = server.clone().spawn().await;
    let controller = Controller::start(client.clone(), settings(&addr));
    controller.wait_log("with the label selector handled=yes", T).await;
    kex::create(&client, "default", "obj", json!({"metadata": {"labels": {"handled": "yes"}}})).await;
    wait_obj(&client, "obj", "finalizer added", |o| o["metadata"]["finalizers"] == json!(["bosun.dev/finalizer"])).await;
    kex::patch(&client, "default", "obj", json!({"metadata": {"labels": {"handled": "no"}}})).await;
    wait_obj(&client, "obj", "finalizer released", |o| {
        o["metadata"].get("finalizers").is_none_or(|f| f.as_array().is_some_and(|a| a.is_empty()))
    })
    .await;
    kex::delete(&client, "default", "obj").await;
    kex::wait_gone(&client, "default", "obj").await;
    assert_eq!(server.count("delete_fn"), 0);
    controller.stop().await;
    stopper.stop().await;
}

#[tokio::test]
async fn handlers_on_built_ins_keep_state_and_results_in_annotations() {
    let (_cluster, client) = setup().await;
    let mut s = spec("create_fn", pb::HandlerKind::Create);
    s.resource = Some(pb::ResourceSelector { group: String::new(), version: "v1".into(), name: "configmaps".into() });
    let mut f = pb::Filters::default();
    f.labels.insert("demo".into(), pb::ValueFilter { check: Some(pb::value_filter::Check::Present(true)) });
    s.filters = Some(f);
    let server = Scripted::new(vec![(s, ok(json!({"seen": true})))]);
    let (addr, stopper) = server.clone().spawn().await;
    let controller = Controller::start(client.clone(), settings(&addr));
    let cluster = bosun_controller::cluster::Cluster::new(client.clone());
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "labels": {"demo": "1"}}, "data": {"k": "v"}});
    cluster.create("/api/v1/namespaces/default/configmaps", &cm).await.unwrap();
    controller.wait_log("[default/cm] Creation is processed: 1 succeeded; 0 failed.", T).await;
    let deadline = tokio::time::Instant::now() + T;
    let got = loop {
        let got = cluster.get("/api/v1/namespaces/default/configmaps/cm").await.unwrap();
        if got["metadata"]["annotations"]["bosun.dev/create_fn.result"].is_string() || tokio::time::Instant::now() > deadline {
            break got;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let ann = &got["metadata"]["annotations"];
    assert_eq!(ann["bosun.dev/create_fn.result"], "{\"seen\":true}");
    assert_eq!(ann["bosun.dev/last-handled-configuration"], "{\"data\":{\"k\":\"v\"},\"metadata\":{\"labels\":{\"demo\":\"1\"}}}\n");
    controller.stop().await;
    stopper.stop().await;
}

#[tokio::test]
async fn a_memo_returned_by_one_call_reaches_the_next_calls_for_the_same_object() {
    let (_cluster, client) = setup().await;
    let remember: Behaviour =
        Arc::new(|_| pb::HandleResponse { outcome: pb::Outcome::Success as i32, memo: b"{\"counter\":1}".to_vec(), ..Default::default() });
    let server = Scripted::new(vec![
        (spec("create_fn", pb::HandlerKind::Create), remember),
        (spec("update_fn", pb::HandlerKind::Update), ok(Value::Null)),
    ]);
    let (addr, stopper) = server.clone().spawn().await;
    let controller = Controller::start(client.clone(), settings(&addr));
    kex::create(&client, "default", "obj", json!({})).await;
    kex::create(&client, "default", "other", json!({})).await;
    controller.wait_log("[default/obj] Creation is processed", T).await;
    controller.wait_log("[default/other] Creation is processed", T).await;
    kex::patch(&client, "default", "obj", json!({"spec": {"field": "x"}})).await;
    controller.wait_log("[default/obj] Updating is processed", T).await;
    let calls = server.calls();
    let create = calls.iter().find(|c| c.handler_id == "create_fn").unwrap();
    assert!(create.memo.is_empty(), "no memo before the first answer");
    let update = calls.iter().find(|c| c.handler_id == "update_fn").unwrap();
    assert_eq!(update.memo, b"{\"counter\":1}");
    controller.stop().await;
    stopper.stop().await;
}

#[tokio::test]
async fn owned_objects_are_created_adopted_not_duplicated_and_collected_with_their_owner() {
    let (_cluster, client) = setup().await;
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}});
    let owned = vec![
        pb::OwnedObject { object: serde_json::to_vec(&pod).unwrap(), apply: false, copy_labels: true },
        pb::OwnedObject { object: serde_json::to_vec(&cm).unwrap(), apply: true, copy_labels: false },
    ];
    let creator: Behaviour = Arc::new(move |_| pb::HandleResponse {
        outcome: pb::Outcome::Success as i32,
        result: b"{\"note\":\"made\"}".to_vec(),
        owned: owned.clone(),
        ..Default::default()
    });
    let server = Scripted::new(vec![(spec("create_fn", pb::HandlerKind::Create), creator)]);
    let (addr, stopper) = server.clone().spawn().await;
    let controller = Controller::start(client.clone(), settings(&addr));
    kex::create(&client, "default", "ex", json!({"metadata": {"labels": {"team": "blue"}}})).await;
    let obj =
        wait_obj(&client, "ex", "children recorded", |o| o["status"]["create_fn"]["children"].as_array().is_some_and(|c| c.len() == 2))
            .await;
    assert_eq!(obj["status"]["create_fn"]["note"], "made");
    let cluster = bosun_controller::cluster::Cluster::new(client.clone());
    let pod = cluster.get("/api/v1/namespaces/default/pods/ex-pod").await.expect("the pod exists");
    assert_eq!(pod["metadata"]["labels"]["team"], "blue");
    let owner_ref = &pod["metadata"]["ownerReferences"][0];
    assert_eq!(
        (owner_ref["kind"].as_str(), owner_ref["uid"].as_str(), owner_ref["controller"].as_bool()),
        (Some("KopfExample"), obj["metadata"]["uid"].as_str(), Some(true))
    );
    let cm = cluster.get("/api/v1/namespaces/default/configmaps/ex-configmap").await.expect("the configmap exists");
    assert_eq!(obj["status"]["create_fn"]["children"], json!([pod["metadata"]["uid"], cm["metadata"]["uid"]]));

    // Forget the handling (the result, and the diffbase in its annotation): the handler runs
    // again and finds its children instead of duplicating them.
    let status_path = format!("{}/ex/status", kex::path("default"));
    cluster.patch(&status_path, "application/merge-patch+json", &json!({"status": {"create_fn": null}})).await.unwrap();
    let forget = json!({"metadata": {"annotations": {"bosun.dev/last-handled-configuration": null}}});
    cluster.patch(&format!("{}/ex", kex::path("default")), "application/merge-patch+json", &forget).await.unwrap();
    wait_for("a second run", T, || {
        let n = server.count("create_fn");
        async move { n == 2 }
    })
    .await
    .unwrap();
    let again = wait_obj(&client, "ex", "children recorded again", |o| {
        o["status"]["create_fn"]["children"].as_array().is_some_and(|c| c.len() == 2)
    })
    .await;
    assert_eq!(again["status"]["create_fn"]["children"], obj["status"]["create_fn"]["children"], "same children, no duplicates");

    kex::delete(&client, "default", "ex").await;
    wait_for("the children collected", T, || {
        let cluster = cluster.clone();
        async move {
            cluster.get("/api/v1/namespaces/default/pods/ex-pod").await.is_err()
                && cluster.get("/api/v1/namespaces/default/configmaps/ex-configmap").await.is_err()
        }
    })
    .await
    .unwrap();
    controller.stop().await;
    stopper.stop().await;
}

#[tokio::test]
async fn field_handlers_watch_labels_and_status_and_ignored_fields_change_nothing() {
    let (_cluster, client) = setup().await;
    let mut on_label = spec("label_fn/metadata.labels.tier", pb::HandlerKind::Field);
    on_label.field = "metadata.labels.tier".into();
    let mut on_status = spec("phase_fn/status.phase", pb::HandlerKind::Field);
    on_status.field = "status.phase".into();
    let server = Scripted::new(vec![
        (spec("update_fn", pb::HandlerKind::Update), ok(Value::Null)),
        (on_label, ok(Value::Null)),
        (on_status, ok(Value::Null)),
    ])
    .with_resource_settings(pb::ResourceSettings {
        resource: Some(pb::ResourceSelector { group: "kopf.dev".into(), version: "v1".into(), name: "kopfexamples".into() }),
        ignored_fields: vec!["spec.replicas".into()],
        owns: vec![],
    });
    let (addr, stopper) = server.clone().spawn().await;
    let controller = Controller::start(client.clone(), settings(&addr));
    kex::create(&client, "default", "obj", json!({"spec": {"replicas": 1}})).await;
    let diffbase = |o: &Value| o["metadata"]["annotations"]["bosun.dev/last-handled-configuration"].clone();
    let obj = wait_obj(&client, "obj", "diffbase", |o| diffbase(o).is_string()).await;
    assert!(!diffbase(&obj).as_str().unwrap().contains("replicas"), "ignored fields stay out of the diffbase");

    kex::patch(&client, "default", "obj", json!({"spec": {"replicas": 5}})).await; // ignored: nothing happens
    kex::patch(&client, "default", "obj", json!({"metadata": {"labels": {"tier": "gold"}}})).await;
    controller.wait_log("[default/obj] Handler 'label_fn/metadata.labels.tier' succeeded.", T).await;
    let status_path = format!("{}/obj/status", kex::path("default"));
    let cluster = bosun_controller::cluster::Cluster::new(client.clone());
    cluster.patch(&status_path, "application/merge-patch+json", &json!({"status": {"phase": "Running"}})).await.unwrap();
    controller.wait_log("[default/obj] Handler 'phase_fn/status.phase' succeeded.", T).await;
    let calls = server.calls();
    let phase = calls.iter().find(|c| c.handler_id == "phase_fn/status.phase").unwrap();
    assert_eq!((phase.old.as_slice(), phase.new.as_slice()), (&b""[..], &b"\"Running\""[..]));
    assert_eq!(server.count("update_fn"), 2, "the label and the status phase; not the ignored replicas");
    assert_eq!(server.count("label_fn/metadata.labels.tier"), 1);
    controller.stop().await;
    stopper.stop().await;
}

#[tokio::test]
async fn a_diffbase_too_large_for_annotations_is_stored_as_a_digest_and_handlers_do_not_rerun() {
    let (_cluster, client) = setup().await;
    let mut s = spec("create_fn", pb::HandlerKind::Create);
    s.resource = Some(pb::ResourceSelector { group: String::new(), version: "v1".into(), name: "configmaps".into() });
    let server = Scripted::new(vec![(s, ok(Value::Null))]);
    let (addr, stopper) = server.clone().spawn().await;
    let controller = Controller::start(
        client.clone(),
        Settings { namespaces: bosun_controller::Namespaces::Patterns(vec!["default".into()]), ..settings(&addr) },
    );
    let cluster = bosun_controller::cluster::Cluster::new(client.clone());
    let path = "/api/v1/namespaces/default/configmaps/big";
    let big = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}, "data": {"blob": "x".repeat(300_000)}});
    cluster.create("/api/v1/namespaces/default/configmaps", &big).await.unwrap();
    controller.wait_log("[default/big] The last handled state is too large to store", T).await;
    let stored = |o: &Value| o["metadata"]["annotations"]["bosun.dev/last-handled-configuration"].as_str().unwrap_or("").to_string();
    let first =
        wait_for_value("the digest", T, || async { cluster.get(path).await.ok().map(|o| stored(&o)).filter(|d| d.starts_with("digest:")) })
            .await;
    cluster.patch(path, "application/merge-patch+json", &json!({"metadata": {"labels": {"poke": "1"}}})).await.unwrap();
    wait_for_value("a new digest after the change", T, || async {
        cluster.get(path).await.ok().map(|o| stored(&o)).filter(|d| d.starts_with("digest:") && *d != first)
    })
    .await;
    assert_eq!(server.count("create_fn"), 1, "the handler succeeded once and is not re-run");
    assert_eq!(controller.count("The last handled state is too large to store"), 1, "said once: {:?}", controller.log());
    controller.stop().await;
    stopper.stop().await;
}

/// Waits until `f` gives a value.
async fn wait_for_value<T, F, Fut>(what: &str, limit: Duration, f: F) -> T
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn namespace_patterns_choose_which_objects_are_served() {
    let (_cluster, client) = setup().await;
    let cluster = bosun_controller::cluster::Cluster::new(client.clone());
    for ns in ["team-a", "team-b", "team-secret", "other"] {
        cluster.create("/api/v1/namespaces", &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})).await.unwrap();
    }
    let server = Scripted::new(vec![(spec("create_fn", pb::HandlerKind::Create), ok(json!({"ok": true})))]);
    let (addr, stopper) = server.clone().spawn().await;
    let cases: [(&[&str], &[&str]); 3] =
        [(&["team-a"], &["team-a"]), (&["team-*", "!team-secret"], &["team-a", "team-b"]), (&["!team-*"], &["default", "other"])];
    for (round, (patterns, served)) in cases.iter().enumerate() {
        let ns_settings = Settings {
            namespaces: bosun_controller::Namespaces::Patterns(patterns.iter().map(|p| p.to_string()).collect()),
            ..settings(&addr)
        };
        let controller = Controller::start(client.clone(), ns_settings);
        let name = format!("obj-{round}");
        for ns in ["default", "team-a", "team-b", "team-secret", "other"] {
            kex::create(&client, ns, &name, json!({})).await;
        }
        for ns in *served {
            controller.wait_log(&format!("[{ns}/{name}] Creation is processed"), T).await;
        }
        // A served object created after all the others: with one cluster-wide watch it proves
        // the others were seen and skipped; per-namespace watches never send them at all.
        let last = format!("{name}-last");
        kex::create(&client, served[0], &last, json!({})).await;
        controller.wait_log(&format!("[{}/{last}] Creation is processed", served[0]), T).await;
        for ns in ["default", "team-a", "team-b", "team-secret", "other"] {
            let handled = controller.count(&format!("[{ns}/{name}] Creation is processed")) == 1;
            assert_eq!(handled, served.contains(&ns), "{patterns:?}: {ns}");
        }
        controller.stop().await;
    }
    stopper.stop().await;
}

fn activity(id: &str, kind: pb::HandlerKind) -> pb::HandlerSpec {
    pb::HandlerSpec { id: id.into(), kind: kind as i32, ..Default::default() }
}

#[tokio::test]
async fn startup_activities_succeed_before_watching_and_cleanups_run_at_exit() {
    let (_cluster, client) = setup().await;
    kex::create(&client, "default", "obj", json!({})).await;
    let tries = Arc::new(AtomicUsize::new(0));
    let t = tries.clone();
    let boot: Behaviour = Arc::new(move |_| {
        if t.fetch_add(1, Ordering::SeqCst) == 0 {
            pb::HandleResponse {
                outcome: pb::Outcome::TemporaryError as i32,
                message: "not yet".into(),
                delay_seconds: Some(0.1),
                ..Default::default()
            }
        } else {
            success(Value::Null)
        }
    });
    let server = Scripted::new(vec![
        (activity("boot", pb::HandlerKind::Startup), boot),
        (activity("bye", pb::HandlerKind::Cleanup), ok(Value::Null)),
        (spec("create_fn", pb::HandlerKind::Create), ok(Value::Null)),
    ]);
    let (addr, stopper) = server.clone().spawn().await;
    let controller = Controller::start(client.clone(), settings(&addr));
    controller.wait_log("[default/obj] Creation is processed", T).await;
    let log = controller.log();
    let pos = |text: &str| log.iter().position(|l| l.contains(text)).unwrap_or_else(|| panic!("{text} missing: {log:#?}"));
    assert!(pos("Activity 'boot' failed temporarily: not yet") < pos("Activity 'boot' succeeded."));
    assert!(pos("Activity 'boot' succeeded.") < pos("[default/obj] Creation is processed"), "watching waits for startup");
    let log_handle = controller.log_handle();
    controller.stop().await;
    assert!(log_handle.lock().unwrap().iter().any(|l| l.contains("Activity 'bye' succeeded.")), "cleanup ran at exit");
    stopper.stop().await;
}

#[tokio::test]
async fn a_permanently_failing_startup_activity_stops_the_controller_with_a_clear_error() {
    let (_cluster, client) = setup().await;
    let doomed: Behaviour = Arc::new(|_| pb::HandleResponse {
        outcome: pb::Outcome::PermanentError as i32,
        message: "no database".into(),
        ..Default::default()
    });
    let server = Scripted::new(vec![
        (activity("boot", pb::HandlerKind::Startup), doomed),
        (spec("create_fn", pb::HandlerKind::Create), ok(Value::Null)),
    ]);
    let (addr, stopper) = server.clone().spawn().await;
    let result =
        tokio::time::timeout(T, bosun_controller::run(client.clone(), settings(&addr), std::future::pending())).await.expect("run returns");
    let err = result.expect_err("the controller does not start");
    assert_eq!(err.to_string(), "startup handler 'boot' failed permanently: no database");
    stopper.stop().await;
}

#[tokio::test]
async fn timers_tick_while_the_object_lives_and_stop_when_it_is_deleted() {
    let (_cluster, client) = setup().await;
    let mut s = spec("tick_fn", pb::HandlerKind::Timer);
    s.timer = Some(pb::TimerOptions { interval_seconds: 0.1, ..Default::default() });
    let t = Arc::new(AtomicUsize::new(0));
    let tick: Behaviour = Arc::new(move |_| {
        let n = t.fetch_add(1, Ordering::SeqCst) + 1;
        success(json!({"ticks": n}))
    });
    let server = Scripted::new(vec![(s, tick)]);
    let (addr, stopper) = server.clone().spawn().await;
    let controller = Controller::start(client.clone(), settings(&addr));
    kex::create(&client, "default", "obj", json!({})).await;
    let obj = wait_obj(&client, "obj", "three ticks", |o| o["status"]["tick_fn"]["ticks"].as_u64().is_some_and(|n| n >= 3)).await;
    assert_eq!(obj["metadata"]["finalizers"], json!(["bosun.dev/finalizer"]), "timers hold a finalizer");
    assert!(controller.count("[default/obj] Timer 'tick_fn' succeeded.") >= 3);
    kex::delete(&client, "default", "obj").await;
    kex::wait_gone(&client, "default", "obj").await;
    let ticks_of = |name: &str| server.calls().iter().filter(|c| name_of(&c.object).as_deref() == Some(name)).count();
    let after = ticks_of("obj");
    // While another object's timer ticks three times, the deleted one's does not tick again.
    kex::create(&client, "default", "obj2", json!({})).await;
    wait_obj(&client, "obj2", "three ticks of obj2", |o| o["status"]["tick_fn"]["ticks"].as_u64().is_some()).await;
    wait_for("three ticks of obj2", T, || {
        let n = ticks_of("obj2");
        async move { n >= 3 }
    })
    .await
    .unwrap();
    assert!(ticks_of("obj") <= after + 1, "the timer stopped with its object");
    let reasons: Vec<i32> = server.calls().iter().map(|c| c.reason).collect();
    assert!(reasons.iter().all(|r| *r == pb::Reason::Timer as i32), "timer calls have the timer reason: {reasons:?}");
    controller.stop().await;
    stopper.stop().await;
}

#[tokio::test]
async fn daemons_run_while_the_object_lives_and_are_cancelled_when_it_is_deleted() {
    let (_cluster, client) = setup().await;
    let mut s = spec("watcher", pb::HandlerKind::Daemon);
    s.daemon = Some(pb::DaemonOptions::default());
    let script: bosun_tests::DaemonScript = Arc::new(|req| {
        let obj: Value = serde_json::from_slice(&req.object).unwrap_or_default();
        vec![
            pb::DaemonMessage {
                message: Some(pb::daemon_message::Message::Log(pb::LogLine {
                    level: 0,
                    message: format!("watching {}", obj["metadata"]["name"]),
                })),
            },
            pb::DaemonMessage { message: Some(pb::daemon_message::Message::MergePatch(br#"{"status":{"watcher":"alive"}}"#.to_vec())) },
        ]
    });
    let server = Scripted::new(vec![]).with_daemon(s, script);
    let (addr, stopper) = server.clone().spawn().await;
    let controller = Controller::start(client.clone(), settings(&addr));
    kex::create(&client, "default", "obj", json!({})).await;
    controller.wait_log("[default/obj] watching \"obj\"", T).await;
    let obj = wait_obj(&client, "obj", "the daemon's patch", |o| o["status"]["watcher"] == "alive").await;
    assert_eq!(obj["metadata"]["finalizers"], json!(["bosun.dev/finalizer"]), "daemons hold a finalizer");
    assert_eq!(server.open_daemons.load(Ordering::SeqCst), 1);
    kex::delete(&client, "default", "obj").await;
    kex::wait_gone(&client, "default", "obj").await;
    let open = server.open_daemons.clone();
    wait_for("the daemon's stream to be cancelled", T, || {
        let n = open.load(Ordering::SeqCst);
        async move { n == 0 }
    })
    .await
    .unwrap();
    controller.stop().await;
    stopper.stop().await;
}

async fn http_get(addr: &str, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    let code = out.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (code, out.split("\r\n\r\n").nth(1).unwrap_or("").to_string())
}

#[tokio::test]
async fn the_liveness_endpoint_reports_probe_results() {
    let (_cluster, client) = setup().await;
    let server = Scripted::new(vec![
        (activity("health", pb::HandlerKind::Probe), ok(json!({"db": "up"}))),
        (spec("create_fn", pb::HandlerKind::Create), ok(Value::Null)),
    ]);
    let (addr, stopper) = server.clone().spawn().await;
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let liveness = format!("http://127.0.0.1:{port}/healthz");
    let controller = Controller::start(client.clone(), Settings { liveness: Some(liveness.clone()), ..settings(&addr) });
    controller.wait_log(&format!("Serving the liveness endpoint at {liveness} with 1 probe(s)."), T).await;
    let (code, body) = http_get(&format!("127.0.0.1:{port}"), "/healthz").await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap(), json!({"health": {"db": "up"}}));
    controller.stop().await;
    stopper.stop().await;
}
