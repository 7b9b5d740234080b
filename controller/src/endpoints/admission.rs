//! Admission: the endpoint the API server sends AdmissionReviews to, one path per
//! handler (`POST /<id>`), each review sent to its handler server through `Admit` and
//! answered as `state::admission` decides; and the Validating/MutatingWebhookConfiguration
//! that tells the API server about it, kept up to date as handler servers register other
//! handlers and as certificate files rotate, and removed on a clean exit when asked
//! (`--admission-cleanup`) and no other replica serves them any more. The HTTPS server and its
//! certificate are in `endpoints::webhooks`.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bosun_proto::v1 as pb;
use serde_json::Value;

use parking_lot::RwLock;
use tokio::sync::watch;

use super::webhooks;
use crate::cluster::{Cluster, discovery};
use crate::coordination::roster::Roster;
use crate::handlers::dispatch::Servers;
use crate::logs::Logger;
use crate::object;
use crate::state::admission::{self as decide, Answer, BadReview, Endpoint, Request, Write};
use crate::state::registry::Handler;

/// Reviews admission requests with the registered validating and mutating handlers.
pub struct Reviewer {
    /// The admission handlers, with their resources resolved to (group, version, plural).
    handlers: Vec<(Handler, (String, String, String))>,
    servers: Servers,
    log: Logger,
}

/// Why a webhook call gets no review (an HTTP error, not a denial).
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The body is no AdmissionReview.
    #[error("{0}")]
    Bad(#[from] BadReview),
    /// No admission handler has this path.
    #[error("no admission handler is served at /{0}")]
    Unknown(String),
}

impl Reviewer {
    /// A reviewer of `handlers` (the admission ones are kept) on `servers`.
    pub fn new(handlers: Vec<(Handler, (String, String, String))>, servers: Servers, log: Logger) -> Reviewer {
        Reviewer { handlers: handlers.into_iter().filter(|(h, _)| h.is_admission()).collect(), servers, log }
    }

    /// The AdmissionReview answered for `review`, sent to the endpoint of handler `id` with
    /// the HTTP `headers` the handler gets (as [`forwarded_headers`] makes them).
    pub async fn review(&self, id: &str, review: &Value, headers: HashMap<String, String>) -> Result<Value, Refusal> {
        let req = Request::parse(review)?;
        let (h, (group, version, plural)) = self.handlers.iter().find(|(h, _)| h.id == id).ok_or_else(|| Refusal::Unknown(id.into()))?;
        let mutating = h.kind == pb::HandlerKind::Mutate;
        // Called for a request the handler does not review (its filters say no): allowed.
        if !decide::reviews(h, (group, version, plural), mutating, &req) {
            return Ok(decide::respond(review, &req, &[]));
        }
        let obj = req.object.as_ref().map(object::object_ref);
        let call = pb::AdmitRequest {
            handler_id: h.id.clone(),
            request: serde_json::to_vec(&review["request"]).unwrap_or_default(),
            handler_key: h.key.clone(),
            headers,
        };
        let answer = match self.servers[h.server].admit(call, decide::call_deadline(h)).await {
            Ok(said) => {
                if said.allowed {
                    self.log.info(obj.as_ref(), &format!("Handler '{}' succeeded.", h.id));
                } else {
                    self.log.info(obj.as_ref(), &format!("Handler '{}' denied the {} request: {}", h.id, req.operation, said.message));
                }
                Answer::Said(said)
            }
            Err(failure) => {
                let closed = if h.admission.fail_closed { "the request is denied" } else { "the request passes without it" };
                self.log.error(obj.as_ref(), &format!("Handler '{}' failed: {failure}; {closed}.", h.id));
                Answer::Failed(failure.to_string())
            }
        };
        Ok(decide::respond(review, &req, &[(h, answer)]))
    }
}

/// The reviewer in service, replaced when the handler servers register other handlers.
pub struct Reviewers(RwLock<Arc<Reviewer>>);

impl Reviewers {
    /// Serving `reviewer` first.
    pub fn new(reviewer: Reviewer) -> Arc<Reviewers> {
        Arc::new(Reviewers(RwLock::new(Arc::new(reviewer))))
    }

    /// Serves `reviewer` from the next request on.
    pub fn replace(&self, reviewer: Reviewer) {
        *self.0.write() = Arc::new(reviewer);
    }
}

/// The endpoint's routes: `POST /<handler id>`.
pub fn router(reviewers: Arc<Reviewers>) -> axum::Router {
    axum::Router::new().route("/{*id}", axum::routing::post(serve_review)).with_state(reviewers)
}

/// The headers of the API server's webhook request as a handler gets them (Kopf's `headers`
/// kwarg): names in lower case, a repeated header's values joined with `, `, values that are
/// not text left out, and `Authorization` left out (its credentials are not the handler's).
pub fn forwarded_headers(headers: &HeaderMap) -> HashMap<String, String> {
    let mut forwarded: HashMap<String, String> = HashMap::new();
    for (name, value) in headers {
        if name == header::AUTHORIZATION {
            continue;
        }
        let Ok(value) = value.to_str() else { continue };
        forwarded
            .entry(name.as_str().to_string())
            .and_modify(|joined| {
                joined.push_str(", ");
                joined.push_str(value);
            })
            .or_insert_with(|| value.to_string());
    }
    forwarded
}

async fn serve_review(
    State(reviewers): State<Arc<Reviewers>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let reviewer = reviewers.0.read().clone();
    // As deep as the objects the controller reads (the object under review is in it).
    let review: Value = match crate::json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("the body is not JSON: {e}")).into_response(),
    };
    match reviewer.review(&id, &review, forwarded_headers(&headers)).await {
        Ok(answer) => axum::Json(answer).into_response(),
        Err(e @ Refusal::Bad(_)) => (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
        Err(e @ Refusal::Unknown(_)) => (StatusCode::NOT_FOUND, e.to_string()).into_response(),
    }
}

/// How the controller serves admission (the `--admission-*` flags).
#[derive(Debug, Clone)]
pub struct Setup {
    /// Where to listen. Default: `0.0.0.0:9443` with a Service, else `127.0.0.1:0` (a free
    /// port on loopback: the dev cluster, or a controller on a laptop).
    pub listen: Option<String>,
    /// The URL the API server calls, when it is not the Service nor the listen address: a
    /// tunnel, or the laptop's address as the cluster sees it.
    pub url: Option<String>,
    /// The host name the API server calls at the port listened on, when no URL or Service is
    /// given (Kopf's `WebhookServer(host=…)`); the certificate names it.
    pub host: Option<String>,
    /// The Service in front of the controller: namespace, name, port.
    pub service: Option<(String, String, u16)>,
    /// Where the serving certificate comes from.
    pub certificate: webhooks::Certificate,
    /// The name of both webhook configurations, and the suffix of their webhooks' names
    /// (as Kopf's `settings.admission.managed`).
    pub configuration: String,
    /// Create and keep the configurations up to date; without it they are someone else's
    /// (a Helm chart, cert-manager's CA injector), and the controller only serves.
    pub manage: bool,
    /// Remove the configurations when the controller stops cleanly.
    pub cleanup: bool,
    /// Requests in this namespace (the controller's own) are not sent to the webhooks, so
    /// that a broken controller cannot lock itself out.
    pub own_namespace: Option<String>,
    /// A developer's controller (`bosun dev`) on a cluster others use: the webhooks fail open
    /// with a short timeout, so that a `bosun dev` that died without removing them cannot block
    /// writes, and the configurations are labelled as a dev run's, so that the next one removes
    /// them when it starts ([`decide::DEV_RUN_LABEL`]).
    pub dev: bool,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            listen: None,
            url: None,
            host: None,
            service: None,
            certificate: webhooks::Certificate::SelfSigned,
            configuration: "auto.bosun.dev".into(),
            manage: true,
            cleanup: false,
            own_namespace: None,
            dev: false,
        }
    }
}

/// A handler and its resource resolved to (group, version, plural).
type Resolved = (Handler, (String, String, String));

/// The admission webhooks in service: the endpoint and the configurations.
pub struct Admission {
    reviewers: Arc<Reviewers>,
    cluster: Cluster,
    setup: Setup,
    endpoint: Endpoint,
    ca_bundle: watch::Receiver<String>,
    servers: Servers,
    log: Logger,
    /// Held while the configurations are written: a registry change and a certificate
    /// rotation write one after the other, each from the reviewer in service then.
    configuring: tokio::sync::Mutex<()>,
}

impl Admission {
    /// Serves the endpoint (with no handlers until [`Admission::apply`]) until `stop`; when the
    /// certificate files change, the configurations get the new CA.
    pub async fn start(
        cluster: Cluster,
        setup: Setup,
        servers: Servers,
        log: Logger,
        stop: watch::Receiver<bool>,
    ) -> Result<Arc<Admission>, webhooks::Error> {
        let listen = setup.listen.clone().unwrap_or_else(|| if setup.service.is_some() { "0.0.0.0:9443" } else { "127.0.0.1:0" }.into());
        let url_host: Vec<String> = setup.url.as_deref().and_then(url_host).into_iter().chain(setup.host.clone()).collect();
        let service = setup.service.as_ref().map(|(ns, name, _)| (ns.as_str(), name.as_str()));
        let loaded = webhooks::load(&setup.certificate, service, &url_host)?;
        let mut ca_bundle = loaded.ca_bundle.subscribe();
        let reviewers = Reviewers::new(Reviewer::new(Vec::new(), servers.clone(), log.clone()));
        let local = webhooks::serve(&listen, router(reviewers.clone()), loaded, log.clone(), stop.clone()).await?;
        let endpoint = match (&setup.url, &setup.service) {
            (Some(url), _) => Endpoint::Url(url.clone()),
            (None, Some((namespace, name, port))) => Endpoint::Service { namespace: namespace.clone(), name: name.clone(), port: *port },
            (None, None) => match &setup.host {
                Some(host) => Endpoint::Url(format!("https://{}:{}", bracketed(host), local.port())),
                None => Endpoint::Url(format!("https://{}", reachable(local))),
            },
        };
        let at = match &endpoint {
            Endpoint::Url(url) => url.clone(),
            Endpoint::Service { namespace, name, port } => format!("service {namespace}/{name} port {port}"),
        };
        log.info(None, &format!("Serving admission webhooks on {local}, called at {at}."));
        if setup.dev && setup.manage {
            let line = format!(
                "bosun dev on a cluster others use: the webhooks fail open (failurePolicy: Ignore, timeoutSeconds <= {}), \
                 so that a bosun dev that dies cannot block writes; they are removed when it stops.",
                decide::DEV_TIMEOUT_SECONDS
            );
            log.warn(None, &line);
        }
        ca_bundle.mark_unchanged();
        let admission = Arc::new(Admission {
            reviewers,
            cluster,
            setup,
            endpoint,
            ca_bundle: ca_bundle.clone(),
            servers,
            log,
            configuring: Default::default(),
        });
        if admission.setup.manage {
            let again = admission.clone();
            let mut stop = stop;
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        changed = ca_bundle.changed() => if changed.is_err() { return },
                        _ = stop.wait_for(|s| *s) => return,
                    }
                    again.configure().await;
                }
            });
        }
        Ok(admission)
    }

    /// Reviews with the admission handlers among `handlers` from now on, and configures the
    /// API server to call them. A handler whose resource the cluster does not serve is left
    /// out, with an error.
    pub async fn apply(&self, handlers: &[Handler]) {
        let mut resolved: Vec<Resolved> = Vec::new();
        for h in handlers.iter().filter(|h| h.is_admission()) {
            match discovery::resolve(&self.cluster, &h.resource).await {
                Ok(Some(r)) => resolved.push((decide::for_setup(h, self.setup.dev), (r.group, r.version, r.plural))),
                Ok(None) => self.log.error(
                    None,
                    &format!("Handler '{}' reviews `{}`, which the cluster does not serve; it gets no webhook.", h.id, h.resource.name),
                ),
                Err(e) => self.log.error(None, &format!("Handler '{}' gets no webhook: its resource cannot be resolved: {e}", h.id)),
            }
        }
        self.reviewers.replace(Reviewer::new(resolved, self.servers.clone(), self.log.clone()));
        if self.setup.manage {
            self.configure().await;
        }
    }

    /// Creates, patches or removes both configurations to match the handlers served.
    async fn configure(&self) {
        let _one_at_a_time = self.configuring.lock().await;
        let reviewer = self.reviewers.0.read().clone();
        let handlers: Vec<(&Handler, (&str, &str, &str))> =
            reviewer.handlers.iter().map(|(h, (g, v, p))| (h, (g.as_str(), v.as_str(), p.as_str()))).collect();
        let ca_bundle = self.ca_bundle.borrow().clone();
        let name = &self.setup.configuration;
        for mutating in [false, true] {
            let hooks = decide::webhooks(&handlers, mutating, &self.endpoint, &ca_bundle, name, self.setup.own_namespace.as_deref());
            let count = hooks.len();
            let desired = decide::configuration(name, mutating, hooks, self.setup.dev);
            let kind = desired["kind"].as_str().unwrap_or_default().to_string();
            let path = decide::configuration_path(name, mutating);
            let existing = match self.cluster.get(&path).await {
                Ok(found) => Some(found),
                Err(e) if e.code() == Some(404) => None,
                Err(e) => {
                    self.log.error(None, &format!("Cannot read {kind} '{name}': {e}; the admission webhooks are not configured."));
                    continue;
                }
            };
            let done = match decide::write_for(existing.as_ref(), desired) {
                Write::Nothing => continue,
                Write::Create(object) => {
                    let collection = path.rsplit_once('/').map(|(c, _)| c).unwrap_or_default();
                    self.cluster.create(collection, &object).await.map(|_| "created")
                }
                Write::Patch(patch) => self.cluster.patch(&path, crate::cluster::content::MERGE, &patch).await.map(|_| "updated"),
                Write::Delete => {
                    self.cluster.call(http::Method::DELETE, &path, None, None).await.map(|_| "removed (no handlers of its kind)")
                }
            };
            match done {
                Ok(what) => self.log.info(None, &format!("{kind} '{name}' is {what}: {count} webhook(s).")),
                Err(e) => self.log.error(None, &format!("Cannot write {kind} '{name}': {e}; the admission webhooks are not configured.")),
            }
        }
    }

    /// Removes the configurations if asked to (`--admission-cleanup`), unless another replica
    /// still serves them (`roster`, asked after this one's peering records and Leases are gone).
    pub async fn stop(&self, roster: &Roster) {
        if !(self.setup.manage && self.setup.cleanup) {
            return;
        }
        let name = &self.setup.configuration;
        match roster.another().await {
            Ok(None) => {}
            Ok(Some(other)) => {
                let line = format!("Keeping the admission webhook configurations '{name}': replica {other} still serves them.");
                return self.log.info(None, &line);
            }
            Err(e) => {
                let line = format!(
                    "Keeping the admission webhook configurations '{name}': cannot tell whether another replica serves them ({e})."
                );
                return self.log.warn(None, &line);
            }
        }
        for mutating in [false, true] {
            let path = decide::configuration_path(name, mutating);
            match self.cluster.call(http::Method::DELETE, &path, None, None).await {
                Ok(_) => self.log.info(None, &format!("Removed the admission webhook configuration at {path}.")),
                Err(e) if e.code() == Some(404) => {}
                Err(e) => self.log.error(None, &format!("Cannot remove the admission webhook configuration at {path}: {e}")),
            }
        }
    }
}

/// The host of a URL (`https://host:port/path` → `host`), for the certificate's names.
fn url_host(url: &str) -> Option<String> {
    let uri: http::Uri = url.parse().ok()?;
    uri.host().map(|h| h.trim_start_matches('[').trim_end_matches(']').to_string())
}

/// A host as it goes into a URL: IPv6 addresses in brackets.
fn bracketed(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') { format!("[{host}]") } else { host.to_string() }
}

/// The address the API server can call for a listen address: loopback for "any".
fn reachable(local: std::net::SocketAddr) -> String {
    match local.ip() {
        ip if ip.is_unspecified() && ip.is_ipv4() => format!("127.0.0.1:{}", local.port()),
        ip if ip.is_unspecified() => format!("[::1]:{}", local.port()),
        _ => local.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_called_address_and_the_certificate_names_come_from_the_flags() {
        let cases = [("0.0.0.0:9443", "127.0.0.1:9443"), ("[::]:9443", "[::1]:9443"), ("10.1.2.3:8443", "10.1.2.3:8443")];
        for (local, want) in cases {
            assert_eq!(reachable(local.parse().unwrap()), want, "{local}");
        }
        let hosts = [
            ("https://host.docker.internal:9443", Some("host.docker.internal")),
            ("https://[fd00::1]:9443/x", Some("fd00::1")),
            ("https://abc.ngrok.app", Some("abc.ngrok.app")),
            ("not a url", None),
        ];
        for (url, want) in hosts {
            assert_eq!(url_host(url).as_deref(), want, "{url}");
        }
        for (host, want) in [("op.example", "op.example"), ("10.0.0.1", "10.0.0.1"), ("fd00::1", "[fd00::1]"), ("[fd00::1]", "[fd00::1]")] {
            assert_eq!(bracketed(host), want);
        }
    }

    #[tokio::test]
    async fn reviews_are_sent_with_the_handlers_key() {
        let server = Arc::new(crate::handlers::recording::Recording::default());
        let spec = pb::HandlerSpec {
            id: "check".into(),
            key: "check-create".into(),
            kind: pb::HandlerKind::Validate as i32,
            resource: Some(pb::ResourceSelector { name: "kopfexamples".into(), ..Default::default() }),
            ..Default::default()
        };
        let h = Handler::from_spec(&spec, 0).unwrap();
        let resolved = ("kopf.dev".to_string(), "v1".to_string(), "kopfexamples".to_string());
        let reviewer = Reviewer::new(vec![(h, resolved)], Arc::new(vec![server.clone()]), Logger::new(None));
        let review = serde_json::json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "1", "operation": "CREATE", "object": {"metadata": {"name": "x"}},
            "resource": {"group": "kopf.dev", "version": "v1", "resource": "kopfexamples"}}});
        let headers = HashMap::from([("x-request-id".to_string(), "abc".to_string())]);
        let answer = reviewer.review("check", &review, headers.clone()).await.unwrap();
        assert_eq!(answer["response"]["allowed"], true, "{answer}");
        assert_eq!(*server.calls.lock(), [("Admit", "check".into(), "check-create".into())]);
        assert_eq!(*server.headers.lock(), [headers], "the handler gets the request's headers");
    }

    #[test]
    fn handlers_get_the_webhook_requests_headers_in_lower_case_without_authorization() {
        let given: &[(&str, &[u8])] = &[
            ("Content-Type", b"application/json"),
            ("Authorization", b"Bearer secret"),
            ("X-Forwarded-For", b"10.0.0.1"),
            ("x-forwarded-for", b"10.0.0.2"),
            ("X-Binary", b"\xff\xfe"),
        ];
        let mut headers = HeaderMap::new();
        for (name, value) in given {
            let name = axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap();
            headers.append(name, axum::http::HeaderValue::from_bytes(value).unwrap());
        }
        let want = HashMap::from([
            ("content-type".to_string(), "application/json".to_string()),
            ("x-forwarded-for".to_string(), "10.0.0.1, 10.0.0.2".to_string()),
        ]);
        assert_eq!(forwarded_headers(&headers), want);
    }

    use proptest::prelude::Strategy as _;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 128, ..Default::default() })]

        /// Whatever reaches the endpoint (any bytes, any JSON, objects of any depth), it answers
        /// 200 with a review, or 400/404 saying why: never a panic.
        #[test]
        fn the_endpoint_answers_any_body(
            body in proptest::prop_oneof![
                proptest::collection::vec(proptest::prelude::any::<u8>(), 0..32),
                crate::state::arbitrary::json().prop_map(|v| serde_json::json!({"request": {"uid": "1", "operation": "CREATE",
                    "object": v, "resource": {"group": "kopf.dev", "version": "v1", "resource": "kopfexamples"}}}).to_string().into_bytes()),
                crate::state::arbitrary::json().prop_map(|v| v.to_string().into_bytes()),
                proptest::prelude::Just(crate::json::nested(crate::json::MAX_DEPTH + 1).into_bytes()),
            ],
            id in proptest::prop_oneof![proptest::prelude::Just("check".to_string()), "[a-z/]{1,8}"],
        ) {
            let server = Arc::new(crate::handlers::recording::Recording::default());
            let spec = pb::HandlerSpec {
                id: "check".into(),
                kind: pb::HandlerKind::Mutate as i32,
                resource: Some(pb::ResourceSelector { name: "kopfexamples".into(), ..Default::default() }),
                ..Default::default()
            };
            let resolved = ("kopf.dev".to_string(), "v1".to_string(), "kopfexamples".to_string());
            let reviewer = Reviewer::new(vec![(Handler::from_spec(&spec, 0).unwrap(), resolved)], Arc::new(vec![server]), Logger::new(None));
            let app = router(Reviewers::new(reviewer));
            let request = axum::http::Request::post(format!("/{id}")).body(axum::body::Body::from(body)).unwrap();
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let status = rt.block_on(tower::ServiceExt::oneshot(app, request)).unwrap().status();
            proptest::prop_assert!([200, 400, 404].contains(&status.as_u16()), "{}", status);
        }
    }
}
