//! `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`: the server-side printing kubectl
//! uses for `kubectl get` — columns per built-in kind, `additionalPrinterColumns` for custom
//! resources, each row with the object's metadata as `PartialObjectMetadata`.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::registry::ResourceInfo;
use crate::store::Obj;

const NAME_DESC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const AGE_DESC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const DATA_DESC: &str = "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.";

fn col(name: &str, type_: &str, format: &str, description: &str, priority: i64) -> Value {
    json!({"name": name, "type": type_, "format": format, "description": description, "priority": priority})
}

fn age(v: &Value) -> Value {
    let Some(ts) = v.get("metadata").and_then(|v| v.get("creationTimestamp")).and_then(Value::as_str) else {
        return json!("<unknown>");
    };
    let Ok(t) = chrono::DateTime::parse_from_rfc3339(ts) else {
        return json!("<unknown>");
    };
    let secs = (chrono::Utc::now() - t.with_timezone(&chrono::Utc)).num_seconds().max(0);
    json!(match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86400 * 2 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    })
}

fn s<'a>(v: &'a Value, p: &str) -> &'a str {
    v.pointer(p).and_then(Value::as_str).unwrap_or("")
}

fn count(v: &Value, p: &str) -> usize {
    v.pointer(p).and_then(Value::as_object).map_or(0, |m| m.len())
}

/// Evaluate a simple JSONPath (`.a.b`, `.a[0].b`, `.a['x.y']`).
fn json_path(v: &Value, path: &str) -> Value {
    let mut cur = v;
    let mut rest = path.trim_start_matches('{').trim_end_matches('}').trim_start_matches('.');
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']').unwrap_or(r.len());
            let key = &r[..end];
            rest = r.get(end + 1..).unwrap_or("").trim_start_matches('.');
            cur = match key.parse::<usize>() {
                Ok(i) => match cur.get(i) {
                    Some(c) => c,
                    None => return Value::Null,
                },
                Err(_) => match cur.get(key.trim_matches('\'').trim_matches('"')) {
                    Some(c) => c,
                    None => return Value::Null,
                },
            };
            continue;
        }
        let end = rest.find(['.', '[']).unwrap_or(rest.len());
        let key = &rest[..end];
        rest = rest[end..].trim_start_matches('.');
        cur = match cur.get(key) {
            Some(c) => c,
            None => return Value::Null,
        };
    }
    cur.clone()
}

type Row = fn(&Value) -> Vec<Value>;

fn builtin_columns(info: &ResourceInfo) -> (Vec<Value>, Row) {
    let name = col("Name", "string", "name", NAME_DESC, 0);
    let agec = col("Age", "string", "", AGE_DESC, 0);
    match (info.group.as_str(), info.plural.as_str()) {
        ("", "configmaps") => (vec![name, col("Data", "string", "", DATA_DESC, 0), agec], |v| {
            vec![json!(crate::registry::name_of(v)), json!(count(v, "/data") + count(v, "/binaryData")), age(v)]
        }),
        ("", "secrets") => (
            vec![
                name,
                col("Type", "string", "", "Used to facilitate programmatic handling of secret data.", 0),
                col("Data", "string", "", "Data contains the secret data.", 0),
                agec,
            ],
            |v| vec![json!(crate::registry::name_of(v)), json!(s(v, "/type")), json!(count(v, "/data")), age(v)],
        ),
        ("", "namespaces") => (vec![name, col("Status", "string", "", "The status of the namespace", 0), agec], |v| {
            vec![json!(crate::registry::name_of(v)), json!(s(v, "/status/phase")), age(v)]
        }),
        ("", "pods") => (
            vec![
                name,
                col("Ready", "string", "", "The aggregate readiness state of this pod for accepting traffic.", 0),
                col("Status", "string", "", "The aggregate status of the containers in this pod.", 0),
                col(
                    "Restarts",
                    "string",
                    "",
                    "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
                    0,
                ),
                agec,
                col("IP", "string", "", "The IP address assigned to the pod", 1),
                col("Node", "string", "", "The name of the node assigned to the pod", 1),
            ],
            |v| {
                let n = v.get("spec").and_then(|v| v.get("containers")).and_then(Value::as_array).map_or(0, Vec::len);
                let status = if v.get("metadata").and_then(|v| v.get("deletionTimestamp")).is_some() {
                    "Terminating"
                } else {
                    s(v, "/status/phase")
                };
                vec![
                    json!(crate::registry::name_of(v)),
                    json!(format!("0/{n}")),
                    json!(status),
                    json!("0"),
                    age(v),
                    json!(if s(v, "/status/podIP").is_empty() { "<none>" } else { s(v, "/status/podIP") }),
                    json!(if s(v, "/spec/nodeName").is_empty() { "<none>" } else { s(v, "/spec/nodeName") }),
                ]
            },
        ),
        ("", "services") => (
            vec![
                name,
                col("Type", "string", "", "The type of the service.", 0),
                col("Cluster-IP", "string", "", "The IP address of the service.", 0),
                col("External-IP", "string", "", "The external IP address of the service.", 0),
                col("Port(s)", "string", "", "The port(s) of the service.", 0),
                agec,
            ],
            |v| {
                let ports: Vec<String> = v
                    .get("spec")
                    .and_then(|v| v.get("ports"))
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|p| format!("{}/{}", p["port"], p["protocol"].as_str().unwrap_or("TCP")))
                    .collect();
                vec![
                    json!(crate::registry::name_of(v)),
                    json!(s(v, "/spec/type")),
                    json!(s(v, "/spec/clusterIP")),
                    json!("<none>"),
                    json!(if ports.is_empty() { "<none>".to_string() } else { ports.join(",") }),
                    age(v),
                ]
            },
        ),
        ("coordination.k8s.io", "leases") => (vec![name, col("Holder", "string", "", "The holder of the lease", 0), agec], |v| {
            vec![json!(crate::registry::name_of(v)), json!(s(v, "/spec/holderIdentity")), age(v)]
        }),
        ("apps", "deployments") => (
            vec![
                name,
                col("Ready", "string", "", "Number of the pod with ready state", 0),
                col(
                    "Up-to-date",
                    "string",
                    "",
                    "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
                    0,
                ),
                col(
                    "Available",
                    "string",
                    "",
                    "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
                    0,
                ),
                agec,
            ],
            |v| {
                let want = v.get("spec").and_then(|v| v.get("replicas")).and_then(Value::as_i64).unwrap_or(1);
                let ready = v.get("status").and_then(|v| v.get("readyReplicas")).and_then(Value::as_i64).unwrap_or(0);
                vec![
                    json!(crate::registry::name_of(v)),
                    json!(format!("{ready}/{want}")),
                    json!(v.get("status").and_then(|v| v.get("updatedReplicas")).and_then(Value::as_i64).unwrap_or(0)),
                    json!(v.get("status").and_then(|v| v.get("availableReplicas")).and_then(Value::as_i64).unwrap_or(0)),
                    age(v),
                ]
            },
        ),
        ("", "events") | ("events.k8s.io", "events") => (
            vec![
                col("Last Seen", "string", "", "Time when this Event was last observed", 0),
                col("Type", "string", "", "Type of this event (Normal, Warning), new types could be added in the future.", 0),
                col(
                    "Reason",
                    "string",
                    "",
                    "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
                    0,
                ),
                col("Object", "string", "", "The object that this event is about.", 0),
                col("Message", "string", "", "A human-readable description of the status of this operation.", 0),
                name,
            ],
            |v| {
                let obj = format!("{}/{}", s(v, "/involvedObject/kind").to_lowercase(), s(v, "/involvedObject/name"));
                vec![
                    age(v),
                    json!(s(v, "/type")),
                    json!(s(v, "/reason")),
                    json!(obj),
                    json!(s(v, "/message")),
                    json!(crate::registry::name_of(v)),
                ]
            },
        ),
        ("apiextensions.k8s.io", "customresourcedefinitions") => (vec![name, col("Created At", "date", "", AGE_DESC, 0)], |v| {
            vec![json!(crate::registry::name_of(v)), json!(s(v, "/metadata/creationTimestamp"))]
        }),
        _ => (vec![name, agec], |v| vec![json!(crate::registry::name_of(v)), age(v)]),
    }
}

/// Render objects as a Table.
pub fn render(info: &ResourceInfo, objs: &[Arc<Obj>], rv: &str, include: Option<&str>, cont: Option<&str>) -> Value {
    let (columns, rows): (Vec<Value>, Vec<Value>) = if info.builtin {
        let (cols, row) = builtin_columns(info);
        let rows = objs.iter().map(|o| json!({"cells": row(&o.value), "object": partial(&o.value, include)})).collect();
        (cols, rows)
    } else {
        let mut cols = vec![col("Name", "string", "name", NAME_DESC, 0)];
        let mut paths = Vec::new();
        for c in &info.columns {
            cols.push(col(&c.name, &c.type_, &c.format, &c.description, c.priority));
            paths.push((c.json_path.clone(), c.type_.clone()));
        }
        if info.columns.is_empty() {
            cols.push(col("Age", "date", "", AGE_DESC, 0));
            paths.push((".metadata.creationTimestamp".into(), "date".into()));
        }
        let rows = objs
            .iter()
            .map(|o| {
                let mut cells = vec![json!(crate::registry::name_of(&o.value))];
                for (p, t) in &paths {
                    let v = json_path(&o.value, p);
                    cells.push(match (t.as_str(), v) {
                        ("date", Value::String(_)) => age(&o.value),
                        (_, v) => v,
                    });
                }
                json!({"cells": cells, "object": partial(&o.value, include)})
            })
            .collect();
        (cols, rows)
    };
    let mut meta = json!({"resourceVersion": rv});
    if let Some(c) = cont {
        meta["continue"] = json!(c);
    }
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta, "columnDefinitions": columns, "rows": rows})
}

fn partial(v: &Value, include: Option<&str>) -> Value {
    match include {
        Some("None") => Value::Null,
        Some("Object") => v.clone(),
        _ => {
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": v.get("metadata").cloned().unwrap_or(json!({}))})
        }
    }
}
