//! Per-object serial queues: never two cycles of one object at once, different objects in
//! parallel up to a bound; events that pile up while a cycle runs collapse to the newest;
//! workers of idle objects go away.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::Semaphore;
use tokio_util::task::TaskTracker;

use super::background::Background;
use super::context::ResourceContext;
use super::queues::{IDLE, Mailbox, Mailboxes};
use crate::cluster::watching::Seen;
use crate::object::{self, object_key, object_ref};
use crate::state::plan::{Next, deletion_requested};

/// Kopf's throttling of framework-level failures per object: Fibonacci seconds up to 610.
const THROTTLE: [u64; 15] = [1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610];

/// The throttling delay after `failures` failures in a row (from 1).
pub fn throttle_delay(failures: usize) -> Duration {
    Duration::from_secs(THROTTLE[failures.saturating_sub(1).min(THROTTLE.len() - 1)])
}

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
    finished: Arc<Finished>,
}

/// How long an object whose deletion this controller completed is remembered: longer than a
/// watch lags or a listing takes to arrive.
const FINISHED_FOR: Duration = Duration::from_secs(300);

/// The objects whose deletion this controller completed (it took its finalizer off), by uid,
/// with that write's resourceVersion (the API server answers it unchanged) and when. A body
/// that still shows one of them with our finalizer is stale (a watch behind, a listing taken
/// before the write, events queued while the cycle ran): handling it would call the delete
/// handlers of an object that is gone.
#[derive(Default)]
struct Finished(Mutex<HashMap<String, (u64, tokio::time::Instant)>>);

impl Finished {
    fn note(&self, uid: &str, rv: Option<u64>) {
        let Some(rv) = rv else { return };
        let now = tokio::time::Instant::now();
        let mut done = self.0.lock();
        done.retain(|_, (_, at)| now.duration_since(*at) < FINISHED_FOR);
        done.insert(uid.to_string(), (rv, now));
    }

    fn is_stale(&self, uid: &str, rv: Option<u64>) -> bool {
        matches!((self.0.lock().get(uid), rv), (Some((done, _)), Some(rv)) if rv <= *done)
    }
}

fn rv_of(body: &Value) -> Option<u64> {
    object::meta(body, "resourceVersion").and_then(Value::as_str).and_then(|s| s.parse().ok())
}

/// Keeps in `latest` the newer of it and `incoming`: an event older than the body a write
/// returned (a slow watch, the write's own echo) must not replace it. A deletion always does.
fn keep_newest(latest: &mut Option<Seen>, incoming: Seen) {
    let have = latest.as_ref().and_then(|l| rv_of(l.body()));
    let older = matches!((have, rv_of(incoming.body())), (Some(have), Some(new)) if new < have);
    if !older || matches!(incoming, Seen::Deleted(_)) {
        *latest = Some(incoming);
    }
}

/// Whether a body of version `rv` is our last write's echo or older than it, `written`: skipped
/// then, as the written body is newer. After a gain (`regained`), the body of our own last
/// write, listed again, is handled: its timers and daemons were stopped when it was lost.
fn is_echo(rv: Option<u64>, written: Option<u64>, regained: bool) -> bool {
    matches!((rv, written), (Some(a), Some(b)) if a < b || (a == b && !regained))
}

impl Router {
    /// A router for one resource; `limit` bounds cycles in flight across all resources.
    pub fn new(ctx: Arc<ResourceContext>, limit: Arc<Semaphore>, tasks: TaskTracker, stop: tokio::sync::watch::Receiver<bool>) -> Router {
        Router { ctx, background: Arc::default(), workers: Mailboxes::default(), limit, tasks, stop, finished: Arc::default() }
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
        let key = object_key(seen.body());
        if let Some(mailbox) = self.workers.post(key.clone(), |pending| keep_newest(pending, seen)) {
            let me = self.clone();
            self.tasks.spawn(async move { me.work(key, mailbox).await });
        }
    }

    async fn work(self, key: String, mailbox: Arc<Mailbox<Option<Seen>>>) {
        let mut stop = self.stop.clone();
        let mut latest: Option<Seen> = None;
        let mut written_rv: Option<u64> = None;
        // The authority's gains when `written_rv` was written: an object listed again after a
        // gain is no echo, even with that version (its timers and daemons were stopped when
        // it was lost, and the relist is what starts them again).
        let mut written_gains = 0u64;
        let mut wake: Option<tokio::time::Instant> = None;
        let mut failures = 0usize;
        let mut again = false;
        // Stopped daemons of the object that have not ended yet: their end wakes it.
        let mut released: Option<Arc<tokio::sync::Notify>> = None;
        // A throttled object waits for its backoff or for a handler server to be back.
        let mut revivals = self.ctx.outages.revivals();
        let mut throttled = false;
        let mut permit: Option<tokio::sync::OwnedSemaphorePermit> = None;
        let m = crate::metrics::global();
        let label = crate::metrics::ResourceLabels { resource: self.ctx.resource.metrics_label() };
        // Up while the object is throttled.
        let mut throttle_up: Option<crate::metrics::Up> = None;
        loop {
            let woke = if std::mem::take(&mut again) {
                true
            } else {
                permit = None; // Never held while waiting.
                let winding = released.clone();
                tokio::select! {
                biased;
                _ = stop.changed() => return,
                _ = mailbox.posted() => false, // taken below, with what came meanwhile
                _ = tokio::time::sleep_until(wake.unwrap_or_else(tokio::time::Instant::now)), if wake.is_some() => {
                    wake = None;
                    true
                }
                _ = async { if let Some(n) = &winding { n.notified().await } }, if winding.is_some() => {
                    released = None;
                    wake = None;
                    true
                }
                r = revivals.changed(), if throttled => {
                    if r.is_err() {
                        throttled = false;
                        continue; // No more revivals: the backoff decides.
                    }
                    // Its server is back: it goes on in its turn among those that waited.
                    // Another server's revival leaves it to its backoff.
                    if let Some(after) = revivals.borrow_and_update().wake_after(&key) {
                        let turn = tokio::time::Instant::now() + after;
                        throttled = false;
                        wake = Some(wake.map_or(turn, |w| w.min(turn)));
                    }
                    continue;
                }
                // A worker stays a while after its object's own write, to know the write's
                // echo from the watch for what it is, or while the object fails; otherwise it
                // goes at once: after a listing, 100,000 idle workers cost ~100 MiB for 30 s.
                _ = tokio::time::sleep(if written_rv.is_some() || failures > 0 { IDLE } else { Duration::ZERO }), if wake.is_none() && released.is_none() => {
                    if self.workers.retire(&key, &mailbox, Option::is_none) {
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
            if let Some(m) = mailbox.take() {
                keep_newest(&mut latest, m);
            }
            let Some(seen) = latest.take() else { continue };
            let (body, deleted) = (seen.body(), matches!(seen, Seen::Deleted(_)));
            if !deleted && self.finished.is_stale(object::meta_str(body, "uid"), rv_of(body)) {
                // A body from before our write that completed its deletion: it is gone.
                continue;
            }
            let regained = self.ctx.authority.generation().gained != written_gains;
            if !woke && !deleted && is_echo(rv_of(body), written_rv, regained) {
                // An echo of our own write, or older: the written body is newer. It is kept
                // only for a cycle still to come (a retry, a throttled cycle, daemons' end).
                if wake.is_some() || throttled || released.is_some() {
                    latest = Some(seen);
                }
                continue;
            }
            let was_deleting = deletion_requested(body);
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
                (latest, wake, throttled, written_rv, permit, throttle_up, released) = (None, None, false, None, None, None, None);
                if self.workers.retire(&key, &mailbox, Option::is_none) {
                    return;
                }
                continue;
            }
            // A server that comes back during the cycle wakes the object after it.
            revivals.borrow_and_update();
            // Boxed: a worker that waits holds only its own few variables, not the space of
            // a whole cycle (which would be most of a worker's memory, times every object).
            let running = crate::metrics::Up::new(m.cycles_in_flight.get_or_create(&label).clone());
            let cycle = Box::pin(self.ctx.process(&self.background, body, deleted, turn.as_ref()));
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
                (latest, wake, throttled, written_rv, permit, throttle_up, released) = (None, None, false, None, None, None, None);
                if self.workers.retire(&key, &mailbox, Option::is_none) {
                    return;
                }
                continue;
            };
            released = end.released;
            // The watch event of a deletion that came while the cycle ran is older than our
            // write and is skipped as its echo; the written body shows it, so handle it now.
            let mut deletion_came = false;
            // Events that came while the cycle ran are older than its write, but they may
            // be someone else's change, which the written body holds: look at it again.
            let changed_meanwhile = end.written.is_some() && mailbox.with(|pending| pending.is_some());
            // Our finalizer taken off a deleting object: its deletion is complete, and every
            // body still to come that shows it otherwise is from before.
            if let Some(w) = &end.written
                && deletion_requested(w)
                && !self.ctx.storage.has_finalizer(w)
            {
                self.finished.note(object::meta_str(w, "uid"), rv_of(w));
            }
            latest = Some(match end.written {
                Some(w) => {
                    self.background.refresh(&key, &w);
                    written_rv = rv_of(&w);
                    written_gains = self.ctx.authority.generation().gained;
                    deletion_came = !was_deleting && deletion_requested(&w);
                    Seen::Upsert(w)
                }
                None => seen,
            });
            let at = |t: chrono::DateTime<chrono::Utc>| self.ctx.clock.instant(t);
            throttled = matches!(end.next, Next::Throttled(_));
            failures = if throttled { failures + 1 } else { 0 };
            if throttled {
                m.throttles.get_or_create(&label).inc();
                throttle_up.get_or_insert_with(|| crate::metrics::Up::new(m.objects_throttled.get_or_create(&label).clone()));
            } else {
                throttle_up = None;
            }
            match end.next {
                Next::Idle | Next::WakeAt(_) if deletion_came || changed_meanwhile => {
                    wake = None;
                    again = true;
                }
                Next::Idle => {
                    // Nothing will look at the body before the next event (or the end of its
                    // stopped daemons), which replaces it: an idle object costs its worker's
                    // few words, not its body.
                    wake = None;
                    if released.is_none() {
                        latest = None;
                    }
                }
                Next::Now => {
                    wake = None;
                    again = true;
                }
                Next::WakeAt(t) => wake = Some(at(t)),
                Next::Throttled(earlier) => {
                    let backoff = tokio::time::Instant::now() + throttle_delay(failures);
                    wake = Some(earlier.map_or(backoff, |t| at(t).min(backoff)));
                }
                Next::Gone => {
                    if self.workers.retire(&key, &mailbox, Option::is_none) {
                        return;
                    }
                    // Events from before the object went (a watch behind, a relist) came
                    // meanwhile: `written_rv` stays, so they are skipped as older than the last
                    // write instead of handling an object that is gone. A new object of the
                    // same name comes with a newer version.
                    latest = None;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_echo_or_older_is_skipped_and_our_own_body_is_handled_after_a_gain() {
        let cases = [
            (Some(5), Some(7), false, true),
            (Some(5), Some(7), true, true),
            (Some(7), Some(7), false, true),
            (Some(7), Some(7), true, false),
            (Some(8), Some(7), false, false),
            (Some(8), Some(7), true, false),
            (Some(7), None, false, false),
            (None, Some(7), false, false),
        ];
        for (rv, written, regained, want) in cases {
            assert_eq!(is_echo(rv, written, regained), want, "{rv:?} {written:?} {regained}");
        }
    }

    #[test]
    fn throttling_follows_fibonacci_up_to_610_seconds() {
        let cases = [(1, 1), (2, 1), (3, 2), (4, 3), (5, 5), (9, 34), (15, 610), (40, 610)];
        for (failures, secs) in cases {
            assert_eq!(throttle_delay(failures), Duration::from_secs(secs), "{failures}");
        }
    }

    #[test]
    fn the_newest_body_is_kept_and_a_deletion_always_wins() {
        let at = |rv: &str| serde_json::json!({"metadata": {"resourceVersion": rv}});
        let up = |rv: &str| Seen::Upsert(at(rv));
        let cases: [(Option<Seen>, Seen, &str); 6] = [
            (None, up("5"), "5"),
            (Some(up("5")), up("7"), "7"),
            (Some(up("7")), up("5"), "7"),
            (Some(up("7")), up("7"), "7"),
            (Some(up("7")), Seen::Deleted(at("6")), "6"),
            (Some(up("7")), Seen::Upsert(serde_json::json!({"metadata": {}})), ""),
        ];
        for (have, incoming, want) in cases {
            let mut latest = have;
            keep_newest(&mut latest, incoming);
            let got = latest.as_ref().and_then(|l| l.body()["metadata"]["resourceVersion"].as_str()).unwrap_or("");
            assert_eq!(got, want);
        }
    }
}
