//! Watching end to end: the real controller against the dev cluster. A quiet watch is resumed
//! without a relist, a relist delivers only what changed while the watch was away (deletions
//! included), and a resource whose CRD is deleted and created again is served again within
//! seconds.

use std::time::Duration;

use bosun_controller::Settings;
use bosun_controller::cluster::Cluster;
use bosun_devcluster::{Config, DevCluster};
use bosun_proto::v1 as pb;
use bosun_tests::faults::{self, Fault};
use bosun_tests::{Controller, Scripted, kex, spec, succeed, wait_for};
use http::{Method, StatusCode};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(20);
const CRD_PATH: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/kopfexamples.kopf.dev";

fn settings(addr: &str, inactivity_timeout: Duration) -> Settings {
    Settings { handlers: vec![addr.to_string()], inactivity_timeout, ..Default::default() }
}

/// A spy (raw-event handler) that always succeeds.
fn spy() -> Scripted {
    Scripted::new(vec![(spec("spy", pb::HandlerKind::Event), succeed(Value::Null))])
}

/// The spy calls so far, as `(event type, object name)`.
fn spy_calls(server: &Scripted) -> Vec<(String, String)> {
    server
        .calls()
        .iter()
        .filter(|c| c.handler_id == "spy")
        .map(|c| {
            let body: Value = serde_json::from_slice(&c.object).unwrap_or(Value::Null);
            (c.event_type.clone(), body["metadata"]["name"].as_str().unwrap_or("").to_string())
        })
        .collect()
}

async fn wait_spy_calls(server: &Scripted, what: &str, cond: impl Fn(&[(String, String)]) -> bool) {
    wait_for(what, T, || {
        let done = cond(&spy_calls(server));
        async move { done }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; spy calls: {:?}", spy_calls(server)));
}

/// How many requests of `verb` (`LIST`, `WATCH`) the dev cluster answered for kopfexamples.
async fn requests(client: &kube::Client, verb: &str) -> u64 {
    let text = client.request_text(http::Request::get("/metrics").body(Vec::new()).unwrap()).await.expect("metrics");
    let verb = format!("verb=\"{verb}\"");
    text.lines()
        .filter(|l| l.contains("resource=\"kopfexamples\"") && l.contains(&verb))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[tokio::test]
async fn a_quiet_watch_is_resumed_without_a_relist_and_spies_are_not_called_again() {
    let cluster = DevCluster::start_local().await.unwrap();
    let client = cluster.client();
    kex::install_crd(&client).await;
    kex::create(&client, "default", "obj", json!({})).await;
    let server = spy();
    let (addr, stopper) = server.clone().spawn().await;
    let controller = Controller::start(client.clone(), settings(&addr, Duration::from_secs(1)));
    wait_spy_calls(&server, "the listing", |c| c.len() == 1).await;

    // The thing under test: three server-side watch timeouts (1 s each) pass quietly.
    let c = client.clone();
    wait_for("three watch timeouts", T, || {
        let c = c.clone();
        async move { requests(&c, "WATCH").await >= 4 }
    })
    .await
    .unwrap();
    assert_eq!(spy_calls(&server), vec![(String::new(), "obj".to_string())], "only the listing");
    assert_eq!(requests(&client, "LIST").await, 1, "no relist; log:\n{}", controller.log().join("\n"));
    assert_eq!(controller.count("again"), 0, "{:#?}", controller.log());

    // The resumed watch still sees changes.
    kex::patch(&client, "default", "obj", json!({"spec": {"field": "changed"}})).await;
    wait_spy_calls(&server, "the change", |c| c.len() == 2).await;
    assert_eq!(spy_calls(&server)[1], ("MODIFIED".to_string(), "obj".to_string()));
    controller.stop().await;
    stopper.stop().await;
}

#[tokio::test]
async fn a_relist_delivers_what_changed_while_the_watch_was_away_including_deletions_and_nothing_else() {
    // A short watch history, so that the watch cannot resume and must relist.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let cluster = DevCluster::start(listener, Config { watch_history: 2, ..Default::default() }).await.unwrap();
    let direct = cluster.client();
    kex::install_crd(&direct).await;
    for name in ["gone", "same", "changed"] {
        kex::create(&direct, "default", name, json!({})).await;
    }
    // The first watch hangs: the controller sees nothing until it gives up on it.
    let stuck = Fault { hang: true, query_contains: Some("watch=true".into()), ..Fault::new(Method::GET, "/kopfexamples", StatusCode::OK) };
    let (url, seen) = faults::start(cluster.url(), vec![stuck]).await;
    let server = spy();
    let (addr, stopper) = server.clone().spawn().await;
    let controller = Controller::start(faults::client_for(&url), settings(&addr, Duration::from_secs(1)));
    wait_spy_calls(&server, "the listing", |c| c.len() == 3).await;
    wait_for("the stuck watch", T, || {
        let watching = seen.lock().unwrap().iter().filter(|(_, m, p, _)| *m == Method::GET && p.ends_with("/kopfexamples")).count() >= 2;
        async move { watching }
    })
    .await
    .unwrap();

    kex::delete(&direct, "default", "gone").await;
    kex::patch(&direct, "default", "changed", json!({"spec": {"field": "changed"}})).await;
    kex::create(&direct, "default", "new", json!({})).await;

    wait_spy_calls(&server, "the news of the relist", |c| c.len() >= 6).await;
    let mut news = spy_calls(&server)[3..].to_vec();
    news.sort();
    let pair = |t: &str, n: &str| (t.to_string(), n.to_string());
    assert_eq!(news, vec![pair("ADDED", "new"), pair("DELETED", "gone"), pair("MODIFIED", "changed")]);
    controller.wait_log("Listing kopfexamples.v1.kopf.dev again", T).await;
    controller.wait_log("1 object(s) of kopfexamples.v1.kopf.dev were deleted while the watch was away.", T).await;
    // Nothing more comes: the unchanged object is not delivered again. (Had the relist
    // delivered it, its call would come before that of an object created after the relist.)
    kex::create(&direct, "default", "marker", json!({})).await;
    wait_spy_calls(&server, "the marker", |c| c.iter().any(|(_, n)| n == "marker")).await;
    assert_eq!(spy_calls(&server).len(), 7, "{:?}", spy_calls(&server));
    controller.stop().await;
    stopper.stop().await;
}

#[tokio::test]
async fn a_crd_deleted_and_created_again_is_served_again_within_seconds() {
    let cluster = DevCluster::start_local().await.unwrap();
    let client = cluster.client();
    kex::install_crd(&client).await;
    let server = Scripted::new(vec![(spec("create_fn", pb::HandlerKind::Create), succeed(json!({"ok": true})))]);
    let (addr, stopper) = server.clone().spawn().await;
    let controller = Controller::start(client.clone(), settings(&addr, Duration::from_secs(330)));
    kex::create(&client, "default", "before", json!({})).await;
    controller.wait_log("[default/before] Creation is processed: 1 succeeded; 0 failed.", T).await;

    let api = Cluster::new(client.clone());
    api.call(Method::DELETE, CRD_PATH, None, None).await.expect("the CRD is deleted");
    wait_for("the CRD to be gone", T, || {
        let api = api.clone();
        async move { api.get(CRD_PATH).await.is_err_and(|e| e.code() == Some(404)) }
    })
    .await
    .unwrap();
    controller.wait_log("Resource kopfexamples.v1.kopf.dev is gone from the API server; waiting for it to come back.", T).await;

    kex::install_crd(&client).await;
    kex::create(&client, "default", "after", json!({})).await;
    controller.wait_log("Resource kopfexamples.v1.kopf.dev is back on the API server; resuming the watch.", T).await;
    controller.wait_log("[default/after] Creation is processed: 1 succeeded; 0 failed.", T).await;
    assert_eq!(server.count("create_fn"), 2, "{:#?}", controller.log());
    controller.stop().await;
    stopper.stop().await;
}
