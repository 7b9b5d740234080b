//! One resource's job, from the resource resolved to events routed: where its state is
//! stored, the context its cycles share, its watches (one per namespace scope) fanned out to
//! the index handlers, the spies and the per-object workers, and the following of the
//! authority's verdict (pause, leadership, shards) for it. `served.rs` starts, replaces and
//! stops these jobs.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Semaphore;
use tokio_util::task::TaskTracker;

use super::context::ResourceContext;
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
use crate::state::essence::EssenceRules;
use crate::state::registry::{self, Handler};
use crate::state::storage::StorageKind;
use bosun_proto::v1 as pb;
use discovery::ResolvedResource;

/// What the controller remembers of one resource's objects while it serves it, kept when its
/// handlers change: which objects were seen (so a new registry fires no resume handlers) and
/// their memos.
#[derive(Clone, Default)]
pub(super) struct Memory {
    pub(super) seen: Arc<Mutex<HashSet<String>>>,
    pub(super) memos: Arc<Mutex<HashMap<String, Vec<u8>>>>,
}

/// What every served resource shares.
#[derive(Clone)]
pub(super) struct Shared {
    pub(super) cluster: Cluster,
    /// Which objects are ours now.
    pub(super) authority: Authority,
    pub(super) servers: Servers,
    pub(super) outages: Arc<crate::handlers::dispatch::Outages>,
    pub(super) kinds: Arc<discovery::Kinds>,
    pub(super) log: Logger,
    pub(super) settings: Settings,
    /// Cycles in flight, across all resources.
    pub(super) limit: Arc<Semaphore>,
    /// Open once every index is populated.
    pub(super) gate: Arc<gate::IndexGate>,
}

/// Everything needed to serve one resource.
pub(super) struct ResourceJob {
    pub(super) resource: ResolvedResource,
    pub(super) handlers: Vec<Arc<Handler>>,
    pub(super) ignored: Vec<Vec<String>>,
    pub(super) memory: Memory,
    pub(super) shared: Shared,
    /// Keeps the other handlers waiting until this resource's index handlers saw its listing.
    pub(super) hold: Option<gate::GateHold>,
    pub(super) tasks: TaskTracker,
    pub(super) stop: tokio::sync::watch::Receiver<bool>,
}

impl ResourceJob {
    pub(super) async fn run(mut self) {
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
