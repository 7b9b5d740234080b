//! `bosun dev`: the development loop with no cluster around. Starts the embedded dev cluster
//! (data kept in `.bosun/`, so objects and their handling state survive restarts), writes its
//! kubeconfig, applies manifests, starts the handler server command as a supervised child
//! (restarted with backoff, output prefixed), and runs the controller until Ctrl-C.

use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::cli::{DevArgs, stop_signal};
use crate::cluster::{Cluster, apply};
use crate::logs::Logger;

/// Runs `bosun dev`.
pub async fn dev(args: DevArgs) -> anyhow::Result<()> {
    let log = Logger::new(None);
    let mut settings = args.controller.settings();
    // The handler server child gets the same cluster in KUBECONFIG, for handlers that keep a
    // client of their own (Kopf's example 10 deletes Pods with one).
    let mut child_kubeconfig = args.controller.kubeconfig.clone().map(std::path::absolute).transpose()?;
    let (client, devcluster) = if args.controller.names_a_cluster() {
        (args.controller.client().await?, None)
    } else {
        std::fs::create_dir_all(&args.dir).with_context(|| format!("cannot create {}", args.dir.display()))?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let config = bosun_devcluster::Config { data_dir: Some(args.dir.join("data")), ..Default::default() };
        let cluster = bosun_devcluster::DevCluster::start(listener, config).await.context("the dev cluster did not start")?;
        let kubeconfig = std::path::absolute(args.dir.join("kubeconfig"))?;
        cluster.write_kubeconfig(&kubeconfig)?;
        child_kubeconfig = Some(kubeconfig.clone());
        log.info(None, &format!("Dev cluster is serving on {}.", cluster.url()));
        println!("export KUBECONFIG={}", kubeconfig.display());
        (cluster.client(), Some(cluster))
    };

    let cluster = Cluster::new(client.clone());
    for path in &args.apply {
        for line in apply::apply_path(&cluster, path).await? {
            log.info(None, &format!("Applied {line}"));
        }
    }

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut child = None;
    if !args.command.is_empty() {
        let port = free_port()?;
        let listen = format!("127.0.0.1:{port}");
        settings.handlers.push(format!("http://{listen}"));
        child = Some(tokio::spawn(supervise(args.command.clone(), listen, child_kubeconfig, log.clone(), stop_rx.clone())));
    }
    if settings.handlers.is_empty() {
        anyhow::bail!(crate::Error::NoHandlers);
    }
    let result = crate::run(client, settings, stop_signal()).await;
    let _ = stop_tx.send(true);
    if let Some(child) = child {
        let _ = child.await;
    }
    if let Some(cluster) = devcluster {
        cluster.shutdown().await;
    }
    result.map_err(Into::into)
}

fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Keeps the handler server command running until `stop`, restarting it with backoff.
async fn supervise(
    command: Vec<String>,
    listen: String,
    kubeconfig: Option<std::path::PathBuf>,
    log: Logger,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut delay = Duration::from_secs(1);
    loop {
        log.info(None, &format!("Starting the handler server: {} (BOSUN_LISTEN={listen})", command.join(" ")));
        let mut cmd = tokio::process::Command::new(&command[0]);
        if let Some(k) = &kubeconfig {
            cmd.env("KUBECONFIG", k);
        }
        let spawned = cmd
            .args(&command[1..])
            .env("BOSUN_LISTEN", &listen)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn();
        let started = Instant::now();
        match spawned {
            Err(e) => log.error(None, &format!("The handler server command could not start: {e}")),
            Ok(mut child) => {
                if let Some(out) = child.stdout.take() {
                    tokio::spawn(prefix_lines(out));
                }
                if let Some(err) = child.stderr.take() {
                    tokio::spawn(prefix_lines(err));
                }
                tokio::select! {
                    status = child.wait() => {
                        let status = status.map(|s| s.to_string()).unwrap_or_else(|e| e.to_string());
                        log.warn(None, &format!("The handler server exited ({status}); restarting it in {delay:?}."));
                    }
                    _ = stop.changed() => {
                        terminate(&mut child).await;
                        return;
                    }
                }
            }
        }
        if started.elapsed() > Duration::from_secs(30) {
            delay = Duration::from_secs(1);
        }
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(Duration::from_secs(30));
    }
}

async fn terminate(child: &mut tokio::process::Child) {
    if let Some(pid) = child.id() {
        let _ = std::process::Command::new("kill").arg("-TERM").arg(pid.to_string()).status();
        if tokio::time::timeout(Duration::from_secs(5), child.wait()).await.is_ok() {
            return;
        }
    }
    let _ = child.kill().await;
}

async fn prefix_lines(stream: impl tokio::io::AsyncRead + Unpin) {
    let mut lines = BufReader::new(stream).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        eprintln!("[handler] {line}");
    }
}
