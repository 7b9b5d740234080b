//! Behaviour of the built-in kinds that is not generic: defaults the real server fills in
//! (Services, Pods, Secrets, Namespaces, Deployments), their validation rules, and the
//! conversion between the two shapes of Events (core/v1 and events.k8s.io/v1).

use base64::Engine;
use serde_json::{Map, Value, json};

use crate::registry::ResourceInfo;
use crate::status::{ApiError, ApiResult, Cause};

/// Fill in defaults and reject invalid built-in objects on create and update.
pub fn prepare(info: &ResourceInfo, obj: &mut Value, old: Option<&Value>) -> ApiResult<()> {
    if !info.builtin {
        return Ok(());
    }
    let name = crate::registry::name_of(obj).to_string();
    let invalid = |causes: Vec<Cause>| ApiError::invalid_object(info, &name, causes);
    match (info.group.as_str(), info.plural.as_str()) {
        ("", "namespaces") => {
            let meta = crate::ops::meta_mut(obj);
            let labels = meta.entry("labels").or_insert_with(|| json!({}));
            if let Some(l) = labels.as_object_mut() {
                l.insert("kubernetes.io/metadata.name".into(), json!(name));
            }
            if obj.get("spec").and_then(|s| s.get("finalizers")).is_none() {
                obj["spec"] = json!({"finalizers": ["kubernetes"]});
            }
            if let Some(old) = old {
                obj["status"] = old.get("status").cloned().unwrap_or(json!({"phase": "Active"}));
            } else {
                obj["status"] = json!({"phase": "Active"});
            }
        }
        ("", "secrets") => secret(info, obj)?,
        ("", "configmaps") => {
            if let Some(old) = old
                && old.get("immutable") == Some(&json!(true))
            {
                for field in ["data", "binaryData"] {
                    if old.get(field) != obj.get(field) {
                        return Err(invalid(vec![Cause::new(
                            "FieldValueForbidden",
                            "Forbidden: field is immutable when `immutable` is set",
                            field,
                        )]));
                    }
                }
            }
        }
        ("", "services") => service(obj, old),
        ("", "pods") => {
            pod(obj);
            if let Some(old) = old {
                let names = |v: &Value| -> Vec<String> {
                    v.get("spec")
                        .and_then(|v| v.get("containers"))
                        .and_then(Value::as_array)
                        .map(|a| a.iter().map(|c| c["name"].as_str().unwrap_or("").to_string()).collect())
                        .unwrap_or_default()
                };
                if names(old).len() != names(obj).len() {
                    return Err(invalid(vec![Cause::new(
                        "FieldValueForbidden",
                        "Forbidden: pod updates may not add or remove containers",
                        "spec.containers",
                    )]));
                }
            }
        }
        ("apps", "deployments") => deployment(obj),
        ("coordination.k8s.io", "leases") => lease(info, obj)?,
        ("", "events") => core_event(info, obj)?,
        ("events.k8s.io", "events") => {
            if let Some(old) = old {
                event_update(info, obj, old)?;
            }
        }
        _ => {}
    }
    Ok(())
}

fn secret(info: &ResourceInfo, obj: &mut Value) -> ApiResult<()> {
    let map = obj.as_object_mut().expect("object");
    if let Some(Value::Object(data)) = map.get("data") {
        for v in data.values() {
            let s = v.as_str().unwrap_or("");
            if let Err(e) = base64::engine::general_purpose::STANDARD.decode(s) {
                let pos = match e {
                    base64::DecodeError::InvalidByte(p, _) => p,
                    base64::DecodeError::InvalidLength(p) => p,
                    base64::DecodeError::InvalidLastSymbol(p, _) => p,
                    base64::DecodeError::InvalidPadding => s.len(),
                };
                return Err(ApiError::bad_request(format!(
                    "{} in version \"v1\" cannot be handled as a {}: illegal base64 data at input byte {pos}",
                    info.kind, info.kind
                )));
            }
        }
    }
    if let Some(Value::Object(sd)) = map.remove("stringData") {
        let data = map.entry("data").or_insert_with(|| json!({}));
        if let Some(d) = data.as_object_mut() {
            for (k, v) in sd {
                let enc = base64::engine::general_purpose::STANDARD.encode(v.as_str().unwrap_or(""));
                d.insert(k, json!(enc));
            }
            let sorted: Map<String, Value> = {
                let mut items: Vec<_> = std::mem::take(d).into_iter().collect();
                items.sort_by(|a, b| a.0.cmp(&b.0));
                items.into_iter().collect()
            };
            *d = sorted;
        }
    }
    map.entry("type").or_insert_with(|| json!("Opaque"));
    Ok(())
}

fn service(obj: &mut Value, old: Option<&Value>) {
    let spec = obj.as_object_mut().expect("object").entry("spec").or_insert_with(|| json!({}));
    let Some(spec) = spec.as_object_mut() else {
        return;
    };
    if let Some(Value::Array(ports)) = spec.get_mut("ports") {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            p.entry("protocol").or_insert_with(|| json!("TCP"));
            if !p.contains_key("targetPort") {
                let port = p.get("port").cloned().unwrap_or(json!(0));
                p.insert("targetPort".into(), port);
            }
        }
    }
    let kind = spec.get("type").and_then(Value::as_str).unwrap_or("ClusterIP").to_string();
    if kind != "ExternalName" && !spec.contains_key("clusterIP") {
        let ip = old.and_then(|o| o.get("spec").and_then(|v| v.get("clusterIP")).cloned()).unwrap_or_else(|| {
            let n = uuid::Uuid::new_v4().as_u128();
            json!(format!("10.96.{}.{}", (n >> 8) as u8, (n as u8).max(2)))
        });
        spec.insert("clusterIP".into(), ip.clone());
        spec.insert("clusterIPs".into(), json!([ip]));
    }
    spec.entry("type").or_insert_with(|| json!("ClusterIP"));
    spec.entry("sessionAffinity").or_insert_with(|| json!("None"));
    if kind != "ExternalName" {
        spec.entry("ipFamilies").or_insert_with(|| json!(["IPv4"]));
        spec.entry("ipFamilyPolicy").or_insert_with(|| json!("SingleStack"));
        spec.entry("internalTrafficPolicy").or_insert_with(|| json!("Cluster"));
    }
    if obj.get("status").is_none() {
        obj["status"] = old.and_then(|o| o.get("status").cloned()).unwrap_or(json!({"loadBalancer": {}}));
    }
}

fn pod_spec(spec: &mut Map<String, Value>) {
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        if let Some(Value::Array(cs)) = spec.get_mut(list) {
            for c in cs.iter_mut().filter_map(Value::as_object_mut) {
                let image = c.get("image").and_then(Value::as_str).unwrap_or("");
                let last = image.rsplit('/').next().unwrap_or("");
                let policy = if !last.contains(':') || last.ends_with(":latest") { "Always" } else { "IfNotPresent" };
                c.entry("imagePullPolicy").or_insert_with(|| json!(policy));
                c.entry("resources").or_insert_with(|| json!({}));
                c.entry("terminationMessagePath").or_insert_with(|| json!("/dev/termination-log"));
                c.entry("terminationMessagePolicy").or_insert_with(|| json!("File"));
            }
        }
    }
    spec.entry("restartPolicy").or_insert_with(|| json!("Always"));
    spec.entry("terminationGracePeriodSeconds").or_insert_with(|| json!(30));
    spec.entry("dnsPolicy").or_insert_with(|| json!("ClusterFirst"));
    spec.entry("securityContext").or_insert_with(|| json!({}));
    spec.entry("schedulerName").or_insert_with(|| json!("default-scheduler"));
}

fn pod(obj: &mut Value) {
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        pod_spec(spec);
        spec.entry("enableServiceLinks").or_insert_with(|| json!(true));
        spec.entry("preemptionPolicy").or_insert_with(|| json!("PreemptLowerPriority"));
        spec.entry("priority").or_insert_with(|| json!(0));
    }
    if obj.get("status").is_none() {
        obj["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
    }
}

/// Container fields an ephemeral container may not set (`allowedEphemeralContainerFields`),
/// in the order the real validation reports them.
const NOT_FOR_EPHEMERAL: &[&str] =
    &["ports", "resources", "resizePolicy", "restartPolicy", "livenessProbe", "readinessProbe", "startupProbe", "lifecycle"];

/// What the real `ValidatePodEphemeralContainersUpdate` says of a Pod written through
/// `/ephemeralcontainers`: each ephemeral container is valid (name, image, a name unique among
/// all containers, an existing target, no fields reserved for regular containers), and the
/// ones that existed are neither removed nor changed.
pub fn ephemeral_container_causes(new: &Value, old: &Value) -> Vec<Cause> {
    let list = |pod: &Value, key: &str| -> Vec<Value> {
        pod.get("spec").and_then(|s| s.get(key)).and_then(Value::as_array).cloned().unwrap_or_default()
    };
    let name_of = |c: &Value| c.get("name").and_then(Value::as_str).unwrap_or("").to_string();
    let others: Vec<String> = list(new, "containers").iter().chain(list(new, "initContainers").iter()).map(name_of).collect();
    let mut all = others.clone();
    let mut causes = Vec::new();
    let ephemeral = list(new, "ephemeralContainers");
    for (i, ec) in ephemeral.iter().enumerate() {
        let at = |f: &str| format!("spec.ephemeralContainers[{i}].{f}");
        let name = name_of(ec);
        if name.is_empty() {
            causes.push(Cause::new("FieldValueRequired", "Required value", at("name")));
        } else if let Err(why) = crate::validate::dns_label(&name) {
            causes.push(Cause::new("FieldValueInvalid", format!("Invalid value: {name:?}: {why}"), at("name")));
        }
        if ec.get("image").and_then(Value::as_str).is_none_or(str::is_empty) {
            causes.push(Cause::new("FieldValueRequired", "Required value", at("image")));
        }
        if all.contains(&name) {
            causes.push(Cause::new("FieldValueDuplicate", format!("Duplicate value: {name:?}"), at("name")));
        } else {
            all.push(name);
        }
        if let Some(target) = ec.get("targetContainerName").and_then(Value::as_str).filter(|t| !t.is_empty())
            && !others.iter().any(|o| o == target)
        {
            causes.push(Cause::new("FieldValueNotFound", format!("Not found: {target:?}"), at("targetContainerName")));
        }
        for field in NOT_FOR_EPHEMERAL {
            let set = ec.get(*field).is_some_and(|v| match v {
                Value::Null => false,
                Value::Object(m) => !m.is_empty(),
                Value::Array(a) => !a.is_empty(),
                Value::String(s) => !s.is_empty(),
                _ => true,
            });
            if set {
                causes.push(Cause::new("FieldValueForbidden", "Forbidden: cannot be set for an Ephemeral Container", at(field)));
            }
        }
    }
    for before in list(old, "ephemeralContainers") {
        let name = name_of(&before);
        match ephemeral.iter().find(|e| name_of(e) == name) {
            None => causes.push(Cause::new(
                "FieldValueForbidden",
                format!("Forbidden: existing ephemeral containers {name:?} may not be removed\n"),
                "spec.ephemeralContainers",
            )),
            Some(now) if *now != before => causes.push(Cause::new(
                "FieldValueForbidden",
                format!("Forbidden: existing ephemeral containers {name:?} may not be changed\n"),
                format!("spec.ephemeralContainers[{name}]"),
            )),
            Some(_) => {}
        }
    }
    causes
}

/// `podutil.UpdatePodCondition` with status True: add the condition `kind`, or update it
/// (its transition time kept when it was True already). Empty reason and message are left out.
pub fn set_pod_condition(pod: &mut Value, kind: &str, reason: &str, message: &str) {
    let mut condition = json!({"type": kind, "status": "True", "lastProbeTime": null, "lastTransitionTime": crate::ops::now()});
    if !reason.is_empty() {
        condition["reason"] = json!(reason);
    }
    if !message.is_empty() {
        condition["message"] = json!(message);
    }
    set_condition(pod, condition);
}

/// `meta.SetStatusCondition` / `UpdatePodCondition`: replace the condition of that type in
/// `status.conditions` (keeping its transition time when its status is unchanged) or add it.
pub fn set_condition(obj: &mut Value, mut condition: Value) {
    if !obj["status"].is_object() {
        obj["status"] = json!({});
    }
    if !obj["status"]["conditions"].is_array() {
        obj["status"]["conditions"] = json!([]);
    }
    let list = obj["status"]["conditions"].as_array_mut().expect("an array");
    match list.iter_mut().find(|c| c["type"] == condition["type"]) {
        Some(existing) => {
            if existing["status"] == condition["status"] {
                condition["lastTransitionTime"] = existing["lastTransitionTime"].clone();
            }
            *existing = condition;
        }
        None => list.push(condition),
    }
}

fn deployment(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    spec.entry("replicas").or_insert_with(|| json!(1));
    spec.entry("strategy")
        .or_insert_with(|| json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}));
    spec.entry("revisionHistoryLimit").or_insert_with(|| json!(10));
    spec.entry("progressDeadlineSeconds").or_insert_with(|| json!(600));
    if let Some(t) = spec.get_mut("template").and_then(|t| t.get_mut("spec")).and_then(Value::as_object_mut) {
        pod_spec(t);
    }
}

fn lease(info: &ResourceInfo, obj: &mut Value) -> ApiResult<()> {
    for field in ["acquireTime", "renewTime"] {
        if let Some(t) = obj.pointer(&format!("/spec/{field}")).and_then(Value::as_str) {
            let micro = t.len() >= 27 && t.as_bytes().get(19) == Some(&b'.');
            if !micro {
                return Err(ApiError::bad_request(format!(
                    "{} in version \"v1\" cannot be handled as a {}: parsing time \"{t}\" as \"2006-01-02T15:04:05.000000Z07:00\": cannot parse \"{}\" as \".000000\"",
                    info.kind,
                    info.kind,
                    t.get(19..).unwrap_or("")
                )));
            }
        }
    }
    if let Some(d) = obj.get("spec").and_then(|v| v.get("leaseDurationSeconds")).and_then(Value::as_i64)
        && d <= 0
    {
        return Err(ApiError::invalid_object(
            info,
            crate::registry::name_of(obj),
            vec![Cause::new("FieldValueInvalid", format!("Invalid value: {d}: must be greater than 0"), "spec.leaseDurationSeconds")],
        ));
    }
    Ok(())
}

fn core_event(info: &ResourceInfo, obj: &mut Value) -> ApiResult<()> {
    let ns = crate::registry::namespace_of(obj).to_string();
    let name = crate::registry::name_of(obj).to_string();
    if let Some(ino) = obj.get("involvedObject").and_then(|v| v.get("namespace")).and_then(Value::as_str)
        && !ino.is_empty()
        && ino != ns
    {
        return Err(ApiError::invalid_object(
            info,
            &name,
            vec![Cause::new(
                "FieldValueInvalid",
                format!("Invalid value: \"{ino}\": does not match event.namespace"),
                "involvedObject.namespace",
            )],
        ));
    }
    // Through core/v1 only the legacy validation applies: it leaves `type` free (Kopf's
    // example 04 posts `SomeType`); events.k8s.io/v1 checks it (below).
    let map = obj.as_object_mut().expect("object");
    map.entry("involvedObject").or_insert_with(|| json!({}));
    for k in ["reason", "message"] {
        if map.get(k).is_none() {
            map.insert(k.into(), json!(""));
        }
    }
    map.entry("source").or_insert_with(|| json!({}));
    for k in ["firstTimestamp", "lastTimestamp"] {
        map.entry(k).or_insert(Value::Null);
    }
    map.entry("eventTime").or_insert(Value::Null);
    map.entry("reportingComponent").or_insert_with(|| json!(""));
    map.entry("reportingInstance").or_insert_with(|| json!(""));
    Ok(())
}

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
fn event_update(info: &ResourceInfo, new: &Value, old: &Value) -> ApiResult<()> {
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
            let shown = match value {
                Some(Value::String(s)) => serde_json::to_string(s).unwrap_or_default(),
                Some(v) => v.to_string(),
                None => "null".into(),
            };
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
