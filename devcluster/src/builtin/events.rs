//! The two shapes of Events: core/v1 (how they are stored) and events.k8s.io/v1 (field names
//! changed, validated more strictly), converted both ways, and what an update through
//! events.k8s.io/v1 may change.

use serde_json::{Map, Value, json};

use crate::registry::ResourceInfo;
use crate::status::{ApiError, ApiResult, Cause};

const EVENT_FIELDS: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("reportingComponent", "reportingController"),
];

/// Validate an events.k8s.io/v1 Event to be created and convert it into the stored core/v1
/// shape. `eventTime` is required on create only (an Event created through core/v1 has none,
/// and a recorder may still update its series through events.k8s.io/v1).
pub fn event_to_core(info: &ResourceInfo, v: Value) -> ApiResult<Value> {
    let name = crate::registry::name_of(&v).to_string();
    if v.get("eventTime").is_none_or(Value::is_null) {
        return Err(ApiError::invalid_object(info, &name, vec![Cause::new("FieldValueRequired", "Required value", "eventTime")]));
    }
    if let Some(t) = v.get("type").and_then(Value::as_str)
        && t != "Normal"
        && t != "Warning"
    {
        return Err(ApiError::invalid_object(
            info,
            &name,
            vec![Cause::new("FieldValueInvalid", format!("Invalid value: \"\": has invalid value: {t}"), "type")],
        ));
    }
    let mut causes = Vec::new();
    event_series(&v, &mut causes);
    if !causes.is_empty() {
        return Err(ApiError::invalid_object(info, &name, causes));
    }
    Ok(event_v1_to_core(v))
}

/// Convert an events.k8s.io/v1 Event into the stored core/v1 shape, without validation.
pub fn event_v1_to_core(v: Value) -> Value {
    let Value::Object(mut m) = v else {
        return v;
    };
    let mut out = Map::new();
    out.insert("kind".into(), json!("Event"));
    out.insert("apiVersion".into(), json!("v1"));
    out.insert("metadata".into(), m.remove("metadata").unwrap_or(json!({})));
    out.insert("involvedObject".into(), m.remove("regarding").unwrap_or(json!({})));
    out.insert("reason".into(), m.remove("reason").unwrap_or(json!("")));
    out.insert("message".into(), m.remove("note").unwrap_or(json!("")));
    out.insert("source".into(), m.remove("deprecatedSource").unwrap_or(json!({})));
    out.insert("firstTimestamp".into(), m.remove("deprecatedFirstTimestamp").unwrap_or(Value::Null));
    out.insert("lastTimestamp".into(), m.remove("deprecatedLastTimestamp").unwrap_or(Value::Null));
    if let Some(c) = m.remove("deprecatedCount") {
        out.insert("count".into(), c);
    }
    if let Some(t) = m.remove("type") {
        out.insert("type".into(), t);
    }
    out.insert("eventTime".into(), m.remove("eventTime").unwrap_or(Value::Null));
    for k in ["series", "action", "related"] {
        if let Some(x) = m.remove(k) {
            out.insert(k.into(), x);
        }
    }
    out.insert("reportingComponent".into(), m.remove("reportingController").unwrap_or(json!("")));
    out.insert("reportingInstance".into(), m.remove("reportingInstance").unwrap_or(json!("")));
    Value::Object(out)
}

/// The fields of a stored Event that an update through events.k8s.io/v1 may not change (the
/// real server's `ValidateEventUpdate`), each with the field path its 422 names. The paths are
/// the internal (core) names; `reason` is checked twice there, so it is listed twice here.
const EVENT_IMMUTABLE: &[(&str, &str)] = &[
    ("involvedObject", "involvedObject"),
    ("reason", "reason"),
    ("message", "message"),
    ("source", "source"),
    ("firstTimestamp", "firstTimestamp"),
    ("lastTimestamp", "lastTimestamp"),
    ("count", "count"),
    ("reason", "reason"),
    ("type", "type"),
    ("eventTime", "eventTime"),
    ("action", "action"),
    ("related", "related"),
    ("reportingComponent", "reportingController"),
    ("reportingInstance", "reportingInstance"),
];

/// An update of a stored Event through events.k8s.io/v1: only `series` (and metadata) may
/// change, and a changed series must be a valid one.
pub(super) fn event_update(info: &ResourceInfo, new: &Value, old: &Value) -> ApiResult<()> {
    let unset = |v: Option<&Value>| match v {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Number(n)) => n.as_f64() == Some(0.0),
        Some(Value::Object(m)) => m.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Bool(b)) => !b,
    };
    let same = |a: Option<&Value>, b: Option<&Value>| (unset(a) && unset(b)) || a == b;
    let mut causes = Vec::new();
    if !same(new.get("series"), old.get("series")) {
        event_series(new, &mut causes);
    }
    for (field, path) in EVENT_IMMUTABLE {
        let value = new.get(*field);
        if !same(value, old.get(*field)) {
            let shown = value.map_or_else(|| "null".into(), crate::status::shown);
            causes.push(Cause::new("FieldValueInvalid", format!("Invalid value: {shown}: field is immutable"), *path));
        }
    }
    if causes.is_empty() { Ok(()) } else { Err(ApiError::invalid_object(info, crate::registry::name_of(new), causes)) }
}

/// The real server's `validateV1EventSeries`: a series counts at least 2 and says when it was
/// last observed.
fn event_series(event: &Value, causes: &mut Vec<Cause>) {
    let Some(series) = event.get("series").filter(|s| !s.is_null()) else {
        return;
    };
    if series.get("count").and_then(Value::as_i64).unwrap_or(0) < 2 {
        causes.push(Cause::new("FieldValueInvalid", "Invalid value: \"\": should be at least 2", "series.count"));
    }
    if series.get("lastObservedTime").is_none_or(Value::is_null) {
        causes.push(Cause::new("FieldValueRequired", "Required value", "series.lastObservedTime"));
    }
}

/// Convert a stored core/v1 Event into the events.k8s.io/v1 shape.
pub fn event_from_core(v: &Value) -> Value {
    let Some(m) = v.as_object() else {
        return v.clone();
    };
    let mut out = Map::new();
    out.insert("kind".into(), json!("Event"));
    out.insert("apiVersion".into(), json!("events.k8s.io/v1"));
    out.insert("metadata".into(), m.get("metadata").cloned().unwrap_or(json!({})));
    out.insert("eventTime".into(), m.get("eventTime").cloned().unwrap_or(Value::Null));
    for k in ["series"] {
        if let Some(x) = m.get(k) {
            out.insert(k.into(), x.clone());
        }
    }
    let nonempty = |k: &str| m.get(k).filter(|x| !x.is_null() && x.as_str() != Some("")).cloned();
    if let Some(x) = nonempty("reportingComponent") {
        out.insert("reportingController".into(), x);
    }
    if let Some(x) = nonempty("reportingInstance") {
        out.insert("reportingInstance".into(), x);
    }
    for k in ["action", "reason"] {
        if let Some(x) = nonempty(k) {
            out.insert(k.into(), x);
        }
    }
    out.insert("regarding".into(), m.get("involvedObject").cloned().unwrap_or(json!({})));
    if let Some(x) = m.get("related") {
        out.insert("related".into(), x.clone());
    }
    if let Some(x) = nonempty("message") {
        out.insert("note".into(), x);
    }
    if let Some(x) = nonempty("type") {
        out.insert("type".into(), x);
    }
    for (core, v1) in &EVENT_FIELDS[2..6] {
        match m.get(*core) {
            Some(x) => {
                out.insert((*v1).into(), x.clone());
            }
            None if *core != "count" => {
                out.insert((*v1).into(), Value::Null);
            }
            None => {}
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_convert_between_shapes_without_loss() {
        let core = json!({"kind": "Event", "apiVersion": "v1", "metadata": {"name": "e"},
            "involvedObject": {"kind": "ConfigMap", "name": "t"}, "reason": "R", "message": "hello",
            "source": {"component": "c"}, "firstTimestamp": null, "lastTimestamp": null, "count": 1,
            "type": "Normal", "eventTime": "2026-01-01T00:00:00.000000Z", "reportingComponent": "", "reportingInstance": ""});
        let v1 = event_from_core(&core);
        assert_eq!(v1["note"], "hello");
        assert_eq!(v1["regarding"]["name"], "t");
        assert_eq!(v1["deprecatedCount"], 1);
        let reg = crate::registry::Registry::with_builtins();
        let info = reg.get("events.k8s.io", "v1", "events").unwrap();
        let back = event_to_core(&info, v1).unwrap();
        assert_eq!(back["message"], "hello");
        assert_eq!(back["involvedObject"]["name"], "t");
    }
}
