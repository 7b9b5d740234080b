//! `bosun-devcluster`: run the in-memory Kubernetes API server on loopback.

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;

/// An in-memory Kubernetes API server for development and tests.
#[derive(Parser)]
#[command(name = "bosun-devcluster", version)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:0", env = "BOSUN_DEVCLUSTER_LISTEN")]
    listen: String,
    /// Where to write the kubeconfig once the server is ready.
    #[arg(long, env = "BOSUN_DEVCLUSTER_KUBECONFIG")]
    kubeconfig: PathBuf,
    /// Require this bearer token.
    #[arg(long, env = "BOSUN_DEVCLUSTER_TOKEN")]
    token: Option<String>,
    /// Keep objects in this directory across restarts.
    #[arg(long, env = "BOSUN_DEVCLUSTER_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Serve HTTPS with a generated CA and serving certificate (kept in the data dir); the
    /// kubeconfig carries the CA, and kubectl then sends `--token`.
    #[arg(long, env = "BOSUN_DEVCLUSTER_TLS")]
    tls: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::from_default_env()).with_writer(std::io::stderr).init();
    let args = Args::parse();
    let listener = tokio::net::TcpListener::bind(&args.listen).await.with_context(|| format!("cannot listen on {}", args.listen))?;
    let config = bosun_devcluster::Config { token: args.token, data_dir: args.data_dir, tls: args.tls, ..Default::default() };
    let cluster = bosun_devcluster::DevCluster::start(listener, config).await?;
    cluster.write_kubeconfig(&args.kubeconfig).with_context(|| format!("cannot write {}", args.kubeconfig.display()))?;
    println!("listening on {}", cluster.url());
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    cluster.shutdown().await;
    Ok(())
}
