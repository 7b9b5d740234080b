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
    Fault {
        method,
        path_suffix: suffix.into(),
        times: 1,
        status,
        headers: headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
    }
}

async fn run_with(faults_: Vec<Fault>, handlers: Vec<(pb::HandlerSpec, bosun_tests::Behaviour)>) -> faults::Seen {
    let cluster = DevCluster::start_local().await.unwrap();
    let direct = cluster.client();
    kex::install_crd(&direct).await;
    let (url, seen) = faults::start(cluster.url(), faults_).await;
    let server = Scripted::new(handlers);
    let (addr, stopper) = server.spawn().await;
    let controller = Controller::start(faults::client_for(&url), Settings { handlers: vec![addr], ..Default::default() });
    kex::create(&direct, "default", "obj", json!({})).await;
    handled(&direct, "obj").await;
    controller.stop().await;
    stopper.stop().await;
    seen
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
    let main: Vec<(Method, u16)> =
        log.iter().filter(|(_, m, p, _)| p.ends_with("/kopfexamples/obj") && *m != Method::DELETE).map(|(_, m, _, s)| (m.clone(), *s)).collect();
    assert_eq!(main, vec![(Method::PATCH, 409), (Method::GET, 200), (Method::PATCH, 200)], "{main:?}");
}
