//! `bosun dev`: the development loop with no cluster around. Starts the embedded dev cluster
//! (data kept in `.bosun/`, so objects and their handling state survive restarts), writes its
//! kubeconfig, applies manifests, starts the handler server command as a supervised child
//! ([`crate::supervise`]), and runs the controller until Ctrl-C.

use anyhow::Context as _;
use bosun_controller::cluster::{Cluster, apply};
use bosun_controller::logs::Logger;

use crate::args::DevArgs;
use crate::supervise;
use crate::supervise::stop_signal;

/// Runs `bosun dev`.
pub async fn dev(args: DevArgs) -> anyhow::Result<()> {
    let stop = stop_signal().context("cannot install the SIGINT and SIGTERM handlers")?;
    let command = args.server.command(args.controller.log.debugging())?;
    let log = Logger::new(None);
    let mut settings = args.controller.settings();
    // On a real cluster, the developer's controller takes over from the deployed ones of the
    // same peering (they pause until it stops), unless a priority is given.
    if args.controller.names_a_cluster() && args.controller.priority.is_none() && !args.controller.dev {
        settings.peering.priority = bosun_controller::coordination::peering::DEV_PRIORITY;
    }
    // The handler server child gets the same cluster in KUBECONFIG, for handlers that keep a
    // client of their own (Kopf's example 10 deletes Pods with one).
    let mut child_cluster = args.controller.cluster.for_child()?;
    let (client, devcluster) = if args.controller.names_a_cluster() {
        (args.controller.client().await?, None)
    } else {
        std::fs::create_dir_all(&args.dir).with_context(|| format!("cannot create {}", args.dir.display()))?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let config = bosun_devcluster::Config { data_dir: Some(args.dir.join("data")), tls: args.tls, ..Default::default() };
        let cluster = bosun_devcluster::DevCluster::start(listener, config).await.context("the dev cluster did not start")?;
        let kubeconfig = std::path::absolute(args.dir.join("kubeconfig"))?;
        cluster.write_kubeconfig(&kubeconfig)?;
        child_cluster = crate::supervise::ChildCluster { kubeconfig: Some(kubeconfig.clone()), context: None };
        log.info(None, &format!("Dev cluster is serving on {}.", cluster.url()));
        // With --print-rbac, stdout is the YAML alone.
        if args.print_rbac {
            eprintln!("export KUBECONFIG={}", kubeconfig.display());
        } else {
            println!("export KUBECONFIG={}", kubeconfig.display());
        }
        // The embedded cluster outlives no controller: webhooks left configured for a port
        // nobody serves would refuse the next run's `--apply`.
        settings.admission.cleanup = true;
        let networking = args.controller.cluster.networking();
        (bosun_controller::cluster::client::build(cluster.kube_config(), &networking)?, Some(cluster))
    };

    let cluster = Cluster::new(client.clone());
    if devcluster.is_none() {
        // A cluster others use: a `bosun dev` killed before it removed its webhooks must not
        // block their writes, so they fail open (`admission::Setup::dev`), and are removed on
        // every exit this process sees and by the next run.
        (settings.admission.dev, settings.admission.cleanup) = (true, true);
    }
    remove_left_webhooks(&cluster, &settings.admission.configuration, devcluster.is_some(), &log).await;
    for path in &args.apply {
        for line in apply::apply_path(&cluster, path).await? {
            log.info(None, &format!("Applied {line}"));
        }
    }

    if args.cluster_only {
        let Some(cluster) = devcluster else {
            anyhow::bail!("--cluster-only runs the embedded dev cluster: it takes no --kubeconfig or --context")
        };
        log.info(None, "Serving the dev cluster only (--cluster-only) until Ctrl-C.");
        stop.await;
        cluster.shutdown().await;
        return Ok(());
    }
    let child = command.map(|command| supervise::start(command, &mut settings, child_cluster)).transpose()?;
    if settings.handlers.is_empty() {
        anyhow::bail!(bosun_controller::Error::NoHandlers);
    }
    if args.print_rbac {
        use bosun_controller::rbac::servers::{DEFAULT_SERVICE_ACCOUNT, Output, render};
        let output = Output { name: "bosun".into(), service_account: DEFAULT_SERVICE_ACCOUNT.into(), owns: Vec::new() };
        let printed = render(&cluster, &settings, &output).await;
        eprintln!(
            "bosun dev --print-rbac: the bindings are for the service account {DEFAULT_SERVICE_ACCOUNT}; `bosun rbac --service-account NAMESPACE/NAME` names another."
        );
        if let Some(child) = child {
            child.stop().await;
        }
        if let Some(cluster) = devcluster {
            cluster.shutdown().await;
        }
        print!("{}", printed?);
        return Ok(());
    }
    let result = bosun_controller::run(client, settings, stop).await;
    if let Some(child) = child {
        child.stop().await;
    }
    if let Some(cluster) = devcluster {
        cluster.shutdown().await;
    }
    result.map_err(Into::into)
}

/// Removes the webhook configurations a `bosun dev` that was killed left: they name a port
/// nobody serves now (and would refuse the manifests applied next, when fail-closed). The
/// controller configures them again once it serves. On the embedded cluster every one of that
/// name is a dev run's; on another, only those labelled so (not the deployed controller's).
async fn remove_left_webhooks(cluster: &Cluster, name: &str, embedded: bool, log: &Logger) {
    use bosun_controller::state::admission::{configuration_path, is_dev_run};
    for mutating in [false, true] {
        let path = configuration_path(name, mutating);
        if !embedded {
            match cluster.get(&path).await {
                Ok(found) if is_dev_run(&found) => {}
                Ok(_) => continue,
                Err(e) if e.code() == Some(404) => continue,
                Err(e) => {
                    log.warn(None, &format!("Cannot tell whether {path} is an earlier bosun dev's: {e}"));
                    continue;
                }
            }
        }
        if cluster.call(http::Method::DELETE, &path, None, None).await.is_ok() {
            log.info(None, &format!("Removed the admission webhook configuration left at {path}."));
        }
    }
}
