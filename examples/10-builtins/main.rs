//! Kopf's 10-builtins: handlers on a built-in resource, Pods. Every Pod outside the `kube-*`
//! namespaces gets a "killer" 30 s after it is created or first seen by a restarted controller;
//! deleting the Pod first cancels it. Pods' status cannot keep foreign fields, so the
//! controller keeps its progress, diffbase (and results, if any) in annotations.
//!
//! The killer deletes the Pod with a Kubernetes client of its own, as Kopf's does: it runs
//! outside any handler call, so the controller cannot do it for it. The client reads
//! `KUBECONFIG`, which `bosun dev` sets for the handler server it starts.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use bosun_sdk::{Cause, HandlerError, Operator};
use tokio::task::AbortHandle;

const PODS: &str = "v1/pods";

/// How long a Pod may live: Kopf's `timeout=30`, or `POD_KILL_AFTER_SECONDS` (the example's
/// test uses a few seconds).
static TIMEOUT: LazyLock<Duration> = LazyLock::new(|| {
    let secs = std::env::var("POD_KILL_AFTER_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(30);
    Duration::from_secs(secs)
});

/// The pending killers by namespace and name (Kopf's `tasks`); they live in this process only.
static TASKS: LazyLock<Mutex<HashMap<(String, String), AbortHandle>>> = LazyLock::new(Default::default);

fn key(cause: &Cause) -> (String, String) {
    (cause.namespace().unwrap_or_default().to_string(), cause.name().to_string())
}

/// On creation and on resuming: schedules the Pod's killer, once per Pod (calls are
/// at-least-once, so a repeated call keeps the killer already scheduled).
async fn pod_in_sight(cause: Cause) -> Result<(), HandlerError> {
    let (namespace, name) = key(&cause);
    if namespace.starts_with("kube-") {
        return Ok(());
    }
    cause.info(format!("=== Pod killing happens in {}s.", TIMEOUT.as_secs()));
    TASKS
        .lock()
        .expect("the task map is never poisoned")
        .entry((namespace.clone(), name.clone()))
        .or_insert_with(|| tokio::spawn(pod_killer(namespace, name)).abort_handle());
    Ok(())
}

/// On deletion: cancels the Pod's killer, if this process has one.
async fn pod_deleted(cause: Cause) -> Result<(), HandlerError> {
    let task = TASKS.lock().expect("the task map is never poisoned").remove(&key(&cause));
    if let Some(task) = task {
        task.abort();
        cause.info("=== Pod killing is cancelled!");
    }
    Ok(())
}

async fn pod_killer(namespace: String, name: String) {
    tokio::time::sleep(*TIMEOUT).await;
    TASKS.lock().expect("the task map is never poisoned").remove(&(namespace.clone(), name.clone()));
    // Outside a handler call, so this goes to this server's stderr, not the controller's log.
    eprintln!("[{namespace}/{name}] === Pod killing happens NOW!");
    let deleted = async {
        let client = kube::Client::try_default().await?;
        let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(client, &namespace);
        pods.delete(&name, &Default::default()).await.map(|_| ())
    };
    if let Err(e) = deleted.await {
        eprintln!("[{namespace}/{name}] === Pod killing failed: {e}");
    }
}

#[tokio::main]
async fn main() -> Result<(), bosun_sdk::ServeError> {
    Operator::new()
        .on_create(PODS, pod_in_sight)
        .on_resume(PODS, pod_in_sight)
        .id("pod_in_sight_on_resume") // ids are unique per server, across causes
        .on_delete(PODS, pod_deleted)
        .serve_default()
        .await
}
