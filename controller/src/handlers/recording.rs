//! A handler server for tests of the calls: it answers every call with success and notes
//! which registration each call named (`handler_id`, `handler_key`).

use std::time::Duration;

use bosun_proto::v1 as pb;
use futures::future::BoxFuture;
use parking_lot::Mutex;

use super::dispatch::{CallFailure, DaemonStream, HandlerClient};

/// Every call made to it, as (rpc, handler id, handler key).
#[derive(Default)]
pub struct Recording {
    /// The calls so far.
    pub calls: Mutex<Vec<(&'static str, String, String)>>,
    /// The headers of each admission review, in order.
    pub headers: Mutex<Vec<std::collections::HashMap<String, String>>>,
}

impl Recording {
    fn note(&self, rpc: &'static str, id: &str, key: &str) {
        self.calls.lock().push((rpc, id.to_string(), key.to_string()));
    }
}

impl HandlerClient for Recording {
    fn addr(&self) -> &str {
        "recording://handlers"
    }

    fn handle(&self, req: pb::HandleRequest, _: Duration) -> BoxFuture<'_, Result<pb::HandleResponse, CallFailure>> {
        self.note("Handle", &req.handler_id, &req.handler_key);
        Box::pin(async { Ok(pb::HandleResponse { outcome: pb::Outcome::Success as i32, ..Default::default() }) })
    }

    fn daemon(&self, req: pb::DaemonRequest) -> BoxFuture<'_, Result<DaemonStream, CallFailure>> {
        self.note("Daemon", &req.handler_id, &req.handler_key);
        Box::pin(async { Ok(Box::pin(futures::stream::empty()) as DaemonStream) })
    }

    fn activity(&self, req: pb::ActivityRequest, _: Duration) -> BoxFuture<'_, Result<pb::ActivityResponse, CallFailure>> {
        self.note("Activity", &req.handler_id, &req.handler_key);
        Box::pin(async { Ok(pb::ActivityResponse { outcome: pb::Outcome::Success as i32, result: b"1".to_vec(), ..Default::default() }) })
    }

    fn admit(&self, req: pb::AdmitRequest, _: Duration) -> BoxFuture<'_, Result<pb::AdmitResponse, CallFailure>> {
        self.note("Admit", &req.handler_id, &req.handler_key);
        self.headers.lock().push(req.headers);
        Box::pin(async { Ok(pb::AdmitResponse { allowed: true, ..Default::default() }) })
    }
}
