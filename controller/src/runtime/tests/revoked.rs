//! Ownership lost while work runs: a revocation (a Lease not renewed by its deadline) cuts
//! the cycle or timer in flight at once — its handler call cancelled, nothing written after
//! it — while a voluntary handover lets the running call finish and stops the cycle at its
//! next step.

use std::sync::atomic::Ordering;
use std::time::Duration;

use bosun_proto::v1 as pb;
use tokio::time::Instant;

use super::rig::*;
use crate::cluster::watching::Seen;
use crate::coordination::Ownership;

/// A rig whose object (finalizer on) gets the create handlers `ids`, the first taking `slow`.
fn creating(ids: &[&str], slow: Duration) -> Rig {
    let body = finalized();
    let handlers = ids.iter().map(|id| handler(id, pb::HandlerKind::Create, Default::default())).collect();
    let scripts = ids.iter().map(|id| (*id, Box::new(|_: &pb::HandleRequest, _| ok()) as Script)).collect();
    let rig = rig(body.clone(), handlers, scripts);
    rig.server.slow.lock().insert(ids[0].to_string(), slow);
    rig.router.deliver(Seen::Upsert(body));
    rig
}

#[tokio::test(start_paused = true)]
async fn a_revoked_cycle_is_abandoned_at_once_its_call_cancelled_and_nothing_written_after() {
    let rig = creating(&["c", "c2"], Duration::from_secs(1000));
    rig.until("the handler runs", Duration::from_secs(5), |r| r.server.in_flight.load(Ordering::SeqCst) == 1).await;
    let writes = *rig.api.writes.lock();
    let authority = rig.ctx.authority.clone();
    assert_eq!(authority.in_flight(), 1, "the cycle holds a turn");

    authority.revoke();
    let revoked = Instant::now();
    rig.until("the call is cancelled", Duration::from_secs(1), |r| !r.server.cancelled.lock().is_empty()).await;
    let cancelled = FakeServer::times(&rig.server.cancelled.lock(), "c");
    assert!(cancelled[0] - revoked < Duration::from_millis(10), "at once: {:?}", cancelled[0] - revoked);
    assert_eq!(authority.in_flight(), 0, "the turn has ended");
    tokio::time::sleep(Duration::from_secs(2000)).await;
    assert_eq!(*rig.api.writes.lock(), writes, "no write after the revocation");
    assert_eq!((rig.server.count("c"), rig.server.count("c2")), (1, 0));
    assert_eq!(rig.logged("Ownership was revoked: the cycle is abandoned"), 1, "{:#?}", rig.lines.lock());
}

#[tokio::test(start_paused = true)]
async fn a_voluntary_loss_lets_the_running_call_finish_and_calls_no_next_handler() {
    let rig = creating(&["c", "c2"], Duration::from_secs(10));
    rig.until("the handler runs", Duration::from_secs(5), |r| r.server.in_flight.load(Ordering::SeqCst) == 1).await;
    let (writes, started) = (*rig.api.writes.lock(), Instant::now());
    let authority = rig.ctx.authority.clone();

    authority.set_ownership(Ownership::Nothing);
    rig.until("the turn ends", Duration::from_secs(30), |_| authority.in_flight() == 0).await;
    assert!(started.elapsed() >= Duration::from_secs(10), "the running call finished first: {:?}", started.elapsed());
    assert!(rig.server.cancelled.lock().is_empty(), "not cancelled");
    assert_eq!((rig.server.count("c"), rig.server.count("c2")), (1, 0), "no next handler");
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert_eq!(*rig.api.writes.lock(), writes, "nothing written for an object not ours: its owner carries on");
}

#[tokio::test(start_paused = true)]
async fn a_revoked_timer_stops_at_once_its_call_cancelled() {
    let body = finalized();
    let t = timer("t", pb::TimerOptions { interval_seconds: 10.0, ..Default::default() });
    let rig = rig(body.clone(), vec![t], vec![("t", Box::new(|_, _| ok()))]);
    rig.server.slow.lock().insert("t".into(), Duration::from_secs(100));
    rig.router.deliver(Seen::Upsert(body));
    rig.until("the timer runs", Duration::from_secs(30), |r| r.server.in_flight.load(Ordering::SeqCst) == 1).await;
    let authority = rig.ctx.authority.clone();
    let writes = *rig.api.writes.lock();

    authority.revoke();
    let revoked = Instant::now();
    rig.until("the call is cancelled", Duration::from_secs(1), |r| !r.server.cancelled.lock().is_empty()).await;
    let cancelled = FakeServer::times(&rig.server.cancelled.lock(), "t");
    assert!(cancelled[0] - revoked < Duration::from_millis(10), "at once: {:?}", cancelled[0] - revoked);
    assert_eq!(authority.in_flight(), 0, "the timer's turn has ended");
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert_eq!(rig.server.count("t"), 1, "not called again");
    assert_eq!(*rig.api.writes.lock(), writes, "nothing written");
}

/// Ownership revoked and regained before the verdict's followers looked (a Lease renewed a
/// moment after its deadline: `stop_unowned` then finds nothing to stop): the timer and the
/// daemon that the revocation ended start again with the object's next cycle here, as they
/// would at any other replica; they are not taken for ones that ended by themselves.
#[tokio::test(start_paused = true)]
async fn a_timer_and_a_daemon_cut_short_by_a_revocation_start_again_when_ownership_comes_back() {
    let body = finalized();
    let t = timer("t", pb::TimerOptions { interval_seconds: 10.0, ..Default::default() });
    let d = daemon("d", Default::default(), Default::default());
    let rig = rig(body.clone(), vec![t, d], vec![("t", Box::new(|_, _| ok()))]);
    let closed = rig.server.closed.clone();
    rig.server.daemons.lock().insert("d".into(), Box::new(move |_| Ok(open_daemon("d", closed.clone()))));
    rig.router.deliver(Seen::Upsert(body.clone()));
    rig.until("both run", Duration::from_secs(30), |r| r.server.count("t") == 1 && r.server.opened.lock().len() == 1).await;
    let authority = rig.ctx.authority.clone();

    authority.revoke();
    rig.until("their turns end", Duration::from_secs(30), |_| authority.in_flight() == 0).await;
    authority.set_ownership(Ownership::All);
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!((rig.server.count("t"), rig.server.opened.lock().len()), (1, 1), "nothing runs before the object's next cycle");

    rig.router.deliver(Seen::Upsert(rig.api.get_now()));
    rig.until("both run again", Duration::from_secs(30), |r| r.server.count("t") == 2 && r.server.opened.lock().len() == 2).await;
    assert_eq!(authority.in_flight(), 2, "one turn each");
}

/// Ownership revoked and regained while the daemon is still ending (its server takes 2 s):
/// the object's next cycle does not start a second instance beside it, and the daemon's end
/// wakes the object, which starts it again then, with no other event.
#[tokio::test(start_paused = true)]
async fn a_daemon_still_ending_after_a_revocation_is_started_again_at_its_end_not_beside_it() {
    let rig = super::daemons::stoppable(Default::default(), Some(Duration::from_secs(2)));
    rig.until("the daemon runs", Duration::from_secs(5), |r| r.server.opened.lock().len() == 1).await;
    let authority = rig.ctx.authority.clone();

    authority.revoke();
    let revoked = Instant::now();
    tokio::time::sleep(Duration::from_millis(500)).await;
    authority.set_ownership(Ownership::All);
    rig.router.deliver(Seen::Upsert(rig.api.get_now()));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(rig.server.opened.lock().len(), 1, "not beside the one still ending");
    rig.until("started again", Duration::from_secs(10), |r| r.server.opened.lock().len() == 2).await;
    let ended = FakeServer::times(&rig.server.closed.lock(), "d");
    assert!(ended.len() == 1 && ended[0] - revoked >= Duration::from_secs(2), "after the first one's end: {ended:?}");
}
