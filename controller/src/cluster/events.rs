//! Posting core/v1 Events about objects (handler-requested ones and failures), as Kopf does:
//! message cut to 1024 characters, source component `bosun`.

use chrono::Utc;
use serde_json::{Value, json};

use super::{Api, Error};

/// Longest event message; longer ones are cut with an ellipsis.
pub const MAX_MESSAGE: usize = 1024;

/// What an event is about.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Regarding {
    /// apiVersion of the object.
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Namespace (empty for cluster-scoped objects).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID.
    pub uid: String,
}

impl Regarding {
    /// Reads the reference out of an object body.
    pub fn of(body: &Value) -> Regarding {
        let top = |k: &str| body.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        let meta = |k: &str| crate::object::meta_str(body, k).to_string();
        Regarding { api_version: top("apiVersion"), kind: top("kind"), namespace: meta("namespace"), name: meta("name"), uid: meta("uid") }
    }
}

/// Cuts a message to the event size limit on a character boundary.
pub fn cut_message(message: &str) -> String {
    if message.len() <= MAX_MESSAGE {
        return message.to_string();
    }
    let mut end = MAX_MESSAGE - 3;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &message[..end])
}

/// Builds the Event object.
pub fn event_body(regarding: &Regarding, type_: &str, reason: &str, message: &str) -> Value {
    let now = Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let namespace = if regarding.namespace.is_empty() { "default" } else { regarding.namespace.as_str() };
    json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": "bosun-event-", "namespace": namespace},
        "involvedObject": {
            "apiVersion": regarding.api_version,
            "kind": regarding.kind,
            "name": regarding.name,
            "namespace": regarding.namespace,
            "uid": regarding.uid,
        },
        "type": if type_.is_empty() { "Normal" } else { type_ },
        "reason": reason,
        "message": cut_message(message),
        "source": {"component": "bosun"},
        "reportingComponent": "bosun",
        "reportingInstance": "bosun",
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    })
}

/// Posts an event.
pub async fn post(cluster: &dyn Api, regarding: &Regarding, type_: &str, reason: &str, message: &str) -> Result<(), Error> {
    let body = event_body(regarding, type_, reason, message);
    let ns = body["metadata"]["namespace"].as_str().unwrap_or("default").to_string();
    cluster.create(&format!("/api/v1/namespaces/{ns}/events"), &body).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_cut_to_the_limit() {
        let cases = [("short".to_string(), "short".to_string()), ("x".repeat(1024), "x".repeat(1024))];
        for (input, want) in cases {
            assert_eq!(cut_message(&input), want);
        }
        let cut = cut_message(&"é".repeat(1000));
        assert!(cut.len() <= MAX_MESSAGE && cut.ends_with("..."), "{}", cut.len());
    }

    #[test]
    fn events_point_at_the_object_and_default_namespace_for_cluster_objects() {
        let obj = serde_json::json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "n", "uid": "u"}});
        let e = event_body(&Regarding::of(&obj), "Warning", "Error", "boom");
        assert_eq!(e["metadata"]["namespace"], "default");
        assert_eq!(e["involvedObject"]["kind"], "KopfExample");
        assert_eq!(e["type"], "Warning");
        assert_eq!(e["source"]["component"], "bosun");
    }
}
