//! Defaults of admission webhook configurations (admissionregistration.k8s.io/v1).

use serde_json::{Value, json};

/// The defaults of every webhook of a Validating- or MutatingWebhookConfiguration.
pub(super) fn webhooks(obj: &mut Value, mutating: bool) {
    for hook in obj.get_mut("webhooks").and_then(Value::as_array_mut).into_iter().flatten().filter_map(Value::as_object_mut) {
        hook.entry("failurePolicy").or_insert_with(|| json!("Fail"));
        hook.entry("matchPolicy").or_insert_with(|| json!("Equivalent"));
        hook.entry("namespaceSelector").or_insert_with(|| json!({}));
        hook.entry("objectSelector").or_insert_with(|| json!({}));
        hook.entry("timeoutSeconds").or_insert_with(|| json!(10));
        if mutating {
            hook.entry("reinvocationPolicy").or_insert_with(|| json!("Never"));
        }
        for rule in hook.get_mut("rules").and_then(Value::as_array_mut).into_iter().flatten().filter_map(Value::as_object_mut) {
            rule.entry("scope").or_insert_with(|| json!("*"));
        }
        if let Some(service) = hook.get_mut("clientConfig").and_then(|c| c.get_mut("service")).and_then(Value::as_object_mut) {
            service.entry("port").or_insert_with(|| json!(443));
        }
    }
}
