//! Kopf's order within a cycle: each handler's outcome is written before the next due handler
//! is called, so a later handler sees the earlier ones' results and a success that was answered
//! is never thrown away by a handover, a revocation or a crash in a later handler's call.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bosun_proto::v1 as pb;
use parking_lot::Mutex;
use serde_json::{Value, json};

use super::rig::*;
use crate::cluster::watching::Seen;

/// A success with this result.
fn success(result: Value) -> Result<pb::HandleResponse, crate::handlers::dispatch::CallFailure> {
    Ok(pb::HandleResponse { outcome: pb::Outcome::Success as i32, result: serde_json::to_vec(&result).unwrap(), ..Default::default() })
}

/// Two create handlers, `a` answering `{"made": "by a"}`; `b` notes the body it was given.
fn two(b_takes: Option<Duration>) -> (Rig, Arc<Mutex<Option<Value>>>) {
    let body = finalized();
    let handlers =
        vec![handler("a", pb::HandlerKind::Create, Default::default()), handler("b", pb::HandlerKind::Create, Default::default())];
    let seen: Arc<Mutex<Option<Value>>> = Arc::default();
    let noted = seen.clone();
    let b: Script = Box::new(move |req, _| {
        *noted.lock() = serde_json::from_slice(&req.object).ok();
        ok()
    });
    let rig = rig(body.clone(), handlers, vec![("a", Box::new(|_, _| success(json!({"made": "by a"})))), ("b", b)]);
    if let Some(t) = b_takes {
        rig.server.slow.lock().insert("b".into(), t);
    }
    rig.router.deliver(Seen::Upsert(body));
    (rig, seen)
}

#[tokio::test(start_paused = true)]
async fn each_handlers_outcome_is_written_before_the_next_handler_runs() {
    let (rig, seen) = two(None);
    rig.until("creation is processed", Duration::from_secs(10), |r| r.logged("Creation is processed: 2 succeeded; 0 failed.") == 1).await;
    let given = seen.lock().clone().expect("b was called");
    assert_eq!(given.pointer("/status/a"), Some(&json!({"made": "by a"})), "b sees a's result: {given:#}");
    assert_eq!((rig.server.count("a"), rig.server.count("b")), (1, 1));
}

/// Revoked while `b` runs: `a`'s success was written, so the next owner calls only `b`.
#[tokio::test(start_paused = true)]
async fn an_answered_success_is_kept_when_the_next_handlers_call_is_revoked() {
    let (rig, _) = two(Some(Duration::from_secs(1000)));
    rig.until("b runs", Duration::from_secs(10), |r| r.server.in_flight.load(Ordering::SeqCst) == 1 && r.server.count("b") == 1).await;
    rig.ctx.authority.revoke();
    rig.until("the turn ends", Duration::from_secs(5), |r| r.ctx.authority.in_flight() == 0).await;
    // The next owner, on the object as the API server has it.
    let next = {
        let body = rig.api.get_now();
        let handlers =
            vec![handler("a", pb::HandlerKind::Create, Default::default()), handler("b", pb::HandlerKind::Create, Default::default())];
        let r = super::rig::rig(body.clone(), handlers, vec![("a", Box::new(|_, _| ok())), ("b", Box::new(|_, _| ok()))]);
        r.router.deliver(Seen::Upsert(body));
        r
    };
    next.until("creation is processed", Duration::from_secs(10), |r| r.logged("Creation is processed") == 1).await;
    assert_eq!((next.server.count("a"), next.server.count("b")), (0, 1), "{:#?}", next.lines.lock());
}

/// The cause's last writes: the status (its progress purged), then the main resource (the
/// diffbase annotation). If the second does not follow, the object must still say that the
/// cause is handled, or the next owner would run every handler again: the status write
/// carries a copy of the diffbase.
#[tokio::test(start_paused = true)]
async fn a_cause_whose_diffbase_write_fails_after_its_progress_was_purged_is_not_handled_again() {
    let (rig, _) = two(Some(Duration::from_secs(5)));
    rig.until("b runs", Duration::from_secs(10), |r| r.server.in_flight.load(Ordering::SeqCst) == 1 && r.server.count("b") == 1).await;
    rig.api.main_writes_fail.store(true, Ordering::SeqCst);
    rig.until("the diffbase write fails", Duration::from_secs(10), |r| r.logged("Patching failed") >= 1).await;
    rig.ctx.authority.revoke();
    let body = rig.api.get_now();
    assert!(body.pointer("/status/bosun.dev/progress").is_none(), "the progress is purged: {body:#}");
    let handlers =
        vec![handler("a", pb::HandlerKind::Create, Default::default()), handler("b", pb::HandlerKind::Create, Default::default())];
    let next = super::rig::rig(body.clone(), handlers, vec![("a", Box::new(|_, _| ok())), ("b", Box::new(|_, _| ok()))]);
    next.router.deliver(Seen::Upsert(body));
    next.until("the next owner looked", Duration::from_secs(10), |r| r.logged("[ns/obj]") >= 1).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!((next.server.count("a"), next.server.count("b")), (0, 0), "{:#?}", next.lines.lock());
}

/// A handler skipped by its `when=` has nothing to save: the next due handler is called in the
/// same cycle, and the cause is processed (a skip must not defer the next handler, or the
/// skipped one, never recorded, would be called again every cycle before it).
#[tokio::test(start_paused = true)]
async fn a_skipped_handler_does_not_hold_up_the_next_one() {
    let body = finalized();
    let ids = ["skipped", "a", "b"];
    let handlers = ids.iter().map(|id| handler(id, pb::HandlerKind::Create, Default::default())).collect();
    let skip: Script = Box::new(|_, _| Ok(pb::HandleResponse { outcome: pb::Outcome::Skipped as i32, ..Default::default() }));
    let rig = rig(body.clone(), handlers, vec![("skipped", skip), ("a", Box::new(|_, _| ok())), ("b", Box::new(|_, _| ok()))]);
    rig.router.deliver(Seen::Upsert(body));
    rig.until("creation is processed", Duration::from_secs(10), |r| r.logged("Creation is processed: 2 succeeded; 0 failed.") == 1).await;
    assert_eq!((rig.server.count("a"), rig.server.count("b")), (1, 1));
    assert!(rig.server.count("skipped") <= 2, "once per cycle at most: {}", rig.server.count("skipped"));
}

/// A handler's success is recorded only once its patches landed: its patch of the main
/// resource and its JSON patch are written before the status write that records it (`p`,
/// followed by `q`, so that its success is kept as progress). While
/// the main resource cannot be written, no success is recorded; once it can, the handler is
/// called again (calls are at-least-once) and its patches land. Before, the status write went
/// first: the success was recorded, the patches were lost, and the handler was never called
/// again (the replica simulation's invariant (i) found it).
#[tokio::test(start_paused = true)]
async fn a_handlers_success_is_recorded_only_once_its_patches_landed() {
    let body = finalized();
    let handlers =
        vec![handler("p", pb::HandlerKind::Create, Default::default()), handler("q", pb::HandlerKind::Create, Default::default())];
    let patching: Script = Box::new(|_, _| {
        Ok(pb::HandleResponse {
            outcome: pb::Outcome::Success as i32,
            merge_patch: serde_json::to_vec(&json!({"metadata": {"labels": {"made": "by-p"}}})).unwrap(),
            json_patch: serde_json::to_vec(&json!([{"op": "add", "path": "/spec/made", "value": "by p"}])).unwrap(),
            ..Default::default()
        })
    });
    let rig = rig(body.clone(), handlers, vec![("p", patching), ("q", Box::new(|_, _| ok()))]);
    rig.api.main_writes_fail.store(true, Ordering::SeqCst);
    rig.router.deliver(Seen::Upsert(body));
    rig.until("a write fails", Duration::from_secs(10), |r| r.logged("Patching failed") >= 1).await;
    let now = rig.api.get_now();
    assert!(now.pointer("/status/bosun.dev/progress/p/success").is_none(), "no success recorded without its patches: {now:#}");
    rig.api.main_writes_fail.store(false, Ordering::SeqCst);
    rig.until("the cause is handled", Duration::from_secs(120), |r| {
        r.api.get_now().pointer("/metadata/annotations/bosun.dev~1last-handled-configuration").is_some()
    })
    .await;
    let now = rig.api.get_now();
    assert_eq!(now.pointer("/metadata/labels/made"), Some(&json!("by-p")), "{now:#}");
    assert_eq!(now.pointer("/spec/made"), Some(&json!("by p")), "{now:#}");
    assert_eq!(rig.server.count("p"), 2, "called again, as its success was never recorded");
    assert_eq!(rig.server.count("q"), 1);
}

/// While the diffbase's annotation cannot be written, the copy in status (and the progress)
/// keep what was handled: the status write goes before the main write that stores the
/// annotation (`state::storage`'s table tests check that no status write drops the copy
/// before the annotation holds it). Here the main resource cannot be written: `c1` and `c2` end
/// the creation (the status write that purges their progress lands with the copy, the
/// annotation does not), an update's `u` fails temporarily (its progress lands in status, the
/// annotation's move does not), then the main resource can be written again: `u` is retried,
/// and neither create handler is called again.
#[tokio::test(start_paused = true)]
async fn create_handlers_are_not_called_again_while_the_diffbase_annotation_cannot_be_written() {
    // No finalizer (no delete handler): no main write but the annotation's.
    let body = object(json!({}));
    let handlers = vec![
        handler("c1", pb::HandlerKind::Create, Default::default()),
        handler("c2", pb::HandlerKind::Create, Default::default()),
        handler("u", pb::HandlerKind::Update, Default::default()),
    ];
    let u: Script = Box::new(|_, n| {
        if n == 0 {
            Ok(pb::HandleResponse { outcome: pb::Outcome::TemporaryError as i32, delay_seconds: Some(1.0), ..Default::default() })
        } else {
            success(json!({"updated": true}))
        }
    });
    let scripts: Vec<(&str, Script)> =
        vec![("c1", Box::new(|_, _| success(json!({"created": 1})))), ("c2", Box::new(|_, _| success(json!({"created": 2})))), ("u", u)];
    let rig = rig(body.clone(), handlers, scripts);
    rig.api.main_writes_fail.store(true, Ordering::SeqCst);
    rig.router.deliver(Seen::Upsert(body));
    rig.until("the creation's results are stored", Duration::from_secs(10), |r| r.api.get_now().pointer("/status/c2").is_some()).await;
    let mut changed = rig.api.get_now();
    changed["spec"]["a"] = json!(2);
    changed["metadata"]["resourceVersion"] = json!("100");
    *rig.api.object.lock() = Some(changed.clone());
    rig.router.deliver(Seen::Upsert(changed));
    rig.until("u's retry is recorded", Duration::from_secs(30), |r| r.api.get_now().pointer("/status/bosun.dev/progress/u").is_some())
        .await;
    rig.api.main_writes_fail.store(false, Ordering::SeqCst);
    rig.until("the update is handled", Duration::from_secs(120), |r| r.api.get_now().pointer("/status/u").is_some()).await;
    rig.until("the annotation holds the diffbase", Duration::from_secs(120), |r| {
        r.api.get_now().pointer("/metadata/annotations/bosun.dev~1last-handled-configuration").is_some()
    })
    .await;
    let now = rig.api.get_now();
    assert_eq!((rig.server.count("c1"), rig.server.count("c2")), (1, 1), "the creation was handled once: {now:#}");
    assert_eq!(rig.server.count("u"), 2);
}
