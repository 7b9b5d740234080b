//! Kopf's 16-indexing: in-memory indices of Pods, kept in this handler server and read by a
//! timer on the KopfExample objects and by the liveness probes, without asking the API server.
//!
//! Index handlers are called for every Pod event (the listing included) and for deletions;
//! the controller calls no other handler before the Pods of its first listing are indexed, so
//! the timer's first tick already sees them all. Kopf's tuple keys `(namespace, name)` are
//! strings here: `namespace/name`.

use std::time::Duration;

use bosun_sdk::{Cause, HandlerError, Operator};
use serde_json::{Value, json};

/// Every Pod: whether it is running, by `namespace/name`.
async fn is_running(cause: Cause) -> Result<Value, HandlerError> {
    let key = format!("{}/{}", cause.namespace().unwrap_or_default(), cause.name());
    Ok(json!({ key: cause.status()["phase"] == "Running" }))
}

/// Every Pod's name, by each of its labels as `label=value`.
async fn by_label(cause: Cause) -> Result<Value, HandlerError> {
    let labels = cause.labels();
    Ok(labels.iter().map(|(label, value)| (format!("{label}={value}"), json!(cause.name()))).collect())
}

async fn pod_count(cause: Cause) -> Result<usize, HandlerError> {
    Ok(cause.index("is_running").map_or(0, |i| i.len()))
}

async fn pod_names(cause: Cause) -> Result<Vec<String>, HandlerError> {
    let index = cause.index("is_running").unwrap_or_default();
    Ok(index.keys().into_iter().filter_map(|k| k.split_once('/').map(|(_, name)| name.to_string())).collect())
}

/// Lists the running Pods of `kube-system` and `default` in the object's status.
async fn intervalled(cause: Cause) -> Result<(), HandlerError> {
    let (is_running, by_label) = (cause.index("is_running").unwrap_or_default(), cause.index("by_label").unwrap_or_default());
    cause.info(format!("{:?}", by_label.to_map()));
    let running: Vec<String> = is_running
        .to_map()
        .into_iter()
        .filter(|(key, values)| {
            let namespace = key.split_once('/').map_or("", |(ns, _)| ns);
            ["kube-system", "default"].contains(&namespace) && values.iter().any(|v| v == &json!(true))
        })
        .map(|(key, _)| key.replacen('/', "::", 1))
        .collect();
    cause.patch().status("running-pods", running);
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), bosun_sdk::ServeError> {
    bosun_sdk::init_logging();
    // Kopf's 5 s, or `INDEXING_INTERVAL_SECONDS` (the example's test uses less).
    let interval = std::env::var("INDEXING_INTERVAL_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(5.0);
    Operator::new()
        .index("v1/pods", is_running)
        .index("v1/pods", by_label)
        .on_probe(pod_count)
        .on_probe(pod_names)
        .on_timer("kopf.dev/v1/kopfexamples", Duration::from_secs_f64(interval), intervalled)
        .serve_default()
        .await
}
