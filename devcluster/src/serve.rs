//! The accept loop: each connection (plain, or TLS when `--tls`) is served by hyper with
//! HTTP/1.1 and HTTP/2, and all of them are drained when the server stops.

use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

/// A TLS handshake that has not finished after this long is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serve `app` on `listener` until `stop` turns true.
pub async fn serve(listener: TcpListener, app: axum::Router, tls: Option<TlsAcceptor>, mut stop: watch::Receiver<bool>) {
    let graceful = GracefulShutdown::new();
    let builder = auto::Builder::new(TokioExecutor::new());
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.wait_for(|s| *s) => break,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(e) => {
                // Out of file descriptors and the like: the listener itself is fine.
                tracing::warn!("cannot accept a connection: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let (builder, watcher) = (builder.clone(), graceful.watcher());
        match tls.clone() {
            None => {
                let conn = builder.serve_connection_with_upgrades(TokioIo::new(tcp), service).into_owned();
                tokio::spawn(watcher.watch(conn));
            }
            Some(acceptor) => {
                tokio::spawn(async move {
                    let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(stream)) => stream,
                        Ok(Err(e)) => return tracing::debug!("TLS handshake failed: {e}"),
                        Err(_) => return tracing::debug!("TLS handshake timed out"),
                    };
                    let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), service).into_owned();
                    let _ = watcher.watch(conn).await;
                });
            }
        }
    }
    graceful.shutdown().await;
}
