//! What calls carry: the registration they are for (`handler_key`; sub-handlers their
//! top-level handler's), and the sub-handlers a parent's finishing call finishes.

use std::sync::Arc;
use std::time::Duration;

use bosun_proto::v1 as pb;

use super::rig::*;
use crate::cluster::watching::Seen;
use crate::handlers::dispatch::HandlerClient;
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

#[tokio::test(start_paused = true)]
async fn a_parent_is_finished_by_a_call_of_its_own_naming_its_sub_handlers_and_its_result_is_stored() {
    let fresh = object(serde_json::json!({}));
    let p = handler_with("p", pb::HandlerKind::Create, Default::default(), keyed("p-key"));
    let p = Arc::new(crate::state::registry::Handler { finishes_parents: true, ..(*p).clone() });
    let finished: Arc<parking_lot::Mutex<Vec<Vec<String>>>> = Arc::default();
    let parent: Script = {
        let finished = finished.clone();
        Box::new(move |req, _| {
            finished.lock().push(req.finished_subhandlers.clone());
            let mut answer = pb::HandleResponse { outcome: pb::Outcome::Success as i32, ..Default::default() };
            if req.finished_subhandlers.is_empty() {
                answer.subhandlers = vec![pb::SubHandler { id: "a".into(), ..Default::default() }];
            } else {
                answer.result = b"{\"after\":\"execute\"}".to_vec();
            }
            Ok(answer)
        })
    };
    let child: Script = Box::new(|req, n| {
        assert_eq!((req.parent_id.as_str(), req.subhandler_id.as_str(), req.handler_key.as_str()), ("p", "a", "p-key"));
        if n == 0 {
            Ok(pb::HandleResponse { outcome: pb::Outcome::TemporaryError as i32, delay_seconds: Some(10.0), ..Default::default() })
        } else {
            ok()
        }
    });
    let rig = rig(fresh.clone(), vec![p], vec![("p", parent), ("p/a", child)]);
    rig.router.deliver(Seen::Upsert(fresh));
    rig.until("creation is processed", Duration::from_secs(60), |r| r.logged("Creation is processed: 1 succeeded; 0 failed.") == 1).await;
    assert_eq!(*finished.lock(), [vec![], vec!["a".to_string()]], "the first call, then the finishing one");
    let secs = |id: &str| rig.server.schedule(id).iter().map(Duration::as_secs).collect::<Vec<_>>();
    assert_eq!(secs("p/a"), [0, 10], "the sub-handler's retry after its delay");
    assert_eq!(secs("p"), [0, 10], "finished once its sub-handler is, in the same cycle");
    assert_eq!(rig.api.get_now()["status"]["p"], serde_json::json!({"after": "execute"}));
    assert_eq!(rig.logged("Handler 'p' succeeded."), 1);
}
