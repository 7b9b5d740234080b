//! Kopf's 09-testing example: a creation handler that only logs a line.

use bosun_sdk::{Cause, HandlerError, Operator};

async fn create_fn(cause: Cause) -> Result<(), HandlerError> {
    cause.info("Something was logged here.");
    Ok(())
}

/// The example's handlers.
pub fn operator() -> Operator {
    Operator::new().on_create("kopf.dev/v1/kopfexamples", create_fn)
}
