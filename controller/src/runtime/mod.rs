//! The orchestration: connect to the handler servers, learn their handlers, resolve and
//! watch each resource (independently: a missing CRD holds up nobody else), route events
//! to per-object workers, and stop gracefully.

pub mod activities;
pub mod background;
pub mod context;
pub mod cycle;
pub mod daemons;
pub mod namespaces;
pub mod owned;
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
use crate::engines::dispatch::{HandlerClient, Server, Servers};
use crate::logs::Logger;
use crate::state::essence::{EssenceRules, parse_path};
use crate::state::registry::{self, Handler};
use crate::state::storage::{Storage, StorageKind};
use crate::{Error, Namespaces, Settings, StorageMode};
use bosun_proto::v1 as pb;
use context::{Clock, ResourceContext};
use worker::Router;

/// How long in-flight cycles get to finish after a stop is requested.
const GRACE: Duration = Duration::from_secs(10);

/// Runs the controller until `shutdown` resolves.
pub async fn run(client: kube::Client, settings: Settings, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<(), Error> {
    let log = Logger::new(settings.log_sink.clone());
    if settings.handlers.is_empty() {
        return Err(Error::NoHandlers);
    }
    let servers: Vec<Server> = settings.handlers.iter().map(|a| Server::new(a)).collect::<Result<_, _>>()?;
    let mut shutdown = Box::pin(shutdown);

    // Wait for every handler server, then ask each for its handlers.
    let ready = futures::future::join_all(servers.iter().map(|s| s.wait_ready(&log)));
    tokio::select! {
        _ = ready => {}
        _ = &mut shutdown => return Ok(()),
    }
    let mut described = Vec::new();
    let mut settings_of: Vec<pb::ResourceSettings> = Vec::new();
    for s in &servers {
        let d = s.describe().await?;
        log.info(None, &format!("Handler server {} registered {} handler(s).", s.addr, d.handlers.len()));
        settings_of.extend(d.resources.clone());
        described.push(d.handlers);
    }
    let handlers = registry::build(&described)?;
    let servers: Servers = Arc::new(servers.into_iter().map(|s| Arc::new(s) as Arc<dyn HandlerClient>).collect());
    let of_kind = |k: pb::HandlerKind| handlers.iter().filter(|h| h.kind == k).cloned().collect::<Vec<_>>();
    let (startups, cleanups) = (of_kind(pb::HandlerKind::Startup), of_kind(pb::HandlerKind::Cleanup));
    let probes = of_kind(pb::HandlerKind::Probe);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    if let Some(url) = &settings.liveness {
        let (addr, path) = crate::engines::liveness::parse_url(url).map_err(Error::Liveness)?;
        let listener = tokio::net::TcpListener::bind(&addr).await.map_err(|e| Error::Liveness(format!("{addr}: {e}")))?;
        let mut stopped = stop_rx.clone();
        let until = async move {
            let _ = stopped.wait_for(|s| *s).await;
        };
        log.info(None, &format!("Serving the liveness endpoint at {url} with {} probe(s).", probes.len()));
        tokio::spawn(crate::engines::liveness::serve(listener, path, probes, servers.clone(), until));
    }
    let startup_refs: Vec<&Handler> = startups.iter().collect();
    tokio::select! {
        r = activities::startup(&startup_refs, &servers, &log) => r?,
        _ = &mut shutdown => return Ok(()),
    }

    // Group resource handlers by their selector, keeping registration order.
    let mut groups: Vec<(pb::ResourceSelector, Vec<Arc<Handler>>)> = Vec::new();
    for h in
        handlers.into_iter().filter(|h| !matches!(h.kind, pb::HandlerKind::Startup | pb::HandlerKind::Cleanup | pb::HandlerKind::Probe))
    {
        if matches!(h.kind, pb::HandlerKind::Validate | pb::HandlerKind::Mutate) {
            log.warn(None, &format!("Handler '{}' is of a kind this controller does not run yet ({:?}); it is ignored.", h.id, h.kind));
            continue;
        }
        let key = discovery::normalize(&h.resource);
        match groups.iter_mut().find(|(sel, _)| discovery::normalize(sel) == key) {
            Some((_, list)) => list.push(Arc::new(h)),
            None => groups.push((h.resource.clone(), vec![Arc::new(h)])),
        }
    }
    if groups.is_empty() {
        log.warn(None, "No resource handlers are registered; nothing to watch.");
    }

    let cluster = Cluster::new(client);
    let outages = Arc::new(crate::engines::dispatch::Outages::default());
    let limit = Arc::new(Semaphore::new(settings.max_workers.max(1)));
    let tasks = TaskTracker::new();
    for (selector, hs) in groups {
        let ignored: Vec<Vec<String>> = settings_of
            .iter()
            .filter(|r| r.resource.as_ref().map(discovery::normalize) == Some(discovery::normalize(&selector)))
            .flat_map(|r| r.ignored_fields.iter().map(|f| parse_path(f)))
            .collect();
        let job = ResourceJob {
            selector,
            handlers: hs,
            ignored,
            cluster: cluster.clone(),
            servers: servers.clone(),
            outages: outages.clone(),
            log: log.clone(),
            settings: settings.clone(),
            limit: limit.clone(),
            tasks: tasks.clone(),
            stop: stop_rx.clone(),
        };
        tasks.spawn(job.run());
    }

    shutdown.await;
    log.info(None, "Stop is requested; finishing the cycles in flight.");
    let _ = stop_tx.send(true);
    tasks.close();
    if tokio::time::timeout(GRACE, tasks.wait()).await.is_err() {
        log.warn(None, &format!("Some cycles did not finish within {GRACE:?}; exiting anyway."));
    }
    activities::cleanup(&cleanups.iter().collect::<Vec<_>>(), &servers, &log).await;
    log.info(None, "The controller has stopped.");
    Ok(())
}

/// Everything needed to serve one resource.
struct ResourceJob {
    selector: pb::ResourceSelector,
    handlers: Vec<Arc<Handler>>,
    ignored: Vec<Vec<String>>,
    cluster: Cluster,
    servers: Servers,
    outages: Arc<crate::engines::dispatch::Outages>,
    log: Logger,
    settings: Settings,
    limit: Arc<Semaphore>,
    tasks: TaskTracker,
    stop: tokio::sync::watch::Receiver<bool>,
}

impl ResourceJob {
    async fn run(self) {
        let mut stop = self.stop.clone();
        let name = &self.selector.name;
        let mut delay = Duration::from_secs(1);
        let resource = loop {
            let attempt = tokio::select! {
                _ = stop.changed() => return,
                r = discovery::resolve(&self.cluster, &self.selector) => r,
            };
            match attempt {
                Ok(Some(r)) => break r,
                Ok(None) => {
                    self.log.warn(None, &format!("Resource '{name}' is not served by the API server (yet); retrying in {delay:?}."))
                }
                Err(e) => self.log.warn(None, &format!("Resource '{name}' could not be resolved: {e}; retrying in {delay:?}.")),
            }
            tokio::select! {
                _ = stop.changed() => return,
                _ = tokio::time::sleep(delay) => {}
            }
            delay = (delay * 2).min(Duration::from_secs(30));
        };
        let storage = if self.settings.kopf_compat {
            Storage::kopf()
        } else {
            let in_status = resource.has_status && resource.status_keeps_unknown && self.settings.storage != StorageMode::Annotations;
            Storage::bosun(&self.settings.prefix, if in_status { StorageKind::Status } else { StorageKind::Annotations })
        };
        let extra: Vec<Vec<String>> =
            self.handlers.iter().filter_map(|h| h.field.clone()).filter(|f| f.first().map(String::as_str) == Some("status")).collect();
        let mut own_prefixes = vec![format!("{}/", storage.prefix)];
        if !own_prefixes.contains(&"kopf.zalando.org/".to_string()) {
            own_prefixes.push("kopf.zalando.org/".into());
        }
        self.log.info(
            None,
            &format!(
                "Serving {} with {} handler(s); state in {}.",
                resource.display(),
                self.handlers.len(),
                match storage.kind {
                    StorageKind::Status => format!("status.{}", storage.prefix),
                    StorageKind::Annotations => "annotations".into(),
                }
            ),
        );
        if !resource.status_keeps_unknown {
            self.log.info(
                None,
                &format!(
                    "The status of {} keeps no unknown fields: handler results go to annotations {}.",
                    resource.display(),
                    crate::state::plan::result_annotation(&storage.prefix, "<id>")
                ),
            );
        }
        let (spies, changing): (Vec<Arc<Handler>>, Vec<Arc<Handler>>) =
            self.handlers.iter().cloned().partition(|h| h.kind == pb::HandlerKind::Event);
        let selector = registry::common_label_selector(&self.handlers.iter().map(|h| h.as_ref()).collect::<Vec<_>>());
        if let Some(sel) = &selector {
            self.log.info(None, &format!("Watching {} with the label selector {sel}, which all its handlers share.", resource.display()));
        }
        let ctx = Arc::new(ResourceContext {
            resource: resource.clone(),
            handlers: changing,
            spies,
            storage,
            rules: EssenceRules { own_prefixes, extra_fields: extra, ignored_fields: self.ignored.clone() },
            api: Arc::new(self.cluster.clone()),
            servers: self.servers.clone(),
            outages: self.outages.clone(),
            log: self.log.clone(),
            selector_pushed: selector.is_some(),
            seen: Mutex::new(HashSet::new()),
            memos: Mutex::new(HashMap::new()),
            tasks: self.tasks.clone(),
            stop: self.stop.clone(),
            clock: Clock::Wall,
        });
        let spies = spies::Spies::new(ctx.clone(), self.tasks.clone(), self.stop.clone());
        let router = Router::new(ctx, self.limit.clone(), self.tasks.clone(), self.stop.clone());
        let scopes: Vec<(Option<String>, Option<Vec<String>>)> = match (&self.settings.namespaces, resource.namespaced) {
            (Namespaces::Patterns(p), true) if namespaces::plain_names(p) => p.iter().map(|ns| (Some(ns.clone()), None)).collect(),
            (Namespaces::Patterns(p), true) => vec![(None, Some(p.clone()))],
            _ => vec![(None, None)],
        };
        let mut watchers = Vec::new();
        for (namespace, patterns) in scopes {
            let router = router.clone();
            let spies = spies.clone();
            let scope = WatchScope { namespace, label_selector: selector.clone(), inactivity_timeout: self.settings.inactivity_timeout };
            let fut = watching::watch(self.cluster.clone(), resource.clone(), scope, self.log.clone(), self.stop.clone(), {
                let resource = resource.clone();
                move |seen: Seen| {
                    let seen = with_type_meta(seen, &resource);
                    if let Some(p) = &patterns
                        && !namespaces::serves(p, seen.body()["metadata"]["namespace"].as_str().unwrap_or(""))
                    {
                        return;
                    }
                    spies.observe(&seen);
                    router.deliver(seen)
                }
            });
            watchers.push(tokio::spawn(fut));
        }
        for w in watchers {
            let _ = w.await;
        }
    }
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
