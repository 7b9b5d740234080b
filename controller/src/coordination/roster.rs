//! Who else serves: asked by a controller that stops, once its own peering records and Leases
//! are gone, before it removes what the replicas share (the admission webhook configurations,
//! `--admission-cleanup`). Replicas show themselves in three places, each read afresh here:
//! the peering objects (every live peer's record), the shard group's Leases (every live
//! member's), and the leader Lease (the leader only: followers are unseen, but one takes over
//! a released Lease within a second, so a released Lease that stays free tells that none is
//! left). A standalone controller that shares nothing sees no one.
//!
//! Replicas that stop together cannot all keep the shared things: each removes its own records
//! before it looks, so the last one to look sees no one.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::lease::Replicas;
use super::lease::{self, Record, Timing};
use super::peering::{self, Peering};
use super::shards;
use crate::clock::Clock;
use crate::cluster::{Api, Error};

/// What a controller needs to find the other replicas.
#[derive(Clone)]
pub struct Roster {
    api: Arc<dyn Api>,
    identity: String,
    peerings: Vec<Peering>,
    replicas: Replicas,
    clock: Clock,
}

impl Roster {
    /// The roster of `identity` in `peerings` and `replicas`, read through `api`.
    pub fn new(api: Arc<dyn Api>, identity: &str, peerings: Vec<Peering>, replicas: Replicas, clock: Clock) -> Roster {
        Roster { api, identity: identity.into(), peerings, replicas, clock }
    }

    /// Another live replica (its identity), if there is one; an error when that cannot be told.
    pub async fn another(&self) -> Result<Option<String>, Error> {
        for p in &self.peerings {
            let body = match self.api.get(&p.path()).await {
                Ok(body) => body,
                Err(e) if e.code() == Some(404) => continue,
                Err(e) => return Err(e),
            };
            if let Some(peer) = live_peer(&body, &self.identity, self.clock.now()) {
                return Ok(Some(peer));
            }
        }
        match &self.replicas {
            Replicas::Each => Ok(None),
            Replicas::Shards(l) => {
                let list = self.api.get(&lease::group_path(&l.namespace, &l.name)).await?;
                let leases = list["items"].as_array().cloned().unwrap_or_default();
                let live = shards::members_by_wall(&leases, self.clock.now());
                Ok(live.into_iter().find(|m| *m != self.identity))
            }
            Replicas::LeaderElection(l) => {
                // A follower looks every `retry` and takes a free Lease at once: three looks of
                // ours cover two of its.
                let timing = Timing::new(l.duration);
                let path = lease::path(&l.namespace, Some(&l.name));
                for look in 0..3 {
                    if look > 0 {
                        tokio::time::sleep(timing.retry).await;
                    }
                    let record = match self.api.get(&path).await {
                        Ok(body) => Record::parse(&body),
                        Err(e) if e.code() == Some(404) => return Ok(None),
                        Err(e) => return Err(e),
                    };
                    if let Some(leader) = other_holder(&record, &self.identity, self.clock.now()) {
                        return Ok(Some(leader));
                    }
                }
                Ok(None)
            }
        }
    }
}

/// A live peer other than `me` in a peering object.
fn live_peer(body: &serde_json::Value, me: &str, now: DateTime<Utc>) -> Option<String> {
    peering::peers(body, now).into_iter().find(|p| p.identity != me && p.deadline() > now).map(|p| p.identity)
}

/// The holder of a Lease that is held by another than `me`.
fn other_holder(record: &Record, me: &str, now: DateTime<Utc>) -> Option<String> {
    record.holder.clone().filter(|h| h != me && record.is_held(now))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn live_replicas_other_than_us_are_found_in_peering_records_and_leases() {
        let now: DateTime<Utc> = "2026-11-27T10:00:00Z".parse().unwrap();
        let peer = |lastseen: &str| json!({"priority": 0, "lifetime": 60, "lastseen": lastseen});
        let peering = json!({"status": {
            "me": peer("2026-11-27T09:59:50Z"),
            "gone": peer("2026-11-27T09:50:00Z"),
        }});
        assert_eq!(live_peer(&peering, "me", now), None, "ourselves and the dead do not count");
        let mut two = peering.clone();
        two["status"]["other"] = peer("2026-11-27T09:59:30Z");
        assert_eq!(live_peer(&two, "me", now).as_deref(), Some("other"));

        let lease = |holder: &str, renewed: &str| {
            Record::parse(&json!({"spec": {"holderIdentity": holder, "leaseDurationSeconds": 15, "renewTime": renewed}}))
        };
        let cases = [
            (lease("other", "2026-11-27T09:59:55Z"), Some("other")),
            (lease("me", "2026-11-27T09:59:55Z"), None),
            (lease("other", "2026-11-27T09:59:00Z"), None),
            (lease("", "2026-11-27T09:59:59Z"), None),
        ];
        for (record, want) in cases {
            assert_eq!(other_holder(&record, "me", now).as_deref(), want, "{record:?}");
        }
    }
}
