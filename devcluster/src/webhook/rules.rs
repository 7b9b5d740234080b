//! Which webhooks a request calls, as the real server's `ShouldCallHook` decides: the
//! webhook's `namespaceSelector`, its `objectSelector`, then its `rules` (operations, groups,
//! versions, resources with subresources, scope), with `matchPolicy: Equivalent` trying the
//! other served versions of the same resource. Pure: the webhook, the request and the labels
//! in, a decision out.

use serde_json::Value;

use super::attributes::Operation;
use crate::selector::LabelSelector;

/// What a rule is matched against: the request's resource and operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target<'a> {
    /// The operation.
    pub operation: Operation,
    /// The API group ("" for core).
    pub group: &'a str,
    /// The version.
    pub version: &'a str,
    /// The resource (plural).
    pub resource: &'a str,
    /// The subresource, "" for the object itself.
    pub subresource: &'a str,
    /// The request's namespace ("" for cluster-scoped objects; a Namespace's own name for
    /// requests on the Namespace object, as the real server sets it).
    pub namespace: &'a str,
}

/// Whether one of `hook`'s rules matches the request (`rules.Matcher`).
pub fn rules_match(hook: &Value, target: &Target) -> bool {
    hook.get("rules").and_then(Value::as_array).into_iter().flatten().any(|rule| rule_matches(rule, target))
}

/// Whether one rule (`RuleWithOperations`) matches.
pub fn rule_matches(rule: &Value, t: &Target) -> bool {
    let list = |k: &str| -> Vec<&str> { rule.get(k).and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect() };
    let has = |k: &str, v: &str| list(k).iter().any(|x| *x == "*" || *x == v);
    has("operations", t.operation.as_str())
        && has("apiGroups", t.group)
        && has("apiVersions", t.version)
        && list("resources").iter().any(|r| resource_matches(r, t.resource, t.subresource))
        && scope_matches(rule.get("scope").and_then(Value::as_str).unwrap_or("*"), t)
}

/// `resources` entries: `plural` (the object itself), `plural/sub`, `*` (every object),
/// `*/sub`, `plural/*` and `*/*` (everything, subresources included).
fn resource_matches(entry: &str, resource: &str, subresource: &str) -> bool {
    match entry.split_once('/') {
        None => subresource.is_empty() && (entry == "*" || entry == resource),
        Some((r, s)) => (r == "*" || r == resource) && (s == "*" || s == subresource),
    }
}

/// `scope`: Namespace objects count as cluster-scoped though their requests carry a namespace.
fn scope_matches(scope: &str, t: &Target) -> bool {
    let namespace_object = t.group.is_empty() && t.resource == "namespaces";
    match scope {
        "Namespaced" => !namespace_object && !t.namespace.is_empty(),
        "Cluster" => namespace_object || t.namespace.is_empty(),
        _ => true,
    }
}

/// A label selector (`metav1.LabelSelector`) of a webhook, or why it cannot be read.
pub fn selector(hook: &Value, field: &str) -> Result<LabelSelector, String> {
    let Some(sel) = hook.get(field).filter(|v| !v.is_null()) else {
        return Ok(LabelSelector::from_object(&Value::Null));
    };
    if !sel.is_object() {
        return Err(format!("{field}: expected a label selector object"));
    }
    for e in sel.get("matchExpressions").and_then(Value::as_array).into_iter().flatten() {
        let op = e.get("operator").and_then(Value::as_str).unwrap_or("");
        if !matches!(op, "In" | "NotIn" | "Exists" | "DoesNotExist") {
            return Err(format!("{op:?} is not a valid label selector operator"));
        }
    }
    Ok(LabelSelector::from_object(sel))
}

/// The webhook's `namespaceSelector` against the labels of the request's namespace: `None`
/// for a cluster-scoped object other than a Namespace, which it does not apply to.
pub fn namespace_matches(hook: &Value, namespace_labels: Option<&Value>) -> Result<bool, String> {
    let sel = selector(hook, "namespaceSelector")?;
    Ok(match namespace_labels {
        None => true,
        Some(labels) => sel.is_empty() || sel.matches(Some(labels)),
    })
}

/// The webhook's `objectSelector` against the new or the old object's labels: either
/// matching is enough (an absent object matches no non-empty selector).
pub fn object_matches(hook: &Value, object: Option<&Value>, old: Option<&Value>) -> Result<bool, String> {
    let sel = selector(hook, "objectSelector")?;
    if sel.is_empty() {
        return Ok(true);
    }
    let labels = |o: &Value| o.pointer("/metadata/labels").cloned().unwrap_or(Value::Object(Default::default()));
    Ok([object, old].into_iter().flatten().any(|o| sel.matches(Some(&labels(o)))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn target<'a>(op: Operation, group: &'a str, resource: &'a str, sub: &'a str, ns: &'a str) -> Target<'a> {
        Target { operation: op, group, version: "v1", resource, subresource: sub, namespace: ns }
    }

    #[test]
    fn rules_match_operations_groups_versions_resources_and_scope() {
        use Operation::*;
        let rule = |ops: Value, groups: Value, versions: Value, resources: Value, scope: Option<&str>| {
            let mut r = json!({"operations": ops, "apiGroups": groups, "apiVersions": versions, "resources": resources});
            if let Some(s) = scope {
                r["scope"] = json!(s);
            }
            r
        };
        let all = || json!(["*"]);
        let cases: Vec<(Value, Target, bool, &str)> = vec![
            (rule(json!(["CREATE"]), all(), all(), all(), None), target(Create, "g", "things", "", "ns"), true, "CREATE matches"),
            (rule(json!(["CREATE"]), all(), all(), all(), None), target(Update, "g", "things", "", "ns"), false, "UPDATE is not CREATE"),
            (rule(json!(["*"]), all(), all(), all(), None), target(Delete, "g", "things", "", "ns"), true, "* is every operation"),
            (rule(all(), json!(["g"]), all(), all(), None), target(Create, "h", "things", "", "ns"), false, "another group"),
            (rule(all(), json!([""]), all(), all(), None), target(Create, "", "pods", "", "ns"), true, "core group"),
            (rule(all(), all(), json!(["v2"]), all(), None), target(Create, "g", "things", "", "ns"), false, "another version"),
            (rule(all(), all(), all(), json!(["things"]), None), target(Create, "g", "things", "", "ns"), true, "the resource"),
            (
                rule(all(), all(), all(), json!(["things"]), None),
                target(Update, "g", "things", "status", "ns"),
                false,
                "plain names no subresource",
            ),
            (rule(all(), all(), all(), json!(["*"]), None), target(Update, "g", "things", "status", "ns"), false, "* names no subresource"),
            (rule(all(), all(), all(), json!(["things/status"]), None), target(Update, "g", "things", "status", "ns"), true, "x/status"),
            (rule(all(), all(), all(), json!(["things/status"]), None), target(Update, "g", "things", "", "ns"), false, "x/status not x"),
            (rule(all(), all(), all(), json!(["*/status"]), None), target(Update, "g", "others", "status", "ns"), true, "*/status"),
            (rule(all(), all(), all(), json!(["things/*"]), None), target(Update, "g", "things", "scale", "ns"), true, "x/*"),
            (rule(all(), all(), all(), json!(["*/*"]), None), target(Update, "g", "things", "", "ns"), true, "*/* is everything"),
            (rule(all(), all(), all(), json!(["others"]), None), target(Create, "g", "things", "", "ns"), false, "another resource"),
            (rule(all(), all(), all(), all(), Some("Namespaced")), target(Create, "g", "things", "", ""), false, "cluster object"),
            (rule(all(), all(), all(), all(), Some("Namespaced")), target(Create, "g", "things", "", "ns"), true, "namespaced"),
            (rule(all(), all(), all(), all(), Some("Cluster")), target(Create, "g", "things", "", "ns"), false, "namespaced"),
            (rule(all(), all(), all(), all(), Some("Cluster")), target(Create, "", "namespaces", "", "ns"), true, "a Namespace"),
            (rule(all(), all(), all(), all(), Some("Namespaced")), target(Create, "", "namespaces", "", "ns"), false, "a Namespace"),
            (json!({"operations": "CREATE"}), target(Create, "g", "things", "", "ns"), false, "garbage never matches"),
        ];
        for (rule, t, want, why) in cases {
            assert_eq!(rule_matches(&rule, &t), want, "{why}: {rule} / {t:?}");
        }
    }

    #[test]
    fn selectors_match_namespace_labels_and_new_or_old_object_labels() {
        let hook = json!({
            "namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "In", "values": ["a"]}]},
            "objectSelector": {"matchLabels": {"hooked": "yes"}},
        });
        assert_eq!(namespace_matches(&hook, Some(&json!({"team": "a"}))), Ok(true));
        assert_eq!(namespace_matches(&hook, Some(&json!({"team": "b"}))), Ok(false));
        assert_eq!(namespace_matches(&hook, None), Ok(true), "cluster-scoped objects are not selected by namespace");
        let labelled = json!({"metadata": {"labels": {"hooked": "yes"}}});
        let plain = json!({"metadata": {}});
        assert_eq!(object_matches(&hook, Some(&labelled), None), Ok(true));
        assert_eq!(object_matches(&hook, Some(&plain), None), Ok(false));
        assert_eq!(object_matches(&hook, Some(&plain), Some(&labelled)), Ok(true), "the old object counts on UPDATE");
        assert_eq!(object_matches(&hook, None, Some(&labelled)), Ok(true), "DELETE: the old object");
        assert_eq!(object_matches(&json!({"objectSelector": {}}), None, None), Ok(true), "empty selects everything");
        let bad = json!({"objectSelector": {"matchExpressions": [{"key": "x", "operator": "Near"}]}});
        assert!(object_matches(&bad, Some(&plain), None).is_err());
        assert!(namespace_matches(&json!({"namespaceSelector": "x"}), None).is_err());
    }
}
