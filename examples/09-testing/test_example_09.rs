//! Kopf's 09-testing: handler servers tested end to end with `bosun_sdk::testing::Runner`,
//! which runs the dev cluster, the handler server and the controller inside the test.

mod example;

/// Example 01, to check the result it stores.
#[allow(dead_code)] // its `main` is not used here
#[path = "../01-minimal/main.rs"]
mod minimal;

use std::path::{Path, PathBuf};
use std::time::Duration;

use bosun_sdk::testing::Runner;

const TIMEOUT: Duration = Duration::from_secs(20);

fn file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(name)
}

#[tokio::test]
async fn test_resource_lifecycle() -> anyhow::Result<()> {
    let runner = Runner::start(example::operator()).await?;
    runner.apply_file(file("crd.yaml")).await?;

    runner.apply_file(file("obj.yaml")).await?;
    runner.wait_log("Handler 'create_fn' succeeded.", TIMEOUT).await?;
    runner.delete_file(file("obj.yaml")).await?;
    runner.wait_gone("kex/kopf-example-1", TIMEOUT).await?;

    let output = runner.output();
    runner.stop().await?; // the controller exited cleanly

    assert!(output.contains("[default/kopf-example-1] Something was logged here."), "{output}");
    assert!(!output.contains("failed permanently"), "{output}");
    assert!(!output.contains("failed temporarily"), "{output}");
    Ok(())
}

#[tokio::test]
async fn the_minimal_example_stores_its_result_in_the_status() -> anyhow::Result<()> {
    let runner = Runner::start(minimal::operator()).await?;
    runner.apply_file(file("crd.yaml")).await?;
    runner.apply_file(file("obj.yaml")).await?;

    let object = runner.wait_for("kex/kopf-example-1", |o| o["status"]["create_fn"]["message"] == "hello world", TIMEOUT).await?;
    runner.wait_log("Handler 'create_fn' succeeded.", TIMEOUT).await?;
    assert_eq!(runner.count_logs("Handler 'create_fn' succeeded."), 1, "{}", runner.output());
    assert_eq!(object["spec"]["field"], "value");

    runner.stop().await?;
    Ok(())
}
