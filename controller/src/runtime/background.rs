//! Background work per object: timers and daemons, started, fed with the newest body and
//! stopped by the object's cycles.
//!
//! They start only once the finalizer is on the object (so a deletion cannot slip past them),
//! run while it exists, is not being deleted and matches their filters, and are stopped when
//! it is deleted, stops matching or is no longer ours. A timer is aborted. A daemon is asked
//! to stop and seen to its end (`daemons`); until it has ended, the object's deletion keeps
//! the finalizer, a handover waits for it (it holds its turn), and the same daemon is not
//! started again for the object: never two instances of one daemon, as in Kopf. Its end wakes
//! the object's worker at once ([`Held::released`]). Each task holds its object's turn: a
//! revocation stops a timer at once (its call cancelled) and a daemon as a handover does,
//! its turn held until its server reports its real exit (bounded by `cancellation_timeout`).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bosun_proto::v1 as pb;
use chrono::{DateTime, Utc};
use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::{Notify, watch};
use tokio::task::AbortHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::context::{Latest, ResourceContext};
use crate::object;
use crate::state::delays::later;
use crate::state::registry::Handler;

/// How long an object whose stopped daemons may take as long as they need is left alone
/// before it is looked at again; their end wakes it sooner (this is a safety net).
const RECHECK: Duration = Duration::from_secs(60);

/// A running timer or daemon.
struct Task {
    handler: Arc<Handler>,
    abort: AbortHandle,
    /// Asks a daemon to stop (and to be seen to its end).
    stop: CancellationToken,
    /// The task has ended (written and read under the `winding` lock).
    ended: Arc<AtomicBool>,
    /// It ended because its turn was cut short (ownership revoked, or the object given away
    /// or paused): it starts again once the object is ours, unlike one that ended by itself.
    cut_short: Arc<AtomicBool>,
    /// Its turn's revocation.
    revoked: CancellationToken,
}

/// The running tasks of one object.
struct ObjectTasks {
    latest: watch::Sender<Latest>,
    essence: Value,
    running: HashMap<String, Task>,
}

/// The stopped daemons of one object that have not ended yet.
struct Winding {
    /// Their handler ids, each with until when it may take (`None`: as long as it needs).
    daemons: Vec<(String, Option<DateTime<Utc>>)>,
    /// Notified when the last of them ends.
    released: Arc<Notify>,
}

type WindingMap = Arc<Mutex<HashMap<String, Winding>>>;

/// What a cycle learns of an object's stopped daemons that have not ended yet: its deletion
/// keeps the finalizer, and they are not started again, until then.
#[derive(Debug, Clone)]
pub struct Held {
    /// When to look at the object again at the latest.
    pub until: DateTime<Utc>,
    /// Notified when the last of them has ended: the object's worker looks at it again.
    pub released: Arc<Notify>,
}

/// All timers and daemons of one resource, by object key ([`super::queues::key_of`]: the uid).
#[derive(Default)]
pub struct Background {
    objects: Mutex<HashMap<String, ObjectTasks>>,
    /// Stopped daemons not ended yet, by object key.
    winding: WindingMap,
}

/// Whether a handler runs in the background.
pub fn is_background(h: &Handler) -> bool {
    matches!(h.kind, pb::HandlerKind::Timer | pb::HandlerKind::Daemon)
}

/// Dropped when a task ends, however it ends: marks it ended and, if it was a stopped daemon
/// winding down, lets its object go once it was the last.
struct Ending {
    winding: WindingMap,
    key: String,
    id: String,
    ended: Arc<AtomicBool>,
}

impl Drop for Ending {
    fn drop(&mut self) {
        let mut winding = self.winding.lock();
        self.ended.store(true, Ordering::Relaxed);
        let Some(w) = winding.get_mut(&self.key) else { return };
        w.daemons.retain(|(id, _)| *id != self.id);
        if w.daemons.is_empty()
            && let Some(w) = winding.remove(&self.key)
        {
            w.released.notify_one();
        }
    }
}

impl Background {
    /// Starts, feeds and stops the tasks of the object `key` after a cycle saw `body`:
    /// `matching` are the timer and daemon handlers that apply to it now (none while it is
    /// being deleted); new ones start only when `may_start` (the finalizer is on). Returns what
    /// holds the object: stopped daemons that have not ended yet.
    pub fn sync(
        &self,
        ctx: &Arc<ResourceContext>,
        key: &str,
        body: &Value,
        essence: &Value,
        matching: &[Arc<Handler>],
        may_start: bool,
    ) -> Option<Held> {
        let now = ctx.clock.now();
        let mut objects = self.objects.lock();
        if matching.is_empty() {
            if let Some(o) = objects.remove(key) {
                self.stop_tasks(key, o.running.into_values(), now);
            }
            return self.held(key, now);
        }
        if !may_start && !objects.contains_key(key) {
            return self.held(key, now);
        }
        let entry = objects.entry(key.to_string()).or_insert_with(|| ObjectTasks {
            latest: watch::channel((body.clone(), Instant::now())).0,
            essence: essence.clone(),
            running: HashMap::new(),
        });
        // Ownership can come back before the verdict's followers saw it go (`stop_unowned`
        // then finds nothing to stop): tasks cut short, or revoked and still ending, are
        // stopped as unowned ones are (one that ended holds nothing; a daemon still ending is
        // waited for, and its end wakes the object), so they start again below or at its end.
        let cut: Vec<String> = entry
            .running
            .iter()
            .filter(|(_, t)| t.cut_short.load(Ordering::Relaxed) || t.revoked.is_cancelled())
            .map(|(id, _)| id.clone())
            .collect();
        let cut: Vec<Task> = cut.iter().filter_map(|id| entry.running.remove(id)).collect();
        self.stop_tasks(key, cut.into_iter(), now);
        let changed_at = if &entry.essence != essence { Instant::now() } else { entry.latest.borrow().1 };
        entry.essence = essence.clone();
        entry.latest.send_replace((body.clone(), changed_at));
        let gone: Vec<String> = entry.running.keys().filter(|id| !matching.iter().any(|h| &h.id == *id)).cloned().collect();
        let stopped: Vec<Task> = gone.iter().filter_map(|id| entry.running.remove(id)).collect();
        self.stop_tasks(key, stopped.into_iter(), now);
        if may_start {
            let uid = object::meta_str(body, "uid");
            for h in matching {
                // A stopped instance still winding down is waited for: it wakes the object.
                if entry.running.contains_key(&h.id) || self.winds_down(key, &h.id) {
                    continue;
                }
                // Each holds a turn while it runs: a handover of the object waits for it.
                let Some(turn) = ctx.authority.begin(uid) else { continue };
                let task = self.start(ctx, key, h, entry.latest.subscribe(), turn);
                entry.running.insert(h.id.clone(), task);
            }
        }
        self.held(key, now)
    }

    /// Starts the timer or daemon `h` of the object `key`, which holds `turn` until it ends.
    fn start(
        &self,
        ctx: &Arc<ResourceContext>,
        key: &str,
        h: &Arc<Handler>,
        latest: watch::Receiver<Latest>,
        turn: crate::coordination::Turn,
    ) -> Task {
        let labels = crate::metrics::BackgroundLabels {
            resource: ctx.resource.metrics_label(),
            kind: if h.kind == pb::HandlerKind::Daemon { "daemon" } else { "timer" },
        };
        let running = crate::metrics::Up::new(crate::metrics::global().background.get_or_create(&labels).clone());
        let stop = CancellationToken::new();
        let ended = Arc::new(AtomicBool::new(false));
        let cut_short = Arc::new(AtomicBool::new(false));
        let ending = Ending { winding: self.winding.clone(), key: key.to_string(), id: h.id.clone(), ended: ended.clone() };
        let revoked = turn.revocation();
        let (ctx2, h2, requested, cut) = (ctx.clone(), h.clone(), stop.clone(), cut_short.clone());
        let task = ctx.tasks.spawn(async move {
            // Dropped in this order when the task ends, however it ends: the turn first.
            let held = (turn, running, ending);
            if h2.kind == pb::HandlerKind::Daemon {
                super::daemons::run(ctx2, h2, latest, requested, &held.0).await
            } else {
                super::timers::run(ctx2, h2, latest, &held.0).await
            }
            if !held.0.is_current() {
                cut.store(true, Ordering::Relaxed);
            }
        });
        Task { handler: h.clone(), abort: task.abort_handle(), stop, ended, cut_short, revoked }
    }

    /// Stops tasks of the object `key`: timers are aborted, daemons asked to stop and noted
    /// as winding down until they end (for their `cancellation_timeout` at most, if any).
    fn stop_tasks(&self, key: &str, tasks: impl Iterator<Item = Task>, now: DateTime<Utc>) {
        let mut winding = self.winding.lock();
        for t in tasks {
            if t.handler.kind != pb::HandlerKind::Daemon {
                t.abort.abort();
                continue;
            }
            // One that ended on its own holds nothing (`Ending` writes this under the lock).
            if t.ended.load(Ordering::Relaxed) {
                continue;
            }
            t.stop.cancel();
            let timeout = t.handler.daemon.cancellation_timeout;
            let until = (!timeout.is_zero()).then(|| later(now, timeout));
            let w = winding.entry(key.to_string()).or_insert_with(|| Winding { daemons: Vec::new(), released: Arc::default() });
            w.daemons.push((t.handler.id.clone(), until));
        }
    }

    /// Whether the daemon `id` of the object `key` was stopped and has not ended yet.
    fn winds_down(&self, key: &str, id: &str) -> bool {
        self.winding.lock().get(key).is_some_and(|w| w.daemons.iter().any(|(d, _)| d == id))
    }

    /// What holds the object `key` now, if anything.
    fn held(&self, key: &str, now: DateTime<Utc>) -> Option<Held> {
        let winding = self.winding.lock();
        let w = winding.get(key)?;
        let until = w.daemons.iter().try_fold(now, |latest, (_, until)| until.map(|u| latest.max(u)));
        Some(Held { until: until.unwrap_or_else(|| later(now, RECHECK)), released: w.released.clone() })
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
    pub fn stop(&self, key: &str, now: DateTime<Utc>) {
        let removed = self.objects.lock().remove(key);
        if let Some(o) = removed {
            self.stop_tasks(key, o.running.into_values(), now);
        }
    }

    /// Stops the timers and daemons of the objects that are not ours now (paused, or given to
    /// another replica); they start again with the object's next cycle here, or at the
    /// replica they went to. A stopped daemon holds its turn until it has ended, so that a
    /// handover waits for it. Returns how many objects had some.
    pub fn stop_unowned(&self, authority: &crate::coordination::Authority, now: DateTime<Utc>) -> usize {
        let mut objects = self.objects.lock();
        let gone: Vec<String> = objects
            .iter()
            .filter(|(_, o)| !authority.owns(object::meta_str(&o.latest.borrow().0, "uid")))
            .map(|(key, _)| key.clone())
            .collect();
        for key in &gone {
            if let Some(o) = objects.remove(key) {
                self.stop_tasks(key, o.running.into_values(), now);
            }
        }
        gone.len()
    }

    /// How many timer and daemon tasks run (for tests and metrics).
    pub fn running(&self) -> usize {
        self.objects.lock().values().map(|o| o.running.len()).sum()
    }
}
