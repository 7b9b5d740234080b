//! The resources served: one job per resource as the API server names it, whatever the
//! spellings of its handlers (`resolving`); started, replaced when its handlers change and
//! stopped, each with the memory of its objects kept across replacements. The job itself is
//! `resource.rs`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc};
use tokio_util::task::TaskTracker;

use super::daemons::GRACE;
use super::resolving::{self, Found, Group, Resolver, ResourceKey};
use super::resource::{Memory, ResourceJob, Shared};
use crate::Settings;
use crate::cluster::{Cluster, discovery};
use crate::coordination::Authority;
use crate::handlers::dispatch::Servers;
use crate::logs::Logger;
use crate::state::essence::parse_path;
use crate::state::registry::Handler;
use bosun_proto::v1 as pb;
use discovery::{Normalized, ResolvedResource};

/// One resource being served.
struct Running {
    resource: ResolvedResource,
    /// Its name in log lines.
    name: String,
    handlers: Vec<Arc<Handler>>,
    ignored: Vec<Vec<String>>,
    memory: Memory,
    stop: tokio::sync::watch::Sender<bool>,
    tasks: TaskTracker,
    /// The jobs it replaced whose cycles or daemons may still run.
    before: Vec<TaskTracker>,
}

impl Running {
    /// Tells it to stop, for a job that replaces it: what may still run (its own tasks and
    /// those of the jobs it replaced), for the new job to wait for.
    fn hand_over(self) -> Vec<TaskTracker> {
        let _ = self.stop.send(true);
        self.tasks.close();
        let mut running: Vec<TaskTracker> = self.before.into_iter().filter(|t| !t.is_empty()).collect();
        running.push(self.tasks);
        running
    }

    /// Stops its watches, workers, timers and daemons, and waits for its cycles in flight.
    async fn stop(self, log: &Logger, name: &str) {
        let _ = self.stop.send(true);
        self.tasks.close();
        if tokio::time::timeout(GRACE, self.tasks.wait()).await.is_err() {
            log.warn(None, &format!("Some cycles of '{name}' did not finish within {GRACE:?}; going on without them."));
        }
    }
}

/// The resources served, by resource.
pub(super) struct Served {
    running: HashMap<ResourceKey, Running>,
    shared: Shared,
    /// The spellings resolved so far, with the resource each names.
    resolved: HashMap<Normalized, ResolvedResource>,
    /// The spellings still looked up in the background.
    resolving: HashMap<Normalized, (pb::ResourceSelector, Resolver)>,
    found: (mpsc::UnboundedSender<Found>, mpsc::UnboundedReceiver<Found>),
    /// What the last `apply` was given: the handlers join their resource again with it when a
    /// spelling resolves.
    last: (Vec<Handler>, Vec<pb::DescribeResponse>),
}

impl Served {
    /// Serves nothing yet: `apply` starts what the handlers need, on `cluster` and `servers`,
    /// processing at most `settings.max_workers` objects at once.
    pub(super) fn new(
        cluster: Cluster,
        authority: Authority,
        servers: Servers,
        outages: Arc<crate::handlers::dispatch::Outages>,
        log: Logger,
        settings: Settings,
    ) -> Served {
        let limit = Arc::new(Semaphore::new(settings.max_workers.max(1)));
        let shared = Shared { cluster, authority, servers, outages, kinds: Arc::default(), log, settings, limit, gate: Arc::default() };
        Served {
            running: HashMap::new(),
            shared,
            resolved: HashMap::new(),
            resolving: HashMap::new(),
            found: mpsc::unbounded_channel(),
            last: Default::default(),
        }
    }

    /// The cluster the resources are served from.
    pub(super) fn cluster(&self) -> &Cluster {
        &self.shared.cluster
    }

    /// Serves what `handlers` need: resources no longer handled stop, resources whose handlers
    /// changed are served anew (their memory kept), new resources start; so are the resources
    /// with index handlers of server `reindex`, whose indices must be filled again. Every
    /// spelling is resolved first (again: a CRD may have changed); one that does not resolve
    /// now is looked up in the background, and its handlers are served once it resolves.
    pub(super) async fn apply(&mut self, handlers: Vec<Handler>, described: &[pb::DescribeResponse], reindex: Option<usize>) {
        let admits = handlers.iter().any(Handler::is_admission);
        if !handlers.iter().any(resolving::watches) && !admits {
            self.shared.log.warn(None, "No resource handlers are registered; nothing to watch.");
        }
        let spellings = resolving::spellings(&handlers, described);
        self.resolving.retain(|spelling, _| spellings.iter().any(|(s, _)| s == spelling));
        let attempts = futures::future::join_all(spellings.iter().map(|(_, sel)| resolving::resolve_once(&self.shared.cluster, sel))).await;
        for ((spelling, sel), attempt) in spellings.into_iter().zip(attempts) {
            if let Ok(Some(r)) = attempt {
                self.resolving.remove(&spelling);
                self.resolved.insert(spelling, r);
                continue;
            }
            // Served already: it stays served as it was (its watch says if the CRD is gone).
            if self.resolved.contains_key(&spelling) || self.resolving.contains_key(&spelling) {
                continue;
            }
            let delay = Duration::from_secs(1);
            resolving::say_unresolved(&self.shared.log, &sel.name, &attempt, delay);
            let indexed = handlers.iter().any(|h| h.kind == pb::HandlerKind::Index && discovery::normalize(&h.resource) == spelling);
            if indexed {
                self.shared
                    .log
                    .warn(None, &format!("The other handlers do not wait for the index of '{}', which cannot be listed now.", sel.name));
            }
            let resolver =
                Resolver::start(self.shared.cluster.clone(), spelling.clone(), sel.clone(), self.shared.log.clone(), self.found.0.clone());
            self.resolving.insert(spelling, (sel, resolver));
        }
        self.last = (handlers, described.to_vec());
        self.serve(reindex).await;
    }

    /// The next spelling that resolved in the background.
    pub(super) async fn found(&mut self) -> Found {
        self.found.1.recv().await.expect("`Served` keeps a sender")
    }

    /// Serves the handlers of a spelling that resolved in the background with the others of
    /// its resource. The other spellings still pending are tried at once too: the CRD that
    /// came may be what they wait for as well, and their handlers must join their resource
    /// together, not serve it one spelling at a time.
    pub(super) async fn resolved(&mut self, (spelling, resource): Found) {
        if self.resolving.remove(&spelling).is_none() {
            return; // No handler spells it this way any more.
        }
        self.resolved.insert(spelling, resource);
        let pending: Vec<(Normalized, pb::ResourceSelector)> =
            self.resolving.iter().map(|(n, (sel, _))| (n.clone(), sel.clone())).collect();
        let attempts = futures::future::join_all(pending.iter().map(|(_, sel)| resolving::resolve_once(&self.shared.cluster, sel))).await;
        for ((spelling, _), attempt) in pending.into_iter().zip(attempts) {
            if let Ok(Some(r)) = attempt {
                self.resolving.remove(&spelling);
                self.resolved.insert(spelling, r);
            }
        }
        self.serve(None).await;
    }

    /// Serves the last handlers applied, grouped by the resources their spellings resolve to.
    async fn serve(&mut self, reindex: Option<usize>) {
        let (handlers, described) = &self.last;
        let groups = resolving::by_resource(handlers, &self.resolved);
        let keys: Vec<ResourceKey> = groups.iter().map(|g| g.key.clone()).collect();
        let gone: Vec<ResourceKey> = self.running.keys().filter(|k| !keys.contains(k)).cloned().collect();
        for key in gone {
            let running = self.running.remove(&key).expect("a running key");
            let name = running.name.clone();
            self.shared.log.info(None, &format!("No handlers for '{name}' any more; it is not served now."));
            running.stop(&self.shared.log, &name).await;
        }
        let resolved = &self.resolved;
        let ignored_of = |key: &ResourceKey| -> Vec<Vec<String>> {
            described
                .iter()
                .flat_map(|d| &d.resources)
                .filter(|r| {
                    r.resource.as_ref().and_then(|sel| resolved.get(&discovery::normalize(sel))).map(resolving::key_of).as_ref()
                        == Some(key)
                })
                .flat_map(|r| r.ignored_fields.iter().map(|f| parse_path(f)))
                .collect()
        };
        let mut starts = Vec::new();
        for Group { key, resource, name, handlers: hs } in groups {
            let ignored = ignored_of(&key);
            let indexed_by = |server: usize| hs.iter().any(|h| h.kind == pb::HandlerKind::Index && h.server == server);
            let to_reindex = reindex.is_some_and(indexed_by);
            let same = |r: &Running| r.handlers == hs && r.ignored == ignored && r.resource == resource;
            if matches!(self.running.get(&key), Some(r) if same(r) && !to_reindex) {
                continue;
            }
            starts.push((key, resource, name, hs, ignored));
        }
        for (key, resource, name, hs, ignored) in starts {
            self.start(key, resource, name, hs, ignored).await;
        }
    }

    /// Serves one resource with `hs`, replacing the job that served it (its memory kept).
    async fn start(
        &mut self,
        key: ResourceKey,
        resource: ResolvedResource,
        name: String,
        hs: Vec<Arc<Handler>>,
        ignored: Vec<Vec<String>>,
    ) {
        // Taken before the job it replaces stops, so that the gate never opens between.
        let hold = hs.iter().any(|h| h.kind == pb::HandlerKind::Index).then(|| self.shared.gate.hold(&name));
        let (memory, before) = match self.running.remove(&key) {
            Some(r) => {
                let line = if r.handlers == hs && r.ignored == ignored && r.resource == resource {
                    format!("The index handlers of '{name}' lost their index; listing it again.")
                } else {
                    format!("The handlers of '{name}' changed; serving it anew.")
                };
                self.shared.log.info(None, &line);
                (r.memory.clone(), r.hand_over())
            }
            None => (Memory::default(), Vec::new()),
        };
        let (stop, stop_rx) = tokio::sync::watch::channel(false);
        let tasks = TaskTracker::new();
        let job = ResourceJob {
            resource: resource.clone(),
            handlers: hs.clone(),
            ignored: ignored.clone(),
            memory: memory.clone(),
            shared: self.shared.clone(),
            hold,
            tasks: tasks.clone(),
            stop: stop_rx,
        };
        spawn_after(&tasks, before.clone(), stop.subscribe(), self.shared.log.clone(), name.clone(), job.run());
        self.running.insert(key, Running { resource, name, handlers: hs, ignored, memory, stop, tasks, before });
    }

    /// Stops every resource, their cycles in flight finishing within [`GRACE`] together.
    pub(super) async fn stop_all(&mut self) {
        self.resolving.clear();
        let log = &self.shared.log;
        futures::future::join_all(self.running.drain().map(|(_, r)| async move {
            let name = r.name.clone();
            r.stop(log, &name).await
        }))
        .await;
    }
}

/// Spawns `job` on `tasks` once every job in `before` has ended, unless `stopped` flips first.
/// Never two cycles of one object, nor two instances of a daemon, in one process: a job that
/// replaces another begins once the old one's cycles and daemons have ended (a daemon is waited
/// for as at a handover: to its exit or its cancellation timeout).
fn spawn_after(
    tasks: &TaskTracker,
    before: Vec<TaskTracker>,
    mut stopped: tokio::sync::watch::Receiver<bool>,
    log: Logger,
    name: String,
    job: impl Future<Output = ()> + Send + 'static,
) {
    tasks.spawn(async move {
        tokio::select! {
            _ = predecessors_ended(&before, &log, &name) => job.await,
            _ = async { stopped.wait_for(|s| *s).await.is_ok() } => {}
        }
    });
}

/// Waits until every job in `before` has ended, saying once if that takes longer than
/// [`GRACE`].
async fn predecessors_ended(before: &[TaskTracker], log: &Logger, name: &str) {
    let all = futures::future::join_all(before.iter().map(TaskTracker::wait));
    tokio::pin!(all);
    if tokio::time::timeout(GRACE, &mut all).await.is_err() {
        log.warn(
            None,
            &format!("Cycles or daemons of '{name}' from before its handlers changed still run; serving it anew once they end."),
        );
        all.await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use tokio_util::task::TaskTracker;

    use super::spawn_after;
    use crate::logs::Logger;

    /// A job whose run marks `began`.
    fn job(began: &Arc<AtomicBool>) -> impl Future<Output = ()> + Send + 'static {
        let began = began.clone();
        async move { began.store(true, Ordering::SeqCst) }
    }

    /// A job that runs for `secs` on its own tracker, closed as a replaced job's is.
    fn old_job(secs: u64) -> TaskTracker {
        let t = TaskTracker::new();
        t.spawn(tokio::time::sleep(Duration::from_secs(secs)));
        t.close();
        t
    }

    /// A resource served anew (its handlers changed, its index lost) waits for the old job's
    /// cycles and daemons however long they take (before, it went on after 10 s, and a second
    /// cycle of an object or a second daemon instance ran beside the first); replaced twice, it
    /// waits for both; stopped meanwhile, it never begins.
    #[tokio::test(start_paused = true)]
    async fn a_job_that_replaces_others_begins_once_theirs_have_ended() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let log = Logger::new(Some(crate::LogSink(tx)));
        let (_stop, stopped) = tokio::sync::watch::channel(false);
        let began = Arc::new(AtomicBool::new(false));
        let tasks = TaskTracker::new();
        spawn_after(&tasks, vec![old_job(30), old_job(45)], stopped, log, "kex".into(), job(&began));
        tokio::time::sleep(Duration::from_secs(44)).await;
        assert!(!began.load(Ordering::SeqCst), "not while an old job runs");
        let mut lines = Vec::new();
        while let Ok(l) = rx.try_recv() {
            lines.push(l);
        }
        let said = lines.iter().filter(|l| l.contains("from before its handlers changed still run")).count();
        assert_eq!(said, 1, "said once, after 10 s: {lines:?}");
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(began.load(Ordering::SeqCst), "once both have ended");

        let (stop, stopped) = tokio::sync::watch::channel(false);
        let began = Arc::new(AtomicBool::new(false));
        let tasks = TaskTracker::new();
        spawn_after(&tasks, vec![old_job(30)], stopped, Logger::new(None), "kex".into(), job(&began));
        tokio::time::sleep(Duration::from_secs(5)).await;
        stop.send_replace(true);
        tasks.close();
        tasks.wait().await;
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!began.load(Ordering::SeqCst), "stopped before it began");
    }
}
