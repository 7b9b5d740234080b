//! The admission webhook endpoint (issue 13): HTTPS, one path per handler (`POST /<id>` with
//! an AdmissionReview), each review sent to its handler server through `Admit` and answered
//! as `state::admission` decides. And the certificate it serves with: when no certificate
//! files are given, the controller makes a CA of its own and a serving certificate for the
//! names the API server reaches it by: the Service's DNS names (`--admission-service
//! NS/NAME`) or, in development, the loopback names; the CA goes into the webhook
//! configurations' `caBundle`. The certificates are made by the dev cluster's `tls` module,
//! which makes its own the same way.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bosun_proto::v1 as pb;
use serde_json::Value;

pub use bosun_devcluster::tls::{Error as TlsError, Tls};

use super::dispatch::Servers;
use crate::logs::Logger;
use crate::object;
use crate::state::admission::{self as decide, Answer, BadReview, Request};
use crate::state::registry::Handler;

/// Reviews admission requests with the registered validating and mutating handlers.
pub struct Reviewer {
    /// The admission handlers, with their resources resolved to (group, version, plural).
    handlers: Vec<(Handler, (String, String, String))>,
    servers: Servers,
    log: Logger,
}

/// Why a webhook call gets no review (an HTTP error, not a denial).
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The body is no AdmissionReview.
    #[error("{0}")]
    Bad(#[from] BadReview),
    /// No admission handler has this path.
    #[error("no admission handler is served at /{0}")]
    Unknown(String),
}

impl Reviewer {
    /// A reviewer of `handlers` (the admission ones are kept) on `servers`.
    pub fn new(handlers: Vec<(Handler, (String, String, String))>, servers: Servers, log: Logger) -> Reviewer {
        Reviewer { handlers: handlers.into_iter().filter(|(h, _)| h.is_admission()).collect(), servers, log }
    }

    /// The AdmissionReview answered for `review`, sent to the endpoint of handler `id`.
    pub async fn review(&self, id: &str, review: &Value) -> Result<Value, Refusal> {
        let req = Request::parse(review)?;
        let (h, (group, version, plural)) = self.handlers.iter().find(|(h, _)| h.id == id).ok_or_else(|| Refusal::Unknown(id.into()))?;
        let mutating = h.kind == pb::HandlerKind::Mutate;
        // Called for a request the handler does not review (its filters say no): allowed.
        if !decide::reviews(h, (group, version, plural), mutating, &req) {
            return Ok(decide::respond(review, &req, &[]));
        }
        let obj = req.object.as_ref().map(object::object_ref);
        let call = pb::AdmitRequest { handler_id: h.id.clone(), request: serde_json::to_vec(&review["request"]).unwrap_or_default() };
        let answer = match self.servers[h.server].admit(call, decide::call_deadline(h)).await {
            Ok(said) => {
                if said.allowed {
                    self.log.info(obj.as_ref(), &format!("Handler '{}' succeeded.", h.id));
                } else {
                    self.log.info(obj.as_ref(), &format!("Handler '{}' denied the {} request: {}", h.id, req.operation, said.message));
                }
                Answer::Said(said)
            }
            Err(failure) => {
                let closed = if h.admission.fail_closed { "the request is denied" } else { "the request passes without it" };
                self.log.error(obj.as_ref(), &format!("Handler '{}' failed: {failure}; {closed}.", h.id));
                Answer::Failed(failure.to_string())
            }
        };
        Ok(decide::respond(review, &req, &[(h, answer)]))
    }
}

/// The endpoint's routes: `POST /<handler id>`.
pub fn router(reviewer: Arc<Reviewer>) -> axum::Router {
    axum::Router::new().route("/{*id}", axum::routing::post(serve_review)).with_state(reviewer)
}

async fn serve_review(State(reviewer): State<Arc<Reviewer>>, Path(id): Path<String>, body: axum::body::Bytes) -> Response {
    let review: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("the body is not JSON: {e}")).into_response(),
    };
    match reviewer.review(&id, &review).await {
        Ok(answer) => axum::Json(answer).into_response(),
        Err(e @ Refusal::Bad(_)) => (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
        Err(e @ Refusal::Unknown(_)) => (StatusCode::NOT_FOUND, e.to_string()).into_response(),
    }
}

/// The names a serving certificate covers: the Service's DNS names, in every form a client
/// in the cluster may use, and the loopback names (the dev cluster, a controller on a laptop).
pub fn serving_names(service: Option<(&str, &str)>) -> Vec<String> {
    let mut names = Vec::new();
    if let Some((namespace, name)) = service {
        names.extend([
            name.to_string(),
            format!("{name}.{namespace}"),
            format!("{name}.{namespace}.svc"),
            format!("{name}.{namespace}.svc.cluster.local"),
        ]);
    }
    names.extend(["localhost", "127.0.0.1", "::1"].map(String::from));
    names
}

/// A new CA and a serving certificate for `serving_names(service)`.
pub fn self_signed(service: Option<(&str, &str)>) -> Result<Tls, TlsError> {
    Tls::generate_for("bosun-admission-ca", "bosun-admission", &serving_names(service))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bosun_devcluster::tls::verify;

    #[test]
    fn the_generated_chain_validates_for_the_names_given_and_no_others() {
        /// The Service, the names the chain is valid for, names it is not.
        type Case<'a> = (Option<(&'a str, &'a str)>, &'a [&'a str], &'a [&'a str]);
        let cases: [Case; 2] = [
            (
                Some(("ops", "bosun")),
                &["bosun", "bosun.ops", "bosun.ops.svc", "bosun.ops.svc.cluster.local", "localhost", "127.0.0.1", "::1"],
                &["bosun.other.svc", "other.ops.svc", "10.96.0.1"],
            ),
            (None, &["localhost", "127.0.0.1", "::1"], &["bosun.ops.svc", "example.com"]),
        ];
        for (service, valid, invalid) in cases {
            let tls = self_signed(service).unwrap();
            for name in valid {
                assert_eq!(verify(&tls.ca_pem, tls.cert_pem(), name), Ok(()), "{service:?}: {name}");
            }
            for name in invalid {
                assert!(verify(&tls.ca_pem, tls.cert_pem(), name).is_err(), "{service:?}: {name} is not named");
            }
        }
    }
}
