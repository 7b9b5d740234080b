//! Raw-event spies (Kopf's `on.event`): every watch event, including the initial listing,
//! goes to the matching EVENT handlers with its type. A relist after the watch was down
//! (`cluster::watching`) delivers only what changed meanwhile (objects whose
//! resourceVersion moved, and deletions), so spies see it as the events they missed, not as
//! every object anew. Nothing is stored on the object, failures are logged and ignored, and
//! spies run in queues of their own (serial per object, in event order) so they never hold up
//! the changing handlers of the same object. While an object's spies are busy, its newer
//! events wait as one (`queues`: the newest body). Like every resource handler, they wait
//! until the indices are populated (`indexing`).
//!
//! The event type is told from which objects were seen before ([`event_type`]), so every
//! event of the watch is seen, the objects of other replicas too (only ours are spied on):
//! an object that becomes ours is not new, and the deletion of one that is not ours any more
//! still forgets it.

use std::collections::HashSet;
use std::sync::Arc;

use bosun_proto::v1 as pb;
use futures::FutureExt;
use parking_lot::Mutex;
use serde_json::Value;
use tokio_util::task::TaskTracker;

use super::context::ResourceContext;
use super::queues::{Coalesce, Queues};
use crate::cluster::watching::Seen;
use crate::object;

/// One object's event for its spies.
#[derive(Debug, Clone, PartialEq)]
struct Event {
    etype: &'static str,
    body: Value,
}

impl Coalesce for Event {
    /// The newest body; the type of the newest event, but for an object the spies have not
    /// seen yet (listed or ADDED, then MODIFIED): that stays its first sight.
    fn absorb(&mut self, newer: Event) {
        let first_sight = matches!(self.etype, "" | "ADDED") && newer.etype == "MODIFIED";
        if !first_sight {
            self.etype = newer.etype;
        }
        self.body = newer.body;
    }
}

/// The spy queues of one resource.
#[derive(Clone)]
pub struct Spies {
    ctx: Arc<ResourceContext>,
    queues: Queues<Event>,
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
            Arc::new(move |event: Event| {
                let ctx = ctx.clone();
                async move { spy(&ctx, event.etype, &event.body).await }.boxed()
            })
        };
        Spies { ctx, queues: Queues::new(work, tasks, stop), known: Arc::default() }
    }

    /// Takes in a watch event of the resource; queues it for the spies that match the object
    /// when the object is `ours` now.
    pub fn observe(&self, seen: &Seen, ours: bool) {
        if self.ctx.spies.is_empty() {
            return;
        }
        let etype = event_type(seen, &mut self.known.lock());
        let body = seen.body();
        if !ours || !self.ctx.spies.iter().any(|h| h.matches_object(body)) {
            return;
        }
        self.queues.push(super::queues::key_of(body), Event { etype, body: body.clone() });
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
    use std::time::Duration;

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

    #[test]
    fn events_that_wait_as_one_keep_the_newest_body_and_the_first_sight() {
        let ev = |etype: &'static str, v: u32| Event { etype, body: json!({"v": v}) };
        let cases = [
            (ev("ADDED", 1), ev("MODIFIED", 2), ev("ADDED", 2)),
            (ev("", 1), ev("MODIFIED", 2), ev("", 2)),
            (ev("MODIFIED", 1), ev("MODIFIED", 2), ev("MODIFIED", 2)),
            (ev("ADDED", 1), ev("DELETED", 2), ev("DELETED", 2)),
            (ev("MODIFIED", 1), ev("DELETED", 2), ev("DELETED", 2)),
        ];
        for (mut waiting, newer, want) in cases {
            waiting.absorb(newer);
            assert_eq!(waiting, want);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn objects_of_other_replicas_are_forgotten_when_deleted() {
        use super::super::tests::rig::{handler, ok, rig};
        let spy = handler("s", pb::HandlerKind::Event, Default::default());
        let r = rig(serde_json::Value::Null, vec![spy], vec![("s", Box::new(|_, _| ok()))]);
        let spies = Spies::new(r.ctx.clone(), TaskTracker::new(), r.ctx.stop.clone());
        let obj = |uid: &str| json!({"metadata": {"name": uid, "namespace": "ns", "uid": uid, "resourceVersion": "1"}});
        // a is ours, then handed over and deleted by its new owner's cycle; b is never ours.
        spies.observe(&Seen::Listed(obj("a")), true);
        spies.observe(&Seen::Upsert(obj("b")), false);
        spies.observe(&Seen::Upsert(obj("a")), false);
        spies.observe(&Seen::Deleted(obj("a")), false);
        spies.observe(&Seen::Deleted(obj("b")), false);
        assert!(spies.known.lock().is_empty(), "uids kept: {:?}", spies.known.lock());
        r.until("the spy saw a's listing", Duration::from_secs(5), |r| r.server.count("s") == 1).await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(r.server.count("s"), 1, "only what was ours is spied on");
    }
}
