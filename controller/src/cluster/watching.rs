//! Watching one resource in one scope. kube-runtime's watcher lists, then watches with
//! bookmarks; when a watch ends it resumes from the last resourceVersion (the server ends
//! each watch after the inactivity timeout, and a connection silent for that long plus 5 s
//! is taken for dead and reopened — Kopf's most reported bug was a silently stuck watch); it
//! relists only on 410 Gone. Around it, this module adds what an operator needs and the
//! watcher leaves to its users:
//!
//! - a small memory of the objects delivered ([`Known`]), so that a relist delivers only what
//!   changed while the watch was away — deletions included — instead of everything again;
//! - a resource that disappears from the API server (its CRD deleted) is reported, polled
//!   for, and watched again within seconds when it is back.

use std::collections::HashMap;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use kube::Resource;
use kube::api::{Api, ListParams, ObjectMeta};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};

use super::Cluster;
use super::discovery::ResolvedResource;
use super::raw::RawObject;
use crate::logs::Logger;
use crate::object;

/// The first wait before asking whether a gone resource is back; it doubles up to
/// [`GONE_POLL_MAX`].
const GONE_POLL_FIRST: Duration = Duration::from_millis(500);
/// The longest wait between two questions whether a gone resource is back.
const GONE_POLL_MAX: Duration = Duration::from_secs(5);

/// What the watch saw.
#[derive(Debug, Clone)]
pub enum Seen {
    /// An object of the first listing.
    Listed(Value),
    /// An object was added or modified (live, or found so by a relist).
    Upsert(Value),
    /// An object is gone: its last state from the watch, or — when a relist found it
    /// missing — a minimal body (see [`Known`]).
    Deleted(Value),
}

impl Seen {
    /// The object's body.
    pub fn body(&self) -> &Value {
        match self {
            Seen::Listed(b) | Seen::Upsert(b) | Seen::Deleted(b) => b,
        }
    }

    /// The same event with its body changed by `f`.
    pub fn map(self, f: impl FnOnce(Value) -> Value) -> Seen {
        match self {
            Seen::Listed(b) => Seen::Listed(f(b)),
            Seen::Upsert(b) => Seen::Upsert(f(b)),
            Seen::Deleted(b) => Seen::Deleted(f(b)),
        }
    }
}

/// The default server-side timeout of each watch request: a watch that brought nothing for
/// 5 s longer is taken for dead, so a dead watch is noticed within 65 s.
pub const WATCH_TIMEOUT: Duration = Duration::from_secs(60);

/// Where and how to watch.
#[derive(Debug, Clone)]
pub struct WatchScope {
    /// One namespace, or all.
    pub namespace: Option<String>,
    /// Label selector pushed to the API server.
    pub label_selector: Option<String>,
    /// The server ends each watch request after this long (`timeoutSeconds`) and the watch
    /// is resumed from its last resourceVersion, with no relist; a connection that brings
    /// nothing, not even a bookmark, for this long plus 5 s is taken for dead and reopened.
    pub inactivity_timeout: Duration,
}

/// Watches until `stop` flips to true, calling `deliver` for every object event and `listed`
/// once, after the objects of the first listing were delivered.
pub async fn watch(
    cluster: Cluster,
    resource: ResolvedResource,
    scope: WatchScope,
    log: Logger,
    mut stop: tokio::sync::watch::Receiver<bool>,
    mut deliver: impl FnMut(Seen),
    mut listed: impl FnMut(),
) {
    let ar = resource.api_resource();
    let api: Api<RawObject> = match (&scope.namespace, resource.namespaced) {
        (Some(ns), true) => Api::namespaced_with(cluster.client().clone(), ns, &ar),
        _ => Api::all_with(cluster.client().clone(), &ar),
    };
    let name = resource.display();
    let what = format!("{name}{}", scope.namespace.as_deref().map(|ns| format!(" in {ns}")).unwrap_or_default());
    let config = config(&scope);
    let mut known = Known::new(resource.api_version(), resource.kind.clone());
    let mut state = State::Following(follow(&api, &config));
    log.debug(None, &format!("Watching {what}."));
    let label = resource.metrics_label();
    let count =
        |family: &prometheus_client::metrics::family::Family<crate::metrics::WatchLabels, prometheus_client::metrics::counter::Counter>,
         reason| {
            family.get_or_create(&crate::metrics::WatchLabels { resource: label.clone(), reason }).inc();
        };
    let m = crate::metrics::global();
    let started = std::time::Instant::now();
    loop {
        state = match state {
            State::Following(mut stream) => {
                let next = tokio::select! {
                    _ = stop.changed() => return,
                    n = stream.next() => n,
                };
                match next {
                    Some(Ok(event)) => {
                        let relisting = matches!(event, watcher::Event::Init) && known.is_watching();
                        if relisting {
                            count(&m.relists, "expired");
                            log.info(None, &format!("Listing {what} again: the watch could not resume from where it was."));
                        }
                        let done_relisting = matches!(event, watcher::Event::InitDone) && known.is_relisting();
                        let done_first = matches!(event, watcher::Event::InitDone) && known.is_first_listing();
                        let seen = known.apply(event);
                        for (obj, depth) in known.take_skipped() {
                            log.warn(Some(&obj), &skipped_line(depth));
                        }
                        let vanished = seen.iter().filter(|s| matches!(s, Seen::Deleted(_))).count();
                        if done_relisting && vanished > 0 {
                            log.info(None, &format!("{vanished} object(s) of {what} were deleted while the watch was away."));
                        }
                        seen.into_iter().for_each(&mut deliver);
                        if done_first {
                            let took = started.elapsed().as_secs_f64();
                            log.info(None, &format!("Listed {} object(s) of {what} in {took:.1} s; watching for changes.", known.len()));
                            listed();
                        }
                        State::Following(stream)
                    }
                    Some(Err(e)) if status_code(&e) == Some(404) => {
                        count(&m.watch_restarts, "gone");
                        log.warn(None, &format!("Resource {name} is gone from the API server; waiting for it to come back."));
                        State::Gone { wait: GONE_POLL_FIRST }
                    }
                    Some(Err(e)) if status_code(&e) == Some(410) => {
                        count(&m.watch_restarts, "expired");
                        log.debug(None, &format!("Watch of {what} expired: {e}."));
                        State::Following(stream)
                    }
                    Some(Err(e)) => {
                        count(&m.watch_restarts, "error");
                        log.warn(None, &format!("Watch of {what} failed: {e}; retrying with backoff."));
                        if status_code(&e) == Some(403) {
                            let verb = if matches!(e, watcher::Error::InitialListFailed(_)) { "list" } else { "watch" };
                            cluster.said_forbidden(crate::cluster::forbidden::Missing {
                                verb,
                                group: resource.group.clone(),
                                resource: resource.plural.clone(),
                                namespace: scope.namespace.clone().filter(|_| resource.namespaced),
                                makes: false,
                            });
                        }
                        State::Following(stream)
                    }
                    // The watcher's stream is endless; should it end anyway, start over.
                    None => State::Following(follow(&api, &config)),
                }
            }
            State::Gone { wait } => {
                tokio::select! {
                    _ = stop.changed() => return,
                    _ = tokio::time::sleep(wait) => {}
                }
                let one = ListParams::default().limit(1);
                let probe = tokio::select! {
                    _ = stop.changed() => return,
                    r = api.list(&one) => r,
                };
                match probe {
                    Ok(_) => {
                        log.info(None, &format!("Resource {name} is back on the API server; resuming the watch."));
                        State::Following(follow(&api, &config))
                    }
                    Err(_) => State::Gone { wait: (wait * 2).min(GONE_POLL_MAX) },
                }
            }
        };
    }
}

/// Lists every object in `scope` page by page (500 a page, no page kept after delivery),
/// calling `deliver` for each as [`Seen::Upsert`]; returns how many there were. For a
/// controller whose share of the objects grew while its watch went on.
pub async fn list_all(
    cluster: &Cluster,
    resource: &ResolvedResource,
    scope: &WatchScope,
    mut deliver: impl FnMut(Seen),
) -> Result<usize, kube::Error> {
    let ar = resource.api_resource();
    let api: Api<RawObject> = match (&scope.namespace, resource.namespaced) {
        (Some(ns), true) => Api::namespaced_with(cluster.client().clone(), ns, &ar),
        _ => Api::all_with(cluster.client().clone(), &ar),
    };
    let mut params = ListParams::default().limit(500);
    if let Some(sel) = &scope.label_selector {
        params = params.labels(sel);
    }
    let mut count = 0;
    loop {
        let page = super::retry::kube(cluster.retries, || api.list(&params)).await?;
        let next = page.metadata.continue_.clone().filter(|c| !c.is_empty());
        // Objects too deep to read are skipped (the watch said so when it saw them).
        for o in page.items.into_iter().filter(|o| o.too_deep().is_none()) {
            count += 1;
            deliver(Seen::Upsert(o.into_body()));
        }
        match next {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(count),
        }
    }
}

/// The warning about an object nested `depth` levels deep, which is not handled.
fn skipped_line(depth: usize) -> String {
    format!(
        "The object is nested {depth} levels deep, deeper than the {} levels the controller reads; it is skipped until a \
         change makes it less deep.",
        crate::json::MAX_DEPTH
    )
}

/// Where the watch loop is.
enum State {
    /// Following kube-runtime's watcher, which lists, watches and resumes by itself.
    Following(BoxStream<'static, Result<watcher::Event<RawObject>, watcher::Error>>),
    /// The resource answered 404 Not Found: ask again after `wait` whether it is back.
    Gone {
        /// How long until the next question.
        wait: Duration,
    },
}

/// The watcher's settings for a scope: the server-side timeout of each watch request is the
/// inactivity timeout, and the watcher's own dead-connection check fires when nothing came
/// (no event, no bookmark) for 5 s longer: a server ends a healthy watch by then. A real API
/// server also sends a bookmark about every minute and 2 s before the timeout (the dev
/// cluster every second), which keeps the resourceVersion to resume from fresh. The client's
/// request timeout bounds only a watch's response headers (`client`).
fn config(scope: &WatchScope) -> watcher::Config {
    let secs = u32::try_from(scope.inactivity_timeout.as_secs()).unwrap_or(u32::MAX).max(1);
    let config = watcher::Config::default().timeout(secs);
    match &scope.label_selector {
        Some(sel) => config.labels(sel),
        None => config,
    }
}

/// A new watcher stream (starting with a listing), with kube-runtime's backoff on errors.
fn follow(api: &Api<RawObject>, config: &watcher::Config) -> BoxStream<'static, Result<watcher::Event<RawObject>, watcher::Error>> {
    watcher(api.clone(), config.clone()).default_backoff().boxed()
}

/// The HTTP status code of an API error the watcher reports, if it is one.
fn status_code(e: &watcher::Error) -> Option<u16> {
    match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => Some(s.code),
        watcher::Error::WatchError(s) => Some(s.code),
        _ => None,
    }
}

/// What a watch remembers of one object it delivered.
#[derive(Debug)]
struct Last {
    uid: Box<str>,
    resource_version: Box<str>,
    finalizers: Box<[Box<str>]>,
    labels: Box<[(Box<str>, Box<str>)]>,
    /// The number of the last listing that had the object.
    listing: u32,
}

impl Last {
    fn of(body: &Value, listing: u32) -> Last {
        let field = |k: &str| object::meta(body, k);
        let text = |k: &str| object::meta_str(body, k).into();
        Last {
            uid: text("uid"),
            resource_version: text("resourceVersion"),
            finalizers: field("finalizers")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(Into::into)
                .collect(),
            labels: field("labels")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| Some((k.as_str().into(), v.as_str()?.into())))
                .collect(),
            listing,
        }
    }
}

/// Which listing the watch is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The first listing: its objects are delivered as [`Seen::Listed`].
    FirstListing,
    /// A later listing (a relist): only what changed is delivered.
    Relisting,
    /// Between listings: every event is delivered.
    Watching,
}

/// The objects one watch delivered, keyed by `namespace/name`, and the listing it is in:
/// turns the watcher's events into what to deliver.
///
/// A relist (`Init`, `InitApply`…, `InitDone`) delivers an object only if it is new or its
/// resourceVersion changed (as [`Seen::Upsert`]), and delivers [`Seen::Deleted`] for the
/// objects known before and missing from it — deleted while the watch was away — so that
/// the runtime drops their state instead of leaking it.
///
/// Per object it keeps what tells a repeat from news (uid and resourceVersion) and what a
/// `Deleted` body needs: apiVersion and kind (once per watch), name, namespace, uid,
/// resourceVersion, finalizers (a finalizer still ours means the object may only have left a
/// pushed-down label selector, which the runtime checks) and labels (small, and what spies'
/// and handlers' label filters match on). Not the body: a controller may watch 100,000
/// objects, and annotations alone (last-applied and diffbase copies of the spec) can be
/// larger than the spec. So annotation and field filters of spies do not match such a
/// minimal body.
#[derive(Debug)]
pub struct Known {
    api_version: String,
    kind: String,
    objects: HashMap<Box<str>, Last>,
    listing: u32,
    phase: Phase,
    /// Objects too deep to read seen since the last [`Known::take_skipped`], with their depth.
    skipped: Vec<(crate::logs::ObjectRef, usize)>,
}

impl Known {
    /// Nothing known yet, for objects of this apiVersion and kind.
    pub fn new(api_version: String, kind: String) -> Known {
        Known { api_version, kind, objects: HashMap::new(), listing: 0, phase: Phase::FirstListing, skipped: Vec::new() }
    }

    /// Whether a listing finished and the watch follows changes.
    pub fn is_watching(&self) -> bool {
        self.phase == Phase::Watching
    }

    /// Whether the first listing is under way.
    pub fn is_first_listing(&self) -> bool {
        self.phase == Phase::FirstListing
    }

    /// Whether a relist is under way.
    pub fn is_relisting(&self) -> bool {
        self.phase == Phase::Relisting
    }

    /// How many objects are known.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// Whether no object is known.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// The objects too deep to read that the events since the last call brought (remembered,
    /// as any object, but not delivered), with their depth: each is to be warned about.
    pub fn take_skipped(&mut self) -> Vec<(crate::logs::ObjectRef, usize)> {
        std::mem::take(&mut self.skipped)
    }

    /// Takes one watcher event in; returns what to deliver, in order. An object too deep to
    /// read is remembered but not delivered (see [`Known::take_skipped`]); its deletion is
    /// delivered, with the identity it has.
    pub fn apply(&mut self, event: watcher::Event<RawObject>) -> Vec<Seen> {
        match event {
            watcher::Event::Init => {
                self.listing = self.listing.wrapping_add(1);
                if self.phase == Phase::Watching {
                    self.phase = Phase::Relisting;
                }
                Vec::new()
            }
            watcher::Event::InitApply(o) => {
                let first = self.phase == Phase::FirstListing;
                self.upsert(o, true, if first { Seen::Listed } else { Seen::Upsert })
            }
            watcher::Event::Apply(o) => self.upsert(o, false, Seen::Upsert),
            watcher::Event::Delete(o) => {
                self.objects.remove(key(o.meta()).as_str());
                vec![Seen::Deleted(o.into_body())]
            }
            watcher::Event::InitDone => {
                self.phase = Phase::Watching;
                let listing = self.listing;
                let mut vanished: Vec<(Box<str>, Last)> = self.objects.extract_if(|_, last| last.listing != listing).collect();
                vanished.sort_by(|a, b| a.0.cmp(&b.0));
                vanished.into_iter().map(|(k, last)| Seen::Deleted(self.minimal(&k, &last))).collect()
            }
        }
    }

    /// Remembers an applied object; returns it (unless a listing repeats it unchanged),
    /// after a `Deleted` for an object of the same name with another uid.
    fn upsert(&mut self, o: RawObject, skip_unchanged: bool, wrap: fn(Value) -> Seen) -> Vec<Seen> {
        let too_deep = o.too_deep();
        let (meta, body) = o.into_parts();
        let key = key(&meta);
        let (uid, rv) = (meta.uid.as_deref().unwrap_or(""), meta.resource_version.as_deref().unwrap_or(""));
        let mut out = Vec::new();
        match self.objects.get_mut(key.as_str()) {
            Some(last) if &*last.uid == uid => {
                last.listing = self.listing;
                if skip_unchanged && !rv.is_empty() && &*last.resource_version == rv {
                    return out;
                }
                *last = Last::of(&body, self.listing);
            }
            Some(_) => {
                let replaced = self.objects.insert(key.as_str().into(), Last::of(&body, self.listing));
                out.extend(replaced.map(|last| Seen::Deleted(self.minimal(&key, &last))));
            }
            None => {
                self.objects.insert(key.into(), Last::of(&body, self.listing));
            }
        }
        match too_deep {
            Some(depth) => self.skipped.push((object::object_ref(&body), depth)),
            None => out.push(wrap(body)),
        }
        out
    }

    /// The body delivered for an object that vanished unseen.
    fn minimal(&self, key: &str, last: &Last) -> Value {
        let (namespace, name) = key.split_once('/').unwrap_or(("", key));
        let mut meta = json!({"name": name, "uid": &*last.uid, "resourceVersion": &*last.resource_version});
        if !namespace.is_empty() {
            meta["namespace"] = namespace.into();
        }
        if !last.finalizers.is_empty() {
            meta["finalizers"] = last.finalizers.iter().map(|f| Value::from(&**f)).collect();
        }
        if !last.labels.is_empty() {
            meta["labels"] = last.labels.iter().map(|(k, v)| (k.to_string(), Value::from(&**v))).collect();
        }
        json!({"apiVersion": self.api_version, "kind": self.kind, "metadata": meta})
    }
}

/// `namespace/name` (`/name` for cluster-scoped objects).
fn key(meta: &ObjectMeta) -> String {
    format!("{}/{}", meta.namespace.as_deref().unwrap_or(""), meta.name.as_deref().unwrap_or(""))
}

#[cfg(test)]
#[path = "watching_tests.rs"]
mod silence_tests;

#[cfg(test)]
#[path = "watching_events_tests.rs"]
mod tests;
