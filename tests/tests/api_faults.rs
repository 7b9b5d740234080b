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

/// The controller's own client on the fault proxy, and the proxy's record.
async fn proxied(faults_: Vec<Fault>) -> (DevCluster, String, faults::Seen) {
    let cluster = DevCluster::start_local().await.unwrap();
    let (url, seen) = faults::start(cluster.url(), faults_).await;
    (cluster, url, seen)
}

/// How many requests the proxy saw (`method … path`).
fn seen_at(seen: &faults::Seen, method: &Method, path: &str) -> Vec<u16> {
    seen.lock().unwrap().iter().filter(|(_, m, p, _)| m == method && p == path).map(|(_, _, _, s)| *s).collect()
}

#[tokio::test]
async fn a_server_error_is_sent_as_often_as_the_controller_tries_and_each_attempt_is_counted() {
    // A resource of its own, so that no other test's requests count in the metrics.
    let path = "/api/v1/namespaces/default/configmaps/retried";
    let unavailable = Fault { times: 5, ..fault(Method::GET, path, StatusCode::SERVICE_UNAVAILABLE, &[("Retry-After", "0")]) };
    let (_cluster, url, seen) = proxied(vec![unavailable]).await;
    let mut api = bosun_controller::cluster::Cluster::new(faults::client_for(&url));
    api.retries = 2;
    let counted = |code: &str| {
        let labels = bosun_controller::metrics::ApiLabels { verb: "get", resource: "configmaps".into(), code: code.into() };
        bosun_controller::metrics::global().api_requests.get_or_create(&labels).get()
    };
    let before = (counted("503"), counted("200"));
    let got = api.get(path).await;
    assert_eq!(got.as_ref().err().and_then(|e| e.code()), Some(503), "three attempts, each answered 503: {got:?}");
    assert_eq!(seen_at(&seen, &Method::GET, path), [503, 503, 503], "exactly the controller's attempts were sent");
    assert_eq!((counted("503") - before.0, counted("200") - before.1), (3, 0), "every attempt is counted");
}

#[tokio::test]
async fn a_request_with_no_answer_fails_after_the_request_timeout() {
    // A server that accepts connections and never says a word.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            open.push(socket);
        }
    });
    // And one whose answer starts and never ends.
    let endless = Fault { hang: true, ..Fault::new(Method::GET, "/api/v1/namespaces/default/configmaps/endless", StatusCode::OK) };
    let (_cluster, proxy, _) = proxied(vec![endless]).await;
    let networking = bosun_controller::cluster::client::Networking { request_timeout: Duration::from_millis(300), ..Default::default() };
    for (what, url, path) in [
        ("silent", url.as_str(), "/api/v1/namespaces/default/configmaps/x"),
        ("endless body", proxy.as_str(), "/api/v1/namespaces/default/configmaps/endless"),
    ] {
        let mut api = bosun_controller::cluster::Cluster::new(faults::client_with(url, networking));
        api.retries = 0;
        let started = std::time::Instant::now();
        let got = tokio::time::timeout(Duration::from_secs(20), api.get(path)).await;
        let took = started.elapsed();
        let err = got.unwrap_or_else(|_| panic!("{what}: no end after 20 s")).expect_err(what);
        assert!(err.to_string().contains("no answer within 300ms"), "{what}: {err}");
        assert!(took < Duration::from_secs(3), "{what}: took {took:?}");
    }
    held.abort();
}

#[tokio::test]
async fn leases_go_through_while_object_writes_are_stalled() {
    // Every object write gets its headers and then nothing: all 64 permits are held.
    let stalled = "/api/v1/namespaces/default/configmaps/stalled";
    let hang = Fault { hang: true, times: 1000, ..Fault::new(Method::PATCH, stalled, StatusCode::OK) };
    let (_cluster, url, seen) = proxied(vec![hang]).await;
    let cluster = bosun_controller::cluster::Cluster::new(faults::client_for(&url));
    let writes: Vec<_> = (0..bosun_controller::cluster::MAX_REQUESTS + 8)
        .map(|_| {
            let c = cluster.clone();
            tokio::spawn(async move { c.patch(stalled, bosun_controller::cluster::content::MERGE, &json!({"data": {"a": "b"}})).await })
        })
        .collect();
    bosun_tests::wait_for("every permit held", T, || {
        let n = seen_at(&seen, &Method::PATCH, stalled).len();
        async move { n == bosun_controller::cluster::MAX_REQUESTS }
    })
    .await
    .unwrap();
    use bosun_controller::coordination::{Authority, Coordinator, LeaseSetup, Ownership, Replicas};
    let authority = Authority::new(Ownership::Nothing);
    let setup = LeaseSetup { name: "stalled-writes".into(), namespace: "default".into(), duration: Duration::from_secs(15) };
    let log = bosun_controller::logs::Logger::new(None);
    let replicas = Replicas::LeaderElection(setup);
    let started = Coordinator::start(&cluster, "me", None, &replicas, &authority, &log, bosun_controller::clock::Clock::Wall);
    let coordinator = tokio::time::timeout(Duration::from_secs(10), started).await.expect("the Lease is read and taken").unwrap();
    assert!(authority.owns("any-uid"), "leading while the object writes wait");
    coordinator.stop().await;
    writes.iter().for_each(|w| w.abort());
}

/// A handler's JSON patch whose answer is lost after it landed (the proxy forwards it, then
/// answers 500 or 504): it is not applied a second time (`add /spec/items/-` adds once,
/// `remove /spec/items/0` removes one item), and the handler is not failed for a patch that
/// landed. Before, every method was retried after a lost answer.
#[tokio::test]
async fn a_json_patch_whose_answer_is_lost_lands_once_and_counts_as_landed() {
    let cases = [
        (
            "add to a list",
            json!([{"op": "add", "path": "/spec/items/-", "value": "c"}]),
            json!(["a", "b", "c"]),
            StatusCode::INTERNAL_SERVER_ERROR,
        ),
        ("remove an item", json!([{"op": "remove", "path": "/spec/items/0"}]), json!(["b"]), StatusCode::GATEWAY_TIMEOUT),
    ];
    for (what, patch, want, status) in cases {
        let lost = Fault {
            after_forwarding: true,
            content_type: Some("application/json-patch+json".into()),
            ..Fault::new(Method::PATCH, "/kopfexamples/obj", status)
        };
        let cluster = DevCluster::start_local().await.unwrap();
        let direct = cluster.client();
        kex::install_crd(&direct).await;
        let (url, seen) = faults::start(cluster.url(), vec![lost]).await;
        let bytes = serde_json::to_vec(&patch).unwrap();
        let behaviour: bosun_tests::Behaviour =
            Arc::new(move |_| pb::HandleResponse { json_patch: bytes.clone(), ..success(json!({"ok": true})) });
        let server = Scripted::new(vec![(spec("create_fn", pb::HandlerKind::Create), behaviour)]);
        let (addr, stopper) = server.spawn().await;
        let controller = Controller::start(faults::client_for(&url), Settings { handlers: vec![addr], ..Settings::default() });
        kex::create(&direct, "default", "obj", json!({"spec": {"items": ["a", "b"]}})).await;
        controller.wait_log("[default/obj] Creation is processed:", T).await;
        let obj = kex::get(&direct, "default", "obj").await.expect("the object");
        assert_eq!(obj["spec"]["items"], want, "{what}: the patch landed once: {obj:#}");
        assert_eq!(obj["status"]["create_fn"]["ok"], true, "{what}: {obj:#}");
        let log = controller.log();
        assert!(log.iter().any(|l| l.contains("Creation is processed: 1 succeeded; 0 failed.")), "{what}: {log:#?}");
        let json_patches: Vec<u16> = seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, m, p, _)| *m == Method::PATCH && p.ends_with("/kopfexamples/obj"))
            .map(|(_, _, _, s)| *s)
            .collect();
        assert!(json_patches.contains(&status.as_u16()), "{what}: the answer was lost once: {json_patches:?}");
        controller.stop().await;
        stopper.stop().await;
    }
}
