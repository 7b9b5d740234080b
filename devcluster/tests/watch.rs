//! Watches over HTTP with kube-rs: resuming from a resourceVersion, event types, 410 Gone
//! for a version older than the kept history, bookmarks, and label-selector transitions.

use std::time::Duration;

use bosun_devcluster::{Config, DevCluster};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

fn cm(name: &str, color: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": {"color": color}}})).unwrap()
}

/// Collect `n` events (or fail after a deadline).
async fn take(api: &Api<ConfigMap>, wp: &WatchParams, rv: &str, n: usize) -> Vec<WatchEvent<ConfigMap>> {
    let stream = api.watch(wp, rv).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), stream.take(n).try_collect::<Vec<_>>())
        .await
        .expect("events arrive before the deadline")
        .unwrap()
}

fn no_bookmarks() -> WatchParams {
    WatchParams { bookmarks: false, ..WatchParams::default() }
}

fn kind(e: &WatchEvent<ConfigMap>) -> String {
    match e {
        WatchEvent::Added(o) => format!("ADDED {}", o.metadata.name.as_deref().unwrap_or("")),
        WatchEvent::Modified(o) => format!("MODIFIED {}", o.metadata.name.as_deref().unwrap_or("")),
        WatchEvent::Deleted(o) => format!("DELETED {}", o.metadata.name.as_deref().unwrap_or("")),
        WatchEvent::Bookmark(_) => "BOOKMARK".into(),
        WatchEvent::Error(e) => format!("ERROR {}", e.code),
    }
}

#[tokio::test]
async fn watch_from_a_list_version_sees_every_later_change_in_order() {
    let dc = DevCluster::start_local().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(dc.client(), "default");
    let rv = api.list(&ListParams::default()).await.unwrap().metadata.resource_version.unwrap();
    api.create(&PostParams::default(), &cm("a", "red")).await.unwrap();
    api.patch("a", &PatchParams::default(), &Patch::Merge(json!({"data": {"x": "1"}}))).await.unwrap();
    api.delete("a", &DeleteParams::default()).await.unwrap();
    let events = take(&api, &no_bookmarks(), &rv, 3).await;
    let kinds: Vec<String> = events.iter().map(kind).collect();
    assert_eq!(kinds, ["ADDED a", "MODIFIED a", "DELETED a"]);
}

#[tokio::test]
async fn watch_without_version_starts_with_current_objects_as_added() {
    let dc = DevCluster::start_local().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(dc.client(), "default");
    api.create(&PostParams::default(), &cm("a", "red")).await.unwrap();
    let events = take(&api, &no_bookmarks(), "0", 1).await;
    assert_eq!(kind(&events[0]), "ADDED a");
}

#[tokio::test]
async fn watch_from_a_version_older_than_the_history_is_gone() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dc = DevCluster::start(listener, Config { watch_history: 2, ..Default::default() }).await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(dc.client(), "default");
    let rv = api.list(&ListParams::default()).await.unwrap().metadata.resource_version.unwrap();
    for i in 0..5 {
        api.create(&PostParams::default(), &cm(&format!("c{i}"), "red")).await.unwrap();
    }
    let events = take(&api, &no_bookmarks(), &rv, 1).await;
    assert_eq!(kind(&events[0]), "ERROR 410");
}

#[tokio::test]
async fn a_bookmark_arrives_when_bookmarks_are_allowed() {
    let dc = DevCluster::start_local().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(dc.client(), "default");
    let rv = api.list(&ListParams::default()).await.unwrap().metadata.resource_version.unwrap();
    let events = take(&api, &WatchParams { bookmarks: true, ..WatchParams::default() }, &rv, 1).await;
    assert_eq!(kind(&events[0]), "BOOKMARK");
}

#[tokio::test]
async fn a_label_selector_watch_sees_objects_leave_and_enter_the_selection() {
    let dc = DevCluster::start_local().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(dc.client(), "default");
    api.create(&PostParams::default(), &cm("a", "red")).await.unwrap();
    api.create(&PostParams::default(), &cm("b", "blue")).await.unwrap();
    let rv = api.list(&ListParams::default()).await.unwrap().metadata.resource_version.unwrap();
    let relabel = |c: &str| Patch::Merge(json!({"metadata": {"labels": {"color": c}}}));
    api.patch("a", &PatchParams::default(), &relabel("blue")).await.unwrap();
    api.patch("b", &PatchParams::default(), &relabel("red")).await.unwrap();
    let events = take(&api, &no_bookmarks().labels("color=red"), &rv, 2).await;
    let kinds: Vec<String> = events.iter().map(kind).collect();
    assert_eq!(kinds, ["DELETED a", "ADDED b"]);
}

#[tokio::test]
async fn a_watch_ends_after_its_timeout() {
    let dc = DevCluster::start_local().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(dc.client(), "default");
    let stream = api.watch(&WatchParams::default().timeout(1), "0").await.unwrap();
    let all = tokio::time::timeout(Duration::from_secs(10), stream.collect::<Vec<_>>()).await;
    assert!(all.is_ok(), "the server closes the watch after timeoutSeconds");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_watchers_each_see_every_change() {
    let dc = DevCluster::start_local().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(dc.client(), "default");
    api.create(&PostParams::default(), &cm("a", "red")).await.unwrap();
    let rv = api.list(&ListParams::default()).await.unwrap().metadata.resource_version.unwrap();
    let mut watchers = Vec::new();
    for _ in 0..100 {
        let stream = api.watch(&no_bookmarks(), &rv).await.unwrap();
        watchers.push(tokio::spawn(
            async move { tokio::time::timeout(Duration::from_secs(20), stream.take(50).try_collect::<Vec<_>>()).await },
        ));
    }
    for i in 0..50 {
        api.patch("a", &PatchParams::default(), &Patch::Merge(json!({"data": {"n": i.to_string()}}))).await.unwrap();
    }
    for w in watchers {
        let events = w.await.unwrap().expect("all events before the deadline").unwrap();
        let last = events.last().map(kind).unwrap();
        assert_eq!((events.len(), last.as_str()), (50, "MODIFIED a"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_runtime_watchers_see_objects_with_both_initial_list_strategies() {
    use kube::runtime::watcher::{self, Event, InitialListStrategy};
    let dc = DevCluster::start_local().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(dc.client(), "default");
    api.create(&PostParams::default(), &cm("before", "red")).await.unwrap();
    for (i, strategy) in [InitialListStrategy::ListWatch, InitialListStrategy::StreamingList].into_iter().enumerate() {
        let config = watcher::Config { initial_list_strategy: strategy.clone(), ..Default::default() };
        let mut stream = watcher::watcher(api.clone(), config).boxed();
        let mut seen = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let mut created = false;
        let after = format!("after-{i}");
        while !seen.contains(&after) {
            let next = tokio::time::timeout_at(deadline, stream.next()).await.expect("events before the deadline");
            match next.unwrap().unwrap() {
                Event::InitApply(o) | Event::Apply(o) => seen.push(o.metadata.name.unwrap()),
                Event::InitDone if !created => {
                    created = true;
                    api.create(&PostParams::default(), &cm(&after, "red")).await.unwrap();
                }
                _ => {}
            }
        }
        assert!(seen.contains(&"before".to_string()), "{strategy:?}: {seen:?}");
    }
}

#[tokio::test]
async fn watches_of_a_deleted_crd_end_after_its_objects_deletions_and_its_resource_is_not_found() {
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
    let dc = DevCluster::start_local().await.unwrap();
    let crds: Api<DynamicObject> = Api::all_with(
        dc.client(),
        &ApiResource::from_gvk(&GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition")),
    );
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "kopfexamples.kopf.dev"},
        "spec": {"scope": "Namespaced", "group": "kopf.dev", "names": {"kind": "KopfExample", "plural": "kopfexamples"},
            "versions": [{"name": "v1", "served": true, "storage": true}]}});
    crds.create(&PostParams::default(), &serde_json::from_value(crd).unwrap()).await.unwrap();
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("kopf.dev", "v1", "KopfExample"));
    let api: Api<DynamicObject> = Api::namespaced_with(dc.client(), "default", &ar);
    let obj = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "a"}});
    api.create(&PostParams::default(), &serde_json::from_value(obj).unwrap()).await.unwrap();
    let rv = api.list(&ListParams::default()).await.unwrap().metadata.resource_version.unwrap();
    let stream = api.watch(&no_bookmarks(), &rv).await.unwrap();

    crds.delete("kopfexamples.kopf.dev", &DeleteParams::default()).await.unwrap();
    let events = tokio::time::timeout(Duration::from_secs(10), stream.try_collect::<Vec<_>>())
        .await
        .expect("the watch ends when the CRD is gone")
        .unwrap();
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| match e {
            WatchEvent::Deleted(o) if o.metadata.name.as_deref() == Some("a") => "DELETED a",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["DELETED a"]);
    let not_found = |r: Result<_, kube::Error>| matches!(r, Err(kube::Error::Api(s)) if s.code == 404);
    assert!(not_found(api.list(&ListParams::default()).await.map(|_| ())), "a list is 404 Not Found");
    assert!(not_found(api.watch(&no_bookmarks(), &rv).await.map(|_| ())), "a watch is 404 Not Found");
}
