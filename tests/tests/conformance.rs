//! The contract conformance suite: the scenarios of `tests/conformance/README.md`, written once
//! and run against every SDK's conformance server (`rust::*`, `python::*`, `typescript::*` and
//! `go::*` tests). Each test
//! has a dev cluster of its own (in-process, over HTTP), starts the SDK's server as a process
//! (gRPC on loopback) and runs the real controller between them; it applies objects and checks
//! what ends up on them: results, patches, progress records, finalizers, events, children.
//!
//! A new SDK joins by shipping a server that registers the README's handler set and adding a
//! line to `conformance!` below.

use std::time::Duration;

use bosun_controller::Settings;
use bosun_tests::conformance::{DEADLINE, Env, NS, Sdk, ServerCommand};
use bosun_tests::wait_for;
use serde_json::{Value, json};

/// How to start an SDK's server; `None` when its toolchain is missing (skipped, or failed
/// under CI).
fn server(sdk: Sdk) -> Option<ServerCommand> {
    match sdk {
        Sdk::Rust => Some(ServerCommand::executable(env!("CARGO_BIN_EXE_conformance-server"))),
        Sdk::Python => ServerCommand::python(),
        Sdk::Go => ServerCommand::go(),
        Sdk::TypeScript => ServerCommand::typescript(),
    }
}

/// Starts a scenario's world with default controller settings.
async fn start(sdk: Sdk) -> Option<Env> {
    start_with(sdk, Settings::default()).await
}

async fn start_with(sdk: Sdk, settings: Settings) -> Option<Env> {
    Some(Env::start(sdk, &server(sdk)?, settings).await)
}

/// One `#[tokio::test]` per scenario and SDK: `rust::<scenario>`, `python::<scenario>`,
/// `typescript::<scenario>`, `go::<scenario>`.
macro_rules! conformance {
    ($($scenario:ident),* $(,)?) => {
        mod rust {
            $(#[tokio::test] async fn $scenario() { super::$scenario(super::Sdk::Rust).await })*
        }
        mod python {
            $(#[tokio::test] async fn $scenario() { super::$scenario(super::Sdk::Python).await })*
        }
        mod go {
            $(#[tokio::test] async fn $scenario() { super::$scenario(super::Sdk::Go).await })*
        }
        mod typescript {
            $(#[tokio::test] async fn $scenario() { super::$scenario(super::Sdk::TypeScript).await })*
        }
    };
}

conformance!(
    create_handlers_store_their_results_and_the_diffbase,
    update_and_field_handlers_get_the_old_and_new_values,
    delete_handlers_hold_the_finalizer_until_they_ran,
    resume_handlers_run_for_existing_objects_after_a_restart,
    merge_patches_apply_to_metadata_and_status,
    temporary_errors_are_retried_after_their_delay_until_success,
    permanent_errors_are_not_retried_and_are_recorded_as_failed,
    unexpected_errors_are_retried_after_the_backoff_by_default,
    subhandlers_run_and_store_their_results,
    events_are_posted_about_the_object,
    owned_objects_are_created_adopted_and_collected,
    timers_tick_and_patch_a_counter,
    daemons_run_until_the_object_is_deleted,
    silent_daemons_hold_their_object_until_they_end,
    silent_daemons_end_before_the_controller_stops,
    silent_daemons_end_before_their_replica_hands_over,
    a_daemons_patches_stop_landing_when_its_replica_loses_the_lease,
    startup_activities_run_and_retry_before_any_handler,
    probes_answer_on_the_liveness_endpoint,
    cleanup_activities_run_when_the_controller_stops,
    an_unknown_handler_id_is_not_found_naming_the_known_ones,
    a_handler_that_kills_its_server_is_retried_once_it_is_back,
    a_server_started_again_with_a_changed_registry_is_served_anew,
);

/// The progress record of handler `id` (`status.bosun.dev.progress.<id>`), `Null` when none.
fn progress<'a>(object: &'a Value, id: &str) -> &'a Value {
    &object["status"]["bosun.dev"]["progress"][id]
}

/// The stored diffbase (annotation `bosun.dev/last-handled-configuration`), `Null` when none.
fn diffbase(object: &Value) -> &Value {
    &object["metadata"]["annotations"]["bosun.dev/last-handled-configuration"]
}

/// Whether the cause is processed: the diffbase is stored and no progress is left.
fn processed(object: &Value) -> bool {
    let progress = object["status"]["bosun.dev"].get("progress");
    diffbase(object).is_string() && progress.is_none_or(|p| p.as_object().is_some_and(|p| p.is_empty()))
}

/// The object's `metadata.uid`.
fn uid(object: &Value) -> String {
    object["metadata"]["uid"].as_str().expect("objects have a uid").to_string()
}

fn finalizers(object: &Value) -> &Value {
    &object["metadata"]["finalizers"]
}

async fn create_handlers_store_their_results_and_the_diffbase(sdk: Sdk) {
    let Some(env) = start(sdk).await else { return };
    env.create("obj", json!({})).await;
    let obj = env.wait_object("obj", "the creation to be processed", |o| processed(o) && o["status"]["create"].is_object()).await;
    assert_eq!(obj["status"]["create"]["message"], "created", "{obj:#}");
    assert_eq!(obj["status"]["create"]["field"], "value", "{obj:#}");
    // A field handler is called on creation too: the field was absent before. Results are
    // stored with a merge patch, so their null members are not stored (as in Kopf).
    assert_eq!(obj["status"]["field/spec.field"], json!({"new": "value"}), "{obj:#}");
    assert_eq!(diffbase(&obj), "{\"spec\":{\"field\":\"value\"}}\n", "{obj:#}");
    // Handlers that returned nothing store nothing; neither do handlers of other causes.
    for id in ["errors", "patch", "events", "children", "subhandlers", "update", "resume"] {
        assert!(obj["status"].get(id).is_none(), "no status.{id}: {obj:#}");
    }
    // The delete handler needs the finalizer.
    assert_eq!(finalizers(&obj), &json!(["bosun.dev/finalizer"]), "{obj:#}");
    env.wait_log("[default/obj] Handler 'create' succeeded.").await;
    env.wait_log("[default/obj] Creation is processed:").await;
    env.stop().await;
}

async fn update_and_field_handlers_get_the_old_and_new_values(sdk: Sdk) {
    let Some(env) = start(sdk).await else { return };
    env.create("obj", json!({})).await;
    env.wait_object("obj", "the creation to be processed", processed).await;
    env.patch("obj", json!({"spec": {"field": "changed"}})).await;
    let obj = env.wait_object("obj", "the update to be processed", |o| processed(o) && o["status"]["update"]["field"] == "changed").await;
    assert_eq!(obj["status"]["update"], json!({"message": "updated", "field": "changed"}), "{obj:#}");
    assert_eq!(obj["status"]["field/spec.field"], json!({"old": "value", "new": "changed"}), "{obj:#}");
    assert_eq!(diffbase(&obj), "{\"spec\":{\"field\":\"changed\"}}\n", "{obj:#}");
    env.wait_log("[default/obj] Updating is processed: 2 succeeded; 0 failed.").await;
    env.stop().await;
}

async fn delete_handlers_hold_the_finalizer_until_they_ran(sdk: Sdk) {
    let Some(env) = start(sdk).await else { return };
    let uid = uid(&env.create("obj", json!({})).await);
    env.wait_object("obj", "the finalizer", |o| processed(o) && finalizers(o) == &json!(["bosun.dev/finalizer"])).await;
    env.delete("obj").await;
    env.wait_gone("obj").await;
    let events = env.wait_events(&uid, "the delete handler's event", |events| events.iter().any(|e| e["reason"] == "Deleting")).await;
    let deleting = events.iter().find(|e| e["reason"] == "Deleting").expect("found");
    assert_eq!((deleting["type"].as_str(), deleting["message"].as_str()), (Some("Normal"), Some("conformance: deleting obj")));
    env.wait_log("[default/obj] Handler 'delete' succeeded.").await;
    env.wait_log("[default/obj] Deletion is processed: 1 succeeded; 0 failed.").await;
    env.stop().await;
}

async fn resume_handlers_run_for_existing_objects_after_a_restart(sdk: Sdk) {
    let Some(mut env) = start(sdk).await else { return };
    env.create("obj", json!({})).await;
    let obj = env.wait_object("obj", "the creation to be processed", processed).await;
    assert!(obj["status"].get("resume").is_none(), "a new object is created, not resumed: {obj:#}");
    env.stop_controller().await;

    env.start_controller();
    let obj = env.wait_object("obj", "the resume result", |o| processed(o) && o["status"]["resume"].is_object()).await;
    assert_eq!(obj["status"]["resume"], json!({"message": "resumed"}), "{obj:#}");
    env.wait_log("[default/obj] Handler 'resume' succeeded.").await;
    let created_again = env.controller().count("[default/obj] Handler 'create' succeeded.");
    assert_eq!(created_again, 0, "the restarted controller does not create again");
    env.stop().await;
}

async fn merge_patches_apply_to_metadata_and_status(sdk: Sdk) {
    let Some(env) = start(sdk).await else { return };
    let patch = json!({"metadata": {"labels": {"patched": "yes"}}, "status": {"patched": {"by": "patch"}}});
    let spec = json!({"patch": patch, "removeLabels": ["removeme"]});
    env.create("obj", json!({"metadata": {"labels": {"removeme": "yes", "kept": "yes"}}, "spec": spec})).await;
    // Processed: the status write and the main write (which carries the diffbase, last) are done.
    let obj = env.wait_object("obj", "the patch to be applied", |o| processed(o) && o["status"]["patched"].is_object()).await;
    assert_eq!(obj["status"]["patched"], json!({"by": "patch"}), "{obj:#}");
    assert_eq!(obj["metadata"]["labels"], json!({"kept": "yes", "patched": "yes"}), "one label added, one removed by a null: {obj:#}");
    assert!(obj["status"].get("patch").is_none(), "the patch handler returns nothing: {obj:#}");
    env.stop().await;
}

async fn temporary_errors_are_retried_after_their_delay_until_success(sdk: Sdk) {
    let Some(env) = start(sdk).await else { return };
    env.create("obj", json!({"spec": {"fail": "temporary", "retriesBeforeSuccess": 2}})).await;
    // While it waits for its delay, its progress record says why and until when.
    let obj = env.wait_object("obj", "a retry in the progress record", |o| progress(o, "errors")["retries"].as_u64() >= Some(1)).await;
    let record = progress(&obj, "errors");
    assert!(record["message"].as_str().is_some_and(|m| m.starts_with("conformance: temporary failure at retry ")), "{obj:#}");
    assert!(record["delayed"].is_string() && record["started"].is_string(), "{obj:#}");
    assert!(record.get("success").is_none() && record.get("failure").is_none(), "{obj:#}");

    let obj = env.wait_object("obj", "the success after two retries", |o| processed(o) && o["status"]["errors"].is_object()).await;
    assert_eq!(obj["status"]["errors"], json!({"retry": 2}), "the third attempt saw retry=2: {obj:#}");
    assert_eq!(obj["status"]["attempts"], 3, "each attempt's patch applies, failed ones too: {obj:#}");
    env.wait_log("[default/obj] Handler 'errors' failed temporarily: conformance: temporary failure at retry 0").await;
    env.wait_log("[default/obj] Handler 'errors' failed temporarily: conformance: temporary failure at retry 1").await;
    env.wait_log("[default/obj] Handler 'errors' succeeded.").await;
    env.stop().await;
}

async fn permanent_errors_are_not_retried_and_are_recorded_as_failed(sdk: Sdk) {
    // The failure's line is posted as an event only with loggers on (Kopf 1.44+).
    let posting = bosun_controller::cluster::posting::Posting { loggers: true, ..Default::default() };
    let Some(env) = start_with(sdk, Settings { posting, ..Default::default() }).await else { return };
    let uid = uid(&env.create("obj", json!({"spec": {"fail": "permanent"}})).await);
    // The cause is over (nothing left to retry), after exactly one attempt.
    let obj = env.wait_object("obj", "the creation to be processed", processed).await;
    assert_eq!(obj["status"]["attempts"], 1, "one attempt, not retried: {obj:#}");
    assert!(obj["status"].get("errors").is_none(), "no result: {obj:#}");
    env.wait_log("[default/obj] Handler 'errors' failed permanently: conformance: permanent failure").await;
    let line = env.controller().log().into_iter().find(|l| l.contains("[default/obj] Creation is processed:")).expect("logged");
    assert!(line.ends_with("; 1 failed."), "{line}");
    let failed = |e: &Value| {
        e["type"] == "Error"
            && e["reason"] == "Logging"
            && e["message"].as_str().is_some_and(|m| m.contains("Handler 'errors' failed permanently: conformance: permanent failure"))
    };
    env.wait_events(&uid, "an Error event about the failure", |events| events.iter().any(failed)).await;
    env.stop().await;
}

async fn unexpected_errors_are_retried_after_the_backoff_by_default(sdk: Sdk) {
    let Some(env) = start(sdk).await else { return };
    env.create("obj", json!({"spec": {"fail": "unexpected", "retriesBeforeSuccess": 1}})).await;
    let obj = env.wait_object("obj", "a retry in the progress record", |o| progress(o, "errors")["retries"] == 1).await;
    let message = progress(&obj, "errors")["message"].as_str().unwrap_or_default();
    assert!(message.contains("conformance: unexpected failure at retry 0"), "the error's text: {obj:#}");
    if sdk == Sdk::Python {
        assert!(message.contains("Traceback (most recent call last)"), "Python sends the traceback: {obj:#}");
    }
    if sdk == Sdk::TypeScript {
        assert!(message.contains("Error: conformance: unexpected failure at retry 0\n    at "), "TypeScript sends the stack: {obj:#}");
    }
    let obj = env.wait_object("obj", "the success after one retry", |o| processed(o) && o["status"]["errors"].is_object()).await;
    assert_eq!(obj["status"]["errors"], json!({"retry": 1}), "{obj:#}");
    assert_eq!(obj["status"]["attempts"], 2, "{obj:#}");
    env.wait_log("[default/obj] Handler 'errors' failed with an exception. Will retry.").await;
    env.wait_log("[default/obj] Handler 'errors' succeeded.").await;
    env.stop().await;
}

/// A handler that ends its own server mid-call (an OOM kill, a segfault, `os._exit`): the call
/// may have run, so it is an attempt, the handler's unexpected error. Once the server is back
/// (started again on its port) the handler is called again with `retry` 1, and an object
/// created meanwhile is handled as any.
async fn a_handler_that_kills_its_server_is_retried_once_it_is_back(sdk: Sdk) {
    let Some(mut env) = start(sdk).await else { return };
    env.create("obj", json!({"spec": {"crash": true}})).await;
    env.server.wait_output("conformance: crashing").await;
    env.server.restart_after_its_exit().await;
    env.create("other", json!({})).await;
    let obj = env.wait_object("obj", "the handler's success after the crash", |o| processed(o) && o["status"]["crash"].is_object()).await;
    assert_eq!(obj["status"]["crash"], json!({"retry": 1}), "{obj:#}");
    env.wait_log("[default/obj] Handler 'crash' failed with an exception. Will retry.").await;
    env.wait_log("the connection to the handler server was lost during the call").await;
    env.wait_object("other", "the other object's creation", processed).await;
    env.stop().await;
}

/// The server is started again with one handler more (`extra`): the controller serves the
/// resource anew without a restart; a new object gets the new handler, while an object whose
/// creation was processed before is not handled again.
async fn a_server_started_again_with_a_changed_registry_is_served_anew(sdk: Sdk) {
    let Some(mut env) = start(sdk).await else { return };
    env.create("before", json!({})).await;
    env.wait_object("before", "its creation to be processed", processed).await;
    env.server.restart_with(&[("CONFORMANCE_EXTRA", "yes")]).await;
    env.wait_log("The handlers of 'kopfexamples' changed; serving it anew.").await;
    env.create("after", json!({})).await;
    let after = env.wait_object("after", "the new handler's result", |o| processed(o) && o["status"]["extra"].is_object()).await;
    assert_eq!(after["status"]["extra"], json!({"message": "extra"}), "{after:#}");
    let before = env.wait_object("before", "the earlier object", |_| true).await;
    assert!(before["status"].get("extra").is_none(), "a processed creation is not handled again: {before:#}");
    let created = env.controller().count("[default/before] Handler 'create' succeeded.");
    assert_eq!(created, 1, "[{}] `create` ran once for `before`", sdk.name());
    env.stop().await;
}

async fn subhandlers_run_and_store_their_results(sdk: Sdk) {
    let Some(env) = start(sdk).await else { return };
    env.create("obj", json!({"spec": {"items": ["a", "b"]}})).await;
    let obj = env.wait_object("obj", "the creation to be processed", processed).await;
    assert_eq!(obj["status"]["subhandlers/a"], json!({"item": "a"}), "{obj:#}");
    assert_eq!(obj["status"]["subhandlers/b"], json!({"item": "b"}), "{obj:#}");
    assert!(obj["status"].get("subhandlers").is_none(), "the parent returns nothing: {obj:#}");
    for id in ["subhandlers/a", "subhandlers/b", "subhandlers"] {
        env.wait_log(&format!("[default/obj] Handler '{id}' succeeded.")).await;
    }
    env.stop().await;
}

async fn events_are_posted_about_the_object(sdk: Sdk) {
    let Some(env) = start(sdk).await else { return };
    let events = json!([
        {"type": "Normal", "reason": "ConformanceInfo", "message": "conformance: info"},
        {"type": "Warning", "reason": "ConformanceWarning", "message": "conformance: warning"},
    ]);
    let uid = uid(&env.create("obj", json!({"spec": {"events": events}})).await);
    let posted = env
        .wait_events(&uid, "both events", |posted| {
            posted.iter().filter(|e| e["reason"].as_str().is_some_and(|r| r.starts_with("Conformance"))).count() == 2
        })
        .await;
    for want in events.as_array().expect("a list") {
        let found = posted.iter().find(|e| e["reason"] == want["reason"]).expect("posted");
        assert_eq!((&found["type"], &found["message"]), (&want["type"], &want["message"]), "{found:#}");
        assert_eq!(found["involvedObject"]["kind"], "KopfExample", "{found:#}");
        assert_eq!(found["involvedObject"]["name"], "obj", "{found:#}");
    }
    env.stop().await;
}

async fn owned_objects_are_created_adopted_and_collected(sdk: Sdk) {
    let Some(env) = start(sdk).await else { return };
    let owner = env.create("obj", json!({"metadata": {"labels": {"app": "conformance"}}, "spec": {"child": {"key": "value"}}})).await;
    let uid = uid(&owner);
    let child_path = format!("/api/v1/namespaces/{NS}/configmaps/obj-configmap");
    let child = env.wait_get(&child_path, "the child ConfigMap", Option::is_some).await.expect("it exists");
    assert_eq!(child["data"], json!({"key": "value"}), "{child:#}");
    assert_eq!(child["metadata"]["labels"]["app"], "conformance", "the owner's labels are copied: {child:#}");
    let reference = json!([{
        "apiVersion": "kopf.dev/v1", "kind": "KopfExample", "name": "obj", "uid": uid,
        "controller": true, "blockOwnerDeletion": true,
    }]);
    assert_eq!(child["metadata"]["ownerReferences"], reference, "{child:#}");
    let obj = env.wait_object("obj", "the children in the result", |o| o["status"]["children"].is_object()).await;
    let child_uid = child["metadata"]["uid"].clone();
    assert_eq!(obj["status"]["children"], json!({"message": "child requested", "children": [child_uid]}), "{obj:#}");

    env.delete("obj").await;
    env.wait_gone("obj").await;
    env.wait_get(&child_path, "the child to be garbage-collected", Option::is_none).await;
    env.stop().await;
}

async fn timers_tick_and_patch_a_counter(sdk: Sdk) {
    let Some(env) = start(sdk).await else { return };
    env.create("obj", json!({"metadata": {"labels": {"conformance.bosun.dev/timer": "yes"}}})).await;
    env.create("plain", json!({})).await;
    env.wait_object("obj", "three ticks", |o| o["status"]["ticks"].as_u64() >= Some(3)).await;
    env.wait_log("[default/obj] Timer 'timer' succeeded.").await;
    let plain = env.wait_object("plain", "the creation to be processed", processed).await;
    assert!(plain["status"].get("ticks").is_none(), "the timer's label filter leaves other objects alone: {plain:#}");
    assert_eq!(env.controller().count("[default/plain] Timer"), 0);
    // The timer does not keep a deleted object.
    env.delete("obj").await;
    env.wait_gone("obj").await;
    env.stop().await;
}

async fn daemons_run_until_the_object_is_deleted(sdk: Sdk) {
    let Some(env) = start(sdk).await else { return };
    let uid = uid(&env.create("obj", json!({"metadata": {"labels": {"conformance.bosun.dev/daemon": "yes"}}})).await);
    env.wait_events(&uid, "the daemon's event", |events| events.iter().any(|e| e["reason"] == "DaemonStarted")).await;
    env.wait_log("[default/obj] conformance: daemon started").await;
    assert!(!env.server.output().iter().any(|l| l.contains("conformance: daemon stopped")), "it runs until told to stop");

    env.delete("obj").await;
    env.server.wait_output("conformance: daemon stopped for default/obj").await;
    env.wait_gone("obj").await;
    env.stop().await;
}

/// How much later than the event it follows the harness may read a server's line (a pipe and a
/// task between them).
const READ_LAG: Duration = Duration::from_millis(300);

const SILENT: &str = "conformance.bosun.dev/silent";

/// A daemon that has sent nothing yet (grpcio, grpc-js and grpc-go answer its call only with
/// its first message) holds its object's finalizer until it ended: asked to stop, its 1 s
/// wind-down is waited for.
async fn silent_daemons_hold_their_object_until_they_end(sdk: Sdk) {
    let Some(env) = start(sdk).await else { return };
    env.create("obj", json!({"metadata": {"labels": {SILENT: "yes"}}})).await;
    env.server.wait_output("conformance: silent daemon started for default/obj").await;
    env.delete("obj").await;
    env.wait_gone("obj").await;
    let gone = tokio::time::Instant::now();
    env.server.wait_output("conformance: silent daemon stopped for default/obj").await;
    let ended = env.server.output_at("conformance: silent daemon stopped for default/obj").expect("its line");
    if ended > gone + READ_LAG {
        env.fail(&format!("the object went {:?} before its daemon ended", ended - gone));
    }
    env.wait_log("[default/obj] Daemon 'silent' succeeded.").await;
    env.stop().await;
}

/// At a graceful stop, the controller waits for a daemon that has sent nothing yet to end.
async fn silent_daemons_end_before_the_controller_stops(sdk: Sdk) {
    let Some(mut env) = start(sdk).await else { return };
    env.create("obj", json!({"metadata": {"labels": {SILENT: "yes"}}})).await;
    env.server.wait_output("conformance: silent daemon started for default/obj").await;
    let log = env.stop_controller().await;
    let stopped = tokio::time::Instant::now();
    let ended = env.server.output_at("conformance: silent daemon stopped for default/obj");
    assert!(
        ended.is_some_and(|at| at <= stopped + READ_LAG),
        "[{}] the controller stopped before its daemon ended: {:?}",
        sdk.name(),
        env.server.output()
    );
    assert!(
        log.iter().any(|l| l.contains("[default/obj] Daemon 'silent' succeeded.")),
        "[{}] its end is seen:\n{}",
        sdk.name(),
        log.join("\n")
    );
    env.stop().await;
}

/// A leader that stops hands its objects over only once their daemons ended, silent ones too:
/// the next leader's instance starts after the first one's end, never beside it.
async fn silent_daemons_end_before_their_replica_hands_over(sdk: Sdk) {
    use bosun_controller::coordination::{LeaseSetup, Replicas};
    let lease = LeaseSetup { name: "conformance".into(), namespace: NS.into(), duration: Duration::from_secs(15) };
    let settings = Settings { identity: Some("a".into()), replicas: Replicas::LeaderElection(lease), ..Settings::default() };
    let Some(mut env) = start_with(sdk, settings).await else { return };
    env.create("obj", json!({"metadata": {"labels": {SILENT: "yes"}}})).await;
    env.server.wait_output("conformance: silent daemon started for default/obj").await;
    let b = env.start_replica("b");
    b.wait_log("The leader is a", DEADLINE).await;
    env.stop_controller().await;
    wait_for("the second instance", DEADLINE, || {
        let n = env.server.output().iter().filter(|l| l.contains("conformance: silent daemon started for default/obj")).count();
        async move { n == 2 }
    })
    .await
    .unwrap_or_else(|e| env.fail(&e.to_string()));
    let output = env.server.output();
    let first_end = output.iter().position(|l| l.contains("conformance: silent daemon stopped for default/obj"));
    let second = output.iter().rposition(|l| l.contains("conformance: silent daemon started for default/obj"));
    if !matches!((first_end, second), (Some(e), Some(s)) if e < s) {
        env.fail("the next leader started the daemon while the first instance still ran");
    }
    b.stop().await;
    env.stop().await;
}

/// A daemon's patches land while its replica holds the Lease, and none lands once another
/// holder took it: neither the beats it goes on sending (Rust and Go stream them) until it is
/// stopped, nor the patch it sends as it ends (every SDK; Python's and TypeScript's daemons send
/// their patch only then).
async fn a_daemons_patches_stop_landing_when_its_replica_loses_the_lease(sdk: Sdk) {
    use bosun_controller::coordination::{LeaseSetup, Replicas};
    use k8s_openapi::api::coordination::v1::Lease;
    use kube::api::{Api, Patch, PatchParams};
    let lease = LeaseSetup { name: "conformance".into(), namespace: NS.into(), duration: Duration::from_secs(15) };
    let settings = Settings { identity: Some("a".into()), replicas: Replicas::LeaderElection(lease), ..Settings::default() };
    let Some(env) = start_with(sdk, settings).await else { return };
    env.wait_log("Became the leader").await;
    env.create("obj", json!({"metadata": {"labels": {"conformance.bosun.dev/patcher": "yes"}}})).await;
    env.server.wait_output("conformance: patcher started for default/obj").await;
    if matches!(sdk, Sdk::Rust | Sdk::Go) {
        env.wait_object("obj", "a streamed beat", |o| o["status"]["beats"].as_u64() >= Some(3)).await;
    }
    // Another holder takes the Lease, as a replica would whose clock says it expired.
    let now = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string();
    let taken = json!({"spec": {"holderIdentity": "intruder", "leaseDurationSeconds": 3600, "acquireTime": now, "renewTime": now}});
    Api::<Lease>::namespaced(env.client.clone(), NS)
        .patch("conformance", &PatchParams::default(), &Patch::Merge(&taken))
        .await
        .expect("the Lease is taken");
    env.wait_log("The leader is intruder; following").await;
    let beats = env.wait_object("obj", "the object", |_| true).await["status"]["beats"].clone();
    env.server.wait_output("conformance: patcher stopped for default/obj").await;
    env.wait_log("[default/obj] Daemon 'patcher' succeeded.").await;
    let after = env.wait_object("obj", "the object", |_| true).await;
    if after["status"]["patcher"] == "stopped" {
        env.fail("the daemon's patch at its end landed after its replica lost the Lease");
    }
    if after["status"]["beats"] != beats {
        env.fail(&format!("beats landed after the Lease was lost: {} then {}", beats, after["status"]["beats"]));
    }
    env.stop().await;
}

async fn startup_activities_run_and_retry_before_any_handler(sdk: Sdk) {
    let Some(env) = start(sdk).await else { return };
    env.create("obj", json!({})).await;
    let obj = env.wait_object("obj", "the create result", |o| o["status"]["create"].is_object()).await;
    assert_eq!(obj["status"]["create"]["startup"], 1, "the startup activity succeeded at retry 1, before the handler ran: {obj:#}");
    env.wait_log("Activity 'startup' failed temporarily: conformance: startup not ready at retry 0").await;
    let log = env.controller().log();
    let position = |text: &str| log.iter().position(|l| l.contains(text));
    let started = position("Activity 'startup' succeeded.").expect("logged");
    assert!(position("conformance: startup ran").is_some_and(|p| p < started), "its log line comes with its answer");
    assert!(position("Handler 'create' succeeded.").is_some_and(|p| p > started), "no handler before the startup succeeded");
    env.stop().await;
}

async fn probes_answer_on_the_liveness_endpoint(sdk: Sdk) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
    let settings = Settings { liveness: Some(format!("http://127.0.0.1:{port}/healthz")), ..Default::default() };
    let Some(env) = start_with(sdk, settings).await else { return };
    let deadline = tokio::time::Instant::now() + DEADLINE;
    let (status, body) = loop {
        match http_get(port, "/healthz").await {
            Ok(answer) => break answer,
            Err(e) if tokio::time::Instant::now() >= deadline => env.fail(&format!("the liveness endpoint did not answer: {e}")),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    assert_eq!(status, 200, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"));
    assert_eq!(body, json!({"probe": {"alive": true}}));
    env.stop().await;
}

async fn cleanup_activities_run_when_the_controller_stops(sdk: Sdk) {
    let Some(mut env) = start(sdk).await else { return };
    env.wait_log("Activity 'startup' succeeded.").await;
    let log = env.stop_controller().await;
    let position = |text: &str| log.iter().position(|l| l.contains(text));
    let cleaned = position("Activity 'cleanup' succeeded.").unwrap_or_else(|| panic!("no cleanup in the log:\n{}", log.join("\n")));
    assert!(position("conformance: cleanup ran").is_some_and(|p| p < cleaned), "its log line comes with its answer:\n{}", log.join("\n"));
    env.stop().await;
}

/// Where the contract leaves room, every SDK answers alike: a `Handle` call for a handler the
/// server does not have is gRPC's NOT_FOUND, naming the handlers it has.
async fn an_unknown_handler_id_is_not_found_naming_the_known_ones(sdk: Sdk) {
    use bosun_proto::v1 as pb;
    let Some(env) = start(sdk).await else { return };
    let mut client =
        pb::handler_server_client::HandlerServerClient::connect(env.server.url().to_string()).await.expect("the server answers");
    let object =
        serde_json::to_vec(&json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "obj", "namespace": NS}}))
            .unwrap();
    let request =
        pb::HandleRequest { handler_id: "no-such-handler".into(), object, reason: pb::Reason::Create as i32, ..Default::default() };
    let status = client.handle(request).await.expect_err("no such handler");
    assert_eq!(status.code(), tonic::Code::NotFound, "{status:?}");
    let message = status.message();
    assert!(message.contains(r#"has no handler "no-such-handler"; it has: "#) && message.contains("create"), "{message}");
    env.stop().await;
}

/// A plain HTTP/1.1 GET on loopback: the status code and the body.
async fn http_get(port: u16, path: &str) -> std::io::Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    stream.write_all(format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").as_bytes()).await?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await?;
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    Ok((status, body.to_string()))
}
