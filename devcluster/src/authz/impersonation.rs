//! Impersonation, as k8s.io/apiserver's `WithImpersonation` reads it from the
//! `Impersonate-User`, `Impersonate-Group`, `Impersonate-Uid` and `Impersonate-Extra-KEY`
//! headers (`kubectl --as=... --as-group=...`): who the request then acts as, and what the
//! caller must be allowed to do for it — `impersonate` each user, service account, group, uid
//! and extra value.

use http::HeaderMap;

use super::attributes::{Attributes, ResourceAttributes};
use super::user::{AUTHENTICATED, SERVICE_ACCOUNT_PREFIX, UNAUTHENTICATED, User, service_account_groups, service_account_name};

const USER: &str = "impersonate-user";
const GROUP: &str = "impersonate-group";
const UID: &str = "impersonate-uid";
const EXTRA: &str = "impersonate-extra-";
const AUTHENTICATION: &str = "authentication.k8s.io";

/// A request's impersonation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Impersonation {
    /// What the caller must be allowed, in the order the real server asks.
    pub checks: Vec<Attributes>,
    /// Who the request acts as.
    pub user: User,
}

/// Impersonation headers the real server refuses (with a plain-text 500).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImpersonationError {
    /// Groups, a uid or extras without `Impersonate-User`; the text lists them as Go prints
    /// the `[]ObjectReference` the real server builds.
    #[error("requested {0} without impersonating a user")]
    WithoutUser(String),
}

/// The impersonation a request's headers ask for, if any.
pub fn impersonation(headers: &HeaderMap) -> Result<Option<Impersonation>, ImpersonationError> {
    let text = |v: &http::HeaderValue| v.to_str().unwrap_or("").to_string();
    let requested = headers.get(USER).map(text).unwrap_or_default();
    let groups: Vec<String> = headers.get_all(GROUP).iter().map(text).collect();
    let uid = headers.get(UID).map(text).unwrap_or_default();
    let mut extras: Vec<(String, String)> = Vec::new();
    for (header, value) in headers {
        if let Some(key) = header.as_str().strip_prefix(EXTRA) {
            extras.push((unescape_key(key), text(value)));
        }
    }
    let account = split_service_account(&requested);
    // what the real server asks about, and how Go prints it (`ObjectReference`'s fields)
    let mut asked: Vec<(ResourceAttributes, String)> = Vec::new();
    let printed = |fields: [&str; 7]| format!("{{{}}}", fields.join(" "));
    let check = |group: &str, namespace: &str, resource: &str, sub: &str, name: &str| ResourceAttributes {
        verb: "impersonate".into(),
        group: group.into(),
        namespace: namespace.into(),
        resource: resource.into(),
        subresource: sub.into(),
        name: name.into(),
        ..Default::default()
    };
    if let Some((ns, name)) = account {
        asked.push((check("", ns, "serviceaccounts", "", name), printed(["ServiceAccount", ns, name, "", "", "", ""])));
    } else if !requested.is_empty() {
        asked.push((check("", "", "users", "", &requested), printed(["User", "", &requested, "", "", "", ""])));
    }
    for group in &groups {
        asked.push((check("", "", "groups", "", group), printed(["Group", "", group, "", "", "", ""])));
    }
    let v1 = "authentication.k8s.io/v1";
    for (key, value) in &extras {
        asked.push((check(AUTHENTICATION, "", "userextras", key, value), printed(["UserExtra", "", value, "", v1, "", key])));
    }
    if !uid.is_empty() {
        asked.push((check(AUTHENTICATION, "", "uids", "", &uid), printed(["UID", "", &uid, "", v1, "", ""])));
    }
    if requested.is_empty() {
        if asked.is_empty() {
            return Ok(None);
        }
        let printed: Vec<&str> = asked.iter().map(|(_, printed)| printed.as_str()).collect();
        return Err(ImpersonationError::WithoutUser(format!("[{}]", printed.join(" "))));
    }
    let (name, mut groups) = match account {
        Some((ns, name)) if groups.is_empty() => (service_account_name(ns, name), service_account_groups(ns)),
        Some((ns, name)) => (service_account_name(ns, name), groups),
        None => (requested.clone(), groups),
    };
    if name == "system:anonymous" {
        if !groups.iter().any(|g| g == UNAUTHENTICATED) {
            groups.push(UNAUTHENTICATED.into());
        }
    } else if !groups.iter().any(|g| g == AUTHENTICATED || g == UNAUTHENTICATED) {
        groups.push(AUTHENTICATED.into());
    }
    let checks = asked.into_iter().map(|(attrs, _)| Attributes::Resource(attrs)).collect();
    Ok(Some(Impersonation { checks, user: User { name, groups } }))
}

/// The namespace and name of a service account's user name (`serviceaccount.SplitUsername`):
/// `system:serviceaccount:NS:NAME` with NS a DNS label and NAME a DNS subdomain.
fn split_service_account(user: &str) -> Option<(&str, &str)> {
    let rest = user.strip_prefix(SERVICE_ACCOUNT_PREFIX)?;
    let (ns, name) = rest.split_once(':')?;
    let valid = !name.contains(':') && crate::validate::dns_label(ns).is_ok() && crate::validate::dns_subdomain(name).is_ok();
    valid.then_some((ns, name))
}

/// An extra's key from its header name: lowercase, percent-decoded (`url.PathUnescape`), or as
/// it is when it does not decode.
fn unescape_key(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            match key.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok()) {
                Some(b) => {
                    out.push(b);
                    i += 3;
                    continue;
                }
                None => return key.to_string(),
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| key.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(http::HeaderName::from_bytes(k.as_bytes()).unwrap(), v.parse().unwrap());
        }
        map
    }

    fn user(name: &str, groups: &[&str]) -> User {
        User { name: name.into(), groups: groups.iter().map(|g| g.to_string()).collect() }
    }

    #[test]
    fn the_impersonated_user_gets_the_groups_the_real_server_gives_it() {
        let table = [
            (
                vec![("Impersonate-User", "system:serviceaccount:team:robot")],
                user(
                    "system:serviceaccount:team:robot",
                    &["system:serviceaccounts", "system:serviceaccounts:team", "system:authenticated"],
                ),
            ),
            (
                vec![("Impersonate-User", "system:serviceaccount:team:robot"), ("Impersonate-Group", "ops")],
                user("system:serviceaccount:team:robot", &["ops", "system:authenticated"]),
            ),
            (vec![("Impersonate-User", "alice")], user("alice", &["system:authenticated"])),
            (
                vec![("Impersonate-User", "alice"), ("Impersonate-Group", "a"), ("Impersonate-Group", "system:masters")],
                user("alice", &["a", "system:masters", "system:authenticated"]),
            ),
            (
                vec![("Impersonate-User", "alice"), ("Impersonate-Group", "system:unauthenticated")],
                user("alice", &["system:unauthenticated"]),
            ),
            (vec![("Impersonate-User", "system:anonymous")], user("system:anonymous", &["system:unauthenticated"])),
            // not a valid service account name: an ordinary user
            (
                vec![("Impersonate-User", "system:serviceaccount:Team:robot")],
                user("system:serviceaccount:Team:robot", &["system:authenticated"]),
            ),
            (vec![("Impersonate-User", "system:serviceaccount:a:b:c")], user("system:serviceaccount:a:b:c", &["system:authenticated"])),
        ];
        for (pairs, want) in table {
            let got = impersonation(&headers(&pairs)).unwrap().unwrap();
            assert_eq!(got.user, want, "{pairs:?}");
        }
        assert_eq!(impersonation(&HeaderMap::new()), Ok(None));
    }

    #[test]
    fn the_caller_must_be_allowed_to_impersonate_each_part() {
        let got = impersonation(&headers(&[
            ("Impersonate-User", "system:serviceaccount:team:robot"),
            ("Impersonate-Group", "ops"),
            ("Impersonate-Extra-Scopes%2Fx", "view"),
            ("Impersonate-Uid", "1234"),
        ]))
        .unwrap()
        .unwrap();
        let check = |group: &str, ns: &str, resource: &str, sub: &str, name: &str| {
            Attributes::Resource(ResourceAttributes {
                verb: "impersonate".into(),
                group: group.into(),
                namespace: ns.into(),
                resource: resource.into(),
                subresource: sub.into(),
                name: name.into(),
                ..Default::default()
            })
        };
        assert_eq!(
            got.checks,
            [
                check("", "team", "serviceaccounts", "", "robot"),
                check("", "", "groups", "", "ops"),
                check("authentication.k8s.io", "", "userextras", "scopes/x", "view"),
                check("authentication.k8s.io", "", "uids", "", "1234"),
            ]
        );
        let alice = impersonation(&headers(&[("Impersonate-User", "alice")])).unwrap().unwrap();
        assert_eq!(alice.checks, [check("", "", "users", "", "alice")]);
    }

    #[test]
    fn groups_without_a_user_are_refused_as_the_real_server_words_it() {
        let err = impersonation(&headers(&[("Impersonate-Group", "ops"), ("Impersonate-Uid", "7")])).unwrap_err();
        assert_eq!(err.to_string(), "requested [{Group  ops    } {UID  7  authentication.k8s.io/v1  }] without impersonating a user");
    }
}
