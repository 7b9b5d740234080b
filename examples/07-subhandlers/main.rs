//! Kopf's 07-subhandlers: a handler that decides at run time which sub-handlers to run, one per
//! item of `spec.items`; the controller tracks, retries and reports each as `create_fn/<item>`.

use bosun_sdk::{Cause, HandlerError, Operator};
use serde_json::Value;

/// Declares one sub-handler per item; it has no side effects of its own, since it is called
/// again until all its sub-handlers are finished.
async fn create_fn(cause: Cause) -> Result<(), HandlerError> {
    for item in cause.spec()["items"].as_array().into_iter().flatten() {
        if let Some(id) = item.as_str() {
            cause.subhandler(id, item.clone());
        }
    }
    Ok(())
}

/// Runs each sub-handler: `create_fn/item1`, `create_fn/item2`.
async fn create_item_fn(cause: Cause) -> Result<(), HandlerError> {
    let item = cause.param().and_then(Value::as_str).unwrap_or_default();
    cause.info(format!("=== Handling creation for {item}. ==="));
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), bosun_sdk::ServeError> {
    Operator::new().on_create("kopf.dev/v1/kopfexamples", create_fn).subhandlers(create_item_fn).serve_default().await
}
