//! One request as the verbs see it: its resource ([`Target`]) and its context ([`Ctx`]:
//! query, headers, the shape of the answer asked for, who it acts as).

use std::collections::HashMap;
use std::sync::Arc;

use http::{HeaderMap, Method, header};

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

impl Target {
    /// The object the verbs write for this request: its `sub` part.
    pub fn object(&self, sub: crate::ops::Subresource) -> crate::ops::Object<'_> {
        crate::ops::Object { info: &self.info, ns: self.namespace.as_deref().unwrap_or(""), name: self.name.as_deref().unwrap_or(""), sub }
    }
}

/// What a resource request asks, decided once from its method, whether it names an object,
/// `watch` and its patch type: the verb it is routed by and counted under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// GET of one object.
    Get,
    /// GET of a collection.
    List,
    /// GET of a collection with `watch`.
    Watch,
    /// POST.
    Create,
    /// PUT.
    Update,
    /// PATCH of any other type (merge, strategic, JSON patch).
    Patch,
    /// A patch of type `application/apply-patch+yaml`: server-side apply.
    Apply,
    /// DELETE of one object.
    Delete,
    /// DELETE of a collection.
    DeleteCollection,
    /// A method no resource endpoint serves (405).
    Other,
}

impl Verb {
    /// The verb of a request with this method, object name (or none: the collection), `watch`
    /// flag and `Content-Type`.
    pub fn of(method: &Method, named: bool, watching: bool, content_type: &str) -> Verb {
        match (method, named) {
            (&Method::GET, true) => Verb::Get,
            (&Method::GET, false) if watching => Verb::Watch,
            (&Method::GET, false) => Verb::List,
            (&Method::POST, _) => Verb::Create,
            (&Method::PUT, _) => Verb::Update,
            (&Method::PATCH, _) if content_type.starts_with("application/apply-patch") => Verb::Apply,
            (&Method::PATCH, _) => Verb::Patch,
            (&Method::DELETE, true) => Verb::Delete,
            (&Method::DELETE, false) => Verb::DeleteCollection,
            _ => Verb::Other,
        }
    }

    /// The `verb` label of `apiserver_request_total`, as the real server sets it.
    pub fn metric(self) -> &'static str {
        match self {
            Verb::Get => "GET",
            Verb::List => "LIST",
            Verb::Watch => "WATCH",
            Verb::Create => "POST",
            Verb::Update => "PUT",
            Verb::Patch => "PATCH",
            Verb::Apply => "APPLY",
            Verb::Delete => "DELETE",
            Verb::DeleteCollection => "DELETECOLLECTION",
            Verb::Other => "OTHER",
        }
    }
}

/// The verb a subresource's discovery entry lists for a request with this method (`get`,
/// `update`, `patch`, `create`, `delete`; empty for any other).
pub fn subresource_verb(method: &Method) -> &'static str {
    match *method {
        Method::GET => "get",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::POST => "create",
        Method::DELETE => "delete",
        _ => "",
    }
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

#[cfg(test)]
mod verb_tests {
    use super::*;

    #[test]
    fn each_request_has_the_verb_the_real_server_counts_it_under() {
        let apply = "application/apply-patch+yaml";
        let merge = "application/merge-patch+json";
        let cases = [
            (Method::GET, true, false, "", Verb::Get, "GET"),
            (Method::GET, true, true, "", Verb::Get, "GET"),
            (Method::GET, false, false, "", Verb::List, "LIST"),
            (Method::GET, false, true, "", Verb::Watch, "WATCH"),
            (Method::POST, false, false, "application/json", Verb::Create, "POST"),
            (Method::PUT, true, false, "application/json", Verb::Update, "PUT"),
            (Method::PATCH, true, false, merge, Verb::Patch, "PATCH"),
            (Method::PATCH, true, false, apply, Verb::Apply, "APPLY"),
            (Method::DELETE, true, false, "", Verb::Delete, "DELETE"),
            (Method::DELETE, false, false, "", Verb::DeleteCollection, "DELETECOLLECTION"),
            (Method::OPTIONS, true, false, "", Verb::Other, "OTHER"),
        ];
        for (method, named, watching, content_type, verb, metric) in cases {
            let got = Verb::of(&method, named, watching, content_type);
            assert_eq!((got, got.metric()), (verb, metric), "{method} named={named} watch={watching} {content_type}");
        }
    }
}
