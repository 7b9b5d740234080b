//! The cells and columns the printers are made of: the real printers' helpers
//! (`translateTimestampSince`, `formatLabels`, `formatSelector`, …) and column definitions.

use serde_json::{Value, json};

/// The description of the Name column.
pub const NAME_DESC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
/// The description of the Age (and Created At) column.
pub const AGE_DESC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
pub(super) const CONTAINERS_DESC: &str = "Names of each container in the template.";
pub(super) const IMAGES_DESC: &str = "Images referenced by each container in the template.";

/// The cells of one object's row.
pub type Row = fn(&Value) -> Vec<Value>;

/// A column definition.
pub fn col(name: &str, type_: &str, format: &str, description: &str, priority: i64) -> Value {
    json!({"name": name, "type": type_, "format": format, "description": description, "priority": priority})
}

/// A shown (priority 0) string column.
pub(super) fn text(name: &str, description: &str) -> Value {
    col(name, "string", "", description, 0)
}

/// A shown integer column.
pub(super) fn int_col(name: &str, description: &str) -> Value {
    col(name, "integer", "", description, 0)
}

/// A wide-only (priority 1) string column.
pub(super) fn wide(name: &str, description: &str) -> Value {
    col(name, "string", "", description, 1)
}

pub(super) fn name_col() -> Value {
    col("Name", "string", "name", NAME_DESC, 0)
}

pub(super) fn age_col() -> Value {
    text("Age", AGE_DESC)
}

/// The Containers and Images wide columns of kinds with a pod template.
pub(super) fn template_cols() -> [Value; 2] {
    [wide("Containers", CONTAINERS_DESC), wide("Images", IMAGES_DESC)]
}

/// `translateTimestampSince` of the object's creation.
pub fn age(v: &Value) -> Value {
    json!(since(v.pointer("/metadata/creationTimestamp").and_then(Value::as_str)))
}

/// A timestamp as a short duration until now (`5s`, `3m`, `2h`, `4d`), `<unknown>` if absent.
pub(super) fn since(ts: Option<&str>) -> String {
    let Some(t) = ts.and_then(|ts| chrono::DateTime::parse_from_rfc3339(ts).ok()) else {
        return "<unknown>".into();
    };
    let secs = (chrono::Utc::now() - t.with_timezone(&chrono::Utc)).num_seconds().max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86400 * 2 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

pub(super) fn name(v: &Value) -> Value {
    json!(crate::registry::name_of(v))
}

/// The string at a JSON pointer, "" if absent.
pub(super) fn s<'a>(v: &'a Value, p: &str) -> &'a str {
    v.pointer(p).and_then(Value::as_str).unwrap_or("")
}

/// The integer at a JSON pointer, 0 if absent.
pub(super) fn int(v: &Value, p: &str) -> i64 {
    v.pointer(p).and_then(Value::as_i64).unwrap_or(0)
}

/// The number of entries of the map or list at a JSON pointer.
pub(super) fn len(v: &Value, p: &str) -> usize {
    match v.pointer(p) {
        Some(Value::Object(m)) => m.len(),
        Some(Value::Array(a)) => a.len(),
        _ => 0,
    }
}

/// `s`, or `<none>` when empty.
pub(super) fn or_none(s: &str) -> String {
    if s.is_empty() { "<none>".into() } else { s.into() }
}

/// The items of the list at a JSON pointer.
pub(super) fn items<'a>(v: &'a Value, p: &str) -> &'a [Value] {
    v.pointer(p).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// `layoutContainerCells`: the container names and images of a pod spec, comma-separated.
pub(super) fn containers(v: &Value, pod_spec: &str) -> [Value; 2] {
    let cs = items(v, &format!("{pod_spec}/containers"));
    let names: Vec<&str> = cs.iter().map(|c| s(c, "/name")).collect();
    let images: Vec<&str> = cs.iter().map(|c| s(c, "/image")).collect();
    [json!(names.join(",")), json!(images.join(","))]
}

/// `labels.FormatLabels`: `k=v` pairs sorted by key, `<none>` when empty.
pub(super) fn format_labels(map: Option<&Value>) -> String {
    let pairs: Vec<String> =
        map.and_then(Value::as_object).into_iter().flatten().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or(""))).collect();
    or_none(&pairs.join(","))
}

/// `metav1.FormatLabelSelector`: the selector as `kubectl` writes one (`a=b,c in (d,e),!f`),
/// `<none>` when absent or empty, `<error>` for an unknown operator.
pub(super) fn format_selector(selector: Option<&Value>) -> String {
    match selector.filter(|v| v.is_object()).map(crate::selector::selector_string) {
        None => "<none>".into(),
        Some(None) => "<error>".into(),
        Some(Some(text)) => or_none(&text),
    }
}

/// `listWithMoreString` and its kin: the first three, then `+ N more...`.
pub(super) fn first_three(list: Vec<String>, empty: &str) -> String {
    const MAX: usize = 3;
    if list.len() > MAX {
        return format!("{} + {} more...", list[..MAX].join(","), list.len() - MAX);
    }
    if list.is_empty() { empty.into() } else { list.join(",") }
}

/// `GetAccessModesAsString`: the access modes abbreviated, in the printer's fixed order.
pub(super) fn access_modes(v: &Value, p: &str) -> String {
    let modes: Vec<&str> = items(v, p).iter().filter_map(Value::as_str).collect();
    [("ReadWriteOnce", "RWO"), ("ReadOnlyMany", "ROX"), ("ReadWriteMany", "RWX"), ("ReadWriteOncePod", "RWOP")]
        .iter()
        .filter(|(m, _)| modes.contains(m))
        .map(|(_, short)| *short)
        .collect::<Vec<_>>()
        .join(",")
}

/// `Terminating` for objects being deleted, else the phase at `p`.
pub(super) fn phase(v: &Value, p: &str) -> String {
    if v.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null()) { "Terminating".into() } else { s(v, p).into() }
}

/// An IntOrString as the printer writes it; `N/A` when absent.
pub(super) fn int_or_string(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "N/A".into(),
    }
}
