//! The two shapes of Events: core/v1 (how they are stored) and events.k8s.io/v1 (field names
//! changed, validated more strictly), converted both ways.

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

/// Convert an events.k8s.io/v1 Event into the stored core/v1 shape.
pub fn event_to_core(info: &ResourceInfo, v: Value) -> ApiResult<Value> {
    let name = crate::registry::name_of(&v).to_string();
    let Value::Object(mut m) = v else {
        return Ok(v);
    };
    if m.get("eventTime").is_none_or(Value::is_null) {
        return Err(ApiError::invalid_object(info, &name, vec![Cause::new("FieldValueRequired", "Required value", "eventTime")]));
    }
    if let Some(t) = m.get("type").and_then(Value::as_str)
        && t != "Normal"
        && t != "Warning"
    {
        return Err(ApiError::invalid_object(
            info,
            &name,
            vec![Cause::new("FieldValueInvalid", format!("Invalid value: \"\": has invalid value: {t}"), "type")],
        ));
    }
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
    Ok(Value::Object(out))
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
