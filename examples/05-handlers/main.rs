//! Kopf's 05-handlers: several handlers per cause, run in the order of registration, and a
//! field handler called only when `spec.field` changes, with its old and new values.

use bosun_sdk::{Cause, HandlerError, Operator};

const KOPFEXAMPLES: &str = "kopf.dev/v1/kopfexamples";

async fn resume_fn_1(cause: Cause) -> Result<(), HandlerError> {
    cause.info("RESUMED 1st");
    Ok(())
}

async fn create_fn_1(cause: Cause) -> Result<(), HandlerError> {
    cause.info("CREATED 1st");
    Ok(())
}

async fn resume_fn_2(cause: Cause) -> Result<(), HandlerError> {
    cause.info("RESUMED 2nd");
    Ok(())
}

async fn create_fn_2(cause: Cause) -> Result<(), HandlerError> {
    cause.info("CREATED 2nd");
    Ok(())
}

async fn update_fn(cause: Cause) -> Result<(), HandlerError> {
    cause.info(format!("UPDATED: {} change(s)", cause.diff().len()));
    Ok(())
}

async fn delete_fn_1(cause: Cause) -> Result<(), HandlerError> {
    cause.info("DELETED 1st");
    Ok(())
}

async fn delete_fn_2(cause: Cause) -> Result<(), HandlerError> {
    cause.info("DELETED 2nd");
    Ok(())
}

/// Its id is `field_fn/spec.field`, as in Kopf.
async fn field_fn(cause: Cause) -> Result<(), HandlerError> {
    // Values as JSON, an absent one as `None` (Kopf prints Python values).
    let show = |v: Option<&serde_json::Value>| v.map_or("None".to_string(), |v| v.to_string());
    cause.info(format!("FIELD CHANGED: {} -> {}", show(cause.old()), show(cause.new())));
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), bosun_sdk::ServeError> {
    Operator::new()
        .on_resume(KOPFEXAMPLES, resume_fn_1)
        .on_create(KOPFEXAMPLES, create_fn_1)
        .on_resume(KOPFEXAMPLES, resume_fn_2)
        .on_create(KOPFEXAMPLES, create_fn_2)
        .on_update(KOPFEXAMPLES, update_fn)
        .on_delete(KOPFEXAMPLES, delete_fn_1)
        .on_delete(KOPFEXAMPLES, delete_fn_2)
        .on_field(KOPFEXAMPLES, "spec.field", field_fn)
        .serve_default()
        .await
}
