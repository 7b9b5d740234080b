//! Events: handlers' own when posting is enabled, and, with `loggers` on, the lines of each
//! object's handling cycle at or above the level, typed by level as Kopf posts them. No event
//! of the controller's own for a failure otherwise (Kopf 1.44+).

use std::time::Duration;

use bosun_proto::v1 as pb;
use serde_json::{Value, json};

use super::rig::*;
use crate::cluster::posting::Posting;
use crate::cluster::watching::Seen;
use crate::logs::Level;

/// A create handler that fails for good, with log lines and an event of its own of each type.
fn failing() -> Script {
    Box::new(|_, _| {
        let line = |level: pb::log_line::Level, message: &str| pb::LogLine { level: level as i32, message: message.into() };
        let event =
            |kind: &str| pb::Event { r#type: kind.into(), reason: "Asked".into(), message: format!("a {kind} event"), regarding: None };
        Ok(pb::HandleResponse {
            outcome: pb::Outcome::PermanentError as i32,
            message: "no".into(),
            logs: vec![line(pb::log_line::Level::Debug, "detail"), line(pb::log_line::Level::Warning, "careful")],
            events: vec![event("Normal"), event("Error")],
            ..Default::default()
        })
    })
}

/// The events posted so far: (type, reason, message).
fn posted(rig: &Rig) -> Vec<(String, String, String)> {
    let text = |e: &Value, k: &str| e[k].as_str().unwrap_or_default().to_string();
    rig.api.events.lock().iter().map(|e| (text(e, "type"), text(e, "reason"), text(e, "message"))).collect()
}

fn event(kind: &str, reason: &str, message: &str) -> (String, String, String) {
    (kind.into(), reason.into(), message.into())
}

async fn run(posting: Posting) -> Rig {
    let fresh = object(json!({}));
    let c = handler("c", pb::HandlerKind::Create, Default::default());
    let rig = rig_posting(fresh.clone(), vec![c], vec![("c", failing())], posting);
    rig.router.deliver(Seen::Upsert(fresh));
    rig.until("creation is processed", Duration::from_secs(10), |r| r.logged("Creation is processed: 0 succeeded; 1 failed.") == 1).await;
    // Whatever is queued is posted meanwhile.
    tokio::time::sleep(Duration::from_secs(5)).await;
    rig
}

#[tokio::test(start_paused = true)]
async fn by_default_handlers_events_are_posted_as_they_are_and_a_failure_posts_none_of_its_own() {
    let rig = run(Posting::default()).await;
    assert_eq!(posted(&rig), [event("Normal", "Asked", "a Normal event"), event("Error", "Asked", "a Error event")]);
}

#[tokio::test(start_paused = true)]
async fn with_loggers_on_the_cycles_lines_at_or_above_the_level_are_posted_typed_by_level() {
    let rig = run(Posting { enabled: true, loggers: true, level: Level::Info }).await;
    let want = [
        event("Warning", "Logging", "careful"),
        event("Error", "Logging", "Handler 'c' failed permanently: no"),
        event("Normal", "Logging", "Creation is processed: 0 succeeded; 1 failed."),
        event("Normal", "Asked", "a Normal event"),
        event("Error", "Asked", "a Error event"),
    ];
    let mut got = posted(&rig);
    // The lines are posted in the background, the handler's events after the cycle's write.
    got.sort_by_key(|(_, reason, _)| reason == "Asked");
    assert_eq!(got, want);
    let about = rig.api.events.lock()[0]["involvedObject"].clone();
    assert_eq!((about["kind"].as_str(), about["name"].as_str(), about["uid"].as_str()), (Some("KopfExample"), Some("obj"), Some("u1")));

    let rig = run(Posting { enabled: true, loggers: true, level: Level::Error }).await;
    let lines: Vec<_> = posted(&rig).into_iter().filter(|(_, reason, _)| reason == "Logging").collect();
    assert_eq!(lines, [event("Error", "Logging", "Handler 'c' failed permanently: no")]);
}

#[tokio::test(start_paused = true)]
async fn with_posting_disabled_nothing_is_posted() {
    let rig = run(Posting { enabled: false, loggers: true, level: Level::Debug }).await;
    assert_eq!(posted(&rig), []);
}
