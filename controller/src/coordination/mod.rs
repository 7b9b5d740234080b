//! Many controllers, one cluster: which objects this controller may handle now.
//!
//! Three things decide it, each in its own module, each a pure decision with a small loop
//! around it: [`peering`] (Kopf's: pause while a peer of higher priority is alive, as a
//! developer's `--dev` controller or `bosun freeze` asks), [`leader`] (one Lease, one leader:
//! followers keep their watches warm) and [`shards`] (a Lease per replica, objects spread over
//! the live replicas by the consistent hashing of [`ring`]). They write their verdicts into
//! the one [`Authority`] the runtime asks before every cycle, timer and daemon.
//!
//! The runtime keeps watching whatever the verdict: a paused controller resumes at once, and
//! when its share grows it lists the resource again ([`Generation::gained`]) so the objects
//! it takes over get their cycle, timers and daemons. A handover is never a double-handling:
//! a cycle starts only through [`Authority::begin`], which refuses objects no longer owned,
//! and [`Authority::settled`] tells when the cycles of the objects given away have ended.

pub mod identity;
pub mod leader;
pub mod lease;
pub mod peering;
pub mod ring;
pub mod roster;
pub mod shards;

#[cfg(test)]
mod hostile_tests;
#[cfg(test)]
mod leases_tests;

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use ring::Ring;

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
            (Ownership::Shard(a), Ownership::Shard(b)) => a != b,
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
            state: Mutex::new(State { paused: false, ownership, in_flight: HashMap::new(), revocation: CancellationToken::new() }),
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
        if s.paused || !s.ownership.owns(uid) {
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
        let revoked = std::mem::take(&mut s.revocation);
        drop(s);
        revoked.cancel();
        self.set_ownership(Ownership::Nothing);
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

    /// Whether the turn may still act (call a handler, write): not revoked, and its object
    /// is still this controller's (a voluntary handover stops a turn at its next step).
    pub fn is_current(&self) -> bool {
        !self.revoked.is_cancelled() && self.authority.owns(&self.uid)
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

/// How replicas of one operator share the objects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Replicas {
    /// Every replica handles every object (peering aside).
    #[default]
    Each,
    /// Only the holder of one Lease handles objects (`--leader-election`).
    LeaderElection(LeaseSetup),
    /// Each replica handles its share (`--shards auto`); the Leases share a name prefix.
    Shards(LeaseSetup),
}

/// Where the Lease(s) are and how long they last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseSetup {
    /// The Lease's name (the shard group's, with shards).
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// `leaseDurationSeconds`.
    pub duration: std::time::Duration,
}

/// How this controller takes part in peering (none: standalone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeeringSetup {
    /// The peering object's name (`default` unless `--peering`).
    pub name: String,
    /// Whether it must exist (`--peering NAME` given).
    pub mandatory: bool,
    /// Our priority (`--priority`, 666 with `--dev`).
    pub priority: i64,
    /// How long our record counts after each keepalive.
    pub lifetime: std::time::Duration,
}

impl Default for PeeringSetup {
    fn default() -> Self {
        PeeringSetup { name: "default".into(), mandatory: false, priority: 0, lifetime: peering::LIFETIME }
    }
}

/// How long one coordination request may take: 5 s, or a third of a Lease's duration when
/// that is shorter, so that a leader whose renewal hangs still stops handling within its
/// renew deadline, before anyone else may take over.
fn attempt_limit(replicas: &Replicas) -> std::time::Duration {
    let most = std::time::Duration::from_secs(5);
    match replicas {
        Replicas::Each => most,
        Replicas::LeaderElection(l) | Replicas::Shards(l) => most.min(lease::Timing::new(l.duration).duration / 3),
    }
}

/// Resolves once `stop` is true (or its sender is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Why coordination could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Peering could not start.
    #[error(transparent)]
    Peering(#[from] peering::Error),
}

/// The loops that keep the verdict current; stopped after the controller's cycles have ended
/// (then peering records are removed and Leases released).
pub struct Coordinator {
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    roster: roster::Roster,
}

impl Coordinator {
    /// Starts peering in each of `peering_scopes` (none: cluster-wide) and the replicas' Lease
    /// loop, reading wall time from `clock`; returns once the first verdict is in, so that no
    /// object is handled before.
    pub async fn start(
        cluster: &crate::cluster::Cluster,
        identity: &str,
        peering: Option<(&PeeringSetup, peering::Family, Vec<Option<String>>)>,
        replicas: &Replicas,
        authority: &Authority,
        log: &crate::logs::Logger,
        clock: crate::clock::Clock,
    ) -> Result<Coordinator, Error> {
        let (stop, stop_rx) = watch::channel(false);
        let mut tasks = Vec::new();
        // Coordination must see answers promptly: no long retries of server errors here, no
        // queueing behind the objects' writes, and an attempt ends well within a renewal.
        let api: Arc<dyn crate::cluster::Api> = Arc::new(cluster.for_coordination(attempt_limit(replicas)));
        let mut peerings = Vec::new();
        if let Some((setup, family, scopes)) = peering {
            let pauses = peering::Pauses::new(authority.clone());
            for namespace in scopes {
                let p = peering::Peering {
                    family,
                    name: setup.name.clone(),
                    namespace,
                    identity: identity.to_string(),
                    priority: setup.priority,
                    lifetime: setup.lifetime,
                    mandatory: setup.mandatory,
                };
                if let Some(k) = peering::Keepalive::start(p.clone(), api.clone(), pauses.clone(), log.clone(), clock).await? {
                    let changes = peering::watch_object(cluster.client().clone(), &p);
                    tasks.push(tokio::spawn(k.run(changes, stop_rx.clone())));
                    peerings.push(p);
                }
            }
        }
        match replicas {
            Replicas::Each => {}
            Replicas::LeaderElection(l) => {
                log.info(None, &format!("Leader election on the Lease {}/{} as {identity}.", l.namespace, l.name));
                let mut candidate =
                    leader::Candidate::new(lease::Seat::new(l, identity), api.clone(), authority.clone(), log.clone(), clock);
                candidate.look().await;
                tasks.push(tokio::spawn(candidate.run(stop_rx.clone())));
            }
            Replicas::Shards(l) => {
                log.info(None, &format!("Joining the shard group '{}' in {} as {identity}.", l.name, l.namespace));
                let mut member = shards::Member::new(lease::Seat::new(l, identity), api.clone(), authority.clone(), log.clone(), clock);
                member.join().await;
                tasks.push(tokio::spawn(member.run(stop_rx.clone())));
            }
        }
        let roster = roster::Roster::new(api, identity, peerings, replicas.clone(), clock);
        Ok(Coordinator { stop, tasks, roster })
    }

    /// How to find the other replicas once this one has stopped coordinating.
    pub fn roster(&self) -> roster::Roster {
        self.roster.clone()
    }

    /// Stops the loops: peering records removed, Leases released or deleted.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(me: &str, target: &[&str], published: &[&str], others: &[(&str, &[&str])]) -> Ownership {
        Ownership::Shard(Arc::new(Claims {
            me: me.into(),
            target: Ring::new(target),
            published: Ring::new(published),
            others: others.iter().map(|(m, r)| (m.to_string(), Ring::new(*r))).collect(),
        }))
    }

    /// The uids of 0..n that `ring` gives to `member`.
    fn of(ring: &[&str], member: &str, n: usize) -> Vec<String> {
        let ring = Ring::new(ring);
        (0..n).map(|i| format!("uid-{i}")).filter(|u| ring.owner(u) == Some(member)).collect()
    }

    #[test]
    fn a_member_owns_what_both_its_rings_give_it_and_no_other_member_still_claims() {
        let all = 400;
        // b joined: a's share under [a] is everything, under [a, b] about half.
        let a_now = of(&["a", "b"], "a", all);
        let b_now = of(&["a", "b"], "b", all);
        let cases: Vec<(&str, Ownership, &Vec<String>, bool)> = vec![
            // b has published [a, b] but a still claims everything under [a]: b waits.
            ("b waits for a", claims("b", &["a", "b"], &["a", "b"], &[("a", &["a"])]), &b_now, false),
            // a has published [a, b] too: b's share is b's.
            ("b takes over", claims("b", &["a", "b"], &["a", "b"], &[("a", &["a", "b"])]), &b_now, true),
            // b has not published its ring yet: its gains wait for that.
            ("b unannounced", claims("b", &["a", "b"], &[], &[("a", &["a", "b"])]), &b_now, false),
            // a keeps its half at once, before and after publishing.
            ("a keeps", claims("a", &["a", "b"], &["a"], &[("b", &[])]), &a_now, true),
            ("a gives away", claims("a", &["a", "b"], &["a"], &[("b", &[])]), &b_now, false),
        ];
        for (name, ownership, uids, want) in cases {
            assert!(!uids.is_empty(), "{name}");
            for uid in uids {
                assert_eq!(ownership.owns(uid), want, "{name}: {uid}");
            }
        }
    }

    #[test]
    fn gains_are_told_apart_from_losses() {
        let s1 = claims("a", &["a"], &["a"], &[]);
        let s2 = claims("a", &["a", "b"], &["a"], &[]);
        let cases = [
            (Ownership::All, Ownership::Nothing, false),
            (Ownership::Nothing, Ownership::All, true),
            (Ownership::Nothing, s1.clone(), true),
            (Ownership::All, s1.clone(), false),
            (s1.clone(), s2.clone(), true),
            (s1.clone(), s1.clone(), false),
            (s1.clone(), Ownership::All, true),
            (s2, Ownership::Nothing, false),
        ];
        for (from, to, want) in cases {
            assert_eq!(from.may_gain(&to), want, "{from:?} -> {to:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_turn_of_an_object_given_away_holds_settled_until_it_ends() {
        let authority = Authority::new(Ownership::All);
        let mut changes = authority.subscribe();
        let turn = authority.begin("u1").expect("ours");
        let other = authority.begin("u2").expect("ours");
        assert_eq!(authority.in_flight(), 2);
        authority.set_paused(true);
        assert!(changes.has_changed().unwrap());
        assert_eq!(*changes.borrow_and_update(), Generation { changed: 1, gained: 0 });
        assert!(authority.begin("u3").is_none(), "paused: nothing begins");
        let settled = tokio::spawn({
            let a = authority.clone();
            async move { a.settled().await }
        });
        tokio::task::yield_now().await;
        assert!(!settled.is_finished());
        drop(turn);
        tokio::task::yield_now().await;
        assert!(!settled.is_finished(), "u2 still runs");
        drop(other);
        tokio::time::timeout(std::time::Duration::from_secs(1), settled).await.expect("settled").unwrap();
        authority.set_paused(false);
        assert_eq!(*changes.borrow_and_update(), Generation { changed: 2, gained: 1 });
        assert!(authority.begin("u3").is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_revocation_ends_the_turns_begun_before_it_and_not_those_after() {
        let authority = Authority::new(Ownership::All);
        let before = authority.begin("u1").expect("ours");
        assert!(before.is_current());
        authority.revoke();
        tokio::time::timeout(std::time::Duration::from_secs(1), before.revoked()).await.expect("revoked at once");
        assert!(!before.is_current());
        assert_eq!(authority.ownership(), Ownership::Nothing);
        assert!(authority.begin("u1").is_none(), "nothing is ours after a revocation");
        authority.set_ownership(Ownership::All);
        let after = authority.begin("u1").expect("ours again");
        assert!(after.is_current());
        let late = tokio::time::timeout(std::time::Duration::from_secs(1), after.revoked()).await;
        assert!(late.is_err(), "a turn begun after the revocation goes on");
    }
}
