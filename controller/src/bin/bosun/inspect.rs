//! `bosun inspect RESOURCE NAME`: what the controller's marks on one object say, in words
//! (`bosun_controller::state::inspect`). Also `kubectl bosun inspect …` once the binary is on
//! the PATH as `kubectl-bosun` (kubectl runs plugins by that name with the words after it).

use anyhow::Context as _;
use bosun_controller::cluster::{Api, Cluster, discovery};
use bosun_controller::state::storage::{Storage, StorageKind};
use clap::Args;

use crate::args::ClusterArgs;

/// `bosun inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The resource (`kopfexamples`, `kex`'s plural, `pods`, `plural.group`).
    pub resource: String,
    /// The object's name.
    pub name: String,
    /// Its namespace (for namespaced resources; `default` when not given).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// The controller's prefix of annotations and finalizer.
    #[arg(long, env = "BOSUN_PREFIX", default_value = "bosun.dev")]
    pub prefix: String,
    /// The controller runs with --kopf-compat (Kopf's annotations and finalizer).
    #[arg(long, env = "BOSUN_KOPF_COMPAT")]
    pub kopf_compat: bool,
    /// The cluster.
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// Prints the report on the object.
pub async fn inspect(args: InspectArgs) -> anyhow::Result<()> {
    let cluster = Cluster::new(args.cluster.client().await?);
    let sel = bosun_proto::v1::ResourceSelector { name: args.resource.clone(), ..Default::default() };
    let resource = discovery::resolve(&cluster as &dyn Api, &sel)
        .await?
        .with_context(|| format!("no resource '{}' on the API server", args.resource))?;
    let namespace = if resource.namespaced { args.namespace.as_deref().unwrap_or("default") } else { "" };
    let body = cluster.get(&resource.object_path(namespace, &args.name)).await.with_context(|| {
        let at = if namespace.is_empty() { args.name.clone() } else { format!("{namespace}/{}", args.name) };
        format!("cannot read {} {at}", resource.display())
    })?;
    // Both places are read whatever the controller writes to: the kind only orders them.
    let storage = if args.kopf_compat { Storage::kopf() } else { Storage::bosun(&args.prefix, StorageKind::Status) };
    print!("{}", bosun_controller::state::inspect::explain(&body, &storage, chrono::Utc::now()));
    Ok(())
}
