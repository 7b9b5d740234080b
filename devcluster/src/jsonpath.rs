//! The simple JSON paths of a CRD's `scale` subresource (`.spec.replicas`,
//! `.status.selector`): a leading dot and field names joined by dots. The real server checks
//! them with `validateSimpleJSONPath` and reads and writes them with apimachinery's
//! `unstructured.Nested*` helpers, whose error texts its answers carry; this module does the
//! same.

use serde_json::{Map, Value};

/// A parsed simple JSON path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimplePath {
    text: String,
    fields: Vec<String>,
}

impl SimplePath {
    /// Parse a path as the CRD validation accepts it; the error is the real server's reason
    /// (`must not be empty`, `must be a simple json path starting with .`).
    pub fn parse(text: &str) -> Result<Self, &'static str> {
        if text.is_empty() {
            return Err("must not be empty");
        }
        let Some(rest) = text.strip_prefix('.') else {
            return Err("must be a simple json path starting with .");
        };
        Ok(SimplePath { text: text.to_string(), fields: rest.split('.').map(String::from).collect() })
    }

    /// The path as written in the CRD.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the path starts with `prefix` (such as `.spec.`).
    pub fn is_under(&self, prefix: &str) -> bool {
        self.text.starts_with(prefix)
    }

    /// The value at the path: `None` where a field is missing or a value on the way is
    /// null; an error where a value on the way is not an object (`NestedFieldNoCopy`).
    pub fn get<'a>(&self, obj: &'a Value) -> Result<Option<&'a Value>, String> {
        let mut cur = obj;
        for (i, field) in self.fields.iter().enumerate() {
            if cur.is_null() {
                return Ok(None);
            }
            let Some(map) = cur.as_object() else {
                return Err(format!(
                    "{} accessor error: {} is of the type {}, expected map[string]interface{{}}",
                    dotted(&self.fields[..=i]),
                    go_value(cur),
                    go_type(cur)
                ));
            };
            match map.get(field) {
                Some(v) => cur = v,
                None => return Ok(None),
            }
        }
        Ok(Some(cur))
    }

    /// The integer at the path (`NestedInt64`).
    pub fn int(&self, obj: &Value) -> Result<Option<i64>, String> {
        match self.get(obj)? {
            None => Ok(None),
            Some(v) => v.as_i64().map(Some).ok_or_else(|| self.wrong_type(v, "int64")),
        }
    }

    /// The string at the path (`NestedString`).
    pub fn string<'a>(&self, obj: &'a Value) -> Result<Option<&'a str>, String> {
        match self.get(obj)? {
            None => Ok(None),
            Some(v) => v.as_str().map(Some).ok_or_else(|| self.wrong_type(v, "string")),
        }
    }

    /// Set the value at the path, creating missing objects on the way (`SetNestedField`).
    pub fn set(&self, obj: &mut Value, value: Value) -> Result<(), String> {
        let mut cur = obj;
        for (i, field) in self.fields.iter().enumerate() {
            let Some(map) = cur.as_object_mut() else {
                return Err(format!("value cannot be set because {} is not a map[string]interface{{}}", dotted(&self.fields[..i])));
            };
            if i + 1 == self.fields.len() {
                map.insert(field.clone(), value);
                return Ok(());
            }
            let next = map.entry(field.clone()).or_insert(Value::Null);
            if next.is_null() {
                *next = Value::Object(Map::new());
            }
            cur = next;
        }
        Ok(())
    }

    fn wrong_type(&self, v: &Value, expected: &str) -> String {
        format!("{} accessor error: {} is of the type {}, expected {expected}", self.text_of_fields(), go_value(v), go_type(v))
    }

    fn text_of_fields(&self) -> String {
        dotted(&self.fields)
    }
}

fn dotted(fields: &[String]) -> String {
    format!(".{}", fields.join("."))
}

/// The Go type name of a decoded JSON value, as `%T` prints it.
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_i64() || n.is_u64() => "int64",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// A decoded JSON value as `%v` prints it (close enough for lists and objects).
fn go_value(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parse_accepts_the_paths_the_real_crd_validation_accepts() {
        let cases: &[(&str, Result<&[&str], &str>)] = &[
            (".spec.replicas", Ok(&["spec", "replicas"])),
            (".status.selector", Ok(&["status", "selector"])),
            (".spec", Ok(&["spec"])),
            (".", Ok(&[""])),
            ("", Err("must not be empty")),
            ("spec.replicas", Err("must be a simple json path starting with .")),
            ("$.spec.replicas", Err("must be a simple json path starting with .")),
        ];
        for (text, want) in cases {
            let got = SimplePath::parse(text).map(|p| p.fields.clone());
            let want = want.map(|w| w.iter().map(|s| s.to_string()).collect::<Vec<_>>());
            assert_eq!(got, want, "{text:?}");
        }
    }

    #[test]
    fn reads_integers_and_strings_with_the_nested_helpers_errors() {
        let obj = json!({"spec": {"replicas": 3, "name": "x", "half": 1.5, "none": null}, "status": "flat"});
        let p = |s: &str| SimplePath::parse(s).unwrap();
        let cases: &[(&str, Result<Option<i64>, &str>)] = &[
            (".spec.replicas", Ok(Some(3))),
            (".spec.missing", Ok(None)),
            (".nothing.here", Ok(None)),
            (".spec.none.deeper", Ok(None)),
            (".spec.name", Err(".spec.name accessor error: x is of the type string, expected int64")),
            (".spec.half", Err(".spec.half accessor error: 1.5 is of the type float64, expected int64")),
            (".spec.none", Err(".spec.none accessor error: <nil> is of the type <nil>, expected int64")),
            (".status.replicas", Err(".status.replicas accessor error: flat is of the type string, expected map[string]interface{}")),
        ];
        for (path, want) in cases {
            assert_eq!(p(path).int(&obj), want.map_err(String::from), "{path}");
        }
        assert_eq!(p(".spec.name").string(&obj), Ok(Some("x")));
        assert_eq!(p(".spec.replicas").string(&obj), Err(".spec.replicas accessor error: 3 is of the type int64, expected string".into()));
    }

    #[test]
    fn set_creates_missing_objects_and_refuses_to_go_through_other_values() {
        let p = |s: &str| SimplePath::parse(s).unwrap();
        let mut obj = json!({"spec": {"other": 1, "gone": null}, "status": "flat"});
        p(".spec.replicas").set(&mut obj, json!(4)).unwrap();
        p(".spec.deep.replicas").set(&mut obj, json!(5)).unwrap();
        p(".spec.gone.replicas").set(&mut obj, json!(6)).unwrap();
        assert_eq!(obj["spec"], json!({"other": 1, "gone": {"replicas": 6}, "replicas": 4, "deep": {"replicas": 5}}));
        let err = p(".status.replicas").set(&mut obj, json!(1)).unwrap_err();
        assert_eq!(err, "value cannot be set because .status is not a map[string]interface{}");
    }
}
