//! `coordination.k8s.io/v1` Leases as leader election and shard membership use them: reading
//! one, judging who holds it, and the body of the next write. Pure; the loops that write them
//! are [`super::leader`] and [`super::shards`].
//!
//! No decision compares another node's wall clock with ours (client-go's rule): a replica
//! judges someone else's Lease by the local monotonic time at which it last *observed* it
//! change ([`Observed`]: another holder, `renewTime` or resourceVersion) — it is held until
//! that observation plus `leaseDurationSeconds`. The holder counts its own time from when it
//! *sent* its last successful write ([`Tenure`]), and stops handling by a local timer at
//! [`Timing::renew_deadline`] after it, a third of the duration before anyone who saw that
//! write may take over, whatever its requests are doing then. Only clock *rates* must agree,
//! not clocks. The written `renewTime`/`acquireTime` are for people, `kubectl` and Kopf.
//! Writes carry the resourceVersion they read, so two candidates never both win a Lease: one
//! gets 409.

use std::time::Duration;

use crate::object;
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};
use tokio::time::Instant;

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

/// The annotation in which a shard member publishes the members it acts for.
pub const VIEW_ANNOTATION: &str = "bosun.dev/shard-view";
/// The most members a published view may name. A shard group has a few replicas; each
/// member costs [`super::ring::VNODES`] points on a ring built at every look, so a view
/// naming more (anyone who may edit Leases may write one) reads as empty, as a member's that
/// acts for nothing yet.
pub const MAX_VIEW: usize = 256;

/// The label that groups the Leases of one shard group.
pub const GROUP_LABEL: &str = "bosun.dev/shard-group";

/// A party to Leases: the Lease (leader election) or the shard group (shards), who we are,
/// and the timing.
#[derive(Debug, Clone)]
pub struct Seat {
    /// The Lease's name, or the shard group's (the label value; Lease names start with it).
    pub name: String,
    /// The namespace of the Lease(s).
    pub namespace: String,
    /// Our identity (`holderIdentity`).
    pub identity: String,
    /// The Leases' timing.
    pub timing: Timing,
}

impl Seat {
    /// The seat of `identity` at the Lease(s) `setup` names.
    pub fn new(setup: &LeaseSetup, identity: &str) -> Seat {
        Seat {
            name: setup.name.clone(),
            namespace: setup.namespace.clone(),
            identity: identity.into(),
            timing: Timing::new(setup.duration),
        }
    }
}

/// How long a Lease lasts and how often it is renewed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// `leaseDurationSeconds`: how long after its last renewal a Lease is held.
    pub duration: Duration,
    /// A holder that could not renew for this long stops handling.
    pub renew_deadline: Duration,
    /// How often holders renew and candidates look.
    pub retry: Duration,
}

impl Timing {
    /// The timing for a lease duration (at least 1 s): stop after 2/3 of it without renewal,
    /// renew and look every second (a fifth of the duration when that is shorter), so that a
    /// released Lease is taken over within about a second.
    pub fn new(duration: Duration) -> Timing {
        let duration = Duration::from_secs(duration.as_secs().max(1));
        Timing { duration, renew_deadline: duration * 2 / 3, retry: (duration / 5).min(Duration::from_secs(1)) }
    }
}

/// What a Lease says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Record {
    /// `spec.holderIdentity` (none when empty: released).
    pub holder: Option<String>,
    /// `spec.leaseDurationSeconds`.
    pub duration: Duration,
    /// `spec.acquireTime`.
    pub acquired: Option<DateTime<Utc>>,
    /// `spec.renewTime`.
    pub renewed: Option<DateTime<Utc>>,
    /// `spec.leaseTransitions`.
    pub transitions: i64,
    /// `metadata.resourceVersion`, for the next write.
    pub resource_version: Option<String>,
    /// The members a shard member acts for ([`VIEW_ANNOTATION`]), sorted.
    pub view: Vec<String>,
}

fn time(v: &Value) -> Option<DateTime<Utc>> {
    v.as_str().and_then(|s| DateTime::parse_from_rfc3339(s).ok()).map(|t| t.with_timezone(&Utc))
}

/// A time as a Lease's MicroTime.
pub fn micro_time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

impl Record {
    /// Reads a Lease; what is missing or malformed reads as absent (a Lease someone wrote by
    /// hand is judged, never a panic).
    pub fn parse(body: &Value) -> Record {
        let spec = &body["spec"];
        let view = object::meta(body, "annotations")
            .and_then(|a| a.get(VIEW_ANNOTATION))
            .and_then(Value::as_str)
            .and_then(|s| serde_json::from_str::<Vec<String>>(s).ok())
            .filter(|v| v.len() <= MAX_VIEW)
            .unwrap_or_default();
        Record {
            holder: spec["holderIdentity"].as_str().filter(|h| !h.is_empty()).map(String::from),
            duration: Duration::from_secs(spec["leaseDurationSeconds"].as_u64().unwrap_or(0).min(365 * 24 * 3600)),
            acquired: time(&spec["acquireTime"]),
            renewed: time(&spec["renewTime"]),
            // An int32 in the API: anything outside 0..=i32::MAX (a hostile or broken writer)
            // is read within it, so that the next take-over writes a value the server accepts.
            transitions: spec["leaseTransitions"].as_i64().unwrap_or(0).clamp(0, i64::from(i32::MAX)),
            resource_version: object::version(body).map(String::from),
            view,
        }
    }

    /// Until when the Lease is held by its writer's wall clock (none: it never was, or was
    /// released): for reports to people ([`super::roster`]), never for a takeover.
    pub fn expires(&self) -> Option<DateTime<Utc>> {
        self.holder.as_ref()?;
        let renewed = self.renewed.or(self.acquired)?;
        Some(crate::state::delays::later(renewed, self.duration))
    }

    /// Whether someone holds it at `now` by its writer's wall clock (reports only).
    pub fn is_held(&self, now: DateTime<Utc>) -> bool {
        self.expires().is_some_and(|t| t > now)
    }

    /// What another replica sees change when the Lease is written (client-go's comparison of
    /// observed records): the holder, the renew time, the resourceVersion.
    fn version(&self) -> (Option<&str>, Option<DateTime<Utc>>, Option<&str>) {
        (self.holder.as_deref(), self.renewed, self.resource_version.as_deref())
    }
}

/// A Lease as this replica has seen it: the last record read, and the local instant at which
/// it was first seen as it is (client-go's `observedRecord` and `observedTime`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observed {
    record: Option<Record>,
    since: Option<Instant>,
    /// The shortest time a Lease is taken to be held for: ours. A `leaseDurationSeconds`
    /// below it (0, by a hostile or broken write) would let us take a Lease from a holder that
    /// still counts on its own, longer, tenure.
    floor: Duration,
}

impl Observed {
    /// Nothing seen yet; a Lease is held for `floor` at least after its last change.
    pub fn at_least(floor: Duration) -> Observed {
        Observed { floor, ..Observed::default() }
    }

    /// Records a read at `at`: the observation time moves only when the Lease changed.
    pub fn observe(&mut self, record: Option<&Record>, at: Instant) {
        let changed = match (&self.record, record) {
            (Some(old), Some(new)) => old.version() != new.version(),
            (None, None) => false,
            _ => true,
        };
        if changed || self.since.is_none() {
            self.since = Some(at);
        }
        self.record = record.cloned();
    }

    /// When we first saw the record as it is now.
    pub fn since(&self) -> Option<Instant> {
        self.since
    }

    /// The record as last read.
    pub fn record(&self) -> Option<&Record> {
        self.record.as_ref()
    }

    /// Its holder and the local instant until which it holds it: our observation of its last
    /// change plus its `leaseDurationSeconds` (our own duration at least). None when nobody
    /// holds it.
    pub fn held(&self) -> Option<(&str, Instant)> {
        let record = self.record.as_ref()?;
        let holder = record.holder.as_deref()?;
        Some((holder, self.since? + record.duration.max(self.floor)))
    }
}

/// How long a holder may act on its Lease: until [`Timing::renew_deadline`] after its last
/// successful write was *sent* (not answered: the others count from when they saw it, later).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tenure {
    until: Option<Instant>,
}

impl Tenure {
    /// A write sent at `sent` succeeded (known at `now`): whether we hold the Lease now. An
    /// answer that comes after its own deadline gives nothing (the next write renews).
    pub fn wrote(&mut self, sent: Instant, now: Instant, timing: &Timing) -> bool {
        let until = sent + timing.renew_deadline;
        if until > now && self.until.is_none_or(|u| u < until) {
            self.until = Some(until);
        }
        self.holds(now)
    }

    /// Whether we hold it at `now`.
    pub fn holds(&self, now: Instant) -> bool {
        self.until.is_some_and(|u| u > now)
    }

    /// When the local timer must take ownership away, while we hold it.
    pub fn deadline(&self) -> Option<Instant> {
        self.until
    }

    /// The timer fired or a look came at `now`: true when the tenure just ended (revoke).
    pub fn lapse(&mut self, now: Instant) -> bool {
        if self.until.is_some_and(|u| u <= now) {
            self.until = None;
            return true;
        }
        false
    }

    /// We gave it up (released or deleted).
    pub fn end(&mut self) {
        self.until = None;
    }
}

/// What a candidate for one Lease does next.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// No Lease yet: create it, holding it.
    Create,
    /// Released or expired: take it over (one more transition).
    Acquire,
    /// Ours: renew it.
    Renew,
    /// Someone else's until then (local time: our observation of its last change plus its
    /// duration).
    Follow {
        /// Who holds it.
        holder: String,
        /// When it expires unless we see it renewed.
        until: Instant,
    },
}

/// What `me` does with the Lease as observed, at the local instant `now`.
pub fn step(observed: &Observed, me: &str, now: Instant) -> Step {
    if observed.record().is_none() {
        return Step::Create;
    }
    match observed.held() {
        Some((holder, _)) if holder == me => Step::Renew,
        Some((holder, until)) if until > now => Step::Follow { holder: holder.into(), until },
        _ => Step::Acquire,
    }
}

/// The body of the Lease `(namespace, name)` held by `holder` (none: released) written at
/// `now` after `previous`.
pub fn body(
    (namespace, name): (&str, &str),
    holder: Option<&str>,
    timing: &Timing,
    now: DateTime<Utc>,
    previous: Option<&Record>,
    labels: &Value,
    view: Option<&[String]>,
) -> Value {
    let taking_over = previous.is_some_and(|p| p.holder.as_deref() != holder) && holder.is_some();
    // Saturating at int32's top: past it the API server refuses the write and nobody could
    // take the Lease again.
    let transitions = (previous.map_or(0, |p| p.transitions) + i64::from(taking_over)).min(i64::from(i32::MAX));
    let acquired = match previous {
        Some(p) if !taking_over && p.holder.as_deref() == holder => p.acquired.unwrap_or(now),
        _ => now,
    };
    let mut metadata = json!({"name": name, "namespace": namespace});
    if labels.as_object().is_some_and(|l| !l.is_empty()) {
        metadata["labels"] = labels.clone();
    }
    if let Some(view) = view {
        metadata["annotations"] = json!({VIEW_ANNOTATION: serde_json::to_string(view).unwrap_or_default()});
    }
    if let Some(rv) = previous.and_then(|p| p.resource_version.as_deref()) {
        metadata["resourceVersion"] = rv.into();
    }
    let seconds = if holder.is_some() { timing.duration.as_secs() } else { 1 };
    json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata,
        "spec": {
            "holderIdentity": holder.unwrap_or(""),
            "leaseDurationSeconds": seconds,
            "acquireTime": micro_time(acquired),
            "renewTime": micro_time(now),
            "leaseTransitions": transitions,
        },
    })
}

/// The path that lists the Leases of a shard group.
pub fn group_path(namespace: &str, group: &str) -> String {
    format!("{}?labelSelector={GROUP_LABEL}%3D{group}", path(namespace, None))
}

/// The path of a Lease, or of the Leases of a namespace.
pub fn path(namespace: &str, name: Option<&str>) -> String {
    let base = format!("/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases");
    match name {
        Some(n) => format!("{base}/{n}"),
        None => base,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn lease(holder: &str, renewed: &str, secs: u64) -> Record {
        Record::parse(&json!({
            "metadata": {"resourceVersion": "7"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": secs, "renewTime": renewed, "leaseTransitions": 2},
        }))
    }

    /// A `leaseDurationSeconds` below our own (0, written by a broken tool) does not let us
    /// take a Lease sooner than our own duration after its last change: its holder may count on
    /// a tenure that long. A longer one is honoured, as client-go honours it.
    #[tokio::test(start_paused = true)]
    async fn a_lease_is_held_for_our_own_duration_at_least_whatever_its_record_says() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        // (its leaseDurationSeconds, looked at seconds after its change) -> step, with ours 15 s
        let cases = [(0, 1, false), (0, 14, false), (0, 16, true), (5, 10, false), (30, 20, false), (30, 31, true)];
        for (secs, after, acquires) in cases {
            let mut observed = Observed::at_least(s(15));
            observed.observe(Some(&lease("other", "2026-01-01T00:00:00Z", secs)), t0);
            let step = step(&observed, "me", t0 + s(after));
            assert_eq!(matches!(step, Step::Acquire), acquires, "{secs} s, {after} s after: {step:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_candidate_creates_renews_takes_over_or_follows_by_when_it_saw_a_change() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        // (what, reads as (lease, seconds after t0), look at seconds after t0) -> step
        let other = |renewed: &str| Some(lease("other", renewed, 15));
        type Reads = Vec<(Option<Record>, u64)>;
        let cases: Vec<(&str, Reads, u64, Step)> = vec![
            ("no lease", vec![(None, 0)], 0, Step::Create),
            ("mine", vec![(Some(lease("me", "2026-11-23T10:00:00Z", 15)), 0)], 0, Step::Renew),
            ("mine, written long ago", vec![(Some(lease("me", "2000-01-01T00:00:00Z", 15)), 0)], 100, Step::Renew),
            ("released", vec![(Some(lease("", "2026-11-23T10:00:09Z", 1)), 0)], 0, Step::Acquire),
            // A renewTime far in the past (a skewed writer) counts from when we saw it.
            (
                "skewed past, just seen",
                vec![(other("2000-01-01T00:00:00Z"), 0)],
                14,
                Step::Follow { holder: "other".into(), until: t0 + s(15) },
            ),
            (
                "unchanged for its duration",
                vec![(other("2026-11-23T10:00:00Z"), 0), (other("2026-11-23T10:00:00Z"), 10)],
                15,
                Step::Acquire,
            ),
            (
                "changed since",
                vec![(other("2026-11-23T10:00:00Z"), 0), (other("2026-11-23T10:00:01Z"), 10)],
                15,
                Step::Follow { holder: "other".into(), until: t0 + s(25) },
            ),
            // A renewTime far in the future (a skewed writer) does not hold it longer.
            ("skewed future", vec![(other("2099-01-01T00:00:00Z"), 0)], 15, Step::Acquire),
            ("no renew time", vec![(Some(Record::parse(&json!({"spec": {"holderIdentity": "other"}}))), 0)], 0, Step::Acquire),
            ("garbage", vec![(Some(Record::parse(&json!({"spec": "x"}))), 0)], 0, Step::Acquire),
        ];
        for (name, reads, look, want) in cases {
            let mut observed = Observed::default();
            for (record, at) in &reads {
                observed.observe(record.as_ref(), t0 + s(*at));
            }
            assert_eq!(step(&observed, "me", t0 + s(look)), want, "{name}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_tenure_counts_from_when_the_write_was_sent_and_lapses_once() {
        let t0 = Instant::now();
        let timing = Timing::new(Duration::from_secs(15)); // renew deadline 10 s
        let s = Duration::from_secs;
        let mut t = Tenure::default();
        assert!(!t.holds(t0));
        assert!(t.wrote(t0, t0 + s(3), &timing), "answered 3 s after it was sent");
        assert_eq!(t.deadline(), Some(t0 + s(10)), "from the sending, not the answer");
        assert!(!t.lapse(t0 + s(9)));
        assert!(t.wrote(t0 + s(1), t0 + s(9), &timing));
        assert_eq!(t.deadline(), Some(t0 + s(11)));
        assert!(!t.wrote(t0 + s(2), t0 + s(20), &timing), "a late answer gives nothing");
        assert!(t.lapse(t0 + s(20)), "lapsed");
        assert!(!t.lapse(t0 + s(21)), "only once");
        assert!(!t.holds(t0 + s(21)));
        assert!(!t.wrote(t0 + s(5), t0 + s(21), &timing), "an answer after its own deadline");
    }

    #[test]
    fn writes_count_transitions_and_keep_the_acquire_time_of_a_holder() {
        let now = at("2026-11-23T10:00:10Z");
        let timing = Timing::new(Duration::from_secs(15));
        let mine = Record { acquired: Some(at("2026-11-23T09:00:00Z")), ..lease("me", "2026-11-23T10:00:08Z", 15) };
        // (previous, holder) -> (transitions, acquireTime, leaseDurationSeconds, holder)
        let cases = [
            (None, Some("me"), (0, "2026-11-23T10:00:10.000000Z", 15, "me")),
            (Some(mine.clone()), Some("me"), (2, "2026-11-23T09:00:00.000000Z", 15, "me")),
            (Some(lease("other", "2026-11-23T09:00:00Z", 15)), Some("me"), (3, "2026-11-23T10:00:10.000000Z", 15, "me")),
            (Some(mine), None, (2, "2026-11-23T10:00:10.000000Z", 1, "")),
            (
                Some(Record { transitions: i64::from(i32::MAX), ..lease("other", "2026-11-23T09:00:00Z", 15) }),
                Some("me"),
                (i64::from(i32::MAX), "2026-11-23T10:00:10.000000Z", 15, "me"),
            ),
        ];
        for (previous, holder, (transitions, acquired, secs, shown)) in cases {
            let b = body(("ns", "l"), holder, &timing, now, previous.as_ref(), &json!({}), None);
            let spec = &b["spec"];
            assert_eq!(spec["leaseTransitions"], transitions, "{previous:?}");
            assert_eq!(spec["acquireTime"], acquired, "{previous:?}");
            assert_eq!(spec["leaseDurationSeconds"], secs, "{previous:?}");
            assert_eq!(spec["holderIdentity"], shown, "{previous:?}");
            assert_eq!(spec["renewTime"], "2026-11-23T10:00:10.000000Z");
            assert_eq!(b["metadata"]["resourceVersion"].as_str(), previous.as_ref().map(|_| "7"));
            assert_eq!(Record::parse(&b).holder.as_deref(), holder);
        }
    }

    #[test]
    fn lease_transitions_are_read_within_int32() {
        for (stored, want) in [(json!(5), 5), (json!(-3), 0), (json!(i64::MAX), i64::from(i32::MAX)), (json!("x"), 0), (json!(1e300), 0)] {
            let r = Record::parse(&json!({"spec": {"holderIdentity": "x", "leaseTransitions": stored}}));
            assert_eq!(r.transitions, want, "{stored}");
        }
    }

    #[test]
    fn a_published_view_reads_back_and_a_bad_one_reads_as_none() {
        let timing = Timing::new(Duration::from_secs(5));
        let view = vec!["a".to_string(), "b".to_string()];
        let b = body(("ns", "g-1"), Some("a"), &timing, Utc::now(), None, &json!({GROUP_LABEL: "g"}), Some(&view));
        assert_eq!(Record::parse(&b).view, view);
        assert_eq!(b["metadata"]["labels"][GROUP_LABEL], "g");
        let bad = json!({"metadata": {"annotations": {VIEW_ANNOTATION: "{not json"}}});
        assert!(Record::parse(&bad).view.is_empty());
    }

    #[test]
    fn timings_renew_well_inside_the_duration() {
        let cases = [(0, 1, 666, 200), (5, 5, 3333, 1000), (15, 15, 10_000, 1000), (60, 60, 40_000, 1000)];
        for (secs, duration, deadline_ms, retry_ms) in cases {
            let t = Timing::new(Duration::from_secs(secs));
            assert_eq!(t.duration, Duration::from_secs(duration), "{secs}");
            assert_eq!(t.renew_deadline.as_millis(), deadline_ms, "{secs}");
            assert_eq!(t.retry.as_millis(), retry_ms, "{secs}");
        }
    }
}
