//! What the real `bosun` binary tells its operators, during e2e runs on the dev cluster with a
//! real handler server over gRPC: the metrics endpoint (`--metrics-listen`: `/healthz` at
//! once, `/readyz` once the watches have listed, `/metrics` with the handler-call histogram
//! counting exactly the calls the handler server saw, by outcome) and the log formats
//! (`--log-format json` lines parse and carry the object, cause and handler; `plain` is Kopf's),
//! and `bosun inspect` on a handled object and on one whose handler fails temporarily.

mod support;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bosun_sdk::{Cause, HandlerError, Operator, TemporaryError};
use parking_lot::Mutex;
use serde_json::json;
use support::{Bosun, get, samples};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_endpoint_counts_each_handler_call_by_outcome_and_says_when_ready() {
    let dir = tempfile::tempdir().unwrap();
    let crd = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/crd.yaml");
    let (_cluster, api, kubeconfig) = support::dev_cluster(dir.path(), &[crd]).await;

    // The first attempt of each object fails temporarily (retried after 0.1 s), the second
    // succeeds: the handler server counts what it saw.
    let seen: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let server = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let handlers = format!("http://{}", server.local_addr().unwrap());
    let counted = seen.clone();
    let op = Operator::new()
        .on_create("kopf.dev/v1/kopfexamples", move |cause: Cause| {
            *counted.lock().entry(cause.name().to_string()).or_default() += 1;
            let first = cause.retry() == 0;
            async move {
                if first {
                    return Err(HandlerError::Temporary(TemporaryError::new("not yet").delay(Duration::from_millis(100))));
                }
                Ok::<_, HandlerError>(json!({"done": true}))
            }
        })
        .id("create_fn");
    tokio::spawn(op.serve_with_listener(server, std::future::pending()));

    let mut bosun = Bosun::start(
        dir.path(),
        &["run", "--kubeconfig", &kubeconfig, "--handler", &handlers, "--standalone", "--metrics-listen", "127.0.0.1:0"],
    );
    let line = bosun.wait_line("Serving metrics at http://").await;
    let addr = line.split("http://").nth(1).unwrap().split('/').next().unwrap().to_string();
    assert_eq!(get(&addr, "/healthz").await, (200, "ok\n".to_string()));
    let deadline = Instant::now() + Duration::from_secs(30);
    while get(&addr, "/readyz").await.0 != 200 {
        assert!(Instant::now() < deadline, "not ready within 30 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    for i in 0..5 {
        let obj = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": format!("m-{i}")}, "spec": {}});
        api.create("/apis/kopf.dev/v1/namespaces/default/kopfexamples", &obj).await.unwrap();
    }
    let key = |name: &str, outcome: &str| format!(r#"{name}{{resource="kopfexamples.kopf.dev",handler="create_fn",outcome="{outcome}"}}"#);
    let deadline = Instant::now() + Duration::from_secs(30);
    let scraped = loop {
        let (code, text) = get(&addr, "/metrics").await;
        assert_eq!(code, 200);
        let s = samples(&text);
        if s.get(&key("bosun_handler_calls_total", "success")) == Some(&5.0) {
            break s;
        }
        assert!(Instant::now() < deadline, "not 5 successful calls within 30 s:\n{text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(seen.lock().values().all(|n| *n == 2) && seen.lock().len() == 5, "the server saw {:?}", seen.lock());
    assert_eq!(scraped[&key("bosun_handler_calls_total", "temporary_error")], 5.0);
    assert_eq!(scraped[&key("bosun_handler_call_duration_seconds_count", "success")], 5.0);
    assert_eq!(scraped[&key("bosun_handler_call_duration_seconds_count", "temporary_error")], 5.0);
    // Every call is in the last (+Inf) bucket, and the sum is a duration.
    let inf =
        r#"bosun_handler_call_duration_seconds_bucket{le="+Inf",resource="kopfexamples.kopf.dev",handler="create_fn",outcome="success"}"#;
    assert_eq!(scraped[inf], 5.0);
    assert!(scraped[&key("bosun_handler_call_duration_seconds_sum", "success")] > 0.0);
    assert_eq!(scraped[r#"bosun_handler_retries_total{resource="kopfexamples.kopf.dev",handler="create_fn"}"#], 5.0);
    assert!(scraped[r#"bosun_causes_total{resource="kopfexamples.kopf.dev",cause="create"}"#] >= 5.0);
    // The API requests: the watch, and the patches that stored the results.
    assert!(scraped.keys().any(|k| k.starts_with(r#"bosun_api_requests_total{verb="watch",resource="kopfexamples.kopf.dev""#)));
    let patched: f64 = scraped
        .iter()
        .filter(|(k, _)| {
            k.starts_with(r#"bosun_api_requests_total{verb="patch",resource="kopfexamples.kopf.dev"#) && k.ends_with(r#"code="200"}"#)
        })
        .map(|(_, v)| v)
        .sum();
    assert!(patched >= 5.0, "{patched} patches");
    assert_eq!(scraped[&format!(r#"bosun_handler_server_up{{server="{handlers}"}}"#)], 1.0);
    assert_eq!(scraped["bosun_watches_listing"], 0.0);
    assert_eq!(scraped[r#"bosun_objects{resource="kopfexamples.kopf.dev",state="owned"}"#], 5.0);
    assert!(bosun.interrupt().await.success());
}

/// The dev cluster with the examples' CRD, and a handler server whose `create_fn` succeeds:
/// the cluster, its API, its kubeconfig and the server's address.
async fn examples_cluster(dir: &std::path::Path) -> (bosun_devcluster::DevCluster, bosun_controller::cluster::Cluster, String, String) {
    let crd = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/crd.yaml");
    let (cluster, api, kubeconfig) = support::dev_cluster(dir, &[crd]).await;
    (cluster, api, kubeconfig, support::succeeding_server().await)
}

/// Once `bosun` serves, creates the KopfExample `name` and waits until it is handled; returns
/// the line that says its handler succeeded.
async fn created_and_handled(bosun: &mut Bosun, api: &bosun_controller::cluster::Cluster, name: &str) -> String {
    bosun.wait_line("Handler server").await;
    let obj = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": name}, "spec": {}});
    api.create("/apis/kopf.dev/v1/namespaces/default/kopfexamples", &obj).await.unwrap();
    let succeeded = bosun.wait_line("Handler 'create_fn' succeeded.").await;
    bosun.wait_line("Creation is processed").await;
    succeeded
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_lines_in_json_carry_the_object_cause_and_handler_and_plain_lines_are_kopfs() {
    let dir = tempfile::tempdir().unwrap();
    let (_cluster, api, kubeconfig, handlers) = examples_cluster(dir.path()).await;
    for (format, name) in [("json", "in-json"), ("plain", "in-plain")] {
        let args = ["run", "--kubeconfig", &kubeconfig, "--handler", &handlers, "--standalone", "--log-format", format, "-n", "default"];
        let mut bosun = Bosun::start(dir.path(), &args);
        let succeeded = created_and_handled(&mut bosun, &api, name).await;
        if format == "plain" {
            assert_eq!(succeeded, format!("[default/{name}] Handler 'create_fn' succeeded."));
            assert!(bosun.interrupt().await.success());
            continue;
        }
        let line: serde_json::Value = serde_json::from_str(&succeeded).unwrap_or_else(|e| panic!("{e}: {succeeded}"));
        assert_eq!(line["message"], "Handler 'create_fn' succeeded.", "{line}");
        assert_eq!(line["severity"], "info");
        assert_eq!(line["object"], json!({"namespace": "default", "name": name}));
        assert_eq!(line["cause"], "create");
        assert_eq!(line["handler"], "create_fn");
        assert!(line["timestamp"].as_str().is_some_and(|t| chrono::DateTime::parse_from_rfc3339(t).is_ok()), "{line}");
        let seen = bosun.seen.clone();
        assert!(bosun.interrupt().await.success());
        // Every line bosun printed is one JSON object (the handler server is in this process).
        for l in &seen {
            let parsed: Result<serde_json::Value, _> = serde_json::from_str(l);
            assert!(parsed.is_ok_and(|v| v["message"].is_string() && v["severity"].is_string()), "not a JSON log line: {l}");
        }
    }
}

/// `kopf run`'s flags as Kopf's tests pass them: with `--verbose`, each cycle says what is in
/// progress (Kopf's tests look for it); without it, nothing builds those lines; and
/// `--no-log-prefix` leaves the object's prefix off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kopfs_run_flags_give_kopfs_debug_lines_and_prefixes() {
    let dir = tempfile::tempdir().unwrap();
    let (_cluster, api, kubeconfig, handlers) = examples_cluster(dir.path()).await;
    let runs: [(&[&str], &str); 2] =
        [(&["--all-namespaces", "--verbose", "--standalone"], "verbose"), (&["-A", "--no-log-prefix"], "quiet")];
    for (flags, name) in runs {
        let mut args = vec!["run", "--kubeconfig", &kubeconfig, "--handler", &handlers, "--log-format", "plain"];
        args.extend(flags);
        // The flags choose the levels (an empty RUST_LOG counts as none).
        let mut bosun = Bosun::start_with_env(dir.path(), &args, &[("RUST_LOG", "")]);
        let succeeded = created_and_handled(&mut bosun, &api, name).await;
        if name == "verbose" {
            let line = bosun.wait_line(&format!("[default/{name}] Creation is in progress: {{")).await;
            assert!(line.contains(&format!("\"name\":\"{name}\"")), "the body as JSON: {line}");
        } else {
            assert_eq!(succeeded, "Handler 'create_fn' succeeded.");
            assert_eq!(bosun.count("is in progress"), 0, "no debug lines without -v");
        }
        assert!(bosun.interrupt().await.success());
    }
}

/// `bosun inspect …` run to its end: its stdout, or a failure with what it printed.
fn inspect(dir: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bosun")).arg("inspect").args(args).current_dir(dir).output().unwrap();
    assert!(out.status.success(), "bosun inspect {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_shows_a_temporarily_failing_handlers_next_attempt_and_a_handled_objects_rest() {
    let dir = tempfile::tempdir().unwrap();
    let crd = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/crd.yaml");
    let (_cluster, api, kubeconfig) = support::dev_cluster(dir.path(), &[crd]).await;
    // `stuck` fails for a minute at a time; every other object succeeds.
    let server = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let handlers = format!("http://{}", server.local_addr().unwrap());
    let op = Operator::new()
        .on_create("kopf.dev/v1/kopfexamples", |cause: Cause| {
            let stuck = cause.name() == "stuck";
            async move {
                if stuck {
                    return Err(HandlerError::Temporary(
                        TemporaryError::new("the database is not there yet").delay(Duration::from_secs(60)),
                    ));
                }
                Ok::<_, HandlerError>(json!({"done": true}))
            }
        })
        .id("create_fn");
    tokio::spawn(op.serve_with_listener(server, std::future::pending()));
    let mut bosun = Bosun::start(dir.path(), &["run", "--kubeconfig", &kubeconfig, "--handler", &handlers, "--standalone"]);
    for name in ["stuck", "fine"] {
        let obj = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": name}, "spec": {}});
        api.create("/apis/kopf.dev/v1/namespaces/default/kopfexamples", &obj).await.unwrap();
    }
    bosun.wait_line("[default/stuck] Handler 'create_fn' failed temporarily: the database is not there yet").await;
    bosun.wait_line("[default/fine] Creation is processed: 1 succeeded; 0 failed.").await;

    let stuck = inspect(dir.path(), &["kopfexamples", "stuck", "-n", "default", "--kubeconfig", &kubeconfig]);
    for want in [
        "KopfExample default/stuck (uid ",
        "Cause in progress: create (1 handler(s) not finished).",
        "  create_fn: retrying: 1 attempt(s) failed; next attempt in ",
        "; last message: the database is not there yet [started ",
        "Diffbase: none",
    ] {
        assert!(stuck.contains(want), "no {want:?} in:\n{stuck}");
    }
    // Within the minute it waits: the next attempt is ahead by 50 s or more.
    let ahead = stuck.split("next attempt in ").nth(1).and_then(|r| r.split('s').next()).unwrap_or("");
    assert!(ahead.parse::<u64>().is_ok_and(|s| (50..=60).contains(&s)) || ahead.contains('m'), "{stuck}");

    let fine = inspect(dir.path(), &["kopfexamples", "fine", "--kubeconfig", &kubeconfig]);
    assert!(fine.contains("Cause: none in progress. The object was handled"), "{fine}");
    assert!(fine.contains("Diffbase: ") && !fine.contains("Diffbase: none"), "{fine}");

    // As a kubectl plugin: the binary on the PATH as `kubectl-bosun`.
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_bosun"), bin.join("kubectl-bosun")).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let out = std::process::Command::new("kubectl")
        .args(["bosun", "inspect", "kopfexamples", "stuck", "--kubeconfig", &kubeconfig])
        .env("PATH", path)
        .output()
        .expect("kubectl runs (CI installs it)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("create_fn: retrying"), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(bosun.interrupt().await.success());
}
