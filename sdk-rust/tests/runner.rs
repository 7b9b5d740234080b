//! The testing harness itself: dev cluster + controller + handler server in one test process.
//! Needs the `testing` feature: `cargo test -p bosun-sdk --features testing`.

use std::time::Duration;

use bosun_sdk::testing::{Error, Runner};
use bosun_sdk::{Cause, Operator};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(20);

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: kopfexamples.kopf.dev
spec:
  scope: Namespaced
  group: kopf.dev
  names: {kind: KopfExample, plural: kopfexamples, singular: kopfexample, shortNames: [kex]}
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
            status: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

fn object(name: &str, field: &str) -> String {
    format!("apiVersion: kopf.dev/v1\nkind: KopfExample\nmetadata:\n  name: {name}\nspec:\n  field: {field}\n")
}

fn operator() -> Operator {
    Operator::new()
        .on_create("kopf.dev/v1/kopfexamples", |cause: Cause| async move {
            cause.info(format!("created with {}", cause.spec()["field"]));
            cause.patch().label("handled", "yes");
            Ok(json!({"seen": cause.spec()["field"]}))
        })
        .id("create_fn")
}

#[tokio::test]
async fn applied_objects_are_handled_and_their_results_awaited() -> Result<(), Error> {
    let runner = Runner::start(operator()).await?;
    let applied = runner.apply(&format!("{CRD}---\n{}---\n{}", object("one", "a"), object("two", "b"))).await?;
    assert_eq!(applied.len(), 3);

    for (target, field) in [("kex/one", "a"), ("kopfexamples.kopf.dev/two", "b")] {
        // The result goes in the status write and the label in the main write after it: both are awaited.
        let handled = runner
            .wait_for(target, |o| o["status"]["create_fn"]["seen"] == field && o["metadata"]["labels"]["handled"] == "yes", TIMEOUT)
            .await?;
        assert_eq!(handled["metadata"]["labels"]["handled"], "yes");
    }
    runner.wait_log("[default/two] created with \"b\"", TIMEOUT).await?;
    assert_eq!(runner.count_logs("Handler 'create_fn' succeeded."), 2, "{}", runner.output());
    runner.stop().await
}

#[tokio::test]
async fn applying_again_patches_and_keeps_what_the_controller_wrote() -> Result<(), Error> {
    let runner = Runner::start(operator()).await?;
    runner.apply(CRD).await?;
    runner.apply(&object("one", "a")).await?;
    runner.wait_for("kex/one", |o| o["status"]["create_fn"]["seen"] == "a" && o["metadata"]["labels"]["handled"] == "yes", TIMEOUT).await?;

    runner.apply(&object("one", "changed")).await?;
    let object = runner.get("KopfExample/one").await?.expect("the object exists");
    assert_eq!(object["spec"]["field"], "changed");
    assert_eq!(object["metadata"]["labels"]["handled"], "yes");
    runner.stop().await
}

#[tokio::test]
async fn waiting_in_vain_fails_with_what_was_seen_last() -> Result<(), Error> {
    let runner = Runner::start(operator()).await?;
    runner.apply(CRD).await?;
    runner.apply(&object("one", "a")).await?;

    let error = runner.wait_for("kex/one", |_| false, Duration::from_millis(200)).await.unwrap_err();
    assert!(matches!(&error, Error::Timeout { last, .. } if last.contains("\"field\":\"a\"")), "{error}");
    let error = runner.wait_log("never logged", Duration::from_millis(200)).await.unwrap_err();
    assert!(error.to_string().contains("the log's last lines"), "{error}");
    runner.stop().await
}

#[tokio::test]
async fn deleted_objects_are_awaited_until_gone_and_absent_ones_are_fine() -> Result<(), Error> {
    let runner = Runner::start(operator()).await?;
    runner.apply(CRD).await?;
    runner.apply(&object("one", "a")).await?;
    runner.delete(&object("one", "a")).await?;
    runner.wait_gone("kex/one", TIMEOUT).await?;
    runner.delete(&object("one", "a")).await?;
    assert_eq!(runner.get("kex/one").await?, None);
    runner.stop().await
}

#[tokio::test]
async fn unknown_resources_and_bad_targets_are_clear_errors() -> Result<(), Error> {
    let runner = Runner::start(operator()).await?;
    let table = [("nothings/x", "no resource named nothings is served"), ("kex", "invalid target \"kex\"")];
    for (target, expected) in table {
        let error = runner.get(target).await.unwrap_err().to_string();
        assert!(error.contains(expected), "{target}: {error}");
    }
    runner.stop().await
}

#[tokio::test]
async fn invalid_handlers_fail_before_anything_starts() {
    let error = Runner::start(Operator::new()).await.unwrap_err();
    assert!(matches!(error, Error::Registry(_)), "{error}");
}

#[tokio::test]
async fn sub_handlers_run_through_the_controller_with_their_parameters() -> Result<(), Error> {
    let operator = Operator::new()
        .on_create("kopf.dev/v1/kopfexamples", |cause: Cause| async move {
            cause.subhandler("a", json!({"n": 1}));
            cause.subhandler("b", json!({"n": 2}));
            Ok(())
        })
        .id("parent")
        .subhandlers(|cause: Cause| async move { Ok(json!({"child": cause.subhandler_id(), "n": cause.param().unwrap()["n"]})) });
    let runner = Runner::start(operator).await?;
    runner.apply(CRD).await?;
    runner.apply(&object("one", "a")).await?;

    runner.wait_log("[default/one] Creation is processed: 1 succeeded", TIMEOUT).await?;
    for child in ["parent/a", "parent/b"] {
        assert_eq!(runner.count_logs(&format!("Handler '{child}' succeeded.")), 1, "{}", runner.output());
    }
    let object = runner.wait_for("kex/one", |o| !o["status"]["parent/b"].is_null(), TIMEOUT).await?;
    assert_eq!(object["status"]["parent/a"], json!({"child": "a", "n": 1}));
    runner.stop().await
}

#[tokio::test]
async fn a_deleted_objects_daemon_is_stopped_on_request_and_its_end_is_seen_before_the_object_goes() -> Result<(), Error> {
    let operator = Operator::new()
        .on_daemon("kopf.dev/v1/kopfexamples", |cause: Cause| async move {
            cause.info("watching");
            cause.stopped().wait().await;
            // The wind-down is seen: its line, its patch (the object still exists), its end.
            tokio::time::sleep(Duration::from_millis(300)).await;
            cause.patch().annotation("wound-down", "yes");
            cause.info("cleaned up");
            Ok(())
        })
        .id("watch_fn");
    let runner = Runner::start(operator).await?;
    runner.apply(CRD).await?;
    runner.apply(&object("one", "a")).await?;
    runner.wait_log("[default/one] watching", TIMEOUT).await?;
    runner.delete(&object("one", "a")).await?;
    runner.wait_log("[default/one] Daemon 'watch_fn' is signalled to exit gracefully.", TIMEOUT).await?;
    runner.wait_gone("kex/one", TIMEOUT).await?;
    let output = runner.output();
    let order: Vec<usize> = ["[default/one] cleaned up", "[default/one] Daemon 'watch_fn' succeeded.", "has exited on request"]
        .iter()
        .map(|line| output.find(line).unwrap_or_else(|| panic!("{line}: {output}")))
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{output}");
    assert_eq!(runner.count_logs("could not patch"), 0, "{output}");
    runner.stop().await
}
