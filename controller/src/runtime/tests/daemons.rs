//! Daemons on the paused clock: started once the finalizer is on, restarted after their own
//! backoff, and, when stopped, asked to stop (StopDaemon) and seen to their end — the object's
//! finalizer and a handover held meanwhile, never two instances of one daemon — or cancelled
//! at once by a server without StopDaemon, as before it.

use std::time::Duration;

use bosun_proto::v1 as pb;
use serde_json::json;
use tokio::time::Instant;

use super::rig::*;
use crate::cluster::watching::Seen;
use crate::handlers::dispatch::DaemonStream;

/// Deletes the object on the API server and tells the router, as its watch event would.
fn delete(rig: &Rig) -> Instant {
    let deleting = rig.change(|o| o["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z"));
    rig.router.deliver(Seen::Upsert(deleting));
    Instant::now()
}

/// A rig whose daemon `d` stops when asked to (StopDaemon says it is stopping), winding down
/// for `takes` (`None`: never ends), with a delete handler `del` beside it.
pub(super) fn stoppable(options: pb::DaemonOptions, takes: Option<Duration>) -> Rig {
    stoppable_on(options, takes, false)
}

/// [`stoppable`], on a server whose daemon streams answer with their first message
/// (`headers_with_first_message`, as grpcio, grpc-js and grpc-go): the daemon sends nothing
/// until it exits.
pub(super) fn stoppable_on(options: pb::DaemonOptions, takes: Option<Duration>, headers_with_first_message: bool) -> Rig {
    let body = finalized();
    let d = daemon("d", options, Default::default());
    let del = handler("del", pb::HandlerKind::Delete, Default::default());
    let rig = rig(body.clone(), vec![d, del], vec![("del", Box::new(|_, _| ok()))]);
    rig.server.headers_with_first_message.store(headers_with_first_message, std::sync::atomic::Ordering::SeqCst);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let closed = rig.server.closed.clone();
    rig.server.daemons.lock().insert("d".into(), Box::new(move |_| Ok(stoppable_daemon("d", closed.clone(), stop_rx.clone(), takes))));
    rig.server.stops.lock().insert("d".into(), stopping(stop_tx));
    rig.router.deliver(Seen::Upsert(body));
    rig
}

#[tokio::test(start_paused = true)]
async fn a_deleted_objects_daemon_is_asked_to_stop_and_holds_the_finalizer_until_it_exits() {
    let rig = stoppable(Default::default(), Some(Duration::from_secs(3)));
    rig.until("the daemon runs", Duration::from_secs(5), |r| r.server.opened.lock().len() == 1).await;
    let deleted = delete(&rig);
    rig.until("the object is gone", Duration::from_secs(30), |r| r.api.object.lock().is_none()).await;
    let gone = deleted.elapsed();
    assert!(gone >= Duration::from_secs(3) && gone < Duration::from_millis(3500), "held until the exit, no longer: {gone:?}");

    let requests = rig.server.stop_requests.lock().clone();
    assert_eq!(requests.len(), 1);
    let (req, asked) = &requests[0];
    assert_eq!((req.handler_id.as_str(), req.uid.as_str()), ("d", "u1"));
    assert!(*asked - deleted < Duration::from_millis(10), "asked at once");
    let closed = FakeServer::times(&rig.server.closed.lock(), "d");
    assert!(closed.len() == 1 && closed[0] - deleted >= Duration::from_secs(3), "the stream is read to its exit: {closed:?}");
    for line in [
        "DEBUG [ns/obj] Daemon 'd' is signalled to exit gracefully.",
        "INFO [ns/obj] cleaning up",
        "INFO [ns/obj] Daemon 'd' succeeded.",
        "DEBUG [ns/obj] Daemon 'd' has exited on request and will not be retried or restarted.",
        "INFO [ns/obj] Deletion is processed: 1 succeeded; 0 failed.",
    ] {
        assert_eq!(rig.logged(line), 1, "{line}: {:#?}", rig.lines.lock());
    }
    assert_eq!(rig.server.count("del"), 1, "the delete handler is called once, not again after the daemon's end");
    assert_eq!(rig.server.opened.lock().len(), 1, "not restarted");
}

#[tokio::test(start_paused = true)]
async fn a_stopped_daemon_that_does_not_exit_in_its_cancellation_timeout_is_left_orphaned() {
    let rig = stoppable(pb::DaemonOptions { cancellation_timeout_seconds: 5.0, ..Default::default() }, None);
    rig.until("the daemon runs", Duration::from_secs(5), |r| r.server.opened.lock().len() == 1).await;
    let deleted = delete(&rig);
    rig.until("the object is gone", Duration::from_secs(30), |r| r.api.object.lock().is_none()).await;
    let gone = deleted.elapsed();
    assert!(gone >= Duration::from_secs(5) && gone < Duration::from_millis(5500), "held for the timeout: {gone:?}");
    let closed = FakeServer::times(&rig.server.closed.lock(), "d");
    assert!(closed.len() == 1 && closed[0] - deleted >= Duration::from_secs(5), "cancelled only then: {closed:?}");
    assert_eq!(rig.logged("WARNING [ns/obj] Daemon 'd' did not exit in time. Leaving it orphaned."), 1, "{:#?}", rig.lines.lock());
    assert_eq!(rig.logged("Daemon 'd' succeeded."), 0);
}

/// A server without StopDaemon (UNIMPLEMENTED) gets the cancellation at once, and the
/// finalizer is held for the daemon's cancellation timeout, as before StopDaemon. One that
/// finds no such daemon running (`stopping: false`) is asked again while the stream is read,
/// until the timeout.
#[tokio::test(start_paused = true)]
async fn a_deleted_objects_daemon_is_cancelled_at_once_by_a_server_without_stop_daemon_and_holds_the_finalizer_for_its_timeout() {
    for stops in [false, true] {
        let body = finalized();
        let d = daemon("d", pb::DaemonOptions { cancellation_timeout_seconds: 5.0, ..Default::default() }, Default::default());
        let rig = rig(body.clone(), vec![d], vec![]);
        let closed = rig.server.closed.clone();
        rig.server.daemons.lock().insert("d".into(), Box::new(move |_| Ok(open_daemon("d", closed.clone()))));
        if stops {
            rig.server.stops.lock().insert("d".into(), Box::new(|_| Ok(pb::StopDaemonResponse { stopping: false })));
        }
        rig.router.deliver(Seen::Upsert(body));
        rig.until("the daemon runs", Duration::from_secs(5), |r| r.server.opened.lock().len() == 1).await;
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(rig.server.closed.lock().is_empty(), "it runs while the object lives");

        let deleted = delete(&rig);
        rig.until("the stream is cancelled", Duration::from_secs(10), |r| !r.server.closed.lock().is_empty()).await;
        let closed = FakeServer::times(&rig.server.closed.lock(), "d");
        let cancelled_after = if stops { Duration::from_secs(5) } else { Duration::ZERO };
        assert_eq!(closed[0] - deleted, cancelled_after, "stops: {stops}");
        rig.until("the object is gone", Duration::from_secs(30), |r| r.api.object.lock().is_none()).await;
        let gone = deleted.elapsed();
        assert!(gone >= Duration::from_secs(5) && gone < Duration::from_secs(6), "the finalizer is held 5 s: {gone:?}");
        assert_eq!(rig.server.opened.lock().len(), 1, "not restarted");
        let asked: Vec<u64> = rig.server.stop_requests.lock().iter().map(|(_, t)| (*t - deleted).as_secs()).collect();
        let (cancelled, orphaned) = (rig.logged("DEBUG [ns/obj] Daemon 'd' is cancelled ("), rig.logged("Leaving it orphaned."));
        if stops {
            assert_eq!(asked, [0, 1, 2, 4], "asked again with a backoff");
            assert_eq!((cancelled, orphaned), (0, 1), "{:#?}", rig.lines.lock());
        } else {
            assert_eq!(asked, [0], "asked first");
            assert_eq!((cancelled, orphaned), (1, 0), "{:#?}", rig.lines.lock());
        }
        assert_eq!(rig.logged("signalled to exit gracefully"), 0);
    }
}

#[tokio::test(start_paused = true)]
async fn a_daemon_that_stops_matching_is_not_started_again_before_its_stopped_instance_ended() {
    let body = object(json!({"metadata": {"finalizers": ["bosun.dev/finalizer"], "labels": {"run": "yes"}}}));
    let equals = pb::ValueFilter { check: Some(pb::value_filter::Check::Equals(b"\"yes\"".to_vec())) };
    let d = handler_with("d", pb::HandlerKind::Daemon, Default::default(), |s| {
        s.daemon = Some(Default::default());
        s.filters = Some(pb::Filters { labels: [("run".to_string(), equals)].into(), ..Default::default() });
    });
    let rig = rig(body.clone(), vec![d], vec![]);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let closed = rig.server.closed.clone();
    let takes = Some(Duration::from_secs(3));
    rig.server.daemons.lock().insert("d".into(), Box::new(move |_| Ok(stoppable_daemon("d", closed.clone(), stop_rx.clone(), takes))));
    rig.server.stops.lock().insert("d".into(), stopping(stop_tx.clone()));
    rig.router.deliver(Seen::Upsert(body));
    rig.until("the daemon runs", Duration::from_secs(5), |r| r.server.opened.lock().len() == 1).await;

    let unmatched = rig.change(|o| o["metadata"]["labels"]["run"] = json!("no"));
    let stopped = Instant::now();
    rig.router.deliver(Seen::Upsert(unmatched));
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Matching again while the first instance winds down: the second waits for its end.
    stop_tx.send_replace(false);
    let matched = rig.change(|o| o["metadata"]["labels"]["run"] = json!("yes"));
    rig.router.deliver(Seen::Upsert(matched));
    rig.until("the daemon runs again", Duration::from_secs(10), |r| r.server.opened.lock().len() == 2).await;
    let opened = FakeServer::times(&rig.server.opened.lock(), "d");
    let closed = FakeServer::times(&rig.server.closed.lock(), "d");
    assert_eq!(closed.len(), 1);
    assert!(closed[0] - stopped >= Duration::from_secs(3), "the first ran its wind-down: {:?}", closed[0] - stopped);
    assert!(
        opened[1] >= closed[0],
        "never two instances: opened again {:?} after the stop, ended {:?}",
        opened[1] - stopped,
        closed[0] - stopped
    );
    assert!(opened[1] - closed[0] < Duration::from_millis(100), "started at the first's end: {:?}", opened[1] - closed[0]);
}

#[tokio::test(start_paused = true)]
async fn a_daemon_is_restarted_after_its_own_backoff_not_the_handlers() {
    let body = finalized();
    let d = daemon(
        "d",
        pb::DaemonOptions { backoff_seconds: 2.0, initial_delay_seconds: 3.0, ..Default::default() },
        pb::HandlerOptions { backoff_seconds: Some(60.0), ..Default::default() },
    );
    let rig = rig(body.clone(), vec![d], vec![]);
    let closed = rig.server.closed.clone();
    rig.server.daemons.lock().insert(
        "d".into(),
        Box::new(
            move |n| if n < 2 { Ok(exiting_daemon(pb::Outcome::TemporaryError, "crashed")) } else { Ok(open_daemon("d", closed.clone())) },
        ),
    );
    let start = Instant::now();
    rig.router.deliver(Seen::Upsert(body));
    rig.until("the third start", Duration::from_secs(30), |r| r.server.opened.lock().len() == 3).await;
    let secs: Vec<u64> = FakeServer::times(&rig.server.opened.lock(), "d").iter().map(|t| t.duration_since(start).as_secs()).collect();
    assert_eq!(secs, [3, 5, 7], "after its initial delay, then every 2 s");
    assert_eq!(rig.logged("Daemon 'd' failed temporarily: crashed; will be restarted in 2s."), 2);
}

#[tokio::test(start_paused = true)]
async fn a_daemon_that_exits_for_good_stays_stopped_and_says_how_in_kopfs_words() {
    let cases = [
        (pb::Outcome::PermanentError, "ERROR [ns/obj] Daemon 'd' failed permanently: done for good"),
        (pb::Outcome::Success, "INFO [ns/obj] Daemon 'd' succeeded."),
    ];
    for (outcome, said) in cases {
        let body = finalized();
        let d = daemon("d", Default::default(), Default::default());
        let rig = rig(body.clone(), vec![d], vec![]);
        rig.server.daemons.lock().insert("d".into(), Box::new(move |_| Ok(exiting_daemon(outcome, "done for good"))));
        rig.router.deliver(Seen::Upsert(body));
        let own = "DEBUG [ns/obj] Daemon 'd' has exited on its own and will not be retried or restarted.";
        rig.until("the daemon exits", Duration::from_secs(5), |r| r.logged(own) == 1).await;
        assert_eq!(rig.logged(said), 1, "{outcome:?}: {:#?}", rig.lines.lock());
        tokio::time::sleep(Duration::from_secs(600)).await;
        assert_eq!(rig.server.opened.lock().len(), 1);
        assert!(rig.server.stop_requests.lock().is_empty(), "an ended daemon is not asked to stop");
        // Its object's deletion is not held by it.
        let deleted = delete(&rig);
        rig.until("the object is gone", Duration::from_secs(5), |r| r.api.object.lock().is_none()).await;
        assert!(deleted.elapsed() <= Duration::from_millis(100), "at the first look: {:?}", deleted.elapsed());
    }
}

/// Daemons of two objects, one with a cancellation timeout of 5 s and one without, on a
/// server without StopDaemon: when both objects are given away (shards), both streams are
/// cancelled at once, and the handover waits (`Authority::settled`) for the one that may still
/// be winding down, 5 s, and no longer.
#[tokio::test(start_paused = true)]
async fn a_daemon_given_away_is_cancelled_at_once_and_holds_the_handover_for_its_cancellation_timeout() {
    for (timeout, held) in [(5.0, Duration::from_secs(5)), (0.0, Duration::ZERO)] {
        let body = finalized();
        let d = daemon("d", pb::DaemonOptions { cancellation_timeout_seconds: timeout, ..Default::default() }, Default::default());
        let rig = rig(body.clone(), vec![d], vec![]);
        let closed = rig.server.closed.clone();
        rig.server.daemons.lock().insert("d".into(), Box::new(move |_| Ok(open_daemon("d", closed.clone()))));
        rig.router.deliver(Seen::Upsert(body));
        rig.until("the daemon runs", Duration::from_secs(5), |r| r.server.opened.lock().len() == 1).await;
        let authority = rig.ctx.authority.clone();
        assert_eq!(authority.in_flight(), 1, "the running daemon holds a turn");

        authority.set_ownership(crate::coordination::Ownership::Nothing);
        let given = Instant::now();
        assert_eq!(rig.router.background().stop_unowned(&authority, rig.ctx.clock.now()), 1);
        authority.settled().await;
        assert_eq!(given.elapsed(), held, "cancellation timeout {timeout}");
        assert_eq!(authority.in_flight(), 0);
        let closed = FakeServer::times(&rig.server.closed.lock(), "d");
        assert_eq!(closed.len(), 1);
        assert!(closed[0] - given < Duration::from_millis(10), "cancelled at once, not after {:?}", closed[0] - given);
    }
}

/// A daemon given away whose server stops it: the handover waits for its end.
#[tokio::test(start_paused = true)]
async fn a_daemon_given_away_holds_the_handover_until_it_exits() {
    let rig = stoppable(Default::default(), Some(Duration::from_secs(2)));
    rig.until("the daemon runs", Duration::from_secs(5), |r| r.server.opened.lock().len() == 1).await;
    let authority = rig.ctx.authority.clone();
    authority.set_ownership(crate::coordination::Ownership::Nothing);
    let given = Instant::now();
    assert_eq!(rig.router.background().stop_unowned(&authority, rig.ctx.clock.now()), 1);
    authority.settled().await;
    assert_eq!(given.elapsed(), Duration::from_secs(2), "until its exit");
    assert_eq!(rig.logged("Daemon 'd' has exited on request and will not be retried or restarted."), 1);
}

/// When the controller stops, a daemon is waited for to its end, however long it takes (here
/// 20 s, past the cycles' grace): its turn is held meanwhile, so that a Lease is not given up
/// while it runs.
#[tokio::test(start_paused = true)]
async fn at_the_controllers_stop_a_daemon_is_waited_for_to_its_end_holding_its_turn() {
    let rig = stoppable(Default::default(), Some(Duration::from_secs(20)));
    rig.until("the daemon runs", Duration::from_secs(5), |r| r.server.opened.lock().len() == 1).await;
    let authority = rig.ctx.authority.clone();
    let stopped = Instant::now();
    rig._stop.send_replace(true);
    rig.until("the turn ends", Duration::from_secs(60), |_| authority.in_flight() == 0).await;
    assert!(stopped.elapsed() >= Duration::from_secs(20), "its turn is held to its end: {:?}", stopped.elapsed());
    let closed = FakeServer::times(&rig.server.closed.lock(), "d");
    assert!(closed.len() == 1 && closed[0] - stopped >= Duration::from_secs(20), "read to its exit: {closed:?}");
    assert_eq!(rig.server.stop_requests.lock().len(), 1);
    assert_eq!(rig.logged("Daemon 'd' succeeded."), 1, "{:#?}", rig.lines.lock());
    assert_eq!(rig.logged("Leaving it orphaned."), 0);
}

/// Ownership revoked (a Lease not renewed by its deadline): the daemon is asked to stop at
/// once, and its turn is held until its server reports its real exit, 3 s later; with a
/// cancellation timeout of 1 s and a daemon that ignores the stop, the turn is released at
/// 1 s, the stream cancelled, and the daemon left orphaned with Kopf's warning.
#[tokio::test(start_paused = true)]
async fn a_revoked_daemon_holds_its_turn_until_its_real_exit_or_its_cancellation_timeout() {
    let cases = [
        (pb::DaemonOptions::default(), Some(Duration::from_secs(3)), Duration::from_secs(3)),
        (pb::DaemonOptions { cancellation_timeout_seconds: 1.0, ..Default::default() }, None, Duration::from_secs(1)),
    ];
    for (options, takes, held) in cases {
        let rig = stoppable(options, takes);
        rig.until("the daemon runs", Duration::from_secs(5), |r| r.server.opened.lock().len() == 1).await;
        let authority = rig.ctx.authority.clone();
        assert_eq!(authority.in_flight(), 1);

        authority.revoke();
        let revoked = Instant::now();
        rig.until("the turn ends", Duration::from_secs(30), |_| authority.in_flight() == 0).await;
        let ended = revoked.elapsed();
        assert!(ended >= held && ended < held + Duration::from_millis(200), "held {held:?}: {ended:?}");
        let asked = rig.server.stop_requests.lock().clone();
        assert!(asked.len() == 1 && asked[0].1 - revoked < Duration::from_millis(10), "asked to stop at once");
        let closed = FakeServer::times(&rig.server.closed.lock(), "d");
        assert!(closed.len() == 1 && closed[0] - revoked >= held, "the stream is read until then: {closed:?}");
        let orphaned = rig.logged("WARNING [ns/obj] Daemon 'd' did not exit in time. Leaving it orphaned.");
        assert_eq!(orphaned, usize::from(takes.is_none()), "{:#?}", rig.lines.lock());
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(rig.server.opened.lock().len(), 1, "not restarted");
    }
}

/// StopDaemon that fails (the server is busy or the call is lost) is asked again with a
/// backoff while the stream is read: the daemon is never cut loose without its end seen, and
/// a handover waits for its real exit.
#[tokio::test(start_paused = true)]
async fn a_stop_that_fails_is_asked_again_and_the_handover_waits_for_the_real_exit() {
    let rig = stoppable(Default::default(), Some(Duration::from_secs(3)));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let closed = rig.server.closed.clone();
    rig.server
        .daemons
        .lock()
        .insert("d".into(), Box::new(move |_| Ok(stoppable_daemon("d", closed.clone(), stop_rx.clone(), Some(Duration::from_secs(3))))));
    let asked = std::sync::atomic::AtomicUsize::new(0);
    let stop = stopping(stop_tx);
    rig.server.stops.lock().insert(
        "d".into(),
        Box::new(move |req| match asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
            0 => Err(crate::handlers::dispatch::CallFailure::Failed { code: tonic::Code::Unavailable, message: "busy".into() }),
            _ => stop(req),
        }),
    );
    rig.until("the daemon runs", Duration::from_secs(5), |r| r.server.opened.lock().len() == 1).await;
    let authority = rig.ctx.authority.clone();
    authority.set_ownership(crate::coordination::Ownership::Nothing);
    let given = Instant::now();
    assert_eq!(rig.router.background().stop_unowned(&authority, rig.ctx.clock.now()), 1);
    authority.settled().await;
    let requests: Vec<Duration> = rig.server.stop_requests.lock().iter().map(|(_, t)| *t - given).collect();
    assert_eq!(requests, [Duration::ZERO, Duration::from_secs(1)], "asked again after 1 s");
    assert_eq!(given.elapsed(), Duration::from_secs(4), "until its exit, 3 s after the second request");
    let closed = FakeServer::times(&rig.server.closed.lock(), "d");
    assert_eq!(closed, [given + Duration::from_secs(4)], "never cancelled before its exit");
    assert_eq!(rig.logged("Daemon 'd' has exited on request and will not be retried or restarted."), 1, "{:#?}", rig.lines.lock());
}

/// A rig whose daemon `d` sends a merge patch of `status.d = value` and exits when stopped,
/// as `stream` arranges them (given the stop's receiver, the patch and the exit); started.
fn patching(value: &str, stream: fn(tokio::sync::watch::Receiver<bool>, pb::DaemonMessage, pb::DaemonMessage) -> DaemonStream) -> Rig {
    let body = finalized();
    let d = daemon("d", Default::default(), Default::default());
    let rig = rig(body.clone(), vec![d], vec![]);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let bytes = serde_json::to_vec(&json!({"status": {"d": value}})).unwrap();
    rig.server.daemons.lock().insert(
        "d".into(),
        Box::new(move |_| {
            let patch = pb::DaemonMessage { message: Some(pb::daemon_message::Message::MergePatch(bytes.clone())) };
            Ok(stream(stop_rx.clone(), patch, exit(pb::Outcome::Success, "")))
        }),
    );
    rig.server.stops.lock().insert("d".into(), stopping(stop_tx));
    rig.router.deliver(Seen::Upsert(body));
    rig
}

/// After a revocation the object may be another replica's: what the daemon sends while it
/// winds down is not written.
#[tokio::test(start_paused = true)]
async fn a_revoked_daemons_patches_are_not_applied() {
    let rig = patching("bye", |mut stopped, patch, exit| {
        let after_stop = futures::stream::once(async move {
            let _ = stopped.wait_for(|s| *s).await;
            futures::stream::iter([Ok(patch), Ok(exit)])
        });
        Box::pin(futures::StreamExt::flatten(after_stop))
    });
    rig.until("the daemon runs", Duration::from_secs(5), |r| r.server.opened.lock().len() == 1).await;
    let writes = *rig.api.writes.lock();
    let authority = rig.ctx.authority.clone();
    authority.revoke();
    rig.until("the turn ends", Duration::from_secs(5), |_| authority.in_flight() == 0).await;
    assert_eq!(*rig.api.writes.lock(), writes, "nothing written");
    assert_eq!(rig.logged("Daemon 'd' sent a patch after ownership was revoked; not applied."), 1, "{:#?}", rig.lines.lock());
}

/// An object deleted and created again under its name is another object: the first one's
/// daemon is stopped (StopDaemon names its uid) and the second gets a daemon of its own, even
/// when both events come before the worker looks (the deletion must not be folded into the
/// new object's body, and the old daemon must not be fed it).
#[tokio::test(start_paused = true)]
async fn an_object_created_again_under_its_name_is_another_object_with_daemons_of_its_own() {
    let rig = stoppable(Default::default(), Some(Duration::from_secs(1)));
    rig.until("the daemon runs", Duration::from_secs(5), |r| r.server.opened.lock().len() == 1).await;
    let old = rig.api.get_now();
    let mut new = finalized();
    new["metadata"]["uid"] = json!("u2");
    new["metadata"]["resourceVersion"] = json!("10");
    *rig.api.object.lock() = Some(new.clone());
    rig.router.deliver(Seen::Deleted(old));
    rig.router.deliver(Seen::Upsert(new));
    rig.until("the new object's daemon runs", Duration::from_secs(30), |r| r.server.daemon_uids.lock().len() == 2).await;
    assert_eq!(*rig.server.daemon_uids.lock(), ["u1", "u2"]);
    let stopped: Vec<String> = rig.server.stop_requests.lock().iter().map(|(r, _)| r.uid.clone()).collect();
    assert_eq!(stopped, ["u1"], "the old object's daemon is stopped, by its own uid");
}

/// A daemon's patch being written when ownership is revoked (retried through an outage, say)
/// is cut off at the revocation: it must not land later over the work of the object's new
/// owner.
#[tokio::test(start_paused = true)]
async fn a_daemons_patch_in_flight_is_cut_off_by_a_revocation() {
    let rig = patching("late", |mut stopped, patch, exit| {
        let patch_soon = futures::stream::once(async move {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok(patch)
        });
        let exit_on_stop = futures::stream::once(async move {
            let _ = stopped.wait_for(|s| *s).await;
            Ok(exit)
        });
        Box::pin(futures::StreamExt::chain(patch_soon, exit_on_stop))
    });
    rig.until("the daemon runs", Duration::from_secs(5), |r| r.server.opened.lock().len() == 1).await;
    *rig.api.patch_takes.lock() = Some(Duration::from_secs(100));
    tokio::time::sleep(Duration::from_secs(10)).await;
    let authority = rig.ctx.authority.clone();
    authority.revoke();
    rig.until("the turn ends", Duration::from_secs(30), |_| authority.in_flight() == 0).await;
    tokio::time::sleep(Duration::from_secs(300)).await;
    assert_eq!(rig.api.get_now().pointer("/status/d"), None, "the patch never landed");
    assert_eq!(rig.server.stop_requests.lock().len(), 1, "the daemon was stopped");
    let cut = "Daemon 'd' had its patch cut off: ownership was revoked while it was written.";
    assert_eq!(rig.logged(cut), 1, "{:#?}", rig.lines.lock());
}

/// The servers users run (grpcio, grpc-js, grpc-go) answer a daemon's call only with its first
/// message. A daemon that has sent nothing yet is stopped as any other: asked to stop, its end
/// waited for, its object's finalizer, a handover and a revocation's turn held meanwhile. It
/// must not count as "not started" and be dropped (a second instance would start elsewhere
/// while it runs on).
#[tokio::test(start_paused = true)]
async fn a_daemon_that_has_sent_nothing_yet_is_stopped_and_waited_for_on_every_stop() {
    for silent in [false, true] {
        // Its object's deletion: the finalizer stays until its exit.
        let rig = stoppable_on(Default::default(), Some(Duration::from_secs(3)), silent);
        rig.until("the daemon runs", Duration::from_secs(5), |r| r.server.opened.lock().len() == 1).await;
        let deleted = delete(&rig);
        rig.until("the object is gone", Duration::from_secs(30), |r| r.api.object.lock().is_none()).await;
        assert!(deleted.elapsed() >= Duration::from_secs(3), "silent {silent}: held until the exit: {:?}", deleted.elapsed());
        assert_eq!(rig.server.stop_requests.lock().len(), 1, "silent {silent}: asked to stop");
        assert_eq!(rig.logged("INFO [ns/obj] Daemon 'd' succeeded."), 1, "silent {silent}: {:#?}", rig.lines.lock());

        // Given away: the handover waits for its end.
        let rig = stoppable_on(Default::default(), Some(Duration::from_secs(2)), silent);
        rig.until("the daemon runs", Duration::from_secs(5), |r| r.server.opened.lock().len() == 1).await;
        let authority = rig.ctx.authority.clone();
        assert_eq!(authority.in_flight(), 1, "silent {silent}: the daemon holds a turn before it said anything");
        authority.set_ownership(crate::coordination::Ownership::Nothing);
        let given = Instant::now();
        assert_eq!(rig.router.background().stop_unowned(&authority, rig.ctx.clock.now()), 1);
        authority.settled().await;
        assert_eq!(given.elapsed(), Duration::from_secs(2), "silent {silent}: the handover waits for its end");

        // Revoked: its turn is held until its end.
        let rig = stoppable_on(Default::default(), Some(Duration::from_secs(3)), silent);
        rig.until("the daemon runs", Duration::from_secs(5), |r| r.server.opened.lock().len() == 1).await;
        let authority = rig.ctx.authority.clone();
        authority.revoke();
        let revoked = Instant::now();
        rig.until("the turn ends", Duration::from_secs(30), |_| authority.in_flight() == 0).await;
        assert!(revoked.elapsed() >= Duration::from_secs(3), "silent {silent}: the turn is held: {:?}", revoked.elapsed());
        assert_eq!(rig.server.stop_requests.lock().len(), 1, "silent {silent}: asked to stop");

        // The controller stops: asked to stop and waited for.
        let rig = stoppable_on(Default::default(), Some(Duration::from_secs(2)), silent);
        rig.until("the daemon runs", Duration::from_secs(5), |r| r.server.opened.lock().len() == 1).await;
        rig._stop.send_replace(true);
        rig.until("the daemon ended", Duration::from_secs(30), |r| r.logged("Daemon 'd' succeeded.") == 1).await;
        assert_eq!(rig.server.stop_requests.lock().len(), 1, "silent {silent}: asked to stop");
    }
}
