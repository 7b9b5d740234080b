//! Peering's I/O: this controller's keepalive in each peering object (written before its
//! lifetime ends, fenced when it cannot be), the pauses it decides through the authority, and
//! the watch of the object. What it decides is [`super::peering`]'s.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use parking_lot::Mutex;
use serde_json::{Value, json};

use super::Authority;
use super::peering::{
    Moment, Peering, Sightings, Verdict, clean_patch, decide, fence_after, keepalive_interval, peers, request_limit, retry_after_failure,
    shown, touch_patch,
};
use crate::clock::Clock;
use crate::cluster::{Api, content};
use crate::logs::Logger;

/// Writes a record (a [`touch_patch`]) into the peering object at `path`; a peering resource
/// with a status subresource ignores status in the main resource, so when the answer lacks a
/// record that was written, it is written to `/status` as well. Returns the object.
pub async fn write_record(api: &dyn Api, path: &str, identity: &str, patch: &Value) -> Result<Value, crate::cluster::Error> {
    let written = api.patch(path, content::MERGE, patch).await?;
    let writes_one = !patch["status"][identity].is_null();
    if writes_one && written.get("status").and_then(|s| s.get(identity)).is_none() {
        return api.patch(&format!("{path}/status"), content::MERGE, patch).await;
    }
    Ok(written)
}

/// Why peering cannot start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `--peering NAME` names an object that does not exist.
    #[error("The mandatory peering '{0}' was not found.")]
    Missing(String),
    /// The object could not be read.
    #[error("cannot read the peering object {what}: {error}")]
    Read {
        /// Which object.
        what: String,
        /// Why.
        #[source]
        error: crate::cluster::Error,
    },
}

/// The pauses of several peering objects (one per served namespace): paused while any says so.
#[derive(Debug)]
pub struct Pauses {
    authority: Authority,
    paused_in: Mutex<HashSet<String>>,
}

impl Pauses {
    /// Pauses reported to this authority.
    pub fn new(authority: Authority) -> Arc<Pauses> {
        Arc::new(Pauses { authority, paused_in: Mutex::default() })
    }

    fn set(&self, scope: &str, paused: bool) {
        let mut p = self.paused_in.lock();
        if paused {
            p.insert(scope.to_string());
        } else {
            p.remove(scope);
        }
        self.authority.set_paused(!p.is_empty());
    }

    fn fence_key(scope: &str) -> String {
        format!("{scope} (own keep-alive)")
    }

    /// Pauses by force (turns in flight told to end) while our keepalive in `scope` could not
    /// be written in time; `false` lifts that.
    fn fence(&self, scope: &str, fenced: bool) {
        let mut p = self.paused_in.lock();
        if fenced {
            p.insert(Pauses::fence_key(scope));
            self.authority.pause_by_force();
        } else {
            p.remove(&Pauses::fence_key(scope));
            self.authority.set_paused(!p.is_empty());
        }
    }

    fn is_fenced(&self, scope: &str) -> bool {
        self.paused_in.lock().contains(&Pauses::fence_key(scope))
    }
}

/// One controller's part in one peering object.
pub struct Keepalive {
    peering: Peering,
    api: Arc<dyn Api>,
    pauses: Arc<Pauses>,
    log: Logger,
    clock: Clock,
    verdict: Verdict,
    /// The object as last seen.
    last: Option<Value>,
    /// When its first peer that pauses us dies (from the last decision): look again then.
    recheck_at: Option<tokio::time::Instant>,
    /// When our last successful keepalive was sent (local).
    written: tokio::time::Instant,
    /// When each peer's record was seen to change.
    sightings: Sightings,
}

impl Keepalive {
    /// Looks for the peering object: `Ok(None)` means standalone (with Kopf's warning);
    /// otherwise writes our record and decides at once from the object it returns.
    pub async fn start(
        peering: Peering,
        api: Arc<dyn Api>,
        pauses: Arc<Pauses>,
        log: Logger,
        clock: Clock,
    ) -> Result<Option<Keepalive>, Error> {
        let path = peering.path();
        match api.get(&path).await {
            Ok(_) => {}
            Err(e) if e.code() == Some(404) => {
                if peering.mandatory {
                    return Err(Error::Missing(peering.name.clone()));
                }
                log.warn(None, "Default peering object is not found, falling back to the standalone mode.");
                return Ok(None);
            }
            Err(error) => return Err(Error::Read { what: peering.display(), error }),
        }
        log.info(None, &format!("Peering in {} as {} with priority {}.", peering.display(), peering.identity, peering.priority));
        let written = tokio::time::Instant::now();
        let mut k = Keepalive {
            peering,
            api,
            pauses,
            log,
            clock,
            verdict: Verdict::Run,
            last: None,
            recheck_at: None,
            written,
            sightings: Sightings::default(),
        };
        // Until our record is written, our peers cannot see us, so we must not act: fenced, as
        // after a keep-alive that could not be written, until one is (`run` tries again soon).
        match tokio::time::timeout(request_limit(k.peering.lifetime), k.touch(k.peering.lifetime)).await {
            Ok(Some(body)) => k.observe(body).await,
            Ok(None) | Err(_) => k.fence(&k.peering.display()),
        }
        Ok(Some(k))
    }

    /// Writes our record; returns the object as written.
    async fn touch(&self, lifetime: Duration) -> Option<Value> {
        let p = &self.peering;
        let patch = touch_patch(&p.identity, p.priority, lifetime, self.clock.now());
        let path = p.path();
        match write_record(&*self.api, &path, &p.identity, &patch).await {
            Ok(body) => Some(body),
            Err(e) => {
                self.log.warn(None, &format!("Keep-alive in {} failed: {e}.", p.display()));
                None
            }
        }
    }

    /// Decides from the object as it is now; pauses or resumes; removes dead peers.
    async fn observe(&mut self, body: Value) {
        let p = &self.peering;
        let d = decide(&body, &p.identity, p.priority, Moment::now(&self.clock), &mut self.sightings);
        let scope = p.display();
        match (&self.verdict, &d.verdict) {
            (Verdict::Run, Verdict::Yield(higher)) => self.log.info(None, &format!("Pausing operations in favour of {}.", shown(higher))),
            (_, Verdict::Conflict(same)) => {
                self.log.warn(None, &format!("Possibly conflicting operators with the same priority: {}.", shown(same)));
                if self.verdict == Verdict::Run {
                    self.log.warn(None, &format!("Pausing all operators, including self: {}", shown(&peers(&body, self.clock.now()))));
                }
            }
            (Verdict::Yield(_) | Verdict::Conflict(_), Verdict::Run) => {
                self.log.info(None, "Resuming operations after the pause. Conflicting operators with the same priority are gone.")
            }
            _ => {}
        }
        self.pauses.set(&scope, d.verdict != Verdict::Run);
        self.verdict = d.verdict.clone();
        if !d.dead.is_empty() {
            let path = p.path();
            if let Err(e) = self.api.patch(&path, content::MERGE, &clean_patch(&d.dead)).await {
                self.log.debug(None, &format!("Could not remove dead peers {:?}: {e}.", d.dead));
            }
        }
        self.last = Some(body);
        self.recheck_at = d.recheck_at;
    }

    /// Refreshes our record before it dies, follows the object's changes (`changes`: its
    /// bodies, `None` when deleted), looks again when a peer that pauses us should die, fences
    /// itself while its own record cannot be written, and removes our record when `stop` flips.
    pub async fn run(mut self, changes: impl Stream<Item = Option<Value>> + Send, mut stop: tokio::sync::watch::Receiver<bool>) {
        use tokio::time::{Instant, sleep_until};
        let mut changes = std::pin::pin!(changes);
        let lifetime = self.peering.lifetime;
        let scope = self.peering.display();
        let first = if self.pauses.is_fenced(&scope) { retry_after_failure(lifetime) } else { keepalive_interval(lifetime) };
        let mut keepalive = Instant::now() + first;
        loop {
            let recheck = self.recheck_at;
            let fence_at = self.written + fence_after(lifetime);
            let fenced = self.pauses.is_fenced(&scope);
            tokio::select! {
                _ = super::drain::stopped(&mut stop) => break,
                _ = sleep_until(keepalive) => {
                    let sent = Instant::now();
                    let give_up = sent + request_limit(lifetime);
                    let written = {
                        let mut touch = std::pin::pin!(self.touch(lifetime));
                        loop {
                            let fenced = self.pauses.is_fenced(&scope);
                            tokio::select! {
                                body = &mut touch => break body,
                                _ = sleep_until(fence_at), if !fenced => self.fence(&scope),
                                _ = sleep_until(give_up) => {
                                    self.log.warn(None, &format!("Keep-alive in {scope} timed out."));
                                    break None;
                                }
                                _ = super::drain::stopped(&mut stop) => break None,
                            }
                        }
                    };
                    match written {
                        Some(body) => {
                            self.written = sent;
                            keepalive = Instant::now() + keepalive_interval(lifetime);
                            if self.pauses.is_fenced(&scope) {
                                self.log.info(None, &format!("The keep-alive in {scope} is written again; resuming operations."));
                                self.pauses.fence(&scope, false);
                            }
                            self.observe(body).await;
                        }
                        None => keepalive = Instant::now() + retry_after_failure(lifetime),
                    }
                }
                _ = sleep_until(fence_at), if !fenced => self.fence(&scope),
                _ = sleep_until(recheck.unwrap_or(keepalive)), if recheck.is_some() => {
                    // A peer that pauses us looks dead: read the object before resuming, as a
                    // watch can lag (or hang) behind its keep-alives; if it cannot be read,
                    // stay as we are and look again soon.
                    match tokio::time::timeout(request_limit(lifetime), self.api.get(&self.peering.path())).await {
                        Ok(Ok(body)) => self.observe(body).await,
                        Ok(Err(e)) if e.code() == Some(404) => self.observe(json!({})).await,
                        _ => self.recheck_at = Some(Instant::now() + retry_after_failure(lifetime)),
                    }
                }
                change = changes.next() => match change {
                    Some(Some(body)) => self.observe(body).await,
                    Some(None) => self.observe(json!({})).await,
                    None => break,
                },
            }
        }
        self.pauses.fence(&scope, false);
        self.pauses.set(&scope, false);
        let _ = self.touch(Duration::ZERO).await;
    }

    /// Our keepalive could not be written for [`fence_after`] of its lifetime: pause by force.
    fn fence(&self, scope: &str) {
        self.log.warn(
            None,
            &format!(
                "Could not write the keep-alive in {scope} in time; pausing operations until it is written again (a peer may take over)."
            ),
        );
        self.pauses.fence(scope, true);
    }
}

/// The bodies of one peering object as a watch sees them (`None`: deleted).
pub fn watch_object(client: kube::Client, peering: &Peering) -> impl Stream<Item = Option<Value>> + Send + 'static {
    use kube::runtime::{WatchStreamExt, watcher};
    let ar = peering.family.api_resource(peering.namespace.as_deref());
    let api: kube::Api<kube::api::DynamicObject> = match &peering.namespace {
        Some(ns) => kube::Api::namespaced_with(client, ns, &ar),
        None => kube::Api::all_with(client, &ar),
    };
    let timeout = crate::cluster::watching::WATCH_TIMEOUT.as_secs() as u32;
    let config = watcher::Config::default().timeout(timeout).fields(&format!("metadata.name={}", peering.name));
    watcher(api, config).default_backoff().filter_map(|event| async move {
        match event {
            Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => serde_json::to_value(o).ok().map(Some),
            Ok(watcher::Event::Delete(_)) => Some(None),
            _ => None,
        }
    })
}
