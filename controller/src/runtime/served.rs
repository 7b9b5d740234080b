//! The resources served: one job per resource as the API server names it, whatever the
//! spellings of its handlers (`resolving`), watched, its events routed to per-object workers;
//! started, replaced when its handlers change and stopped, each with the memory of its objects
//! kept across replacements; and the following of the authority's verdict (pause, leadership,
//! shards) for each.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{Semaphore, mpsc};
use tokio_util::task::TaskTracker;

use super::context::ResourceContext;
use super::daemons::GRACE;
use super::resolving::{self, Found, Group, Resolver, ResourceKey};
use super::worker::Router;
use super::{gate, indexing, namespaces, relist, spies};
use crate::Namespaces;
use crate::Settings;
use crate::cluster::watching::{self, Seen, WatchScope};
use crate::cluster::{Cluster, discovery};
use crate::coordination::Authority;
use crate::handlers::dispatch::Servers;
use crate::logs::Logger;
use crate::object;
use crate::state::essence::{EssenceRules, parse_path};
use crate::state::registry::{self, Handler};
use crate::state::storage::StorageKind;
use bosun_proto::v1 as pb;
use discovery::{Normalized, ResolvedResource};

/// What the controller remembers of one resource's objects while it serves it, kept when its
/// handlers change: which objects were seen (so a new registry fires no resume handlers) and
/// their memos.
#[derive(Clone, Default)]
struct Memory {
    seen: Arc<Mutex<HashSet<String>>>,
    memos: Arc<Mutex<HashMap<String, Vec<u8>>>>,
}

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
}

impl Running {
    /// Stops its watches, workers, timers and daemons, and waits for its cycles in flight.
    async fn stop(self, log: &Logger, name: &str) {
        let _ = self.stop.send(true);
        self.tasks.close();
        if tokio::time::timeout(GRACE, self.tasks.wait()).await.is_err() {
            log.warn(None, &format!("Some cycles of '{name}' did not finish within {GRACE:?}; going on without them."));
        }
    }
}

/// What every served resource shares.
#[derive(Clone)]
struct Shared {
    cluster: Cluster,
    /// Which objects are ours now.
    authority: Authority,
    servers: Servers,
    outages: Arc<crate::handlers::dispatch::Outages>,
    kinds: Arc<discovery::Kinds>,
    log: Logger,
    settings: Settings,
    /// Cycles in flight, across all resources.
    limit: Arc<Semaphore>,
    /// Open once every index is populated.
    gate: Arc<gate::IndexGate>,
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
        let memory = match self.running.remove(&key) {
            Some(r) => {
                let line = if r.handlers == hs && r.ignored == ignored && r.resource == resource {
                    format!("The index handlers of '{name}' lost their index; listing it again.")
                } else {
                    format!("The handlers of '{name}' changed; serving it anew.")
                };
                self.shared.log.info(None, &line);
                let memory = r.memory.clone();
                r.stop(&self.shared.log, &name).await;
                memory
            }
            None => Memory::default(),
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
        tasks.spawn(job.run());
        self.running.insert(key, Running { resource, name, handlers: hs, ignored, memory, stop, tasks });
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

/// Everything needed to serve one resource.
struct ResourceJob {
    resource: ResolvedResource,
    handlers: Vec<Arc<Handler>>,
    ignored: Vec<Vec<String>>,
    memory: Memory,
    shared: Shared,
    /// Keeps the other handlers waiting until this resource's index handlers saw its listing.
    hold: Option<gate::GateHold>,
    tasks: TaskTracker,
    stop: tokio::sync::watch::Receiver<bool>,
}

impl ResourceJob {
    async fn run(mut self) {
        let resource = self.resource.clone();
        let storage =
            crate::settings::from_servers::storage_for(&self.shared.settings, resource.has_status && resource.status_keeps_unknown);
        let extra: Vec<Vec<String>> =
            self.handlers.iter().filter_map(|h| h.field.clone()).filter(|f| f.first().map(String::as_str) == Some("status")).collect();
        let mut own_prefixes = vec![format!("{}/", storage.prefix)];
        if !own_prefixes.contains(&"kopf.zalando.org/".to_string()) {
            own_prefixes.push("kopf.zalando.org/".into());
        }
        let place = |kind: StorageKind| match kind {
            StorageKind::Status => format!("status.{}", storage.status_stanza()),
            StorageKind::Annotations => "annotations".to_string(),
        };
        self.shared.log.info(
            None,
            &format!(
                "Serving {} with {} handler(s); progress in {}, the diffbase in {}.",
                resource.display(),
                self.handlers.len(),
                place(storage.kind),
                place(storage.diffbase_kind),
            ),
        );
        if !resource.status_keeps_unknown {
            self.shared.log.info(
                None,
                &format!(
                    "The status of {} keeps no unknown fields: handler results go to annotations {}.",
                    resource.display(),
                    crate::state::plan::result_annotation(&storage.prefix, "<id>")
                ),
            );
        }
        let of = |kind: pb::HandlerKind| self.handlers.iter().filter(|h| h.kind == kind).cloned().collect::<Vec<_>>();
        let (spies, indexers) = (of(pb::HandlerKind::Event), of(pb::HandlerKind::Index));
        let changing: Vec<Arc<Handler>> =
            self.handlers.iter().filter(|h| !matches!(h.kind, pb::HandlerKind::Event | pb::HandlerKind::Index)).cloned().collect();
        let selector = registry::common_label_selector(&self.handlers.iter().map(|h| h.as_ref()).collect::<Vec<_>>());
        if let Some(sel) = &selector {
            self.shared
                .log
                .info(None, &format!("Watching {} with the label selector {sel}, which all its handlers share.", resource.display()));
        }
        let ctx = Arc::new(ResourceContext {
            resource: resource.clone(),
            handlers: changing,
            spies,
            indexers,
            gate: self.shared.gate.clone(),
            storage,
            rules: EssenceRules { own_prefixes, extra_fields: extra, ignored_fields: self.ignored.clone() },
            api: Arc::new(self.shared.cluster.clone()),
            servers: self.shared.servers.clone(),
            outages: self.shared.outages.clone(),
            kinds: self.shared.kinds.clone(),
            log: self.shared.log.clone(),
            posting: self.shared.settings.posting,
            poster: crate::cluster::posting::Poster::start(Arc::new(self.shared.cluster.clone()), self.shared.log.clone(), &self.tasks),
            authority: self.shared.authority.clone(),
            selector_pushed: selector.is_some(),
            seen: self.memory.seen.clone(),
            memos: self.memory.memos.clone(),
            tasks: self.tasks.clone(),
            stop: self.stop.clone(),
            clock: self.shared.settings.clock,
        });
        let scopes: Vec<(Option<String>, Option<Vec<String>>)> = match (&self.shared.settings.namespaces, resource.namespaced) {
            (Namespaces::Patterns(p), true) if namespaces::plain_names(p) => p.iter().map(|ns| (Some(ns.clone()), None)).collect(),
            (Namespaces::Patterns(p), true) => vec![(None, Some(p.clone()))],
            _ => vec![(None, None)],
        };
        let spies = spies::Spies::new(ctx.clone(), self.tasks.clone(), self.stop.clone());
        let indexer = indexing::Indexer::new(ctx.clone(), scopes.len(), self.hold.take(), self.tasks.clone(), self.stop.clone());
        let router = Router::new(ctx, self.shared.limit.clone(), self.tasks.clone(), self.stop.clone());
        // Objects seen and owned, counted when scraped, for as long as the resource is served.
        let _counted = {
            let (seen, authority) = (self.memory.seen.clone(), self.shared.authority.clone());
            let resource = resource.metrics_label();
            crate::metrics::global().on_scrape(move |m| {
                let seen = seen.lock();
                let owned = seen.iter().filter(|uid| authority.owns(uid)).count();
                let labels = |state| crate::metrics::ObjectLabels { resource: resource.clone(), state };
                m.objects.get_or_create(&labels("seen")).set(seen.len() as i64);
                m.objects.get_or_create(&labels("owned")).set(owned as i64);
            })
        };
        let mut watchers = Vec::new();
        let watch_scopes: Vec<(WatchScope, Option<Vec<String>>)> = scopes
            .into_iter()
            .map(|(namespace, patterns)| {
                let scope =
                    WatchScope { namespace, label_selector: selector.clone(), inactivity_timeout: self.shared.settings.inactivity_timeout };
                (scope, patterns)
            })
            .collect();
        self.tasks.spawn(follow_authority(self.shared.clone(), resource.clone(), watch_scopes.clone(), router.clone(), self.stop.clone()));
        for (scope, patterns) in watch_scopes {
            let router = router.clone();
            let spies = spies.clone();
            let indexer = indexer.clone();
            let listed = indexer.clone();
            let listing = crate::metrics::global().watch_listing();
            let authority = self.shared.authority.clone();
            let fut = watching::watch(
                self.shared.cluster.clone(),
                resource.clone(),
                scope,
                self.shared.log.clone(),
                self.stop.clone(),
                {
                    let resource = resource.clone();
                    move |seen: Seen| {
                        let Some(seen) = in_scope(seen, &resource, patterns.as_deref()) else { return };
                        // Index handlers see every object (their index serves all); spies and
                        // the other handlers only the objects that are ours now.
                        indexer.observe(&seen);
                        spies.observe(&seen, authority.owns(object::meta_str(seen.body(), "uid")));
                        router.deliver(seen)
                    }
                },
                move || {
                    listed.listed();
                    listing.listed();
                },
            );
            watchers.push(tokio::spawn(fut));
        }
        for w in watchers {
            let _ = w.await;
        }
    }
}

/// Follows the authority's verdict for one resource: stops the timers and daemons of objects
/// no longer ours, and lists the resource again when objects may have become ours (resumed
/// after a pause, leadership won, a shard grown), retried until it succeeds (`relist`), so
/// that they get their cycle, timers and daemons; the watches themselves never stopped.
async fn follow_authority(
    shared: Shared,
    resource: discovery::ResolvedResource,
    scopes: Vec<(WatchScope, Option<Vec<String>>)>,
    router: Router,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    let authority = shared.authority.clone();
    let on_change = {
        let (router, log, what, clock) = (router.clone(), shared.log.clone(), resource.display(), shared.settings.clock);
        move || {
            let stopped = router.background().stop_unowned(&authority, clock.now());
            if stopped > 0 {
                log.info(None, &format!("Stopped the timers and daemons of {stopped} object(s) of {what} that are not ours now."));
            }
        }
    };
    let (cluster, scopes_, resource_) = (&shared.cluster, &scopes, &resource);
    let list: relist::ListScope<'_> = Box::new(move |i| {
        let router = router.clone();
        Box::pin(async move {
            let (scope, patterns) = &scopes_[i];
            let listed = watching::list_all(cluster, resource_, scope, |seen| {
                if let Some(seen) = in_scope(seen, resource_, patterns.as_deref()) {
                    router.deliver(seen);
                }
            })
            .await;
            if listed.is_ok() {
                let labels = crate::metrics::WatchLabels { resource: resource_.metrics_label(), reason: "ownership" };
                crate::metrics::global().relists.get_or_create(&labels).inc();
            }
            listed.map_err(|e| e.to_string())
        })
    });
    let what = resource.display().to_string();
    relist::follow(shared.authority.clone(), scopes.len(), what, shared.log.clone(), stop, on_change, list).await;
}

/// What a watch or a listing of one scope delivers: the object with its apiVersion and kind,
/// unless its namespace is one the namespace patterns (a scope watching all of them for
/// globs or negations) do not serve.
fn in_scope(seen: Seen, resource: &discovery::ResolvedResource, patterns: Option<&[String]>) -> Option<Seen> {
    let served = patterns.is_none_or(|p| namespaces::serves(p, object::meta_str(seen.body(), "namespace")));
    served.then(|| with_type_meta(seen, resource))
}

/// List items of built-ins come without apiVersion and kind; handlers expect them.
fn with_type_meta(seen: Seen, r: &discovery::ResolvedResource) -> Seen {
    seen.map(|mut b| {
        if let Some(o) = b.as_object_mut() {
            o.entry("apiVersion").or_insert_with(|| r.api_version().into());
            o.entry("kind").or_insert_with(|| r.kind.clone().into());
        }
        b
    })
}
