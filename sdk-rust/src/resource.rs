//! Resource selectors: the strings handler authors write (`"kopf.dev/v1/kopfexamples"`,
//! `"kopfexamples.kopf.dev"`, `"kex"`) turned into the contract's `ResourceSelector`.
//!
//! Parsing is pure and strict about shape only; whether the resource exists is decided by
//! the controller through the API server's discovery.

use bosun_proto::v1 as pb;

/// Why a resource selector string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The selector is empty or has an empty part.
    #[error("invalid resource selector {0:?}: expected `group/version/plural`, `version/plural`, `plural.group`, a kind or a short name")]
    Invalid(String),
}

/// Which resource a handler handles, as `kubectl get` would name it.
///
/// Accepted forms:
/// - `group/version/name`: `kopf.dev/v1/kopfexamples`, `apps/v1/deployments`;
/// - `version/name` for the core group: `v1/pods`;
/// - `group/name` (any version): `kopf.dev/kopfexamples`;
/// - `name.version.group` or `name.group`: `deployments.v1.apps`, `kopfexamples.kopf.dev`;
/// - `name` alone: a plural, singular, kind or short name (`kopfexamples`, `KopfExample`,
///   `kex`), resolved by the controller in every group.
///
/// `name` may be a plural, singular, kind, short name or category in every form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    /// API group; empty for the core group or when not given.
    pub group: String,
    /// API version; empty means the preferred version.
    pub version: String,
    /// Plural, singular, kind, short name or category.
    pub name: String,
}

impl Selector {
    /// Parses a selector string; see the type's docs for the accepted forms.
    pub fn parse(s: &str) -> Result<Self, Error> {
        let invalid = || Error::Invalid(s.to_string());
        let parts: Vec<&str> = s.trim().split('/').collect();
        if parts.iter().any(|p| p.is_empty() || p.contains(char::is_whitespace)) {
            return Err(invalid());
        }
        let sel = |group: &str, version: &str, name: &str| Selector { group: group.into(), version: version.into(), name: name.into() };
        match parts.as_slice() {
            [group, version, name] => Ok(sel(group, version, name)),
            [first, name] if looks_like_version(first) => Ok(sel("", first, name)),
            [group, name] => Ok(sel(group, "", name)),
            [dotted] => match dotted.split_once('.') {
                None => Ok(sel("", "", dotted)),
                Some((name, rest)) => match rest.split_once('.') {
                    Some((version, group)) if looks_like_version(version) => Ok(sel(group, version, name)),
                    _ if rest.split('.').any(str::is_empty) => Err(invalid()),
                    _ => Ok(sel(rest, "", name)),
                },
            },
            _ => Err(invalid()),
        }
    }

    /// The contract's message for this selector.
    pub fn to_proto(&self) -> pb::ResourceSelector {
        pb::ResourceSelector { group: self.group.clone(), version: self.version.clone(), name: self.name.clone() }
    }
}

impl std::fmt::Display for Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.group.as_str(), self.version.as_str()) {
            ("", "") => write!(f, "{}", self.name),
            ("", v) => write!(f, "{v}/{}", self.name),
            (g, "") => write!(f, "{}.{g}", self.name),
            (g, v) => write!(f, "{g}/{v}/{}", self.name),
        }
    }
}

/// Kubernetes API versions: `v1`, `v2beta1`, `v1alpha3`.
fn looks_like_version(s: &str) -> bool {
    let Some(rest) = s.strip_prefix('v') else { return false };
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    if digits == 0 {
        return false;
    }
    let tail = &rest[digits..];
    tail.is_empty()
        || ["alpha", "beta"]
            .iter()
            .any(|stage| tail.strip_prefix(stage).is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_parse_in_every_documented_form() {
        let table = [
            ("kopf.dev/v1/kopfexamples", "kopf.dev", "v1", "kopfexamples"),
            ("apps/v1/deployments", "apps", "v1", "deployments"),
            ("v1/pods", "", "v1", "pods"),
            ("v1beta1/things", "", "v1beta1", "things"),
            ("kopf.dev/kopfexamples", "kopf.dev", "", "kopfexamples"),
            ("kopfexamples.kopf.dev", "kopf.dev", "", "kopfexamples"),
            ("deployments.v1.apps", "apps", "v1", "deployments"),
            ("kopfexamples.v1.kopf.dev", "kopf.dev", "v1", "kopfexamples"),
            ("kex", "", "", "kex"),
            ("KopfExample", "", "", "KopfExample"),
            ("pods", "", "", "pods"),
        ];
        for (input, group, version, name) in table {
            let sel = Selector::parse(input).unwrap();
            assert_eq!((sel.group.as_str(), sel.version.as_str(), sel.name.as_str()), (group, version, name), "{input}");
        }
    }

    #[test]
    fn malformed_selectors_are_rejected() {
        for input in ["", "/", "a//b", "a/b/c/d", "kex.", "kex..dev", "k ex", "a/v1/"] {
            assert_eq!(Selector::parse(input), Err(Error::Invalid(input.into())), "{input}");
        }
    }

    #[test]
    fn versions_are_told_apart_from_groups() {
        let table = [
            ("v1", true),
            ("v2beta1", true),
            ("v1alpha3", true),
            ("v1beta", false),
            ("vx", false),
            ("v", false),
            ("kopf", false),
            ("apps", false),
        ];
        for (input, expected) in table {
            assert_eq!(looks_like_version(input), expected, "{input}");
        }
    }

    #[test]
    fn selectors_display_in_a_form_that_parses_back() {
        for input in ["kopf.dev/v1/kopfexamples", "v1/pods", "kopfexamples.kopf.dev", "kex"] {
            let sel = Selector::parse(input).unwrap();
            assert_eq!(Selector::parse(&sel.to_string()).unwrap(), sel, "{input}");
        }
    }
}
