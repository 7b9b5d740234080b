//! Kopf's debug lines of each handling cycle, which Kopf's own tests look for in the log:
//! what is in progress (with the body), the diff of an update, and the causes no handler is
//! called for.

use std::time::Duration;

use bosun_proto::v1 as pb;
use serde_json::json;

use super::rig::*;
use crate::cluster::watching::Seen;

#[tokio::test(start_paused = true)]
async fn each_cycle_says_what_is_in_progress_with_the_body_and_an_updates_diff() {
    let fresh = object(json!({}));
    let kinds = [("c", pb::HandlerKind::Create), ("u", pb::HandlerKind::Update), ("d", pb::HandlerKind::Delete)];
    let handlers = kinds.iter().map(|(id, k)| handler(id, *k, Default::default())).collect();
    let rig = rig(fresh.clone(), handlers, vec![("c", Box::new(|_, _| ok())), ("u", Box::new(|_, _| ok())), ("d", Box::new(|_, _| ok()))]);
    let processed = |what: &'static str| move |r: &Rig| r.logged(what) == 1;
    let t = Duration::from_secs(10);

    rig.router.deliver(Seen::Upsert(fresh));
    rig.until("creation is processed", t, processed("Creation is processed: 1 succeeded; 0 failed.")).await;
    let created = rig.lines.lock().iter().find(|l| l.contains("Creation is in progress: ")).cloned().expect("said");
    assert!(created.starts_with("DEBUG [ns/obj] Creation is in progress: {\"apiVersion\":\"kopf.dev/v1\""), "compact JSON: {created}");

    let changed = rig.change(|o| o["spec"]["a"] = json!(2));
    rig.router.deliver(Seen::Upsert(changed));
    rig.until("updating is processed", t, processed("Updating is processed: 1 succeeded; 0 failed.")).await;
    assert_eq!(rig.logged("DEBUG [ns/obj] Updating is in progress: {"), 1);
    assert_eq!(rig.logged(r#"DEBUG [ns/obj] Updating diff: [["change",["spec","a"],1,2]]"#), 1);

    // Someone else's change outside the essence: nothing to do, and Kopf says so.
    let noop = rig.change(|o| o["metadata"]["generation"] = json!(7));
    rig.router.deliver(Seen::Upsert(noop));
    let noop_line = "DEBUG [ns/obj] Something has changed, but we are not interested (the essence is the same).";
    rig.until("the change of no interest is said", t, |r| r.logged(noop_line) == 1).await;

    let deleting = rig.change(|o| o["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z"));
    rig.router.deliver(Seen::Upsert(deleting.clone()));
    rig.until("the object is gone", t, |r| r.api.object.lock().is_none()).await;
    assert_eq!(rig.logged("DEBUG [ns/obj] Deletion is in progress: {"), 1);
    rig.router.deliver(Seen::Deleted(deleting));
    rig.until("the goodbye", t, |r| r.logged("DEBUG [ns/obj] Deleted, really deleted, and we are notified.") == 1).await;
    assert_eq!(rig.logged("is in progress"), 3, "one line per cycle: {:#?}", rig.lines.lock());
}

#[tokio::test(start_paused = true)]
async fn an_object_deleted_without_our_finalizer_is_none_of_our_business() {
    let deleting = object(json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}));
    let rig = rig(deleting.clone(), vec![handler("c", pb::HandlerKind::Create, Default::default())], vec![("c", Box::new(|_, _| ok()))]);
    rig.router.deliver(Seen::Upsert(deleting));
    let free = "DEBUG [ns/obj] Deletion, but we are done with it, and we do not care.";
    rig.until("the deletion is let go", Duration::from_secs(5), |r| r.logged(free) == 1).await;
    assert_eq!(rig.server.count("c"), 0);
}
