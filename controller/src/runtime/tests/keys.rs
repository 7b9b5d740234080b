//! Every call names the registration it is for (`handler_key`): sub-handlers their top-level
//! handler's.

use std::sync::Arc;
use std::time::Duration;

use bosun_proto::v1 as pb;

use super::rig::*;
use crate::cluster::watching::Seen;
use crate::engines::dispatch::HandlerClient;
use crate::logs::Logger;

fn keyed(key: &'static str) -> impl FnOnce(&mut pb::HandlerSpec) {
    move |s| s.key = key.into()
}

#[tokio::test(start_paused = true)]
async fn every_call_names_its_registration_by_key_and_sub_handlers_their_parents() {
    use pb::HandlerKind as K;
    let body = finalized();
    let p = handler_with("p", K::Create, Default::default(), keyed("p-on-create"));
    let t = handler_with("t", K::Timer, Default::default(), |s| {
        s.key = "t-timer".into();
        s.timer = Some(pb::TimerOptions { interval_seconds: 100.0, ..Default::default() });
    });
    let d = handler_with("d", K::Daemon, Default::default(), keyed("d-daemon"));
    let registers: Script = Box::new(|_, _| {
        let child = pb::SubHandler { id: "a".into(), ..Default::default() };
        Ok(pb::HandleResponse { outcome: pb::Outcome::Success as i32, subhandlers: vec![child], ..Default::default() })
    });
    let rig = rig(
        body.clone(),
        vec![p, t, d],
        vec![("p", registers), ("p/a", Box::new(|_, _| ok())), ("t", Box::new(|_, _| ok())), ("e", Box::new(|_, _| ok()))],
    );
    let closed = rig.server.closed.clone();
    rig.server.daemons.lock().insert("d".into(), Box::new(move |_| Ok(open_daemon("d", closed.clone()))));
    rig.router.deliver(Seen::Upsert(body));
    rig.until("the cycle, the timer and the daemon ran", Duration::from_secs(30), |r| {
        r.logged("Creation is processed: 1 succeeded; 0 failed.") == 1 && r.server.count("t") == 1 && !r.server.opened.lock().is_empty()
    })
    .await;
    let s = handler_with("s", K::Startup, Default::default(), keyed("s-startup"));
    rig.server
        .activities
        .lock()
        .insert("s".into(), Box::new(|_| Ok(pb::ActivityResponse { outcome: pb::Outcome::Success as i32, ..Default::default() })));
    let servers: Vec<Arc<dyn HandlerClient>> = vec![rig.server.clone()];
    super::super::activities::startup(&[&s], &servers, &Logger::new(None)).await.unwrap();
    // Spies and index handlers are called through one function.
    let e = handler_with("e", K::Event, Default::default(), keyed("e-event"));
    rig.ctx.call_unrecorded(&e, pb::Reason::Event, "ADDED", &finalized(), |_, _| {}).await;

    let mut keys = rig.server.keys.lock().clone();
    keys.sort();
    let want = [("d", "d-daemon"), ("e", "e-event"), ("p", "p-on-create"), ("p/a", "p-on-create"), ("s", "s-startup"), ("t", "t-timer")];
    assert_eq!(keys, want.map(|(id, key)| (id.to_string(), key.to_string())));
}
