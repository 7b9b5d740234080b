//! One request as the verbs see it: its resource ([`Target`]) and its context ([`Ctx`]:
//! query, headers, the shape of the answer asked for, who it acts as).

use std::collections::HashMap;
use std::sync::Arc;

use http::{HeaderMap, header};

use super::negotiate::{Shape, shape};
use crate::registry::ResourceInfo;

/// A parsed resource request.
pub struct Target {
    /// The resource.
    pub info: Arc<ResourceInfo>,
    /// Namespace from the path (None: cluster-wide).
    pub namespace: Option<String>,
    /// Object name.
    pub name: Option<String>,
    /// Subresource (`status`).
    pub sub: Option<String>,
}

/// Request context handed to the verb handlers.
pub struct Ctx {
    /// Query parameters.
    pub query: HashMap<String, String>,
    /// Request headers.
    pub headers: HeaderMap,
    /// The shape of the answer the client asked for in `Accept`, read once.
    pub(super) shape: Shape,
    /// Who the request acts as (what admission webhooks are told).
    pub user: Option<crate::authz::User>,
    /// Every value of each query parameter, in order, for the list parameters (`dryRun`).
    pub(super) all: HashMap<String, Vec<String>>,
}

impl Ctx {
    /// The context of a request with these query parameters and headers.
    pub fn new(query: HashMap<String, String>, headers: HeaderMap) -> Self {
        let shape = shape(headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()));
        Ctx { query, headers, shape, user: None, all: HashMap::new() }
    }

    /// The context of a request with this query string and these headers.
    pub fn of_query(query: &str, headers: HeaderMap) -> Self {
        Ctx { all: parse_query_all(query), ..Ctx::new(parse_query(query), headers) }
    }

    /// Every value of a list query parameter (`dryRun=All&dryRun=x`), as the real server reads
    /// one into a `[]string` option.
    pub fn values(&self, k: &str) -> Vec<&str> {
        match self.all.get(k) {
            Some(all) => all.iter().map(String::as_str).collect(),
            None => self.q(k).into_iter().collect(),
        }
    }

    /// A query parameter.
    pub fn q(&self, k: &str) -> Option<&str> {
        self.query.get(k).map(String::as_str)
    }

    /// A boolean query parameter as the real server reads one (apimachinery's
    /// `Convert_Slice_string_To_bool`): absent, `0` or `false` in any case is false; anything
    /// else, `True` and an empty value included, is true.
    pub fn flag(&self, k: &str) -> bool {
        self.flag_given(k).unwrap_or(false)
    }

    /// A boolean query parameter that may be absent (a `*bool` option such as
    /// `orphanDependents`), read as [`Ctx::flag`] reads one that is given.
    pub fn flag_given(&self, k: &str) -> Option<bool> {
        self.q(k).map(|v| !(v == "0" || v.eq_ignore_ascii_case("false")))
    }

    /// The shape of the answer the client asked for in `Accept`.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// Whether the client asked for a Table.
    pub fn wants_table(&self) -> bool {
        self.shape() == Shape::Table
    }

    /// The field manager: `fieldManager` or the user agent's first word.
    pub fn manager(&self) -> Option<String> {
        if let Some(m) = self.q("fieldManager") {
            return Some(m.to_string());
        }
        let ua = self.headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or("unknown");
        Some(ua.split('/').next().unwrap_or(ua).to_string())
    }
}

/// Query parameters; of a parameter given twice the first counts, as the real server reads
/// `url.Values` into options (`in[0]`).
pub(super) fn parse_query(query: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        out.entry(decode(k)).or_insert_with(|| decode(v));
    }
    out
}

/// Every value of each query parameter, in order.
pub(super) fn parse_query_all(query: &str) -> HashMap<String, Vec<String>> {
    let mut out: HashMap<String, Vec<String>> = HashMap::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        out.entry(decode(k)).or_default().push(decode(v));
    }
    out
}

pub(super) fn decode(s: &str) -> String {
    if !s.contains(['%', '+']) {
        return s.to_string();
    }
    let s = s.replace('+', " ");
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Some(b) = s.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
