//! The columns and cells `kubectl get` shows for each built-in kind, as the real server's
//! printers (`pkg/printers/internalversion`) produce them for a Table answer. The server
//! always prints the wide cells too (priority 1 columns); kubectl hides them without `-o wide`.

mod access;
mod cells;
mod core;
mod network;
mod workloads;

use serde_json::Value;

use crate::registry::ResourceInfo;
pub use cells::{AGE_DESC, NAME_DESC, Row, age, col};
use cells::{age_col, name, name_col};

/// The columns and row printer of a built-in kind; Name and Age for kinds without a printer.
pub fn columns(info: &ResourceInfo) -> (Vec<Value>, Row) {
    let found = match info.group.as_str() {
        "" | "coordination.k8s.io" | "events.k8s.io" => core::columns(&info.group, &info.plural),
        "apps" | "batch" | "policy" => workloads::columns(&info.plural),
        "networking.k8s.io" | "discovery.k8s.io" => network::columns(&info.plural),
        _ => access::columns(&info.plural),
    };
    found.unwrap_or_else(|| (vec![name_col(), age_col()], |v| vec![name(v), age(v)]))
}

#[cfg(test)]
mod tests {
    use super::cells::*;
    use serde_json::json;

    #[test]
    fn selectors_print_as_kubectl_prints_them() {
        let table = [
            (None, "<none>"),
            (Some(json!({})), "<none>"),
            (Some(json!({"matchLabels": {"b": "2", "a": "1"}})), "a=1,b=2"),
            (
                Some(json!({"matchLabels": {"z": "1"}, "matchExpressions": [
                    {"key": "env", "operator": "In", "values": ["prod", "dev"]},
                    {"key": "tier", "operator": "NotIn", "values": ["db"]},
                    {"key": "gpu", "operator": "Exists"},
                    {"key": "old", "operator": "DoesNotExist"}]})),
                "env in (dev,prod),gpu,!old,tier notin (db),z=1",
            ),
            (Some(json!({"matchExpressions": [{"key": "a", "operator": "Near"}]})), "<error>"),
        ];
        for (selector, want) in table {
            assert_eq!(format_selector(selector.as_ref()), want, "{selector:?}");
        }
    }

    #[test]
    fn long_lists_show_three_and_how_many_more() {
        let list = |n: usize| (1..=n).map(|i| i.to_string()).collect::<Vec<_>>();
        assert_eq!(first_three(list(0), "<unset>"), "<unset>");
        assert_eq!(first_three(list(3), "<unset>"), "1,2,3");
        assert_eq!(first_three(list(5), "<unset>"), "1,2,3 + 2 more...");
    }

    #[test]
    fn access_modes_are_abbreviated_in_a_fixed_order() {
        let pv = json!({"spec": {"accessModes": ["ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"]}});
        assert_eq!(access_modes(&pv, "/spec/accessModes"), "RWO,RWX,RWOP");
        assert_eq!(access_modes(&json!({}), "/spec/accessModes"), "");
    }
}
