//! The runtime on a paused clock: workers, cycles, retries and background tasks driven through
//! the two I/O traits with an in-memory API server and scripted handler servers, so hours of
//! delays pass in milliseconds and every failure can be staged exactly.

mod calls;
mod conflicts;
mod daemons;
mod lines;
mod order;
mod posting;
mod revoked;
pub(super) mod rig;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bosun_proto::v1 as pb;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::task::TaskTracker;

use crate::cluster::watching::Seen;
use crate::handlers::dispatch::{CallFailure, HandlerClient};
use crate::logs::Logger;
use rig::*;

#[tokio::test(start_paused = true)]
async fn resume_handlers_survive_an_unreachable_server_and_run_once_it_is_back() {
    let handled = object(json!({"status": {"bosun.dev": {"last-handled-configuration": "{\"spec\":{\"a\":1}}\n"}}}));
    let r = handler("r", pb::HandlerKind::Resume, Default::default());
    let script: Script = Box::new(|_, n| if n < 2 { Err(CallFailure::Unreachable("connection refused".into())) } else { ok() });
    let rig = rig(handled.clone(), vec![r], vec![("r", script)]);
    rig.router.deliver(Seen::Listed(handled));
    rig.until("the resume handler succeeds", Duration::from_secs(60), |r| r.logged("Handler 'r' succeeded.") == 1).await;
    assert_eq!(rig.server.count("r"), 3, "two unreachable attempts, then the call that ran");
    assert_eq!(rig.logged("Handler server fake://handlers is unreachable"), 1, "the outage is said once");
    assert_eq!(rig.logged("Handler server fake://handlers answers again; 1 object(s) waited for it."), 1);
}

#[tokio::test(start_paused = true)]
async fn the_finalizer_is_on_the_object_before_the_first_handler_runs_when_a_delete_handler_exists() {
    let fresh = object(json!({}));
    let c = handler("c", pb::HandlerKind::Create, Default::default());
    let d = handler("d", pb::HandlerKind::Delete, Default::default());
    let rig = rig(fresh.clone(), vec![c, d], vec![("c", Box::new(|_, _| ok())), ("d", Box::new(|_, _| ok()))]);
    rig.router.deliver(Seen::Upsert(fresh));
    rig.until("creation is processed", Duration::from_secs(10), |r| r.logged("Creation is processed: 1 succeeded; 0 failed.") == 1).await;
    let calls = rig.server.calls.lock().clone();
    let (_, seen_by_create) = calls.iter().find(|(id, _)| id == "c").unwrap();
    assert_eq!(seen_by_create["metadata"]["finalizers"], json!(["bosun.dev/finalizer"]), "while create ran");
    // Deleted while nothing runs: the delete handler runs and the object goes.
    let mut deleting = rig.api.get_now();
    deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    deleting["metadata"]["resourceVersion"] = json!("100");
    *rig.api.object.lock() = Some(deleting.clone());
    rig.router.deliver(Seen::Upsert(deleting));
    rig.until("the object is gone", Duration::from_secs(10), |r| r.api.object.lock().is_none()).await;
    assert_eq!(rig.server.count("d"), 1);
}

#[tokio::test(start_paused = true)]
async fn a_handler_that_raises_is_retried_with_its_backoff_until_its_retries_run_out() {
    let fresh = object(json!({}));
    let c =
        handler("c", pb::HandlerKind::Create, pb::HandlerOptions { retries: Some(3), backoff_seconds: Some(30.0), ..Default::default() });
    let script: Script =
        Box::new(|_, _| Err(CallFailure::Failed { code: tonic::Code::Unknown, message: "Exception calling application: boom".into() }));
    let rig = rig(fresh.clone(), vec![c], vec![("c", script)]);
    let started = tokio::time::Instant::now();
    rig.router.deliver(Seen::Upsert(fresh));
    rig.until("the handler gives up", Duration::from_secs(600), |r| {
        r.logged("Handler 'c' failed permanently: Handler 'c' has exceeded 3 retries.") == 1
    })
    .await;
    assert_eq!(rig.server.count("c"), 3);
    assert!(started.elapsed() >= Duration::from_secs(90), "three backoffs of 30 s: {:?}", started.elapsed());
    assert_eq!(rig.logged("failed with an exception. Will retry. failed with UNKNOWN: Exception calling application: boom"), 3);
    assert_eq!(rig.logged("unreachable"), 0, "a server that answered is not unreachable");
    assert!(rig.api.get_now()["metadata"]["annotations"]["bosun.dev/last-handled-configuration"].is_string(), "the cause is processed");
}

#[tokio::test(start_paused = true)]
async fn a_handler_that_never_answers_in_time_ends_with_its_timeout() {
    let fresh = object(json!({}));
    let c = handler(
        "c",
        pb::HandlerKind::Create,
        pb::HandlerOptions { timeout_seconds: Some(100.0), backoff_seconds: Some(30.0), ..Default::default() },
    );
    let rig = rig(fresh.clone(), vec![c], vec![("c", Box::new(|_, _| Err(CallFailure::TimedOut(Duration::from_secs(3)))))]);
    rig.router.deliver(Seen::Upsert(fresh));
    rig.until("the handler times out", Duration::from_secs(600), |r| r.logged("Handler 'c' has timed out after") == 1).await;
    // Each attempt's line (the bodies of the cycles' debug lines carry the message too).
    let said = rig.lines.lock().iter().filter(|l| l.contains("did not answer in 3s") && !l.contains("is in progress")).count();
    assert_eq!(said, rig.server.count("c"));
}

#[tokio::test(start_paused = true)]
async fn a_refused_patch_fails_only_its_handler_and_the_others_results_are_stored() {
    let fresh = object(json!({}));
    let patching = |p: Value| -> Script {
        Box::new(move |_, _| {
            Ok(pb::HandleResponse {
                outcome: pb::Outcome::Success as i32,
                merge_patch: serde_json::to_vec(&p).unwrap(),
                result: b"true".to_vec(),
                ..Default::default()
            })
        })
    };
    let good = handler("good", pb::HandlerKind::Create, Default::default());
    let bad = handler("bad", pb::HandlerKind::Create, Default::default());
    let rig = rig(
        fresh.clone(),
        vec![good, bad],
        vec![("good", patching(json!({"spec": {"b": 2}}))), ("bad", patching(json!({"spec": {"forbidden": 1}})))],
    );
    rig.router.deliver(Seen::Upsert(fresh));
    rig.until("creation is processed", Duration::from_secs(10), |r| r.logged("Creation is processed: 1 succeeded; 1 failed.") == 1).await;
    let o = rig.api.get_now();
    assert_eq!((o["spec"]["b"].clone(), o["status"]["good"].clone()), (json!(2), json!(true)), "{o:#}");
    assert!(o["status"].get("bad").is_none() && o["spec"].get("forbidden").is_none(), "{o:#}");
    assert_eq!(rig.server.count("good"), 1, "not re-run");
}

#[tokio::test(start_paused = true)]
async fn an_object_deleted_while_its_create_handler_runs_gets_its_delete_handler() {
    let fresh = object(json!({}));
    let c = handler("c", pb::HandlerKind::Create, Default::default());
    let d = handler("d", pb::HandlerKind::Delete, Default::default());
    let rig = rig(fresh.clone(), vec![c, d], vec![("c", Box::new(|_, _| ok())), ("d", Box::new(|_, _| ok()))]);
    // The deletion lands while `c` runs; its watch event is older than the cycle's own write,
    // so the worker only learns of it from the write's answer.
    rig.server.meanwhile.lock().insert(
        "c".into(),
        Box::new(|api: &FakeApi| {
            let mut guard = api.object.lock();
            let o = guard.as_mut().unwrap();
            o["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
            let rv: u64 = o["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
            o["metadata"]["resourceVersion"] = json!((rv + 1).to_string());
        }),
    );
    rig.router.deliver(Seen::Upsert(fresh));
    rig.until("the object is gone", Duration::from_secs(10), |r| r.api.object.lock().is_none()).await;
    assert_eq!((rig.server.count("c"), rig.server.count("d")), (1, 1));
}

/// The body of a deleting object, delivered again while its delete handler runs (a relist
/// after a gain, a watch behind) and again after its deletion completed (a listing taken
/// before, delivered late, to a new worker): neither calls the delete handler again, though
/// the API server answers the write that completed the deletion with its resourceVersion
/// unchanged.
#[tokio::test(start_paused = true)]
async fn a_deleting_objects_stale_bodies_after_its_deletion_completed_do_not_call_its_delete_handler_again() {
    let d = handler("d", pb::HandlerKind::Delete, Default::default());
    let rig = rig(finalized(), vec![d], vec![("d", Box::new(|_, _| ok()))]);
    rig.server.slow.lock().insert("d".into(), Duration::from_secs(2));
    let deleting = rig.change(|o| o["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z"));
    rig.router.deliver(Seen::Upsert(deleting.clone()));
    tokio::time::sleep(Duration::from_secs(1)).await;
    rig.router.deliver(Seen::Upsert(deleting.clone()));
    rig.until("the object is gone", Duration::from_secs(10), |r| r.api.object.lock().is_none()).await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(rig.router.workers(), 0, "its worker went away");
    rig.router.deliver(Seen::Upsert(deleting));
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(rig.server.count("d"), 1, "{:#?}", rig.lines.lock());
}

#[tokio::test(start_paused = true)]
async fn objects_waiting_for_a_server_are_woken_the_moment_it_is_back_not_after_their_backoff() {
    let fresh = object(json!({}));
    let c = handler("c", pb::HandlerKind::Create, Default::default());
    let script: Script = Box::new(|_, n| if n < 5 { Err(CallFailure::Unreachable("connection refused".into())) } else { ok() });
    let rig = rig(fresh.clone(), vec![c], vec![("c", script)]);
    rig.router.deliver(Seen::Upsert(fresh));
    // Throttled 1, 1, 2, 3 s after the first four attempts; 5 s after the fifth.
    rig.until("five unreachable attempts", Duration::from_secs(30), |r| r.server.count("c") == 5).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(rig.server.count("c"), 5, "still waiting for the backoff: nothing tells it the server is back");
    let back = tokio::time::Instant::now();
    assert_eq!(rig.outages.up("fake://handlers"), Some(1), "one object waited");
    rig.until("the handler succeeds", Duration::from_secs(10), |r| r.logged("Handler 'c' succeeded.") == 1).await;
    assert!(back.elapsed() < Duration::from_millis(500), "woken at once, not after 5 s: {:?}", back.elapsed());
}

#[tokio::test(start_paused = true)]
async fn objects_that_waited_for_a_server_go_on_one_after_the_other_in_the_order_they_began_to_wait() {
    let outages = Arc::new(crate::handlers::dispatch::Outages::default());
    let down = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let mut rigs = Vec::new();
    for name in ["c", "a", "b"] {
        let body = object(json!({"metadata": {"name": name, "uid": name}}));
        let down = down.clone();
        let script: Script =
            Box::new(
                move |_, _| {
                    if down.load(Ordering::SeqCst) { Err(CallFailure::Unreachable("connection refused".into())) } else { ok() }
                },
            );
        let handler = handler("h", pb::HandlerKind::Create, Default::default());
        let rig = rig_sharing(body.clone(), vec![handler], vec![("h", script)], outages.clone());
        rig.router.deliver(Seen::Upsert(body));
        rig.until("the server is found away", Duration::from_secs(1), |r| r.server.count("h") == 1).await;
        rigs.push(rig);
    }
    down.store(false, Ordering::SeqCst);
    let back = Instant::now();
    assert_eq!(outages.up("fake://handlers"), Some(3));
    for rig in &rigs {
        rig.until("the handler succeeds", Duration::from_secs(1), |r| r.logged("Handler 'h' succeeded.") == 1).await;
    }
    let went_on: Vec<u128> = rigs.iter().map(|r| (r.server.sent.lock()[1].2 - back).as_millis()).collect();
    assert_eq!(went_on, [0, 100, 200], "c, a, b: as they began to wait, 100 ms apart, none before its turn");
}

// The worker.

#[tokio::test(start_paused = true)]
async fn events_during_a_cycle_collapse_to_the_newest_and_one_object_never_has_two_cycles() {
    let fresh = object(json!({}));
    let c = handler("c", pb::HandlerKind::Create, Default::default());
    let u = handler("u", pb::HandlerKind::Update, Default::default());
    let rig = rig(fresh.clone(), vec![c, u], vec![("c", Box::new(|_, _| ok())), ("u", Box::new(|_, _| ok()))]);
    rig.server.slow.lock().insert("c".into(), Duration::from_secs(10));
    rig.router.deliver(Seen::Upsert(fresh));
    // Three changes land while `c` runs; their events queue behind the cycle.
    for a in 2..=4 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let changed = rig.change(|o| o["spec"]["a"] = json!(a));
        rig.router.deliver(Seen::Upsert(changed));
    }
    rig.until("the update is processed", Duration::from_secs(60), |r| r.logged("Updating is processed: 1 succeeded; 0 failed.") == 1).await;
    let updates = rig.server.sent_to("u");
    assert_eq!(updates.len(), 1, "one update for three changes: {updates:#?}");
    assert_eq!(updates[0]["spec"]["a"], json!(4), "the newest");
    assert_eq!(rig.server.most_in_flight.load(Ordering::SeqCst), 1);
    assert_eq!(rig.router.workers(), 1);
}

#[tokio::test(start_paused = true)]
async fn an_event_older_than_the_cycles_own_write_is_skipped() {
    let fresh = object(json!({}));
    let c = handler("c", pb::HandlerKind::Create, Default::default());
    let rig = rig(fresh.clone(), vec![c], vec![("c", Box::new(|_, _| ok()))]);
    rig.router.deliver(Seen::Upsert(fresh.clone()));
    rig.until("creation is processed", Duration::from_secs(10), |r| r.logged("Creation is processed") == 1).await;
    // The write's own echo, then a stale event from before it (a slow watch): were either
    // handled as news, the stale one would run the create handler again.
    rig.router.deliver(Seen::Upsert(rig.api.get_now()));
    rig.router.deliver(Seen::Upsert(fresh));
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(rig.server.count("c"), 1);
    assert_eq!(*rig.api.writes.lock(), 1, "no write for the echo");
}

#[tokio::test(start_paused = true)]
async fn a_worker_with_nothing_to_do_goes_away_after_30_seconds_and_comes_back_with_the_next_event() {
    let fresh = object(json!({}));
    let u = handler("u", pb::HandlerKind::Update, Default::default());
    let rig = rig(fresh.clone(), vec![u], vec![("u", Box::new(|_, _| ok()))]);
    rig.router.deliver(Seen::Upsert(fresh));
    tokio::time::sleep(Duration::from_secs(29)).await;
    assert_eq!(rig.router.workers(), 1);
    rig.until("the idle worker leaves", Duration::from_secs(5), |r| r.router.workers() == 0).await;
    let changed = rig.change(|o| o["spec"]["a"] = json!(2));
    rig.router.deliver(Seen::Upsert(changed));
    rig.until("the update is processed", Duration::from_secs(5), |r| r.server.count("u") == 1).await;
    assert_eq!(rig.router.workers(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_worker_whose_cycle_wrote_nothing_goes_at_once() {
    let fresh = object(json!({}));
    let c = handler("c", pb::HandlerKind::Create, Default::default());
    let rig = rig(fresh.clone(), vec![c], vec![("c", Box::new(|_, _| ok()))]);
    rig.router.deliver(Seen::Upsert(fresh));
    rig.until("creation is processed", Duration::from_secs(10), |r| r.logged("Creation is processed") == 1).await;
    assert_eq!(rig.router.workers(), 1, "it stays to know the echo of its write");
    rig.until("the worker leaves", Duration::from_secs(35), |r| r.router.workers() == 0).await;
    // As after a restart: the handled object is listed again; nothing to do, nothing kept.
    let writes = *rig.api.writes.lock();
    let started = tokio::time::Instant::now();
    rig.router.deliver(Seen::Listed(rig.api.get_now()));
    rig.until("the idle worker leaves", Duration::from_secs(1), |r| r.router.workers() == 0).await;
    assert!(started.elapsed() < Duration::from_secs(1), "at once, not after {:?}", started.elapsed());
    assert_eq!((rig.server.count("c"), *rig.api.writes.lock()), (1, writes), "no call, no write");
}

#[tokio::test(start_paused = true)]
async fn framework_failures_are_throttled_on_kopfs_fibonacci_schedule() {
    let fresh = object(json!({}));
    let c = handler("c", pb::HandlerKind::Create, Default::default());
    let script: Script = Box::new(|_, n| if n < 6 { Err(CallFailure::Unreachable("connection refused".into())) } else { ok() });
    let rig = rig(fresh.clone(), vec![c], vec![("c", script)]);
    rig.router.deliver(Seen::Upsert(fresh));
    rig.until("the handler succeeds", Duration::from_secs(60), |r| r.logged("Handler 'c' succeeded.") == 1).await;
    let secs: Vec<u64> = rig.server.schedule("c").iter().map(Duration::as_secs).collect();
    assert_eq!(secs, [0, 1, 2, 4, 7, 12, 20], "throttled 1, 1, 2, 3, 5, 8 s");
}

// Timers.

#[tokio::test(start_paused = true)]
async fn a_timer_waits_its_interval_after_each_call_or_from_each_start_when_sharp() {
    for (sharp, want) in [(false, [0, 13, 26]), (true, [0, 10, 20])] {
        let body = finalized();
        let t = timer("t", pb::TimerOptions { interval_seconds: 10.0, sharp, ..Default::default() });
        let rig = rig(body.clone(), vec![t], vec![("t", Box::new(|_, _| ok()))]);
        rig.server.slow.lock().insert("t".into(), Duration::from_secs(3));
        rig.router.deliver(Seen::Upsert(body));
        rig.until("three calls", Duration::from_secs(60), |r| r.logged("Timer 't' succeeded.") == 3).await;
        let secs: Vec<u64> = rig.server.schedule("t").iter().take(3).map(Duration::as_secs).collect();
        assert_eq!(secs, want, "sharp: {sharp}");
    }
}

#[tokio::test(start_paused = true)]
async fn an_idle_timer_waits_until_the_object_has_not_changed_for_its_idle_time() {
    let body = finalized();
    let t = timer("t", pb::TimerOptions { interval_seconds: 1.0, idle_seconds: 5.0, ..Default::default() });
    let rig = rig(body.clone(), vec![t], vec![("t", Box::new(|_, _| ok()))]);
    let start = Instant::now();
    rig.router.deliver(Seen::Upsert(body));
    for a in 1..=3 {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let changed = rig.change(|o| o["spec"]["a"] = json!(a + 1));
        rig.router.deliver(Seen::Upsert(changed));
    }
    assert_eq!(rig.server.count("t"), 0, "changed every 3 s: never idle for 5 s");
    rig.until("the timer is called", Duration::from_secs(30), |r| r.server.count("t") == 1).await;
    assert_eq!(Instant::now().duration_since(start).as_secs(), 14, "5 s after the last change at 9 s");
}

#[tokio::test(start_paused = true)]
async fn a_timer_that_fails_temporarily_is_called_again_after_the_delay_it_asked_for() {
    let body = finalized();
    let t = timer("t", pb::TimerOptions { interval_seconds: 100.0, ..Default::default() });
    let script: Script = Box::new(|_, n| {
        if n == 0 {
            Ok(pb::HandleResponse {
                outcome: pb::Outcome::TemporaryError as i32,
                delay_seconds: Some(7.0),
                message: "not yet".into(),
                ..Default::default()
            })
        } else {
            ok()
        }
    });
    let rig = rig(body.clone(), vec![t], vec![("t", script)]);
    rig.router.deliver(Seen::Upsert(body));
    rig.until("the second call", Duration::from_secs(30), |r| r.server.count("t") == 2).await;
    assert_eq!(rig.server.schedule("t")[1].as_secs(), 7);
    assert_eq!(rig.logged("Timer 't' failed temporarily: not yet"), 1);
}

// Activities.

#[tokio::test(start_paused = true)]
async fn startup_retries_temporary_failures_after_their_delay_and_stops_on_a_permanent_one() {
    let rig = rig(object(json!({})), vec![], vec![]);
    rig.server.activities.lock().insert(
        "warm".into(),
        Box::new(|n| {
            let outcome = if n < 2 { pb::Outcome::TemporaryError } else { pb::Outcome::Success };
            Ok(pb::ActivityResponse { outcome: outcome as i32, delay_seconds: Some(7.0), ..Default::default() })
        }),
    );
    rig.server.activities.lock().insert(
        "broken".into(),
        Box::new(|_| Ok(pb::ActivityResponse { outcome: pb::Outcome::PermanentError as i32, message: "no".into(), ..Default::default() })),
    );
    let warm = handler("warm", pb::HandlerKind::Startup, Default::default());
    let broken = handler("broken", pb::HandlerKind::Startup, Default::default());
    let servers: Vec<Arc<dyn HandlerClient>> = vec![rig.server.clone()];
    let log = Logger::new(None);
    super::activities::startup(&[&warm], &servers, &log).await.expect("succeeds on the third attempt");
    let secs: Vec<u64> = rig.server.schedule("warm").iter().map(Duration::as_secs).collect();
    assert_eq!(secs, [0, 7, 14]);
    let err = super::activities::startup(&[&broken, &warm], &servers, &log).await.unwrap_err();
    assert_eq!(err.to_string(), "startup handler 'broken' failed permanently: no");
    assert_eq!(rig.server.schedule("warm").len(), 3, "nothing after a permanent failure");
}

#[tokio::test(start_paused = true)]
async fn startup_handlers_settings_are_gathered_from_their_successes_a_later_ones_over_an_earlier_ones() {
    let rig = rig(object(json!({})), vec![], vec![]);
    let answer = |outcome: pb::Outcome, settings: pb::OperatorSettings| {
        Ok(pb::ActivityResponse { outcome: outcome as i32, delay_seconds: Some(1.0), settings: Some(settings), ..Default::default() })
    };
    rig.server.activities.lock().insert(
        "first".into(),
        Box::new(move |n| {
            if n == 0 {
                // A failed attempt's settings are not taken.
                answer(pb::Outcome::TemporaryError, pb::OperatorSettings { peering_name: Some("not-this".into()), ..Default::default() })
            } else {
                answer(
                    pb::Outcome::Success,
                    pb::OperatorSettings { finalizer: Some("a.op/f".into()), max_workers: Some(2), ..Default::default() },
                )
            }
        }),
    );
    rig.server.activities.lock().insert(
        "second".into(),
        Box::new(move |_| answer(pb::Outcome::Success, pb::OperatorSettings { finalizer: Some("b.op/f".into()), ..Default::default() })),
    );
    let (first, second) =
        (handler("first", pb::HandlerKind::Startup, Default::default()), handler("second", pb::HandlerKind::Startup, Default::default()));
    let servers: Vec<Arc<dyn HandlerClient>> = vec![rig.server.clone()];
    let got = super::activities::startup(&[&first, &second], &servers, &Logger::new(None)).await.unwrap();
    let want = pb::OperatorSettings { finalizer: Some("b.op/f".into()), max_workers: Some(2), ..Default::default() };
    assert_eq!(got, want);
}

#[tokio::test(start_paused = true)]
async fn no_handler_runs_before_the_index_has_seen_the_first_listing_and_deletions_reach_the_index() {
    let fresh = object(json!({}));
    let c = handler("c", pb::HandlerKind::Create, Default::default());
    let idx = handler("idx", pb::HandlerKind::Index, Default::default());
    let types: Arc<Mutex<Vec<String>>> = Arc::default();
    let record: Script = {
        let types = types.clone();
        Box::new(move |req, _| {
            assert_eq!(req.reason, pb::Reason::Index as i32);
            types.lock().push(req.event_type.clone());
            ok()
        })
    };
    let rig = rig(fresh.clone(), vec![c, idx], vec![("c", Box::new(|_, _| ok())), ("idx", record)]);
    rig.server.slow.lock().insert("idx".into(), Duration::from_secs(5));
    let hold = rig.ctx.gate.hold("kopfexamples");
    let indexer = super::indexing::Indexer::new(rig.ctx.clone(), 1, Some(hold), TaskTracker::new(), rig._stop.subscribe());
    let listed = Seen::Listed(fresh.clone());
    indexer.observe(&listed);
    rig.router.deliver(listed);
    indexer.listed();
    rig.until("the create handler runs", Duration::from_secs(60), |r| r.server.count("c") == 1).await;
    let sent: Vec<(String, Instant)> = rig.server.sent.lock().iter().map(|(id, _, t)| (id.clone(), *t)).collect();
    assert_eq!(sent[0].0, "idx", "the index first: {sent:?}");
    assert!(sent[1].1 - sent[0].1 >= Duration::from_secs(5), "create waited for the slow index call: {sent:?}");
    assert_eq!(rig.logged("Indexed 1 object(s) of"), 1);
    assert!(rig.ctx.gate.is_open());
    // A change is indexed again, a deletion tells the index to drop the object.
    // (One after the other: events that came together would be indexed as one, the last.)
    indexer.observe(&Seen::Upsert(rig.change(|o| o["spec"]["a"] = json!(2))));
    rig.until("the change reaches the index", Duration::from_secs(60), |_| types.lock().len() == 2).await;
    indexer.observe(&Seen::Deleted(rig.api.get_now()));
    rig.until("the deletion reaches the index", Duration::from_secs(60), |_| types.lock().len() == 3).await;
    assert_eq!(*types.lock(), vec!["", "MODIFIED", "DELETED"]);
}

#[tokio::test(start_paused = true)]
async fn an_empty_listing_opens_the_gate_at_once_and_a_stopped_job_releases_it() {
    let fresh = object(json!({}));
    let rig = rig(fresh, vec![handler("idx", pb::HandlerKind::Index, Default::default())], vec![("idx", Box::new(|_, _| ok()))]);
    let indexer = super::indexing::Indexer::new(
        rig.ctx.clone(),
        2,
        Some(rig.ctx.gate.hold("kopfexamples")),
        TaskTracker::new(),
        rig._stop.subscribe(),
    );
    indexer.listed();
    assert!(!rig.ctx.gate.is_open(), "one of two scopes is still listing");
    indexer.listed();
    assert!(rig.ctx.gate.is_open());
    rig.until("the listing is said to be indexed", Duration::from_secs(1), |r| r.logged("Indexed 0 object(s) of") == 1).await;
    let again = super::indexing::Indexer::new(
        rig.ctx.clone(),
        1,
        Some(rig.ctx.gate.hold("kopfexamples")),
        TaskTracker::new(),
        rig._stop.subscribe(),
    );
    assert!(!rig.ctx.gate.is_open());
    drop(again);
    assert!(rig.ctx.gate.is_open(), "an indexer that goes away (its resource stopped) holds nobody up");
}
