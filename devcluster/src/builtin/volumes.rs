//! Defaults of PersistentVolumes and PersistentVolumeClaims: a new one is `Pending`, its
//! volume mode `Filesystem`, a volume's reclaim policy `Retain`.

use serde_json::{Value, json};

pub(super) fn persistent_volume(obj: &mut Value) {
    if obj.get("status").is_none() {
        obj["status"] = json!({"phase": "Pending", "lastPhaseTransitionTime": crate::meta::now()});
    }
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        spec.entry("persistentVolumeReclaimPolicy").or_insert_with(|| json!("Retain"));
        spec.entry("volumeMode").or_insert_with(|| json!("Filesystem"));
    }
}

pub(super) fn persistent_volume_claim(obj: &mut Value) {
    if obj.get("status").is_none() {
        obj["status"] = json!({"phase": "Pending"});
    }
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        spec.entry("volumeMode").or_insert_with(|| json!("Filesystem"));
    }
}
