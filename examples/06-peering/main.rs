//! Kopf's 06-peering: the handlers are nothing special (one creation handler); what the
//! example shows is the controller's peering. Run it twice against one cluster with the
//! peering objects applied (`deploy/peering.yaml`): both warn about a peer of the same
//! priority and pause; give one `--dev` (priority 666) and the other pauses in its favour,
//! resuming when it stops; `bosun freeze --lifetime 60` / `bosun resume` pause and resume them
//! all by hand, as `kopf freeze` / `kopf resume` do.

use bosun_sdk::{Cause, HandlerError, Operator};
use serde_json::Value;

async fn create_fn(_cause: Cause) -> Result<Value, HandlerError> {
    Ok(Value::Null)
}

/// The example's handlers.
pub fn operator() -> Operator {
    Operator::new().on_create("kopf.dev/v1/kopfexamples", create_fn)
}

#[tokio::main]
async fn main() -> Result<(), bosun_sdk::ServeError> {
    operator().serve_default().await
}
