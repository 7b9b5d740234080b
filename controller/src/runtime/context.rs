//! What the cycles, workers, timers, daemons, spies and indexers of one resource share: the resource,
//! its handlers, where state lives, the two I/O edges (the API server and the handler
//! servers), the log, the clock and the per-object memory (seen UIDs, memos).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use bosun_proto::v1 as pb;
use parking_lot::Mutex;
use serde_json::Value;

use super::writes::{self, WriteError};
pub use crate::clock::Clock;
use crate::cluster::discovery::ResolvedResource;
use crate::cluster::posting::{Poster, Posting};
use crate::cluster::{Api, events};
use crate::handlers::dispatch::{CallFailure, Outages, Servers};
use crate::logs::{Logger, ObjectRef};
use crate::object::object_ref;
use crate::state::essence::EssenceRules;
use crate::state::plan::{Subject, Writes};
use crate::state::registry::Handler;
use crate::state::storage::Storage;

/// The latest body of an object and when its essence last changed, as its timers and daemons
/// see it.
pub type Latest = (Value, tokio::time::Instant);

/// Everything the cycles of one resource share.
pub struct ResourceContext {
    /// The resource.
    pub resource: ResolvedResource,
    /// Its changing, timer and daemon handlers, in registration order.
    pub handlers: Vec<Arc<Handler>>,
    /// Its raw-event spies.
    pub spies: Vec<Arc<Handler>>,
    /// Its index handlers.
    pub indexers: Vec<Arc<Handler>>,
    /// Open once every index is populated (shared by all resources): no other handler is
    /// called before.
    pub gate: Arc<super::gate::IndexGate>,
    /// Where state is kept.
    pub storage: Storage,
    /// What the essence keeps.
    pub rules: EssenceRules,
    /// The API server.
    pub api: Arc<dyn Api>,
    /// The handler servers, by index.
    pub servers: Servers,
    /// Resolved kinds of owned objects (shared by all resources).
    pub kinds: Arc<crate::cluster::discovery::Kinds>,
    /// Which handler servers are down (shared by all resources).
    pub outages: Arc<Outages>,
    /// The log.
    pub log: Logger,
    /// How events are posted.
    pub posting: Posting,
    /// Posts the lines of handling cycles as events, in the background.
    pub poster: Poster,
    /// Which objects are ours now (peering, leader election, shards): asked before every
    /// cycle, timer and daemon.
    pub authority: crate::coordination::Authority,
    /// A label selector is pushed to the API server: DELETED may mean "stopped matching".
    pub selector_pushed: bool,
    /// UIDs whose first cycle this controller finished (the rest get resume handlers).
    pub seen: Arc<Mutex<HashSet<String>>>,
    /// Memos by UID (not persisted).
    pub memos: Arc<Mutex<HashMap<String, Vec<u8>>>>,
    /// Where background tasks (timers, daemons, spies, workers) are tracked.
    pub tasks: tokio_util::task::TaskTracker,
    /// Flips to true when the controller stops.
    pub stop: tokio::sync::watch::Receiver<bool>,
    /// The clock.
    pub clock: Clock,
}

/// JSON bytes of a value.
pub fn to_json(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).expect("JSON values serialize")
}

impl ResourceContext {
    /// What the plan needs to know of the resource.
    pub fn subject(&self) -> Subject<'_> {
        Subject {
            handlers: &self.handlers,
            storage: &self.storage,
            rules: &self.rules,
            has_status: self.resource.has_status,
            status_keeps_unknown: self.resource.status_keeps_unknown,
        }
    }

    /// Writes `w` for `body`: [`writes::write`] with the object's path and this resource's
    /// finalizer.
    pub async fn write(&self, body: &Value, w: &Writes) -> Result<Option<Value>, WriteError> {
        writes::write(&*self.api, &writes::path_of(&self.resource, body), &self.storage.finalizer, body, w).await
    }

    /// The resource as the contract describes it.
    pub fn pb_resource(&self) -> pb::Resource {
        let r = &self.resource;
        pb::Resource {
            group: r.group.clone(),
            version: r.version.clone(),
            plural: r.plural.clone(),
            kind: r.kind.clone(),
            namespaced: r.namespaced,
        }
    }

    /// Writes a handler's log lines with the object's prefix.
    pub fn log_lines(&self, obj: &ObjectRef, lines: &[pb::LogLine]) {
        for line in lines {
            self.log.line(crate::logs::Level::of_pb(line.level), Some(obj), &line.message);
        }
    }

    /// Calls a handler whose answer is recorded nowhere on the object (spies, index handlers)
    /// with one watch event of `body`: writes the answer's log lines, lets `said` log how the
    /// call ended, then posts the answer's events.
    pub async fn call_unrecorded(
        &self,
        h: &Handler,
        reason: pb::Reason,
        event_type: &str,
        body: &Value,
        said: impl FnOnce(&ObjectRef, Result<(pb::Outcome, &str), CallFailure>),
    ) {
        let obj = object_ref(body);
        let req = pb::HandleRequest {
            handler_id: h.id.clone(),
            handler_key: h.key.clone(),
            reason: reason as i32,
            resource: Some(self.pb_resource()),
            object: to_json(body),
            event_type: event_type.to_string(),
            ..Default::default()
        };
        match self.servers[h.server].handle(req, h.call_timeout).await {
            Err(failure) => said(&obj, Err(failure)),
            Ok(answer) => {
                self.log_lines(&obj, &answer.logs);
                said(&obj, Ok((pb::Outcome::try_from(answer.outcome).unwrap_or(pb::Outcome::UnexpectedError), &answer.message)));
                self.post_events(body, answer.events.iter()).await;
            }
        }
    }

    /// Posts events about `body` (or the object each names) unless posting is off; failures
    /// are logged.
    pub async fn post_events(&self, body: &Value, list: impl Iterator<Item = &pb::Event>) {
        if !self.posting.enabled {
            return;
        }
        // Most cycles post none: the object's reference is read only for one that does.
        let mut regarding = None;
        for e in list {
            let target = match &e.regarding {
                Some(r) => events::Regarding {
                    api_version: r.api_version.clone(),
                    kind: r.kind.clone(),
                    namespace: r.namespace.clone(),
                    name: r.name.clone(),
                    uid: r.uid.clone(),
                },
                None => regarding.get_or_insert_with(|| events::Regarding::of(body)).clone(),
            };
            if let Err(err) = events::post(&*self.api, &target, &e.r#type, &e.reason, &e.message).await {
                self.log.warn(Some(&object_ref(body)), &format!("Failed to post an event: {err}"));
            }
        }
    }
}
