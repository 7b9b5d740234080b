//! RBAC (rbac.authorization.k8s.io/v1): the defaults of bindings and their subjects, and the
//! validation clients meet — rules that name no verbs, a roleRef of the wrong kind, and a
//! roleRef changed on update (immutable: delete and recreate the binding instead).

use serde_json::{Value, json};

use crate::status::Cause;

const GROUP: &str = "rbac.authorization.k8s.io";

/// The rules of a Role or ClusterRole (`ValidatePolicyRule`).
pub(super) fn role(obj: &Value, namespaced: bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    let list = |rule: &Value, k: &str| -> Vec<String> {
        rule.get(k).and_then(Value::as_array).map(|a| a.iter().map(|x| x.as_str().unwrap_or("").to_string()).collect()).unwrap_or_default()
    };
    for (i, rule) in obj.get("rules").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let path = |k: &str| format!("rules[{i}].{k}");
        if list(rule, "verbs").is_empty() {
            causes.push(Cause::new("FieldValueRequired", "Required value: verbs must contain at least one value", path("verbs")));
        }
        let urls = list(rule, "nonResourceURLs");
        if !urls.is_empty() {
            let go = format!("[]string{{{}}}", urls.iter().map(|u| format!("{u:?}")).collect::<Vec<_>>().join(", "));
            if namespaced {
                let msg = format!("Invalid value: {go}: namespaced rules cannot apply to non-resource URLs");
                causes.push(Cause::new("FieldValueInvalid", msg, path("nonResourceURLs")));
            }
            if ["apiGroups", "resources", "resourceNames"].iter().any(|k| !list(rule, k).is_empty()) {
                let msg = format!("Invalid value: {go}: rules cannot apply to both regular resources and non-resource URLs");
                causes.push(Cause::new("FieldValueInvalid", msg, path("nonResourceURLs")));
            }
            continue;
        }
        if list(rule, "apiGroups").is_empty() {
            causes.push(Cause::new(
                "FieldValueRequired",
                "Required value: resource rules must supply at least one api group",
                path("apiGroups"),
            ));
        }
        if list(rule, "resources").is_empty() {
            causes.push(Cause::new(
                "FieldValueRequired",
                "Required value: resource rules must supply at least one resource",
                path("resources"),
            ));
        }
    }
    causes
}

/// Defaults (`roleRef.apiGroup`, the subjects' `apiGroup`) and validation of a RoleBinding or
/// ClusterRoleBinding; `old` on update, where the roleRef may not change.
pub(super) fn binding(obj: &mut Value, old: Option<&Value>, namespaced: bool) -> Vec<Cause> {
    if !obj.get("roleRef").is_some_and(Value::is_object) {
        obj["roleRef"] = json!({});
    }
    let role_ref = &mut obj["roleRef"];
    for k in ["apiGroup", "kind", "name"] {
        if !role_ref.get(k).is_some_and(Value::is_string) {
            role_ref[k] = json!("");
        }
    }
    if role_ref["apiGroup"] == "" {
        role_ref["apiGroup"] = json!(GROUP);
    }
    for subject in obj.get_mut("subjects").and_then(Value::as_array_mut).into_iter().flatten() {
        let kind = subject.get("kind").and_then(Value::as_str).unwrap_or("");
        if matches!(kind, "User" | "Group") && subject.get("apiGroup").and_then(Value::as_str).unwrap_or("").is_empty() {
            subject["apiGroup"] = json!(GROUP);
        }
    }
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let role_ref = obj["roleRef"].clone();
    let mut causes = Vec::new();
    if text(&role_ref, "apiGroup") != GROUP {
        causes.push(not_supported("roleRef.apiGroup", &text(&role_ref, "apiGroup"), &[GROUP]));
    }
    let kinds: &[&str] = if namespaced { &["Role", "ClusterRole"] } else { &["ClusterRole"] };
    if !kinds.contains(&text(&role_ref, "kind").as_str()) {
        causes.push(not_supported("roleRef.kind", &text(&role_ref, "kind"), kinds));
    }
    if text(&role_ref, "name").is_empty() {
        causes.push(Cause::new("FieldValueRequired", "Required value", "roleRef.name"));
    }
    for (i, subject) in obj.get("subjects").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let path = |k: &str| format!("subjects[{i}].{k}");
        if text(subject, "name").is_empty() {
            causes.push(Cause::new("FieldValueRequired", "Required value", path("name")));
        }
        match text(subject, "kind").as_str() {
            "ServiceAccount" => {
                if !text(subject, "apiGroup").is_empty() {
                    causes.push(not_supported(&path("apiGroup"), &text(subject, "apiGroup"), &[""]));
                }
                if !namespaced && text(subject, "namespace").is_empty() {
                    causes.push(Cause::new("FieldValueRequired", "Required value", path("namespace")));
                }
            }
            "User" | "Group" if text(subject, "apiGroup") != GROUP => {
                causes.push(not_supported(&path("apiGroup"), &text(subject, "apiGroup"), &[GROUP]));
            }
            "User" | "Group" => {}
            other => causes.push(not_supported(&path("kind"), other, &["ServiceAccount", "User", "Group"])),
        }
    }
    if let Some(old) = old
        && old.get("roleRef") != Some(&role_ref)
    {
        let go = format!(
            "rbac.RoleRef{{APIGroup:{:?}, Kind:{:?}, Name:{:?}}}",
            text(&role_ref, "apiGroup"),
            text(&role_ref, "kind"),
            text(&role_ref, "name")
        );
        causes.push(Cause::new("FieldValueInvalid", format!("Invalid value: {go}: cannot change roleRef"), "roleRef"));
    }
    causes
}

/// `field.NotSupported`: the value and the supported ones, quoted.
fn not_supported(field: &str, value: &str, supported: &[&str]) -> Cause {
    let list = supported.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>().join(", ");
    Cause::new("FieldValueNotSupported", format!("Unsupported value: {value:?}: supported values: {list}"), field)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(causes: &[Cause]) -> Vec<(String, String)> {
        causes.iter().map(|c| (c.field.clone(), c.message.clone())).collect()
    }

    #[test]
    fn bindings_get_default_api_groups_and_keep_their_role_ref() {
        let mut rb = json!({"roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "u"}, {"kind": "ServiceAccount", "name": "sa"}]});
        assert!(binding(&mut rb, None, true).is_empty());
        assert_eq!(rb["roleRef"]["apiGroup"], GROUP);
        assert_eq!(rb["subjects"][0]["apiGroup"], GROUP);
        assert!(rb["subjects"][1].get("apiGroup").is_none());
        let old = rb.clone();
        let mut changed = rb.clone();
        changed["roleRef"]["name"] = json!("edit");
        assert_eq!(
            messages(&binding(&mut changed, Some(&old), true)),
            [(
                "roleRef".to_string(),
                "Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"ClusterRole\", Name:\"edit\"}: cannot change roleRef"
                    .to_string()
            )]
        );
    }

    #[test]
    fn bindings_are_validated_as_the_real_server_validates_them() {
        let table = [
            (
                json!({"roleRef": {"kind": "Role", "name": "r"}}),
                false,
                vec![("roleRef.kind", "Unsupported value: \"Role\": supported values: \"ClusterRole\"")],
            ),
            (
                json!({"roleRef": {"kind": "Thing"}}),
                true,
                vec![
                    ("roleRef.kind", "Unsupported value: \"Thing\": supported values: \"Role\", \"ClusterRole\""),
                    ("roleRef.name", "Required value"),
                ],
            ),
            (
                json!({"roleRef": {"kind": "ClusterRole", "name": "c"}, "subjects": [{"kind": "ServiceAccount", "name": "sa"}]}),
                false,
                vec![("subjects[0].namespace", "Required value")],
            ),
            (
                json!({"roleRef": {"kind": "Role", "name": "r"}, "subjects": [{"kind": "Robot", "name": "x"}]}),
                true,
                vec![("subjects[0].kind", "Unsupported value: \"Robot\": supported values: \"ServiceAccount\", \"User\", \"Group\"")],
            ),
        ];
        for (mut obj, namespaced, want) in table {
            let got = messages(&binding(&mut obj, None, namespaced));
            let want: Vec<(String, String)> = want.into_iter().map(|(f, m)| (f.to_string(), m.to_string())).collect();
            assert_eq!(got, want, "{obj}");
        }
    }

    #[test]
    fn rules_need_verbs_and_resources() {
        let role_obj = json!({"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["pods"]}, {"verbs": ["get"]}, {"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]});
        assert_eq!(
            messages(&role(&role_obj, true)),
            [
                ("rules[1].verbs".to_string(), "Required value: verbs must contain at least one value".to_string()),
                ("rules[2].apiGroups".to_string(), "Required value: resource rules must supply at least one api group".to_string()),
                ("rules[2].resources".to_string(), "Required value: resource rules must supply at least one resource".to_string()),
                (
                    "rules[3].nonResourceURLs".to_string(),
                    "Invalid value: []string{\"/healthz\"}: namespaced rules cannot apply to non-resource URLs".to_string()
                ),
            ]
        );
        assert!(role(&json!({"rules": [{"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]}), false).is_empty());
    }
}
