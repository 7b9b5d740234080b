//! Property tests of the decoders of what other replicas (or anyone who may edit them) write:
//! peering records and Leases. Whatever they hold, a replica decides, never panics, and what it
//! writes itself reads back as written.

use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::lease::{self, MAX_VIEW, Record, Timing, VIEW_ANNOTATION};
use super::{peering, shards};
use crate::state::arbitrary::{json, time_text};

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap()
}

/// A field: absent, plausible, or any JSON.
fn field(plausible: BoxedStrategy<Value>) -> impl Strategy<Value = Option<Value>> {
    prop_oneof![1 => Just(None), 3 => plausible.prop_map(Some), 1 => json().prop_map(Some)]
}

fn integer() -> BoxedStrategy<Value> {
    prop_oneof![any::<i64>().prop_map(Value::from), any::<u64>().prop_map(Value::from), (0..120u64).prop_map(Value::from)].boxed()
}

fn object(fields: Vec<(&'static str, Option<Value>)>) -> Value {
    Value::Object(fields.into_iter().filter_map(|(k, v)| Some((k.to_string(), v?))).collect::<Map<_, _>>())
}

/// A peering object's status: records by identity, plausible or not.
fn peering_status() -> impl Strategy<Value = Value> {
    let record = (field(integer()), field(integer()), field(time_text().prop_map(Value::String).boxed()))
        .prop_map(|(priority, lifetime, lastseen)| object(vec![("priority", priority), ("lifetime", lifetime), ("lastseen", lastseen)]));
    let entry = prop_oneof![4 => record, 1 => json()];
    prop_oneof![
        4 => prop::collection::vec(("[a-d]", entry), 0..5).prop_map(|kv| json!({"status": Value::Object(kv.into_iter().collect())})),
        1 => json(),
    ]
}

/// The shard group of the generated Leases.
const GROUP: &str = "group";

/// A shard member's Lease whose holder a broken or hostile write replaced keeps its member
/// live (and no member of the writer's) until it expires: its member still counts on its
/// tenure, and would share its objects with the others at once otherwise. (The replica
/// simulation found members overlapping on an object after such a write.)
#[tokio::test(start_paused = true)]
async fn a_shard_lease_taken_by_someone_else_keeps_its_member_until_it_expires() {
    let s = Duration::from_secs;
    let t0 = tokio::time::Instant::now();
    let name = shards::lease_name(GROUP, "a");
    let held_by = |holder: &str, rv: &str| json!({"metadata": {"name": name, "resourceVersion": rv}, "spec": {"holderIdentity": holder, "leaseDurationSeconds": 1}});
    let mut seen = shards::Sightings::default();
    let (live, _, unknown) = shards::members(&[held_by("a", "1")], GROUP, &mut seen, t0, s(15), s(30));
    assert_eq!((live.keys().map(String::as_str).collect::<Vec<_>>(), unknown), (vec!["a"], false));
    // (seconds after the hostile write at t0 + 5 s) -> live members
    let taken = [held_by("intruder", "2")];
    let (live, _, _) = shards::members(&taken, GROUP, &mut seen, t0 + s(5), s(15), s(30));
    assert_eq!(live.keys().collect::<Vec<_>>(), ["a"], "its member, not the writer");
    let (live, _, _) = shards::members(&taken, GROUP, &mut seen, t0 + s(19), s(15), s(30));
    assert_eq!(live.keys().collect::<Vec<_>>(), ["a"], "for our own duration at least, not its 1 s");
    let (live, _, _) = shards::members(&taken, GROUP, &mut seen, t0 + s(21), s(15), s(30));
    assert!(live.is_empty(), "expired: {live:?}");
    // A member that never saw it as its member's cannot tell whose it is: the group is unknown.
    let (live, _, unknown) = shards::members(&taken, GROUP, &mut shards::Sightings::default(), t0 + s(22), s(15), s(30));
    assert_eq!((live.len(), unknown), (0, true));
}

/// A Lease, plausible or not.
fn lease_body() -> impl Strategy<Value = Value> {
    let time = || time_text().prop_map(Value::String).boxed();
    let view = prop_oneof![
        prop::collection::vec("[a-d]", 0..4).prop_map(|v| Value::String(serde_json::to_string(&v).unwrap())),
        Just(Value::String(serde_json::to_string(&(0..=MAX_VIEW).map(|i| i.to_string()).collect::<Vec<_>>()).unwrap())),
        ".{0,8}".prop_map(Value::String),
        json(),
    ];
    (
        field(prop_oneof!["[a-d]?".prop_map(Value::String)].boxed()),
        field(integer()),
        field(time()),
        field(time()),
        field(integer()),
        view,
        prop_oneof![Just(Value::from("7")), json()],
    )
        .prop_map(|(holder, duration, acquire, renew, transitions, view, rv)| {
            let spec = object(vec![
                ("holderIdentity", holder),
                ("leaseDurationSeconds", duration),
                ("acquireTime", acquire),
                ("renewTime", renew),
                ("leaseTransitions", transitions),
            ]);
            json!({"metadata": {"name": "group-1", "namespace": "ns", "resourceVersion": rv,
                "annotations": {VIEW_ANNOTATION: view}}, "spec": spec})
        })
}

#[test]
fn a_peer_seen_at_the_end_of_time_counts_and_does_not_overflow() {
    // Kopf's zone-less format takes years beyond 9999, up to chrono's last one.
    let body = json!({"status": {"dev": {"priority": 666, "lifetime": 315360000, "lastseen": "+262142-12-31T23:59:59.999999"}}});
    let peers = peering::peers(&body, now());
    assert_eq!(peers[0].deadline(), DateTime::<Utc>::MAX_UTC);
    let d = peering::decide(
        &body,
        "me",
        0,
        peering::Moment { wall: now(), mono: tokio::time::Instant::now() },
        &mut peering::Sightings::default(),
    );
    assert!(matches!(d.verdict, peering::Verdict::Yield(_)), "{d:?}");
}

#[test]
fn a_view_naming_more_members_than_a_group_has_reads_as_none() {
    let view = |n: usize| serde_json::to_string(&(0..n).map(|i| format!("m{i}")).collect::<Vec<_>>()).unwrap();
    let body = |n: usize| json!({"metadata": {"annotations": {VIEW_ANNOTATION: view(n)}}});
    assert_eq!(Record::parse(&body(MAX_VIEW)).view.len(), MAX_VIEW);
    assert!(Record::parse(&body(MAX_VIEW + 1)).view.is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn peering_decides_on_any_status_and_reads_its_own_record_back(body in peering_status(), me in "[a-d]", priority in any::<i64>(), lifetime in 0..400u64) {
        let d = peering::decide(&body, &me, priority, peering::Moment { wall: now(), mono: tokio::time::Instant::now() }, &mut peering::Sightings::default());
        prop_assert!(!d.dead.contains(&me) || body["status"][&me].is_object());
        for p in peering::peers(&body, now()) {
            let _ = (p.deadline(), p.to_string());
        }
        let _ = peering::keepalive_interval(Duration::from_secs(lifetime));
        let patch = peering::touch_patch(&me, priority, Duration::from_secs(lifetime), now());
        let mut written = body.clone();
        if written.is_object() {
            json_patch::merge(&mut written, &patch);
            if lifetime > 0 {
                let mine = peering::peers(&written, now()).into_iter().find(|p| p.identity == me).expect("our record");
                prop_assert_eq!((mine.priority, mine.lifetime, mine.lastseen), (priority, Duration::from_secs(lifetime), now()));
            }
        }
        let _ = peering::clean_patch(&d.dead);
    }

    #[test]
    fn leases_are_judged_whatever_they_hold(bodies in prop::collection::vec(lease_body(), 0..4), me in "[a-d]", forget in 0..100u64) {
        let timing = Timing::new(Duration::from_secs(15));
        let at = tokio::time::Instant::now();
        for body in &bodies {
            let r = Record::parse(body);
            prop_assert!(r.view.len() <= MAX_VIEW);
            let _ = (r.expires(), r.is_held(now()));
            let mut observed = lease::Observed::default();
            observed.observe(Some(&r), at);
            let step = lease::step(&observed, &me, at + Duration::from_secs(forget));
            let next = lease::body(("ns", "group-1"), Some(&me), &timing, now(), Some(&r), &json!({}), Some(&r.view));
            // What we write is ours when read back.
            let ours = Record::parse(&next);
            observed.observe(Some(&ours), at);
            prop_assert_eq!(lease::step(&observed, &me, at), lease::Step::Renew, "after {:?}", step);
            prop_assert_eq!(ours.view, r.view);
        }
        let mut seen = shards::Sightings::default();
        let (live, _dead, _unknown) = shards::members(&bodies, GROUP, &mut seen, at, Duration::ZERO, Duration::from_secs(forget));
        let _ = shards::members(&bodies, GROUP, &mut seen, at + Duration::from_secs(forget), Duration::ZERO, Duration::from_secs(forget));
        let _ = shards::members_by_wall(&bodies, now());
        if let Some(claims) = shards::decide(&me, &live, std::slice::from_ref(&me), true, &mut super::ring::Rings::default()) {
            let _ = claims.owns("some-uid");
        }
    }
}
