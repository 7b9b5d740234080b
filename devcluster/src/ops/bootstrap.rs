//! What a fresh cluster holds and what the real cluster's controllers add to every namespace,
//! written through the verbs as the dev cluster's own writes (no admission): the namespaces,
//! the Service `default/kubernetes` with its Endpoints and EndpointSlice, each namespace's
//! ServiceAccount `default` and (with TLS) ConfigMap `kube-root-ca.crt`. Methods of
//! [`Cluster`], above the state it is and beside the verbs that call them (a namespace's
//! create furnishes it; a delete of what furnishing made puts it back).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use serde_json::{Value, json};

use super::create::create;
use super::types::{Object, Subresource, WriteOpts};
use super::update::update;
use crate::cluster::Cluster;
use crate::registry::{ResourceInfo, terminating};

impl Cluster {
    /// Create what a fresh cluster has: its namespaces (each with what
    /// [`Cluster::furnish_namespace`] adds), the Service `default/kubernetes` through which
    /// pods reach the API server, and its Endpoints and EndpointSlice naming `listen` (see
    /// [`Cluster::publish_address`]). Each only where it is missing (a data dir may hold it).
    pub fn seed(&self, listen: SocketAddr) {
        for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
            self.create_missing("namespaces", "", name, body, None);
        }
        // Every namespace, also those of a data dir restored without what they should have
        // (a data dir written before, or without --tls).
        let (namespaces, _) = self.table(&self.core("namespaces")).list(None);
        for ns in namespaces.iter().filter(|ns| !terminating(&ns.value)) {
            self.furnish_namespace(ns.name());
        }
        let service = json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "kubernetes", "namespace": "default", "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {
                "clusterIP": "10.96.0.1",
                "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}],
                "sessionAffinity": "None",
                "type": "ClusterIP",
            },
        });
        self.create_missing("services", "default", "kubernetes", service, Some("kube-apiserver"));
        self.publish_address(listen);
    }

    /// The Endpoints and the EndpointSlice `default/kubernetes`: where the API server listens
    /// (loopback when it listens on every address), as the real server's endpoint reconciler
    /// keeps them — written again when they name another address (a data dir from an
    /// earlier run on another port).
    pub fn publish_address(&self, listen: SocketAddr) {
        let ip = match listen.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        let port = json!({"name": "https", "port": listen.port(), "protocol": "TCP"});
        let endpoints = json!({
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {"name": "kubernetes", "namespace": "default", "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
            "subsets": [{"addresses": [{"ip": ip.to_string()}], "ports": [port]}],
        });
        self.create_or_update(&self.core("endpoints"), "default", "kubernetes", endpoints);
        let slice = json!({
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {"name": "kubernetes", "namespace": "default", "labels": {"kubernetes.io/service-name": "kubernetes"}},
            "addressType": if ip.is_ipv4() { "IPv4" } else { "IPv6" },
            "endpoints": [{"addresses": [ip.to_string()], "conditions": {"ready": true}}],
            "ports": [port],
        });
        let info = self.registry.get("discovery.k8s.io", "v1", "endpointslices").expect("built-in resource");
        self.create_or_update(&info, "default", "kubernetes", slice);
    }

    /// What the real cluster's controllers add to every namespace once it exists: the
    /// ServiceAccount `default` (the service account controller's work) and, with TLS, the
    /// ConfigMap `kube-root-ca.crt` with the CA pods trust the API server by (the root CA
    /// certificate publisher's). Called when a namespace is created, here at once rather than
    /// a moment later.
    pub fn furnish_namespace(&self, ns: &str) {
        let body = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": ns}});
        self.create_missing("serviceaccounts", ns, "default", body, Some("kube-controller-manager"));
        if let Some(ca) = &self.ca_pem {
            let body = json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "kube-root-ca.crt", "namespace": ns,
                    "annotations": {"kubernetes.io/description": "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."}},
                "data": {"ca.crt": ca},
            });
            self.create_missing("configmaps", ns, "kube-root-ca.crt", body, Some("kube-controller-manager"));
        }
    }

    /// What the real cluster's controllers do when the ServiceAccount `default` or the
    /// ConfigMap `kube-root-ca.crt` of a live namespace is deleted: create it again.
    pub fn refurnish_namespace(&self, ns: &str) {
        let live = self.namespace(ns).is_some_and(|n| !terminating(&n));
        if live {
            self.furnish_namespace(ns);
        }
    }

    /// Creates the core/v1 object `ns/name` unless it exists.
    fn create_missing(&self, plural: &str, ns: &str, name: &str, body: Value, manager: Option<&str>) {
        let info = self.core(plural);
        if self.table(&info).get(ns, name).is_some() {
            return;
        }
        let opts = WriteOpts { manager: manager.map(String::from), ..Default::default() };
        match create(self, &info, ns, body, &opts) {
            Ok(_) => {}
            Err(e) if e.code == 409 => {} // created meanwhile
            Err(e) => tracing::error!("cannot create {plural} {ns}/{name}: {}", e.message),
        }
    }

    /// Creates the API server's own object `ns/name`, or replaces it with `body` (a no-op
    /// when it already says the same).
    fn create_or_update(&self, info: &ResourceInfo, ns: &str, name: &str, body: Value) {
        let opts = WriteOpts { manager: Some("kube-apiserver".into()), ..Default::default() };
        let written = match self.table(info).get(ns, name) {
            None => create(self, info, ns, body, &opts),
            Some(_) => update(self, Object { info, ns, name, sub: Subresource::Main }, body, &opts),
        };
        if let Err(e) = written {
            tracing::error!("cannot write {} {ns}/{name}: {}", info.plural, e.message);
        }
    }
}
