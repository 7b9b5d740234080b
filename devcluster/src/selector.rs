//! Label and field selectors: parsing the query-string syntax (`a=b,c!=d,e in (f,g),h,!i`)
//! into requirements and matching objects against them, with the real server's messages
//! for malformed selectors.

use serde_json::Value;

/// Why a selector could not be parsed (the text is the message of the 400 answer).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// A malformed label selector.
    #[error("unable to parse requirement: {0}")]
    Label(String),
    /// A field selector term that is not supported.
    #[error("{0}")]
    Field(String),
}

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq)]
pub enum Requirement {
    /// `key=value` / `key==value`.
    Equals(String, String),
    /// `key!=value`.
    NotEquals(String, String),
    /// `key in (a,b)`.
    In(String, Vec<String>),
    /// `key notin (a,b)`.
    NotIn(String, Vec<String>),
    /// `key`.
    Exists(String),
    /// `!key`.
    NotExists(String),
}

/// A parsed label selector; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(pub Vec<Requirement>);

impl LabelSelector {
    /// Parse the query-string form.
    pub fn parse(text: &str) -> Result<Self, Error> {
        let mut reqs = Vec::new();
        for term in split_terms(text) {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            reqs.push(parse_term(term)?);
        }
        Ok(LabelSelector(reqs))
    }

    /// Whether the selector has no requirements.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `labels` (a JSON object or null) satisfy every requirement.
    pub fn matches(&self, labels: Option<&Value>) -> bool {
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => get(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
            Requirement::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Requirement::NotIn(k, vs) => get(k).is_none_or(|x| !vs.iter().any(|v| v == x)),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::NotExists(k) => get(k).is_none(),
        })
    }

    /// Build from a `metav1.LabelSelector` object (`matchLabels`, `matchExpressions`).
    pub fn from_object(sel: &Value) -> Self {
        let mut reqs = Vec::new();
        if let Some(m) = sel.get("matchLabels").and_then(Value::as_object) {
            for (k, v) in m {
                reqs.push(Requirement::Equals(k.clone(), v.as_str().unwrap_or("").to_string()));
            }
        }
        for e in sel.get("matchExpressions").and_then(Value::as_array).into_iter().flatten() {
            let key = e.get("key").and_then(Value::as_str).unwrap_or("").to_string();
            let values: Vec<String> = e
                .get("values")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect())
                .unwrap_or_default();
            match e.get("operator").and_then(Value::as_str) {
                Some("In") => reqs.push(Requirement::In(key, values)),
                Some("NotIn") => reqs.push(Requirement::NotIn(key, values)),
                Some("Exists") => reqs.push(Requirement::Exists(key)),
                Some("DoesNotExist") => reqs.push(Requirement::NotExists(key)),
                _ => {}
            }
        }
        LabelSelector(reqs)
    }
}

/// Split on commas that are not inside parentheses.
fn split_terms(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out
}

fn parse_term(term: &str) -> Result<Requirement, Error> {
    if let Some(key) = term.strip_prefix('!') {
        return Ok(Requirement::NotExists(check_key(key.trim())?));
    }
    if let Some((k, v)) = term.split_once("!=") {
        return Ok(Requirement::NotEquals(check_key(k.trim())?, check_value(v.trim())?));
    }
    if let Some((k, v)) = term.split_once("==") {
        return Ok(Requirement::Equals(check_key(k.trim())?, check_value(v.trim())?));
    }
    if let Some((k, v)) = term.split_once('=') {
        return Ok(Requirement::Equals(check_key(k.trim())?, check_value(v.trim())?));
    }
    // The key, then the operator: read from where the key ends, never searched for in the
    // term (`app.kubernetes.io/instance in (a)` holds `in` inside its key).
    let term = term.trim();
    let key_end = term.find(|c: char| c.is_whitespace() || c == '(').unwrap_or(term.len());
    let (key, after) = term.split_at(key_end);
    let after = after.trim_start();
    if after.is_empty() {
        return Ok(Requirement::Exists(check_key(key)?));
    }
    let word_end = after.find(|c: char| c.is_whitespace() || c == '(').unwrap_or(after.len());
    let (op, rest) = after.split_at(word_end);
    if !matches!(op, "in" | "notin") {
        return Err(Error::Label(format!("found '{op}', expected: in, notin, =, ==, !=, gt, lt")));
    }
    let rest = rest.trim();
    let Some(inner) = rest.strip_prefix('(').and_then(|r| r.strip_suffix(')')) else {
        let found = rest.split_whitespace().next().unwrap_or("");
        return Err(Error::Label(format!("found '{found}' expected: '('")));
    };
    let values = inner.split(',').map(|v| check_value(v.trim())).collect::<Result<Vec<_>, _>>()?;
    let key = check_key(key)?;
    Ok(if op == "in" { Requirement::In(key, values) } else { Requirement::NotIn(key, values) })
}

fn check_key(key: &str) -> Result<String, Error> {
    if let Err(msg) = crate::validate::qualified_name(key) {
        return Err(Error::Label(format!("key: Invalid value: \"{key}\": {msg}")));
    }
    Ok(key.to_string())
}

fn check_value(v: &str) -> Result<String, Error> {
    if !v.is_empty() && crate::validate::label_value(v).is_err() {
        return Err(Error::Label(format!("values[0][{v}]: Invalid value: \"{v}\"")));
    }
    Ok(v.to_string())
}

/// A parsed field selector: `path=value` / `path!=value` terms.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(pub Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parse, allowing `metadata.name`, `metadata.namespace` and the resource's `extra` fields.
    pub fn parse(text: &str, extra: &[&str]) -> Result<Self, Error> {
        let mut terms = Vec::new();
        for term in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (path, neg, value) = if let Some((p, v)) = term.split_once("!=") {
                (p, true, v)
            } else if let Some((p, v)) = term.split_once("==") {
                (p, false, v)
            } else if let Some((p, v)) = term.split_once('=') {
                (p, false, v)
            } else {
                return Err(Error::Field(format!("invalid selector: '{term}'; can't understand '{term}'")));
            };
            let path = path.trim();
            if path != "metadata.name" && path != "metadata.namespace" && !extra.contains(&path) {
                let mut known = vec!["\"metadata.name\"".to_string(), "\"metadata.namespace\"".to_string()];
                known.extend(extra.iter().map(|e| format!("\"{e}\"")));
                return Err(Error::Field(format!("\"{path}\" is not a known field selector: only {}", known.join(", "))));
            }
            terms.push((path.to_string(), neg, value.trim().to_string()));
        }
        Ok(FieldSelector(terms))
    }

    /// Whether the selector has no terms.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value of `metadata.name=X` if the selector pins one name (for fast lookups).
    pub fn pinned_name(&self) -> Option<&str> {
        self.0.iter().find(|(p, neg, _)| p == "metadata.name" && !neg).map(|(_, _, v)| v.as_str())
    }

    /// Whether the object satisfies every term.
    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(path, neg, want)| {
            let mut cur = Some(obj);
            for seg in path.split('.') {
                cur = cur.and_then(|c| c.get(seg));
            }
            let have = match cur {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(v) => v.to_string(),
            };
            (have == *want) != *neg
        })
    }
}

/// A `metav1.LabelSelector` object as `labels.Selector.String()` writes it (what `kubectl`
/// prints and a Scale's `status.selector` carries): requirements sorted by key, `k=v`,
/// `k in (a,b)`, `k notin (a,b)`, `k`, `!k`; `None` when an operator is not one of these.
pub fn selector_string(sel: &Value) -> Option<String> {
    let mut reqs: Vec<(String, String)> = Vec::new();
    for (k, v) in sel.get("matchLabels").and_then(Value::as_object).into_iter().flatten() {
        reqs.push((k.clone(), format!("{k}={}", v.as_str().unwrap_or(""))));
    }
    for e in sel.get("matchExpressions").and_then(Value::as_array).into_iter().flatten() {
        let key = e.get("key").and_then(Value::as_str).unwrap_or("").to_string();
        let mut values: Vec<&str> = e.get("values").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
        values.sort_unstable();
        let text = match e.get("operator").and_then(Value::as_str) {
            Some("In") => format!("{key} in ({})", values.join(",")),
            Some("NotIn") => format!("{key} notin ({})", values.join(",")),
            Some("Exists") => key.clone(),
            Some("DoesNotExist") => format!("!{key}"),
            _ => return None,
        };
        reqs.push((key, text));
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    Some(reqs.into_iter().map(|(_, t)| t).collect::<Vec<_>>().join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selectors_match_as_the_real_server_does() {
        let labels = json!({"app": "a", "tier": "x"});
        let table = [
            ("app=a", true),
            ("app==a", true),
            ("app!=a", false),
            ("app in (a,b)", true),
            ("app notin (a)", false),
            ("tier", true),
            ("!tier", false),
            ("!nothing", true),
            ("app=a,tier=y", false),
            ("", true),
            ("app in(a)", true),
            ("  app   notin   ( b , c )  ", true),
        ];
        for (sel, want) in table {
            assert_eq!(LabelSelector::parse(sel).unwrap().matches(Some(&labels)), want, "{sel}");
        }
    }

    #[test]
    fn a_key_that_holds_an_operators_letters_is_read_as_a_key() {
        let labels = json!({"app.kubernetes.io/instance": "foo", "notinside": "x", "in": "y"});
        let table = [
            ("app.kubernetes.io/instance in (foo)", true),
            ("app.kubernetes.io/instance notin (foo)", false),
            ("notinside in (x,z)", true),
            ("in in (y)", true),
            ("in notin (y)", false),
        ];
        for (sel, want) in table {
            let parsed = LabelSelector::parse(sel).unwrap_or_else(|e| panic!("{sel}: {e}"));
            assert_eq!(parsed.matches(Some(&labels)), want, "{sel}");
        }
        let err = LabelSelector::parse("app.kubernetes.io/instance within (foo)").unwrap_err();
        assert_eq!(err.to_string(), "unable to parse requirement: found 'within', expected: in, notin, =, ==, !=, gt, lt");
    }

    #[test]
    fn malformed_set_selector_reports_the_missing_parenthesis() {
        let err = LabelSelector::parse("app in a").unwrap_err();
        assert_eq!(err.to_string(), "unable to parse requirement: found 'a' expected: '('");
    }

    #[test]
    fn unknown_field_selector_is_rejected_with_the_known_list() {
        let err = FieldSelector::parse("data.n=c1", &[]).unwrap_err();
        assert_eq!(err.to_string(), "\"data.n\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\"");
    }
}
