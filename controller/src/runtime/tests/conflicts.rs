//! A finalizer change refused with 409 again and again: the writes before it landed, and the
//! next cycle runs on the object as it is now, never on the body from before them.

use std::time::Duration;

use bosun_proto::v1 as pb;

use super::rig::*;
use crate::cluster::watching::Seen;

/// Three 409s on the finalizer's removal after the status write stored `c`'s success: the
/// cycle that follows must see that success and not call `c` again.
#[tokio::test(start_paused = true)]
async fn after_three_conflicts_on_the_finalizer_the_next_cycle_sees_what_was_written() {
    let body = finalized();
    let c = handler("c", pb::HandlerKind::Create, Default::default());
    let later = handler("later", pb::HandlerKind::Create, Default::default());
    let fails_once: Script = Box::new(|_, n| {
        if n == 0 {
            Ok(pb::HandleResponse { outcome: pb::Outcome::TemporaryError as i32, delay_seconds: Some(30.0), ..Default::default() })
        } else {
            ok()
        }
    });
    let rig = rig(body.clone(), vec![c, later], vec![("c", Box::new(|_, _| ok())), ("later", fails_once)]);
    *rig.api.conflicts.lock() = 3;
    rig.router.deliver(Seen::Upsert(body));
    rig.until("both handlers succeeded", Duration::from_secs(120), |r| r.logged("Handler 'later' succeeded.") == 1).await;
    assert_eq!(*rig.api.conflicts.lock(), 0, "the three conflicts happened");
    assert_eq!(rig.server.count("c"), 1, "c's stored success is seen: {:#?}", rig.lines.lock());
    assert_eq!(rig.server.count("later"), 2);
}

/// A worker retires a while after its write; a watch that died silently is noticed later and,
/// restarted from an older version, replays the events from before that write. The object's
/// next worker must know them for what they are: the body from before the write has no
/// diffbase, and handling it as news would call the creation handler again.
#[tokio::test(start_paused = true)]
async fn events_replayed_from_before_a_retired_workers_write_are_not_handled_again() {
    let body = finalized();
    let c = handler("c", pb::HandlerKind::Create, Default::default());
    let rig = rig(body.clone(), vec![c], vec![("c", Box::new(|_, _| ok()))]);
    rig.router.deliver(Seen::Upsert(body.clone()));
    rig.until("the handler succeeded", Duration::from_secs(10), |r| r.logged("Handler 'c' succeeded.") == 1).await;
    rig.until("the worker retired", Duration::from_secs(120), |r| r.router.workers() == 0).await;
    tokio::time::sleep(Duration::from_secs(35)).await;
    // The watch, restarted from the version before the write, replays it.
    rig.router.deliver(Seen::Upsert(body));
    rig.until("the worker retired again", Duration::from_secs(120), |r| r.router.workers() == 0).await;
    assert_eq!(rig.server.count("c"), 1, "{:#?}", rig.lines.lock());
}
