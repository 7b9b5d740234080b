//! Name, label and annotation validation with the real server's messages (the texts of the
//! `Invalid value` causes in 422 answers).

use serde_json::Value;

use crate::registry::ResourceInfo;
use crate::status::Cause;

/// Message for an invalid RFC 1123 subdomain (most object names).
pub const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
/// Message for an invalid RFC 1123 label (namespace names).
pub const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const NAME_PART_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

fn is_alnum_lower(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// RFC 1123 label: `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 characters.
pub fn dns_label(s: &str) -> Result<(), String> {
    if s.len() > 63 {
        return Err("must be no more than 63 characters".into());
    }
    let ok =
        !s.is_empty() && s.chars().all(|c| is_alnum_lower(c) || c == '-') && s.starts_with(is_alnum_lower) && s.ends_with(is_alnum_lower);
    if ok { Ok(()) } else { Err(LABEL_MSG.into()) }
}

/// RFC 1123 subdomain, at most 253 characters.
pub fn dns_subdomain(s: &str) -> Result<(), String> {
    if s.len() > 253 {
        return Err("must be no more than 253 characters".into());
    }
    let ok = !s.is_empty()
        && s.split('.').all(|p| {
            !p.is_empty()
                && p.chars().all(|c| is_alnum_lower(c) || c == '-')
                && p.starts_with(is_alnum_lower)
                && p.ends_with(is_alnum_lower)
        });
    if ok { Ok(()) } else { Err(SUBDOMAIN_MSG.into()) }
}

/// A path segment name (RBAC objects, whose names hold colons such as
/// `system:controller:x`): anything but `.` and `..`, without `/` or `%`.
pub fn path_segment(s: &str) -> Result<(), String> {
    if s == "." || s == ".." {
        return Err(format!("may not be '{s}'"));
    }
    match ['/', '%'].into_iter().find(|c| s.contains(*c)) {
        Some(c) => Err(format!("may not contain '{c}'")),
        None => Ok(()),
    }
}

/// The rule names of `info`'s objects follow: namespaces are RFC 1123 labels, RBAC objects
/// path segments, everything else RFC 1123 subdomains.
pub fn name_rule(info: &ResourceInfo) -> fn(&str) -> Result<(), String> {
    match (info.builtin, info.group.as_str(), info.plural.as_str()) {
        (true, "", "namespaces") => dns_label,
        (true, "rbac.authorization.k8s.io", _) => path_segment,
        _ => dns_subdomain,
    }
}

fn name_part(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// A qualified name (label and annotation keys): `[prefix/]name`.
pub fn qualified_name(s: &str) -> Result<(), String> {
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    if let Some(p) = prefix {
        if p.is_empty() {
            return Err("prefix part must be non-empty".into());
        }
        dns_subdomain(p).map_err(|m| format!("prefix part {m}"))?;
    }
    if name.len() > 63 {
        return Err("name part must be no more than 63 characters".into());
    }
    if name_part(name) { Ok(()) } else { Err(NAME_PART_MSG.into()) }
}

/// A label value: empty or a name part.
pub fn label_value(s: &str) -> Result<(), String> {
    if s.is_empty() || name_part(s) { Ok(()) } else { Err(LABEL_VALUE_MSG.into()) }
}

/// Validate an object's metadata (name rule given by `name_check`), labels and annotations.
pub fn metadata(obj: &Value, name_check: fn(&str) -> Result<(), String>) -> Vec<Cause> {
    let mut causes = Vec::new();
    let meta = obj.get("metadata");
    let name = meta.and_then(|m| m.get("name")).and_then(Value::as_str).unwrap_or("");
    if name.is_empty() {
        causes.push(Cause::new("FieldValueRequired", "Required value: name or generateName is required", "metadata.name"));
    } else if let Err(msg) = name_check(name) {
        causes.push(Cause::new("FieldValueInvalid", format!("Invalid value: \"{name}\": {msg}"), "metadata.name"));
    }
    if let Some(labels) = meta.and_then(|m| m.get("labels")).and_then(Value::as_object) {
        for (k, v) in labels {
            if let Err(msg) = qualified_name(k) {
                causes.push(Cause::new("FieldValueInvalid", format!("Invalid value: \"{k}\": {msg}"), "metadata.labels"));
            }
            match v.as_str() {
                Some(s) => {
                    if let Err(msg) = label_value(s) {
                        causes.push(Cause::new(
                            "FieldValueInvalid",
                            format!("Invalid value: \"{s}\": {msg}"),
                            format!("metadata.labels.{k}"),
                        ));
                    }
                }
                None => causes.push(Cause::new(
                    "FieldValueInvalid",
                    format!("Invalid value: {v}: must be a string"),
                    format!("metadata.labels.{k}"),
                )),
            }
        }
    }
    for r in meta.and_then(|m| m.get("ownerReferences")).and_then(Value::as_array).into_iter().flatten() {
        if r.get("uid").and_then(Value::as_str).unwrap_or("").is_empty() {
            causes.push(Cause::new("FieldValueInvalid", "Invalid value: \"\": must not be empty", "metadata.ownerReferences.uid"));
        }
        for (k, field) in [
            ("apiVersion", "metadata.ownerReferences.apiVersion"),
            ("kind", "metadata.ownerReferences.kind"),
            ("name", "metadata.ownerReferences.name"),
        ] {
            if r.get(k).and_then(Value::as_str).unwrap_or("").is_empty() {
                causes.push(Cause::new("FieldValueInvalid", "Invalid value: \"\": must not be empty", field));
            }
        }
    }
    if let Some(ann) = meta.and_then(|m| m.get("annotations")).and_then(Value::as_object) {
        for k in ann.keys() {
            if let Err(msg) = qualified_name(&k.to_ascii_lowercase()) {
                causes.push(Cause::new("FieldValueInvalid", format!("Invalid value: \"{k}\": {msg}"), "metadata.annotations"));
            }
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_rfc_1123() {
        let table = [
            ("abc", true, true),
            ("a.b", true, false),
            ("Bad_Name", false, false),
            ("-a", false, false),
            ("a-", false, false),
            ("", false, false),
        ];
        for (name, subdomain, label) in table {
            assert_eq!(dns_subdomain(name).is_ok(), subdomain, "subdomain {name}");
            assert_eq!(dns_label(name).is_ok(), label, "label {name}");
        }
    }

    #[test]
    fn rbac_names_are_path_segments() {
        let table = [
            ("system:controller:x", Ok(())),
            (".", Err("may not be '.'")),
            ("..", Err("may not be '..'")),
            ("a/b", Err("may not contain '/'")),
            ("a%b", Err("may not contain '%'")),
        ];
        for (name, want) in table {
            assert_eq!(path_segment(name), want.map_err(String::from), "{name}");
        }
    }

    #[test]
    fn label_keys_may_have_a_dns_prefix() {
        assert!(qualified_name("example.com/key").is_ok());
        assert!(qualified_name("key_1.x").is_ok());
        assert!(qualified_name("/key").is_err());
        assert!(qualified_name("bad key").is_err());
    }
}
