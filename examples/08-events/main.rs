//! Kopf's 08-events: "spy" handlers for raw watch events. They are called for every event,
//! including the initial listing; nothing is stored on the object, and a failure is only logged.

use bosun_sdk::{Cause, HandlerError, Operator};
use serde_json::json;

const KOPFEXAMPLES: &str = "kopf.dev/v1/kopfexamples";

/// Always fails: the controller logs it and carries on.
async fn event_fn_with_error(_: Cause) -> Result<(), HandlerError> {
    Err(HandlerError::unexpected("Oops!"))
}

/// Logs the raw event: its type (`None` for the initial listing) and the object.
async fn normal_event_fn(cause: Cause) -> Result<(), HandlerError> {
    let event = json!({"type": cause.event_type(), "object": cause.body()});
    cause.info(format!("Event received: {event}"));
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), bosun_sdk::ServeError> {
    Operator::new().on_event(KOPFEXAMPLES, event_fn_with_error).on_event(KOPFEXAMPLES, normal_event_fn).serve_default().await
}
