//! The commands about other controllers: `bosun freeze` and `bosun resume` (as `kopf freeze`
//! and `kopf resume`: a record of high priority in the peering object pauses the controllers
//! of that peering until it expires or is removed), and `bosun shards` (the members of a
//! shard group and how many objects each handles).

use std::time::Duration;

use anyhow::Context as _;
use bosun_controller::cluster::watching::{Seen, WatchScope, list_all};
use bosun_controller::cluster::{Api, Cluster, discovery};
use bosun_controller::coordination::{identity, keepalive, lease, peering, shards};
use bosun_controller::object;
use clap::Args;
use serde_json::Value;

use crate::args::{ClusterArgs, default_lease_namespace};

/// Which peering object(s).
#[derive(Debug, Args, Clone)]
pub struct PeeringArgs {
    /// The identity to write under (default: user@host).
    #[arg(long = "id")]
    pub id: Option<String>,
    /// The peering object's name.
    #[arg(long, env = "BOSUN_PEERING", default_value = "default")]
    pub peering: String,
    /// The namespaced peering in these namespaces (default: the cluster-wide one).
    #[arg(short = 'n', long = "namespace", value_delimiter = ',')]
    pub namespaces: Vec<String>,
    /// The cluster-wide peering (the default).
    #[arg(short = 'A', long = "all-namespaces", conflicts_with = "namespaces")]
    pub all_namespaces: bool,
    /// Kopf's peering objects (kopf.dev), to freeze Kopf operators and Bosun's --kopf-compat ones.
    #[arg(long, env = "BOSUN_KOPF_COMPAT")]
    pub kopf_compat: bool,
    /// The cluster.
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// `bosun freeze`.
#[derive(Debug, Args)]
pub struct FreezeArgs {
    /// How long the freeze lasts, in seconds.
    #[arg(long, value_name = "SECONDS")]
    pub lifetime: u64,
    /// The freeze's priority: controllers of lower priority pause.
    #[arg(long, default_value_t = 100, allow_negative_numbers = true)]
    pub priority: i64,
    /// Which peering.
    #[command(flatten)]
    pub peering: PeeringArgs,
}

/// `bosun resume`.
#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// Which peering.
    #[command(flatten)]
    pub peering: PeeringArgs,
}

/// `bosun shards`.
#[derive(Debug, Args)]
pub struct ShardsArgs {
    /// The shard group (the controllers' --lease-name).
    #[arg(long, env = "BOSUN_LEASE_NAME", default_value = "bosun")]
    pub lease_name: String,
    /// The namespace of its Leases (default: $POD_NAMESPACE, else `default`).
    #[arg(long, env = "BOSUN_LEASE_NAMESPACE")]
    pub lease_namespace: Option<String>,
    /// Resources whose objects to count per member (`kopfexamples`, `pods`, `plural.group`).
    #[arg(value_name = "RESOURCE")]
    pub resources: Vec<String>,
    /// The cluster.
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// Writes (or removes, with no lifetime) a record in each peering object named.
async fn touch(args: &PeeringArgs, priority: i64, lifetime: Duration) -> anyhow::Result<(String, Vec<String>)> {
    let cluster = Cluster::new(args.cluster.client().await?);
    let family = if args.kopf_compat { peering::Family::Kopf } else { peering::Family::Bosun };
    let id = args.id.clone().unwrap_or_else(|| identity::detect(true));
    let scopes: Vec<Option<String>> =
        if args.namespaces.is_empty() { vec![None] } else { args.namespaces.iter().cloned().map(Some).collect() };
    let patch = peering::touch_patch(&id, priority, lifetime, chrono::Utc::now());
    let mut done = Vec::new();
    for ns in scopes {
        let path = family.path(ns.as_deref(), &args.peering);
        let what = family.describe(ns.as_deref(), &args.peering);
        match keepalive::write_record(&cluster, &path, &id, &patch).await {
            Ok(_) => done.push(what),
            Err(e) if e.code() == Some(404) => anyhow::bail!("The peering {what} was not found (create it, or apply deploy/peering.yaml)."),
            Err(e) => return Err(e).with_context(|| format!("cannot write to the peering {what}")),
        }
    }
    Ok((id, done))
}

/// `bosun freeze`.
pub async fn freeze(args: FreezeArgs) -> anyhow::Result<()> {
    let lifetime = Duration::from_secs(args.lifetime.max(1));
    let (id, done) = touch(&args.peering, args.priority, lifetime).await?;
    for what in done {
        println!("Froze the controllers of {what} below priority {} for {}s (as {id}).", args.priority, lifetime.as_secs());
    }
    Ok(())
}

/// `bosun resume`.
pub async fn resume(args: ResumeArgs) -> anyhow::Result<()> {
    let (id, done) = touch(&args.peering, 0, Duration::ZERO).await?;
    for what in done {
        println!("Removed the freeze of {id} from {what}.");
    }
    Ok(())
}

/// `bosun shards`.
pub async fn shards(args: ShardsArgs) -> anyhow::Result<()> {
    let cluster = Cluster::new(args.cluster.client().await?);
    let namespace = args.lease_namespace.clone().unwrap_or_else(default_lease_namespace);
    let list = cluster.get(&lease::group_path(&namespace, &args.lease_name)).await.context("cannot list the shard group's Leases")?;
    let items = list["items"].as_array().cloned().unwrap_or_default();
    let now = chrono::Utc::now();
    let members = shards::members_by_wall(&items, now);
    let mut counts: Vec<(String, std::collections::BTreeMap<String, usize>)> = Vec::new();
    for name in &args.resources {
        let sel = bosun_proto::v1::ResourceSelector { name: name.clone(), ..Default::default() };
        let resource =
            discovery::resolve(&cluster as &dyn Api, &sel).await?.with_context(|| format!("no resource '{name}' on the API server"))?;
        let scope = WatchScope { namespace: None, label_selector: None, inactivity_timeout: Duration::from_secs(60) };
        let mut uids = Vec::new();
        list_all(&cluster, &resource, &scope, |seen: Seen| {
            if let Some(uid) = object::meta(seen.body(), "uid").and_then(Value::as_str) {
                uids.push(uid.to_string());
            }
        })
        .await?;
        counts.push((resource.plural.clone(), shards::counts(&members, uids.iter().map(String::as_str))));
    }
    println!("Shard group '{}' in {namespace}: {} live member(s).", args.lease_name, members.len());
    let mut header = format!("{:<48} {:<28} {:>8}", "MEMBER", "LEASE", "RENEWED");
    for (plural, _) in &counts {
        header.push_str(&format!(" {plural:>14}"));
    }
    println!("{header}");
    for item in &items {
        let record = lease::Record::parse(item);
        let holder = record.holder.clone().unwrap_or_else(|| "(released)".into());
        let name = object::meta_str(item, "name");
        let age = record.renewed.map(|t| format!("{}s ago", (now - t).num_seconds().max(0))).unwrap_or_else(|| "never".into());
        let state = if record.is_held(now) { "" } else { " (expired)" };
        let mut row = format!("{:<48} {:<28} {:>8}", format!("{holder}{state}"), name, age);
        for (_, c) in &counts {
            row.push_str(&format!(" {:>14}", c.get(&holder).copied().unwrap_or(0)));
        }
        println!("{row}");
    }
    Ok(())
}
