//! Background work per object: timers here and daemons (`daemons`), started, fed with the
//! newest body and stopped by the object's cycles.
//!
//! Timers (Kopf's `kopf.timer`): per object and timer handler, a task that calls the handler
//! every `interval` (after `initial_delay`; only once the object has been unchanged for `idle`;
//! `sharp` keeps the schedule from each call's start) for as long as the object exists, is not
//! being deleted and matches the handler's filters. Results and patches are written like a
//! cycle's; failures are retried after their delay or the handler's backoff.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bosun_proto::v1 as pb;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::cycle::{ResourceContext, object_ref};
use crate::engines::dispatch::CallFailure;
use crate::state::registry::{ErrorsMode, Handler};

/// The latest body of an object and when its essence last changed.
type Latest = (Value, Instant);

/// The running timers of one object.
struct ObjectTimers {
    latest: watch::Sender<Latest>,
    essence: Value,
    running: HashMap<String, AbortHandle>,
}

/// All timers of one resource, by object key.
#[derive(Default)]
pub struct Timers {
    objects: Mutex<HashMap<String, ObjectTimers>>,
}

/// What one tick means for the schedule.
#[derive(Debug, PartialEq)]
pub enum After {
    /// The regular interval.
    Interval,
    /// Sooner or later than the interval, to retry.
    Retry(Duration),
}

/// Judges a timer's answer (pure).
pub fn judge(h: &Handler, outcome: pb::Outcome, delay: Option<f64>) -> After {
    let delay = delay.filter(|d| d.is_finite() && *d >= 0.0).map(Duration::from_secs_f64);
    match outcome {
        pb::Outcome::Success | pb::Outcome::Skipped | pb::Outcome::PermanentError => After::Interval,
        pb::Outcome::TemporaryError => After::Retry(delay.unwrap_or(h.backoff)),
        pb::Outcome::UnexpectedError if h.errors == ErrorsMode::Temporary => After::Retry(h.backoff),
        pb::Outcome::UnexpectedError => After::Interval,
    }
}

impl Timers {
    /// Starts, feeds and stops the timers of the object `key` after a cycle saw `body`:
    /// `matching` are the timer handlers that apply to it now (none while it is deleted).
    pub fn sync(&self, ctx: &Arc<ResourceContext>, key: &str, body: &Value, essence: &Value, matching: &[Arc<Handler>]) {
        let mut objects = self.objects.lock();
        if matching.is_empty() {
            if let Some(o) = objects.remove(key) {
                o.running.values().for_each(AbortHandle::abort);
            }
            return;
        }
        let entry = objects.entry(key.to_string()).or_insert_with(|| ObjectTimers {
            latest: watch::channel((body.clone(), Instant::now())).0,
            essence: essence.clone(),
            running: HashMap::new(),
        });
        let changed_at = if &entry.essence != essence { Instant::now() } else { entry.latest.borrow().1 };
        entry.essence = essence.clone();
        entry.latest.send_replace((body.clone(), changed_at));
        entry.running.retain(|id, task| {
            let keep = matching.iter().any(|h| &h.id == id);
            if !keep {
                task.abort();
            }
            keep
        });
        for h in matching {
            if !entry.running.contains_key(&h.id) {
                let latest = entry.latest.subscribe();
                let task = if h.kind == pb::HandlerKind::Daemon {
                    ctx.tasks.spawn(super::daemons::run(ctx.clone(), h.clone(), latest))
                } else {
                    ctx.tasks.spawn(run(ctx.clone(), h.clone(), latest))
                };
                entry.running.insert(h.id.clone(), task.abort_handle());
            }
        }
    }

    /// Stops every timer of the object `key`.
    pub fn stop(&self, key: &str) {
        if let Some(o) = self.objects.lock().remove(key) {
            o.running.values().for_each(AbortHandle::abort);
        }
    }
}

async fn run(ctx: Arc<ResourceContext>, h: Arc<Handler>, mut latest: watch::Receiver<Latest>) {
    let mut stop = ctx.stop.clone();
    let t = h.timer;
    let sleep = |d: Duration| tokio::time::sleep(d);
    tokio::select! { _ = stop.changed() => return, _ = sleep(t.initial_delay) => {} }
    loop {
        if !t.idle.is_zero() {
            loop {
                let quiet = latest.borrow().1.elapsed();
                if quiet >= t.idle {
                    break;
                }
                tokio::select! {
                    _ = stop.changed() => return,
                    _ = sleep(t.idle - quiet) => {}
                    _ = latest.changed() => {}
                }
            }
        }
        let started = Instant::now();
        let body = latest.borrow().0.clone();
        let after = tick(&ctx, &h, &body).await;
        let wait = match after {
            After::Interval if t.sharp => t.interval.saturating_sub(started.elapsed()),
            After::Interval => t.interval,
            After::Retry(d) => d,
        };
        tokio::select! { _ = stop.changed() => return, _ = sleep(wait) => {} }
    }
}

/// Calls the timer once and writes what it returned.
async fn tick(ctx: &ResourceContext, h: &Handler, body: &Value) -> After {
    let obj = object_ref(body);
    let req = pb::HandleRequest {
        handler_id: h.id.clone(),
        reason: pb::Reason::Timer as i32,
        resource: Some(ctx.pb_resource()),
        object: serde_json::to_vec(body).expect("JSON values serialize"),
        ..Default::default()
    };
    let answer = match ctx.servers[h.server].handle(req, h.call_timeout).await {
        Ok(a) => a,
        Err(CallFailure::Unreachable(why) | CallFailure::Rejected(why)) => {
            ctx.log.warn(Some(&obj), &format!("Timer '{}' could not be called: {why}. Will retry.", h.id));
            return After::Retry(h.backoff.min(Duration::from_secs(10)));
        }
    };
    ctx.log_lines(&obj, &answer.logs);
    let outcome = pb::Outcome::try_from(answer.outcome).unwrap_or(pb::Outcome::UnexpectedError);
    match outcome {
        pb::Outcome::Success => ctx.log.info(Some(&obj), &format!("Timer '{}' succeeded.", h.id)),
        pb::Outcome::Skipped => {}
        pb::Outcome::TemporaryError => ctx.log.warn(Some(&obj), &format!("Timer '{}' failed temporarily: {}", h.id, answer.message)),
        pb::Outcome::PermanentError => ctx.log.error(Some(&obj), &format!("Timer '{}' failed permanently: {}", h.id, answer.message)),
        pb::Outcome::UnexpectedError => ctx.log.warn(Some(&obj), &format!("Timer '{}' failed with an exception: {}", h.id, answer.message)),
    }
    if outcome == pb::Outcome::Success {
        let (mut main, mut status) = (json!({}), json!({}));
        if let Some(m) = serde_json::from_slice::<Value>(&answer.merge_patch).ok().filter(Value::is_object) {
            ctx.add_patch(&m, &mut main, &mut status);
        }
        if let Some(result) = serde_json::from_slice::<Value>(&answer.result).ok().filter(|v| !v.is_null()) {
            ctx.add_result(&h.id, &result, &mut main, &mut status);
        }
        if let Err(e) = ctx.write(body, main, status, None, &[]).await {
            ctx.log.warn(Some(&obj), &format!("Timer '{}' could not write its result: {e:?}", h.id));
        }
    }
    ctx.post_events(body, answer.events.iter()).await;
    judge(h, outcome, answer.delay_seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handler(errors: ErrorsMode) -> Handler {
        let spec = pb::HandlerSpec {
            id: "tick".into(),
            kind: pb::HandlerKind::Timer as i32,
            resource: Some(pb::ResourceSelector { name: "kex".into(), ..Default::default() }),
            ..Default::default()
        };
        let mut h = Handler::from_spec(&spec, 0).unwrap();
        h.errors = errors;
        h
    }

    #[test]
    fn timer_outcomes_choose_the_next_wait() {
        let s = Duration::from_secs;
        let cases = [
            (ErrorsMode::Temporary, pb::Outcome::Success, None, After::Interval),
            (ErrorsMode::Temporary, pb::Outcome::TemporaryError, Some(3.0), After::Retry(s(3))),
            (ErrorsMode::Temporary, pb::Outcome::TemporaryError, None, After::Retry(s(60))),
            (ErrorsMode::Temporary, pb::Outcome::PermanentError, None, After::Interval),
            (ErrorsMode::Temporary, pb::Outcome::UnexpectedError, None, After::Retry(s(60))),
            (ErrorsMode::Ignored, pb::Outcome::UnexpectedError, None, After::Interval),
        ];
        for (mode, outcome, delay, want) in cases {
            assert_eq!(judge(&handler(mode), outcome, delay), want, "{mode:?} {outcome:?}");
        }
    }
}
