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
