//! A dead watch on a paused clock: kube's watcher against an API server in memory whose watch
//! requests are answered with headers and then nothing, ever (a connection whose peer went
//! away without a word).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full, StreamBody};
use parking_lot::Mutex;
use tokio::time::Instant;
use tower::BoxError;

use super::*;

type Body = http_body_util::combinators::UnsyncBoxBody<Bytes, BoxError>;

/// An API server that lists nothing and whose watches never say anything; it records the
/// time and query of each watch request.
fn silent_server(watches: Arc<Mutex<Vec<(Instant, String)>>>) -> kube::Client {
    let service = tower::service_fn(move |req: Request<kube::client::Body>| {
        let watches = watches.clone();
        async move {
            let query = req.uri().query().unwrap_or("").to_string();
            let body: Body = if crate::cluster::deadline::is_watch(&query) {
                watches.lock().push((Instant::now(), query));
                let never = futures::stream::pending::<Result<http_body::Frame<Bytes>, BoxError>>();
                StreamBody::new(never).boxed_unsync()
            } else {
                let list = r#"{"kind":"List","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}"#;
                Full::new(Bytes::from_static(list.as_bytes())).map_err(|never| match never {}).boxed_unsync()
            };
            Ok::<_, BoxError>(Response::new(body))
        }
    });
    kube::Client::new(service, "default")
}

#[tokio::test(start_paused = true)]
async fn a_dead_watch_is_reopened_within_75_seconds_by_default() {
    let watches: Arc<Mutex<Vec<(Instant, String)>>> = Arc::default();
    let cluster = Cluster::new(silent_server(watches.clone()));
    let resource = ResolvedResource {
        group: "kopf.dev".into(),
        version: "v1".into(),
        plural: "kopfexamples".into(),
        kind: "KopfExample".into(),
        namespaced: true,
        has_status: true,
        status_keeps_unknown: true,
    };
    let scope = WatchScope { namespace: None, label_selector: None, inactivity_timeout: crate::Settings::default().inactivity_timeout };
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(watch(cluster, resource, scope, Logger::new(None), stop, |_| {}, || {}));
    let started = Instant::now();
    while watches.lock().len() < 3 && started.elapsed() < Duration::from_secs(3600) {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let seen = watches.lock().clone();
    assert_eq!(seen.len(), 3, "the watch was reopened twice within an hour: {seen:?}");
    for pair in seen.windows(2) {
        let silent = pair[1].0 - pair[0].0;
        assert!(silent <= Duration::from_secs(75), "a dead watch was noticed after {silent:?}");
    }
    for (_, query) in &seen {
        assert!(query.contains("allowWatchBookmarks=true"), "bookmarks keep a live watch from looking dead: {query}");
        assert!(query.contains("resourceVersion=1"), "resumed where it was, no relist: {query}");
    }
    stop_tx.send_replace(true);
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_dead_peering_watch_is_reopened_within_75_seconds() {
    use crate::coordination::keepalive::watch_object;
    use crate::coordination::peering::{Family, Peering};
    use futures::StreamExt;
    let watches: Arc<Mutex<Vec<(Instant, String)>>> = Arc::default();
    let peering = Peering {
        family: Family::Bosun,
        name: "default".into(),
        namespace: None,
        identity: "me".into(),
        priority: 0,
        lifetime: Duration::from_secs(60),
        mandatory: false,
    };
    let mut changes = watch_object(silent_server(watches.clone()), &peering).boxed();
    let task = tokio::spawn(async move { while changes.next().await.is_some() {} });
    let started = Instant::now();
    while watches.lock().len() < 2 && started.elapsed() < Duration::from_secs(3600) {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let seen = watches.lock().clone();
    assert_eq!(seen.len(), 2, "the watch was reopened within an hour: {seen:?}");
    let silent = seen[1].0 - seen[0].0;
    assert!(silent <= Duration::from_secs(75), "a dead peering watch was noticed after {silent:?}");
    task.abort();
}
