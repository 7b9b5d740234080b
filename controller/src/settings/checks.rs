//! Checks of values that come from handler servers' settings: names Kubernetes accepts,
//! addresses, and Kopf's storages read into what the controller can keep. Each says why a
//! value is refused, in words for the log.

use bosun_proto::v1 as pb;

use crate::state::storage::StorageKind;

/// A DNS subdomain (RFC 1123) as Kubernetes checks object names, prefixes and webhook
/// configurations' names: at most 253 lowercase letters, digits, `-` and `.`, beginning and
/// ending with a letter or digit.
pub fn dns_subdomain(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("it is empty".into());
    }
    if s.len() > 253 {
        return Err(format!("it is longer than 253 characters ({})", s.len()));
    }
    if let Some(c) = s.chars().find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.'))) {
        return Err(format!("{c:?} is not allowed (use lowercase letters, digits, '-' and '.')"));
    }
    if s.split('.').any(|part| part.is_empty() || part.starts_with('-') || part.ends_with('-')) {
        return Err("each part between dots must begin and end with a letter or digit".into());
    }
    Ok(())
}

/// A qualified name as Kubernetes checks finalizers: `[prefix/]name`, the prefix a DNS
/// subdomain, the name at most 63 letters, digits, `-`, `_` and `.`, beginning and ending with
/// a letter or digit.
pub fn qualified_name(s: &str) -> Result<(), String> {
    let (prefix, name) = match s.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, s),
    };
    if let Some(prefix) = prefix {
        dns_subdomain(prefix).map_err(|why| format!("its prefix is no DNS subdomain: {why}"))?;
    }
    if name.is_empty() || name.len() > 63 {
        return Err("its name must have 1 to 63 characters".into());
    }
    if let Some(c) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))) {
        return Err(format!("{c:?} is not allowed in its name (use letters, digits, '-', '_' and '.')"));
    }
    let ends = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !ends(name.chars().next()) || !ends(name.chars().last()) {
        return Err("its name must begin and end with a letter or digit".into());
    }
    Ok(())
}

/// A listen address, `host:port` (`0.0.0.0:9443`, `localhost:9443`, `[::]:9443`).
pub fn listen_address(s: &str) -> Result<(), String> {
    let (host, port) = s.rsplit_once(':').ok_or("give host:port")?;
    port.parse::<u16>().map_err(|_| format!("{port:?} is not a port number"))?;
    host_name(host.trim_start_matches('[').trim_end_matches(']')).map_err(|why| format!("its host: {why}"))
}

/// A host name or IP address, as a URL's host.
pub fn host_name(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("it is empty".into());
    }
    if s.parse::<std::net::IpAddr>().is_ok() {
        return Ok(());
    }
    if let Some(c) = s.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '.'))) {
        return Err(format!("{c:?} is not allowed in a host name"));
    }
    Ok(())
}

/// Where a Kopf storage keeps its state, read into what the controller can keep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// In annotations under this prefix, with Kopf's V1 keys too (`v1`) or not.
    Annotations {
        /// The prefix.
        prefix: String,
        /// Kopf's `v1`.
        v1: bool,
    },
    /// In `status.<stanza>` (`None`: a field of another shape, the default stanza instead).
    Status(Option<String>),
}

impl Place {
    /// Its kind.
    pub fn kind(&self) -> StorageKind {
        match self {
            Place::Annotations { .. } => StorageKind::Annotations,
            Place::Status(_) => StorageKind::Status,
        }
    }
}

/// What a Kopf storage says: `Ok(None)` when it is unset, else its place and warnings about
/// what the controller keeps otherwise than asked (`last` is the name of the field it keeps
/// under: `progress` or `last-handled-configuration`).
pub fn storage(s: &pb::StateStorage, last: &str) -> Result<Option<(Place, Vec<String>)>, String> {
    let mut warnings = Vec::new();
    let place = match pb::state_storage::Kind::try_from(s.kind) {
        Err(_) => return Err(format!("its kind {} is none the controller knows (annotations or status)", s.kind)),
        Ok(pb::state_storage::Kind::Unspecified) => return Ok(None),
        Ok(pb::state_storage::Kind::Annotations) => {
            dns_subdomain(&s.prefix).map_err(|why| format!("its prefix {:?} is no DNS subdomain: {why}", s.prefix))?;
            if last == "last-handled-configuration" && !s.key.is_empty() && s.key != last {
                warnings.push(format!(
                    "its key {:?} is not one the controller keeps the last handled configuration under; `{}/{last}` is used instead",
                    s.key, s.prefix
                ));
            }
            Place::Annotations { prefix: s.prefix.clone(), v1: s.v1 }
        }
        Ok(pb::state_storage::Kind::Status) => {
            let parts: Vec<&str> = s.field.split('.').collect();
            match parts.as_slice() {
                ["status", stanza, end] if *end == last && !stanza.is_empty() => Place::Status(Some(stanza.to_string())),
                _ => {
                    warnings.push(format!(
                        "its field {:?} has a shape the controller does not keep state at (`status.<name>.{last}`); the default `status.<name>` is used instead",
                        s.field
                    ));
                    Place::Status(None)
                }
            }
        }
    };
    Ok(Some((place, warnings)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_addresses_are_checked_as_kubernetes_and_urls_need_them() {
        type Check = fn(&str) -> Result<(), String>;
        let long = "a".repeat(254);
        let cases: Vec<(Check, &str, bool)> = vec![
            (dns_subdomain, "my.op.example", true),
            (dns_subdomain, "", false),
            (dns_subdomain, "My.op", false),
            (dns_subdomain, "-op.example", false),
            (dns_subdomain, "op..example", false),
            (dns_subdomain, &long, false),
            (qualified_name, "my.op.example/finalizer", true),
            (qualified_name, "kopf.zalando.org/KopfFinalizerMarker", true),
            (qualified_name, "finalizer", true),
            (qualified_name, "", false),
            (qualified_name, "my.op/", false),
            (qualified_name, "My_Op/x", false),
            (qualified_name, "my.op/has space", false),
            (qualified_name, "my.op/-x", false),
            (listen_address, "0.0.0.0:9443", true),
            (listen_address, "localhost:9443", true),
            (listen_address, "[::]:9443", true),
            (listen_address, "9443", false),
            (listen_address, "0.0.0.0:http", false),
            (listen_address, ":9443", false),
            (host_name, "op.example", true),
            (host_name, "fd00::1", true),
            (host_name, "https://op.example", false),
            (host_name, "", false),
        ];
        for (check, value, ok) in cases {
            assert_eq!(check(value).is_ok(), ok, "{value:?}: {:?}", check(value));
        }
    }

    #[test]
    fn kopf_storages_are_read_into_places_with_what_is_kept_otherwise() {
        use pb::state_storage::Kind;
        let annotations = |prefix: &str, v1: bool, key: &str| pb::StateStorage {
            kind: Kind::Annotations as i32,
            prefix: prefix.into(),
            v1,
            key: key.into(),
            ..Default::default()
        };
        let status = |field: &str| pb::StateStorage { kind: Kind::Status as i32, field: field.into(), ..Default::default() };
        let place = |prefix: &str, v1| Place::Annotations { prefix: prefix.into(), v1 };
        const DIFFBASE: &str = "last-handled-configuration";
        // (storage, what it keeps) → place and how many warnings, or an error
        type Want = Result<Option<(Place, usize)>, ()>;
        let cases: Vec<(pb::StateStorage, &str, Want)> = vec![
            (pb::StateStorage::default(), "progress", Ok(None)),
            (annotations("my.op", true, ""), "progress", Ok(Some((place("my.op", true), 0)))),
            (annotations("my.op", false, DIFFBASE), DIFFBASE, Ok(Some((place("my.op", false), 0)))),
            (annotations("my.op", true, "last-state"), DIFFBASE, Ok(Some((place("my.op", true), 1)))),
            (annotations("", true, ""), "progress", Err(())),
            (annotations("My Op", true, ""), "progress", Err(())),
            (status("status.my-op.progress"), "progress", Ok(Some((Place::Status(Some("my-op".into())), 0)))),
            (status("status.my-op.last-handled-configuration"), DIFFBASE, Ok(Some((Place::Status(Some("my-op".into())), 0)))),
            (status("status.my-op.progress"), DIFFBASE, Ok(Some((Place::Status(None), 1)))),
            (status("status.a.b.progress"), "progress", Ok(Some((Place::Status(None), 1)))),
            (status("spec.progress"), "progress", Ok(Some((Place::Status(None), 1)))),
            (pb::StateStorage { kind: 7, ..Default::default() }, "progress", Err(())),
        ];
        for (s, last, want) in cases {
            let got = storage(&s, last).map(|o| o.map(|(p, w)| (p, w.len()))).map_err(|_| ());
            assert_eq!(got, want, "{s:?} for {last}");
        }
    }
}
