//! Kopf's 17-admission: validating and mutating admission handlers. The controller serves
//! the webhooks over HTTPS with a certificate of its own and configures the API server to
//! call them (a Validating- and a MutatingWebhookConfiguration named `auto.bosun.dev`); on
//! the embedded dev cluster, `kubectl apply` of a bad object is refused with the handler's
//! message, and the mutating handler's defaults are stored with the object.
//!
//! Kopf's startup handler chooses a webhook server (local, K3d, Minikube, ngrok); here the
//! controller's flags do that (`--admission-listen`, `--admission-url`,
//! `--admission-service`, `--admission-cert`), so there is no startup handler.

use bosun_sdk::{Cause, HandlerError, Operator, PermanentError};

const KOPFEXAMPLES: &str = "kopf.dev/v1/kopfexamples";

/// Says who is asking, as a warning the client prints (Kopf's example reads the User-Agent
/// and the TLS peer, which the controller does not pass on: it reads the request's user).
async fn authhook(cause: Cause) -> Result<(), HandlerError> {
    let user = cause.admission_request().and_then(|r| r["userInfo"]["username"].as_str()).unwrap_or("(unidentified)");
    cause.admission_warning(format!("Accessing as user: {user}"));
    Ok(())
}

/// Refuses `spec.field: wrong`, except in a dry run.
async fn validate1(cause: Cause) -> Result<(), HandlerError> {
    if !cause.dry_run() && cause.spec()["field"] == "wrong" {
        return Err(PermanentError::new("Meh! I don't like it. Change the field.").into());
    }
    Ok(())
}

/// Called only when `spec.field` is `not-allowed` (a field filter): refuses with code 555.
async fn validate2(_cause: Cause) -> Result<(), HandlerError> {
    Err(PermanentError::new("I'm too lazy anyway. Go away!").code(555).into())
}

/// For objects labelled `somelabel=somevalue`: fills `spec.injected`.
async fn mutate1(cause: Cause) -> Result<(), HandlerError> {
    cause.patch().spec("injected", 123);
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), bosun_sdk::ServeError> {
    Operator::new()
        .on_validate(KOPFEXAMPLES, authhook)
        .id("authhook")
        .on_validate(KOPFEXAMPLES, validate1)
        .id("validate1")
        .fail_closed()
        .on_validate(KOPFEXAMPLES, validate2)
        .id("validate2")
        .field("spec.field")
        .value("not-allowed")
        .on_mutate(KOPFEXAMPLES, mutate1)
        .id("mutate1")
        .label("somelabel", "somevalue")
        .serve_default()
        .await
}
