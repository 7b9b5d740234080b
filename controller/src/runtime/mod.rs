//! The orchestration: connect to the handler servers, learn their handlers, resolve and
//! watch each resource (independently: a missing CRD holds up nobody else), route events
//! to per-object workers, and stop gracefully.

pub mod activities;
pub mod background;
pub mod context;
pub mod cycle;
pub mod daemons;
pub mod indexing;
pub mod namespaces;
pub mod owned;
pub mod queues;
pub mod servers;
pub mod spies;
pub mod timers;
pub mod worker;
pub mod writes;

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Semaphore;
use tokio_util::task::TaskTracker;

use crate::cluster::watching::{self, Seen, WatchScope};
use crate::cluster::{Cluster, discovery};
use crate::coordination::{Authority, Coordinator, Ownership, Replicas, identity, peering};
use crate::engines::admission::Admission;
use crate::engines::dispatch::{HandlerClient, Server, Servers};
use crate::logs::Logger;
use crate::object;
use crate::state::essence::{EssenceRules, parse_path};
use crate::state::registry::{self, Handler};
use crate::state::storage::StorageKind;
use crate::{Error, Namespaces, Settings};
use bosun_proto::v1 as pb;
use context::{Clock, ResourceContext};
use worker::Router;

/// How long in-flight cycles get to finish after a stop is requested.
const GRACE: Duration = Duration::from_secs(10);

/// Runs the controller until `shutdown` resolves.
pub async fn run(client: kube::Client, mut settings: Settings, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<(), Error> {
    let log = Logger::new(settings.log_sink.clone());
    if settings.handlers.is_empty() {
        return Err(Error::NoHandlers);
    }
    // Served from the start: /healthz answers while the handler servers are awaited, /readyz
    // once every watch has listed.
    // `_metrics_stop` is dropped when `run` returns: the endpoint stops then.
    let (_metrics_stop, metrics_stopped) = tokio::sync::oneshot::channel::<()>();
    if let Some(addr) = &settings.metrics_listen {
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(|error| Error::MetricsListen { addr: addr.clone(), error })?;
        let local = listener.local_addr().map(|a| a.to_string()).unwrap_or_else(|_| addr.clone());
        log.info(None, &format!("Serving metrics at http://{local}/metrics (and /healthz, /readyz)."));
        tokio::spawn(crate::metrics::serve(listener, async move {
            let _ = metrics_stopped.await;
        }));
    }
    crate::metrics::global().set_ready(false);
    let servers: Vec<Arc<Server>> = settings.handlers.iter().map(|a| Server::new(a).map(Arc::new)).collect::<Result<_, _>>()?;
    let mut shutdown = Box::pin(shutdown);

    // Wait for every handler server, then ask each for its handlers.
    let ready = futures::future::join_all(servers.iter().map(|s| s.wait_ready(&log)));
    tokio::select! {
        _ = ready => {}
        _ = &mut shutdown => return Ok(()),
    }
    let mut described = Vec::new();
    for s in &servers {
        let d = s.describe().await?;
        log.info(None, &format!("Handler server {} registered {} handler(s).", s.addr, d.handlers.len()));
        described.push(d);
    }
    let mut handlers = registry::build(&described)?;
    let clients: Servers = Arc::new(servers.iter().map(|s| s.clone() as Arc<dyn HandlerClient>).collect());
    let startups = of_kind(&handlers, pb::HandlerKind::Startup);
    let probes = of_kind(&handlers, pb::HandlerKind::Probe);
    let mut cleanups = of_kind(&handlers, pb::HandlerKind::Cleanup);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    if let Some(url) = &settings.liveness {
        let (addr, path) = crate::engines::liveness::parse_url(url)?;
        let listener = tokio::net::TcpListener::bind(&addr).await.map_err(|error| Error::LivenessListen { addr: addr.clone(), error })?;
        let mut stopped = stop_rx.clone();
        let until = async move {
            let _ = stopped.wait_for(|s| *s).await;
        };
        log.info(None, &format!("Serving the liveness endpoint at {url} with {} probe(s).", probes.len()));
        tokio::spawn(crate::engines::liveness::serve(listener, path, probes, clients.clone(), until));
    }
    let startup_refs: Vec<&Handler> = startups.iter().collect();
    let chosen = tokio::select! {
        r = activities::startup(&startup_refs, &clients, &log) => r?,
        _ = &mut shutdown => return Ok(()),
    };
    // What the servers hold (in order) and the startup handlers set (theirs win) applies before
    // anything peers, serves or watches.
    let held = servers::held_settings(&settings.handlers, &described);
    let mut sources: Vec<(&str, &pb::OperatorSettings)> = held.iter().map(|(from, s)| (from.as_str(), s)).collect();
    sources.push((crate::settings::STARTUP, &chosen));
    log.lines(None, &crate::settings::apply(&mut settings, &sources));

    // Who handles what: settled before the first watch, so nothing is handled that is not ours.
    let cluster = Cluster::new(client);
    let authority = Authority::new(match settings.replicas {
        Replicas::Each => Ownership::All,
        _ => Ownership::Nothing,
    });
    let identity = settings.identity.clone().unwrap_or_else(|| identity::detect(false));
    let peering = (!settings.standalone).then(|| {
        let family = if settings.kopf_compat { peering::Family::Kopf } else { peering::Family::Bosun };
        (&settings.peering, family, peering_scopes(&settings.namespaces))
    });
    let coordinator = tokio::select! {
        c = Coordinator::start(&cluster, &identity, peering, &settings.replicas, &authority, &log) => c.map_err(Box::new)?,
        _ = &mut shutdown => return Ok(()),
    };

    let outages = Arc::new(crate::engines::dispatch::Outages::default());
    let (described_tx, mut described_rx) = tokio::sync::mpsc::unbounded_channel();
    for (index, server) in servers.iter().enumerate() {
        let monitor =
            servers::Monitor { index, server: server.clone(), outages: outages.clone(), log: log.clone(), described: described_tx.clone() };
        tokio::spawn(monitor.run(stop_rx.clone()));
    }
    // Admission webhooks: served (and configured) from when the first admission handler is
    // registered, or from the start with an explicit listen address.
    let mut admission = None;
    if settings.admission.listen.is_some() || handlers.iter().any(Handler::is_admission) {
        let started = tokio::select! {
            a = start_admission(&cluster, &settings, &clients, &log, &stop_rx) => a?,
            _ = &mut shutdown => return Ok(()),
        };
        started.apply(&handlers).await;
        admission = Some(started);
    }
    let mut served = Served {
        running: HashMap::new(),
        shared: Shared {
            cluster,
            authority: authority.clone(),
            servers: clients.clone(),
            outages: outages.clone(),
            kinds: Arc::default(),
            log: log.clone(),
            settings: settings.clone(),
            limit: Arc::new(Semaphore::new(settings.max_workers.max(1))),
            gate: Arc::default(),
        },
    };
    served.apply(handlers.clone(), &described, None).await;
    crate::metrics::global().set_ready(true);

    // Until the stop: a handler server that reconnects is described again; a changed
    // registry is applied without a restart (only the resources whose handlers changed are
    // served anew). Its settings are not: they are said once to be applied at start only.
    let mut settings_noted = HashSet::new();
    loop {
        let again = tokio::select! {
            _ = &mut shutdown => break,
            d = described_rx.recv() => d,
        };
        let Some(servers::Described { server, response, was_lost }) = again else { break };
        let addr = &settings.handlers[server];
        if was_lost {
            log.info(None, &format!("Handler server {addr} is serving again."));
        }
        if described[server].settings != response.settings && settings_noted.insert(server) {
            log.warn(
                None,
                &format!("Handler server {addr} holds other settings now; settings are applied at start only, so they are not."),
            );
        }
        // Its indices are in its memory: a server that comes back lost them.
        let reindex = response.handlers.iter().any(|h| h.kind == pb::HandlerKind::Index as i32).then_some(server);
        if servers::same_handlers(&described[server], &response) {
            log.info(None, &format!("Handler server {addr} has the same {} handler(s) as before.", response.handlers.len()));
            if reindex.is_some() {
                served.apply(handlers.clone(), &described, reindex).await;
            }
        } else {
            let mut next = described.clone();
            next[server] = response;
            match registry::build(&next) {
                Ok(built) => {
                    log.info(
                        None,
                        &format!(
                            "Handler server {addr} registered {} handler(s) now; applying the new registry.",
                            next[server].handlers.len()
                        ),
                    );
                    cleanups = of_kind(&built, pb::HandlerKind::Cleanup);
                    (handlers, described) = (built, next);
                    served.apply(handlers.clone(), &described, reindex).await;
                    if admission.is_none() && handlers.iter().any(Handler::is_admission) {
                        match start_admission(&served.shared.cluster, &settings, &clients, &log, &stop_rx).await {
                            Ok(started) => admission = Some(started),
                            Err(e) => log.error(None, &format!("The admission handlers are not served: {e}")),
                        }
                    }
                    if let Some(admission) = &admission {
                        admission.apply(&handlers).await;
                    }
                }
                Err(e) => log.error(None, &format!("The new handlers of handler server {addr} are refused: {e}; the previous ones stay.")),
            }
        }
        // Only now, with its handlers in place, do the objects that waited for it go on.
        if let Some(n) = outages.up(addr)
            && n > 0
        {
            log.info(None, &format!("{n} object(s) waited for handler server {addr}; they go on now."));
        }
    }

    log.info(None, "Stop is requested; finishing the cycles in flight.");
    let _ = stop_tx.send(true);
    served.stop_all().await;
    if let Some(admission) = &admission {
        admission.stop().await;
    }
    coordinator.stop().await;
    activities::cleanup(&cleanups.iter().collect::<Vec<_>>(), &clients, &log).await;
    log.info(None, "The controller has stopped.");
    Ok(())
}

/// Starts serving the admission webhooks. Replicas that share objects run side by side: with
/// a self-signed certificate each would make a CA of its own and publish it over the others'
/// in the same configurations, which is said.
async fn start_admission(
    cluster: &Cluster,
    settings: &Settings,
    servers: &Servers,
    log: &Logger,
    stop: &tokio::sync::watch::Receiver<bool>,
) -> Result<Arc<Admission>, crate::engines::webhooks::Error> {
    let started = Admission::start(cluster.clone(), settings.admission.clone(), servers.clone(), log.clone(), stop.clone()).await?;
    let shared = !matches!(settings.replicas, Replicas::Each);
    if shared && settings.admission.manage && settings.admission.certificate == crate::engines::webhooks::Certificate::SelfSigned {
        log.warn(
            None,
            "Each replica makes a CA of its own for the admission webhooks, and they overwrite each other's caBundle: with more than one replica give --admission-cert and --admission-key (cert-manager's Secret).",
        );
    }
    Ok(started)
}

/// Where peering objects are: one per namespace when only plain namespaces are served (Kopf's
/// `KopfPeering`), else one cluster-wide (`ClusterKopfPeering`).
fn peering_scopes(namespaces: &Namespaces) -> Vec<Option<String>> {
    match namespaces {
        Namespaces::Patterns(p) if namespaces::plain_names(p) => p.iter().map(|ns| Some(ns.clone())).collect(),
        _ => vec![None],
    }
}

/// The handlers of one kind, in registration order.
fn of_kind(handlers: &[Handler], kind: pb::HandlerKind) -> Vec<Handler> {
    handlers.iter().filter(|h| h.kind == kind).cloned().collect()
}

/// A resource's handlers, grouped by selector in registration order. Activities and
/// admission handlers (served by `engines::admission`, not by watching) are not among them.
fn resource_groups(handlers: Vec<Handler>) -> Vec<(pb::ResourceSelector, Vec<Arc<Handler>>)> {
    let mut groups: Vec<(pb::ResourceSelector, Vec<Arc<Handler>>)> = Vec::new();
    for h in handlers.into_iter().filter(|h| !h.is_activity() && !h.is_admission()) {
        let key = discovery::normalize(&h.resource);
        match groups.iter_mut().find(|(sel, _)| discovery::normalize(sel) == key) {
            Some((_, list)) => list.push(Arc::new(h)),
            None => groups.push((h.resource.clone(), vec![Arc::new(h)])),
        }
    }
    groups
}

type ResourceKey = discovery::Normalized;

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
    outages: Arc<crate::engines::dispatch::Outages>,
    kinds: Arc<discovery::Kinds>,
    log: Logger,
    settings: Settings,
    /// Cycles in flight, across all resources.
    limit: Arc<Semaphore>,
    /// Open once every index is populated.
    gate: Arc<indexing::IndexGate>,
}

/// The resources served, by selector.
struct Served {
    running: HashMap<ResourceKey, Running>,
    shared: Shared,
}

impl Served {
    /// Serves what `handlers` need: resources no longer handled stop, resources whose handlers
    /// changed are served anew (their memory kept), new resources start; so are the resources
    /// with index handlers of server `reindex`, whose indices must be filled again.
    async fn apply(&mut self, handlers: Vec<Handler>, described: &[pb::DescribeResponse], reindex: Option<usize>) {
        let admits = handlers.iter().any(Handler::is_admission);
        let groups = resource_groups(handlers);
        if groups.is_empty() && !admits {
            self.shared.log.warn(None, "No resource handlers are registered; nothing to watch.");
        }
        let keys: Vec<ResourceKey> = groups.iter().map(|(sel, _)| discovery::normalize(sel)).collect();
        let gone: Vec<ResourceKey> = self.running.keys().filter(|k| !keys.contains(k)).cloned().collect();
        for key in gone {
            let running = self.running.remove(&key).expect("a running key");
            self.shared.log.info(None, &format!("No handlers for '{}' any more; it is not served now.", key.2));
            running.stop(&self.shared.log, &key.2).await;
        }
        for ((selector, hs), key) in groups.into_iter().zip(keys) {
            let ignored: Vec<Vec<String>> = described
                .iter()
                .flat_map(|d| &d.resources)
                .filter(|r| r.resource.as_ref().map(discovery::normalize).as_ref() == Some(&key))
                .flat_map(|r| r.ignored_fields.iter().map(|f| parse_path(f)))
                .collect();
            let indexed_by = |server: usize| hs.iter().any(|h| h.kind == pb::HandlerKind::Index && h.server == server);
            let to_reindex = reindex.is_some_and(indexed_by);
            if matches!(self.running.get(&key), Some(r) if r.handlers == hs && r.ignored == ignored && !to_reindex) {
                continue;
            }
            // Taken before the job it replaces stops, so that the gate never opens between.
            let hold = hs.iter().any(|h| h.kind == pb::HandlerKind::Index).then(|| self.shared.gate.hold(&key.2));
            let memory = match self.running.remove(&key) {
                Some(r) => {
                    let name = &key.2;
                    let line = if r.handlers == hs && r.ignored == ignored {
                        format!("The index handlers of '{name}' lost their index; listing it again.")
                    } else {
                        format!("The handlers of '{name}' changed; serving it anew.")
                    };
                    self.shared.log.info(None, &line);
                    let memory = r.memory.clone();
                    r.stop(&self.shared.log, &key.2).await;
                    memory
                }
                None => Memory::default(),
            };
            let (stop, stop_rx) = tokio::sync::watch::channel(false);
            let tasks = TaskTracker::new();
            let job = ResourceJob {
                selector,
                handlers: hs.clone(),
                ignored: ignored.clone(),
                memory: memory.clone(),
                shared: self.shared.clone(),
                hold,
                tasks: tasks.clone(),
                stop: stop_rx,
            };
            tasks.spawn(job.run());
            self.running.insert(key, Running { handlers: hs, ignored, memory, stop, tasks });
        }
    }

    /// Stops every resource, their cycles in flight finishing within [`GRACE`] together.
    async fn stop_all(&mut self) {
        let log = &self.shared.log;
        futures::future::join_all(self.running.drain().map(|(key, r)| async move { r.stop(log, &key.2).await })).await;
    }
}

/// Everything needed to serve one resource.
struct ResourceJob {
    selector: pb::ResourceSelector,
    handlers: Vec<Arc<Handler>>,
    ignored: Vec<Vec<String>>,
    memory: Memory,
    shared: Shared,
    /// Keeps the other handlers waiting until this resource's index handlers saw its listing.
    hold: Option<indexing::GateHold>,
    tasks: TaskTracker,
    stop: tokio::sync::watch::Receiver<bool>,
}

impl ResourceJob {
    async fn run(mut self) {
        let mut stop = self.stop.clone();
        let name = &self.selector.name;
        let mut delay = Duration::from_secs(1);
        let resource = loop {
            let attempt = tokio::select! {
                _ = stop.changed() => return,
                r = discovery::resolve(&self.shared.cluster, &self.selector) => r,
            };
            if !matches!(attempt, Ok(Some(_))) && self.hold.take().is_some() {
                self.shared
                    .log
                    .warn(None, &format!("The other handlers do not wait for the index of '{name}', which cannot be listed now."));
            }
            match attempt {
                Ok(Some(r)) => break r,
                Ok(None) => {
                    self.shared.log.warn(None, &format!("Resource '{name}' is not served by the API server (yet); retrying in {delay:?}."))
                }
                Err(e) => self.shared.log.warn(None, &format!("Resource '{name}' could not be resolved: {e}; retrying in {delay:?}.")),
            }
            tokio::select! {
                _ = stop.changed() => return,
                _ = tokio::time::sleep(delay) => {}
            }
            delay = (delay * 2).min(Duration::from_secs(30));
        };
        let storage = crate::settings::storage_for(&self.shared.settings, resource.has_status && resource.status_keeps_unknown);
        let extra: Vec<Vec<String>> =
            self.handlers.iter().filter_map(|h| h.field.clone()).filter(|f| f.first().map(String::as_str) == Some("status")).collect();
        let mut own_prefixes = vec![format!("{}/", storage.prefix)];
        if !own_prefixes.contains(&"kopf.zalando.org/".to_string()) {
            own_prefixes.push("kopf.zalando.org/".into());
        }
        self.shared.log.info(
            None,
            &format!(
                "Serving {} with {} handler(s); state in {}.",
                resource.display(),
                self.handlers.len(),
                match storage.kind {
                    StorageKind::Status => format!("status.{}", storage.status_stanza()),
                    StorageKind::Annotations => "annotations".into(),
                }
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
            poster: crate::engines::posting::Poster::start(Arc::new(self.shared.cluster.clone()), self.shared.log.clone(), &self.tasks),
            authority: self.shared.authority.clone(),
            selector_pushed: selector.is_some(),
            seen: self.memory.seen.clone(),
            memos: self.memory.memos.clone(),
            tasks: self.tasks.clone(),
            stop: self.stop.clone(),
            clock: Clock::Wall,
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
                        if authority.owns(object::meta_str(seen.body(), "uid")) {
                            spies.observe(&seen);
                        }
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
/// after a pause, leadership won, a shard grown), so that they get their cycle, timers and
/// daemons; the watches themselves never stopped.
async fn follow_authority(
    shared: Shared,
    resource: discovery::ResolvedResource,
    scopes: Vec<(WatchScope, Option<Vec<String>>)>,
    router: Router,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let authority = shared.authority.clone();
    let mut changes = authority.subscribe();
    let mut gained = changes.borrow_and_update().gained;
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            r = changes.changed() => if r.is_err() { return },
        }
        let now = *changes.borrow_and_update();
        let stopped = router.background().stop_unowned(&authority);
        if stopped > 0 {
            shared.log.info(
                None,
                &format!("Stopped the timers and daemons of {stopped} object(s) of {} that are not ours now.", resource.display()),
            );
        }
        if now.gained == gained {
            continue;
        }
        gained = now.gained;
        for (scope, patterns) in &scopes {
            let listing = watching::list_all(&shared.cluster, &resource, scope, |seen| {
                if let Some(seen) = in_scope(seen, &resource, patterns.as_deref()) {
                    router.deliver(seen);
                }
            });
            let listed = tokio::select! {
                _ = stop.changed() => return,
                r = listing => r,
            };
            if listed.is_ok() {
                let labels = crate::metrics::WatchLabels { resource: resource.metrics_label(), reason: "ownership" };
                crate::metrics::global().relists.get_or_create(&labels).inc();
            }
            match listed {
                Ok(n) => shared
                    .log
                    .info(None, &format!("Listed {n} object(s) of {} again: those that are ours now are handled.", resource.display())),
                Err(e) => shared.log.warn(
                    None,
                    &format!("Could not list {} again: {e}; objects that became ours wait for their next change.", resource.display()),
                ),
            }
        }
    }
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

#[cfg(test)]
mod tests;
