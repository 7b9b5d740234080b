//! Kopf's 02-children: a Pod for every KopfExample, owned by it, so that deleting the
//! KopfExample garbage-collects the Pod. The handler only describes the Pod; the controller
//! creates it, adopts it and records its UID in the result as `children`.

use bosun_sdk::{Cause, HandlerError, Operator};
use serde_json::json;

/// Renders the Pod from the spec and asks for it to be created as a child (Kopf's
/// `kopf.adopt` + `pod.create()`). The controller names it `<owner>-pod`, copies the owner's
/// namespace and labels, sets the owner reference, and stores
/// `status.create_fn = {"children": [<uid>]}`.
async fn create_fn(cause: Cause) -> Result<(), HandlerError> {
    let spec = cause.spec();
    let duration = spec.get("duration").cloned().unwrap_or(json!(0));
    let duration = duration.as_str().map_or_else(|| duration.to_string(), String::from);
    let field = spec["field"].as_str().unwrap_or("default-value");
    cause.adopt(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "spec": {
            "containers": [{
                "name": "the-only-one",
                "image": "busybox",
                "command": ["sh", "-x", "-c"],
                "args": [format!("echo \"FIELD=$FIELD\"\nsleep {duration}\n")],
                "env": [{"name": "FIELD", "value": field}],
            }],
        },
    }));
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), bosun_sdk::ServeError> {
    Operator::new()
        // What the handlers create, so that `bosun rbac` gives the controller `create pods`.
        .owns("kopf.dev/v1/kopfexamples", ["v1/pods"])
        .on_create("kopf.dev/v1/kopfexamples", create_fn)
        .serve_default()
        .await
}
