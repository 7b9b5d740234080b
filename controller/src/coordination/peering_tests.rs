//! Peering: Kopf's decisions on tables of peering objects, and, on a paused clock under a
//! stalled API path, a controller that cannot write its own keepalive stops handling before its
//! record dies (when a peer of lower priority resumes), and resumes once it writes again.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use http::Method;
use parking_lot::Mutex;
use serde_json::{Value, json};

use super::keepalive::{Keepalive, Pauses};
use super::paths_tests::Path;
use super::peering::*;
use super::{Authority, Ownership};
use crate::clock::Clock;
use crate::cluster::{Api, Error};
use crate::logs::Logger;

/// One peering object; merge patches apply to it.
struct FakePeering {
    object: Mutex<Value>,
}

impl Api for FakePeering {
    fn request<'a>(
        &'a self,
        method: Method,
        path: &'a str,
        _: Option<&'a str>,
        body: Option<Vec<u8>>,
    ) -> BoxFuture<'a, Result<Value, Error>> {
        Box::pin(async move {
            let mut object = self.object.lock();
            match method {
                Method::GET => Ok(object.clone()),
                Method::PATCH => {
                    let patch: Value = serde_json::from_slice(&body.unwrap_or_default()).unwrap();
                    json_patch::merge(&mut object, &patch);
                    Ok(object.clone())
                }
                _ => Err(Error::Api { method, path: path.into(), code: 405, reason: String::new(), message: String::new() }),
            }
        })
    }
}

/// This controller, `me`, in the cluster-wide peering `default`.
fn me(priority: i64, lifetime: Duration) -> Peering {
    Peering { family: Family::Bosun, name: "default".into(), namespace: None, identity: "me".into(), priority, lifetime, mandatory: true }
}

#[tokio::test(start_paused = true)]
async fn a_controller_that_cannot_write_its_keepalive_pauses_before_its_record_dies_and_resumes_after() {
    let fake = Arc::new(FakePeering { object: Mutex::new(json!({"status": {}})) });
    let api = Path::new(fake.clone());
    let authority = Authority::new(Ownership::All);
    let lifetime = Duration::from_secs(20);
    let peering = me(100, lifetime);
    let k = Keepalive::start(peering, api.clone(), Pauses::new(authority.clone()), Logger::new(None), Clock::tokio())
        .await
        .expect("started")
        .expect("peering");
    let (_stop, rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(k.run(futures::stream::pending(), rx));
    assert!(authority.owns("obj"), "alone: runs");
    let turn = authority.begin("obj").expect("ours");
    let written = tokio::time::Instant::now();
    api.stall(true);
    // A peer of lower priority resumes `lifetime` after our last write: we must be paused by
    // then, and what ran told to end.
    tokio::time::timeout(lifetime, turn.revoked()).await.expect("fenced before the record died");
    let took = written.elapsed();
    assert!(took <= fence_after(lifetime), "fenced {took:?} after the last keepalive");
    assert!(!authority.owns("obj"));
    drop(turn);
    tokio::time::sleep(lifetime * 2).await;
    assert!(!authority.owns("obj"), "stays paused while the keepalive cannot be written");
    api.stall(false);
    let resumed = tokio::time::Instant::now();
    while !authority.owns("obj") {
        assert!(resumed.elapsed() < lifetime, "not resumed {:?} after the API came back", resumed.elapsed());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    task.abort();
}

/// A controller whose first keep-alive cannot be written (refused, or no answer in time) has
/// not announced itself: it does not act until a keep-alive is written, and tries again soon.
#[tokio::test(start_paused = true)]
async fn a_controller_whose_first_keepalive_fails_does_not_act_until_one_is_written() {
    for hangs in [false, true] {
        let fake = Arc::new(FakePeering { object: Mutex::new(json!({"status": {}})) });
        let api = Path::new(fake.clone());
        match hangs {
            false => api.refuse(|_, _| true),
            true => api.stall_writes(true),
        }
        let authority = Authority::new(Ownership::All);
        let lifetime = Duration::from_secs(20);
        let k = Keepalive::start(me(100, lifetime), api.clone(), Pauses::new(authority.clone()), Logger::new(None), Clock::tokio())
            .await
            .expect("started")
            .expect("peering");
        assert!(!authority.owns("obj"), "hangs {hangs}: not announced, so not acting");
        let (_stop, rx) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(k.run(futures::stream::pending(), rx));
        tokio::time::sleep(lifetime).await;
        assert!(!authority.owns("obj"), "hangs {hangs}: still not announced");
        api.stall_writes(false);
        *api.refuse.lock() = None;
        let back = tokio::time::Instant::now();
        while !authority.owns("obj") {
            assert!(
                back.elapsed() < lifetime / 4 + Duration::from_secs(2),
                "hangs {hangs}: not resumed {:?} after the API came back",
                back.elapsed()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(fake.object.lock()["status"]["me"].is_object(), "its record is written");
        task.abort();
    }
}

/// A paused controller whose watch of the peering object brings nothing (it lags, or hangs)
/// reads the object when the peer that pauses it looks dead: it stays paused for as long as
/// that peer writes keep-alives, and resumes a lifetime after it saw the last one (seen at the
/// next read: within two lifetimes of its writing).
#[tokio::test(start_paused = true)]
async fn a_paused_controller_reads_the_object_before_resuming_when_its_watch_brings_nothing() {
    let lifetime = Duration::from_secs(10);
    let clock = Clock::tokio();
    let high = |now: DateTime<Utc>| json!({"priority": 200, "lifetime": 10, "lastseen": now.to_rfc3339()});
    let fake = Arc::new(FakePeering { object: Mutex::new(json!({"status": {"high": high(clock.now())}})) });
    let authority = Authority::new(Ownership::All);
    let peering = me(100, lifetime);
    let k = Keepalive::start(peering, fake.clone(), Pauses::new(authority.clone()), Logger::new(None), clock).await.unwrap().unwrap();
    assert!(!authority.owns("obj"), "paused in favour of the higher peer");
    let (_stop, rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(k.run(futures::stream::pending(), rx));
    let beats = {
        let fake = fake.clone();
        tokio::spawn(async move {
            for _ in 0..12 {
                tokio::time::sleep(Duration::from_secs(5)).await;
                fake.object.lock()["status"]["high"] = high(clock.now());
            }
        })
    };
    let start = tokio::time::Instant::now();
    while !beats.is_finished() {
        assert!(!authority.owns("obj"), "resumed {:?} in, while the higher peer writes keep-alives", start.elapsed());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let last = tokio::time::Instant::now();
    while !authority.owns("obj") {
        assert!(last.elapsed() < lifetime * 2 + Duration::from_secs(1), "not resumed {:?} after the last keep-alive", last.elapsed());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(last.elapsed() >= lifetime - Duration::from_millis(200), "resumed {:?} after the last keep-alive", last.elapsed());
    task.abort();
}

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

/// The moment of wall time `wall` with the monotonic clock in step with it (no wall-clock
/// step): as far from one fixed instant as `wall` is from the start of 2026-11-23.
fn moment(wall: DateTime<Utc>) -> Moment {
    static BASE: std::sync::OnceLock<tokio::time::Instant> = std::sync::OnceLock::new();
    let base = *BASE.get_or_init(tokio::time::Instant::now);
    Moment { wall, mono: base + (wall - at("2026-11-23T00:00:00Z")).to_std().unwrap() }
}

fn status(entries: Value) -> Value {
    json!({"status": entries})
}

fn rec(priority: i64, lifetime: u64, lastseen: &str) -> Value {
    json!({"priority": priority, "lifetime": lifetime, "lastseen": lastseen})
}

#[test]
fn a_controller_runs_yields_or_conflicts_as_kopf_decides() {
    let now = at("2026-11-23T10:00:30Z");
    let alive = "2026-11-23T10:00:00+00:00";
    let dead = "2026-11-23T09:00:00+00:00";
    let names = |v: &Verdict| match v {
        Verdict::Run => "run".to_string(),
        Verdict::Yield(p) => format!("yield {}", p.iter().map(|p| p.identity.as_str()).collect::<Vec<_>>().join(",")),
        Verdict::Conflict(p) => format!("conflict {}", p.iter().map(|p| p.identity.as_str()).collect::<Vec<_>>().join(",")),
    };
    let cases = [
        ("alone", status(json!({"me": rec(0, 60, alive)})), "run", vec![]),
        ("no status", json!({}), "run", vec![]),
        ("a lower peer", status(json!({"me": rec(0, 60, alive), "low": rec(-5, 60, alive)})), "run", vec![]),
        ("a higher peer", status(json!({"me": rec(0, 60, alive), "dev": rec(666, 60, alive)})), "yield dev", vec![]),
        ("a higher dead peer", status(json!({"dev": rec(666, 60, dead)})), "run", vec!["dev"]),
        ("a peer with our priority", status(json!({"twin": rec(0, 60, alive)})), "conflict twin", vec![]),
        ("higher wins over same", status(json!({"twin": rec(0, 60, alive), "dev": rec(666, 60, alive)})), "yield dev", vec![]),
        ("our own record is not a peer", status(json!({"me": rec(999, 60, alive)})), "run", vec![]),
        // Its lifetime ended by our clock, which may differ from its: first seen now, it lives a lifetime from now.
        ("lifetime ended by our clock", status(json!({"dev": rec(666, 30, alive)})), "yield dev", vec![]),
        (
            "left longer ago than the clocks may differ",
            status(json!({"dev": rec(666, 30, "2026-11-23T09:58:59+00:00")})),
            "run",
            vec!["dev"],
        ),
        ("garbage entries are skipped", status(json!({"x": 5, "y": "z"})), "run", vec![]),
        ("missing fields read as Kopf reads them", status(json!({"anon": {}})), "conflict anon", vec![]),
        ("Kopf's old zone-less lastseen", status(json!({"old": rec(1, 60, "2026-11-23T10:00:00.123456")})), "yield old", vec![]),
    ];
    for (name, body, want, dead) in cases {
        let d = decide(&body, "me", 0, moment(now), &mut Sightings::default());
        assert_eq!(names(&d.verdict), want, "{name}");
        assert_eq!(d.dead, dead, "{name}");
    }
}

#[test]
fn a_paused_controller_looks_again_when_the_first_peer_pausing_it_dies() {
    let now = at("2026-11-23T10:00:30Z");
    let body = status(
        json!({"dev": rec(666, 60, "2026-11-23T10:00:00Z"), "freeze": rec(100, 40, "2026-11-23T10:00:00Z"), "low": rec(-1, 5, "2026-11-23T10:00:29Z")}),
    );
    let mut seen = Sightings::default();
    let at_40 = Some(moment(at("2026-11-23T10:00:40Z")).mono);
    assert_eq!(decide(&body, "me", 0, moment(at("2026-11-23T10:00:00Z")), &mut seen).recheck_at, at_40);
    assert_eq!(decide(&body, "me", 0, moment(now), &mut seen).recheck_at, at_40, "from when it was seen");
    assert_eq!(decide(&status(json!({})), "me", 0, moment(now), &mut seen).recheck_at, None);
}

/// A peer's record lives for its lifetime after this controller saw its `lastseen` change,
/// on this controller's clock alone: a higher peer whose clock is 20 s behind (its `lastseen`
/// always looks 20 s old) or 20 s ahead keeps us paused while it writes keepalives every 10 s
/// of a 15 s lifetime, and is dead 15 s after its last one was seen, not earlier or later.
#[test]
fn a_peer_is_judged_by_when_its_record_was_seen_to_change_not_by_its_clock() {
    let t0 = at("2026-11-23T10:00:00Z");
    for skew in [-20i64, 20] {
        let mut seen = Sightings::default();
        let record = |written: DateTime<Utc>| {
            let lastseen = (written + chrono::Duration::seconds(skew)).to_rfc3339();
            status(json!({"high": rec(10, 15, &lastseen)}))
        };
        let yields = |d: &Decision| matches!(&d.verdict, Verdict::Yield(p) if p[0].identity == "high");
        for beat in 0..6 {
            let written = t0 + chrono::Duration::seconds(10 * beat);
            for after in [0, 5, 9] {
                let now = written + chrono::Duration::seconds(after);
                let d = decide(&record(written), "me", 0, moment(now), &mut seen);
                assert!(yields(&d), "skew {skew}: beat {beat} +{after}s: {d:?}");
            }
        }
        let last = t0 + chrono::Duration::seconds(50);
        let d = decide(&record(last), "me", 0, moment(last + chrono::Duration::seconds(14)), &mut seen);
        assert!(yields(&d) && d.recheck_at == Some(moment(last + chrono::Duration::seconds(15)).mono), "skew {skew}: {d:?}");
        let d = decide(&record(last), "me", 0, moment(last + chrono::Duration::seconds(15)), &mut seen);
        assert_eq!((d.verdict, d.dead), (Verdict::Run, vec!["high".to_string()]), "skew {skew}");
    }
}

/// The wall clock steps (NTP, a VM resumed) while the monotonic one runs on: a step forward
/// by an hour does not make a live peer dead (its record would be deleted and we would resume
/// beside it), and a step back by an hour does not keep a silent one alive past its lifetime.
#[test]
fn a_wall_clock_step_neither_kills_a_live_peer_nor_keeps_a_dead_one() {
    let t0 = at("2026-11-23T10:00:00Z");
    let body = status(json!({"high": rec(10, 15, "2026-11-23T10:00:00Z")}));
    let stepped = |step: i64, after: u64| {
        let m = moment(t0);
        Moment {
            wall: t0 + chrono::Duration::seconds(step) + chrono::Duration::seconds(after as i64),
            mono: m.mono + Duration::from_secs(after),
        }
    };
    for step in [3600i64, -3600] {
        let mut seen = Sightings::default();
        let d = decide(&body, "me", 0, moment(t0), &mut seen);
        assert!(matches!(d.verdict, Verdict::Yield(_)), "step {step}: paused at first");
        let d = decide(&body, "me", 0, stepped(step, 5), &mut seen);
        assert!(matches!(d.verdict, Verdict::Yield(_)) && d.dead.is_empty(), "step {step}: alive 5 s after it was seen: {d:?}");
        let d = decide(&body, "me", 0, stepped(step, 15), &mut seen);
        assert_eq!((d.verdict, d.dead), (Verdict::Run, vec!["high".to_string()]), "step {step}: dead 15 s after it was seen");
    }
}

#[test]
fn touches_write_or_remove_our_record() {
    let now = at("2026-11-23T10:00:00Z");
    assert_eq!(
        touch_patch("me", 666, Duration::from_secs(60), now),
        json!({"status": {"me": {"priority": 666, "lifetime": 60, "lastseen": "2026-11-23T10:00:00.000000+00:00"}}})
    );
    assert_eq!(touch_patch("me", 0, Duration::ZERO, now), json!({"status": {"me": null}}));
    assert_eq!(clean_patch(&["a".into(), "b".into()]), json!({"status": {"a": null, "b": null}}));
    let written = touch_patch("me", 7, Duration::from_secs(60), now);
    assert_eq!(peers(&written, now)[0], Peer { identity: "me".into(), priority: 7, lifetime: Duration::from_secs(60), lastseen: now });
}

#[test]
fn keepalives_come_five_to_ten_seconds_before_the_lifetime_ends() {
    for (lifetime, low, high) in [(60, 50, 55), (12, 2, 7), (5, 1, 1), (1, 1, 1)] {
        for _ in 0..50 {
            let s = keepalive_interval(Duration::from_secs(lifetime)).as_secs();
            assert!((low..=high).contains(&s), "{lifetime}: {s}");
        }
    }
}

#[test]
fn peering_objects_are_found_where_kopf_and_bosun_keep_them() {
    let cases = [
        (Family::Kopf, None, "/apis/kopf.dev/v1/clusterkopfpeerings/default", "ClusterKopfPeering"),
        (Family::Kopf, Some("ns"), "/apis/kopf.dev/v1/namespaces/ns/kopfpeerings/default", "KopfPeering"),
        (Family::Bosun, None, "/apis/bosun.dev/v1/clusterbosunpeerings/default", "ClusterBosunPeering"),
        (Family::Bosun, Some("ns"), "/apis/bosun.dev/v1/namespaces/ns/bosunpeerings/default", "BosunPeering"),
    ];
    for (family, ns, path, kind) in cases {
        assert_eq!(family.path(ns, "default"), path);
        assert_eq!(family.kind(ns), kind);
        assert_eq!(family.api_resource(ns).kind, kind);
    }
}
