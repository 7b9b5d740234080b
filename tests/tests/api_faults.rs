//! The controller against an API server that answers 429, 500 and 409: each has a named
//! behaviour (retry after Retry-After, retry with backoff, re-read and retry) and nothing is
//! lost. A fault-injecting proxy sits between the controller and the dev cluster.

use std::sync::Arc;
use std::time::Duration;

use bosun_controller::Settings;
use bosun_devcluster::DevCluster;
use bosun_proto::v1 as pb;
use bosun_tests::faults::{self, Fault};
use bosun_tests::{Controller, Scripted, kex, spec, success};
use http::{Method, StatusCode};
use serde_json::json;

const T: Duration = Duration::from_secs(30);

async fn handled(client: &kube::Client, name: &str) {
    bosun_tests::wait_for("the result", T, || {
        let c = client.clone();
        let name = name.to_string();
        async move { kex::get(&c, "default", &name).await.is_some_and(|o| o["status"]["create_fn"]["ok"] == true) }
    })
    .await
    .unwrap();
}

fn fault(method: Method, suffix: &str, status: StatusCode, headers: &[(&str, &str)]) -> Fault {
    Fault { headers: headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(), ..Fault::new(method, suffix, status) }
}

async fn run_with(faults_: Vec<Fault>, handlers: Vec<(pb::HandlerSpec, bosun_tests::Behaviour)>) -> faults::Seen {
    run_with_settings(faults_, handlers, Settings::default(), false).await.0
}

async fn run_with_settings(
    faults_: Vec<Fault>,
    handlers: Vec<(pb::HandlerSpec, bosun_tests::Behaviour)>,
    settings: Settings,
    after_faults: bool,
) -> (faults::Seen, Vec<String>) {
    let n = faults_.len();
    let cluster = DevCluster::start_local().await.unwrap();
    let direct = cluster.client();
    kex::install_crd(&direct).await;
    let (url, seen) = faults::start(cluster.url(), faults_).await;
    let server = Scripted::new(handlers);
    let (addr, stopper) = server.spawn().await;
    let controller = Controller::start(faults::client_for(&url), Settings { handlers: vec![addr], ..settings });
    if after_faults {
        // Create the object only once the injected watch answers were given.
        let injected = |seen: &faults::Seen| seen.lock().unwrap().iter().filter(|(_, _, _, s)| *s == 200).count();
        bosun_tests::wait_for("the injected faults", T, || {
            let k = injected(&seen);
            async move { k > n }
        })
        .await
        .unwrap();
    }
    kex::create(&direct, "default", "obj", json!({})).await;
    handled(&direct, "obj").await;
    let log = controller.log();
    controller.stop().await;
    stopper.stop().await;
    (seen, log)
}

fn ok() -> bosun_tests::Behaviour {
    Arc::new(|_| success(json!({"ok": true})))
}

fn status_patches(seen: &faults::Seen) -> Vec<(std::time::Instant, u16)> {
    seen.lock().unwrap().iter().filter(|(_, m, p, _)| *m == Method::PATCH && p.ends_with("/status")).map(|(t, _, _, s)| (*t, *s)).collect()
}

#[tokio::test]
async fn too_many_requests_is_retried_after_retry_after() {
    let seen = run_with(
        vec![fault(Method::PATCH, "/obj/status", StatusCode::TOO_MANY_REQUESTS, &[("Retry-After", "2")])],
        vec![(spec("create_fn", pb::HandlerKind::Create), ok())],
    )
    .await;
    let patches = status_patches(&seen);
    assert_eq!(patches.iter().map(|p| p.1).collect::<Vec<_>>(), vec![429, 200], "{patches:?}");
    let waited = patches[1].0 - patches[0].0;
    assert!(waited >= Duration::from_millis(1900), "Retry-After: 2 honoured, waited {waited:?}");
}

#[tokio::test]
async fn server_errors_are_retried_with_backoff() {
    let seen = run_with(
        vec![fault(Method::PATCH, "/obj/status", StatusCode::INTERNAL_SERVER_ERROR, &[])],
        vec![(spec("create_fn", pb::HandlerKind::Create), ok())],
    )
    .await;
    let patches = status_patches(&seen);
    assert_eq!(patches.iter().map(|p| p.1).collect::<Vec<_>>(), vec![500, 200], "{patches:?}");
    assert!(patches[1].0 - patches[0].0 >= Duration::from_millis(900), "first backoff is 1 s");
}

#[tokio::test]
async fn a_conflict_on_the_finalizer_write_is_reread_and_retried() {
    let seen = run_with(
        vec![fault(Method::PATCH, "/kopfexamples/obj", StatusCode::CONFLICT, &[])],
        vec![(spec("create_fn", pb::HandlerKind::Create), ok()), (spec("delete_fn", pb::HandlerKind::Delete), ok())],
    )
    .await;
    let log = seen.lock().unwrap();
    let main: Vec<(Method, u16)> = log
        .iter()
        .filter(|(_, m, p, _)| p.ends_with("/kopfexamples/obj") && *m != Method::DELETE)
        .map(|(_, m, _, s)| (m.clone(), *s))
        .collect();
    // The finalizer: refused, re-read, retried; then the diffbase, when the creation is processed.
    assert_eq!(main, vec![(Method::PATCH, 409), (Method::GET, 200), (Method::PATCH, 200), (Method::PATCH, 200)], "{main:?}");
}

#[tokio::test]
async fn a_silent_watch_is_reopened_where_it_was_after_the_inactivity_timeout() {
    let silent = Fault {
        hang: true,
        status: StatusCode::OK,
        query_contains: Some("watch=true".into()),
        ..Fault::new(Method::GET, "/kopfexamples", StatusCode::OK)
    };
    // The watcher takes a watch that brought nothing for the timeout plus 5 s for dead.
    let settings = Settings { inactivity_timeout: Duration::from_secs(1), ..Default::default() };
    let (seen, log) = run_with_settings(vec![silent], vec![(spec("create_fn", pb::HandlerKind::Create), ok())], settings, true).await;
    assert!(!log.iter().any(|l| l.contains("again")), "resumed from its resourceVersion, not relisted: {log:#?}");
    let watches = seen.lock().unwrap().iter().filter(|(_, m, p, _)| *m == Method::GET && p.ends_with("/kopfexamples")).count();
    assert!(watches >= 3, "list, the silent watch, then a working watch: {watches}");
}

#[tokio::test]
async fn a_gone_watch_relists_and_nothing_is_lost() {
    let expired = r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (2)","reason":"Expired","code":410}}"#;
    let gone = Fault {
        body: Some(format!("{expired}\n")),
        query_contains: Some("watch=true".into()),
        ..Fault::new(Method::GET, "/kopfexamples", StatusCode::OK)
    };
    let (seen, _) =
        run_with_settings(vec![gone], vec![(spec("create_fn", pb::HandlerKind::Create), ok())], Settings::default(), true).await;
    let lists = seen.lock().unwrap().iter().filter(|(_, m, p, _)| *m == Method::GET && p.ends_with("/kopfexamples")).count();
    assert!(lists >= 3, "list, the expired watch, a relist: {lists}");
}
