//! Peering: Kopf's decisions on tables of peering objects, and, on a paused clock under a
//! stalled API path, a controller that cannot write its own keepalive stops handling before its
//! record dies (when a peer of lower priority resumes), and resumes once it writes again.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use http::Method;
use parking_lot::Mutex;
use serde_json::{Value, json};

use super::peering::*;
use super::{Authority, Ownership};
use crate::clock::Clock;
use crate::cluster::{Api, Error};
use crate::logs::Logger;

/// One peering object; merge patches apply to it. When stalled, requests neither fail nor answer.
struct FakePeering {
    object: Mutex<Value>,
    stalled: AtomicBool,
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
            if self.stalled.load(Ordering::SeqCst) {
                std::future::pending::<()>().await;
            }
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

#[tokio::test(start_paused = true)]
async fn a_controller_that_cannot_write_its_keepalive_pauses_before_its_record_dies_and_resumes_after() {
    let api = Arc::new(FakePeering { object: Mutex::new(json!({"status": {}})), stalled: AtomicBool::new(false) });
    let authority = Authority::new(Ownership::All);
    let lifetime = Duration::from_secs(20);
    let peering = Peering {
        family: Family::Bosun,
        name: "default".into(),
        namespace: None,
        identity: "me".into(),
        priority: 100,
        lifetime,
        mandatory: true,
    };
    let k = Keepalive::start(peering, api.clone(), Pauses::new(authority.clone()), Logger::new(None), Clock::tokio())
        .await
        .expect("started")
        .expect("peering");
    let (_stop, rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(k.run(futures::stream::pending(), rx));
    assert!(authority.owns("obj"), "alone: runs");
    let turn = authority.begin("obj").expect("ours");
    let written = tokio::time::Instant::now();
    api.stalled.store(true, Ordering::SeqCst);
    // A peer of lower priority resumes `lifetime` after our last write: we must be paused by
    // then, and what ran told to end.
    tokio::time::timeout(lifetime, turn.revoked()).await.expect("fenced before the record died");
    let took = written.elapsed();
    assert!(took <= fence_after(lifetime), "fenced {took:?} after the last keepalive");
    assert!(!authority.owns("obj"));
    drop(turn);
    tokio::time::sleep(lifetime * 2).await;
    assert!(!authority.owns("obj"), "stays paused while the keepalive cannot be written");
    api.stalled.store(false, Ordering::SeqCst);
    let resumed = tokio::time::Instant::now();
    while !authority.owns("obj") {
        assert!(resumed.elapsed() < lifetime, "not resumed {:?} after the API came back", resumed.elapsed());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    task.abort();
}

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
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
        ("lifetime ended exactly now", status(json!({"dev": rec(666, 30, alive)})), "run", vec!["dev"]),
        ("garbage entries are skipped", status(json!({"x": 5, "y": "z"})), "run", vec![]),
        ("missing fields read as Kopf reads them", status(json!({"anon": {}})), "conflict anon", vec![]),
        ("Kopf's old zone-less lastseen", status(json!({"old": rec(1, 60, "2026-11-23T10:00:00.123456")})), "yield old", vec![]),
    ];
    for (name, body, want, dead) in cases {
        let d = decide(&body, "me", 0, now);
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
    assert_eq!(decide(&body, "me", 0, now).recheck_at, Some(at("2026-11-23T10:00:40Z")));
    assert_eq!(decide(&status(json!({})), "me", 0, now).recheck_at, None);
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
