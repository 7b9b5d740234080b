//! The README's Rust SDK snippet, kept compiling (and its Describe checked) so the README
//! stays true.

use bosun_sdk::{Cause, HandlerError, Operator, TemporaryError};
use serde_json::{Value, json};

async fn create_fn(cause: Cause) -> Result<Value, HandlerError> {
    cause.info(format!("Creating {}", cause.name()));
    if cause.spec()["field"].is_null() {
        return Err(TemporaryError::new("no field yet").delay(std::time::Duration::from_secs(10)).into());
    }
    Ok(json!({"message": "hello world"})) // stored at status.create_fn
}

fn operator() -> Operator {
    Operator::new()
        .on_create("kopf.dev/v1/kopfexamples", create_fn)
        .on_field("kopf.dev/v1/kopfexamples", "spec.field", |c: Cause| async move {
            c.info(format!("{:?} -> {:?}", c.old(), c.new()));
            Ok::<_, HandlerError>(())
        })
        .label("app", "web")
}

#[tokio::test]
async fn readme_snippet_registers_a_create_and_a_filtered_field_handler() {
    let described = operator().into_dispatcher().expect("valid registrations").describe();
    let ids: Vec<&str> = described.handlers.iter().map(|h| h.id.as_str()).collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert!(ids[1].ends_with("/spec.field"), "field handler ids end with the field: {ids:?}");
    let labels = &described.handlers[1].filters.as_ref().expect("filters").labels;
    assert!(labels.contains_key("app"), "the label filter is registered: {labels:?}");
}
