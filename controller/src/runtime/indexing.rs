//! In-memory indices (Kopf's `@kopf.index`). The index lives in the handler server, beside
//! the handler that fills it; the controller feeds it: every watch event of an object that
//! matches an INDEX handler's filters (the listing included) is sent to the handler, and when
//! the object is deleted or stops matching, the server is told to drop it. Nothing is stored
//! on the object and nothing is retried here: the server applies the handler's errors mode.
//!
//! Kopf's guarantee holds across resources: no other resource handler (changing handlers,
//! timers, daemons, spies, of any resource) is called before every index has seen the first
//! listing of its resource. The [`IndexGate`](super::gate::IndexGate) is that barrier: each served resource with index
//! handlers holds it until the objects of its first listing were all indexed. A server that
//! comes back after a restart has lost its indices, so its resources are listed and indexed
//! again (`runtime::Served`), holding the gate again meanwhile.
//!
//! Per object the controller keeps only which index handlers hold it (to tell the server to
//! drop it when it stops matching), and per-object queues keep the events of one object in
//! order, as for spies: while an object's index calls run, its newer events wait as one (the
//! newest body, each handler's last say), so memory follows the objects, not the events.

use std::collections::HashMap;
use std::sync::Arc;

use bosun_proto::v1 as pb;
use futures::FutureExt;
use parking_lot::Mutex;
use serde_json::Value;
use tokio_util::task::TaskTracker;

use super::context::ResourceContext;
use super::gate::GateHold;
use super::queues::{Coalesce, Queues};
use crate::cluster::watching::Seen;
use crate::object;
use crate::state::registry::Handler;

/// What one index handler is asked to do with one object's event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Call the handler and keep what it returns for the object (with this watch event type).
    Index(&'static str),
    /// Drop what the handler indexed for the object, without calling it.
    Drop,
}

/// What to send each index handler for an event, given which of them hold the object
/// (`held`, updated in place): matching objects are indexed, objects that are deleted or
/// stopped matching are dropped where they were held, and the rest is left alone.
pub fn decide(handlers: &[Arc<Handler>], held: &mut Vec<bool>, seen: &Seen) -> Vec<(usize, Op)> {
    held.resize(handlers.len(), false);
    let deleted = matches!(seen, Seen::Deleted(_));
    let mut ops = Vec::new();
    for (i, h) in handlers.iter().enumerate() {
        let matches = !deleted && h.matches_object(seen.body());
        match (matches, held[i]) {
            (true, was) => ops.push((
                i,
                Op::Index(match seen {
                    Seen::Listed(_) => "",
                    _ if was => "MODIFIED",
                    _ => "ADDED",
                }),
            )),
            (false, true) => ops.push((i, Op::Drop)),
            (false, false) => {}
        }
        held[i] = matches;
    }
    ops
}

/// One object's event for its index handlers.
#[derive(Debug, Clone, PartialEq)]
struct Item {
    body: Value,
    ops: Vec<(usize, Op)>,
    /// How many events of the first listing it stands for: the gate waits for them.
    listed: usize,
}

impl Coalesce for Item {
    /// The newest body, and each handler's last op; an object a handler has not indexed yet
    /// (listed or ADDED) stays so for it.
    fn absorb(&mut self, newer: Item) {
        for (i, op) in newer.ops {
            match self.ops.iter_mut().find(|(j, _)| *j == i) {
                Some((_, Op::Index("" | "ADDED"))) if op == Op::Index("MODIFIED") => {}
                Some((_, waiting)) => *waiting = op,
                None => self.ops.push((i, op)),
            }
        }
        self.body = newer.body;
        self.listed += newer.listed;
    }
}

/// How far the first listing of the resource is indexed.
struct Listing {
    /// Watch scopes whose first listing has not ended yet.
    scopes_left: usize,
    /// Listed objects not indexed yet.
    pending: usize,
    /// Listed objects indexed.
    done: usize,
    /// Released once the first listing is indexed.
    hold: Option<GateHold>,
}

/// The index handlers of one resource.
#[derive(Clone)]
pub struct Indexer {
    ctx: Arc<ResourceContext>,
    queues: Queues<Item>,
    held: Arc<Mutex<HashMap<String, Vec<bool>>>>,
    listing: Arc<Mutex<Listing>>,
}

impl Indexer {
    /// Indexing for a resource watched in `scopes` scopes; `hold` keeps the gate closed until
    /// their first listings are indexed.
    pub fn new(
        ctx: Arc<ResourceContext>,
        scopes: usize,
        hold: Option<GateHold>,
        tasks: TaskTracker,
        stop: tokio::sync::watch::Receiver<bool>,
    ) -> Indexer {
        let listing = Arc::new(Mutex::new(Listing { scopes_left: scopes, pending: 0, done: 0, hold }));
        let work = {
            let (ctx, listing) = (ctx.clone(), listing.clone());
            Arc::new(move |item: Item| {
                let (ctx, listing) = (ctx.clone(), listing.clone());
                async move {
                    for (i, op) in &item.ops {
                        call(&ctx, &ctx.indexers[*i], *op, &item.body).await;
                    }
                    if item.listed > 0 {
                        let mut l = listing.lock();
                        l.pending -= item.listed;
                        l.done += item.listed;
                        release_when_indexed(&mut l, &ctx);
                    }
                }
                .boxed()
            })
        };
        Indexer { ctx, queues: Queues::new(work, tasks, stop), held: Arc::default(), listing }
    }

    /// Queues a watch event for the index handlers it concerns.
    pub fn observe(&self, seen: &Seen) {
        if self.ctx.indexers.is_empty() {
            return;
        }
        let uid = object::meta_str(seen.body(), "uid").to_string();
        let ops = {
            let mut all = self.held.lock();
            let mut held = all.remove(&uid).unwrap_or_default();
            let ops = decide(&self.ctx.indexers, &mut held, seen);
            if held.iter().any(|h| *h) {
                all.insert(uid, held);
            }
            ops
        };
        if ops.is_empty() {
            return;
        }
        let listed = usize::from(matches!(seen, Seen::Listed(_)) && self.listing.lock().hold.is_some());
        self.listing.lock().pending += listed;
        self.queues.push(super::queues::key_of(seen.body()), Item { body: seen.body().clone(), ops, listed });
    }

    /// One watch scope delivered its first listing.
    pub fn listed(&self) {
        let mut l = self.listing.lock();
        l.scopes_left = l.scopes_left.saturating_sub(1);
        release_when_indexed(&mut l, &self.ctx);
    }
}

fn release_when_indexed(l: &mut Listing, ctx: &ResourceContext) {
    if l.scopes_left == 0 && l.pending == 0 && l.hold.take().is_some() {
        ctx.log.info(None, &format!("Indexed {} object(s) of {}; the other handlers may go on.", l.done, ctx.resource.display()));
    }
}

/// Sends one object's event to one index handler; failures are logged, not retried.
async fn call(ctx: &ResourceContext, h: &Handler, op: Op, body: &Value) {
    let event_type = match op {
        Op::Index(t) => t,
        Op::Drop => "DELETED",
    };
    let log = &ctx.log;
    ctx.call_unrecorded(h, pb::Reason::Index, event_type, body, |obj, ended| match ended {
        Err(failure) => log.warn(Some(obj), &format!("Handler '{}' {failure}; the index may miss this change of the object.", h.id)),
        Ok((pb::Outcome::Success, _)) => log.debug(Some(obj), &format!("Handler '{}' succeeded.", h.id)),
        Ok((pb::Outcome::Skipped, _)) => {}
        Ok((pb::Outcome::TemporaryError, message)) => log.warn(Some(obj), &format!("Handler '{}' failed temporarily: {message}", h.id)),
        Ok((pb::Outcome::PermanentError, message)) => log.error(Some(obj), &format!("Handler '{}' failed permanently: {message}", h.id)),
        Ok((pb::Outcome::UnexpectedError, message)) => {
            log.error(Some(obj), &format!("Handler '{}' failed with an exception: {message}", h.id))
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn handler(id: &str, label: Option<&str>) -> Arc<Handler> {
        let mut spec = pb::HandlerSpec {
            id: id.into(),
            kind: pb::HandlerKind::Index as i32,
            resource: Some(pb::ResourceSelector { name: "pods".into(), ..Default::default() }),
            ..Default::default()
        };
        if let Some(l) = label {
            let mut f = pb::Filters::default();
            f.labels.insert(l.into(), pb::ValueFilter { check: Some(pb::value_filter::Check::Present(true)) });
            spec.filters = Some(f);
        }
        Arc::new(Handler::from_spec(&spec, 0).unwrap())
    }

    #[test]
    fn objects_are_indexed_while_they_match_and_dropped_once_when_they_stop() {
        let hs = [handler("all", None), handler("app", Some("app"))];
        let plain = json!({"metadata": {"uid": "u"}});
        let app = json!({"metadata": {"uid": "u", "labels": {"app": "x"}}});
        use Op::*;
        // (held before, event, ops, held after)
        type Case = (Vec<bool>, Seen, Vec<(usize, Op)>, Vec<bool>);
        let cases: Vec<Case> = vec![
            (vec![], Seen::Listed(plain.clone()), vec![(0, Index(""))], vec![true, false]),
            (vec![], Seen::Listed(app.clone()), vec![(0, Index("")), (1, Index(""))], vec![true, true]),
            (vec![], Seen::Upsert(app.clone()), vec![(0, Index("ADDED")), (1, Index("ADDED"))], vec![true, true]),
            (vec![true, true], Seen::Upsert(app.clone()), vec![(0, Index("MODIFIED")), (1, Index("MODIFIED"))], vec![true, true]),
            (vec![true, true], Seen::Upsert(plain.clone()), vec![(0, Index("MODIFIED")), (1, Drop)], vec![true, false]),
            (vec![true, false], Seen::Deleted(plain.clone()), vec![(0, Drop)], vec![false, false]),
            (vec![false, false], Seen::Deleted(plain.clone()), vec![], vec![false, false]),
            (vec![true, false], Seen::Upsert(app.clone()), vec![(0, Index("MODIFIED")), (1, Index("ADDED"))], vec![true, true]),
        ];
        for (before, seen, want, after) in cases {
            let mut held = before.clone();
            let ops = decide(&hs, &mut held, &seen);
            assert_eq!((ops, held), (want, after), "{before:?} {seen:?}");
        }
    }

    #[test]
    fn events_that_wait_as_one_keep_each_handlers_last_op_and_every_listed_one() {
        use Op::*;
        let item = |v: u32, ops: Vec<(usize, Op)>, listed: usize| Item { body: json!({"v": v}), ops, listed };
        let cases = [
            (item(1, vec![(0, Index(""))], 1), item(2, vec![(0, Index("MODIFIED"))], 0), item(2, vec![(0, Index(""))], 1)),
            (item(1, vec![(0, Index("ADDED"))], 0), item(2, vec![(0, Index("MODIFIED"))], 0), item(2, vec![(0, Index("ADDED"))], 0)),
            (
                item(1, vec![(0, Index("MODIFIED")), (1, Index("MODIFIED"))], 0),
                item(2, vec![(0, Index("MODIFIED")), (1, Drop)], 0),
                item(2, vec![(0, Index("MODIFIED")), (1, Drop)], 0),
            ),
            (item(1, vec![(1, Drop)], 0), item(2, vec![(0, Index("ADDED"))], 0), item(2, vec![(1, Drop), (0, Index("ADDED"))], 0)),
            (item(1, vec![(0, Drop)], 0), item(2, vec![(0, Index("ADDED"))], 0), item(2, vec![(0, Index("ADDED"))], 0)),
            (item(1, vec![(0, Index("ADDED"))], 0), item(2, vec![(0, Drop)], 0), item(2, vec![(0, Drop)], 0)),
            // A first listing restarted midway lists an object twice: both count.
            (item(1, vec![(0, Index(""))], 1), item(1, vec![(0, Index("MODIFIED"))], 1), item(1, vec![(0, Index(""))], 2)),
        ];
        for (mut waiting, newer, want) in cases {
            waiting.absorb(newer);
            assert_eq!(waiting, want);
        }
    }

    #[tokio::test]
    async fn the_gate_opens_when_every_hold_is_dropped() {
        let gate = Arc::new(crate::runtime::gate::IndexGate::default());
        assert!(gate.is_open());
        let a = gate.hold("pods");
        let b = gate.hold("pods");
        let c = gate.hold("services");
        assert_eq!(gate.waiting_for(), vec!["pods", "services"]);
        drop(a);
        drop(c);
        assert!(!gate.is_open());
        assert_eq!(gate.waiting_for(), vec!["pods"]);
        let waiter = tokio::spawn({
            let gate = gate.clone();
            async move { gate.opened().await }
        });
        drop(b);
        waiter.await.unwrap();
        assert!(gate.is_open());
    }
}
