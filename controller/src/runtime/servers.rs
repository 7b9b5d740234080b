//! The handler servers' connections, watched for as long as the controller runs.
//!
//! Each server's `grpc.health.v1` Check is asked once a second. A failed check starts an
//! outage, logged once. Whenever the channel opens a new connection (a restarted server is
//! always a new connection, however quick the restart) or the server is SERVING after an
//! outage, it is asked for its handlers again (a restarted server may bring new ones: this is
//! the edit-and-restart loop of `bosun dev`); the answer goes to the runtime, which applies a
//! changed registry, and the objects that waited for the server are woken at once.
//!
//! Polling rather than holding a health Watch stream open: an open stream would keep the
//! handler server's graceful shutdown waiting for the controller.

use std::sync::Arc;
use std::time::Duration;

use bosun_proto::v1 as pb;
use tokio::sync::{mpsc, watch};

use crate::handlers::dispatch::{Outages, Server};
use crate::logs::Logger;
use tonic_health::pb::health_check_response::ServingStatus;

/// A server's answer to Describe after it (re)connected.
#[derive(Debug)]
pub struct Described {
    /// The server's index (`Handler::server`).
    pub server: usize,
    /// Its answer.
    pub response: pb::DescribeResponse,
    /// It was lost before: once its handlers are applied, the objects waiting for it go on
    /// (`Outages::up`).
    pub was_lost: bool,
}

/// The operator settings each server holds when described, named as the log names their
/// source, servers in order (`addrs`: their addresses, as `described`).
pub fn held_settings(addrs: &[String], described: &[pb::DescribeResponse]) -> Vec<(String, pb::OperatorSettings)> {
    addrs
        .iter()
        .zip(described)
        .filter_map(|(addr, d)| Some((crate::settings::from_servers::from_server(addr), d.settings.clone()?)))
        .collect()
}

/// Whether two answers of a server to Describe register the same handlers. Their settings
/// aside (those apply at start only), and the server's name, which may name its process
/// (the Python SDK's `python:<pid>@<host>`), and how it takes Handle calls: a restarted server
/// is not a new registry.
pub fn same_handlers(before: &pb::DescribeResponse, now: &pb::DescribeResponse) -> bool {
    let handlers =
        |d: &pb::DescribeResponse| pb::DescribeResponse { settings: None, server_name: String::new(), handle_stream: false, ..d.clone() };
    handlers(before) == handlers(now)
}

/// How often each server's health is checked.
const POLL: Duration = Duration::from_secs(1);

/// Watches one handler server for as long as the controller runs.
pub struct Monitor {
    /// The server's index (`Handler::server`).
    pub index: usize,
    /// The server.
    pub server: Arc<Server>,
    /// Where its outages are noted.
    pub outages: Arc<Outages>,
    /// The log.
    pub log: Logger,
    /// Where its answers to Describe go.
    pub described: mpsc::UnboundedSender<Described>,
}

impl Monitor {
    /// Notes a loss; `connected`: connected and described since the last loss.
    fn lost(&self, connected: &mut bool, why: &str) {
        if std::mem::take(connected) {
            self.outages.lost(&self.server.addr);
            self.log.warn(
                None,
                &format!(
                    "Lost the connection to handler server {} ({why}); the objects that need it wait until it is back.",
                    self.server.addr
                ),
            );
        }
    }

    /// The server says SERVING: describe it again if it was lost or is newly connected.
    async fn serving(&self, connected: &mut bool, reconnected: bool) {
        if *connected && !reconnected {
            return;
        }
        match self.server.describe().await {
            Ok(response) => {
                let was_lost = !std::mem::replace(connected, true);
                if !was_lost {
                    self.log.info(None, &format!("Handler server {} reconnected.", self.server.addr));
                }
                let _ = self.described.send(Described { server: self.index, response, was_lost });
            }
            Err(e) => self.lost(connected, &e.to_string()),
        }
    }

    /// Watches the server until `stop`; it was just seen SERVING and described.
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut connected = true;
        let mut connections = self.server.connections();
        connections.borrow_and_update();
        loop {
            tokio::select! {
                _ = stop.wait_for(|s| *s) => return,
                _ = tokio::time::sleep(POLL) => {}
            }
            let answer = tokio::select! {
                _ = stop.wait_for(|s| *s) => return,
                a = self.server.health_check() => a,
            };
            // Connections opened since the last look, by this check or by any call.
            let reconnected = connections.has_changed().unwrap_or(false);
            connections.borrow_and_update();
            match answer {
                Ok(ServingStatus::Serving) => self.serving(&mut connected, reconnected).await,
                Ok(_) => self.lost(&mut connected, "it is not serving"),
                Err(s) => self.lost(&mut connected, s.message()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restarted_server_with_the_same_handlers_under_another_name_or_settings_has_the_same_handlers() {
        let spec = |id: &str| pb::HandlerSpec { id: id.into(), ..Default::default() };
        let described = |name: &str, ids: &[&str], workers: u32| pb::DescribeResponse {
            handlers: ids.iter().map(|id| spec(id)).collect(),
            server_name: name.into(),
            settings: Some(pb::OperatorSettings { max_workers: Some(workers), ..Default::default() }),
            ..Default::default()
        };
        let before = described("python:100@host", &["a"], 1);
        assert!(same_handlers(&before, &described("python:200@host", &["a"], 2)));
        assert!(!same_handlers(&before, &described("python:100@host", &["a", "b"], 1)));
    }
}
