//! Faults a real API server survives: restarts, deleted CRDs,
//! abusive patches and objects, slow writes, stalled connections and watchers that fall
//! behind. Each test sends what a client sends over real HTTP and checks the real server's
//! answer.

#[path = "support/http.rs"]
mod http_support;
use std::time::Duration;

use bosun_devcluster::{Config, DevCluster};
use http_body_util::BodyExt;
use http_support::send;
use serde_json::{Value, json};

/// Creates the ConfigMap `name` in `default` with `data`; its resourceVersion.
async fn create_cm(dc: &DevCluster, name: &str, data: Value) -> String {
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data});
    let (code, _, text) = send(dc, "POST", "/api/v1/namespaces/default/configmaps", Some("application/json"), Some(cm), false).await;
    assert_eq!(code, 201, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    v["metadata"]["resourceVersion"].as_str().unwrap().to_string()
}

/// The events of a watch body, one JSON value a line.
fn events(text: &str) -> Vec<Value> {
    text.lines().filter(|l| !l.is_empty()).map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}

async fn start(config: Config) -> DevCluster {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    DevCluster::start(listener, config).await.unwrap()
}

#[tokio::test]
async fn a_watch_from_before_a_restart_is_gone_and_one_from_the_restored_version_is_a_watch_from_now() {
    let dir = tempfile::tempdir().unwrap();
    let config = || Config { data_dir: Some(dir.path().to_path_buf()), ..Default::default() };
    let dc = start(config()).await;
    let old = create_cm(&dc, "before", json!({"a": "1"})).await;
    let last = create_cm(&dc, "last", json!({"a": "1"})).await;
    dc.shutdown().await;

    let dc = start(config()).await;
    // What happened after `old` (the ConfigMap `last`) is not in the restored history: Gone.
    let path = format!("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={old}&timeoutSeconds=5");
    let (code, _, text) = send(&dc, "GET", &path, None, None, true).await;
    let evs = events(&text);
    assert_eq!(code, 200, "{text}");
    assert_eq!(evs.len(), 1, "{text}");
    assert_eq!((evs[0]["type"].as_str(), evs[0]["object"]["code"].as_i64()), (Some("ERROR"), Some(410)), "{text}");
    assert_eq!(evs[0]["object"]["reason"], "Expired");
    let message = evs[0]["object"]["message"].as_str().unwrap();
    assert!(message.starts_with(&format!("too old resource version: {old} (")), "{message}");

    // From the restored version, a watch sees what comes next, and nothing from before.
    let restored: u64 = last.parse().unwrap();
    let path = format!("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={restored}&timeoutSeconds=5");
    let watch = tokio::spawn({
        let client = dc.client();
        async move {
            let req = http::Request::get(path).body(Vec::new()).unwrap();
            let resp = client.send(req.map(Into::into)).await.unwrap();
            let frame = tokio::time::timeout(Duration::from_secs(10), resp.into_body().frame()).await.expect("an event in time");
            String::from_utf8(frame.unwrap().unwrap().into_data().unwrap().to_vec()).unwrap()
        }
    });
    create_cm(&dc, "after", json!({"a": "1"})).await;
    let text = watch.await.unwrap();
    let evs = events(&text);
    let seen: Vec<(&str, &str)> =
        evs.iter().map(|e| (e["type"].as_str().unwrap_or(""), e["object"]["metadata"]["name"].as_str().unwrap_or(""))).collect();
    assert_eq!(seen, [("ADDED", "after")], "{text}");
}

/// A CRD `widgets.faults.bosun.dev` whose `spec.x`, if given, must match `pattern`.
fn widget_crd(pattern: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.faults.bosun.dev"},
        "spec": {"group": "faults.bosun.dev", "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object", "properties": {"spec": {"type": "object", "properties": {"x": {"type": "string", "pattern": pattern}}}}}}}]}
    })
}

const WIDGETS: &str = "/apis/faults.bosun.dev/v1/namespaces/default/widgets";

/// Creates the CRD and waits until its resource is served.
async fn create_widget_crd(dc: &DevCluster, pattern: &str) {
    let path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        // A CRD of the same name may still be going (its cleanup finalizer): 409 until it is gone.
        let (code, _, text) = send(dc, "POST", path, Some("application/json"), Some(widget_crd(pattern)), false).await;
        if code == 201 {
            break;
        }
        assert_eq!(code, 409, "{text}");
        assert!(tokio::time::Instant::now() < deadline, "the old CRD is never gone: {text}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while send(dc, "GET", WIDGETS, None, None, false).await.0 != 200 {
        assert!(tokio::time::Instant::now() < deadline, "the CRD is never served");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn create_widget(dc: &DevCluster, name: &str, x: &str) -> (u16, String) {
    let w = json!({"apiVersion": "faults.bosun.dev/v1", "kind": "Widget", "metadata": {"name": name}, "spec": {"x": x}});
    let (code, _, text) = send(dc, "POST", WIDGETS, Some("application/json"), Some(w), false).await;
    (code, text)
}

/// Opens a watch of widgets from now; the stream of its body.
async fn watch_widgets(dc: &DevCluster) -> kube::client::Body {
    let (code, _, text) = send(dc, "GET", WIDGETS, None, None, false).await;
    assert_eq!(code, 200, "{text}");
    let rv = serde_json::from_str::<Value>(&text).unwrap()["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let req = http::Request::get(format!("{WIDGETS}?watch=1&resourceVersion={rv}")).body(Vec::new()).unwrap();
    let resp = dc.client().send(req.map(Into::into)).await.unwrap();
    assert_eq!(resp.status(), 200);
    resp.into_body()
}

/// The next frame of a watch body, as text (or fails after a deadline, saying `what`).
async fn next_frame(body: &mut kube::client::Body, what: &str) -> String {
    let frame = tokio::time::timeout(Duration::from_secs(10), body.frame()).await.expect(what);
    String::from_utf8(frame.unwrap().unwrap().into_data().unwrap().to_vec()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_of_a_deleted_crds_resource_end_and_a_new_crd_of_the_same_name_is_watched_at_once() {
    let dc = DevCluster::start_local().await.unwrap();
    create_widget_crd(&dc, "^a+$").await;
    let mut body = watch_widgets(&dc).await;
    let (code, text) = create_widget(&dc, "w1", "aa").await;
    assert_eq!(code, 201, "{text}");
    let line = next_frame(&mut body, "the watch sees w1").await;
    assert!(line.contains("\"ADDED\"") && line.contains("\"w1\""), "{line}");

    let crd = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.faults.bosun.dev";
    let (code, _, text) = send(&dc, "DELETE", crd, None, None, false).await;
    assert_eq!(code, 200, "{text}");
    // The stream ends cleanly (what is left of it may carry w1's DELETED).
    let rest = tokio::time::timeout(Duration::from_secs(20), body.collect()).await.expect("the watch ends once the CRD is gone");
    let rest = String::from_utf8(rest.expect("a clean end").to_bytes().to_vec()).unwrap();
    assert!(events(&rest).iter().all(|e| e["type"] == "DELETED"), "{rest}");

    create_widget_crd(&dc, "^a+$").await;
    let mut body = watch_widgets(&dc).await;
    let (code, text) = create_widget(&dc, "w2", "aaa").await;
    assert_eq!(code, 201, "{text}");
    let line = next_frame(&mut body, "the new watch sees w2").await;
    let evs = events(&line);
    assert_eq!((evs[0]["type"].as_str(), evs[0]["object"]["metadata"]["name"].as_str()), (Some("ADDED"), Some("w2")), "{line}");
}

#[tokio::test]
async fn values_of_the_wrong_type_are_refused_with_the_go_decoders_message() {
    let dc = DevCluster::start_local().await.unwrap();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bad"}, "data": [1]});
    let (code, _, text) = send(&dc, "POST", "/api/v1/namespaces/default/configmaps", Some("application/json"), Some(cm), false).await;
    let status: Value = serde_json::from_str(&text).unwrap();
    assert_eq!((code, status["reason"].as_str()), (400, Some("BadRequest")), "{text}");
    assert_eq!(
        status["message"],
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot unmarshal array into Go struct field ConfigMap.data of type map[string]string"
    );
    let (code, _, _) = send(&dc, "GET", "/api/v1/namespaces/default/configmaps/bad", None, None, false).await;
    assert_eq!(code, 404, "nothing stored");

    // A merge patch that makes a label a number: 422, the patched object quoted.
    create_cm(&dc, "good", json!({"a": "1"})).await;
    let patch = json!({"metadata": {"labels": {"n": 1}}});
    let path = "/api/v1/namespaces/default/configmaps/good";
    let (code, _, text) = send(&dc, "PATCH", path, Some("application/merge-patch+json"), Some(patch), false).await;
    let status: Value = serde_json::from_str(&text).unwrap();
    assert_eq!((code, status["reason"].as_str()), (422, Some("Invalid")), "{text}");
    let message = status["message"].as_str().unwrap();
    assert!(message.starts_with(" \"\" is invalid: patch: Invalid value: \"{"), "{message}");
    assert!(
        message.ends_with("\": json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string"),
        "{message}"
    );
    assert_eq!(status["details"]["causes"][0]["field"], "patch");
}

#[tokio::test]
async fn a_dry_run_other_than_all_is_refused_and_nothing_is_stored() {
    let dc = DevCluster::start_local().await.unwrap();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dry"}, "data": {"a": "1"}});
    let path = "/api/v1/namespaces/default/configmaps?dryRun=garbage";
    let (code, _, text) = send(&dc, "POST", path, Some("application/json"), Some(cm), false).await;
    let status: Value = serde_json::from_str(&text).unwrap();
    assert_eq!((code, status["reason"].as_str()), (422, Some("Invalid")), "{text}");
    assert_eq!(
        status["message"],
        "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: []string{\"garbage\"}: supported values: \"All\""
    );
    assert_eq!(status["details"]["kind"], "CreateOptions");
    assert_eq!(status["details"]["causes"][0]["reason"], "FieldValueNotSupported");
    let (code, _, _) = send(&dc, "GET", "/api/v1/namespaces/default/configmaps/dry", None, None, false).await;
    assert_eq!(code, 404, "nothing stored");

    create_cm(&dc, "kept", json!({"a": "1"})).await;
    let path = "/api/v1/namespaces/default/configmaps/kept?dryRun=yes";
    let (code, _, text) = send(&dc, "DELETE", path, None, None, false).await;
    assert_eq!(code, 422, "{text}");
    assert!(text.contains("DeleteOptions.meta.k8s.io"), "{text}");
    let (code, _, _) = send(&dc, "GET", "/api/v1/namespaces/default/configmaps/kept", None, None, false).await;
    assert_eq!(code, 200, "not deleted");
}

#[tokio::test]
async fn custom_resources_must_match_their_schemas_patterns_and_a_pattern_must_be_a_regular_expression() {
    let dc = DevCluster::start_local().await.unwrap();
    let path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let (code, _, text) = send(&dc, "POST", path, Some("application/json"), Some(widget_crd("(a")), false).await;
    let status: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(code, 422, "{text}");
    assert_eq!(status["details"]["causes"][0]["field"], "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[x].pattern");

    create_widget_crd(&dc, "^a+$").await;
    let (code, text) = create_widget(&dc, "bad", "abc").await;
    let status: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(code, 422, "{text}");
    assert_eq!(
        status["message"],
        "Widget.faults.bosun.dev \"bad\" is invalid: spec.x: Invalid value: \"abc\": spec.x in body should match '^a+$'"
    );
    let (code, text) = create_widget(&dc, "good", "aaa").await;
    assert_eq!(code, 201, "{text}");
}

#[tokio::test]
async fn a_patch_of_copies_doubling_the_object_stops_and_objects_larger_than_etcd_takes_are_refused() {
    let dc = DevCluster::start_local().await.unwrap();
    create_cm(&dc, "small", json!({"a": "x".repeat(1000)})).await;
    // 24 copies of the whole data into itself: 2^24 times the object, were it applied.
    let ops: Vec<Value> = (0..24).map(|i| json!({"op": "copy", "from": "/data", "path": format!("/data/c{i}")})).collect();
    let path = "/api/v1/namespaces/default/configmaps/small";
    let (code, _, text) = send(&dc, "PATCH", path, Some("application/json-patch+json"), Some(Value::Array(ops)), false).await;
    let status: Value = serde_json::from_str(&text).unwrap();
    assert_eq!((code, status["message"].as_str()), (422, Some("the server rejected our request due to an error in our request")), "{text}");
    let (code, _, text) = send(&dc, "GET", path, None, None, false).await;
    let cm: Value = serde_json::from_str(&text).unwrap();
    assert_eq!((code, cm["data"].as_object().map(|d| d.len())), (200, Some(1)), "the server answers, the object is unchanged");

    // etcd takes 1.5 MiB: a 1.4 MiB ConfigMap is stored, a 1.6 MiB one is not, by create or patch.
    let kib = |n: usize| "x".repeat(n * 1024);
    create_cm(&dc, "fits", json!({"a": kib(1434)})).await;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "too-big"}, "data": {"a": kib(1638)}});
    let (code, _, text) = send(&dc, "POST", "/api/v1/namespaces/default/configmaps", Some("application/json"), Some(cm), false).await;
    let status: Value = serde_json::from_str(&text).unwrap();
    assert_eq!((code, status["message"].as_str()), (500, Some("etcdserver: request is too large")), "{}", &text[..text.len().min(300)]);
    let (code, _, _) = send(&dc, "GET", "/api/v1/namespaces/default/configmaps/too-big", None, None, false).await;
    assert_eq!(code, 404, "nothing stored");
    let grow = json!({"data": {"b": kib(200)}});
    let path = "/api/v1/namespaces/default/configmaps/fits";
    let (code, _, text) = send(&dc, "PATCH", path, Some("application/merge-patch+json"), Some(grow), false).await;
    assert_eq!(code, 500, "{}", &text[..text.len().min(300)]);
    let (code, _, text) = send(&dc, "GET", path, None, None, false).await;
    let cm: Value = serde_json::from_str(&text).unwrap();
    assert_eq!((code, cm["data"].as_object().map(|d| d.len())), (200, Some(1)), "unchanged");
}

/// Waits until `cond` holds (yielding to the server meanwhile), or fails after `secs`.
async fn wait_until(secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// On the test's own single-threaded runtime, which the server shares: a write that computed
/// in place would hold the only thread from its start to its end, so no one could see it in
/// flight, let alone be answered meanwhile.
#[tokio::test]
async fn a_get_is_answered_while_heavy_patches_are_in_flight() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
    let dc = DevCluster::start_local().await.unwrap();
    create_cm(&dc, "light", json!({"a": "1"})).await;
    for i in 0..4 {
        create_cm(&dc, &format!("heavy{i}"), json!({"a": "1"})).await;
    }
    // Slow but allowed: 10,000 finalizers, each added at the front of the list.
    let mut ops = vec![json!({"op": "add", "path": "/metadata/finalizers", "value": []})];
    ops.extend((1..10_000).map(|i| json!({"op": "add", "path": "/metadata/finalizers/0", "value": format!("faults.bosun.dev/f{i}")})));
    let body = serde_json::to_vec(&ops).unwrap();
    let (done, finished) = (std::sync::Arc::new(AtomicBool::new(false)), std::sync::Arc::new(AtomicUsize::new(0)));
    let writers: Vec<_> = (0..4)
        .map(|i| {
            let (client, done, finished, body) = (dc.client(), done.clone(), finished.clone(), body.clone());
            tokio::spawn(async move {
                for _ in 0..50 {
                    if done.load(SeqCst) {
                        break;
                    }
                    let req = http::Request::patch(format!("/api/v1/namespaces/default/configmaps/heavy{i}"))
                        .header("content-type", "application/json-patch+json")
                        .body(body.clone())
                        .unwrap();
                    let resp = client.send(req.map(Into::into)).await.unwrap();
                    assert_eq!(resp.status(), 200);
                    resp.into_body().collect().await.unwrap();
                    finished.fetch_add(1, SeqCst);
                }
            })
        })
        .collect();
    let metrics = &dc.cluster().metrics;
    wait_until(20, "a patch seen in flight", || metrics.mutating_in_flight() > 0).await;
    let (in_flight, finished_before) = (metrics.mutating_in_flight(), finished.load(SeqCst));
    let (code, _, text) = send(&dc, "GET", "/api/v1/namespaces/default/configmaps/light", None, None, false).await;
    assert_eq!(code, 200, "{text}");
    // not all of the patches under way when the GET went out were done when it was answered
    let finished_during = finished.load(SeqCst) - finished_before;
    assert!((finished_during as i64) < in_flight, "{finished_during} patches ended while the GET waited, {in_flight} were under way");
    done.store(true, SeqCst);
    for w in writers {
        w.await.unwrap();
    }
}

/// Reads from a raw connection until the server closes it (or `secs` pass: None).
async fn read_until_closed(stream: &mut tokio::net::TcpStream, secs: u64) -> Option<String> {
    use tokio::io::AsyncReadExt;
    let mut got = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(secs), async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    read.ok().map(|()| String::from_utf8_lossy(&got).into_owned())
}

#[tokio::test]
async fn connections_that_send_no_headers_in_time_are_closed_and_watches_are_not() {
    use tokio::io::AsyncWriteExt;
    let dc = start(Config { header_read_timeout: Duration::from_millis(300), ..Default::default() }).await;
    let addr = dc.url().trim_start_matches("http://").to_string();
    // headers begun and never finished
    let mut stalled = tokio::net::TcpStream::connect(&addr).await.unwrap();
    stalled.write_all(b"GET /version HTTP/1.1\r\nHost: x\r\n").await.unwrap();
    // a request answered, then nothing more on the kept-alive connection
    let mut idle = tokio::net::TcpStream::connect(&addr).await.unwrap();
    idle.write_all(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    assert!(read_until_closed(&mut stalled, 20).await.is_some(), "the stalled connection is closed");
    let answered = read_until_closed(&mut idle, 20).await.expect("the idle connection is closed");
    assert!(answered.starts_with("HTTP/1.1 200"), "{answered}");
    // a silent watch outlives the header timeout and ends cleanly at its own
    let req = http::Request::get("/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1").body(Vec::new()).unwrap();
    let resp = dc.client().send(req.map(Into::into)).await.unwrap();
    let body = tokio::time::timeout(Duration::from_secs(20), resp.into_body().collect()).await.expect("the watch ends");
    assert!(body.is_ok(), "a clean end, not a closed connection");
}

#[tokio::test]
async fn connections_beyond_the_limit_wait_until_one_closes() {
    use tokio::io::AsyncWriteExt;
    let dc = start(Config { max_connections: 2, ..Default::default() }).await;
    let addr = dc.url().trim_start_matches("http://").to_string();
    // two silent connections take the two places (accepted in the order they came)
    let first = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let _second = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let mut third = tokio::net::TcpStream::connect(&addr).await.unwrap();
    third.write_all(b"GET /version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
    // not served while both places are taken (a short look: it can only err towards passing)
    assert!(read_until_closed(&mut third, 1).await.is_none(), "the third connection is not served yet");
    drop(first);
    let answered = read_until_closed(&mut third, 20).await.expect("served once a place is free");
    assert!(answered.starts_with("HTTP/1.1 200"), "{answered}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_whose_reader_falls_too_far_behind_is_ended_while_others_keep_going() {
    // far more than a reader that keeps up lags, far less than what the stalled one will
    let dc = start(Config { watch_lag_limit: 8 * 1024 * 1024, ..Default::default() }).await;
    let rv = create_cm(&dc, "big", json!({"a": "0"})).await;
    let open = |dc: &DevCluster| {
        let req = http::Request::get(format!("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv}&timeoutSeconds=120"))
            .body(Vec::new())
            .unwrap();
        let client = dc.client();
        async move { client.send(req.map(Into::into)).await.unwrap().into_body() }
    };
    // one reader keeps up, the other reads nothing until the writes are done
    let reader = tokio::spawn({
        let body = open(&dc).await;
        async move {
            let mut body = body;
            let (mut text, mut lines) = (Vec::new(), 0);
            while let Some(frame) = body.frame().await {
                let data = frame.unwrap().into_data().unwrap();
                lines += data.iter().filter(|b| **b == b'\n').count();
                text.extend_from_slice(&data);
                if lines >= 200 {
                    break;
                }
            }
            text
        }
    });
    let stalled = open(&dc).await;
    // 200 events of 250 KiB: 50 MB, far more than the connection's buffers hold
    let value = "x".repeat(250 * 1024);
    for i in 0..200 {
        let patch = json!({"data": {"a": format!("{i}{value}")}});
        let path = "/api/v1/namespaces/default/configmaps/big";
        let (code, _, _) = send(&dc, "PATCH", path, Some("application/merge-patch+json"), Some(patch), false).await;
        assert_eq!(code, 200);
    }
    let kept_up = tokio::time::timeout(Duration::from_secs(60), reader).await.expect("the reader sees every event").unwrap();
    assert_eq!(events(&String::from_utf8(kept_up).unwrap()).len(), 200);
    // the stalled watch, read now: what was under way, then a clean end before the last event
    let rest = tokio::time::timeout(Duration::from_secs(60), stalled.collect()).await.expect("the stalled watch ends");
    let rest = String::from_utf8(rest.expect("a clean end").to_bytes().to_vec()).unwrap();
    let got = events(&rest);
    assert!(got.len() < 200, "ended behind: {} events", got.len());
    assert!(got.iter().all(|e| e["type"] == "MODIFIED"), "no ERROR event");
}
