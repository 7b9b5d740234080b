//! Kopf's namespace patterns: globs (`*`, `?`) and `!` negation.

/// Whether `namespace` is served under `patterns`: it matches a positive pattern (or there
/// are only negative ones) and no negative pattern.
pub fn serves(patterns: &[String], namespace: &str) -> bool {
    let (neg, pos): (Vec<&String>, Vec<&String>) = patterns.iter().partition(|p| p.starts_with('!'));
    let included = pos.is_empty() || pos.iter().any(|p| glob(p, namespace));
    included && !neg.iter().any(|p| glob(&p[1..], namespace))
}

pub use crate::settings::plain_names;

/// Shell-style glob with `*` and `?`.
pub fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(p: &[&str]) -> Vec<String> {
        p.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn globs_match_like_a_shell() {
        let cases = [
            ("*", "x", true),
            ("a*", "abc", true),
            ("a*", "ba", false),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("*-dev", "team-dev", true),
            ("exact", "exact", true),
            ("exact", "exac", false),
        ];
        for (p, t, want) in cases {
            assert_eq!(glob(p, t), want, "{p} {t}");
        }
    }

    #[test]
    fn patterns_include_and_exclude() {
        let cases = [
            (v(&["default"]), "default", true),
            (v(&["default"]), "other", false),
            (v(&["team-*", "!team-secret"]), "team-a", true),
            (v(&["team-*", "!team-secret"]), "team-secret", false),
            (v(&["!kube-*"]), "default", true),
            (v(&["!kube-*"]), "kube-system", false),
        ];
        for (p, ns, want) in cases {
            assert_eq!(serves(&p, ns), want, "{p:?} {ns}");
        }
        assert!(plain_names(&v(&["a", "b"])));
        assert!(!plain_names(&v(&["a", "b-*"])));
        assert!(!plain_names(&v(&["!a"])));
    }
}
