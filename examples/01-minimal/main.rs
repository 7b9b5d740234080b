//! Kopf's 01-minimal: the least code for a working handler server. One creation handler,
//! `create_fn`, whose result `{"message": "hello world"}` is stored at `status.create_fn`.

use bosun_sdk::{Cause, HandlerError, Operator};
use serde_json::{Value, json};

/// The handler's id is its name, `create_fn`, as in Kopf.
async fn create_fn(cause: Cause) -> Result<Value, HandlerError> {
    cause.info(format!("And here we are! Creating: {}", cause.spec()));
    Ok(json!({"message": "hello world"})) // will be the new status.create_fn
}

/// The example's handlers (also used by the tests in `09-testing`).
pub fn operator() -> Operator {
    Operator::new().on_create("kopf.dev/v1/kopfexamples", create_fn)
}

#[tokio::main]
async fn main() -> Result<(), bosun_sdk::ServeError> {
    operator().serve_default().await
}
