//! What one object's worker decides, apart from what it waits on: explicit state and pure
//! transitions, as `state::plan` is for a cycle. The worker (`worker.rs`) waits, asks the
//! authority, runs the cycle and tells this state what happened; this state says which body to
//! handle next, which to skip as an echo of the worker's own write, when to wake, and when the
//! worker may go.
//!
//! Echoes are told by resourceVersion, compared as Kubernetes defines it
//! ([`object::compare_versions`]); versions that are not comparable are told by equality alone.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::cluster::watching::Seen;
use crate::object;
use crate::state::plan::{Next, deletion_requested};

/// Kopf's throttling of framework-level failures per object: Fibonacci seconds up to 610.
const THROTTLE: [u64; 15] = [1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610];

/// The throttling delay after `failures` failures in a row (from 1).
pub fn throttle_delay(failures: usize) -> Duration {
    Duration::from_secs(THROTTLE[failures.saturating_sub(1).min(THROTTLE.len() - 1)])
}

/// How long an object whose deletion this controller completed is remembered: longer than a
/// watch lags or a listing takes to arrive.
const FINISHED_FOR: Duration = Duration::from_secs(300);

/// How long a retired worker's last write is remembered while its echo has not come: longer
/// than a watch that died silently takes to be noticed and restarted (it then replays what it
/// missed, from before the write).
const UNECHOED_FOR: Duration = Duration::from_secs(600);

/// Whether `a` is known to be older than `b` (never when the versions are not comparable).
fn older(a: &str, b: &str) -> bool {
    object::compare_versions(a, b) == Some(std::cmp::Ordering::Less)
}

/// The objects whose deletion this controller completed (it took its finalizer off), by uid,
/// with that write's resourceVersion (the API server answers it unchanged) and when. A body
/// that still shows one of them at or before that version is stale (a watch behind, a listing
/// taken before the write, events queued while the cycle ran): handling it would call the
/// delete handlers of an object that is gone. One per resource, shared by its workers.
#[derive(Debug, Default)]
pub struct Finished(HashMap<String, (String, Instant)>);

impl Finished {
    /// Remembers that the deletion of `uid` completed with the write of version `rv`.
    pub fn note(&mut self, uid: &str, rv: Option<&str>, now: Instant) {
        let Some(rv) = rv else { return };
        self.0.retain(|_, (_, at)| now.duration_since(*at) < FINISHED_FOR);
        self.0.insert(uid.to_string(), (rv.to_string(), now));
    }

    /// Whether a body of `uid` at version `rv` is from before its deletion completed.
    pub fn is_stale(&self, uid: &str, rv: Option<&str>) -> bool {
        matches!((self.0.get(uid), rv), (Some((done, _)), Some(rv)) if rv == done || older(rv, done))
    }
}

/// Keeps in `latest` the newer of it and `incoming`: an event older than the body a write
/// returned (a slow watch, the write's own echo) must not replace it. A deletion always does;
/// so does a body whose version cannot be compared (it is the last to arrive).
pub fn keep_newest(latest: &mut Option<Seen>, incoming: Seen) {
    let have = latest.as_ref().and_then(|l| object::version(l.body()));
    let is_older = matches!((have, object::version(incoming.body())), (Some(have), Some(new)) if older(new, have));
    if !is_older || matches!(incoming, Seen::Deleted(_)) {
        *latest = Some(incoming);
    }
}

/// The last writes of retired workers whose echo the watch has not delivered yet, by object
/// key: a worker for the object started later takes its predecessor's over, so that events
/// from before that write (a watch behind, one restarted from an older version) are skipped
/// as the first worker would have skipped them, instead of being handled again as news (a
/// body without the diffbase the write stored would run the creation handlers again). Once
/// the echo came, nothing is kept: an idle object costs no memory here.
#[derive(Debug, Default)]
pub struct Unechoed {
    kept: HashMap<String, (Written, Instant)>,
    /// The size at which expired entries are dropped next: pruning at every retirement would
    /// walk the whole map each time (after a listing, every worker retires), so it is done
    /// when the map has doubled since (expired entries are never resumed meanwhile).
    prune_at: usize,
}

impl Unechoed {
    /// Keeps what `state` wrote, if its echo has not come.
    pub fn keep(&mut self, key: &str, state: &WorkerState, now: Instant) {
        let Some(w) = state.written.as_ref().filter(|_| state.awaits_echo()) else { return };
        if self.kept.len() >= self.prune_at {
            self.kept.retain(|_, (_, at)| now.duration_since(*at) < UNECHOED_FOR);
            self.prune_at = (self.kept.len() * 2).max(64);
        }
        self.kept.insert(key.to_string(), (w.clone(), now));
    }

    /// Takes back what was kept for `key` (its worker did not go after all).
    pub fn forget(&mut self, key: &str) {
        self.kept.remove(key);
    }

    /// The state a new worker for `key` starts with: its predecessor's unechoed write, if any.
    pub fn resume(&mut self, key: &str, now: Instant) -> WorkerState {
        let written = self.kept.remove(key).filter(|(_, at)| now.duration_since(*at) < UNECHOED_FOR).map(|(w, _)| w);
        WorkerState { resumed: written.is_some(), written, ..WorkerState::default() }
    }
}

/// Whether a body of version `rv` is our last write's echo or older than it, `written`: skipped
/// then, as the written body is newer. After a gain (`regained`), the body of our own last
/// write, listed again, is handled: its timers and daemons were stopped when it was lost.
pub fn is_echo(rv: Option<&str>, written: Option<&str>, regained: bool) -> bool {
    matches!((rv, written), (Some(a), Some(b)) if older(a, b) || (a == b && !regained))
}

/// Our last write: the version it returned and the authority's gains then. An object listed
/// again after a gain is no echo, even with that version.
#[derive(Debug, Clone, PartialEq)]
struct Written {
    rv: Option<String>,
    gains: u64,
}

/// What woke the worker, besides a posted event.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Woken {
    /// Its wake-up time came.
    Timer,
    /// Its stopped daemons ended.
    Wound,
}

/// What the worker does after a cycle.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AfterCycle {
    /// Waits (or goes on at once when [`WorkerState::goes_on`]).
    Carry,
    /// The object is gone: the worker retires if nothing is pending.
    Retire,
}

/// What a cycle ended with, as the worker saw it.
#[derive(Debug)]
pub struct Ended {
    /// The body the cycle ran for.
    pub ran: Seen,
    /// The body its last write returned.
    pub written: Option<Value>,
    /// What the cycle asks for next.
    pub next: Next,
    /// Its stopped daemons that have not ended yet: notified when the last one ends.
    pub released: Option<Arc<Notify>>,
    /// Events came while it ran.
    pub posted_meanwhile: bool,
    /// The authority's gains now.
    pub gains: u64,
}

/// One object's worker between its cycles.
#[derive(Debug, Default)]
pub struct WorkerState {
    /// The body to handle next, or the newest kept for a cycle still to come.
    latest: Option<Seen>,
    written: Option<Written>,
    /// The watch has delivered the last write's version, or a newer one.
    echoed: bool,
    /// Its last write is its predecessor's ([`Unechoed::resume`]).
    resumed: bool,
    wake: Option<Instant>,
    /// Framework-level failures in a row.
    failures: usize,
    /// The next cycle runs at once, without waiting.
    again: bool,
    /// Waiting for its backoff, or for its handler server to be back.
    throttled: bool,
    /// Stopped daemons of the object have not ended yet: their end (this is notified) wakes it.
    winding: Option<Arc<Notify>>,
}

impl WorkerState {
    /// Whether the next cycle runs at once (taken: asked once).
    pub fn goes_on(&mut self) -> bool {
        std::mem::take(&mut self.again)
    }

    /// When to wake for a retry, a delay or a backoff.
    pub fn wake(&self) -> Option<Instant> {
        self.wake
    }

    /// Whether it waits for its backoff or its handler server.
    pub fn throttled(&self) -> bool {
        self.throttled
    }

    /// What tells the end of its stopped daemons, while some have not ended yet.
    pub fn winding(&self) -> Option<Arc<Notify>> {
        self.winding.clone()
    }

    /// How long the worker stays with nothing to do, if it may go at all now: a while after
    /// its own write (to know the write's echo, and anything older, for what it is) or while the
    /// object fails; otherwise at once. Not while a wake-up or daemons' end is due.
    pub fn idle_for(&self, idle: Duration) -> Option<Duration> {
        (self.wake.is_none() && self.winding.is_none())
            .then(|| if self.stays_for_echo() || self.failures > 0 { idle } else { Duration::ZERO })
    }

    /// Whether its last write's echo has not come yet.
    fn awaits_echo(&self) -> bool {
        self.written.as_ref().is_some_and(|w| w.rv.is_some()) && !self.echoed
    }

    /// Whether it stays a while to know what comes for the echo of its last write, or older.
    /// After its own write, for the whole while even once the echo came: a listing taken
    /// before the write (a relist after a gain) may still deliver an older body. A worker
    /// started with its predecessor's write (which waited its while) goes once the echo came.
    fn stays_for_echo(&self) -> bool {
        self.written.as_ref().is_some_and(|w| w.rv.is_some()) && !(self.resumed && self.echoed)
    }

    /// Its wake-up time came, or its stopped daemons ended.
    pub fn on_woken(&mut self, woken: Woken) {
        if woken == Woken::Wound {
            self.winding = None;
        }
        self.wake = None;
    }

    /// A handler server came back: a throttled object that waited for it goes on `after` from
    /// `now` (in its turn among those that waited); `None`, it did not wait for that server.
    pub fn on_revival(&mut self, after: Option<Duration>, now: Instant) {
        if let Some(after) = after {
            let turn = now + after;
            self.throttled = false;
            self.wake = Some(self.wake.map_or(turn, |w| w.min(turn)));
        }
    }

    /// No more revivals will come: the backoff decides.
    pub fn on_revivals_closed(&mut self) {
        self.throttled = false;
    }

    /// The body to run a cycle for, given what was posted since (`pending`), whether a timer,
    /// daemons' end or the last cycle woke it (`woke`) rather than an event, and the
    /// authority's gains now. `None`: nothing to do (nothing new, a stale body, an echo).
    pub fn on_event(&mut self, pending: Option<Seen>, woke: bool, gains: u64, finished: &Finished) -> Option<Seen> {
        if let Some(p) = pending {
            let written = self.written.as_ref().and_then(|w| w.rv.as_deref());
            if let (Some(rv), Some(w)) = (object::version(p.body()), written) {
                self.echoed |= !older(rv, w);
            }
            keep_newest(&mut self.latest, p);
        }
        let seen = self.latest.take()?;
        let (body, deleted) = (seen.body(), matches!(seen, Seen::Deleted(_)));
        let rv = object::version(body);
        if !deleted && finished.is_stale(object::meta_str(body, "uid"), rv) {
            return None; // A body from before our write that completed its deletion: it is gone.
        }
        let written = self.written.as_ref();
        let regained = written.is_some_and(|w| w.gains != gains);
        if !woke && !deleted && is_echo(rv, written.and_then(|w| w.rv.as_deref()), regained) {
            // An echo of our own write, or older: the written body is newer. It is kept only
            // for a cycle still to come (a retry, a throttled cycle, daemons' end).
            if self.wake.is_some() || self.throttled || self.winding.is_some() {
                self.latest = Some(seen);
            }
            return None;
        }
        Some(seen)
    }

    /// The object is not ours now (paused, another replica's, revoked): its new owner carries
    /// on and this worker forgets it.
    pub fn on_lost(&mut self) {
        (self.latest, self.wake, self.throttled, self.written, self.winding) = (None, None, false, None, None);
    }

    /// A cycle ended with `ended`; `now` and `at` (a time as the clock's instant) place its
    /// wake-up.
    pub fn on_cycle_end(&mut self, ended: Ended, now: Instant, at: impl Fn(DateTime<Utc>) -> Instant) -> AfterCycle {
        self.winding = ended.released;
        let was_deleting = deletion_requested(ended.ran.body());
        // The watch event of a deletion that came while the cycle ran is older than our write
        // and is skipped as its echo; the written body shows it, so handle it now.
        let mut deletion_came = false;
        // Events that came while the cycle ran are older than its write, but they may be
        // someone else's change, which the written body holds: look at it again.
        let changed_meanwhile = ended.written.is_some() && ended.posted_meanwhile;
        self.latest = Some(match ended.written {
            Some(w) => {
                self.written = Some(Written { rv: object::version(&w).map(str::to_string), gains: ended.gains });
                (self.echoed, self.resumed) = (false, false);
                deletion_came = !was_deleting && deletion_requested(&w);
                Seen::Upsert(w)
            }
            None => ended.ran,
        });
        self.throttled = matches!(ended.next, Next::Throttled(_));
        self.failures = if self.throttled { self.failures + 1 } else { 0 };
        match ended.next {
            Next::Idle | Next::WakeAt(_) if deletion_came || changed_meanwhile => {
                self.wake = None;
                self.again = true;
            }
            Next::Idle => {
                // Nothing looks at the body before the next event (or the end of its stopped
                // daemons), which replaces it: an idle object costs its worker's few words,
                // not its body.
                self.wake = None;
                if self.winding.is_none() {
                    self.latest = None;
                }
            }
            Next::Now => {
                self.wake = None;
                self.again = true;
            }
            Next::WakeAt(t) => self.wake = Some(at(t)),
            Next::Throttled(earlier) => {
                let backoff = now + throttle_delay(self.failures);
                self.wake = Some(earlier.map_or(backoff, |t| at(t).min(backoff)));
            }
            Next::Gone => {
                // Events from before the object went (a watch behind, a relist) may come:
                // the last write's version stays, so they are skipped as older than it
                // instead of handling an object that is gone. A new object of the same name
                // comes with a newer version.
                self.latest = None;
                return AfterCycle::Retire;
            }
        }
        AfterCycle::Carry
    }
}

/// The uid and version of an object whose deletion the write that returned `written` completed
/// (a deleting object whose finalizer, `has_finalizer`, is off), if it did.
pub fn completed_deletion(written: &Value, has_finalizer: bool) -> Option<(&str, Option<&str>)> {
    (deletion_requested(written) && !has_finalizer).then(|| (object::meta_str(written, "uid"), object::version(written)))
}

#[cfg(test)]
#[path = "worker_state_tests.rs"]
mod tests;
