//! Defaults of the networking kinds: Ingress status, NetworkPolicy policy types and port
//! protocols, Endpoints and EndpointSlice port protocols and names.

use serde_json::{Value, json};

/// `protocol: TCP` (and `name: ""` where `named`) on every port of the list at `pointer`.
fn ports(obj: &mut Value, pointer: &str, named: bool) {
    for port in obj.pointer_mut(pointer).and_then(Value::as_array_mut).into_iter().flatten().filter_map(Value::as_object_mut) {
        port.entry("protocol").or_insert_with(|| json!("TCP"));
        if named {
            port.entry("name").or_insert_with(|| json!(""));
        }
    }
}

pub(super) fn ingress(obj: &mut Value) {
    if obj.get("status").is_none() {
        obj["status"] = json!({"loadBalancer": {}});
    }
}

pub(super) fn network_policy(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if spec.get("policyTypes").and_then(Value::as_array).is_none_or(Vec::is_empty) {
        let egress = spec.get("egress").and_then(Value::as_array).is_some_and(|e| !e.is_empty());
        spec.insert("policyTypes".into(), if egress { json!(["Ingress", "Egress"]) } else { json!(["Ingress"]) });
    }
    for direction in ["ingress", "egress"] {
        for rule in spec.get_mut(direction).and_then(Value::as_array_mut).into_iter().flatten() {
            ports(rule, "/ports", false);
        }
    }
}

pub(super) fn endpoints(obj: &mut Value) {
    for subset in obj.get_mut("subsets").and_then(Value::as_array_mut).into_iter().flatten() {
        ports(subset, "/ports", false);
    }
}

pub(super) fn endpoint_slice(obj: &mut Value) {
    ports(obj, "/ports", true);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_policies_default_their_policy_types_from_their_rules() {
        let table = [
            (json!({"spec": {}}), json!(["Ingress"])),
            (json!({"spec": {"egress": [{}]}}), json!(["Ingress", "Egress"])),
            (json!({"spec": {"policyTypes": ["Egress"], "egress": [{}]}}), json!(["Egress"])),
        ];
        for (mut np, want) in table {
            network_policy(&mut np);
            assert_eq!(np["spec"]["policyTypes"], want);
        }
        let mut np = json!({"spec": {"ingress": [{"ports": [{"port": 80}, {"port": 53, "protocol": "UDP"}]}]}});
        network_policy(&mut np);
        assert_eq!(np["spec"]["ingress"][0]["ports"], json!([{"port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]));
    }
}
