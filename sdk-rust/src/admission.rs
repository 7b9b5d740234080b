//! Admission handlers (Kopf's `@kopf.on.validate` and `@kopf.on.mutate`): the controller's
//! webhook forwards each AdmissionReview request through `Admit`; a validating handler allows
//! by returning `Ok` and denies with an error (its message is shown to the user); a mutating
//! handler may also patch the object with [`Cause::patch`].

use std::future::Future;

use bosun_proto::v1 as pb;
use serde::Serialize;
use tonic::Status;

use crate::cause::Cause;
use crate::dispatch::{Dispatcher, run};
use crate::error::HandlerError;
use crate::operator::Operator;

impl Operator {
    /// Registers a validating admission handler: `Ok` allows, an error denies.
    pub fn on_validate<F, Fut, T>(self, resource: &str, f: F) -> Self
    where
        F: Fn(Cause) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, HandlerError>> + Send + 'static,
        T: Serialize + 'static,
    {
        self.register(pb::HandlerKind::Validate, Some(resource), None, f)
    }

    /// Registers a mutating admission handler: like a validating one, and its patch is applied
    /// to the object under review.
    pub fn on_mutate<F, Fut, T>(self, resource: &str, f: F) -> Self
    where
        F: Fn(Cause) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, HandlerError>> + Send + 'static,
        T: Serialize + 'static,
    {
        self.register(pb::HandlerKind::Mutate, Some(resource), None, f)
    }

    /// For admission handlers: review only these operations (`CREATE`, `UPDATE`, `DELETE`,
    /// `CONNECT`; default all).
    pub fn operations<'a>(self, operations: impl IntoIterator<Item = &'a str>) -> Self {
        let operations: Vec<String> = operations.into_iter().map(String::from).collect();
        self.with("operations", |h| h.admission.get_or_insert_default().operations = operations)
    }

    /// For admission handlers: review these subresources (for example `status`) instead of the
    /// main resource.
    pub fn subresources<'a>(self, subresources: impl IntoIterator<Item = &'a str>) -> Self {
        let subresources: Vec<String> = subresources.into_iter().map(String::from).collect();
        self.with("subresources", |h| h.admission.get_or_insert_default().subresources = subresources)
    }

    /// For admission handlers: the handler has side effects (the webhook's `sideEffects`).
    pub fn side_effects(self) -> Self {
        self.with("side_effects", |h| h.admission.get_or_insert_default().side_effects = true)
    }

    /// For admission handlers: deny requests when the handler fails or cannot be reached.
    pub fn fail_closed(self) -> Self {
        self.with("fail_closed", |h| h.admission.get_or_insert_default().fail_closed = true)
    }
}

impl Dispatcher {
    /// Reviews one admission request, as `Admit` does.
    pub async fn admit(&self, request: pb::AdmitRequest) -> Result<pb::AdmitResponse, Status> {
        let handler = self.admission_handler(&request.handler_id)?;
        let review: serde_json::Value = serde_json::from_slice(&request.request)
            .map_err(|e| Status::invalid_argument(format!("field `request` of the request is not valid JSON: {e}")))?;
        let cause = Cause::from_admission(&handler.id, review);
        let ran = run(&handler.func, &cause).await;
        let allowed = ran.outcome == pb::Outcome::Success;
        let patch = cause.patched();
        let merge_patch = match handler.kind {
            pb::HandlerKind::Mutate if allowed && !patch.is_empty() => crate::json::encode(&patch.merge_patch()),
            _ => Vec::new(),
        };
        let warnings = std::mem::take(&mut cause.outputs.lock().warnings);
        Ok(pb::AdmitResponse { allowed, message: ran.message, code: ran.code, merge_patch, warnings })
    }
}
