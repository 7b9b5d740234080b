//! Kopf's 03-exceptions: handlers that fail in every way a handler can, and how the controller
//! retries them (temporary errors, retries and backoff, errors mode) or gives up (permanent).

use std::time::Duration;

use bosun_sdk::{Cause, ErrorsMode, HandlerError, Operator, PermanentError, TemporaryError};

const KOPFEXAMPLES: &str = "kopf.dev/v1/kopfexamples";

/// An arbitrary error of the handler's own: neither temporary nor permanent, so the handler's
/// errors mode decides what it means.
#[derive(Debug)]
struct MyException(&'static str);

impl std::fmt::Display for MyException {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for MyException {}

/// Fails permanently on the first attempt: never retried.
async fn instant_failure_with_only_a_message(_: Cause) -> Result<(), HandlerError> {
    Err(PermanentError::new("Fail once and for all."))?
}

/// Fails temporarily three times, one second apart, then succeeds.
async fn eventual_success_with_a_few_messages(cause: Cause) -> Result<(), HandlerError> {
    if cause.retry() < 3 {
        // 0, 1, 2: fail; 3: succeed.
        Err(TemporaryError::new("Expected recoverable error.").delay(Duration::from_secs(1)))?
    }
    Ok(())
}

/// Fails unexpectedly every time: retried after the backoff until 3 attempts are used up.
async fn eventual_failure_with_tracebacks(_: Cause) -> Result<(), HandlerError> {
    Err(MyException("An error that is supposed to be recoverable."))?
}

/// Fails unexpectedly, but its errors mode is permanent: never retried.
async fn instant_failure_with_traceback(_: Cause) -> Result<(), HandlerError> {
    Err(MyException("An error that is supposed to be recoverable."))?
}

/// The example's handlers.
fn operator() -> Operator {
    Operator::new()
        .on_create(KOPFEXAMPLES, instant_failure_with_only_a_message)
        .on_create(KOPFEXAMPLES, eventual_success_with_a_few_messages)
        .on_create(KOPFEXAMPLES, eventual_failure_with_tracebacks)
        .retries(3)
        .backoff(Duration::from_secs(1))
        .on_create(KOPFEXAMPLES, instant_failure_with_traceback)
        .errors(ErrorsMode::Permanent)
        .backoff(Duration::from_secs(1))
}

#[tokio::main]
async fn main() -> Result<(), bosun_sdk::ServeError> {
    operator().serve_default().await
}
