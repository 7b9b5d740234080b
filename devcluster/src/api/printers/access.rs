//! Printers of RBAC, admission webhook configurations and CustomResourceDefinitions.

use serde_json::{Value, json};

use super::cells::{AGE_DESC, Row, age, age_col, col, int_col, items, len, name, name_col, s, text, wide};

pub(super) fn columns(plural: &str) -> Option<(Vec<Value>, Row)> {
    let created_at = || col("Created At", "date", "", AGE_DESC, 0);
    Some(match plural {
        "roles" | "clusterroles" | "customresourcedefinitions" => {
            (vec![name_col(), created_at()], |v| vec![name(v), json!(s(v, "/metadata/creationTimestamp"))])
        }
        "rolebindings" => bindings(
            "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error. This field is immutable.",
        ),
        "clusterrolebindings" => bindings(
            "RoleRef can only reference a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error. This field is immutable.",
        ),
        "validatingwebhookconfigurations" | "mutatingwebhookconfigurations" => (
            vec![name_col(), int_col("Webhooks", "Webhooks indicates the number of webhooks registered in this configuration"), age_col()],
            |v| vec![name(v), json!(len(v, "/webhooks")), age(v)],
        ),
        _ => return None,
    })
}

fn bindings(role_desc: &str) -> (Vec<Value>, Row) {
    (
        vec![
            name_col(),
            text("Role", role_desc),
            age_col(),
            wide("Users", "Users in the roleBinding"),
            wide("Groups", "Groups in the roleBinding"),
            wide("ServiceAccounts", "ServiceAccounts in the roleBinding"),
        ],
        |v| {
            let [users, groups, service_accounts] = subjects(v);
            let role = format!("{}/{}", s(v, "/roleRef/kind"), s(v, "/roleRef/name"));
            vec![name(v), json!(role), age(v), json!(users), json!(groups), json!(service_accounts)]
        },
    )
}

/// `rbac.SubjectsStrings`: users, groups and `namespace/name` service accounts, each list
/// joined with ", ".
fn subjects(v: &Value) -> [String; 3] {
    let mut out: [Vec<String>; 3] = Default::default();
    for subject in items(v, "/subjects") {
        let name = s(subject, "/name").to_string();
        match s(subject, "/kind") {
            "User" => out[0].push(name),
            "Group" => out[1].push(name),
            "ServiceAccount" => match s(subject, "/namespace") {
                "" => out[2].push(name),
                ns => out[2].push(format!("{ns}/{name}")),
            },
            _ => {}
        }
    }
    out.map(|list| list.join(", "))
}
