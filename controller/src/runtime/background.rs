//! Background work per object: timers and daemons, started, fed with the newest body and
//! stopped by the object's cycles.
//!
//! They start only once the finalizer is on the object (so a deletion cannot slip past them),
//! run while it exists, is not being deleted and matches their filters, and are stopped when
//! it is deleted. A stopped daemon gets its `cancellation_timeout` to wind down: until then
//! the object's deletion keeps the finalizer.

use std::collections::HashMap;
use std::sync::Arc;

use bosun_proto::v1 as pb;
use chrono::{DateTime, Utc};
use futures::future::Either;
use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::watch;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::context::ResourceContext;
use crate::object;
use crate::state::outcomes::later;
use crate::state::registry::Handler;

/// The latest body of an object and when its essence last changed.
pub type Latest = (Value, Instant);

/// The running tasks of one object.
struct ObjectTasks {
    latest: watch::Sender<Latest>,
    essence: Value,
    running: HashMap<String, (AbortHandle, Arc<Handler>)>,
}

/// All timers and daemons of one resource, by object key.
#[derive(Default)]
pub struct Background {
    objects: Mutex<HashMap<String, ObjectTasks>>,
    /// Objects whose stopped daemons still have time to wind down, and until when.
    holding: Mutex<HashMap<String, DateTime<Utc>>>,
}

/// Whether a handler runs in the background.
pub fn is_background(h: &Handler) -> bool {
    matches!(h.kind, pb::HandlerKind::Timer | pb::HandlerKind::Daemon)
}

impl Background {
    /// Starts, feeds and stops the tasks of the object `key` after a cycle saw `body`:
    /// `matching` are the timer and daemon handlers that apply to it now (none while it is
    /// being deleted); new ones start only when `may_start` (the finalizer is on). Returns
    /// until when the object's deletion should keep the finalizer for stopped daemons.
    pub fn sync(
        &self,
        ctx: &Arc<ResourceContext>,
        key: &str,
        body: &Value,
        essence: &Value,
        matching: &[Arc<Handler>],
        may_start: bool,
    ) -> Option<DateTime<Utc>> {
        let now = ctx.clock.now();
        let mut objects = self.objects.lock();
        if matching.is_empty() {
            if let Some(o) = objects.remove(key) {
                self.stopped(key, o.running.into_values(), now);
            }
            return self.holding_until(key, now);
        }
        if !may_start && !objects.contains_key(key) {
            return self.holding_until(key, now);
        }
        let entry = objects.entry(key.to_string()).or_insert_with(|| ObjectTasks {
            latest: watch::channel((body.clone(), Instant::now())).0,
            essence: essence.clone(),
            running: HashMap::new(),
        });
        let changed_at = if &entry.essence != essence { Instant::now() } else { entry.latest.borrow().1 };
        entry.essence = essence.clone();
        entry.latest.send_replace((body.clone(), changed_at));
        let gone: Vec<String> = entry.running.keys().filter(|id| !matching.iter().any(|h| &h.id == *id)).cloned().collect();
        let stopped: Vec<(AbortHandle, Arc<Handler>)> = gone.iter().filter_map(|id| entry.running.remove(id)).collect();
        if may_start {
            let uid = object::meta_str(body, "uid");
            for h in matching {
                if !entry.running.contains_key(&h.id) {
                    // Each holds a turn while it runs: a handover of the object waits for it.
                    let Some(turn) = ctx.authority.begin(uid) else { continue };
                    let latest = entry.latest.subscribe();
                    let labels = crate::metrics::BackgroundLabels {
                        resource: ctx.resource.metrics_label(),
                        kind: if h.kind == pb::HandlerKind::Daemon { "daemon" } else { "timer" },
                    };
                    let running = crate::metrics::Up::new(crate::metrics::global().background.get_or_create(&labels).clone());
                    let run = if h.kind == pb::HandlerKind::Daemon {
                        Either::Left(super::daemons::run(ctx.clone(), h.clone(), latest))
                    } else {
                        Either::Right(super::timers::run(ctx.clone(), h.clone(), latest))
                    };
                    let task = ctx.tasks.spawn(async move {
                        let _held = (turn, running);
                        run.await
                    });
                    entry.running.insert(h.id.clone(), (task.abort_handle(), h.clone()));
                }
            }
        }
        self.stopped(key, stopped.into_iter(), now);
        self.holding_until(key, now)
    }

    fn stopped(&self, key: &str, tasks: impl Iterator<Item = (AbortHandle, Arc<Handler>)>, now: DateTime<Utc>) {
        let mut until: Option<DateTime<Utc>> = None;
        for (task, h) in tasks {
            task.abort();
            if h.kind == pb::HandlerKind::Daemon && !h.daemon.cancellation_timeout.is_zero() {
                let t = later(now, h.daemon.cancellation_timeout);
                until = Some(until.map_or(t, |u| u.max(t)));
            }
        }
        if let Some(t) = until {
            let mut holding = self.holding.lock();
            let e = holding.entry(key.to_string()).or_insert(t);
            *e = (*e).max(t);
        }
    }

    fn holding_until(&self, key: &str, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let mut holding = self.holding.lock();
        match holding.get(key) {
            Some(t) if *t > now => Some(*t),
            Some(_) => {
                holding.remove(key);
                None
            }
            None => None,
        }
    }

    /// Gives the running timers and daemons of the object `key` the body the controller itself
    /// just wrote (the watch event of that write is skipped as its echo), keeping when the
    /// object last changed: the controller's own writes do not reset `idle`.
    pub fn refresh(&self, key: &str, body: &Value) {
        if let Some(entry) = self.objects.lock().get(key) {
            entry.latest.send_modify(|(latest, _)| *latest = body.clone());
        }
    }

    /// Stops every task of the object `key` (it is gone).
    pub fn stop(&self, key: &str) {
        if let Some(o) = self.objects.lock().remove(key) {
            o.running.values().for_each(|(t, _)| t.abort());
        }
        self.holding.lock().remove(key);
    }

    /// Stops the timers and daemons of the objects that are not ours now (paused, or given to
    /// another replica); they start again with the object's next cycle here, or at the
    /// replica they went to. A stopped daemon counts as running for its `cancellation_timeout`
    /// more (the handler server may still be winding it down), so that a handover waits for
    /// it. Returns how many objects had some.
    pub fn stop_unowned(&self, authority: &crate::coordination::Authority) -> usize {
        let mut objects = self.objects.lock();
        let gone: Vec<String> = objects
            .iter()
            .filter(|(_, o)| !authority.owns(object::meta_str(&o.latest.borrow().0, "uid")))
            .map(|(key, _)| key.clone())
            .collect();
        for key in &gone {
            if let Some(o) = objects.remove(key) {
                let uid = object::meta_str(&o.latest.borrow().0, "uid").to_string();
                for (task, h) in o.running.values() {
                    let wind_down = h.daemon.cancellation_timeout;
                    if h.kind == pb::HandlerKind::Daemon && !wind_down.is_zero() {
                        // Counted before the abort drops the task's own turn: never a gap.
                        let turn = authority.winding_down(&uid);
                        tokio::spawn(async move {
                            tokio::time::sleep(wind_down).await;
                            drop(turn);
                        });
                    }
                    task.abort();
                }
            }
            self.holding.lock().remove(key);
        }
        gone.len()
    }

    /// How many timer and daemon tasks run (for tests and metrics).
    pub fn running(&self) -> usize {
        self.objects.lock().values().map(|o| o.running.len()).sum()
    }
}
