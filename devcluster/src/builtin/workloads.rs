//! Defaults of the workload kinds (Pods and the kinds with a pod template: Deployments,
//! StatefulSets, DaemonSets, ReplicaSets, CronJobs) and of PodDisruptionBudgets, as the real
//! server's defaulting and create strategies fill them in.

use serde_json::{Map, Value, json};

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

pub(super) fn pod(obj: &mut Value) {
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

pub(super) fn deployment(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    spec.entry("replicas").or_insert_with(|| json!(1));
    spec.entry("strategy")
        .or_insert_with(|| json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}));
    spec.entry("revisionHistoryLimit").or_insert_with(|| json!(10));
    spec.entry("progressDeadlineSeconds").or_insert_with(|| json!(600));
    template(spec);
}

/// The defaults of the pod template at `spec.template` (or `spec.jobTemplate.spec.template`).
fn template(spec: &mut Map<String, Value>) {
    let template = match spec.get_mut("jobTemplate") {
        Some(job) => job.get_mut("spec").and_then(|s| s.get_mut("template")),
        None => spec.get_mut("template"),
    };
    if let Some(t) = template.and_then(|t| t.get_mut("spec")).and_then(Value::as_object_mut) {
        pod_spec(t);
    }
}

/// The status a new object has: its kind's empty status as the real server serializes it
/// (integer fields without `omitempty` appear as 0).
fn empty_status(obj: &mut Value, status: Value) {
    if obj.get("status").is_none() {
        obj["status"] = status;
    }
}

/// The spec, if it is an object.
fn spec(obj: &mut Value) -> Option<&mut Map<String, Value>> {
    obj.get_mut("spec").and_then(Value::as_object_mut)
}

pub(super) fn stateful_set(obj: &mut Value) {
    empty_status(obj, json!({"replicas": 0, "availableReplicas": 0}));
    let Some(spec) = spec(obj) else {
        return;
    };
    spec.entry("podManagementPolicy").or_insert_with(|| json!("OrderedReady"));
    let strategy = spec.entry("updateStrategy").or_insert_with(|| json!({}));
    if let Some(strategy) = strategy.as_object_mut() {
        if !strategy.contains_key("type") {
            strategy.insert("type".into(), json!("RollingUpdate"));
            strategy.entry("rollingUpdate").or_insert_with(|| json!({}));
        }
        if strategy.get("type") == Some(&json!("RollingUpdate"))
            && let Some(rolling) = strategy.get_mut("rollingUpdate").and_then(Value::as_object_mut)
        {
            rolling.entry("partition").or_insert_with(|| json!(0));
        }
    }
    let retention = spec.entry("persistentVolumeClaimRetentionPolicy").or_insert_with(|| json!({}));
    if let Some(retention) = retention.as_object_mut() {
        retention.entry("whenDeleted").or_insert_with(|| json!("Retain"));
        retention.entry("whenScaled").or_insert_with(|| json!("Retain"));
    }
    spec.entry("replicas").or_insert_with(|| json!(1));
    spec.entry("revisionHistoryLimit").or_insert_with(|| json!(10));
    template(spec);
}

/// The annotation through which apps/v1 carries a DaemonSet's template generation.
const TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";

pub(super) fn daemon_set(obj: &mut Value, old: Option<&Value>) {
    empty_status(obj, json!({"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0, "numberReady": 0}));
    let generation = |v: &Value| {
        v.pointer("/metadata/annotations")
            .and_then(|a| a.get(TEMPLATE_GENERATION))
            .and_then(Value::as_str)
            .and_then(|g| g.parse::<i64>().ok())
    };
    let template_of = |v: &Value| v.pointer("/spec/template").cloned();
    let wanted = match old {
        None => generation(obj).filter(|g| *g >= 1).unwrap_or(1),
        Some(old) => {
            let before = generation(old).unwrap_or(1);
            if template_of(old) != template_of(obj) { before + 1 } else { before }
        }
    };
    let annotations = crate::meta::meta_mut(obj).entry("annotations").or_insert_with(|| json!({}));
    if let Some(a) = annotations.as_object_mut() {
        a.insert(TEMPLATE_GENERATION.into(), json!(wanted.to_string()));
    }
    let Some(spec) = spec(obj) else {
        return;
    };
    let strategy = spec.entry("updateStrategy").or_insert_with(|| json!({}));
    if let Some(strategy) = strategy.as_object_mut() {
        strategy.entry("type").or_insert_with(|| json!("RollingUpdate"));
        if strategy.get("type") == Some(&json!("RollingUpdate")) {
            let rolling = strategy.entry("rollingUpdate").or_insert_with(|| json!({}));
            if let Some(rolling) = rolling.as_object_mut() {
                rolling.entry("maxUnavailable").or_insert_with(|| json!(1));
                rolling.entry("maxSurge").or_insert_with(|| json!(0));
            }
        }
    }
    spec.entry("revisionHistoryLimit").or_insert_with(|| json!(10));
    template(spec);
}

pub(super) fn replica_set(obj: &mut Value) {
    empty_status(obj, json!({"replicas": 0}));
    if let Some(spec) = spec(obj) {
        spec.entry("replicas").or_insert_with(|| json!(1));
        template(spec);
    }
}

pub(super) fn cron_job(obj: &mut Value) {
    empty_status(obj, json!({}));
    if let Some(spec) = spec(obj) {
        spec.entry("concurrencyPolicy").or_insert_with(|| json!("Allow"));
        spec.entry("suspend").or_insert_with(|| json!(false));
        spec.entry("successfulJobsHistoryLimit").or_insert_with(|| json!(3));
        spec.entry("failedJobsHistoryLimit").or_insert_with(|| json!(1));
        template(spec);
    }
}

pub(super) fn pod_disruption_budget(obj: &mut Value) {
    empty_status(obj, json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}));
}
