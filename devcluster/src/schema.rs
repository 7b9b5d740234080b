//! Structural schemas of custom resources: pruning of unknown fields (reported for
//! `fieldValidation`), defaulting, and validation of types, enums, bounds and required
//! fields with the real server's messages.

use std::collections::HashMap;

use regex::Regex;
use serde_json::{Map, Value};

use crate::causes::{Cause, shown};

/// The `openAPIV3Schema` of one CRD version.
#[derive(Debug, Clone)]
pub struct Schema {
    root: Value,
    /// Every `pattern` of the schema, compiled once.
    patterns: HashMap<String, Regex>,
}

/// Keys of ObjectMeta a client may send.
pub const META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

impl Schema {
    /// Wrap a CRD version's `schema.openAPIV3Schema`.
    pub fn new(root: Value) -> Self {
        let mut patterns = HashMap::new();
        walk_patterns(&root, "", &mut |pattern, _| {
            if let Ok(re) = Regex::new(pattern) {
                patterns.insert(pattern.to_string(), re);
            }
        });
        Schema { root, patterns }
    }

    /// Whether the whole object keeps unknown fields.
    pub fn preserves_unknown_at_root(&self) -> bool {
        preserves(&self.root)
    }

    /// The sub-schema at a top-level property (e.g. `status`).
    pub fn property(&self, name: &str) -> Option<&Value> {
        self.root.get("properties").and_then(|p| p.get(name))
    }

    /// Remove fields the schema does not know; returns their paths (`spec.bogus`).
    pub fn prune(&self, obj: &mut Value) -> Vec<String> {
        let mut unknown = Vec::new();
        if let Some(map) = obj.as_object_mut() {
            let props = self.root.get("properties").and_then(Value::as_object);
            let keep_all = preserves(&self.root);
            let keys: Vec<String> = map.keys().cloned().collect();
            for k in keys {
                if k == "apiVersion" || k == "kind" || k == "metadata" {
                    continue;
                }
                match props.and_then(|p| p.get(&k)) {
                    Some(sub) => {
                        if let Some(v) = map.get_mut(&k) {
                            prune_value(sub, v, &k, &mut unknown);
                        }
                    }
                    None if keep_all => {}
                    None => {
                        map.remove(&k);
                        unknown.push(k);
                    }
                }
            }
        }
        unknown
    }

    /// Fill in `default` values of missing properties.
    pub fn apply_defaults(&self, obj: &mut Value) {
        default_value(&self.root, obj, true);
    }

    /// Validate against types, enums, bounds, patterns and required fields.
    pub fn validate(&self, obj: &Value) -> Vec<Cause> {
        let mut causes = Vec::new();
        if let (Some(props), Some(map)) = (self.root.get("properties").and_then(Value::as_object), obj.as_object()) {
            for (k, sub) in props {
                if k == "metadata" || k == "apiVersion" || k == "kind" {
                    continue;
                }
                if let Some(v) = map.get(k) {
                    validate_value(sub, v, k, &self.patterns, &mut causes);
                }
            }
            for r in required(&self.root) {
                if !map.contains_key(r) {
                    causes.push(Cause::new("FieldValueRequired", "Required value", r));
                }
            }
        }
        causes
    }
}

fn preserves(s: &Value) -> bool {
    s.get("x-kubernetes-preserve-unknown-fields").and_then(Value::as_bool) == Some(true)
}

fn required(s: &Value) -> impl Iterator<Item = &str> {
    s.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str)
}

fn prune_value(schema: &Value, v: &mut Value, path: &str, unknown: &mut Vec<String>) {
    if schema.get("x-kubernetes-embedded-resource").and_then(Value::as_bool) == Some(true) {
        return;
    }
    match v {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            if props.is_none() && additional.is_none() {
                if !preserves(schema) && schema.get("type").and_then(Value::as_str) == Some("object") {
                    for k in map.keys() {
                        unknown.push(format!("{path}.{k}"));
                    }
                    map.clear();
                }
                return;
            }
            let keys: Vec<String> = map.keys().cloned().collect();
            for k in keys {
                let sub = props.and_then(|p| p.get(&k)).or(additional);
                match sub {
                    Some(sub) => {
                        if let Some(child) = map.get_mut(&k) {
                            prune_value(sub, child, &format!("{path}.{k}"), unknown);
                        }
                    }
                    None if preserves(schema) => {}
                    None => {
                        map.remove(&k);
                        unknown.push(format!("{path}.{k}"));
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    prune_value(item_schema, item, &format!("{path}[{i}]"), unknown);
                }
            }
        }
        _ => {}
    }
}

fn default_value(schema: &Value, v: &mut Value, root: bool) {
    match v {
        Value::Object(map) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, sub) in props {
                    if root && k == "metadata" {
                        continue;
                    }
                    if !map.contains_key(k)
                        && let Some(d) = sub.get("default")
                    {
                        map.insert(k.clone(), d.clone());
                    }
                    if let Some(child) = map.get_mut(k) {
                        default_value(sub, child, false);
                    }
                }
            } else if let Some(add) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                for child in map.values_mut() {
                    default_value(add, child, false);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    default_value(item_schema, item, false);
                }
            }
        }
        _ => {}
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn validate_value(schema: &Value, v: &Value, path: &str, patterns: &HashMap<String, Regex>, causes: &mut Vec<Cause>) {
    if v.is_null() && schema.get("nullable").and_then(Value::as_bool) == Some(true) {
        return;
    }
    let int_or_string = schema.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true);
    if let Some(want) = schema.get("type").and_then(Value::as_str) {
        let have = type_name(v);
        let ok = have == want || (want == "number" && have == "integer") || int_or_string;
        if !ok {
            causes.push(Cause::new(
                "FieldValueTypeInvalid",
                format!("Invalid value: \"{have}\": {path} in body must be of type {want}: \"{have}\""),
                path,
            ));
            return;
        }
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.contains(v)
    {
        let list: Vec<String> = options.iter().map(shown).collect();
        causes.push(Cause::new(
            "FieldValueNotSupported",
            format!("Unsupported value: {}: supported values: {}", shown(v), list.join(", ")),
            path,
        ));
    }
    if let Some(n) = v.as_f64() {
        let exclusive_min = schema.get("exclusiveMinimum").and_then(Value::as_bool) == Some(true);
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
            && (n < min || (exclusive_min && n == min))
        {
            let rel = if exclusive_min { "greater than" } else { "greater than or equal to" };
            causes.push(Cause::new(
                "FieldValueInvalid",
                format!("Invalid value: {}: {path} in body should be {rel} {}", v, num(&schema["minimum"])),
                path,
            ));
        }
        let exclusive_max = schema.get("exclusiveMaximum").and_then(Value::as_bool) == Some(true);
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
            && (n > max || (exclusive_max && n == max))
        {
            let rel = if exclusive_max { "less than" } else { "less than or equal to" };
            causes.push(Cause::new(
                "FieldValueInvalid",
                format!("Invalid value: {}: {path} in body should be {rel} {}", v, num(&schema["maximum"])),
                path,
            ));
        }
    }
    if let Some(s) = v.as_str() {
        if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
            && s.chars().count() as u64 > max
        {
            causes.push(Cause::new("FieldValueTooLong", format!("Too long: may not be more than {max} bytes"), path));
        }
        if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
            && (s.chars().count() as u64) < min
        {
            causes.push(Cause::new(
                "FieldValueInvalid",
                format!("Invalid value: {s:?}: {path} in body should be at least {min} chars long"),
                path,
            ));
        }
        if let Some(pattern) = schema.get("pattern").and_then(Value::as_str)
            && patterns.get(pattern).is_some_and(|re| !re.is_match(s))
        {
            causes.push(Cause::new("FieldValueInvalid", format!("Invalid value: {s:?}: {path} in body should match '{pattern}'"), path));
        }
    }
    match v {
        Value::Object(map) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, sub) in props {
                    if let Some(child) = map.get(k) {
                        validate_value(sub, child, &format!("{path}.{k}"), patterns, causes);
                    }
                }
            } else if let Some(add) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                for (k, child) in map {
                    validate_value(add, child, &format!("{path}.{k}"), patterns, causes);
                }
            }
            for r in required(schema) {
                if !map.contains_key(r) {
                    causes.push(Cause::new("FieldValueRequired", "Required value", format!("{path}.{r}")));
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    validate_value(item_schema, item, &format!("{path}[{i}]"), patterns, causes);
                }
            }
        }
        _ => {}
    }
}

fn num(v: &Value) -> String {
    match v.as_f64() {
        Some(f) if f.fract() == 0.0 => format!("{}", f as i64),
        _ => v.to_string(),
    }
}

/// Calls `f` with every `pattern` of a schema and its field path (`properties[spec].pattern`
/// style, as the real server names schema fields), `path` being the schema's own.
fn walk_patterns(schema: &Value, path: &str, f: &mut impl FnMut(&str, &str)) {
    let Some(map) = schema.as_object() else { return };
    if let Some(p) = map.get("pattern").and_then(Value::as_str) {
        f(p, &format!("{path}.pattern"));
    }
    for key in ["properties", "patternProperties", "definitions", "dependencies"] {
        for (name, sub) in map.get(key).and_then(Value::as_object).into_iter().flatten() {
            walk_patterns(sub, &format!("{path}.{key}[{name}]"), f);
        }
    }
    for key in ["items", "additionalProperties", "additionalItems", "not"] {
        if let Some(sub) = map.get(key) {
            walk_patterns(sub, &format!("{path}.{key}"), f);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        for (i, sub) in map.get(key).and_then(Value::as_array).into_iter().flatten().enumerate() {
            walk_patterns(sub, &format!("{path}.{key}[{i}]"), f);
        }
    }
}

/// The `pattern`s of a CRD version's schema that are not regular expressions, refused as the
/// real server refuses them when the CRD is written; `path` is the schema's field path
/// (`spec.versions[0].schema.openAPIV3Schema`).
pub fn invalid_patterns(schema: &Value, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    walk_patterns(schema, path, &mut |pattern, field| {
        if let Err(e) = Regex::new(pattern) {
            let why = go_regexp_error(&e);
            causes.push(Cause::new(
                "FieldValueInvalid",
                format!("Invalid value: {pattern:?}: must be a valid regular expression, but isn't: error parsing regexp: {why}"),
                field,
            ));
        }
    });
    causes
}

/// The gist of a regex error on one line (the `regex` crate draws the pattern with a caret
/// under the problem; Go writes `error parsing regexp: <what>: `<where>``).
fn go_regexp_error(e: &regex::Error) -> String {
    let text = e.to_string();
    text.lines().rev().find_map(|l| l.trim().strip_prefix("error: ")).unwrap_or(text.lines().next().unwrap_or("")).trim().to_string()
}

/// Unknown keys of `metadata` (reported as `metadata.<key>`).
pub fn unknown_meta_fields(obj: &Value) -> Vec<String> {
    obj.get("metadata")
        .and_then(Value::as_object)
        .map(|m: &Map<String, Value>| m.keys().filter(|k| !META_FIELDS.contains(&k.as_str())).map(|k| format!("metadata.{k}")).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn widget() -> Schema {
        Schema::new(json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["size"], "properties": {
                "size": {"type": "integer", "minimum": 0},
                "mode": {"type": "string", "default": "auto"},
                "color": {"type": "string", "enum": ["red", "green", "blue"]},
                "code": {"type": "string", "pattern": "^[a-z]+$"}}},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}))
    }

    #[test]
    fn unknown_fields_are_pruned_and_reported() {
        let mut obj = json!({"apiVersion": "x/v1", "kind": "W", "spec": {"size": 1, "bogus": true}, "status": {"any": 1}});
        assert_eq!(widget().prune(&mut obj), vec!["spec.bogus"]);
        assert_eq!(obj["spec"], json!({"size": 1}));
        assert_eq!(obj["status"], json!({"any": 1}));
    }

    #[test]
    fn defaults_fill_missing_properties() {
        let mut obj = json!({"spec": {"size": 1}});
        widget().apply_defaults(&mut obj);
        assert_eq!(obj["spec"]["mode"], "auto");
    }

    #[test]
    fn violations_read_like_the_real_server() {
        let table = [
            (json!({"spec": {"size": "big"}}), "Invalid value: \"string\": spec.size in body must be of type integer: \"string\""),
            (json!({"spec": {"size": -1}}), "Invalid value: -1: spec.size in body should be greater than or equal to 0"),
            (
                json!({"spec": {"size": 1, "color": "purple"}}),
                "Unsupported value: \"purple\": supported values: \"red\", \"green\", \"blue\"",
            ),
            (json!({"spec": {}}), "Required value"),
            (json!({"spec": {"size": 1, "code": "ab1"}}), "Invalid value: \"ab1\": spec.code in body should match '^[a-z]+$'"),
        ];
        for (obj, msg) in table {
            let causes = widget().validate(&obj);
            assert_eq!(causes.len(), 1, "{obj}");
            assert_eq!(causes[0].message, msg);
        }
    }

    #[test]
    fn patterns_that_are_not_regular_expressions_are_named_by_their_schema_path() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "ok": {"type": "string", "pattern": "^a+$"},
            "bad": {"type": "array", "items": {"type": "string", "pattern": "(a"}}}}}});
        let causes = invalid_patterns(&schema, "spec.versions[0].schema.openAPIV3Schema");
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert_eq!(causes[0].field, "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[bad].items.pattern");
        assert!(
            causes[0].message.starts_with("Invalid value: \"(a\": must be a valid regular expression, but isn't: error parsing regexp: "),
            "{}",
            causes[0].message
        );
    }
}
