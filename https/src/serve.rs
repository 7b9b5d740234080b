//! The accept loop: HTTP/1.1 and HTTP/2 on the caller's listener, plain or TLS (`--tls`,
//! HTTP/2 by ALPN), with the limits a real API server's Go `http.Server` has and an
//! open-ended loop lacks: a client must send a request's headers within a time
//! (`ReadHeaderTimeout`), a kept-alive HTTP/1.1 connection waiting for its next request is
//! closed after that time too, a TLS handshake must finish in time, and at most so many
//! connections are served at once (the next ones wait in the listen backlog). axum's own
//! `serve` has none of these and no TLS.

use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio_rustls::TlsAcceptor;

/// Limits of the connections served.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Time to send a request's headers, from when the server waits for them: a new
    /// connection, or a kept-alive one after its last answer. Also the time a TLS handshake
    /// may take.
    pub header_read_timeout: Duration,
    /// Connections served at once.
    pub max_connections: usize,
}

/// Serve `app` on `listener` (over TLS with `tls`) until `stop` turns true, then let open
/// connections finish gracefully (watches end on the same signal).
pub async fn serve(listener: TcpListener, app: axum::Router, tls: Option<TlsAcceptor>, limits: Limits, mut stop: watch::Receiver<bool>) {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let mut builder = Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout);
    loop {
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => break, // never closed
            },
            () = stopped(&mut stop) => break,
        };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = stopped(&mut stop) => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // out of file descriptors and the like: wait for connections to close
                tracing::warn!("cannot accept a connection: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        match tls.clone() {
            None => {
                let connection = graceful.watch(builder.serve_connection_with_upgrades(TokioIo::new(stream), service).into_owned());
                tokio::spawn(async move {
                    // a client that goes away or stalls ends its connection, never the server
                    let _ = connection.await;
                    drop(permit);
                });
            }
            Some(acceptor) => {
                let (builder, watcher) = (builder.clone(), graceful.watcher());
                tokio::spawn(async move {
                    let stream = match tokio::time::timeout(limits.header_read_timeout, acceptor.accept(stream)).await {
                        Ok(Ok(stream)) => stream,
                        Ok(Err(e)) => return tracing::debug!("TLS handshake failed: {e}"),
                        Err(_) => return tracing::debug!("TLS handshake timed out"),
                    };
                    let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service).into_owned();
                    let _ = watcher.watch(connection).await;
                    drop(permit);
                });
            }
        }
    }
    graceful.shutdown().await;
}

/// Resolves once `stop` is true.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}
