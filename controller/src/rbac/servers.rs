//! The roles for a controller run with `settings`, from what its handler servers describe:
//! each server is asked for its registry (`Describe`), the resources it names are resolved
//! through a cluster's discovery (the real one, or an embedded dev cluster with the CRDs when
//! `bosun rbac` runs offline), and [`super::grants`] decides the rules. What `bosun rbac` and
//! `bosun dev --print-rbac` print.

use std::time::Duration;

use bosun_proto::v1 as pb;

use super::{Handled, Needs};
use crate::Settings;
use crate::cluster::Api;
use crate::cluster::discovery::{self, ResolvedResource};
use crate::coordination::peering::Family;
use crate::handlers::dispatch::Server;
use crate::logs::Logger;
use crate::state::registry;

/// How long a handler server gets to come up before giving up.
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// The default service account the roles are bound to.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "bosun-system/bosun";

/// How the printed roles are named and bound.
#[derive(Debug, Clone)]
pub struct Output {
    /// Roles' and bindings' name.
    pub name: String,
    /// `NAMESPACE/NAME`.
    pub service_account: String,
    /// Kinds the handlers create as owned children besides those the servers declare
    /// (`--owns`), named as `kubectl get` names them.
    pub owns: Vec<String>,
}

/// Why no roles could be printed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The service account is not `NAMESPACE/NAME`.
    #[error("--service-account {0}: give NAMESPACE/NAME")]
    Account(String),
    /// No handler server to ask.
    #[error(transparent)]
    NoHandlers(#[from] crate::Error),
    /// A server did not come up, or did not describe itself.
    #[error("handler server {addr}: {message}")]
    Server {
        /// Its address.
        addr: String,
        /// What went wrong.
        message: String,
    },
    /// A resource a server names is not served.
    #[error("the cluster serves no resource `{0}`: apply its CRD first")]
    Unknown(String),
    /// Discovery failed.
    #[error("cannot resolve `{name}`: {source}")]
    Discovery {
        /// The resource.
        name: String,
        /// Why.
        source: crate::cluster::Error,
    },
    /// The registry is invalid.
    #[error("{0}")]
    Registry(String),
}

/// The YAML of the roles and bindings the controller with `settings` needs, its resources
/// resolved through `cluster`.
pub async fn render(cluster: &dyn Api, settings: &Settings, output: &Output) -> Result<String, Error> {
    let (namespace, account) = output
        .service_account
        .split_once('/')
        .filter(|(ns, name)| !ns.is_empty() && !name.is_empty() && !name.contains('/'))
        .ok_or_else(|| Error::Account(output.service_account.clone()))?;
    if settings.handlers.is_empty() {
        return Err(crate::Error::NoHandlers.into());
    }
    let mut specs = Vec::new();
    let mut owned: Vec<pb::ResourceSelector> = Vec::new();
    for addr in &settings.handlers {
        let failed = |message: String| Error::Server { addr: addr.clone(), message };
        let server = Server::new(addr).map_err(|e| failed(e.to_string()))?;
        tokio::time::timeout(READY_TIMEOUT, server.wait_ready(&Logger::new(None)))
            .await
            .map_err(|_| failed(format!("not ready within {}s", READY_TIMEOUT.as_secs())))?;
        let described = server.describe().await.map_err(|e| failed(e.to_string()))?;
        owned.extend(described.resources.iter().flat_map(|r| r.owns.iter().cloned()));
        specs.push(described);
    }
    for name in &output.owns {
        owned.push(pb::ResourceSelector { name: name.clone(), ..Default::default() });
    }
    let handlers = registry::build(&specs).map_err(|e| Error::Registry(e.to_string()))?;

    let mut handled: Vec<Handled> = Vec::new();
    for h in handlers.iter().filter(|h| !h.is_activity() && !h.is_admission()) {
        let resource = resolve(cluster, &h.resource).await?;
        let writes = Handled::kind_writes(h.kind);
        match handled.iter_mut().find(|x| x.resource == resource) {
            Some(x) => x.writes |= writes,
            None => handled.push(Handled { resource, writes }),
        }
    }
    let mut owned_resources: Vec<ResolvedResource> = Vec::new();
    for sel in &owned {
        let resource = resolve(cluster, sel).await?;
        if !owned_resources.contains(&resource) {
            owned_resources.push(resource);
        }
    }
    let family = if settings.kopf_compat { Family::Kopf } else { Family::Bosun };
    let needs = Needs {
        handled,
        owned: owned_resources,
        namespaces: settings.namespaces.clone(),
        peering: (!settings.standalone).then(|| (family, settings.peering.name.clone())),
        replicas: settings.replicas.clone(),
        admission: (settings.admission.manage && handlers.iter().any(|h| h.is_admission()))
            .then(|| settings.admission.configuration.clone()),
    };
    let docs = super::manifests(&super::grants(&needs), &output.name, (namespace, account));
    let mut out = format!(
        "# The least privilege of this controller, from its handler servers' registry (`bosun rbac`):\n\
         # the handled resources, their status, events, the CRDs' schemas, owned kinds, peering, Leases.\n\
         # Bound to the service account {namespace}/{account} (--service-account NAMESPACE/NAME).\n"
    );
    for doc in docs {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&doc).map_err(|e| Error::Registry(e.to_string()))?);
    }
    Ok(out)
}

async fn resolve(cluster: &dyn Api, sel: &pb::ResourceSelector) -> Result<ResolvedResource, Error> {
    let name = display(sel);
    match discovery::resolve(cluster, sel).await {
        Ok(Some(r)) => Ok(r),
        Ok(None) => Err(Error::Unknown(name)),
        Err(source) => Err(Error::Discovery { name, source }),
    }
}

fn display(sel: &pb::ResourceSelector) -> String {
    [sel.group.as_str(), sel.version.as_str(), sel.name.as_str()].iter().filter(|s| !s.is_empty()).copied().collect::<Vec<_>>().join("/")
}
