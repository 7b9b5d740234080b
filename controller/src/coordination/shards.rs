//! Sharding (`--shards auto`): every replica holds a Lease of its own in a shard group (label
//! [`GROUP_LABEL`]), and the objects are spread over the live members by [`Ring`].
//!
//! Handover without double-handling: each member publishes in its Lease the members it acts
//! for ([`lease::VIEW_ANNOTATION`]). When the live members change, a member first stops
//! beginning cycles for what it gives away, waits until those in flight have ended
//! ([`Authority::settled`]), and only then publishes the new members; it handles an object it
//! gains only once its own Lease announces that, and no other live member's published
//! members still give the object to that member. Two members never both hold an object: each
//! writes its claim before it reads the others', and gives up nothing it has not finished. A
//! member killed outright stops counting when its Lease expires; one that stops gracefully
//! deletes its Lease after its cycles, and its objects move at once.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use http::Method;
use serde_json::{Value, json};
use tokio::time::Instant;
use xxhash_rust::xxh3::xxh3_64;

use super::lease::{self, GROUP_LABEL, Record, Seat};
use super::ring::Ring;
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

/// The members of a group as their Leases say at `now`: live members (holder and published
/// members) by identity, and the names of Leases expired for longer than `forget` (to delete).
pub fn members(leases: &[Value], now: DateTime<Utc>, forget: std::time::Duration) -> (BTreeMap<String, Vec<String>>, Vec<String>) {
    let mut live = BTreeMap::new();
    let mut dead = Vec::new();
    for body in leases {
        let record = Record::parse(body);
        let name = object::meta_str(body, "name");
        match (&record.holder, record.is_held(now)) {
            (Some(holder), true) => {
                live.insert(holder.clone(), record.view.clone());
            }
            _ => {
                let since = record.expires().or(record.renewed).unwrap_or(now);
                if now - since >= chrono::Duration::from_std(forget).unwrap_or_default() && !name.is_empty() {
                    dead.push(name.to_string());
                }
            }
        }
    }
    (live, dead)
}

/// What a member owns, given the live members (ours included, if our Lease is fresh) and what
/// it has published; none when its Lease is not fresh. The live members, us included, are
/// `target.members()`.
pub fn decide(me: &str, live: &BTreeMap<String, Vec<String>>, published: &[String], fresh: bool) -> Option<Claims> {
    if !fresh {
        return None;
    }
    let target = Ring::new(live.keys().map(String::as_str).chain([me]));
    let others = live.iter().filter(|(m, _)| m.as_str() != me).map(|(m, view)| (m.clone(), Ring::new(view))).collect();
    Some(Claims { me: me.into(), target, published: Ring::new(published), others })
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
    /// When we last renewed it.
    renewed: Option<Instant>,
    /// The members we announced.
    published: Vec<String>,
    /// The live members as last looked at (for the log).
    seen: Vec<String>,
}

impl Member {
    /// A member that owns nothing until it has joined.
    pub fn new(seat: Seat, api: Arc<dyn Api>, authority: Authority, log: Logger, clock: Clock) -> Member {
        Member { seat, api, authority, log, clock, own: None, renewed: None, published: Vec::new(), seen: Vec::new() }
    }

    fn own_path(&self) -> String {
        lease::path(&self.seat.namespace, Some(&lease_name(&self.seat.name, &self.seat.identity)))
    }

    /// Writes our Lease (renewing it, announcing `published`).
    async fn renew(&mut self) {
        let g = &self.seat;
        let name = lease_name(&g.name, &g.identity);
        let labels = json!({GROUP_LABEL: g.name});
        let now = self.clock.now();
        let body = lease::body((&g.namespace, &name), Some(&g.identity), &g.timing, now, self.own.as_ref(), &labels, Some(&self.published));
        let written = match &self.own {
            None => self.api.create(&lease::path(&g.namespace, None), &body).await,
            Some(_) => {
                let bytes = serde_json::to_vec(&body).expect("JSON values serialize");
                self.api.request(Method::PUT, &self.own_path(), Some(content::JSON), Some(bytes)).await
            }
        };
        match written {
            Ok(b) => {
                self.own = Some(Record::parse(&b));
                self.renewed = Some(Instant::now());
            }
            Err(e) if matches!(e.code(), Some(409 | 404)) => {
                // Stale, or deleted (as dead) by a member that lost sight of us: read it again.
                self.own = match self.api.get(&self.own_path()).await {
                    Ok(b) => Some(Record::parse(&b)),
                    Err(_) => None,
                };
            }
            Err(e) => self.log.warn(None, &format!("Cannot renew the shard Lease of {}: {e}.", g.identity)),
        }
    }

    /// Renews our Lease, looks at the group, and tells the authority what is ours. Returns
    /// the live members when we announce fewer or other ones (a handover to finish).
    pub async fn look(&mut self) -> Option<Vec<String>> {
        self.renew().await;
        let g = &self.seat;
        let leases = match self.api.get(&lease::group_path(&g.namespace, &g.name)).await {
            Ok(list) => list["items"].as_array().cloned().unwrap_or_default(),
            Err(e) => {
                self.log.warn(None, &format!("Cannot list the shard group '{}': {e}.", g.name));
                self.judge(None);
                return None;
            }
        };
        let now = self.clock.now();
        let (live, dead) = members(&leases, now, g.timing.duration * 2);
        for name in dead {
            let path = lease::path(&g.namespace, Some(&name));
            if self.api.request(Method::DELETE, &path, None, None).await.is_ok() {
                self.log.info(None, &format!("Deleted the expired shard Lease {name}."));
            }
        }
        let fresh = self.renewed.is_some_and(|t| t.elapsed() < g.timing.renew_deadline);
        let claims = decide(&g.identity, &live, &self.published, fresh);
        let target = claims.as_ref().map(|c| c.target.members().to_vec());
        self.judge(claims);
        target.filter(|t| *t != self.published)
    }

    fn judge(&mut self, claims: Option<Claims>) {
        let Some(claims) = claims else {
            if self.renewed.is_some_and(|t| t.elapsed() >= self.seat.timing.renew_deadline) {
                self.log.warn(None, "Could not renew the shard Lease in time; handling no objects until it is renewed.");
                self.renewed = None;
            }
            if self.renewed.is_none() {
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
        self.authority.set_ownership(Ownership::Shard(Arc::new(claims)));
    }

    /// Looks every [`lease::Timing::retry`]; after a membership change, announces the new members as
    /// soon as what this member gave away has settled. On stop, deletes its Lease.
    pub async fn run(mut self, mut stop: tokio::sync::watch::Receiver<bool>) {
        let mut handover: Option<Vec<String>> = None;
        loop {
            let (authority, pending) = (self.authority.clone(), handover.is_some());
            let settled = async move {
                match pending {
                    true => authority.settled().await,
                    false => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = super::stopped(&mut stop) => break,
                _ = settled => {
                    // Every cycle of what we gave away has ended: announce the new members
                    // and look again at once (our gains count from now).
                    self.published = handover.take().unwrap_or_default();
                }
                _ = tokio::time::sleep(self.seat.timing.retry) => {}
            }
            handover = self.look().await;
        }
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

    /// Leaves the group: owns nothing, waits (at most a lease duration) for what still runs,
    /// then deletes its Lease so the others take over at once; if something still runs then,
    /// the Lease is left to expire instead.
    pub async fn leave(&mut self) {
        self.authority.set_ownership(Ownership::Nothing);
        if tokio::time::timeout(self.seat.timing.duration, self.authority.settled()).await.is_err() {
            self.log.warn(None, "Some cycles did not end in time; the shard Lease is left to expire.");
            return;
        }
        if self.own.take().is_some() {
            match self.api.request(Method::DELETE, &self.own_path(), None, None).await {
                Ok(_) => self.log.info(None, &format!("Left the shard group '{}'.", self.seat.name)),
                Err(e) => self.log.warn(None, &format!("Could not delete the shard Lease ({e}); it expires by itself.")),
            }
        }
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
