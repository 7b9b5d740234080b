//! Raw-event spies (Kopf's `on.event`): every watch event, including the initial listing,
//! goes to the matching EVENT handlers with its type. A relist after the watch was down
//! (`cluster::watching`) delivers only what changed meanwhile (objects whose
//! resourceVersion moved, and deletions), so spies see it as the events they missed, not as
//! every object anew. Nothing is stored on the object,
//! failures are logged and ignored, and spies run in queues of their own (serial per
//! object, in event order) so they never hold up the changing handlers of the same object.
//! Like every resource handler, they wait until the indices are populated (`indexing`).

use std::collections::HashSet;
use std::sync::Arc;

use bosun_proto::v1 as pb;
use futures::FutureExt;
use parking_lot::Mutex;
use serde_json::Value;
use tokio_util::task::TaskTracker;

use super::context::ResourceContext;
use super::queues::Queues;
use crate::cluster::watching::Seen;
use crate::object::{self, object_key};

type Item = (&'static str, Value);

/// The spy queues of one resource.
#[derive(Clone)]
pub struct Spies {
    ctx: Arc<ResourceContext>,
    queues: Queues<Item>,
    known: Arc<Mutex<HashSet<String>>>,
}

/// The watch event type Kopf reports: none for the listing, ADDED for an object not seen
/// before, MODIFIED after, DELETED.
pub fn event_type(seen: &Seen, known: &mut HashSet<String>) -> &'static str {
    let uid = object::meta_str(seen.body(), "uid").to_string();
    match seen {
        Seen::Listed(_) => {
            known.insert(uid);
            ""
        }
        Seen::Upsert(_) => {
            if known.insert(uid) {
                "ADDED"
            } else {
                "MODIFIED"
            }
        }
        Seen::Deleted(_) => {
            known.remove(&uid);
            "DELETED"
        }
    }
}

impl Spies {
    /// Spy queues for a resource.
    pub fn new(ctx: Arc<ResourceContext>, tasks: TaskTracker, stop: tokio::sync::watch::Receiver<bool>) -> Spies {
        let work = {
            let ctx = ctx.clone();
            Arc::new(move |(etype, body): Item| {
                let ctx = ctx.clone();
                async move { spy(&ctx, etype, &body).await }.boxed()
            })
        };
        Spies { ctx, queues: Queues::new(work, tasks, stop), known: Arc::default() }
    }

    /// Queues a watch event for the spies that match the object.
    pub fn observe(&self, seen: &Seen) {
        if self.ctx.spies.is_empty() {
            return;
        }
        let etype = event_type(seen, &mut self.known.lock());
        let body = seen.body();
        if !self.ctx.spies.iter().any(|h| h.matches_object(body)) {
            return;
        }
        self.queues.push(object_key(body), (etype, body.clone()));
    }
}

/// Calls the matching spies with one event, once every index is populated.
async fn spy(ctx: &ResourceContext, etype: &str, body: &Value) {
    let mut stop = ctx.stop.clone();
    tokio::select! {
        _ = stop.wait_for(|s| *s) => return,
        _ = ctx.gate.opened() => {}
    }
    for h in ctx.spies.iter().filter(|h| h.matches_object(body)) {
        call(ctx, h, etype, body).await;
    }
}

async fn call(ctx: &ResourceContext, h: &crate::state::registry::Handler, etype: &str, body: &Value) {
    let log = &ctx.log;
    ctx.call_unrecorded(h, pb::Reason::Event, etype, body, |obj, ended| match ended {
        Err(failure) => log.warn(Some(obj), &format!("Handler '{}' {failure}; the event is skipped.", h.id)),
        Ok((pb::Outcome::Success, _)) => log.info(Some(obj), &format!("Handler '{}' succeeded.", h.id)),
        Ok((pb::Outcome::Skipped, _)) => {}
        Ok((_, message)) => log.warn(Some(obj), &format!("Handler '{}' failed: {message}; ignored.", h.id)),
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn event_types_follow_kopf() {
        let body = json!({"metadata": {"uid": "u1"}});
        let mut known = HashSet::new();
        let seq = [
            (Seen::Listed(body.clone()), ""),
            (Seen::Upsert(body.clone()), "MODIFIED"),
            (Seen::Deleted(body.clone()), "DELETED"),
            (Seen::Upsert(body.clone()), "ADDED"),
            (Seen::Upsert(body.clone()), "MODIFIED"),
        ];
        for (seen, want) in seq {
            assert_eq!(event_type(&seen, &mut known), want, "{seen:?}");
        }
    }
}
