//! Kubernetes access: the only module that talks to the API server. Raw JSON requests with
//! Kopf's retry policy (5xx and network errors retried with backoffs 1, 1, 2, 3, 5, 8, 13,
//! 21 s; 429 honours Retry-After) as the only retry layer, every request bounded in time
//! (`client`), resource discovery, watching and event posting.

pub mod apply;
pub mod client;
pub mod deadline;
pub mod discovery;
pub mod events;
pub mod forbidden;
pub mod metered;
pub mod posting;
pub mod raw;
pub mod retry;
pub mod watching;

use std::time::Duration;

use bytes::Bytes;
use futures::TryFutureExt;
use http::{Method, Request, StatusCode};
use serde_json::Value;

/// A failed API request.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server answered with an error status.
    #[error("{method} {path} failed: {code} {reason}: {message}")]
    Api {
        /// Request method.
        method: Method,
        /// Request path.
        path: String,
        /// HTTP status code.
        code: u16,
        /// The Status reason (`Conflict`, `NotFound`, ...).
        reason: String,
        /// The Status message.
        message: String,
    },
    /// No answer (connection refused, reset, timeout) after all retries.
    #[error("{method} {path} failed: {message}")]
    Transport {
        /// Request method.
        method: Method,
        /// Request path.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// The answer was not the JSON it should be.
    #[error("{method} {path} returned invalid JSON: {source}")]
    Decode {
        /// Request method.
        method: Method,
        /// Request path.
        path: String,
        /// The parse error (or the object is deeper than the controller reads).
        #[source]
        source: crate::json::Error,
    },
}

impl Error {
    /// Whether the API server may have applied the request although it failed (no answer, or
    /// a 5xx other than 503): see [`retry::Failure::may_have_applied`].
    pub fn may_have_applied(&self) -> bool {
        match self {
            Error::Transport { .. } => true,
            _ => self.code().and_then(|c| StatusCode::from_u16(c).ok()).is_some_and(|c| retry::Failure::Status(c, None).may_have_applied()),
        }
    }

    /// The HTTP status, for an error the API server answered.
    pub fn code(&self) -> Option<u16> {
        match self {
            Error::Api { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// The API calls the runtime makes, behind a trait so the runtime can be tested without a
/// server. [`Cluster`] is the real one.
pub trait Api: Send + Sync {
    /// Sends one request (retrying as the implementation sees fit) and decodes the JSON answer.
    fn request<'a>(
        &'a self,
        method: Method,
        path: &'a str,
        content_type: Option<&'a str>,
        body: Option<Vec<u8>>,
    ) -> futures::future::BoxFuture<'a, Result<Value, Error>>;

    /// [`Api::request`] for a caller that needs only whether it succeeded: an implementation
    /// may skip decoding the answer (the whole object, for a write).
    fn request_unread<'a>(
        &'a self,
        method: Method,
        path: &'a str,
        content_type: Option<&'a str>,
        body: Option<Vec<u8>>,
    ) -> futures::future::BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move { self.request(method, path, content_type, body).await.map(drop) })
    }
}

impl dyn Api + '_ {
    /// GETs a path.
    pub async fn get(&self, path: &str) -> Result<Value, Error> {
        self.request(Method::GET, path, None, None).await
    }

    /// PATCHes a path with a patch of the given content type.
    pub async fn patch(&self, path: &str, content_type: &str, patch: &Value) -> Result<Value, Error> {
        let body = serde_json::to_vec(patch).expect("JSON values serialize");
        self.request(Method::PATCH, path, Some(content_type), Some(body)).await
    }

    /// [`Self::patch`] without the written object: only whether it was written.
    pub async fn patch_unread(&self, path: &str, content_type: &str, patch: &Value) -> Result<(), Error> {
        let body = serde_json::to_vec(patch).expect("JSON values serialize");
        self.request_unread(Method::PATCH, path, Some(content_type), Some(body)).await
    }

    /// POSTs an object to a collection path.
    pub async fn create(&self, path: &str, object: &Value) -> Result<Value, Error> {
        let body = serde_json::to_vec(object).expect("JSON values serialize");
        self.request(Method::POST, path, Some(content::JSON), Some(body)).await
    }
}

impl Api for Cluster {
    fn request<'a>(
        &'a self,
        method: Method,
        path: &'a str,
        content_type: Option<&'a str>,
        body: Option<Vec<u8>>,
    ) -> futures::future::BoxFuture<'a, Result<Value, Error>> {
        Box::pin(self.call(method, path, content_type, body))
    }

    fn request_unread<'a>(
        &'a self,
        method: Method,
        path: &'a str,
        content_type: Option<&'a str>,
        body: Option<Vec<u8>>,
    ) -> futures::future::BoxFuture<'a, Result<(), Error>> {
        Box::pin(self.send(method, path, content_type, body).map_ok(drop))
    }
}

/// How many API requests (so, connections) are in flight at most, whatever the backlog.
pub const MAX_REQUESTS: usize = 64;

/// How many coordination requests (Leases, peering) are in flight at most: they have permits
/// of their own, so that they never queue behind the objects' writes.
pub const COORDINATION_REQUESTS: usize = 8;

/// A client for the API server.
#[derive(Clone)]
pub struct Cluster {
    client: kube::Client,
    /// How many retries server errors get (tests lower it).
    pub retries: usize,
    /// Bounds the requests in flight: HTTP/1 opens one connection per concurrent request.
    in_flight: std::sync::Arc<tokio::sync::Semaphore>,
    /// A limit per attempt, shorter than the client's own request timeout.
    attempt_limit: Option<Duration>,
    /// The permissions found missing (403) and said: each is said once.
    forbidden: std::sync::Arc<parking_lot::Mutex<std::collections::HashSet<forbidden::Missing>>>,
}

/// Content types of patches.
pub mod content {
    /// RFC 7386 JSON merge patch.
    pub const MERGE: &str = "application/merge-patch+json";
    /// RFC 6902 JSON patch.
    pub const JSON_PATCH: &str = "application/json-patch+json";
    /// Plain JSON (create, update).
    pub const JSON: &str = "application/json";
    /// Server-side apply.
    pub const APPLY: &str = "application/apply-patch+yaml";
}

impl Cluster {
    /// Wraps a kube client. Build it with [`client::build`]: a client of kube's default stack
    /// retries 429/503/504 by itself under the controller's retries, with no time limit.
    pub fn new(client: kube::Client) -> Cluster {
        Cluster {
            client,
            retries: retry::BACKOFFS.len(),
            in_flight: std::sync::Arc::new(tokio::sync::Semaphore::new(MAX_REQUESTS)),
            attempt_limit: None,
            forbidden: Default::default(),
        }
    }

    /// The same client for coordination (Leases, peering): permits of its own, so that its
    /// requests go through while the objects' writes are stalled, no retries (the loops look
    /// again soon) and each attempt ended after `limit`, so that a Lease is judged in time.
    pub fn for_coordination(&self, limit: Duration) -> Cluster {
        Cluster {
            client: self.client.clone(),
            retries: 0,
            in_flight: std::sync::Arc::new(tokio::sync::Semaphore::new(COORDINATION_REQUESTS)),
            attempt_limit: Some(limit),
            forbidden: self.forbidden.clone(),
        }
    }

    /// The kube client (for watchers).
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// Sends one request, retrying 429, 5xx and network failures as [`retry`] says; decodes
    /// the JSON answer. Each attempt holds one permit of the requests in flight while it runs
    /// (not while it waits to be retried) and is counted in the metrics.
    pub async fn call(&self, method: Method, path: &str, content_type: Option<&str>, body: Option<Vec<u8>>) -> Result<Value, Error> {
        let bytes = self.send(method.clone(), path, content_type, body).await?;
        crate::json::from_slice(&bytes).map_err(|source| Error::Decode { method, path: path.into(), source })
    }

    /// [`Self::call`] up to the answer's body, undecoded.
    async fn send(&self, method: Method, path: &str, content_type: Option<&str>, body: Option<Vec<u8>>) -> Result<Bytes, Error> {
        // Shared by the attempts: a retry re-sends it without a copy.
        let body = Bytes::from(body.unwrap_or_default());
        let resendable = retry::resendable(content_type == Some(content::JSON_PATCH), &body);
        let mut attempt = 0;
        loop {
            let mut req = Request::builder().method(method.clone()).uri(path).header(http::header::ACCEPT, "application/json");
            if let Some(ct) = content_type {
                req = req.header(http::header::CONTENT_TYPE, ct);
            }
            let req = req.body(kube::client::Body::from(body.clone())).expect("valid request parts");
            let permit = self.in_flight.acquire().await.expect("the semaphore is never closed");
            let outcome = self.attempt(req).await;
            drop(permit);
            let (failure, err) = match outcome {
                Ok((status, _, bytes)) if status.is_success() => return Ok(bytes),
                Ok((status, retry_after, bytes)) => {
                    if status == StatusCode::FORBIDDEN {
                        self.say_forbidden(&method, path, content_type);
                    }
                    (retry::Failure::Status(status, retry_after), api_error(&method, path, status, &bytes))
                }
                Err(message) => (retry::Failure::NoAnswer, Error::Transport { method: method.clone(), path: path.into(), message }),
            };
            // A request that must not land twice is not sent again once it may have landed: its
            // caller finds out (`Error::may_have_applied`).
            if !resendable && failure.may_have_applied() {
                return Err(err);
            }
            let Some(wait) = retry::wait(attempt, self.retries, failure) else { return Err(err) };
            tracing::warn!("{err}; retrying in {}s", wait.as_secs_f64());
            attempt += 1;
            tokio::time::sleep(wait).await;
        }
    }

    /// Says which permission a forbidden request lacks and how to add it, once per permission.
    fn say_forbidden(&self, method: &Method, path: &str, content_type: Option<&str>) {
        if let Some(missing) = forbidden::Missing::of(method, path, content_type == Some(content::APPLY)) {
            self.said_forbidden(missing);
        }
    }

    /// Says that the controller's account lacks `missing`, unless it was said already.
    pub fn said_forbidden(&self, missing: forbidden::Missing) {
        if self.forbidden.lock().insert(missing.clone()) {
            tracing::warn!("{}", missing.line());
        }
    }

    /// Sends a request once and reads its whole answer: status, `Retry-After`, body.
    async fn attempt(&self, req: Request<kube::client::Body>) -> Result<(StatusCode, Option<Duration>, Bytes), String> {
        let exchange = async {
            let res = self.client.send(req).await.map_err(|e| e.to_string())?;
            let status = res.status();
            let retry_after = res.headers().get(http::header::RETRY_AFTER).and_then(retry::retry_after);
            let bytes = res.into_body().collect_bytes().await.map_err(|e| e.to_string())?;
            Ok((status, retry_after, bytes))
        };
        match self.attempt_limit {
            None => exchange.await,
            Some(limit) => tokio::time::timeout(limit, exchange).await.unwrap_or_else(|_| Err(deadline::TimedOut(limit).to_string())),
        }
    }

    /// GETs a path.
    pub async fn get(&self, path: &str) -> Result<Value, Error> {
        <dyn Api>::get(self, path).await
    }

    /// PATCHes a path with a patch of the given content type.
    pub async fn patch(&self, path: &str, content_type: &str, patch: &Value) -> Result<Value, Error> {
        <dyn Api>::patch(self, path, content_type, patch).await
    }

    /// POSTs an object to a collection path.
    pub async fn create(&self, path: &str, object: &Value) -> Result<Value, Error> {
        <dyn Api>::create(self, path, object).await
    }
}

fn api_error(method: &Method, path: &str, status: StatusCode, body: &Bytes) -> Error {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let field = |k: &str| parsed.as_ref().and_then(|v| v.get(k)).and_then(Value::as_str).map(String::from);
    Error::Api {
        method: method.clone(),
        path: path.to_string(),
        code: status.as_u16(),
        reason: field("reason").unwrap_or_else(|| status.canonical_reason().unwrap_or("Unknown").to_string()),
        message: field("message").unwrap_or_else(|| String::from_utf8_lossy(body).trim().to_string()),
    }
}

#[cfg(test)]
#[path = "call_tests.rs"]
mod call_tests;
