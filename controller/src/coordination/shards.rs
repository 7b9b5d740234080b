//! Sharding (`--shards auto`): every replica holds a Lease of its own in a shard group (label
//! [`GROUP_LABEL`]), and the objects are spread over the live members by [`Ring`].
//!
//! Handover without double-handling: each member publishes in its Lease the members it acts
//! for ([`lease::VIEW_ANNOTATION`]). When the live members change, a member first stops
//! beginning cycles for what it gives away, waits until those in flight have ended
//! ([`Authority::settled`]), and only then publishes the new members; it handles an object it
//! gains only once its own Lease announces that, and no other live member's published
//! members still give the object to that member. Two members never both hold an object: each
//! writes its claim before it reads the others', and gives up nothing it has not finished.
//!
//! Under faults: a member is live for the others until a lease duration after they last saw
//! its Lease change ([`lease::Observed`], never its `renewTime` against their clock), and a
//! member stops handling — by force, its turns told to end — at the renew deadline after it
//! *sent* its last successful renewal ([`lease::Tenure`]), by a local timer that every request
//! is raced against. A member killed outright stops counting when its Lease expires so; one
//! that stops gracefully keeps renewing while its turns end, then deletes its Lease, and its
//! objects move at once.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use http::Method;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::Instant;
use xxhash_rust::xxh3::xxh3_64;

use super::drain::{Draining, drain};
use super::lease::{self, GROUP_LABEL, Observed, Record, Seat, Tenure};
use super::ring::{Ring, Rings};
use super::{Authority, Claims, Ownership};
use crate::clock::Clock;
use crate::cluster::{Api, content};
use crate::logs::Logger;
use crate::object;

/// The name of a member's Lease: the group, then a hash of the identity (identities such as
/// `user@host/time/rnd` are not valid object names).
pub fn lease_name(group: &str, identity: &str) -> String {
    format!("{group}-{:016x}", xxh3_64(identity.as_bytes()))
}

/// The Leases of a group as this member has seen them change, by name.
#[derive(Debug, Default)]
pub struct Sightings {
    leases: HashMap<String, Observed>,
    /// The member each Lease is for (by name): the last holder seen whose identity the name
    /// is made from.
    members: HashMap<String, String>,
}

/// The members of a group as their Leases say, judged at the local instant `now` by when
/// this member saw each change: live members (holder and published members) by identity, and
/// the names of Leases expired for longer than `forget` (to delete). A Lease is held for
/// `floor` (our own duration) at least after its last change, whatever it says. A Lease
/// counts for the member of `group` it is named for: one whose holder is someone else (a
/// broken or hostile write) keeps its member live until it expires, as if unchanged, and never
/// makes a member of its holder (its member, still counting on its tenure, would share objects
/// with the others at once otherwise). The third value says whether a held Lease could not be
/// told whose it is (a holder it is not named for, never seen otherwise): the group is then
/// unknown, and no member should take objects by it.
pub fn members(
    leases: &[Value],
    group: &str,
    seen: &mut Sightings,
    now: Instant,
    floor: std::time::Duration,
    forget: std::time::Duration,
) -> (BTreeMap<String, Vec<String>>, Vec<String>, bool) {
    let mut unknown = false;
    let mut live = BTreeMap::new();
    let mut dead = Vec::new();
    let mut next = HashMap::new();
    for body in leases {
        let name = object::meta_str(body, "name");
        if name.is_empty() {
            continue;
        }
        let record = Record::parse(body);
        let mut observed = seen.leases.remove(name).unwrap_or_else(|| Observed::at_least(floor));
        observed.observe(Some(&record), now);
        if let Some(holder) = record.holder.as_deref().filter(|h| lease_name(group, h) == name) {
            seen.members.insert(name.to_string(), holder.to_string());
        }
        match observed.held() {
            Some((_, until)) if until > now => match seen.members.get(name) {
                Some(member) => {
                    live.insert(member.clone(), record.view.clone());
                }
                None => unknown = true,
            },
            held => {
                let since = held.map(|(_, until)| until).or(observed.since()).unwrap_or(now);
                if now >= since + forget {
                    dead.push(name.to_string());
                }
            }
        }
        next.insert(name.to_string(), observed);
    }
    seen.members.retain(|name, _| next.contains_key(name));
    seen.leases = next;
    (live, dead, unknown)
}

/// The live members of a group by their Leases' `renewTime` against our wall clock `now`:
/// for reports to people ([`super::roster`]), never for ownership.
/// Sorted, without repeats.
pub fn members_by_wall(leases: &[Value], now: DateTime<Utc>) -> Vec<String> {
    let mut live: Vec<String> = leases.iter().map(Record::parse).filter(|r| r.is_held(now)).filter_map(|r| r.holder).collect();
    live.sort();
    live.dedup();
    live
}

/// What a member owns, given the live members (ours included, if our Lease is fresh) and what
/// it has published; none when its Lease is not fresh. The live members, us included, are
/// `target.members()`. Rings come from `rings` (built only for new member lists).
pub fn decide(me: &str, live: &BTreeMap<String, Vec<String>>, published: &[String], fresh: bool, rings: &mut Rings) -> Option<Claims> {
    if !fresh {
        return None;
    }
    let target = rings.get(live.keys().map(String::as_str).chain([me]));
    let others = live.iter().filter(|(m, _)| m.as_str() != me).map(|(m, view)| (m.clone(), rings.get(view))).collect();
    let published = rings.get(published);
    rings.sweep();
    Some(Claims { me: me.into(), target, published, others })
}

/// What ended a request raced against the timers.
enum Raced<T> {
    Answered(T),
    Quit,
}

/// A member of a shard group between two looks.
pub struct Member {
    seat: Seat,
    api: Arc<dyn Api>,
    authority: Authority,
    log: Logger,
    clock: Clock,
    /// Our Lease as last written.
    own: Option<Record>,
    /// Until when we may act on it.
    tenure: Tenure,
    /// The group's Leases as we saw them change.
    sightings: Sightings,
    /// The rings of the last decision.
    rings: Rings,
    /// The members we announced.
    published: Vec<String>,
    /// The live members as last looked at (for the log).
    seen: Vec<String>,
    /// Requests give up when this flips (the run loop's stop).
    stop: Option<watch::Receiver<bool>>,
    /// Requests give up then (the leave's bound).
    give_up: Option<Instant>,
    /// Leaving: never own anything again.
    leaving: bool,
}

impl Member {
    /// A member that owns nothing until it has joined.
    pub fn new(seat: Seat, api: Arc<dyn Api>, authority: Authority, log: Logger, clock: Clock) -> Member {
        Member {
            seat,
            api,
            authority,
            log,
            clock,
            own: None,
            tenure: Tenure::default(),
            sightings: Sightings::default(),
            rings: Rings::default(),
            published: Vec::new(),
            seen: Vec::new(),
            stop: None,
            give_up: None,
            leaving: false,
        }
    }

    fn own_path(&self) -> String {
        lease::path(&self.seat.namespace, Some(&lease_name(&self.seat.name, &self.seat.identity)))
    }

    /// The renew deadline's timer fired (or may have): if our tenure just lapsed, nothing is
    /// ours any more, by force.
    fn check_deadline(&mut self) {
        if self.tenure.lapse(Instant::now()) {
            self.log.warn(None, "Could not renew the shard Lease in time; handling no objects until it is renewed.");
            crate::metrics::global().set_holding_until(None);
            self.authority.revoke();
        }
    }

    /// Awaits `request`, meanwhile firing the renew deadline's timer; gives up when the loop
    /// stops or the leave's bound passes.
    async fn race<T>(&mut self, request: impl Future<Output = T>) -> Raced<T> {
        let mut request = std::pin::pin!(request);
        loop {
            let deadline = self.tenure.deadline();
            let mut stop = self.stop.clone();
            let give_up = self.give_up;
            tokio::select! {
                r = &mut request => return Raced::Answered(r),
                _ = sleep_until(deadline), if deadline.is_some() => self.check_deadline(),
                _ = async { match stop.as_mut() { Some(s) => super::drain::stopped(s).await, None => std::future::pending().await } } => return Raced::Quit,
                _ = sleep_until(give_up), if give_up.is_some() => return Raced::Quit,
            }
        }
    }

    /// Writes our Lease (renewing it, announcing `published`). False when it gave up.
    async fn renew(&mut self) -> bool {
        let g = &self.seat;
        let name = lease_name(&g.name, &g.identity);
        let labels = json!({GROUP_LABEL: g.name});
        let body = lease::body(
            (&g.namespace, &name),
            Some(&g.identity),
            &g.timing,
            self.clock.now(),
            self.own.as_ref(),
            &labels,
            Some(&self.published),
        );
        let (api, base, path, create) = (self.api.clone(), lease::path(&g.namespace, None), self.own_path(), self.own.is_none());
        let sent = Instant::now();
        let written = self.race(async move {
            if create {
                api.create(&base, &body).await
            } else {
                let bytes = serde_json::to_vec(&body).expect("JSON values serialize");
                api.request(Method::PUT, &path, Some(content::JSON), Some(bytes)).await
            }
        });
        match written.await {
            Raced::Quit => return false,
            Raced::Answered(Ok(b)) => {
                self.own = Some(Record::parse(&b));
                self.tenure.wrote(sent, Instant::now(), &self.seat.timing);
                self.authority.hold_until(self.tenure.deadline());
            }
            Raced::Answered(Err(e)) if matches!(e.code(), Some(409 | 404)) => {
                // Stale, or deleted (as dead) by a member that lost sight of us: read it again.
                let (api, path) = (self.api.clone(), self.own_path());
                match self.race(async move { api.get(&path).await }).await {
                    Raced::Quit => return false,
                    Raced::Answered(read) => self.own = read.ok().map(|b| Record::parse(&b)),
                }
            }
            Raced::Answered(Err(e)) => self.log.warn(None, &format!("Cannot renew the shard Lease of {}: {e}.", self.seat.identity)),
        }
        self.check_deadline();
        true
    }

    /// Renews our Lease, looks at the group, and tells the authority what is ours. Returns
    /// the live members when we announce fewer or other ones (a handover to finish).
    pub async fn look(&mut self) -> Option<Vec<String>> {
        if !self.renew().await {
            return None;
        }
        let (api, path) = (self.api.clone(), lease::group_path(&self.seat.namespace, &self.seat.name));
        let leases = match self.race(async move { api.get(&path).await }).await {
            Raced::Quit => return None,
            Raced::Answered(Ok(list)) => list["items"].as_array().cloned().unwrap_or_default(),
            Raced::Answered(Err(e)) => {
                self.log.warn(None, &format!("Cannot list the shard group '{}': {e}.", self.seat.name));
                self.judge(None);
                return None;
            }
        };
        let timing = self.seat.timing;
        let (live, dead, unknown) =
            members(&leases, &self.seat.name, &mut self.sightings, Instant::now(), timing.duration, timing.duration * 2);
        for name in dead {
            let (api, path) = (self.api.clone(), lease::path(&self.seat.namespace, Some(&name)));
            match self.race(async move { api.request(Method::DELETE, &path, None, None).await }).await {
                Raced::Answered(Ok(_)) => self.log.info(None, &format!("Deleted the expired shard Lease {name}.")),
                Raced::Answered(Err(_)) => {}
                Raced::Quit => return None,
            }
        }
        let fresh = self.tenure.holds(Instant::now()) && !self.leaving;
        // Gains count once our Lease announces them: the members it holds as we last wrote or
        // read it, not the ones we mean to publish (that write may have failed).
        let me = self.seat.identity.as_str();
        let announced = self.own.as_ref().filter(|r| r.holder.as_deref() == Some(me)).map(|r| r.view.clone()).unwrap_or_default();
        if unknown {
            // Whose a held Lease is cannot be told yet (its member renews it within its
            // period, or it expires): no objects change hands by a group not known whole.
            self.log
                .debug(None, &format!("A Lease of the shard group '{}' is held by someone it is not named for; waiting.", self.seat.name));
            self.judge(None);
            return None;
        }
        let claims = decide(me, &live, &announced, fresh, &mut self.rings);
        let target = claims.as_ref().map(|c| c.target.members().to_vec());
        self.judge(claims);
        target.filter(|t| *t != self.published)
    }

    fn judge(&mut self, claims: Option<Claims>) {
        self.check_deadline();
        let Some(claims) = claims else {
            if !self.tenure.holds(Instant::now()) || self.leaving {
                self.authority.set_ownership(Ownership::Nothing);
            }
            return;
        };
        let target = claims.target.members();
        if target != self.seen {
            let n = target.len();
            self.log.info(
                None,
                &format!(
                    "Shard group '{}' has {n} member(s) now: {}; this replica handles about 1/{n} of the objects.",
                    self.seat.name,
                    target.join(", ")
                ),
            );
            self.seen = target.to_vec();
            crate::metrics::global().shard_members.set(n as i64);
        }
        crate::metrics::global().set_holding_until(self.tenure.deadline());
        self.authority.hold_until(self.tenure.deadline());
        self.authority.set_ownership(Ownership::Shard(Arc::new(claims)));
    }

    /// Looks every [`lease::Timing::retry`]; after a membership change, announces the new members as
    /// soon as what this member gave away has settled. On stop, deletes its Lease.
    pub async fn run(mut self, stop: watch::Receiver<bool>) {
        self.stop = Some(stop.clone());
        let mut handover: Option<Vec<String>> = None;
        // When members were last announced: the look at once after an announcement happens
        // once per retry period, so that a group whose members flap between two looks (each
        // look, instant against a quick API server, finding another handover) is looked at
        // every retry period instead of in a loop that never lets time pass.
        let mut announced: Option<Instant> = None;
        loop {
            // Stopped, or its stop's sender is gone (the coordinator dropped without a stop):
            // either way this member is done, and `stopped` would resolve at once from now on.
            if *stop.borrow() || stop.has_changed().is_err() {
                break;
            }
            let at_once = announced.is_none_or(|t| t.elapsed() >= self.seat.timing.retry);
            let (authority, pending) = (self.authority.clone(), handover.is_some() && at_once);
            let settled = async move {
                match pending {
                    true => authority.settled().await,
                    false => std::future::pending().await,
                }
            };
            let mut quit = stop.clone();
            let stopping = async move { super::drain::stopped(&mut quit).await };
            let woke = self.pause(async move {
                tokio::select! {
                    _ = settled => {}
                    _ = stopping => {}
                }
            });
            if woke.await {
                if *stop.borrow() || stop.has_changed().is_err() {
                    break;
                }
                // Every cycle of what we gave away has ended: announce the new members
                // and look again at once (our gains count from now).
                self.published = handover.take().unwrap_or_default();
                announced = Some(Instant::now());
            }
            handover = self.look().await;
        }
        self.stop = None;
        self.leave().await;
    }

    /// Joins: looks until the first handover (nothing given away yet) is announced.
    pub async fn join(&mut self) {
        if let Some(target) = self.look().await {
            self.authority.settled().await;
            self.published = target;
            self.look().await;
        }
    }

    /// Leaves the group: owns nothing and keeps renewing its Lease while what still runs ends
    /// (revoking it if it outlasts a lease duration), then deletes the Lease so the others take
    /// over at once; if something still runs a duration after the revocation, the Lease is
    /// left to expire instead.
    pub async fn leave(&mut self) {
        self.leaving = true;
        self.authority.set_ownership(Ownership::Nothing);
        crate::metrics::global().set_holding_until(None);
        let (authority, log, duration) = (self.authority.clone(), self.log.clone(), self.seat.timing.duration);
        if !drain(self, &authority, duration, &log, "shard Lease", "deleted").await {
            return;
        }
        self.tenure.end();
        if self.own.take().is_some() {
            self.give_up = Some(Instant::now() + self.seat.timing.renew_deadline);
            let (api, path) = (self.api.clone(), self.own_path());
            match self.race(async move { api.request(Method::DELETE, &path, None, None).await }).await {
                Raced::Answered(Ok(_)) => self.log.info(None, &format!("Left the shard group '{}'.", self.seat.name)),
                Raced::Answered(Err(e)) => self.log.warn(None, &format!("Could not delete the shard Lease ({e}); it expires by itself.")),
                Raced::Quit => self.log.warn(None, "Could not delete the shard Lease in time; it expires by itself."),
            }
        }
    }
}

impl Draining for Member {
    fn retry(&self) -> std::time::Duration {
        self.seat.timing.retry
    }

    fn renew_deadline(&self) -> Option<Instant> {
        self.tenure.deadline()
    }

    fn deadline_passed(&mut self) {
        self.check_deadline();
    }

    async fn renew_once(&mut self) {
        if self.own.is_some() {
            self.renew().await;
        }
    }

    fn give_up_at(&mut self, at: Instant) {
        self.give_up = Some(at);
    }
}

/// Sleeps until `at` (forever when none).
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Counts, for `bosun shards`, how many of these uids each live member owns.
pub fn counts<'a>(live: &[String], uids: impl Iterator<Item = &'a str>) -> BTreeMap<String, usize> {
    let ring = Ring::new(live);
    let mut out: BTreeMap<String, usize> = live.iter().map(|m| (m.clone(), 0)).collect();
    for uid in uids {
        if let Some(owner) = ring.owner(uid) {
            *out.entry(owner.to_string()).or_default() += 1;
        }
    }
    out
}
