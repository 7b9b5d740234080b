//! The one verdict the runtime follows: which objects are this controller's now
//! ([`Ownership`], with a shard's [`Claims`]), whether it is paused, and what runs under it
//! ([`Turn`]): a cycle, timer or daemon begins only through [`Authority::begin`], and
//! [`Authority::settled`] tells when those of objects given away have ended.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use super::ring::{self, Ring};

/// Which objects this controller owns (peering's pause aside).
#[derive(Debug, Clone, PartialEq)]
pub enum Ownership {
    /// Every object: standalone, or the leader.
    All,
    /// None: a follower, or a shard member that lost its Lease.
    Nothing,
    /// Its share of a shard group.
    Shard(Arc<Claims>),
}

/// A shard member's share: objects the live members' ring gives it, that the ring it has
/// published gives it too (gains count only once announced), and that no other live member's
/// published ring still gives to that member (a member announces a ring only after the cycles
/// of what it gave away have ended).
#[derive(Debug, Clone, PartialEq)]
pub struct Claims {
    /// This member's identity.
    pub me: String,
    /// The ring of the live members, as this member sees them now.
    pub target: Ring,
    /// The ring this member has published in its Lease.
    pub published: Ring,
    /// The other live members and the ring each has published.
    pub others: Vec<(String, Ring)>,
}

impl Claims {
    /// Whether the object with this uid is this member's now.
    pub fn owns(&self, uid: &str) -> bool {
        let (me, h) = (Some(self.me.as_str()), ring::point(uid));
        self.target.owner_at(h) == me
            && self.published.owner_at(h) == me
            && self.others.iter().all(|(member, ring)| ring.owner_at(h) != Some(member.as_str()))
    }

    /// Whether some point of the hash space is ours under `self` and was not under `before`.
    ///
    /// Only rings that differ between the two can make a difference: on each arc between two
    /// consecutive points of those rings, each of them gives every point one owner, so one
    /// point per arc tells. Rings alike in both take part in neither side's answer there, which
    /// may call an arc a gain when they give it away on both sides (a needless relist), never
    /// the reverse. The work is proportional to the rings that changed.
    pub fn gains_over(&self, before: &Claims) -> bool {
        if self.me != before.me {
            return true;
        }
        // (ring before, ring after, whose: `me` must own it, or that member must not).
        let empty = Ring::default();
        let mut changed: Vec<(&Ring, &Ring, &str, bool)> = Vec::new();
        for (a, b) in [(&before.target, &self.target), (&before.published, &self.published)] {
            if a != b {
                changed.push((a, b, self.me.as_str(), true));
            }
        }
        let names: std::collections::BTreeSet<&str> = before.others.iter().chain(&self.others).map(|(m, _)| m.as_str()).collect();
        for m in names {
            let a = before.others.iter().find(|(o, _)| o == m).map_or(&empty, |(_, r)| r);
            let b = self.others.iter().find(|(o, _)| o == m).map_or(&empty, |(_, r)| r);
            if a != b {
                changed.push((a, b, m, false));
            }
        }
        let mut points: Vec<u64> = changed.iter().flat_map(|(a, b, _, _)| a.points().chain(b.points())).collect();
        points.sort_unstable();
        points.dedup();
        let holds = |ring: &Ring, who: &str, mine: bool, h: u64| {
            let owner = ring.owner_at(h);
            if mine { owner == Some(who) } else { owner != Some(who) }
        };
        points.into_iter().any(|h| {
            changed.iter().all(|(_, b, who, mine)| holds(b, who, *mine, h))
                && !changed.iter().all(|(a, _, who, mine)| holds(a, who, *mine, h))
        })
    }
}

impl Ownership {
    fn owns(&self, uid: &str) -> bool {
        match self {
            Ownership::All => true,
            Ownership::Nothing => false,
            Ownership::Shard(claims) => claims.owns(uid),
        }
    }

    /// Whether going from `self` to `next` may give this controller objects it did not have.
    fn may_gain(&self, next: &Ownership) -> bool {
        match (self, next) {
            (_, Ownership::Nothing) | (Ownership::All, _) => false,
            (Ownership::Nothing, _) | (Ownership::Shard(_), Ownership::All) => true,
            (Ownership::Shard(a), Ownership::Shard(b)) => b.gains_over(a),
        }
    }
}

/// Counts the changes of the verdict: every change, and those that may have given this
/// controller objects (then it lists its resources again).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Generation {
    /// Every change.
    pub changed: u64,
    /// Changes that may have added objects.
    pub gained: u64,
}

struct State {
    paused: bool,
    ownership: Ownership,
    /// Cycles, timers and daemons running, by uid.
    in_flight: HashMap<Box<str>, usize>,
    /// Cancelled (and replaced) when ownership is taken away by force: every turn begun
    /// before holds it.
    revocation: CancellationToken,
    /// Until when the ownership may be acted on (the tenure of the Lease it rests on); `None`:
    /// no bound. Past it no turn begins and no turn is current, even before the timer that
    /// revokes has run (after a process freeze, workers may wake first).
    until: Option<tokio::time::Instant>,
}

impl State {
    /// Whether the tenure the ownership rests on still holds now.
    fn within_tenure(&self) -> bool {
        self.until.is_none_or(|u| tokio::time::Instant::now() < u)
    }

    /// Whether the object with this uid may be acted on now: not paused, ours, within the
    /// tenure (what a turn needs to begin and to stay current).
    fn may_act(&self, uid: &str) -> bool {
        !self.paused && self.ownership.owns(uid) && self.within_tenure()
    }
}

struct Inner {
    state: Mutex<State>,
    changes: watch::Sender<Generation>,
    /// Notified whenever a turn ends.
    ended: Notify,
}

/// The verdict the runtime follows: paused or not, which objects are ours; and what runs now.
#[derive(Clone)]
pub struct Authority(Arc<Inner>);

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.0.state.lock();
        f.debug_struct("Authority").field("paused", &s.paused).field("ownership", &s.ownership).finish()
    }
}

impl Default for Authority {
    fn default() -> Self {
        Authority::new(Ownership::All)
    }
}

impl Authority {
    /// A verdict that starts with this ownership, not paused.
    pub fn new(ownership: Ownership) -> Authority {
        Authority(Arc::new(Inner {
            state: Mutex::new(State {
                paused: false,
                ownership,
                in_flight: HashMap::new(),
                revocation: CancellationToken::new(),
                until: None,
            }),
            changes: watch::channel(Generation::default()).0,
            ended: Notify::new(),
        }))
    }

    /// Whether the object with this uid may be handled now.
    pub fn owns(&self, uid: &str) -> bool {
        let s = self.0.state.lock();
        !s.paused && s.ownership.owns(uid)
    }

    /// The current ownership.
    pub fn ownership(&self) -> Ownership {
        self.0.state.lock().ownership.clone()
    }

    /// Starts handling the object with this uid, if it is ours: until the returned turn is
    /// dropped, [`Authority::settled`] waits for it should the object be given away.
    pub fn begin(&self, uid: &str) -> Option<Turn> {
        let mut s = self.0.state.lock();
        if !s.may_act(uid) {
            return None;
        }
        Some(self.count(&mut s, uid))
    }

    /// Counts one more turn of `uid` (under the state's lock, so that a verdict and the count
    /// change together).
    fn count(&self, s: &mut State, uid: &str) -> Turn {
        *s.in_flight.entry(uid.into()).or_default() += 1;
        Turn { authority: self.clone(), uid: uid.into(), revoked: s.revocation.clone() }
    }

    /// Takes every object away at once and tells every turn in flight to end now: ownership
    /// was lost by force (a Lease not renewed by its deadline), so another replica may take
    /// over soon and nothing of this one may still run then. Voluntary handovers use
    /// [`Authority::set_ownership`], which lets turns end by themselves.
    pub fn revoke(&self) {
        let mut s = self.0.state.lock();
        // Together under the lock: a turn that begins after this sees Nothing, so none can
        // begin with the new revocation while the old ownership still holds.
        let revoked = std::mem::take(&mut s.revocation);
        let changed = s.ownership != Ownership::Nothing;
        s.ownership = Ownership::Nothing;
        drop(s);
        revoked.cancel();
        if changed {
            self.announce(false);
        }
    }

    /// Pauses by force (peering, when our own keepalive cannot be written in time): nothing
    /// begins, and every turn in flight is told to end now, as with [`Authority::revoke`].
    /// Leaves the ownership as it is; [`Authority::set_paused`] resumes.
    pub fn pause_by_force(&self) {
        let mut s = self.0.state.lock();
        let revoked = std::mem::take(&mut s.revocation);
        let changed = !s.paused;
        s.paused = true;
        drop(s);
        revoked.cancel();
        if changed {
            crate::metrics::global().paused.set(1);
            self.announce(false);
        }
    }

    /// Bounds the ownership by the tenure of the Lease it rests on: past `until`, nothing may
    /// act on it (`None`: no bound). Set at every renewal, before the timer that revokes at
    /// that deadline.
    pub fn hold_until(&self, until: Option<tokio::time::Instant>) {
        self.0.state.lock().until = until;
    }

    /// Pauses or resumes (peering).
    pub fn set_paused(&self, paused: bool) {
        let mut s = self.0.state.lock();
        if s.paused == paused {
            return;
        }
        s.paused = paused;
        drop(s);
        crate::metrics::global().paused.set(i64::from(paused));
        self.announce(!paused);
    }

    /// Sets which objects are ours (leader election, shards).
    pub fn set_ownership(&self, next: Ownership) {
        let mut s = self.0.state.lock();
        if s.ownership == next {
            return;
        }
        let gained = s.ownership.may_gain(&next);
        s.ownership = next;
        drop(s);
        self.announce(gained);
    }

    /// Tells the followers of the verdict that it changed, and whether objects may have come.
    fn announce(&self, gained: bool) {
        self.0.changes.send_modify(|g| {
            g.changed += 1;
            g.gained += u64::from(gained);
        });
    }

    /// Follows the changes of the verdict.
    pub fn subscribe(&self) -> watch::Receiver<Generation> {
        self.0.changes.subscribe()
    }

    /// The verdict's changes so far.
    pub fn generation(&self) -> Generation {
        *self.0.changes.borrow()
    }

    /// How many cycles, timers and daemons run now.
    pub fn in_flight(&self) -> usize {
        self.0.state.lock().in_flight.values().sum()
    }

    /// How many of them run for objects that are not ours now (given away, or paused).
    pub fn unsettled(&self) -> usize {
        let s = self.0.state.lock();
        s.in_flight.iter().filter(|(uid, _)| s.paused || !s.ownership.owns(uid)).map(|(_, n)| n).sum()
    }

    /// Waits until nothing runs for objects that are not ours now.
    pub async fn settled(&self) {
        loop {
            let ended = self.0.ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if self.unsettled() == 0 {
                return;
            }
            ended.await;
        }
    }
}

/// One cycle, timer or daemon of one object, allowed by the [`Authority`]; ends when dropped.
#[derive(Debug)]
pub struct Turn {
    authority: Authority,
    uid: Box<str>,
    revoked: CancellationToken,
}

impl Turn {
    /// Resolves when this turn must end at once: ownership was revoked by force.
    pub fn revoked(&self) -> tokio_util::sync::WaitForCancellationFuture<'_> {
        self.revoked.cancelled()
    }

    /// The revocation this turn ends with (cancelled once ownership is revoked by force).
    pub fn revocation(&self) -> CancellationToken {
        self.revoked.clone()
    }

    /// Whether the turn may still act (call a handler, write): not revoked, and its object
    /// is still this controller's (a voluntary handover stops a turn at its next step).
    pub fn is_current(&self) -> bool {
        if self.revoked.is_cancelled() {
            return false;
        }
        self.authority.0.state.lock().may_act(&self.uid)
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let mut s = self.authority.0.state.lock();
        if let Some(n) = s.in_flight.get_mut(&self.uid) {
            *n -= 1;
            if *n == 0 {
                s.in_flight.remove(&self.uid);
            }
        }
        drop(s);
        self.authority.0.ended.notify_waiters();
    }
}

#[cfg(test)]
#[path = "authority_tests.rs"]
mod tests;
