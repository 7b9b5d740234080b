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

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::{Stream, StreamExt};
use parking_lot::Mutex;
use rand::Rng as _;
use serde_json::{Value, json};

use super::Authority;
use crate::clock::Clock;
use crate::cluster::{Api, content};
use crate::logs::Logger;

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
        crate::state::outcomes::later(self.lastseen, self.lifetime)
    }
}

/// How far apart two peers' clocks may be: a record seen for the first time whose `lastseen`
/// is older than its lifetime plus this, by our clock, was left by a peer gone long ago and is
/// dead at once (a starting controller does not wait a lifetime for it).
pub const CLOCK_SKEW_ALLOWANCE: Duration = Duration::from_secs(60);

/// When this controller saw each peer's `lastseen` change, on its own clock: the record lives
/// for its lifetime after that.
#[derive(Debug, Default)]
pub struct Sightings {
    /// By identity: the `lastseen` last seen, and when it was first seen (our clock).
    seen: std::collections::HashMap<String, (DateTime<Utc>, DateTime<Utc>)>,
}

impl Sightings {
    /// When the record of `p`, looked at `now`, dies.
    fn deadline(&mut self, p: &Peer, now: DateTime<Utc>) -> DateTime<Utc> {
        let later = crate::state::outcomes::later;
        let observed = match self.seen.get(&p.identity) {
            Some((lastseen, observed)) if *lastseen == p.lastseen => *observed,
            known => {
                let left_long_ago = known.is_none() && later(p.deadline(), CLOCK_SKEW_ALLOWANCE) <= now;
                let observed = if left_long_ago { p.lastseen } else { now };
                self.seen.insert(p.identity.clone(), (p.lastseen, observed));
                observed
            }
        };
        later(observed, p.lifetime)
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

fn shown(peers: &[Peer]) -> String {
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
    pub recheck_at: Option<DateTime<Utc>>,
}

/// Kopf's decision for the controller `me` of `priority` at `now`, each peer's record judged
/// by when `seen` saw it change.
pub fn decide(body: &Value, me: &str, priority: i64, now: DateTime<Utc>, seen: &mut Sightings) -> Decision {
    let all = peers(body, now);
    seen.seen.retain(|identity, _| all.iter().any(|p| &p.identity == identity));
    let (mut higher, mut same, mut dead, mut recheck_at) = (Vec::new(), Vec::new(), Vec::new(), None::<DateTime<Utc>>);
    for p in all {
        let deadline = seen.deadline(&p, now);
        if deadline <= now {
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

/// Writes a record (a [`touch_patch`]) into the peering object at `path`; a peering resource
/// with a status subresource ignores status in the main resource, so when the answer lacks a
/// record that was written, it is written to `/status` as well. Returns the object.
pub async fn write_record(api: &dyn Api, path: &str, identity: &str, patch: &Value) -> Result<Value, crate::cluster::Error> {
    let written = api.patch(path, content::MERGE, patch).await?;
    let writes_one = !patch["status"][identity].is_null();
    if writes_one && written.get("status").and_then(|s| s.get(identity)).is_none() {
        return api.patch(&format!("{path}/status"), content::MERGE, patch).await;
    }
    Ok(written)
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
fn request_limit(lifetime: Duration) -> Duration {
    (lifetime / 4).max(Duration::from_secs(1))
}

/// How soon to try again after a keepalive could not be written.
fn retry_after_failure(lifetime: Duration) -> Duration {
    (lifetime / 20).clamp(Duration::from_millis(500), Duration::from_secs(5))
}

/// Why peering cannot start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `--peering NAME` names an object that does not exist.
    #[error("The mandatory peering '{0}' was not found.")]
    Missing(String),
    /// The object could not be read.
    #[error("cannot read the peering object {what}: {error}")]
    Read {
        /// Which object.
        what: String,
        /// Why.
        #[source]
        error: crate::cluster::Error,
    },
}

/// The pauses of several peering objects (one per served namespace): paused while any says so.
#[derive(Debug)]
pub struct Pauses {
    authority: Authority,
    paused_in: Mutex<HashSet<String>>,
}

impl Pauses {
    /// Pauses reported to this authority.
    pub fn new(authority: Authority) -> Arc<Pauses> {
        Arc::new(Pauses { authority, paused_in: Mutex::default() })
    }

    fn set(&self, scope: &str, paused: bool) {
        let mut p = self.paused_in.lock();
        if paused {
            p.insert(scope.to_string());
        } else {
            p.remove(scope);
        }
        self.authority.set_paused(!p.is_empty());
    }

    fn fence_key(scope: &str) -> String {
        format!("{scope} (own keep-alive)")
    }

    /// Pauses by force (turns in flight told to end) while our keepalive in `scope` could not
    /// be written in time; `false` lifts that.
    fn fence(&self, scope: &str, fenced: bool) {
        let mut p = self.paused_in.lock();
        if fenced {
            p.insert(Pauses::fence_key(scope));
            self.authority.pause_by_force();
        } else {
            p.remove(&Pauses::fence_key(scope));
            self.authority.set_paused(!p.is_empty());
        }
    }

    fn is_fenced(&self, scope: &str) -> bool {
        self.paused_in.lock().contains(&Pauses::fence_key(scope))
    }
}

/// One controller's part in one peering object.
pub struct Keepalive {
    peering: Peering,
    api: Arc<dyn Api>,
    pauses: Arc<Pauses>,
    log: Logger,
    clock: Clock,
    verdict: Verdict,
    /// The object as last seen.
    last: Option<Value>,
    /// When its first peer that pauses us dies (from the last decision): look again then.
    recheck_at: Option<DateTime<Utc>>,
    /// When our last successful keepalive was sent (local).
    written: tokio::time::Instant,
    /// When each peer's record was seen to change.
    sightings: Sightings,
}

impl Keepalive {
    /// Looks for the peering object: `Ok(None)` means standalone (with Kopf's warning);
    /// otherwise writes our record and decides at once from the object it returns.
    pub async fn start(
        peering: Peering,
        api: Arc<dyn Api>,
        pauses: Arc<Pauses>,
        log: Logger,
        clock: Clock,
    ) -> Result<Option<Keepalive>, Error> {
        let path = peering.path();
        match api.get(&path).await {
            Ok(_) => {}
            Err(e) if e.code() == Some(404) => {
                if peering.mandatory {
                    return Err(Error::Missing(peering.name.clone()));
                }
                log.warn(None, "Default peering object is not found, falling back to the standalone mode.");
                return Ok(None);
            }
            Err(error) => return Err(Error::Read { what: peering.display(), error }),
        }
        log.info(None, &format!("Peering in {} as {} with priority {}.", peering.display(), peering.identity, peering.priority));
        let written = tokio::time::Instant::now();
        let mut k = Keepalive {
            peering,
            api,
            pauses,
            log,
            clock,
            verdict: Verdict::Run,
            last: None,
            recheck_at: None,
            written,
            sightings: Sightings::default(),
        };
        // Until our record is written, our peers cannot see us, so we must not act: fenced, as
        // after a keep-alive that could not be written, until one is (`run` tries again soon).
        match tokio::time::timeout(request_limit(k.peering.lifetime), k.touch(k.peering.lifetime)).await {
            Ok(Some(body)) => k.observe(body).await,
            Ok(None) | Err(_) => k.fence(&k.peering.display()),
        }
        Ok(Some(k))
    }

    /// Writes our record; returns the object as written.
    async fn touch(&self, lifetime: Duration) -> Option<Value> {
        let p = &self.peering;
        let patch = touch_patch(&p.identity, p.priority, lifetime, self.clock.now());
        let path = p.path();
        match write_record(&*self.api, &path, &p.identity, &patch).await {
            Ok(body) => Some(body),
            Err(e) => {
                self.log.warn(None, &format!("Keep-alive in {} failed: {e}.", p.display()));
                None
            }
        }
    }

    /// Decides from the object as it is now; pauses or resumes; removes dead peers.
    async fn observe(&mut self, body: Value) {
        let p = &self.peering;
        let d = decide(&body, &p.identity, p.priority, self.clock.now(), &mut self.sightings);
        let scope = p.display();
        match (&self.verdict, &d.verdict) {
            (Verdict::Run, Verdict::Yield(higher)) => self.log.info(None, &format!("Pausing operations in favour of {}.", shown(higher))),
            (_, Verdict::Conflict(same)) => {
                self.log.warn(None, &format!("Possibly conflicting operators with the same priority: {}.", shown(same)));
                if self.verdict == Verdict::Run {
                    self.log.warn(None, &format!("Pausing all operators, including self: {}", shown(&peers(&body, self.clock.now()))));
                }
            }
            (Verdict::Yield(_) | Verdict::Conflict(_), Verdict::Run) => {
                self.log.info(None, "Resuming operations after the pause. Conflicting operators with the same priority are gone.")
            }
            _ => {}
        }
        self.pauses.set(&scope, d.verdict != Verdict::Run);
        self.verdict = d.verdict.clone();
        if !d.dead.is_empty() {
            let path = p.path();
            if let Err(e) = self.api.patch(&path, content::MERGE, &clean_patch(&d.dead)).await {
                self.log.debug(None, &format!("Could not remove dead peers {:?}: {e}.", d.dead));
            }
        }
        self.last = Some(body);
        self.recheck_at = d.recheck_at;
    }

    /// Refreshes our record before it dies, follows the object's changes (`changes`: its
    /// bodies, `None` when deleted), looks again when a peer that pauses us should die, fences
    /// itself while its own record cannot be written, and removes our record when `stop` flips.
    pub async fn run(mut self, changes: impl Stream<Item = Option<Value>> + Send, mut stop: tokio::sync::watch::Receiver<bool>) {
        use tokio::time::{Instant, sleep_until};
        let mut changes = std::pin::pin!(changes);
        let lifetime = self.peering.lifetime;
        let scope = self.peering.display();
        let first = if self.pauses.is_fenced(&scope) { retry_after_failure(lifetime) } else { keepalive_interval(lifetime) };
        let mut keepalive = Instant::now() + first;
        loop {
            let recheck = self.recheck_at.map(|t| self.clock.instant(t));
            let fence_at = self.written + fence_after(lifetime);
            let fenced = self.pauses.is_fenced(&scope);
            tokio::select! {
                _ = super::stopped(&mut stop) => break,
                _ = sleep_until(keepalive) => {
                    let sent = Instant::now();
                    let give_up = sent + request_limit(lifetime);
                    let written = {
                        let mut touch = std::pin::pin!(self.touch(lifetime));
                        loop {
                            let fenced = self.pauses.is_fenced(&scope);
                            tokio::select! {
                                body = &mut touch => break body,
                                _ = sleep_until(fence_at), if !fenced => self.fence(&scope),
                                _ = sleep_until(give_up) => {
                                    self.log.warn(None, &format!("Keep-alive in {scope} timed out."));
                                    break None;
                                }
                                _ = super::stopped(&mut stop) => break None,
                            }
                        }
                    };
                    match written {
                        Some(body) => {
                            self.written = sent;
                            keepalive = Instant::now() + keepalive_interval(lifetime);
                            if self.pauses.is_fenced(&scope) {
                                self.log.info(None, &format!("The keep-alive in {scope} is written again; resuming operations."));
                                self.pauses.fence(&scope, false);
                            }
                            self.observe(body).await;
                        }
                        None => keepalive = Instant::now() + retry_after_failure(lifetime),
                    }
                }
                _ = sleep_until(fence_at), if !fenced => self.fence(&scope),
                _ = sleep_until(recheck.unwrap_or(keepalive)), if recheck.is_some() => {
                    // A peer that pauses us looks dead: read the object before resuming, as a
                    // watch can lag (or hang) behind its keep-alives; if it cannot be read,
                    // stay as we are and look again soon.
                    match tokio::time::timeout(request_limit(lifetime), self.api.get(&self.peering.path())).await {
                        Ok(Ok(body)) => self.observe(body).await,
                        Ok(Err(e)) if e.code() == Some(404) => self.observe(json!({})).await,
                        _ => self.recheck_at = Some(crate::state::outcomes::later(self.clock.now(), retry_after_failure(lifetime))),
                    }
                }
                change = changes.next() => match change {
                    Some(Some(body)) => self.observe(body).await,
                    Some(None) => self.observe(json!({})).await,
                    None => break,
                },
            }
        }
        self.pauses.fence(&scope, false);
        self.pauses.set(&scope, false);
        let _ = self.touch(Duration::ZERO).await;
    }

    /// Our keepalive could not be written for [`fence_after`] of its lifetime: pause by force.
    fn fence(&self, scope: &str) {
        self.log.warn(
            None,
            &format!(
                "Could not write the keep-alive in {scope} in time; pausing operations until it is written again (a peer may take over)."
            ),
        );
        self.pauses.fence(scope, true);
    }
}

/// The bodies of one peering object as a watch sees them (`None`: deleted).
pub fn watch_object(client: kube::Client, peering: &Peering) -> impl Stream<Item = Option<Value>> + Send + 'static {
    use kube::runtime::{WatchStreamExt, watcher};
    let ar = peering.family.api_resource(peering.namespace.as_deref());
    let api: kube::Api<kube::api::DynamicObject> = match &peering.namespace {
        Some(ns) => kube::Api::namespaced_with(client, ns, &ar),
        None => kube::Api::all_with(client, &ar),
    };
    let timeout = crate::cluster::watching::WATCH_TIMEOUT.as_secs() as u32;
    let config = watcher::Config::default().timeout(timeout).fields(&format!("metadata.name={}", peering.name));
    watcher(api, config).default_backoff().filter_map(|event| async move {
        match event {
            Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => serde_json::to_value(o).ok().map(Some),
            Ok(watcher::Event::Delete(_)) => Some(None),
            _ => None,
        }
    })
}
