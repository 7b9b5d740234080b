//! `bosun rbac` and `bosun dev --print-rbac`: ask the handler servers for their registry,
//! resolve its resources through the cluster's discovery, and print the least-privilege
//! ClusterRole/Roles and bindings ([`bosun_controller::rbac`]) for the controller run with the
//! same flags.

use std::time::Duration;

use anyhow::Context as _;
use bosun_controller::cluster::Cluster;
use bosun_controller::cluster::discovery::{self, ResolvedResource};
use bosun_controller::coordination::peering::Family;
use bosun_controller::handlers::dispatch::Server;
use bosun_controller::logs::Logger;
use bosun_controller::rbac::{self, Handled, Needs};
use bosun_controller::state::registry;
use bosun_proto::v1 as pb;
use clap::Args;

use crate::args::ControllerArgs;
use crate::supervise::HandlerServerArgs;

/// How long a handler server gets to come up before `bosun rbac` gives up.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// `bosun rbac`.
#[derive(Debug, Args)]
pub struct RbacArgs {
    /// Give the roles and bindings this name.
    #[arg(long, default_value = "bosun")]
    pub name: String,
    /// The service account the controller runs as, `NAMESPACE/NAME`.
    #[arg(long, default_value = "bosun-system/bosun", value_name = "NAMESPACE/NAME")]
    pub service_account: String,
    /// More kinds the handlers create as owned children (besides those the servers declare),
    /// named as `kubectl get` names them (repeatable).
    #[arg(long = "owns", value_name = "RESOURCE")]
    pub owns: Vec<String>,
    /// Controller flags: the same flags as `bosun run` give the roles that run needs.
    #[command(flatten)]
    pub controller: ControllerArgs,
    /// A handler server to start as a child.
    #[command(flatten)]
    pub server: HandlerServerArgs,
}

/// What `--print-rbac` and `bosun rbac` share: the name, the account, the extra owned kinds.
#[derive(Debug, Clone)]
pub struct Output {
    /// Roles' and bindings' name.
    pub name: String,
    /// `NAMESPACE/NAME`.
    pub service_account: String,
    /// `--owns`.
    pub owns: Vec<String>,
}

/// Runs `bosun rbac`.
pub async fn rbac(args: RbacArgs) -> anyhow::Result<()> {
    let command = args.server.command(args.controller.log.debugging())?;
    let mut settings = args.controller.settings();
    let cluster = args.controller.cluster.for_child()?;
    let child = command.map(|command| crate::supervise::start(command, &mut settings, cluster)).transpose()?;
    let cluster = Cluster::new(args.controller.client().await?);
    let output = Output { name: args.name, service_account: args.service_account, owns: args.owns };
    let printed = render(&cluster, &settings, &output).await;
    if let Some(child) = child {
        child.stop().await;
    }
    print!("{}", printed?);
    Ok(())
}

/// The YAML of the roles and bindings the controller with `settings` needs.
pub async fn render(cluster: &Cluster, settings: &bosun_controller::Settings, output: &Output) -> anyhow::Result<String> {
    let (namespace, account) = output
        .service_account
        .split_once('/')
        .filter(|(ns, name)| !ns.is_empty() && !name.is_empty())
        .with_context(|| format!("--service-account {}: give NAMESPACE/NAME", output.service_account))?;
    if settings.handlers.is_empty() {
        anyhow::bail!(bosun_controller::Error::NoHandlers);
    }
    let mut specs = Vec::new();
    let mut owned: Vec<pb::ResourceSelector> = Vec::new();
    for addr in &settings.handlers {
        let server = Server::new(addr)?;
        tokio::time::timeout(READY_TIMEOUT, server.wait_ready(&Logger::new(None)))
            .await
            .map_err(|_| anyhow::anyhow!("handler server {addr} was not ready within {}s", READY_TIMEOUT.as_secs()))?;
        let described = server.describe().await?;
        owned.extend(described.resources.iter().flat_map(|r| r.owns.iter().cloned()));
        specs.push(described);
    }
    for name in &output.owns {
        owned.push(pb::ResourceSelector { name: name.clone(), ..Default::default() });
    }
    let handlers = registry::build(&specs)?;

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
    let docs = rbac::manifests(&rbac::grants(&needs), &output.name, (namespace, account));
    let mut out = String::from(
        "# The least privilege of this controller, from its handler servers' registry (`bosun rbac`):\n\
         # the handled resources, their status, events, the CRDs' schemas, owned kinds, peering, Leases.\n",
    );
    for doc in docs {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&doc)?);
    }
    Ok(out)
}

async fn resolve(cluster: &Cluster, sel: &pb::ResourceSelector) -> anyhow::Result<ResolvedResource> {
    discovery::resolve(cluster, sel)
        .await?
        .with_context(|| format!("the cluster serves no resource `{}`: apply its CRD first (`bosun dev --apply`)", display(sel)))
}

fn display(sel: &pb::ResourceSelector) -> String {
    [sel.group.as_str(), sel.version.as_str(), sel.name.as_str()].iter().filter(|s| !s.is_empty()).copied().collect::<Vec<_>>().join("/")
}
