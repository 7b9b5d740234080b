//! Per-object serial queues: never two cycles of one object at once, different objects in
//! parallel up to a bound; events that pile up while a cycle runs collapse to the newest;
//! workers of idle objects go away.

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Semaphore;
use tokio_util::task::TaskTracker;

use super::background::Background;
use super::context::ResourceContext;
use super::cycle;
use super::queues::{IDLE, Mailbox, Mailboxes, key_of};
use super::worker_state::{AfterCycle, Ended, Finished, Unechoed, Woken, WorkerState, completed_deletion, keep_newest};
use crate::cluster::watching::Seen;
use crate::object::{self, object_ref};

/// Routes watch events of one resource to per-object workers.
#[derive(Clone)]
pub struct Router {
    ctx: Arc<ResourceContext>,
    background: Arc<Background>,
    /// The newest event not yet taken by each object's worker.
    workers: Mailboxes<Option<Seen>>,
    limit: Arc<Semaphore>,
    tasks: TaskTracker,
    stop: tokio::sync::watch::Receiver<bool>,
    finished: Arc<Mutex<Finished>>,
    /// Retired workers' writes whose echo has not come.
    unechoed: Arc<Mutex<Unechoed>>,
}

impl Router {
    /// A router for one resource; `limit` bounds cycles in flight across all resources.
    pub fn new(ctx: Arc<ResourceContext>, limit: Arc<Semaphore>, tasks: TaskTracker, stop: tokio::sync::watch::Receiver<bool>) -> Router {
        Router {
            ctx,
            background: Arc::default(),
            workers: Mailboxes::default(),
            limit,
            tasks,
            stop,
            finished: Arc::default(),
            unechoed: Arc::default(),
        }
    }

    /// The timers and daemons of the resource.
    pub fn background(&self) -> &Background {
        &self.background
    }

    /// How many objects have a worker now.
    pub fn workers(&self) -> usize {
        self.workers.len()
    }

    /// Hands an event to its object's worker, starting one if needed.
    pub fn deliver(&self, seen: Seen) {
        if self.ctx.handlers.is_empty() {
            return; // Only spies or index handlers here: they have queues of their own.
        }
        // Objects that are not ours now (paused, another replica's) are left to their owner;
        // when ours again they are listed anew. Forget a deleted one all the same.
        let uid = object::meta_str(seen.body(), "uid");
        if !self.ctx.authority.owns(uid) {
            if matches!(seen, Seen::Deleted(_)) {
                self.ctx.seen.lock().remove(uid);
                self.ctx.memos.lock().remove(uid);
            }
            return;
        }
        // By uid, as Kopf keys its queues: an object deleted and created again under its name
        // is another object, with a worker, timers and daemons of its own (by name, the
        // deletion waiting in the mailbox would be replaced by the new object's body, and the
        // old one's daemons fed it).
        let key = key_of(seen.body());
        if let Some(mailbox) = self.workers.post(key.clone(), |pending| keep_newest(pending, seen)) {
            let me = self.clone();
            self.tasks.spawn(async move { me.work(key, mailbox).await });
        }
    }

    /// Lets the worker of `key` go if nothing is pending for it, keeping its last write while
    /// the write's echo has not come (for the object's next worker).
    fn retire(&self, key: &str, mailbox: &Mailbox<Option<Seen>>, state: &WorkerState) -> bool {
        self.unechoed.lock().keep(key, state, tokio::time::Instant::now());
        let gone = self.workers.retire(key, mailbox, Option::is_none);
        if !gone {
            self.unechoed.lock().forget(key);
        }
        gone
    }

    async fn work(self, key: String, mailbox: Arc<Mailbox<Option<Seen>>>) {
        let mut stop = self.stop.clone();
        let mut state = self.unechoed.lock().resume(&key, tokio::time::Instant::now());
        // A throttled object waits for its backoff or for a handler server to be back.
        let mut revivals = self.ctx.outages.revivals();
        let mut permit: Option<tokio::sync::OwnedSemaphorePermit> = None;
        let m = crate::metrics::global();
        let label = crate::metrics::ResourceLabels { resource: self.ctx.resource.metrics_label() };
        // Up while the object is throttled.
        let mut throttle_up: Option<crate::metrics::Up> = None;
        loop {
            let woke = if state.goes_on() {
                true
            } else {
                permit = None; // Never held while waiting.
                let (wake, idle) = (state.wake(), state.idle_for(IDLE));
                let winding = state.winding();
                tokio::select! {
                biased;
                _ = stop.changed() => return,
                _ = mailbox.posted() => false, // taken below, with what came meanwhile
                _ = tokio::time::sleep_until(wake.unwrap_or_else(tokio::time::Instant::now)), if wake.is_some() => {
                    state.on_woken(Woken::Timer);
                    true
                }
                _ = async { if let Some(n) = &winding { n.notified().await } }, if winding.is_some() => {
                    state.on_woken(Woken::Wound);
                    true
                }
                r = revivals.changed(), if state.throttled() => {
                    if r.is_err() {
                        state.on_revivals_closed();
                    } else {
                        // Its server is back: it goes on in its turn among those that waited.
                        // Another server's revival leaves it to its backoff.
                        state.on_revival(revivals.borrow_and_update().wake_after(&key), tokio::time::Instant::now());
                    }
                    continue;
                }
                // After a listing, 100,000 idle workers would cost ~100 MiB for 30 s: one
                // with nothing to do goes (see `WorkerState::idle_for`).
                _ = tokio::time::sleep(idle.unwrap_or_default()), if idle.is_some() => {
                    if self.retire(&key, &mailbox, &state) {
                        return;
                    }
                    continue;
                }
                }
            };
            // No handler runs before every index is populated (Kopf's guarantee).
            if !self.ctx.gate.is_open() {
                permit = None;
                tokio::select! {
                    _ = stop.changed() => return,
                    _ = self.ctx.gate.opened() => {}
                }
            }
            let gains = self.ctx.authority.generation().gained;
            let Some(seen) = state.on_event(mailbox.take(), woke, gains, &self.finished.lock()) else { continue };
            let (body, deleted) = (seen.body(), matches!(seen, Seen::Deleted(_)));
            // A cycle that goes on at once (after adding the finalizer) keeps its permit, so
            // an object that has begun is not queued behind every object that has not.
            if permit.is_none() {
                let _waiting = crate::metrics::Up::new(m.objects_waiting.get_or_create(&label).clone());
                permit = Some(self.limit.clone().acquire_owned().await.expect("the semaphore is never closed"));
            }
            if *stop.borrow() {
                return;
            }
            // Ours still? A cycle begins only through the authority, which counts it until it
            // ends, so that a handover to another replica waits for it.
            let uid = object::meta_str(body, "uid");
            let turn = if deleted { None } else { self.ctx.authority.begin(uid) };
            if !deleted && turn.is_none() {
                self.ctx.log.debug(Some(&object_ref(body)), "Not ours now (paused, or another replica's); left to its owner.");
                state.on_lost();
                (permit, throttle_up) = (None, None);
                if self.retire(&key, &mailbox, &state) {
                    return;
                }
                continue;
            }
            // A server that comes back during the cycle wakes the object after it.
            revivals.borrow_and_update();
            // Boxed: a worker that waits holds only its own few variables, not the space of
            // a whole cycle (which would be most of a worker's memory, times every object).
            let running = crate::metrics::Up::new(m.cycles_in_flight.get_or_create(&label).clone());
            let cycle = Box::pin(cycle::process(&self.ctx, &self.background, body, deleted, turn.as_ref()));
            // A revocation abandons the cycle at once: its future is dropped, so the handler
            // call in flight is cancelled and nothing is written after it.
            let end = match &turn {
                Some(t) => tokio::select! {
                    biased;
                    _ = t.revoked() => None,
                    end = cycle => Some(end),
                },
                None => Some(cycle.await),
            };
            // Ours no more (revoked, or handed over meanwhile): what was written stays, and the
            // owner carries on from there; this worker forgets the object.
            let lost = turn.as_ref().is_some_and(|t| !t.is_current());
            drop((turn, running));
            let abandoned = end.is_none();
            let Some(end) = end.filter(|_| !lost) else {
                let why = if abandoned { "Ownership was revoked: the cycle is abandoned" } else { "Not ours now: the cycle stopped" };
                self.ctx.log.debug(Some(&object_ref(body)), &format!("{why}; its new owner carries on."));
                state.on_lost();
                (permit, throttle_up) = (None, None);
                if self.retire(&key, &mailbox, &state) {
                    return;
                }
                continue;
            };
            if let Some(w) = &end.written {
                self.background.refresh(&key, w);
                // Our finalizer taken off a deleting object: its deletion is complete, and
                // every body still to come that shows it otherwise is from before.
                if let Some((uid, rv)) = completed_deletion(w, self.ctx.storage.has_finalizer(w)) {
                    self.finished.lock().note(uid, rv, tokio::time::Instant::now());
                }
            }
            let ended = Ended {
                ran: seen,
                written: end.written,
                next: end.next,
                released: end.released,
                posted_meanwhile: mailbox.with(|pending| pending.is_some()),
                gains: self.ctx.authority.generation().gained,
            };
            let clock = &self.ctx.clock;
            let after = state.on_cycle_end(ended, tokio::time::Instant::now(), |t| clock.instant(t));
            if state.throttled() {
                m.throttles.get_or_create(&label).inc();
                throttle_up.get_or_insert_with(|| crate::metrics::Up::new(m.objects_throttled.get_or_create(&label).clone()));
            } else {
                throttle_up = None;
            }
            if after == AfterCycle::Retire && self.retire(&key, &mailbox, &state) {
                return;
            }
        }
    }
}
