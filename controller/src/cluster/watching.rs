//! Watching one resource in one scope: kube-runtime's watcher (list, then watch with
//! bookmarks, relist on 410 Gone, backoff on errors) wrapped with an inactivity timeout
//! that restarts a watch gone silent — Kopf's most reported bug was a silently stuck watch.

use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;

use super::{Cluster, ResolvedResource};
use crate::logs::Logger;

/// What the watch saw.
#[derive(Debug, Clone)]
pub enum Seen {
    /// An object of the initial listing (or of a relist).
    Listed(Value),
    /// An object was added or modified.
    Upsert(Value),
    /// An object is gone; its last state.
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

/// Where and how to watch.
#[derive(Debug, Clone)]
pub struct WatchScope {
    /// One namespace, or all.
    pub namespace: Option<String>,
    /// Label selector pushed to the API server.
    pub label_selector: Option<String>,
    /// Restart the watch when nothing (not even a bookmark) arrived for this long.
    pub inactivity_timeout: Duration,
}

/// Watches until `stop` flips to true, calling `deliver` for every object event.
pub async fn watch(
    cluster: Cluster,
    resource: ResolvedResource,
    scope: WatchScope,
    log: Logger,
    mut stop: tokio::sync::watch::Receiver<bool>,
    mut deliver: impl FnMut(Seen),
) {
    let ar = resource.api_resource();
    let api: Api<DynamicObject> = match (&scope.namespace, resource.namespaced) {
        (Some(ns), true) => Api::namespaced_with(cluster.client().clone(), ns, &ar),
        _ => Api::all_with(cluster.client().clone(), &ar),
    };
    let where_ = scope.namespace.as_deref().map(|ns| format!(" in {ns}")).unwrap_or_default();
    loop {
        let mut config = watcher::Config::default();
        if let Some(sel) = &scope.label_selector {
            config = config.labels(sel);
        }
        let mut stream = watcher(api.clone(), config).default_backoff().boxed();
        log.debug(None, &format!("Watching {}{where_}.", resource.display()));
        loop {
            let next = tokio::select! {
                _ = stop.changed() => return,
                n = tokio::time::timeout(scope.inactivity_timeout, stream.next()) => n,
            };
            match next {
                Err(_) => {
                    log.warn(
                        None,
                        &format!("Watch of {}{where_} was silent for {:?}; restarting it.", resource.display(), scope.inactivity_timeout),
                    );
                    break;
                }
                Ok(None) => break,
                Ok(Some(Err(e))) => log.warn(None, &format!("Watch of {}{where_} failed: {e}; retrying with backoff.", resource.display())),
                Ok(Some(Ok(event))) => match event {
                    watcher::Event::Apply(o) => deliver(Seen::Upsert(to_value(o))),
                    watcher::Event::InitApply(o) => deliver(Seen::Listed(to_value(o))),
                    watcher::Event::Delete(o) => deliver(Seen::Deleted(to_value(o))),
                    watcher::Event::Init | watcher::Event::InitDone => {}
                },
            }
        }
    }
}

/// The object as JSON in its usual key order, moving its fields instead of serialising the
/// whole object again.
fn to_value(o: DynamicObject) -> Value {
    let mut body = serde_json::Map::new();
    if let Some(t) = o.types {
        body.insert("apiVersion".into(), Value::String(t.api_version));
        body.insert("kind".into(), Value::String(t.kind));
    }
    body.insert("metadata".into(), serde_json::to_value(&o.metadata).unwrap_or(Value::Null));
    if let Value::Object(data) = o.data {
        body.extend(data);
    }
    Value::Object(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_become_the_json_they_came_as() {
        let cases = [
            serde_json::json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"f": [1]}, "status": {"s": true}}),
            serde_json::json!({"metadata": {"name": "b", "namespace": "ns"}, "data": {"k": "v"}}),
        ];
        for want in cases {
            let o: DynamicObject = serde_json::from_value(want.clone()).unwrap();
            let got = to_value(o);
            assert_eq!(got, want);
            let keys: Vec<&String> = got.as_object().unwrap().keys().collect();
            let metadata_at = keys.iter().position(|k| *k == "metadata").unwrap();
            assert!(keys[..metadata_at].iter().all(|k| *k == "apiVersion" || *k == "kind"), "usual order: {keys:?}");
        }
    }
}
