//! Server-level behaviour: bearer tokens, `/metrics` request counters, and persistence in a
//! data directory across restarts.

use bosun_devcluster::{Config, DevCluster};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::json;

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"a": "1"}})).unwrap()
}

async fn http_get(base: &str, path: &str, token: Option<&str>) -> (u16, String) {
    let client = kube::Client::try_from(kube::Config::new(base.parse().unwrap())).unwrap();
    let mut req = http::Request::get(path).body(Vec::new()).unwrap();
    if let Some(t) = token {
        req.headers_mut().insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
    let resp = client.send(req.map(Into::into)).await.unwrap();
    let code = resp.status().as_u16();
    let body = http_body_util::BodyExt::collect(resp.into_body()).await.unwrap().to_bytes();
    (code, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn requests_without_the_token_are_unauthorized() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dc = DevCluster::start(listener, Config { token: Some("s3cret".into()), ..Default::default() }).await.unwrap();
    let (code, _) = http_get(&dc.url(), "/api/v1/namespaces", None).await;
    assert_eq!(code, 401);
    let (code, _) = http_get(&dc.url(), "/api/v1/namespaces", Some("wrong")).await;
    assert_eq!(code, 401);
    let api: Api<ConfigMap> = Api::namespaced(dc.client(), "default");
    api.create(&PostParams::default(), &cm("a")).await.expect("the client carries the token");
}

#[tokio::test]
async fn metrics_count_requests_by_verb_and_resource() {
    let dc = DevCluster::start_local().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(dc.client(), "default");
    api.create(&PostParams::default(), &cm("a")).await.unwrap();
    api.get("a").await.unwrap();
    api.get("a").await.unwrap();
    let (code, text) = http_get(&dc.url(), "/metrics", None).await;
    assert_eq!(code, 200);
    assert!(
        text.contains(r#"apiserver_request_total{code="200",group="",resource="configmaps",subresource="",verb="GET",version="v1"} 2"#),
        "{text}"
    );
    assert!(text.contains(r#"resource="configmaps",subresource="",verb="POST""#), "{text}");
}

#[tokio::test]
async fn objects_survive_a_restart_with_a_data_dir_and_versions_keep_increasing() {
    let dir = tempfile::tempdir().unwrap();
    let config = || Config { data_dir: Some(dir.path().to_path_buf()), ..Default::default() };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dc = DevCluster::start(listener, config()).await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(dc.client(), "default");
    let before = api.create(&PostParams::default(), &cm("kept")).await.unwrap();
    api.create(&PostParams::default(), &cm("gone")).await.unwrap();
    api.delete("gone", &Default::default()).await.unwrap();
    dc.shutdown().await;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dc = DevCluster::start(listener, config()).await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(dc.client(), "default");
    let after = api.get("kept").await.unwrap();
    assert_eq!(before.metadata.uid, after.metadata.uid);
    assert!(api.get_opt("gone").await.unwrap().is_none());
    let new = api.create(&PostParams::default(), &cm("new")).await.unwrap();
    let rv = |c: &ConfigMap| c.metadata.resource_version.clone().unwrap().parse::<u64>().unwrap();
    assert!(rv(&new) > rv(&after));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_open_watches_and_stops_serving() {
    use futures::StreamExt;
    let dc = DevCluster::start_local().await.unwrap();
    let client = dc.client();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let wp = kube::api::WatchParams { bookmarks: false, ..Default::default() };
    let stream = api.watch(&wp, "0").await.unwrap();
    dc.shutdown().await;
    let ended = tokio::time::timeout(std::time::Duration::from_secs(5), stream.collect::<Vec<_>>()).await;
    assert!(ended.is_ok(), "the watch ends when the server stops");
    assert!(api.list(&Default::default()).await.is_err(), "nothing is served after shutdown");
}

#[tokio::test]
async fn compacting_the_log_while_running_keeps_every_object() {
    let dir = tempfile::tempdir().unwrap();
    let config = || Config { data_dir: Some(dir.path().to_path_buf()), ..Default::default() };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dc = DevCluster::start(listener, config()).await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(dc.client(), "default");
    for i in 0..20 {
        api.create(&PostParams::default(), &cm(&format!("c{i}"))).await.unwrap();
    }
    for i in 0..10 {
        api.delete(&format!("c{i}"), &Default::default()).await.unwrap();
    }
    let log = dir.path().join("objects.log");
    let before = std::fs::metadata(&log).unwrap().len();
    dc.cluster().store.compact_log(true);
    assert!(std::fs::metadata(&log).unwrap().len() < before, "the log shrank");
    api.create(&PostParams::default(), &cm("late")).await.unwrap();
    dc.shutdown().await;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dc = DevCluster::start(listener, config()).await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(dc.client(), "default");
    let mut names: Vec<String> = api.list(&Default::default()).await.unwrap().items.into_iter().filter_map(|c| c.metadata.name).collect();
    names.sort();
    let mut want: Vec<String> = (10..20).map(|i| format!("c{i}")).chain(["late".to_string()]).collect();
    want.sort();
    assert_eq!(names, want);
}
