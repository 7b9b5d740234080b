//! Many controllers, one cluster: which objects this controller may handle now.
//!
//! Three things decide it, each in its own module, each a pure decision with a small loop
//! around it: [`peering`] (Kopf's: pause while a peer of higher priority is alive, as a
//! developer's `--dev` controller or `bosun freeze` asks), [`leader`] (one Lease, one leader:
//! followers keep their watches warm) and [`shards`] (a Lease per replica, objects spread over
//! the live replicas by the consistent hashing of [`ring`]). They write their verdicts into
//! the one [`Authority`] the runtime asks before every cycle, timer and daemon.
//!
//! The runtime keeps watching whatever the verdict: a paused controller resumes at once, and
//! when its share grows it lists the resource again ([`Generation::gained`]) so the objects
//! it takes over get their cycle, timers and daemons. A handover is never a double-handling:
//! a cycle starts only through [`Authority::begin`], which refuses objects no longer owned,
//! and [`Authority::settled`] tells when the cycles of the objects given away have ended.
//!
//! Under faults, ownership is fenced by time, never by the API's answers: a leader or shard
//! member stops handling — [`Authority::revoke`], every turn in flight told to end — at its
//! renew deadline after it *sent* its last successful renewal, by a local timer that every
//! request races against, while the others wait a whole lease duration from when they
//! *observed* its last change ([`lease`]). Only the clocks' rates must agree, not their times.
//! Peering fences itself the same way when its own keepalive cannot be written.

mod authority;
mod drain;
pub mod identity;
pub mod keepalive;
pub mod leader;
pub mod lease;
pub mod peering;
pub mod ring;
pub mod roster;
pub mod shards;

#[cfg(test)]
mod hostile_tests;
#[cfg(test)]
mod leases_tests;
#[cfg(test)]
mod paths_tests;
#[cfg(test)]
mod peering_tests;

use std::sync::Arc;

use tokio::sync::watch;

pub use authority::{Authority, Claims, Generation, Ownership, Turn};
pub use lease::{LeaseSetup, Replicas};

/// How this controller takes part in peering (none: standalone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeeringSetup {
    /// The peering object's name (`default` unless `--peering`).
    pub name: String,
    /// Whether it must exist (`--peering NAME` given).
    pub mandatory: bool,
    /// Our priority (`--priority`, 666 with `--dev`).
    pub priority: i64,
    /// How long our record counts after each keepalive.
    pub lifetime: std::time::Duration,
}

impl Default for PeeringSetup {
    fn default() -> Self {
        PeeringSetup { name: "default".into(), mandatory: false, priority: 0, lifetime: peering::LIFETIME }
    }
}

/// How long one coordination request may take: 5 s, or a third of a Lease's duration when
/// that is shorter, so that a hung request is retried within the renew deadline. (Ownership
/// does not wait for it: a local timer drops it at the renew deadline whatever the request
/// is doing; see [`lease::Tenure`].)
fn attempt_limit(replicas: &Replicas) -> std::time::Duration {
    let most = std::time::Duration::from_secs(5);
    match replicas {
        Replicas::Each => most,
        Replicas::LeaderElection(l) | Replicas::Shards(l) => most.min(lease::Timing::new(l.duration).duration / 3),
    }
}

/// Why coordination could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Peering could not start.
    #[error(transparent)]
    Peering(#[from] keepalive::Error),
}

/// The loops that keep the verdict current; stopped after the controller's cycles have ended
/// (then peering records are removed and Leases released).
pub struct Coordinator {
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    roster: roster::Roster,
}

impl Coordinator {
    /// Starts peering in each of `peering_scopes` (none: cluster-wide) and the replicas' Lease
    /// loop, reading wall time from `clock`; returns once the first verdict is in, so that no
    /// object is handled before.
    pub async fn start(
        cluster: &crate::cluster::Cluster,
        identity: &str,
        peering: Option<(&PeeringSetup, peering::Family, Vec<Option<String>>)>,
        replicas: &Replicas,
        authority: &Authority,
        log: &crate::logs::Logger,
        clock: crate::clock::Clock,
    ) -> Result<Coordinator, Error> {
        let (stop, stop_rx) = watch::channel(false);
        let mut tasks = Vec::new();
        // Coordination must see answers promptly: no long retries of server errors here, no
        // queueing behind the objects' writes, and an attempt ends well within a renewal.
        let api: Arc<dyn crate::cluster::Api> = Arc::new(cluster.for_coordination(attempt_limit(replicas)));
        let mut peerings = Vec::new();
        if let Some((setup, family, scopes)) = peering {
            let pauses = keepalive::Pauses::new(authority.clone());
            for namespace in scopes {
                let p = peering::Peering {
                    family,
                    name: setup.name.clone(),
                    namespace,
                    identity: identity.to_string(),
                    priority: setup.priority,
                    lifetime: setup.lifetime,
                    mandatory: setup.mandatory,
                };
                if let Some(k) = keepalive::Keepalive::start(p.clone(), api.clone(), pauses.clone(), log.clone(), clock).await? {
                    let changes = keepalive::watch_object(cluster.client().clone(), &p);
                    tasks.push(tokio::spawn(k.run(changes, stop_rx.clone())));
                    peerings.push(p);
                }
            }
        }
        match replicas {
            Replicas::Each => {}
            Replicas::LeaderElection(l) => {
                log.info(None, &format!("Leader election on the Lease {}/{} as {identity}.", l.namespace, l.name));
                let mut candidate =
                    leader::Candidate::new(lease::Seat::new(l, identity), api.clone(), authority.clone(), log.clone(), clock);
                candidate.look().await;
                tasks.push(tokio::spawn(candidate.run(stop_rx.clone())));
            }
            Replicas::Shards(l) => {
                log.info(None, &format!("Joining the shard group '{}' in {} as {identity}.", l.name, l.namespace));
                let mut member = shards::Member::new(lease::Seat::new(l, identity), api.clone(), authority.clone(), log.clone(), clock);
                member.join().await;
                tasks.push(tokio::spawn(member.run(stop_rx.clone())));
            }
        }
        let roster = roster::Roster::new(api, identity, peerings, replicas.clone(), clock);
        Ok(Coordinator { stop, tasks, roster })
    }

    /// How to find the other replicas once this one has stopped coordinating.
    pub fn roster(&self) -> roster::Roster {
        self.roster.clone()
    }

    /// Stops the loops: peering records removed, Leases released or deleted.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
    }
}
