//! Kopf's 04-events: a handler posting Kubernetes events about the object it handles.

use bosun_sdk::{Cause, HandlerError, Operator};

async fn create_fn(cause: Cause) -> Result<(), HandlerError> {
    // The all-purpose way to post an event, of any type.
    cause.event("SomeType", "SomeReason", "Some message");

    // The shortcuts for the conventional types.
    cause.info_event("SomeReason", "Some message");
    cause.warn_event("SomeReason", "Some message");

    // An error's text appended to the message, as an `Error` event.
    let error = std::io::Error::other("Exception text.");
    cause.exception_event("SomeReason", "Some exception:", &error);
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), bosun_sdk::ServeError> {
    Operator::new().on_create("kopf.dev/v1/kopfexamples", create_fn).serve_default().await
}
