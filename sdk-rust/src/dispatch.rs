//! The `bosun.v1.HandlerServer` service: answers `Describe` from the registry, routes each
//! call to its handler (`Handle`, `Activity`; `Admit` and `Daemon` live in their modules), and
//! turns whatever happens (success, errors, panics, a `when` that does not hold) into the answer.

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use bosun_proto::v1 as pb;
use bosun_proto::v1::handler_server_server::HandlerServer;
use futures::FutureExt;
use tonic::{Request, Response, Status};
use tracing::Instrument;

use crate::cause::Cause;
use crate::error::HandlerError;
use crate::index::{self, Indices};
use crate::json;
use crate::live::DaemonStream;
use crate::ran::Ran;
use crate::registry::{Handler, HandlerFn, Registry, is_activity, is_admission};
use crate::running::Running;

/// The gRPC service of a handler server; built by [`Operator::into_service`](crate::Operator::into_service).
#[derive(Clone)]
pub struct Dispatcher {
    registry: Arc<Registry>,
    indices: Indices,
    /// Whether a controller has described this server since it started (see [`Dispatcher::index_not_ready`]).
    described: Arc<AtomicBool>,
    /// The daemons running now.
    running: Running,
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher").field("handlers", &self.registry.ids().collect::<Vec<_>>()).finish()
    }
}

impl Dispatcher {
    pub(crate) fn new(registry: Registry) -> Self {
        let indices = Indices::new(registry.handlers().filter(|h| h.kind == pb::HandlerKind::Index).map(|h| h.id.as_str()));
        Dispatcher { registry: Arc::new(registry), indices, described: Arc::default(), running: Default::default() }
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

    /// Runs one attempt of one handler, as `Handle` does, without gRPC (for tests). Index
    /// handlers put their results in the server's index (see [`Cause::index`]).
    pub async fn handle(&self, request: pb::HandleRequest) -> Result<pb::HandleResponse, Status> {
        let not_found = || {
            let known: Vec<&str> = self.registry.ids().collect();
            Status::not_found(format!(
                "handler server {:?} has no handler {:?}; it has: {}",
                self.registry.server_name,
                request.handler_id,
                known.join(", ")
            ))
        };
        let (handler, child) = self.registry.route(&request.handler_id).ok_or_else(not_found)?;
        if let Some(rpc) = rpc_of(handler.kind).filter(|rpc| *rpc != "Handle") {
            return Err(Status::invalid_argument(format!("handler {:?} is called through {rpc}, not Handle", handler.id)));
        }
        let mut cause = Cause::from_request(&request).map_err(|e| Status::invalid_argument(e.to_string()))?.with_indices(&self.indices);
        let func = match child {
            None => &handler.func,
            Some(child) => {
                cause = cause.with_subhandler(child);
                handler.children.as_ref().ok_or_else(|| {
                    Status::not_found(format!("handler {:?} has no `.subhandlers(...)` function for its sub-handler {child:?}", handler.id))
                })?
            }
        };

        let mut response = pb::HandleResponse::default();
        // For index handlers: the index and the object's key in it.
        let index =
            self.indices.get(&handler.id).filter(|_| handler.kind == pb::HandlerKind::Index).map(|i| (i, index::object_key(cause.body())));
        if let Some((index, object)) = &index {
            if index::is_drop(&request) {
                index.forget(object);
                return Ok(response);
            }
            if index.excluded(object, Instant::now()) {
                response.set_outcome(pb::Outcome::Skipped);
                return Ok(response);
            }
        }
        // A parent's `when` decided whether its sub-handlers were declared; they are not re-checked.
        if let Some(when) = handler.when.as_ref().filter(|_| child.is_none()) {
            match std::panic::catch_unwind(AssertUnwindSafe(|| when(&cause))) {
                Ok(true) => {}
                Ok(false) => {
                    // An object that stops matching leaves the index.
                    if let Some((index, object)) = &index {
                        index.forget(object);
                    }
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

        let mut ran = run(func, &cause).await;
        if let Some((index, object)) = &index {
            ran = index::apply(index, &handler.options, object, ran, Instant::now());
        }
        response.set_outcome(ran.outcome);
        (response.message, response.delay_seconds, response.result) = (ran.message, ran.delay_seconds, ran.result);
        cause.drain_into(&mut response);
        tracing::debug!(handler = %request.handler_id, outcome = ?response.outcome(), "handled");
        Ok(response)
    }

    /// The server's indices.
    pub(crate) fn indices(&self) -> &Indices {
        &self.indices
    }

    /// The daemons running now.
    pub(crate) fn running(&self) -> &Running {
        &self.running
    }

    /// The validating or mutating handler with this id.
    pub(crate) fn admission_handler(&self, id: &str) -> Result<&Handler, Status> {
        self.handler_for("Admit", "admission handler", id)
    }

    /// The daemon with this id.
    pub(crate) fn daemon_handler(&self, id: &str) -> Result<&Handler, Status> {
        self.handler_for("Daemon", "daemon", id)
    }

    fn handler_for(&self, rpc: &str, what: &str, id: &str) -> Result<&Handler, Status> {
        match self.registry.route(id) {
            Some((handler, None)) if rpc_of(handler.kind) == Some(rpc) => Ok(handler),
            _ => Err(Status::not_found(format!("handler server {:?} has no {what} {id:?}", self.registry.server_name))),
        }
    }

    /// Runs one attempt of a startup, cleanup or probe handler, as `Activity` does.
    pub async fn activity(&self, request: pb::ActivityRequest) -> Result<pb::ActivityResponse, Status> {
        let handler = match self.registry.route(&request.handler_id) {
            Some((handler, None)) if is_activity(handler.kind) => handler,
            _ => {
                let known: Vec<&str> = self.registry.activity_ids().collect();
                return Err(Status::not_found(format!(
                    "handler server {:?} has no activity {:?}; it has: {}",
                    self.registry.server_name,
                    request.handler_id,
                    known.join(", ")
                )));
            }
        };
        let cause =
            Cause::from_body(serde_json::Value::Null).with_handler_id(&handler.id).with_retry(request.retry).with_indices(&self.indices);
        let ran = run(&handler.func, &cause).await;
        let mut response = pb::ActivityResponse {
            message: ran.message,
            delay_seconds: ran.delay_seconds,
            result: ran.result,
            logs: cause.drain_logs(),
            ..Default::default()
        };
        response.set_outcome(ran.outcome);
        Ok(response)
    }
}

impl Dispatcher {
    /// A server with index handlers that no controller has described since it started (it
    /// restarted, and the controller has not noticed yet) has empty indices, which the
    /// controller fills once it describes the server again: until then, calls that are not
    /// index calls are answered UNAVAILABLE, which the controller takes as the server being
    /// away (the object waits for it), rather than running handlers against an empty index.
    fn index_not_ready(&self, request: &pb::HandleRequest) -> Result<(), Status> {
        if self.indices.is_empty() || self.described.load(Ordering::Relaxed) || request.reason == pb::Reason::Index as i32 {
            return Ok(());
        }
        Err(Status::unavailable("this handler server has just started and its indices are empty: it waits to be described"))
    }
}

/// Runs a handler function once; errors and panics become outcomes.
pub(crate) async fn run(func: &HandlerFn, cause: &Cause) -> Ran {
    let failed = |outcome, message| Ran { outcome, message, delay_seconds: None, result: Vec::new(), code: 0 };
    match AssertUnwindSafe(func(cause.clone())).catch_unwind().await {
        Ok(Ok(result)) => Ran {
            outcome: pb::Outcome::Success,
            message: String::new(),
            delay_seconds: None,
            result: if result.is_null() { Vec::new() } else { json::encode(&result) },
            code: 0,
        },
        Ok(Err(error)) => {
            let message = error.message();
            match error {
                HandlerError::Temporary(e) => {
                    Ran { delay_seconds: e.retry_delay().map(|d| d.as_secs_f64()), ..failed(pb::Outcome::TemporaryError, message) }
                }
                HandlerError::Permanent(e) => Ran { code: e.denial_code().unwrap_or(0), ..failed(pb::Outcome::PermanentError, message) },
                HandlerError::Unexpected(_) => failed(pb::Outcome::UnexpectedError, message),
            }
        }
        Err(panic) => failed(pb::Outcome::UnexpectedError, format!("the handler panicked: {}", panic_message(&*panic))),
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

/// The call that runs handlers of a kind.
fn rpc_of(kind: pb::HandlerKind) -> Option<&'static str> {
    match kind {
        pb::HandlerKind::Unspecified => None,
        pb::HandlerKind::Daemon => Some("Daemon"),
        k if is_activity(k) => Some("Activity"),
        k if is_admission(k) => Some("Admit"),
        _ => Some("Handle"),
    }
}

#[tonic::async_trait]
impl HandlerServer for Dispatcher {
    async fn describe(&self, request: Request<pb::DescribeRequest>) -> Result<Response<pb::DescribeResponse>, Status> {
        let version = &request.get_ref().controller_version;
        tracing::debug!(controller_version = %version, "described {} handlers", self.registry.len());
        self.described.store(true, Ordering::Relaxed);
        Ok(Response::new(self.registry.describe()))
    }

    async fn handle(&self, request: Request<pb::HandleRequest>) -> Result<Response<pb::HandleResponse>, Status> {
        self.index_not_ready(request.get_ref())?;
        let span = crate::telemetry::call_span("Handle", &request.get_ref().handler_id, request.metadata());
        Dispatcher::handle(self, request.into_inner()).instrument(span).await.map(Response::new)
    }

    type DaemonStream = DaemonStream;
    type HandleStreamStream = futures::stream::Empty<Result<pb::HandleAnswers, Status>>;

    /// Not served: the controller calls Handle one by one (unary tonic calls are cheap).
    async fn handle_stream(&self, _: Request<tonic::Streaming<pb::HandleCalls>>) -> Result<Response<Self::HandleStreamStream>, Status> {
        Err(Status::unimplemented("this server answers Handle calls one by one"))
    }

    async fn daemon(&self, request: Request<pb::DaemonRequest>) -> Result<Response<Self::DaemonStream>, Status> {
        // The daemon's task runs in this span, a child of the controller's `daemon` span.
        let span = crate::telemetry::call_span("Daemon", &request.get_ref().handler_id, request.metadata());
        span.in_scope(|| Dispatcher::daemon(self, request.into_inner())).map(Response::new)
    }

    async fn activity(&self, request: Request<pb::ActivityRequest>) -> Result<Response<pb::ActivityResponse>, Status> {
        let span = crate::telemetry::call_span("Activity", &request.get_ref().handler_id, request.metadata());
        Dispatcher::activity(self, request.into_inner()).instrument(span).await.map(Response::new)
    }

    async fn admit(&self, request: Request<pb::AdmitRequest>) -> Result<Response<pb::AdmitResponse>, Status> {
        Dispatcher::admit(self, request.into_inner()).await.map(Response::new)
    }

    async fn stop_daemon(&self, request: Request<pb::StopDaemonRequest>) -> Result<Response<pb::StopDaemonResponse>, Status> {
        Ok(Response::new(Dispatcher::stop_daemon(self, request.get_ref())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Operator;
    use serde_json::json;

    fn call(id: &str, reason: pb::Reason, object: serde_json::Value) -> Request<pb::HandleRequest> {
        Request::new(pb::HandleRequest {
            handler_id: id.into(),
            reason: reason as i32,
            object: serde_json::to_vec(&object).unwrap(),
            ..Default::default()
        })
    }

    #[tokio::test]
    async fn a_server_with_indices_answers_unavailable_until_it_is_described() {
        let operator = Operator::new()
            .index("v1/pods", |cause: Cause| async move { Ok(json!(cause.name())) })
            .id("names")
            .on_create("kex", |cause: Cause| async move { Ok(cause.index("names").unwrap().get(crate::FLAT_INDEX_KEY)) })
            .id("create_fn");
        let d = Dispatcher::new(operator.build().unwrap());
        let pod = json!({"metadata": {"name": "a", "uid": "u1"}});
        let early = HandlerServer::handle(&d, call("create_fn", pb::Reason::Create, json!({}))).await.unwrap_err();
        assert_eq!(early.code(), tonic::Code::Unavailable, "{early:?}");
        let indexed = HandlerServer::handle(&d, call("names", pb::Reason::Index, pod)).await.unwrap().into_inner();
        assert_eq!(indexed.outcome(), pb::Outcome::Success, "index calls go on: {indexed:?}");
        HandlerServer::describe(&d, Request::new(pb::DescribeRequest::default())).await.unwrap();
        let answer = HandlerServer::handle(&d, call("create_fn", pb::Reason::Create, json!({}))).await.unwrap().into_inner();
        assert_eq!(serde_json::from_slice::<serde_json::Value>(&answer.result).unwrap(), json!(["a"]));
    }
}
