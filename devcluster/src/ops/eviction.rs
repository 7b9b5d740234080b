//! `pods/NAME/eviction` (`kubectl drain`): deletes a pod unless a PodDisruptionBudget forbids
//! it, as the real `EvictionREST` decides. A pod that is not running (Pending, Succeeded,
//! Failed) or already terminating goes at once; otherwise the one budget that selects it must
//! allow a disruption, which the eviction spends (`status.disruptionsAllowed` down by one, the
//! pod in `status.disruptedPods`). Budgets are read only when `policy/v1
//! poddisruptionbudgets` is served. Before the delete the pod gets the `DisruptionTarget`
//! condition.

use serde_json::{Value, json};

use super::commit::{Fields, commit};
use super::common::created_success;
use super::delete::{DeleteOpts, check_preconditions, delete};
use super::types::{Body, Object, Subresource, WriteOpts};
use crate::builtin::{set_condition, set_pod_condition};
use crate::cluster::Cluster;
use crate::meta::now;
use crate::registry::ResourceInfo;
use crate::selector::LabelSelector;
use crate::status::{ApiError, ApiResult};

/// Evict the pod `ns/name`; `opts` are the Eviction's `deleteOptions`. Answers the Status to
/// send with 201 (the real server sends a Failure Status that way for a pod with several
/// budgets).
pub fn evict(cluster: &Cluster, ns: &str, name: &str, mut opts: DeleteOpts, manager: Option<String>) -> ApiResult<Value> {
    let pods = cluster.core("pods");
    let pod = cluster.table(&pods).get(ns, name).ok_or_else(|| ApiError::not_found(&pods, name))?.value.clone();
    let mut unhealthy_budget = None;
    if !budgets_do_not_apply(&pod) {
        match check_budgets(cluster, ns, &pod, opts.dry_run)? {
            Verdict::Allowed => {}
            Verdict::UnhealthyAllowed(budget) => {
                // the pod must not have become ready since: delete only the version we saw
                if opts.resource_version.is_none() {
                    opts.resource_version = pod.pointer("/metadata/resourceVersion").and_then(Value::as_str).map(String::from);
                    unhealthy_budget = Some(budget);
                }
            }
            Verdict::Refused(status) => return Ok(status),
        }
    }
    match disrupt_and_delete(cluster, &pods, ns, name, opts, manager) {
        Err(e) if e.code == 409 && unhealthy_budget.is_some() => Err(too_many_requests(&unhealthy_budget.unwrap_or_default())),
        Err(e) => Err(e),
        Ok(()) => Ok(created_success()),
    }
}

/// `canIgnorePDB`: a pod that is not running, or already terminating, has no budget to spend.
fn budgets_do_not_apply(pod: &Value) -> bool {
    let phase = pod.pointer("/status/phase").and_then(Value::as_str).unwrap_or("");
    matches!(phase, "Succeeded" | "Failed" | "Pending") || crate::registry::terminating(pod)
}

enum Verdict {
    /// No budget selects the pod, or one allowed (and spent) a disruption.
    Allowed,
    /// The pod is not ready and its budget lets unhealthy pods go (named).
    UnhealthyAllowed(String),
    /// The Status to answer instead.
    Refused(Value),
}

fn check_budgets(cluster: &Cluster, ns: &str, pod: &Value, dry_run: bool) -> ApiResult<Verdict> {
    let Some(info) = cluster.registry.get("policy", "v1", "poddisruptionbudgets") else {
        return Ok(Verdict::Allowed);
    };
    let (budgets, _) = cluster.table(&info).list(Some(ns));
    let labels = pod.pointer("/metadata/labels");
    let matching: Vec<Value> = budgets
        .iter()
        .filter(|b| {
            b.value.pointer("/spec/selector").filter(|s| !s.is_null()).is_some_and(|s| LabelSelector::from_object(s).matches(labels))
        })
        .map(|b| b.value.clone())
        .collect();
    let budget = match matching.as_slice() {
        [] => return Ok(Verdict::Allowed),
        [one] => one,
        _ => {
            return Ok(Verdict::Refused(json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                "code": 500,
            })));
        }
    };
    let name = crate::registry::name_of(budget).to_string();
    let int = |p: &str| budget.pointer(p).and_then(Value::as_i64).unwrap_or(0);
    if !pod_ready(pod) {
        let always = budget.pointer("/spec/unhealthyPodEvictionPolicy").and_then(Value::as_str) == Some("AlwaysAllow");
        let desired = int("/status/desiredHealthy");
        if always || (int("/status/currentHealthy") >= desired && desired > 0) {
            return Ok(Verdict::UnhealthyAllowed(name));
        }
    }
    let pod_name = crate::registry::name_of(pod).to_string();
    if dry_run {
        spend(budget, &pod_name)?;
        return Ok(Verdict::Allowed);
    }
    let opts = WriteOpts { manager: Some("kube-apiserver".into()), ..Default::default() };
    commit(cluster, Object { info: &info, ns, name: &name, sub: Subresource::Status }, &opts, Fields::Recorded, |current| {
        spend(current, &pod_name)
    })?;
    Ok(Verdict::Allowed)
}

/// `checkAndDecrement`: the budget with one disruption spent on `pod`, or why it cannot be.
fn spend(budget: &Value, pod: &str) -> ApiResult<Value> {
    let name = crate::registry::name_of(budget);
    let int = |p: &str| budget.pointer(p).and_then(Value::as_i64).unwrap_or(0);
    if int("/status/observedGeneration") < int("/metadata/generation") {
        return Err(too_many_requests(name));
    }
    let allowed = int("/status/disruptionsAllowed");
    if allowed < 0 {
        return Err(forbidden_budget(name, "pdb disruptions allowed is negative"));
    }
    if budget.pointer("/status/disruptedPods").and_then(Value::as_object).is_some_and(|m| m.len() > 2000) {
        return Err(forbidden_budget(name, "DisruptedPods map too big - too many evictions not confirmed by PDB controller"));
    }
    if allowed == 0 {
        let why = format!(
            "The disruption budget {name} needs {} healthy pods and has {} currently",
            int("/status/desiredHealthy"),
            int("/status/currentHealthy")
        );
        return Err(ApiError::too_many_requests(
            "Cannot evict pod as it would violate the pod's disruption budget.",
            "DisruptionBudget",
            why,
            0,
        ));
    }
    let mut new = budget.clone();
    new["status"]["disruptionsAllowed"] = json!(allowed - 1);
    if allowed - 1 == 0 {
        let condition = json!({
            "type": "DisruptionAllowed", "status": "False", "observedGeneration": int("/status/observedGeneration"),
            "lastTransitionTime": now(), "reason": "InsufficientPods", "message": "",
        });
        set_condition(&mut new, condition);
    }
    if !new["status"]["disruptedPods"].is_object() {
        new["status"]["disruptedPods"] = json!({});
    }
    new["status"]["disruptedPods"][pod] = json!(now());
    Ok(new)
}

fn pod_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
}

fn too_many_requests(budget: &str) -> ApiError {
    ApiError::too_many_requests(
        "Cannot evict pod as it would violate the pod's disruption budget.",
        "DisruptionBudget",
        format!("The disruption budget {budget} is still being processed by the server."),
        10,
    )
}

fn forbidden_budget(name: &str, why: &str) -> ApiError {
    let mut e = ApiError::bad_request("");
    e.code = 403;
    e.reason = "Forbidden";
    e.message = format!("poddisruptionbudget.policy \"{name}\" is forbidden: {why}");
    e.details = Some(Box::new(json!({"name": name, "group": "policy", "kind": "poddisruptionbudget"})));
    e
}

/// `addConditionAndDeletePod`: mark the pod `DisruptionTarget` (a status write, checking the
/// delete's preconditions), then delete it.
fn disrupt_and_delete(
    cluster: &Cluster,
    pods: &ResourceInfo,
    ns: &str,
    name: &str,
    mut opts: DeleteOpts,
    manager: Option<String>,
) -> ApiResult<()> {
    if !opts.dry_run {
        let write = WriteOpts { manager, ..Default::default() };
        let label = pods.kind_label();
        let reply = commit(cluster, Object { info: pods, ns, name, sub: Subresource::Status }, &write, Fields::Recorded, |current| {
            check_preconditions(pods, &label, name, current, &opts)?;
            let mut pod = current.clone();
            set_pod_condition(&mut pod, "DisruptionTarget", "EvictionByEvictionAPI", "Eviction API: evicting");
            Ok(pod)
        })?;
        if opts.resource_version.is_some() {
            // our own write moved it on
            opts.resource_version = match reply.body {
                Body::Obj(o) => Some(o.rv.to_string()),
                Body::Value(v) => v.pointer("/metadata/resourceVersion").and_then(Value::as_str).map(String::from),
            };
        }
    }
    delete(cluster, pods, ns, name, &opts)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(generation: i64, observed: i64, allowed: i64) -> Value {
        json!({"metadata": {"name": "pdb", "generation": generation}, "status": {
            "observedGeneration": observed, "disruptionsAllowed": allowed, "desiredHealthy": 2, "currentHealthy": 2,
        }})
    }

    #[test]
    fn a_budget_allows_an_eviction_only_when_it_is_current_and_has_disruptions_left() {
        type Outcome = Result<i64, (u16, &'static str)>;
        let cases: &[(Value, Outcome)] = &[
            (budget(1, 1, 2), Ok(1)),
            (budget(1, 1, 1), Ok(0)),
            (budget(1, 1, 0), Err((429, "The disruption budget pdb needs 2 healthy pods and has 2 currently"))),
            (budget(2, 1, 5), Err((429, "The disruption budget pdb is still being processed by the server."))),
            (budget(1, 1, -1), Err((403, ""))),
        ];
        for (b, want) in cases {
            let got = spend(b, "p1").map(|v| v["status"]["disruptionsAllowed"].as_i64().unwrap()).map_err(|e| {
                let cause =
                    e.details.as_ref().and_then(|d| d.pointer("/causes/0/message")).and_then(Value::as_str).unwrap_or("").to_string();
                (e.code, cause)
            });
            let want = want.map_err(|(c, m)| (c, m.to_string()));
            assert_eq!(got, want, "{b}");
        }
    }

    #[test]
    fn spending_the_last_disruption_records_the_pod_and_the_condition() {
        let spent = spend(&budget(1, 1, 1), "p1").unwrap();
        assert!(spent["status"]["disruptedPods"]["p1"].is_string());
        let c = &spent["status"]["conditions"][0];
        assert_eq!((&c["type"], &c["status"], &c["reason"]), (&json!("DisruptionAllowed"), &json!("False"), &json!("InsufficientPods")));
    }

    #[test]
    fn only_running_pods_that_are_not_terminating_spend_a_budget() {
        let cases = [
            (json!({"status": {"phase": "Pending"}}), true),
            (json!({"status": {"phase": "Succeeded"}}), true),
            (json!({"status": {"phase": "Failed"}}), true),
            (json!({"status": {"phase": "Running"}}), false),
            (json!({"status": {"phase": "Running"}, "metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}), true),
            (json!({}), false),
        ];
        for (pod, want) in cases {
            assert_eq!(budgets_do_not_apply(&pod), want, "{pod}");
        }
    }
}
