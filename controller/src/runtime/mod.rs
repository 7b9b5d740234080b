//! The orchestration: connect to the handler servers, learn their handlers, resolve and
//! watch each resource (independently: a missing CRD holds up nobody else), route events
//! to per-object workers, and stop gracefully.

pub mod activities;
pub mod background;
pub mod context;
pub mod cycle;
pub mod daemons;
pub mod gate;
pub mod indexing;
pub mod namespaces;
pub mod owned;
pub mod queues;
mod relist;
mod resolving;
mod resource;
mod served;
pub mod servers;
pub mod spies;
pub mod timers;
pub mod worker;
pub mod worker_state;
pub mod writes;

use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;

use crate::cluster::Cluster;
use crate::coordination::{Authority, Coordinator, Ownership, Replicas, identity, peering};
use crate::endpoints::admission::Admission;
use crate::handlers::dispatch::{HandlerClient, Server, Servers};
use crate::logs::Logger;
use crate::state::registry::{self, Handler};
use crate::{Error, Namespaces, Settings};
use bosun_proto::v1 as pb;
use served::Served;

/// Runs the controller until `shutdown` resolves.
pub async fn run(client: kube::Client, mut settings: Settings, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<(), Error> {
    let log = Logger::new(settings.log_sink.clone());
    if settings.handlers.is_empty() {
        return Err(Error::NoHandlers);
    }
    // Served from the start: /healthz answers while the handler servers are awaited, /readyz
    // once every watch has listed.
    // `_metrics_stop` is dropped when `run` returns: the endpoint stops then.
    let (_metrics_stop, metrics_stopped) = tokio::sync::oneshot::channel::<()>();
    if let Some(addr) = &settings.metrics_listen {
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(|error| Error::MetricsListen { addr: addr.clone(), error })?;
        let local = listener.local_addr().map(|a| a.to_string()).unwrap_or_else(|_| addr.clone());
        log.info(None, &format!("Serving metrics at http://{local}/metrics (and /healthz, /readyz)."));
        tokio::spawn(crate::metrics::serve(listener, async move {
            let _ = metrics_stopped.await;
        }));
    }
    crate::metrics::global().set_ready(false);
    let servers: Vec<Arc<Server>> = settings.handlers.iter().map(|a| Server::new(a).map(Arc::new)).collect::<Result<_, _>>()?;
    let mut shutdown = Box::pin(shutdown);

    // Wait for every handler server, then ask each for its handlers.
    let ready = futures::future::join_all(servers.iter().map(|s| s.wait_ready(&log)));
    tokio::select! {
        _ = ready => {}
        _ = &mut shutdown => return Ok(()),
    }
    let mut described = Vec::new();
    for s in &servers {
        let d = s.describe().await?;
        log.info(None, &format!("Handler server {} registered {} handler(s).", s.addr, d.handlers.len()));
        described.push(d);
    }
    let mut handlers = registry::build(&described)?;
    let clients: Servers = Arc::new(servers.iter().map(|s| s.clone() as Arc<dyn HandlerClient>).collect());
    let startups = of_kind(&handlers, pb::HandlerKind::Startup);
    let probes = of_kind(&handlers, pb::HandlerKind::Probe);
    let mut cleanups = of_kind(&handlers, pb::HandlerKind::Cleanup);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    if let Some(url) = &settings.liveness {
        let (addr, path) = crate::endpoints::liveness::parse_url(url)?;
        let listener = tokio::net::TcpListener::bind(&addr).await.map_err(|error| Error::LivenessListen { addr: addr.clone(), error })?;
        let mut stopped = stop_rx.clone();
        let until = async move {
            let _ = stopped.wait_for(|s| *s).await;
        };
        log.info(None, &format!("Serving the liveness endpoint at {url} with {} probe(s).", probes.len()));
        tokio::spawn(crate::endpoints::liveness::serve(listener, path, probes, clients.clone(), until));
    }
    let startup_refs: Vec<&Handler> = startups.iter().collect();
    let chosen = tokio::select! {
        r = activities::startup(&startup_refs, &clients, &log) => r?,
        _ = &mut shutdown => return Ok(()),
    };
    // What the servers hold (in order) and the startup handlers set (theirs win) applies before
    // anything peers, serves or watches.
    let held = servers::held_settings(&settings.handlers, &described);
    let mut sources: Vec<(&str, &pb::OperatorSettings)> = held.iter().map(|(from, s)| (from.as_str(), s)).collect();
    sources.push((crate::settings::from_servers::STARTUP, &chosen));
    log.lines(None, &crate::settings::from_servers::apply(&mut settings, &sources));

    // Who handles what: settled before the first watch, so nothing is handled that is not ours.
    let cluster = Cluster::new(client);
    let authority = Authority::new(match settings.replicas {
        Replicas::Each => Ownership::All,
        _ => Ownership::Nothing,
    });
    let identity = identity::of(settings.identity.as_deref(), settings.replicas != Replicas::Each);
    let peering = (!settings.standalone).then(|| {
        let family = if settings.kopf_compat { peering::Family::Kopf } else { peering::Family::Bosun };
        (&settings.peering, family, peering_scopes(&settings.namespaces))
    });
    let coordinator = tokio::select! {
        c = Coordinator::start(&cluster, &identity, peering, &settings.replicas, &authority, &log, settings.clock) => c.map_err(Box::new)?,
        _ = &mut shutdown => return Ok(()),
    };

    let outages = Arc::new(crate::handlers::dispatch::Outages::default());
    let (described_tx, mut described_rx) = tokio::sync::mpsc::unbounded_channel();
    for (index, server) in servers.iter().enumerate() {
        let monitor =
            servers::Monitor { index, server: server.clone(), outages: outages.clone(), log: log.clone(), described: described_tx.clone() };
        tokio::spawn(monitor.run(stop_rx.clone()));
    }
    // Admission webhooks: served (and configured) from when the first admission handler is
    // registered, or from the start with an explicit listen address.
    let mut admission = None;
    if settings.admission.listen.is_some() || handlers.iter().any(Handler::is_admission) {
        let started = tokio::select! {
            a = start_admission(&cluster, &settings, &clients, &log, &stop_rx) => a?,
            _ = &mut shutdown => return Ok(()),
        };
        started.apply(&handlers).await;
        admission = Some(started);
    }
    let mut served = Served::new(cluster, authority.clone(), clients.clone(), outages.clone(), log.clone(), settings.clone());
    served.apply(handlers.clone(), &described, None).await;
    crate::metrics::global().set_ready(true);

    // Until the stop: a handler server that reconnects is described again; a changed
    // registry is applied without a restart (only the resources whose handlers changed are
    // served anew). Its settings are not: they are said once to be applied at start only.
    // A spelling of a resource that resolves late joins the handlers of its resource.
    let mut settings_noted = HashSet::new();
    loop {
        let again = tokio::select! {
            _ = &mut shutdown => break,
            found = served.found() => {
                served.resolved(found).await;
                continue;
            }
            d = described_rx.recv() => d,
        };
        let Some(servers::Described { server, response, was_lost }) = again else { break };
        let addr = &settings.handlers[server];
        if was_lost {
            log.info(None, &format!("Handler server {addr} is serving again."));
        }
        if described[server].settings != response.settings && settings_noted.insert(server) {
            log.warn(
                None,
                &format!("Handler server {addr} holds other settings now; settings are applied at start only, so they are not."),
            );
        }
        // Its indices are in its memory: a server that comes back lost them.
        let reindex = response.handlers.iter().any(|h| h.kind == pb::HandlerKind::Index as i32).then_some(server);
        if servers::same_handlers(&described[server], &response) {
            log.info(None, &format!("Handler server {addr} has the same {} handler(s) as before.", response.handlers.len()));
            if reindex.is_some() {
                served.apply(handlers.clone(), &described, reindex).await;
            }
        } else {
            let mut next = described.clone();
            next[server] = response;
            match registry::build(&next) {
                Ok(built) => {
                    log.info(
                        None,
                        &format!(
                            "Handler server {addr} registered {} handler(s) now; applying the new registry.",
                            next[server].handlers.len()
                        ),
                    );
                    cleanups = of_kind(&built, pb::HandlerKind::Cleanup);
                    (handlers, described) = (built, next);
                    served.apply(handlers.clone(), &described, reindex).await;
                    if admission.is_none() && handlers.iter().any(Handler::is_admission) {
                        match start_admission(served.cluster(), &settings, &clients, &log, &stop_rx).await {
                            Ok(started) => admission = Some(started),
                            Err(e) => log.error(None, &format!("The admission handlers are not served: {e}")),
                        }
                    }
                    if let Some(admission) = &admission {
                        admission.apply(&handlers).await;
                    }
                }
                Err(e) => log.error(None, &format!("The new handlers of handler server {addr} are refused: {e}; the previous ones stay.")),
            }
        }
        // Only now, with its handlers in place, do the objects that waited for it go on.
        if let Some(n) = outages.up(addr)
            && n > 0
        {
            log.info(None, &format!("{n} object(s) waited for handler server {addr}; they go on now."));
        }
    }

    log.info(None, "Stop is requested; finishing the cycles in flight.");
    let _ = stop_tx.send(true);
    served.stop_all().await;
    // The webhook configurations are shared: they go only when no other replica is left, which
    // is told once this one's own peering records and Leases are gone.
    let roster = coordinator.roster();
    coordinator.stop().await;
    if let Some(admission) = &admission {
        admission.stop(&roster).await;
    }
    activities::cleanup(&cleanups.iter().collect::<Vec<_>>(), &clients, &log).await;
    log.info(None, "The controller has stopped.");
    Ok(())
}

/// Starts serving the admission webhooks. Replicas that share objects run side by side: with
/// a self-signed certificate each would make a CA of its own and publish it over the others'
/// in the same configurations, which is said.
async fn start_admission(
    cluster: &Cluster,
    settings: &Settings,
    servers: &Servers,
    log: &Logger,
    stop: &tokio::sync::watch::Receiver<bool>,
) -> Result<Arc<Admission>, crate::endpoints::webhooks::Error> {
    let started = Admission::start(cluster.clone(), settings.admission.clone(), servers.clone(), log.clone(), stop.clone()).await?;
    let shared = !matches!(settings.replicas, Replicas::Each);
    if shared && settings.admission.manage && settings.admission.certificate == crate::endpoints::webhooks::Certificate::SelfSigned {
        log.warn(
            None,
            "Each replica makes a CA of its own for the admission webhooks, and they overwrite each other's caBundle: with more than one replica give --admission-cert and --admission-key (cert-manager's Secret).",
        );
    }
    Ok(started)
}

/// Where peering objects are: one per namespace when only plain namespaces are served (Kopf's
/// `KopfPeering`), else one cluster-wide (`ClusterKopfPeering`).
fn peering_scopes(namespaces: &Namespaces) -> Vec<Option<String>> {
    match namespaces {
        Namespaces::Patterns(p) if namespaces::plain_names(p) => p.iter().map(|ns| Some(ns.clone())).collect(),
        _ => vec![None],
    }
}

/// The handlers of one kind, in registration order.
fn of_kind(handlers: &[Handler], kind: pb::HandlerKind) -> Vec<Handler> {
    handlers.iter().filter(|h| h.kind == kind).cloned().collect()
}

#[cfg(test)]
mod tests;
