//! Leader election on one Lease (`--leader-election`): only the holder handles objects; the
//! others keep their watches warm and look at the Lease every [`lease::Timing::retry`].
//!
//! The candidate is a small state machine ([`Elector`]: events in, actions out, no I/O) and a
//! loop ([`Candidate`]) that sends its writes and races every request against the local timer
//! of the renew deadline: a leader stops handling — by force, every turn in flight told to end
//! ([`Authority::revoke`]) — at [`lease::Timing::renew_deadline`] after it *sent* its last
//! successful renewal, whatever its requests are doing, so a hung API path never leaves it
//! handling after another replica may take over. Followers judge the Lease by when they saw it
//! change ([`lease::Observed`]), never by the leader's wall clock. On a graceful stop the
//! leader stops beginning turns, keeps renewing while those in flight end, and then releases
//! the Lease, so a rolling update hands over within about a second instead of a lease duration.

use std::future::Future;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use http::Method;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::Instant;

use super::drain::{Draining, drain};
use super::lease::{self, Observed, Record, Seat, Step, Tenure, Timing};
use super::{Authority, Ownership};
use crate::clock::Clock;
use crate::cluster::{Api, content};
use crate::logs::Logger;

/// What happened to a candidate.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The Lease was read at `at` (none: it does not exist).
    Read {
        /// The Lease.
        record: Option<Record>,
        /// When the answer came (local).
        at: Instant,
    },
    /// Reading it failed at `at`.
    ReadFailed {
        /// When.
        at: Instant,
    },
    /// Our write, sent at `sent`, succeeded at `at` with this Lease.
    Wrote {
        /// The Lease as written.
        record: Record,
        /// When the write was sent.
        sent: Instant,
        /// When the answer came.
        at: Instant,
    },
    /// Our write failed at `at` (409: someone else wrote first).
    WriteFailed {
        /// When.
        at: Instant,
    },
    /// The renew deadline's timer fired at `at`.
    Deadline {
        /// When.
        at: Instant,
    },
}

/// What a candidate does about an event.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Write this Lease (create it when `create`).
    Write {
        /// The body.
        body: Value,
        /// Whether it is new.
        create: bool,
    },
    /// We lead: handle every object (until the tenure's deadline).
    Lead,
    /// Someone else leads.
    Follow {
        /// Who.
        holder: String,
    },
    /// Our tenure lapsed: take every object away by force.
    Revoke,
}

/// A candidate's state: the Lease as observed, our tenure, whether we are draining.
#[derive(Debug, Clone)]
pub struct Elector {
    me: String,
    lease: (String, String),
    timing: Timing,
    observed: Observed,
    tenure: Tenure,
    draining: bool,
}

impl Elector {
    /// A candidate `seat.identity` for the Lease `seat` names.
    pub fn new(seat: &Seat) -> Elector {
        Elector {
            me: seat.identity.clone(),
            lease: (seat.namespace.clone(), seat.name.clone()),
            timing: seat.timing,
            observed: Observed::at_least(seat.timing.duration),
            tenure: Tenure::default(),
            draining: false,
        }
    }

    /// When the local timer must fire, while we lead.
    pub fn deadline(&self) -> Option<Instant> {
        self.tenure.deadline()
    }

    /// Whether we hold the Lease at `now`.
    pub fn holds(&self, now: Instant) -> bool {
        self.tenure.holds(now)
    }

    /// From now on, renew (while what runs ends) but never acquire, and never lead again.
    pub fn drain(&mut self) {
        self.draining = true;
    }

    fn body(&self, holder: Option<&str>, wall: DateTime<Utc>) -> Value {
        let (ns, name) = &self.lease;
        lease::body((ns, name), holder, &self.timing, wall, self.observed.record(), &json!({}), None)
    }

    /// The body that releases the Lease (holder cleared), if we hold it; we hold it no more.
    pub fn release(&mut self, wall: DateTime<Utc>, now: Instant) -> Option<Value> {
        let held = self.tenure.holds(now);
        self.tenure.end();
        held.then(|| self.body(None, wall))
    }

    /// The transition: what to do about `event` (`wall`: now, for what the Lease shows people).
    pub fn on(&mut self, event: Event, wall: DateTime<Utc>) -> Vec<Action> {
        let mut out = Vec::new();
        let at = match &event {
            Event::Read { at, .. }
            | Event::ReadFailed { at }
            | Event::Wrote { at, .. }
            | Event::WriteFailed { at }
            | Event::Deadline { at } => *at,
        };
        match event {
            Event::Read { record, at } => {
                self.observed.observe(record.as_ref(), at);
                match lease::step(&self.observed, &self.me, at) {
                    Step::Renew => out.push(Action::Write { body: self.body(Some(&self.me), wall), create: false }),
                    Step::Create | Step::Acquire if self.draining => {}
                    Step::Create => out.push(Action::Write { body: self.body(Some(&self.me), wall), create: true }),
                    Step::Acquire => out.push(Action::Write { body: self.body(Some(&self.me), wall), create: false }),
                    Step::Follow { holder, .. } => {
                        // Someone else's: if we thought we led, we do not.
                        if self.tenure.deadline().is_some() {
                            self.tenure.end();
                            out.push(Action::Revoke);
                        }
                        out.push(Action::Follow { holder });
                    }
                }
            }
            Event::Wrote { record, sent, at } => {
                self.observed.observe(Some(&record), at);
                if self.tenure.wrote(sent, at, &self.timing) && !self.draining {
                    out.push(Action::Lead);
                }
            }
            Event::ReadFailed { .. } | Event::WriteFailed { .. } | Event::Deadline { .. } => {}
        }
        if self.tenure.lapse(at) {
            out.insert(0, Action::Revoke);
        }
        out
    }
}

/// What ended a request raced against the timers.
enum Raced<T> {
    Answered(T),
    Quit,
}

/// A candidate: the [`Elector`] and the I/O around it.
pub struct Candidate {
    seat: Seat,
    api: Arc<dyn Api>,
    authority: Authority,
    log: Logger,
    clock: Clock,
    elector: Elector,
    /// Who we last saw leading (for the log).
    leader: Option<String>,
    /// Requests give up when this flips (the run loop's stop).
    stop: Option<watch::Receiver<bool>>,
    /// Requests give up then (the drain's bound).
    give_up: Option<Instant>,
}

impl Candidate {
    /// A candidate that owns nothing until it has looked at the Lease.
    pub fn new(seat: Seat, api: Arc<dyn Api>, authority: Authority, log: Logger, clock: Clock) -> Candidate {
        let elector = Elector::new(&seat);
        Candidate { seat, api, authority, log, clock, elector, leader: None, stop: None, give_up: None }
    }

    fn path(&self, name: bool) -> String {
        lease::path(&self.seat.namespace, name.then_some(self.seat.name.as_str()))
    }

    /// Feeds an event to the elector and carries out what it says (writes are returned).
    fn feed(&mut self, event: Event) -> Option<(Value, bool)> {
        let mut write = None;
        for action in self.elector.on(event, self.clock.now()) {
            match action {
                Action::Write { body, create } => write = Some((body, create)),
                Action::Lead => {
                    if self.leader.as_deref() != Some(self.seat.identity.as_str()) {
                        let (ns, name) = (&self.seat.namespace, &self.seat.name);
                        self.log.info(None, &format!("Became the leader: holding the Lease {ns}/{name}; handling objects now."));
                        self.leader = Some(self.seat.identity.clone());
                    }
                    crate::metrics::global().leader.set(1);
                    crate::metrics::global().set_holding_until(self.elector.deadline());
                    self.authority.hold_until(self.elector.deadline());
                    self.authority.set_ownership(Ownership::All);
                }
                Action::Follow { holder } => {
                    if self.leader.as_deref() != Some(holder.as_str()) {
                        self.log.info(None, &format!("The leader is {holder}; following (watches stay warm)."));
                        self.leader = Some(holder);
                    }
                    self.authority.set_ownership(Ownership::Nothing);
                }
                Action::Revoke => {
                    self.log.warn(None, "Could not renew the leader Lease in time; not handling objects until it is ours again.");
                    self.leader = None;
                    crate::metrics::global().leader.set(0);
                    crate::metrics::global().set_holding_until(None);
                    self.authority.revoke();
                }
            }
        }
        write
    }

    /// Awaits `request`, meanwhile firing the renew deadline's timer; gives up when the loop
    /// stops or the drain's bound passes.
    async fn race<T>(&mut self, request: impl Future<Output = T>) -> Raced<T> {
        let mut request = std::pin::pin!(request);
        loop {
            let deadline = self.elector.deadline();
            let mut stop = self.stop.clone();
            let give_up = self.give_up;
            tokio::select! {
                r = &mut request => return Raced::Answered(r),
                _ = sleep_until(deadline), if deadline.is_some() => {
                    self.feed(Event::Deadline { at: Instant::now() });
                }
                _ = async { match stop.as_mut() { Some(s) => super::drain::stopped(s).await, None => std::future::pending().await } } => return Raced::Quit,
                _ = sleep_until(give_up), if give_up.is_some() => return Raced::Quit,
            }
        }
    }

    /// Looks at the Lease once: creates, takes over or renews it, or follows its holder; then
    /// tells the authority whether we lead. False when it gave up (stopping).
    async fn round(&mut self) -> bool {
        let (api, path) = (self.api.clone(), self.path(true));
        let read = match self.race(async move { api.get(&path).await }).await {
            Raced::Answered(r) => r,
            Raced::Quit => return false,
        };
        let event = match read {
            Ok(body) => Event::Read { record: Some(Record::parse(&body)), at: Instant::now() },
            Err(e) if e.code() == Some(404) => Event::Read { record: None, at: Instant::now() },
            Err(e) => {
                self.log.warn(None, &format!("Cannot read the Lease {}/{}: {e}.", self.seat.namespace, self.seat.name));
                Event::ReadFailed { at: Instant::now() }
            }
        };
        let Some((body, create)) = self.feed(event) else { return true };
        let (api, path, base) = (self.api.clone(), self.path(true), self.path(false));
        let sent = Instant::now();
        let written = self.race(async move {
            if create {
                api.create(&base, &body).await
            } else {
                let bytes = serde_json::to_vec(&body).expect("JSON values serialize");
                api.request(Method::PUT, &path, Some(content::JSON), Some(bytes)).await
            }
        });
        let event = match written.await {
            Raced::Quit => return false,
            Raced::Answered(Ok(body)) => Event::Wrote { record: Record::parse(&body), sent, at: Instant::now() },
            // 409: someone else wrote it first; we follow from the next look.
            Raced::Answered(Err(e)) if e.code() == Some(409) => {
                self.log.debug(None, &format!("Lost the race for the Lease: {e}."));
                Event::WriteFailed { at: Instant::now() }
            }
            Raced::Answered(Err(e)) => {
                self.log.warn(None, &format!("Cannot write the Lease: {e}."));
                Event::WriteFailed { at: Instant::now() }
            }
        };
        self.feed(event);
        true
    }

    /// Looks at the Lease once (before the loop starts).
    pub async fn look(&mut self) {
        self.round().await;
    }

    /// Looks every [`lease::Timing::retry`] until `stop` flips; then, if we lead, releases the Lease.
    pub async fn run(mut self, stop: watch::Receiver<bool>) {
        self.stop = Some(stop.clone());
        loop {
            let mut stop = stop.clone();
            if self.pause(async move { super::drain::stopped(&mut stop).await }).await || !self.round().await {
                break;
            }
        }
        self.stop = None;
        self.release().await;
    }

    /// Stops beginning turns, keeps renewing the Lease while those in flight end (revoking
    /// them if they outlast a lease duration), then gives the Lease up (holder cleared).
    pub async fn release(&mut self) {
        self.elector.drain();
        self.authority.set_ownership(Ownership::Nothing);
        crate::metrics::global().leader.set(0);
        crate::metrics::global().set_holding_until(None);
        if !self.elector.holds(Instant::now()) {
            return;
        }
        let (authority, log, duration) = (self.authority.clone(), self.log.clone(), self.seat.timing.duration);
        if !drain(self, &authority, duration, &log, "leader Lease", "released").await {
            return;
        }
        let Some(body) = self.elector.release(self.clock.now(), Instant::now()) else { return };
        self.give_up = Some(Instant::now() + self.seat.timing.renew_deadline);
        let (api, path) = (self.api.clone(), self.path(true));
        let bytes = serde_json::to_vec(&body).expect("JSON values serialize");
        match self.race(async move { api.request(Method::PUT, &path, Some(content::JSON), Some(bytes)).await }).await {
            Raced::Answered(Ok(_)) => self.log.info(None, "Released the leader Lease."),
            Raced::Answered(Err(e)) => self.log.warn(None, &format!("Could not release the leader Lease ({e}); it expires by itself.")),
            Raced::Quit => self.log.warn(None, "Could not release the leader Lease in time; it expires by itself."),
        }
    }
}

/// Sleeps until `at` (forever when none).
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

impl Draining for Candidate {
    fn retry(&self) -> std::time::Duration {
        self.seat.timing.retry
    }

    fn renew_deadline(&self) -> Option<Instant> {
        self.elector.deadline()
    }

    fn deadline_passed(&mut self) {
        self.feed(Event::Deadline { at: Instant::now() });
    }

    async fn renew_once(&mut self) {
        self.round().await;
    }

    fn give_up_at(&mut self, at: Instant) {
        self.give_up = Some(at);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn record(holder: &str, rv: &str) -> Record {
        Record {
            holder: Some(holder.to_string()).filter(|h| !h.is_empty()),
            duration: Duration::from_secs(15),
            renewed: Some("2026-11-27T10:00:00Z".parse().unwrap()),
            resource_version: Some(rv.into()),
            ..Record::default()
        }
    }

    fn shown(actions: &[Action]) -> Vec<String> {
        actions
            .iter()
            .map(|a| match a {
                Action::Write { body, create } => {
                    let holder = body["spec"]["holderIdentity"].as_str().unwrap_or("?");
                    format!("{} {holder}", if *create { "create" } else { "write" })
                }
                Action::Lead => "lead".into(),
                Action::Follow { holder } => format!("follow {holder}"),
                Action::Revoke => "revoke".into(),
            })
            .collect()
    }

    /// A step of a script: at second `t`, an event (none: start draining) and what it gives.
    type Script = Vec<(u64, Option<fn(Instant, Instant) -> Event>, &'static [&'static str])>;

    #[tokio::test(start_paused = true)]
    async fn a_candidate_leads_from_its_sent_write_until_its_renew_deadline_and_follows_by_observed_change() {
        let t0 = Instant::now();
        let seat = Seat { name: "op".into(), namespace: "ns".into(), identity: "me".into(), timing: Timing::new(Duration::from_secs(15)) };
        // Renew deadline: 10 s. Each event gets (t0, its own instant).
        let scripts: Vec<(&str, Script)> = vec![
            (
                "wins, renews, then its API hangs",
                vec![
                    (0, Some(|_, at| Event::Read { record: None, at }), &["create me"]),
                    (1, Some(|t0, at| Event::Wrote { record: record("me", "1"), sent: t0, at }), &["lead"]),
                    (2, Some(|_, at| Event::Read { record: Some(record("me", "1")), at }), &["write me"]),
                    (3, Some(|_, at| Event::WriteFailed { at }), &[]),
                    (9, Some(|_, at| Event::ReadFailed { at }), &[]),
                    (10, Some(|_, at| Event::Deadline { at }), &["revoke"]),
                    (11, Some(|_, at| Event::Deadline { at }), &[]),
                ],
            ),
            (
                "follows by when it saw the Lease change, then takes it over",
                vec![
                    (0, Some(|_, at| Event::Read { record: Some(record("other", "1")), at }), &["follow other"]),
                    (14, Some(|_, at| Event::Read { record: Some(record("other", "1")), at }), &["follow other"]),
                    (15, Some(|_, at| Event::Read { record: Some(record("other", "1")), at }), &["write me"]),
                    (16, Some(|t0, at| Event::Wrote { record: record("me", "2"), sent: t0 + Duration::from_secs(15), at }), &["lead"]),
                    (17, Some(|_, at| Event::Read { record: Some(record("other", "3")), at }), &["revoke", "follow other"]),
                ],
            ),
            (
                "an answer that comes after its own deadline gives nothing",
                vec![
                    (0, Some(|_, at| Event::Read { record: None, at }), &["create me"]),
                    (11, Some(|t0, at| Event::Wrote { record: record("me", "1"), sent: t0, at }), &[]),
                ],
            ),
            (
                "a renewal counts from when it was sent, however late the answer",
                vec![
                    (0, Some(|_, at| Event::Read { record: Some(record("me", "1")), at }), &["write me"]),
                    (9, Some(|t0, at| Event::Wrote { record: record("me", "2"), sent: t0, at }), &["lead"]),
                    (10, Some(|_, at| Event::Deadline { at }), &["revoke"]),
                ],
            ),
            (
                "draining: renews, never leads, never acquires",
                vec![
                    (0, Some(|_, at| Event::Read { record: Some(record("me", "1")), at }), &["write me"]),
                    (0, Some(|t0, at| Event::Wrote { record: record("me", "2"), sent: t0, at }), &["lead"]),
                    (1, None, &[]),
                    (1, Some(|_, at| Event::Read { record: Some(record("me", "2")), at }), &["write me"]),
                    (2, Some(|t0, at| Event::Wrote { record: record("me", "3"), sent: t0 + Duration::from_secs(1), at }), &[]),
                    (3, Some(|_, at| Event::Read { record: None, at }), &[]),
                    (30, Some(|_, at| Event::Read { record: Some(record("", "4")), at }), &["revoke"]),
                ],
            ),
        ];
        for (name, script) in scripts {
            let mut e = Elector::new(&seat);
            for (i, (t, event, want)) in script.into_iter().enumerate() {
                let at = t0 + Duration::from_secs(t);
                let got = match event {
                    Some(event) => e.on(event(t0, at), Utc::now()),
                    None => {
                        e.drain();
                        Vec::new()
                    }
                };
                assert_eq!(shown(&got), want, "{name}, step {i}");
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_release_clears_the_holder_only_while_we_hold_the_lease() {
        let t0 = Instant::now();
        let seat = Seat { name: "op".into(), namespace: "ns".into(), identity: "me".into(), timing: Timing::new(Duration::from_secs(15)) };
        let mut e = Elector::new(&seat);
        assert_eq!(e.release(Utc::now(), t0), None, "never held");
        e.on(Event::Read { record: Some(record("me", "1")), at: t0 }, Utc::now());
        e.on(Event::Wrote { record: record("me", "2"), sent: t0, at: t0 }, Utc::now());
        let body = e.release(Utc::now(), t0 + Duration::from_secs(1)).expect("held");
        assert_eq!(body["spec"]["holderIdentity"], "");
        assert_eq!(body["metadata"]["resourceVersion"], "2");
        assert!(!e.holds(t0 + Duration::from_secs(1)));
    }
}
