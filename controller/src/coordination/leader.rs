//! Leader election on one Lease (`--leader-election`): only the holder handles objects; the
//! others keep their watches warm and look at the Lease every [`lease::Timing::retry`]. The leader
//! renews as often, stops handling when it could not renew for [`lease::Timing::renew_deadline`],
//! and on a graceful stop — after its cycles in flight have ended — releases the Lease, so a
//! rolling update hands over within about a second instead of a lease duration.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use http::Method;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::lease::{self, Record, Seat, Step};
use super::{Authority, Ownership};
use crate::clock::Clock;
use crate::cluster::{Api, content};
use crate::logs::Logger;

/// A candidate's state between two looks at the Lease.
pub struct Candidate {
    seat: Seat,
    api: Arc<dyn Api>,
    authority: Authority,
    log: Logger,
    clock: Clock,
    /// The Lease as last read or written.
    known: Option<Record>,
    /// When we last renewed it, while we lead.
    renewed: Option<Instant>,
    /// Who we last saw leading (for the log).
    leader: Option<String>,
}

impl Candidate {
    /// A candidate that owns nothing until it has looked at the Lease.
    pub fn new(seat: Seat, api: Arc<dyn Api>, authority: Authority, log: Logger, clock: Clock) -> Candidate {
        Candidate { seat, api, authority, log, clock, known: None, renewed: None, leader: None }
    }

    fn path(&self, name: bool) -> String {
        lease::path(&self.seat.namespace, name.then_some(self.seat.name.as_str()))
    }

    fn lease_body(&self, holder: Option<&str>, now: DateTime<Utc>) -> Value {
        let e = &self.seat;
        lease::body((&e.namespace, &e.name), holder, &e.timing, now, self.known.as_ref(), &json!({}), None)
    }

    /// Looks at the Lease once: creates, takes over or renews it, or follows its holder; then
    /// tells the authority whether we lead.
    pub async fn look(&mut self) {
        let now = self.clock.now();
        match self.api.get(&self.path(true)).await {
            Ok(body) => self.known = Some(Record::parse(&body)),
            Err(e) if e.code() == Some(404) => self.known = None,
            Err(e) => {
                self.log.warn(None, &format!("Cannot read the Lease {}/{}: {e}.", self.seat.namespace, self.seat.name));
                return self.judge();
            }
        }
        let me = self.seat.identity.clone();
        let written = match lease::step(self.known.as_ref(), &me, now) {
            Step::Create => {
                let body = self.lease_body(Some(&me), now);
                Some(self.api.create(&self.path(false), &body).await)
            }
            Step::Acquire | Step::Renew => {
                let body = serde_json::to_vec(&self.lease_body(Some(&me), now)).expect("JSON values serialize");
                Some(self.api.request(Method::PUT, &self.path(true), Some(content::JSON), Some(body)).await)
            }
            Step::Follow { holder, .. } => {
                self.renewed = None;
                if self.leader.as_deref() != Some(holder.as_str()) {
                    self.log.info(None, &format!("The leader is {holder}; following (watches stay warm)."));
                    self.leader = Some(holder);
                }
                None
            }
        };
        match written {
            Some(Ok(body)) => {
                self.known = Some(Record::parse(&body));
                if self.renewed.is_none() {
                    let (ns, name) = (&self.seat.namespace, &self.seat.name);
                    self.log.info(None, &format!("Became the leader: holding the Lease {ns}/{name}; handling objects now."));
                }
                self.renewed = Some(Instant::now());
                self.leader = Some(me);
            }
            // 409: someone else wrote it first; we follow from the next look.
            Some(Err(e)) if e.code() == Some(409) => self.log.debug(None, &format!("Lost the race for the Lease: {e}.")),
            Some(Err(e)) => self.log.warn(None, &format!("Cannot write the Lease: {e}.")),
            None => {}
        }
        self.judge();
    }

    /// Leads while the last renewal is within the renew deadline.
    fn judge(&mut self) {
        let leading = self.renewed.is_some_and(|t| t.elapsed() < self.seat.timing.renew_deadline);
        if !leading && self.renewed.take().is_some() {
            self.log.warn(None, "Could not renew the leader Lease in time; not handling objects until it is ours again.");
            self.leader = None;
        }
        crate::metrics::global().leader.set(i64::from(leading));
        self.authority.set_ownership(if leading { Ownership::All } else { Ownership::Nothing });
    }

    /// Looks every [`lease::Timing::retry`] until `stop` flips; then, if we lead, releases the Lease.
    pub async fn run(mut self, mut stop: tokio::sync::watch::Receiver<bool>) {
        loop {
            tokio::select! {
                _ = super::stopped(&mut stop) => break,
                _ = tokio::time::sleep(self.seat.timing.retry) => {}
            }
            self.look().await;
        }
        self.release().await;
    }

    /// Gives the Lease up (holder cleared), if we hold it.
    pub async fn release(&mut self) {
        self.authority.set_ownership(Ownership::Nothing);
        if self.renewed.is_none() {
            return;
        }
        if tokio::time::timeout(self.seat.timing.duration, self.authority.settled()).await.is_err() {
            self.log.warn(None, "Some cycles did not end in time; the leader Lease is left to expire.");
            return;
        }
        self.renewed = None;
        let body = serde_json::to_vec(&self.lease_body(None, self.clock.now())).expect("JSON values serialize");
        match self.api.request(Method::PUT, &self.path(true), Some(content::JSON), Some(body)).await {
            Ok(_) => self.log.info(None, "Released the leader Lease."),
            Err(e) => self.log.warn(None, &format!("Could not release the leader Lease ({e}); it expires by itself.")),
        }
    }
}
