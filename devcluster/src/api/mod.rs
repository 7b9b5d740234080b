//! The HTTP API: routes a request path to discovery or to a resource endpoint, turns query
//! parameters and headers into verb options, and encodes answers (objects, lists, Tables,
//! watch streams, Status errors) as kube-apiserver does.

mod access;
mod actions;
mod aggregated;
mod discovery;
mod negotiate;
mod printers;
mod read;
mod request;
mod respond;
mod scale;
mod table;
mod write;

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::response::Response;
use bytes::Bytes;
use http::{Method, header};
use serde_json::Value;

use crate::cluster::Cluster;
use crate::metrics::Key;
use crate::status::ApiError;
use request::decode;
pub use request::{Ctx, Target, Verb};
use respond::warn_first;
pub use respond::{bytes_response, error, json_response, text};

/// Largest request body accepted (the real server's limit is 3 MiB).
pub const MAX_BODY: usize = 3 * 1024 * 1024;

/// The router of the whole API.
pub fn router(cluster: Arc<Cluster>) -> axum::Router {
    axum::Router::new().fallback(handle).with_state(cluster)
}

/// Answers one request. A panic while answering it becomes a 500 `Status` for that request
/// alone (the real server's `WithPanicRecovery`), never a dropped connection or a stopped
/// server.
async fn handle(State(cluster): State<Arc<Cluster>>, req: Request) -> Response {
    let (method, path) = (req.method().clone(), req.uri().path().to_string());
    recovering(&method, &path, answer(cluster, req)).await
}

/// `answer`, or a 500 `Status` if it panics.
async fn recovering(method: &Method, path: &str, answer: impl std::future::Future<Output = Response>) -> Response {
    use futures::FutureExt;
    match std::panic::AssertUnwindSafe(answer).catch_unwind().await {
        Ok(response) => response,
        Err(panic) => {
            let what = panic.downcast_ref::<&str>().copied().or_else(|| panic.downcast_ref::<String>().map(String::as_str)).unwrap_or("");
            tracing::error!("{method} {path} panicked: {what}");
            error(&ApiError::internal("This request caused apiserver to panic. Look in the logs for details."))
        }
    }
}

async fn answer(cluster: Arc<Cluster>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let user = match access::admit(&cluster, &parts.method, &parts.uri, &parts.headers) {
        Ok(user) => user,
        Err(refusal) => return refusal.into_response(),
    };
    let path = parts.uri.path().to_string();
    let mut ctx = Ctx::of_query(parts.uri.query().unwrap_or(""), parts.headers.clone());
    ctx.user = user;
    let segs: Vec<String> = path.split('/').filter(|s| !s.is_empty()).map(decode).collect();
    let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
    let method = parts.method.clone();
    let raw = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(b) => b,
        Err(_) => return error(&ApiError::too_large(&format!("limit is {MAX_BODY}"))),
    };
    match segs.as_slice() {
        [] => json_response(200, &discovery::root_paths(), &[]),
        ["version"] => json_response(200, &discovery::version(), &[]),
        ["healthz" | "livez" | "readyz", ..] => text(200, "ok"),
        ["metrics"] => text(200, &cluster.metrics.render()),
        ["openapi", rest @ ..] => discovery::openapi(&cluster, rest),
        [root @ ("api" | "apis")] => match aggregated::asked(ctx.headers.get(header::ACCEPT).and_then(|v| v.to_str().ok())) {
            Some(version) => aggregated::answer(&cluster, *root == "api", version),
            None if *root == "api" => json_response(200, &discovery::core_versions(&ctx), &[]),
            None => discovery::groups(&cluster, &ctx),
        },
        ["api", "v1"] => json_response(200, &discovery::resource_list(&cluster, "", "v1"), &[]),
        ["apis", g] => discovery::group(&cluster, g),
        ["apis", g, v] => {
            if !cluster.registry.has_group(g, Some(v)) {
                return error(&ApiError::page_not_found());
            }
            json_response(200, &discovery::resource_list(&cluster, g, v), &[])
        }
        ["api", "v1", rest @ ..] => dispatch(&cluster, "", "v1", rest, method, ctx, raw).await,
        ["apis", g, v, rest @ ..] => dispatch(&cluster, g, v, rest, method, ctx, raw).await,
        _ => error(&ApiError::page_not_found()),
    }
}

/// Run a resource request, in the shape the client asked for.
async fn dispatch(cluster: &Arc<Cluster>, group: &str, version: &str, rest: &[&str], method: Method, ctx: Ctx, raw: Bytes) -> Response {
    // A metadata-only answer is cut from the whole one; a watch cuts each event itself.
    let metadata = match ctx.shape() {
        negotiate::Shape::Metadata { list, version } if !(method == Method::GET && ctx.flag("watch")) => Some((list, version)),
        _ => None,
    };
    let response = answered(cluster, group, version, rest, method, ctx, raw).await;
    match metadata {
        Some((list, version)) => negotiate::transform(response, list, version).await,
        None => response,
    }
}

/// Answer a resource request. Writes run on the blocking pool: a heavy one (a large object to
/// patch, validate and serialize) must not hold up the runtime's workers and with them every
/// other request; and with persistence many writers wait for the disk together and share one
/// flush (group commit). Reads are answered in place.
async fn answered(cluster: &Arc<Cluster>, group: &str, version: &str, rest: &[&str], method: Method, ctx: Ctx, raw: Bytes) -> Response {
    if method == Method::GET {
        let _in_flight = (!ctx.flag("watch")).then(|| cluster.metrics.in_flight(false));
        return resource(cluster, group, version, rest, method, ctx, raw);
    }
    let in_flight = cluster.metrics.in_flight(true);
    let (cluster, group, version) = (cluster.clone(), group.to_string(), version.to_string());
    let rest: Vec<String> = rest.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let _in_flight = in_flight;
        let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
        resource(&cluster, &group, &version, &rest, method, ctx, raw)
    })
    .await
    .unwrap_or_else(|_| error(&ApiError::internal("the request handler failed")))
}

fn resource(cluster: &Arc<Cluster>, group: &str, version: &str, rest: &[&str], method: Method, ctx: Ctx, raw: Bytes) -> Response {
    // Under a built-in group-version, kube-apiserver's go-restful container answers an unknown
    // path with a `Status`; a custom resource's group is served by the CRD handler, whose
    // unknown paths (and those of deleted CRDs) fall through to the plain-text 404.
    let builtin_group_version = group.is_empty() || cluster.registry.group_version(group, version).iter().any(|i| i.builtin);
    let not_found = || {
        if builtin_group_version {
            let mut e = ApiError::not_found_raw("", "", "");
            e.message = "the server could not find the requested resource".into();
            e.details = Some(Box::new(serde_json::json!({})));
            error(&e)
        } else {
            error(&ApiError::page_not_found())
        }
    };
    let (namespace, res, name, sub) = match rest {
        ["namespaces", ns, res, tail @ ..] if !(tail.is_empty() && matches!(*res, "status" | "finalize")) => {
            (Some(ns.to_string()), *res, tail.first().map(|s| s.to_string()), tail.get(1).map(|s| s.to_string()))
        }
        [res, tail @ ..] => (None, *res, tail.first().map(|s| s.to_string()), tail.get(1).map(|s| s.to_string())),
        [] => return not_found(),
    };
    if rest.len() > 5 || (namespace.is_none() && rest.len() > 3) {
        return not_found();
    }
    let Some(info) = cluster.registry.get(group, version, res) else {
        return not_found();
    };
    if namespace.is_some() && !info.namespaced {
        return error(&ApiError::page_not_found());
    }
    if namespace.is_none() && info.namespaced && (name.is_some() || method == Method::POST) {
        return error(&ApiError::page_not_found());
    }
    if let Some(s) = &sub {
        let Some(served) = info.subresource(s) else {
            if info.builtin {
                return not_found();
            }
            // the CRD handler's answer for a subresource the CRD does not define
            return error(&ApiError::not_found(&info, name.as_deref().unwrap_or("")));
        };
        if !served.verbs.contains(&request::subresource_verb(&method)) {
            return error(&ApiError::method_not_allowed(method.as_str(), &info));
        }
    }
    let target = Target { info: info.clone(), namespace, name, sub };
    let content_type = ctx.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("application/json").to_string();
    let raw = if matches!(method, Method::POST | Method::PUT) && content_type.starts_with("application/vnd.kubernetes.protobuf") {
        match crate::protobuf::decode(&raw) {
            Ok(v) => Bytes::from(serde_json::to_vec(&v).unwrap_or_default()),
            Err(e) => {
                let mut err = ApiError::unsupported_media_type();
                err.message = e.to_string();
                return error(&err);
            }
        }
    } else {
        raw
    };
    let content_type =
        if content_type.starts_with("application/vnd.kubernetes.protobuf") { "application/json".to_string() } else { content_type };
    if matches!(method, Method::POST | Method::PUT)
        && !raw.is_empty()
        && !(content_type.starts_with("application/json") || content_type.contains("yaml") || content_type.is_empty())
    {
        let mut e = ApiError::unsupported_media_type();
        e.message = format!(
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (got {content_type})"
        );
        return error(&e);
    }
    let raw = if matches!(method, Method::POST | Method::PUT) && content_type.contains("yaml") {
        match serde_yaml::from_slice::<Value>(&raw) {
            Ok(v) => Bytes::from(serde_json::to_vec(&v).unwrap_or_default()),
            Err(e) => {
                return error(&ApiError::bad_request(format!("error converting YAML to JSON: {e}")));
            }
        }
    } else {
        raw
    };
    let verb = Verb::of(&method, target.name.is_some(), ctx.flag("watch"), &content_type);
    let mut response = match target.sub.as_deref() {
        Some("scale") => scale::handle(cluster, &target, &ctx, &method, &raw),
        Some("eviction" | "binding" | "token") => actions::handle(cluster, &target, &ctx, &raw),
        _ => match verb {
            Verb::Get => read::get(cluster, &target, &ctx),
            Verb::List => read::list(cluster, &target, &ctx),
            Verb::Watch => read::watch(cluster, &target, &ctx),
            Verb::Create if target.name.is_none() => write::create(cluster, &target, &ctx, &raw),
            Verb::Update if target.name.is_some() => write::update(cluster, &target, &ctx, &raw),
            Verb::Patch | Verb::Apply if target.name.is_some() => write::patch(cluster, &target, &ctx, &raw),
            Verb::Delete => write::delete(cluster, &target, &ctx, &raw),
            Verb::DeleteCollection => write::delete_collection(cluster, &target, &ctx, &raw),
            _ => error(&ApiError::method_not_allowed(method.as_str(), &info)),
        },
    };
    if let Some(text) = info.deprecation() {
        warn_first(&mut response, text);
    }
    cluster.metrics.count(Key {
        verb: verb.metric(),
        group: info.group.clone(),
        version: info.version.clone(),
        resource: info.plural.clone(),
        subresource: target.sub.clone().unwrap_or_default(),
        code: response.status().as_u16(),
    });
    response
}

#[cfg(test)]
mod tests {
    use super::request::parse_query;
    use super::*;
    use http::HeaderMap;

    #[test]
    fn boolean_parameters_read_as_the_real_server_reads_them() {
        let cases = [
            ("", None, false),
            ("watch=true", Some(true), true),
            ("watch=True", Some(true), true),
            ("watch=1", Some(true), true),
            ("watch=", Some(true), true),
            ("watch", Some(true), true),
            ("watch=yes", Some(true), true),
            ("watch=0", Some(false), false),
            ("watch=false", Some(false), false),
            ("watch=FALSE", Some(false), false),
            ("watch=False&watch=true", Some(false), false),
            ("watch=true&watch=false", Some(true), true),
        ];
        for (query, given, flag) in cases {
            let ctx = Ctx::new(parse_query(query), HeaderMap::new());
            assert_eq!((ctx.flag_given("watch"), ctx.flag("watch")), (given, flag), "{query}");
        }
    }

    #[tokio::test]
    async fn a_panic_while_answering_is_a_500_status_for_that_request() {
        let answer = async { panic!("boom") };
        let r = recovering(&Method::GET, "/api/v1/pods", answer).await;
        assert_eq!(r.status(), 500);
        let body = axum::body::to_bytes(r.into_body(), 1 << 20).await.unwrap();
        let status: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(status["kind"], "Status");
        assert_eq!(status["code"], 500);
        assert_eq!(status["message"], "This request caused apiserver to panic. Look in the logs for details.");
        let fine = recovering(&Method::GET, "/version", async { text(200, "ok") }).await;
        assert_eq!(fine.status(), 200);
    }
}
