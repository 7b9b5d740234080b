//! Behaviour of the built-in kinds that is not generic: defaults the real server fills in
//! (Services, Pods, Secrets, Namespaces, workloads, volumes, networking, webhooks), their
//! validation rules (RBAC among them), and the conversion between the two shapes of Events
//! (core/v1 and events.k8s.io/v1).

mod admission;
mod events;
mod network;
mod rbac;
mod volumes;
mod workloads;

use base64::Engine;
use serde_json::{Map, Value, json};

use events::event_update;
pub use events::{event_from_core, event_to_core, event_v1_to_core};

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
            let meta = crate::meta::meta_mut(obj);
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
            workloads::pod(obj);
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
        ("apps", "deployments") => workloads::deployment(obj),
        ("apps", "statefulsets") => workloads::stateful_set(obj),
        ("apps", "daemonsets") => workloads::daemon_set(obj, old),
        ("apps", "replicasets") => workloads::replica_set(obj),
        ("batch", "cronjobs") => workloads::cron_job(obj),
        ("policy", "poddisruptionbudgets") => workloads::pod_disruption_budget(obj),
        ("", "persistentvolumes") => volumes::persistent_volume(obj),
        ("", "persistentvolumeclaims") => volumes::persistent_volume_claim(obj),
        ("", "endpoints") => network::endpoints(obj),
        ("discovery.k8s.io", "endpointslices") => network::endpoint_slice(obj),
        ("networking.k8s.io", "ingresses") => network::ingress(obj),
        ("networking.k8s.io", "networkpolicies") => network::network_policy(obj),
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations") => admission::webhooks(obj, false),
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations") => admission::webhooks(obj, true),
        ("rbac.authorization.k8s.io", "roles" | "clusterroles") => {
            let causes = rbac::role(obj, info.namespaced);
            if !causes.is_empty() {
                return Err(invalid(causes));
            }
        }
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => {
            let causes = rbac::binding(obj, old, info.namespaced);
            if !causes.is_empty() {
                return Err(invalid(causes));
            }
        }
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
    let mut condition = json!({"type": kind, "status": "True", "lastProbeTime": null, "lastTransitionTime": crate::meta::now()});
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
