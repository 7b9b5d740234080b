//! Who a request acts as and whether it may do what it asks, decided before it is routed, in
//! the order of the real server's filters: authentication (the admin's bearer token, a service
//! account token the cluster issued, or — when the cluster requires no token — nothing),
//! impersonation, then authorization. The admin may do anything, as `system:masters` may;
//! service accounts and impersonated users are authorized by RBAC over the stored objects.
//! Health checks are open to everyone.

use std::sync::Arc;

use axum::response::Response;
use http::{HeaderMap, HeaderValue, Method, Uri, header};

use super::request::parse_query;
use super::respond::{error, text};
use crate::authz::{self, Attributes, User};
use crate::cluster::Cluster;
use crate::ops::token_request::{self, Bearer};
use crate::status::ApiError;
use crate::store::{Obj, Table};

/// Why a request is turned away before it is routed.
#[derive(Debug)]
pub enum Refusal {
    /// 401: a bearer token the cluster does not accept (or none where one is required).
    Unauthenticated,
    /// 403: what the caller may not do.
    Forbidden(ApiError),
    /// A plain-text 500 (impersonation headers without a user, a path that names a verb and
    /// nothing after it), with its text.
    Internal(String),
}

impl Refusal {
    /// The answer.
    pub fn into_response(self) -> Response {
        match self {
            Refusal::Unauthenticated => error(&ApiError::unauthorized()),
            Refusal::Forbidden(e) => error(&e),
            Refusal::Internal(body) => {
                let mut response = text(500, &body);
                response.headers_mut().insert("x-content-type-options", HeaderValue::from_static("nosniff"));
                response
            }
        }
    }
}

/// Lets the request through, with the user it acts as (none for health checks), or says why
/// not: a token the cluster does not accept, something the caller may not do, or
/// impersonation headers without a user.
pub fn admit(cluster: &Cluster, method: &Method, uri: &Uri, headers: &HeaderMap) -> Result<Option<User>, Refusal> {
    if is_health(uri.path()) {
        return Ok(None);
    }
    let caller = authenticate(cluster, headers).ok_or(Refusal::Unauthenticated)?;
    let user = match authz::impersonation(headers) {
        Ok(None) => caller,
        Ok(Some(impersonation)) => {
            for check in &impersonation.checks {
                authorize(cluster, &caller, check)?;
            }
            impersonation.user
        }
        Err(e) => return Err(internal_error(uri, &e.to_string())),
    };
    if user.is_privileged() {
        return Ok(Some(user));
    }
    let query = parse_query(uri.query().unwrap_or(""));
    let attrs = Attributes::of_request(method.as_str(), uri.path(), &query)
        .map_err(|e| internal_error(uri, &format!("failed to create RequestInfo: {e}, {uri}")))?;
    authorize(cluster, &user, &attrs)?;
    Ok(Some(user))
}

/// `/healthz`, `/livez`, `/readyz` and their checks.
fn is_health(path: &str) -> bool {
    ["/healthz", "/livez", "/readyz"].iter().any(|p| path.strip_prefix(p).is_some_and(|rest| rest.is_empty() || rest.starts_with('/')))
}

/// Who the bearer token says the caller is: the admin for the cluster's own token, the service
/// account of a token the cluster issued, and the admin as well when the cluster requires no
/// token and the request brings none of its own (or one it does not know); `None` for a
/// token that must be refused.
fn authenticate(cluster: &Cluster, headers: &HeaderMap) -> Option<User> {
    let bearer = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer ")).map(str::trim);
    let Some(token) = bearer else {
        return cluster.token.is_none().then(User::admin);
    };
    if cluster.token.as_deref() == Some(token) {
        return Some(User::admin());
    }
    match token_request::authenticate(cluster, token) {
        Bearer::ServiceAccount { namespace, name } => Some(User::service_account(&namespace, &name)),
        Bearer::Invalid => None,
        Bearer::Foreign => cluster.token.is_none().then(User::admin),
    }
}

/// `Ok` if `user` may do what `attrs` ask, else the real server's 403.
fn authorize(cluster: &Cluster, user: &User, attrs: &Attributes) -> Result<(), Refusal> {
    authz::authorize(&Stored(cluster), user, attrs).map_err(|denied| Refusal::Forbidden(authz::forbidden(user, attrs, &denied)))
}

/// The cluster's stored RBAC objects.
struct Stored<'a>(&'a Cluster);

impl Stored<'_> {
    fn table(&self, plural: &str) -> Arc<Table> {
        self.0.table(&self.0.registry.get("rbac.authorization.k8s.io", "v1", plural).expect("built-in resource"))
    }
}

impl authz::Objects for Stored<'_> {
    fn cluster_role_bindings(&self) -> Vec<Arc<Obj>> {
        self.table("clusterrolebindings").list(None).0
    }

    fn role_bindings(&self, namespace: &str) -> Vec<Arc<Obj>> {
        self.table("rolebindings").list(Some(namespace)).0
    }

    fn role(&self, namespace: &str, name: &str) -> Option<Arc<Obj>> {
        self.table("roles").get(namespace, name)
    }

    fn cluster_roles(&self) -> Vec<Arc<Obj>> {
        self.table("clusterroles").list(None).0
    }
}

/// The real server's `responsewriters.InternalError`: a plain-text 500 naming the request,
/// HTML-escaped as Go's `http.Error` answer is.
fn internal_error(uri: &Uri, why: &str) -> Refusal {
    let request = uri.path_and_query().map_or(uri.path(), |p| p.as_str());
    let message = format!("Internal Server Error: {request:?}: {why}");
    let escaped = message.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&#34;").replace('\'', "&#39;");
    Refusal::Internal(format!("{escaped}\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_checks_are_the_three_paths_and_their_checks() {
        for (path, want) in [
            ("/healthz", true),
            ("/livez/ping", true),
            ("/readyz/", true),
            ("/healthzz", false),
            ("/version", false),
            ("/api/healthz", false),
        ] {
            assert_eq!(is_health(path), want, "{path}");
        }
    }

    #[tokio::test]
    async fn an_unresolvable_resource_path_is_answered_as_the_real_server_answers_it() {
        let uri: Uri = "/api/v1/watch?x=1".parse().unwrap();
        let response =
            internal_error(&uri, "failed to create RequestInfo: unable to determine kind and namespace from url, /api/v1/watch?x=1");
        let response = response.into_response();
        assert_eq!(response.status(), 500);
        assert_eq!(response.headers()["x-content-type-options"], "nosniff");
        let body = axum::body::to_bytes(response.into_body(), 1 << 16).await.unwrap();
        assert_eq!(
            String::from_utf8_lossy(&body),
            "Internal Server Error: &#34;/api/v1/watch?x=1&#34;: failed to create RequestInfo: unable to determine kind and namespace from url, /api/v1/watch?x=1\n"
        );
    }
}
