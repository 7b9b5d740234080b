//! `bosun rbac` and `bosun dev --print-rbac`: the least-privilege ClusterRole/Roles and
//! bindings ([`bosun_controller::rbac::servers`]) for the controller run with the same flags,
//! from what its handler servers describe. The resources they name are resolved through the
//! cluster the flags name; with `--offline`, or with no cluster to log in to, through an
//! embedded dev cluster in memory with the `--apply` manifests (the CRDs) applied.

use std::path::PathBuf;

use anyhow::Context as _;
use bosun_controller::cluster::{Cluster, apply};
use bosun_controller::rbac::servers::{DEFAULT_SERVICE_ACCOUNT, Output, render};
use clap::Args;

use crate::args::ControllerArgs;
use crate::supervise::HandlerServerArgs;

/// `bosun rbac`.
#[derive(Debug, Args)]
pub struct RbacArgs {
    /// Give the roles and bindings this name.
    #[arg(long, default_value = "bosun")]
    pub name: String,
    /// The service account the controller runs as, `NAMESPACE/NAME`: the bindings name it.
    #[arg(long, default_value = DEFAULT_SERVICE_ACCOUNT, value_name = "NAMESPACE/NAME")]
    pub service_account: String,
    /// More kinds the handlers create as owned children (besides those the servers declare),
    /// named as `kubectl get` names them (repeatable).
    #[arg(long = "owns", value_name = "RESOURCE")]
    pub owns: Vec<String>,
    /// Ask no cluster: resolve the resources through an embedded dev cluster in memory, with
    /// the built-in kinds and the `--apply` manifests. The default when no cluster can be
    /// logged in to.
    #[arg(long)]
    pub offline: bool,
    /// Manifests (files or directories: the CRDs of the handled and owned resources) to
    /// resolve resources by, offline (repeatable).
    #[arg(long = "apply", value_name = "PATH")]
    pub apply: Vec<PathBuf>,
    /// Controller flags: the same flags as `bosun run` give the roles that run needs.
    #[command(flatten)]
    pub controller: ControllerArgs,
    /// A handler server to start as a child.
    #[command(flatten)]
    pub server: HandlerServerArgs,
}

/// Runs `bosun rbac`.
pub async fn rbac(args: RbacArgs) -> anyhow::Result<()> {
    let command = args.server.command(args.controller.log.debugging())?;
    let mut settings = args.controller.settings();
    let online = if args.offline {
        None
    } else {
        match args.controller.client().await {
            Ok(client) => Some(client),
            Err(_) if !args.controller.names_a_cluster() => {
                eprintln!(
                    "bosun rbac: no kubeconfig or in-cluster account: resolving resources offline (the built-in kinds and --apply's CRDs)."
                );
                None
            }
            Err(e) => return Err(e),
        }
    };
    let (cluster, offline) = match online {
        Some(client) => (Cluster::new(client), None),
        None => {
            let (cluster, dev) = offline_cluster(&args.apply).await?;
            (cluster, Some(dev))
        }
    };
    let child_cluster = if offline.is_some() { Default::default() } else { args.controller.cluster.for_child()? };
    let child = command.map(|command| crate::supervise::start(command, &mut settings, child_cluster)).transpose()?;
    let output = Output { name: args.name, service_account: args.service_account, owns: args.owns };
    let printed = render(&cluster, &settings, &output).await.map_err(|e| hint(e, offline.is_some()));
    if let Some(child) = child {
        child.stop().await;
    }
    if let Some(dev) = offline {
        dev.shutdown().await;
    }
    let printed = printed?;
    eprintln!("bosun rbac: the bindings are for the service account {} (--service-account NAMESPACE/NAME).", output.service_account);
    print!("{printed}");
    Ok(())
}

/// An embedded dev cluster in memory with `manifests` applied, and a client of it.
async fn offline_cluster(manifests: &[PathBuf]) -> anyhow::Result<(Cluster, bosun_devcluster::DevCluster)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let dev = bosun_devcluster::DevCluster::start(listener, Default::default()).await.context("the embedded dev cluster did not start")?;
    let cluster = Cluster::new(dev.client());
    for path in manifests {
        apply::apply_path(&cluster, path).await?;
    }
    Ok((cluster, dev))
}

/// The error, with what to do about it where that depends on how resources were resolved.
fn hint(e: bosun_controller::rbac::servers::Error, offline: bool) -> anyhow::Error {
    use bosun_controller::rbac::servers::Error as E;
    match e {
        E::Unknown(_) if offline => anyhow::anyhow!("{e} (offline: --apply CRD.yaml)"),
        E::Discovery { .. } if !offline => anyhow::anyhow!("{e}; to print the roles without a cluster: --offline --apply CRD.yaml"),
        e => e.into(),
    }
}
