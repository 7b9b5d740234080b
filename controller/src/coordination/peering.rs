//! Peering, as Kopf does it: controllers of one operator find each other in a peering object
//! (`BosunPeering`/`ClusterBosunPeering` in `bosun.dev`, or Kopf's `KopfPeering`/
//! `ClusterKopfPeering` in `kopf.dev` with `--kopf-compat`, so that Kopf operators and Bosun
//! pause for each other). Each writes `status.<identity> = {priority, lifetime, lastseen}` and
//! refreshes it before its lifetime ends; a controller pauses while a live peer has a higher
//! priority (a developer's `--dev` controller has 666, `bosun freeze` 100 by default), all
//! pause when peers share the highest priority, and dead peers are removed by whoever sees
//! them. Pausing stops handlers, timers and daemons but not the watches: resuming is
//! immediate. With no peering object, the controller runs standalone, with Kopf's warning.
//!
//! A controller that cannot write its own keepalive fences itself: once [`fence_after`] of
//! its lifetime has passed since it sent its last successful keepalive (a local timer, raced
//! against the write in flight), it pauses by force — every turn in flight told to end — since
//! a peer of lower priority resumes when that record dies; it resumes when a keepalive is
//! written again.
//!
//! Unlike Kopf, a peer's record is judged by when this controller saw its `lastseen` change,
//! on its own clock ([`Sightings`], as client-go judges a Lease by its observed changes): it
//! lives for its lifetime after that, so peers whose clocks disagree (by up to
//! [`CLOCK_SKEW_ALLOWANCE`]) neither take a live peer for dead nor resume beside it. Kopf
//! compares `lastseen` with its own clock: a lower peer whose clock runs ahead resumes while
//! the higher one still runs.

use std::time::Duration;

use chrono::{DateTime, Utc};
use rand::Rng as _;
use serde_json::{Value, json};

/// Kopf's default lifetime of a peer's record.
pub const LIFETIME: Duration = Duration::from_secs(60);
/// The priority of `--dev`.
pub const DEV_PRIORITY: i64 = 666;

/// Which peering family the controller speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// `bosun.dev`: `BosunPeering`, `ClusterBosunPeering`.
    Bosun,
    /// `kopf.dev`: `KopfPeering`, `ClusterKopfPeering` (with Kopf operators).
    Kopf,
}

impl Family {
    /// (group, namespaced plural, cluster plural, namespaced kind, cluster kind).
    fn names(self) -> (&'static str, &'static str, &'static str, &'static str, &'static str) {
        match self {
            Family::Bosun => ("bosun.dev", "bosunpeerings", "clusterbosunpeerings", "BosunPeering", "ClusterBosunPeering"),
            Family::Kopf => ("kopf.dev", "kopfpeerings", "clusterkopfpeerings", "KopfPeering", "ClusterKopfPeering"),
        }
    }

    /// The API group and plural of the peering objects of a namespace (or cluster-wide).
    pub fn group_and_plural(self, namespace: Option<&str>) -> (&'static str, &'static str) {
        let (group, ns_plural, cluster_plural, _, _) = self.names();
        (group, if namespace.is_some() { ns_plural } else { cluster_plural })
    }

    /// The kind of the peering object for a namespace (or cluster-wide).
    pub fn kind(self, namespace: Option<&str>) -> &'static str {
        let (_, _, _, ns_kind, cluster_kind) = self.names();
        if namespace.is_some() { ns_kind } else { cluster_kind }
    }

    /// The path of a peering object.
    pub fn path(self, namespace: Option<&str>, name: &str) -> String {
        let (group, ns_plural, cluster_plural, _, _) = self.names();
        match namespace {
            Some(ns) => format!("/apis/{group}/v1/namespaces/{ns}/{ns_plural}/{name}"),
            None => format!("/apis/{group}/v1/{cluster_plural}/{name}"),
        }
    }

    /// A peering object for logs: `ClusterBosunPeering default`, `BosunPeering ns/default`.
    pub fn describe(self, namespace: Option<&str>, name: &str) -> String {
        let kind = self.kind(namespace);
        match namespace {
            Some(ns) => format!("{kind} {ns}/{name}"),
            None => format!("{kind} {name}"),
        }
    }

    /// The resource, for a watch.
    pub fn api_resource(self, namespace: Option<&str>) -> kube::api::ApiResource {
        let (group, ns_plural, cluster_plural, ns_kind, cluster_kind) = self.names();
        let (plural, kind) = if namespace.is_some() { (ns_plural, ns_kind) } else { (cluster_plural, cluster_kind) };
        kube::api::ApiResource {
            group: group.into(),
            version: "v1".into(),
            api_version: format!("{group}/v1"),
            kind: kind.into(),
            plural: plural.into(),
        }
    }
}

/// One peering object and how this controller takes part in it.
#[derive(Debug, Clone)]
pub struct Peering {
    /// `bosun.dev` or `kopf.dev`.
    pub family: Family,
    /// The object's name (`default` unless `--peering`).
    pub name: String,
    /// Its namespace; none for the cluster-wide one.
    pub namespace: Option<String>,
    /// Our identity.
    pub identity: String,
    /// Our priority.
    pub priority: i64,
    /// How long our record counts after we last wrote it.
    pub lifetime: Duration,
    /// Whether a missing object is an error (`--peering NAME` given) or means standalone.
    pub mandatory: bool,
}

impl Peering {
    /// Where it is, for logs.
    pub fn display(&self) -> String {
        self.family.describe(self.namespace.as_deref(), &self.name)
    }

    /// The object's API path.
    pub fn path(&self) -> String {
        self.family.path(self.namespace.as_deref(), &self.name)
    }
}

/// One peer's record.
#[derive(Debug, Clone, PartialEq)]
pub struct Peer {
    /// Its identity (the key in `status`).
    pub identity: String,
    /// Its priority.
    pub priority: i64,
    /// How long its record counts after `lastseen`.
    pub lifetime: Duration,
    /// When it last wrote.
    pub lastseen: DateTime<Utc>,
}

impl Peer {
    /// When its record stops counting by its own `lastseen` (Kopf's judgement, for reports).
    pub fn deadline(&self) -> DateTime<Utc> {
        // Outside data: a `lastseen` near chrono's last date must not overflow.
        crate::state::delays::later(self.lastseen, self.lifetime)
    }
}

/// How far apart two peers' clocks may be: a record seen for the first time whose `lastseen`
/// is older than its lifetime plus this, by our clock, was left by a peer gone long ago and is
/// dead at once (a starting controller does not wait a lifetime for it).
pub const CLOCK_SKEW_ALLOWANCE: Duration = Duration::from_secs(60);

/// A moment on both clocks: the wall's, to read what records say, and the monotonic one, to
/// tell how long ago this controller saw something. A wall-clock step (NTP, a VM resumed) moves
/// the first only: peers are judged on the second, so a step neither kills live peers (and
/// deletes their records) nor keeps dead ones alive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Moment {
    /// Wall time.
    pub wall: DateTime<Utc>,
    /// Monotonic time.
    pub mono: tokio::time::Instant,
}

impl Moment {
    /// Now, on the controller's wall clock and tokio's monotonic one.
    pub fn now(clock: &crate::clock::Clock) -> Moment {
        Moment { wall: clock.now(), mono: tokio::time::Instant::now() }
    }
}

/// The longest a record is taken to live from a sighting (a lifetime longer than this, which
/// only a hostile record states, counts as this).
const LONGEST_LIFE: Duration = Duration::from_secs(365 * 24 * 3600);

/// When this controller saw each peer's `lastseen` change, on its own monotonic clock: the
/// record lives for its lifetime after that.
#[derive(Debug, Default)]
pub struct Sightings {
    /// By identity: the `lastseen` last seen, and when the record dies (monotonic).
    seen: std::collections::HashMap<String, (DateTime<Utc>, tokio::time::Instant)>,
}

impl Sightings {
    /// When the record of `p`, looked at `now`, dies.
    fn deadline(&mut self, p: &Peer, now: Moment) -> tokio::time::Instant {
        match self.seen.get(&p.identity) {
            Some((lastseen, deadline)) if *lastseen == p.lastseen => *deadline,
            known => {
                // Only a record never seen before is read by the wall clock: left longer ago
                // than clocks may differ, it is dead at once.
                let left_long_ago = known.is_none() && crate::state::delays::later(p.deadline(), CLOCK_SKEW_ALLOWANCE) <= now.wall;
                let deadline = if left_long_ago { now.mono } else { now.mono + p.lifetime.min(LONGEST_LIFE) };
                self.seen.insert(p.identity.clone(), (p.lastseen, deadline));
                deadline
            }
        }
    }
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "<Peer {}: priority={}, lifetime={}, lastseen='{}'>",
            self.identity,
            self.priority,
            self.lifetime.as_secs(),
            self.lastseen.to_rfc3339()
        )
    }
}

pub(super) fn shown(peers: &[Peer]) -> String {
    format!("[{}]", peers.iter().map(Peer::to_string).collect::<Vec<_>>().join(", "))
}

/// The peers recorded in a peering object's status. Entries that are not objects are skipped;
/// fields missing or malformed read as Kopf reads them (priority 0, lifetime 60 s, last seen
/// now).
pub fn peers(body: &Value, now: DateTime<Utc>) -> Vec<Peer> {
    let Some(status) = body.get("status").and_then(Value::as_object) else { return Vec::new() };
    status
        .iter()
        .filter_map(|(identity, info)| {
            let info = info.as_object()?;
            Some(Peer {
                identity: identity.clone(),
                priority: info.get("priority").and_then(Value::as_i64).unwrap_or(0),
                lifetime: Duration::from_secs(info.get("lifetime").and_then(Value::as_u64).unwrap_or(60).min(10 * 365 * 24 * 3600)),
                lastseen: info
                    .get("lastseen")
                    .and_then(Value::as_str)
                    .and_then(|s| DateTime::parse_from_rfc3339(s).ok().map(|t| t.with_timezone(&Utc)).or_else(|| naive(s)))
                    .unwrap_or(now),
            })
        })
        .collect()
}

/// Kopf before 1.30 wrote `lastseen` without a zone (UTC).
fn naive(s: &str) -> Option<DateTime<Utc>> {
    chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f").ok().map(|t| t.and_utc())
}

/// What a controller does about its peers.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Run: no live peer has our priority or a higher one.
    Run,
    /// Pause in favour of these peers of higher priority.
    Yield(Vec<Peer>),
    /// Pause, as all do: these peers have our priority (and none a higher one).
    Conflict(Vec<Peer>),
}

/// The decision after one look at the peering object.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Run or pause.
    pub verdict: Verdict,
    /// Identities of dead peers, to remove.
    pub dead: Vec<String>,
    /// When to look again even if nothing changes: when the first peer that pauses us dies.
    pub recheck_at: Option<tokio::time::Instant>,
}

/// Kopf's decision for the controller `me` of `priority` at `now`, each peer's record judged
/// by when `seen` saw it change (on the monotonic clock).
pub fn decide(body: &Value, me: &str, priority: i64, now: Moment, seen: &mut Sightings) -> Decision {
    let all = peers(body, now.wall);
    seen.seen.retain(|identity, _| all.iter().any(|p| &p.identity == identity));
    let (mut higher, mut same, mut dead, mut recheck_at) = (Vec::new(), Vec::new(), Vec::new(), None::<tokio::time::Instant>);
    for p in all {
        let deadline = seen.deadline(&p, now);
        if deadline <= now.mono {
            dead.push(p.identity);
            continue;
        }
        let pausing = match p.priority.cmp(&priority) {
            _ if p.identity == me => continue,
            std::cmp::Ordering::Greater => &mut higher,
            std::cmp::Ordering::Equal => &mut same,
            std::cmp::Ordering::Less => continue,
        };
        pausing.push(p);
        recheck_at = Some(recheck_at.map_or(deadline, |r| r.min(deadline)));
    }
    let verdict = if !higher.is_empty() {
        Verdict::Yield(higher)
    } else if !same.is_empty() {
        Verdict::Conflict(same)
    } else {
        Verdict::Run
    };
    Decision { verdict, dead, recheck_at }
}

/// The patch that writes our record (or removes it, with a zero lifetime).
pub fn touch_patch(me: &str, priority: i64, lifetime: Duration, now: DateTime<Utc>) -> Value {
    let record = if lifetime.is_zero() {
        Value::Null
    } else {
        json!({"priority": priority, "lifetime": lifetime.as_secs(), "lastseen": now.to_rfc3339_opts(chrono::SecondsFormat::Micros, false)})
    };
    json!({"status": {me: record}})
}

/// The patch that removes dead peers.
pub fn clean_patch(dead: &[String]) -> Value {
    json!({"status": dead.iter().map(|d| (d.clone(), Value::Null)).collect::<serde_json::Map<_, _>>()})
}

/// How long to wait between two keepalives: Kopf's, 5–10 s before the lifetime ends.
pub fn keepalive_interval(lifetime: Duration) -> Duration {
    let secs = lifetime.as_secs();
    let jitter = rand::rng().random_range(5..=10);
    Duration::from_secs(secs.saturating_sub(jitter).max(1).min(secs.max(1)))
}

/// How long after sending its last successful keepalive a controller may go on handling: its
/// lifetime less a twentieth (at least a second, at most half of it), before its record dies
/// for its peers.
pub fn fence_after(lifetime: Duration) -> Duration {
    let margin = (lifetime / 20).max(Duration::from_secs(1)).min(lifetime / 2);
    lifetime - margin
}

/// How long a request on the peering object may take: a quarter of the lifetime, at least 1 s.
pub(super) fn request_limit(lifetime: Duration) -> Duration {
    (lifetime / 4).max(Duration::from_secs(1))
}

/// How soon to try again after a keepalive could not be written.
pub(super) fn retry_after_failure(lifetime: Duration) -> Duration {
    (lifetime / 20).clamp(Duration::from_millis(500), Duration::from_secs(5))
}
