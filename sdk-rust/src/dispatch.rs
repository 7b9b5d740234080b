//! The `bosun.v1.HandlerServer` service: answers `Describe` from the registry and runs one
//! handler per `Handle` call, turning whatever happens (success, errors, panics, a `when`
//! that does not hold) into a `HandleResponse`.

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use bosun_proto::v1 as pb;
use bosun_proto::v1::handler_server_server::HandlerServer;
use futures::FutureExt;
use tonic::{Request, Response, Status};

use crate::cause::Cause;
use crate::error::HandlerError;
use crate::registry::Registry;

/// The gRPC service of a handler server; built by [`Operator::into_service`](crate::Operator::into_service).
#[derive(Clone)]
pub struct Dispatcher {
    registry: Arc<Registry>,
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher").field("handlers", &self.registry.ids().collect::<Vec<_>>()).finish()
    }
}

impl Dispatcher {
    pub(crate) fn new(registry: Registry) -> Self {
        Dispatcher { registry: Arc::new(registry) }
    }

    /// How many handlers are registered.
    pub fn len(&self) -> usize {
        self.registry.len()
    }

    /// Whether no handlers are registered (never true for a built operator).
    pub fn is_empty(&self) -> bool {
        self.registry.len() == 0
    }

    /// The registry, as `Describe` answers it.
    pub fn describe(&self) -> pb::DescribeResponse {
        self.registry.describe()
    }

    /// Runs one attempt of one handler, as `Handle` does, without gRPC (for tests).
    pub async fn handle(&self, request: pb::HandleRequest) -> Result<pb::HandleResponse, Status> {
        let Some(handler) = self.registry.get(&request.handler_id) else {
            let known: Vec<&str> = self.registry.ids().collect();
            return Err(Status::not_found(format!(
                "handler server {:?} has no handler {:?}; it has: {}",
                self.registry.server_name,
                request.handler_id,
                known.join(", ")
            )));
        };
        let cause = Cause::from_request(&request).map_err(|e| Status::invalid_argument(e.to_string()))?;

        let mut response = pb::HandleResponse::default();
        if let Some(when) = &handler.when {
            match std::panic::catch_unwind(AssertUnwindSafe(|| when(&cause))) {
                Ok(true) => {}
                Ok(false) => {
                    response.set_outcome(pb::Outcome::Skipped);
                    return Ok(response);
                }
                Err(panic) => {
                    response.set_outcome(pb::Outcome::UnexpectedError);
                    response.message = format!("the `when` predicate panicked: {}", panic_message(&*panic));
                    return Ok(response);
                }
            }
        }

        let outcome = AssertUnwindSafe((handler.func)(cause.clone())).catch_unwind().await;
        match outcome {
            Ok(Ok(result)) => {
                response.set_outcome(pb::Outcome::Success);
                if !result.is_null() {
                    response.result = serde_json::to_vec(&result).expect("JSON values always serialize");
                }
            }
            Ok(Err(error)) => fill_error(&mut response, error),
            Err(panic) => {
                response.set_outcome(pb::Outcome::UnexpectedError);
                response.message = format!("the handler panicked: {}", panic_message(&*panic));
            }
        }
        cause.drain_into(&mut response);
        tracing::debug!(handler = %request.handler_id, outcome = ?response.outcome(), "handled");
        Ok(response)
    }
}

fn fill_error(response: &mut pb::HandleResponse, error: HandlerError) {
    response.message = error.message();
    match error {
        HandlerError::Temporary(e) => {
            response.set_outcome(pb::Outcome::TemporaryError);
            response.delay_seconds = e.retry_delay().map(|d| d.as_secs_f64());
        }
        HandlerError::Permanent(_) => response.set_outcome(pb::Outcome::PermanentError),
        HandlerError::Unexpected(_) => response.set_outcome(pb::Outcome::UnexpectedError),
    }
}

fn panic_message(panic: &(dyn Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".into()
    }
}

fn not_here(what: &str, id: &str) -> Status {
    Status::not_found(format!("this handler server has no {what} handler {id:?} (the Rust SDK does not support {what} handlers yet)"))
}

#[tonic::async_trait]
impl HandlerServer for Dispatcher {
    async fn describe(&self, request: Request<pb::DescribeRequest>) -> Result<Response<pb::DescribeResponse>, Status> {
        let version = &request.get_ref().controller_version;
        tracing::debug!(controller_version = %version, "described {} handlers", self.registry.len());
        Ok(Response::new(self.registry.describe()))
    }

    async fn handle(&self, request: Request<pb::HandleRequest>) -> Result<Response<pb::HandleResponse>, Status> {
        Dispatcher::handle(self, request.into_inner()).await.map(Response::new)
    }

    type DaemonStream = futures::stream::Empty<Result<pb::DaemonMessage, Status>>;

    async fn daemon(&self, request: Request<pb::DaemonRequest>) -> Result<Response<Self::DaemonStream>, Status> {
        Err(not_here("daemon", &request.get_ref().handler_id))
    }

    async fn activity(&self, request: Request<pb::ActivityRequest>) -> Result<Response<pb::ActivityResponse>, Status> {
        Err(not_here("activity", &request.get_ref().handler_id))
    }

    async fn admit(&self, request: Request<pb::AdmitRequest>) -> Result<Response<pb::AdmitResponse>, Status> {
        Err(not_here("admission", &request.get_ref().handler_id))
    }
}
