//! Listing a resource again once objects may have become ours (resumed after a pause,
//! leadership won, a shard grown): the watches never stopped, but they say nothing of objects
//! that did not change, so without a listing those objects would get no cycle, timer, daemon
//! or pending retry until their next change. A listing that fails is therefore owed until it
//! succeeds: each scope is retried with a Fibonacci backoff (as framework failures are
//! throttled) up to [`MOST`], and a newer gain supersedes it (every scope listed anew).

use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::coordination::Authority;
use crate::logs::Logger;
use crate::logs::human;

/// The longest wait between two attempts of an owed listing.
pub(super) const MOST: Duration = Duration::from_secs(30);

/// A listing owed since a gain: the scopes still to list, and when to try them again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Owed {
    /// The scopes (by index) not listed yet.
    left: Vec<usize>,
    /// Failed attempts in a row.
    failures: usize,
    /// When to try again.
    at: Instant,
}

impl Owed {
    /// Every one of `scopes` scopes is owed, at once.
    pub(super) fn new(scopes: usize, now: Instant) -> Owed {
        Owed { left: (0..scopes).collect(), failures: 0, at: now }
    }

    /// After a scope's listing: `None` once every scope is listed, else what is still owed (a
    /// failure waits its backoff; a success goes on with the next scope at once).
    pub(super) fn on_listed(mut self, ok: bool, now: Instant) -> Option<Owed> {
        if ok {
            self.left.remove(0);
            self.failures = 0;
            self.at = now;
        } else {
            self.failures += 1;
            self.at = now + backoff(self.failures);
        }
        (!self.left.is_empty()).then_some(self)
    }
}

/// The wait after `failures` failures in a row: Kopf's Fibonacci seconds, at most [`MOST`].
pub(super) fn backoff(failures: usize) -> Duration {
    super::worker_state::throttle_delay(failures).min(MOST)
}

/// Lists one scope again, delivering what it finds; the number listed, or why it failed.
pub(super) type ListScope<'a> = Box<dyn FnMut(usize) -> BoxFuture<'a, Result<usize, String>> + Send + 'a>;

/// Follows the authority's verdict for one resource until `stop`: `on_change` after every
/// change (stopping what is not ours now), and a listing of each of `scopes` scopes owed after
/// every gain, retried until it succeeds or a newer gain supersedes it.
pub(super) async fn follow(
    authority: Authority,
    scopes: usize,
    what: String,
    log: Logger,
    mut stop: watch::Receiver<bool>,
    mut on_change: impl FnMut() + Send,
    mut list: ListScope<'_>,
) {
    let mut changes = authority.subscribe();
    let mut gained = changes.borrow_and_update().gained;
    let mut owed: Option<Owed> = None;
    loop {
        let due = owed.as_ref().map(|o| o.at);
        tokio::select! {
            _ = stop.changed() => return,
            r = changes.changed() => {
                if r.is_err() {
                    return;
                }
                if took_change(&mut changes, &mut gained, &mut on_change) {
                    owed = Some(Owed::new(scopes, Instant::now()));
                }
            }
            _ = tokio::time::sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => {}
        }
        // Every scope owed and due now is listed (a success goes on with the next at once).
        // A change of the verdict meanwhile is acted on at once, not after the listing (the
        // daemons of objects given away would run on beside their new owner's): a loss stops
        // what is not ours now; a gain lists every scope anew.
        while let Some(o) = owed.take_if(|o| o.at <= Instant::now()) {
            let mut listing = list(o.left[0]);
            let listed = loop {
                tokio::select! {
                    _ = stop.changed() => return,
                    r = &mut listing => break Some(r),
                    r = changes.changed() => {
                        if r.is_err() {
                            return;
                        }
                        if took_change(&mut changes, &mut gained, &mut on_change) {
                            break None;
                        }
                    }
                }
            };
            let Some(listed) = listed else {
                owed = Some(Owed::new(scopes, Instant::now()));
                continue;
            };
            match &listed {
                Ok(n) => log.info(None, &format!("Listed {n} object(s) of {what} again: those that are ours now are handled.")),
                Err(e) => log.warn(None, &format!("Could not list {what} again: {e}; retrying in {}.", human(backoff(o.failures + 1)))),
            }
            owed = o.on_listed(listed.is_ok(), Instant::now());
        }
    }
}

/// Takes a change of the verdict: `on_change`, and whether it was a gain (then noted in
/// `gained`).
fn took_change(changes: &mut watch::Receiver<crate::coordination::Generation>, gained: &mut u64, on_change: &mut impl FnMut()) -> bool {
    let now = *changes.borrow_and_update();
    on_change();
    let gain = now.gained != *gained;
    *gained = now.gained;
    gain
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use parking_lot::Mutex;

    use super::*;
    use crate::coordination::Ownership;

    #[test]
    fn an_owed_listing_goes_scope_by_scope_and_backs_off_on_failures_up_to_30_seconds() {
        let t0 = Instant::now();
        let o = Owed::new(2, t0);
        let o = o.on_listed(false, t0).expect("still owed");
        assert_eq!((o.left.clone(), o.at - t0), (vec![0, 1], Duration::from_secs(1)));
        let mut o = o;
        for _ in 0..10 {
            o = o.on_listed(false, t0).unwrap();
        }
        assert_eq!(o.at - t0, MOST, "capped");
        let o = o.on_listed(true, t0).expect("scope 1 left");
        assert_eq!((o.left.clone(), o.failures, o.at), (vec![1], 0, t0));
        assert_eq!(o.on_listed(true, t0), None, "all listed");
        let secs: Vec<u64> = (1..=10).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(secs, [1, 1, 2, 3, 5, 8, 13, 21, 30, 30]);
    }

    /// A fake listing whose first `fails` attempts fail; every attempt noted with its scope.
    fn listing(fails: usize, attempts: Arc<Mutex<Vec<(usize, Instant)>>>) -> ListScope<'static> {
        let n = Arc::new(AtomicUsize::new(0));
        Box::new(move |scope| {
            let (n, attempts) = (n.clone(), attempts.clone());
            Box::pin(async move {
                attempts.lock().push((scope, Instant::now()));
                if n.fetch_add(1, Ordering::SeqCst) < fails { Err("the page failed: 503".into()) } else { Ok(3) }
            })
        })
    }

    /// `follow` of `scopes` scopes of `kopfexamples` on its own task, until aborted.
    fn following(
        authority: &Authority,
        scopes: usize,
        on_change: impl FnMut() + Send + 'static,
        list: ListScope<'static>,
    ) -> tokio::task::JoinHandle<()> {
        let (stop_tx, stop) = watch::channel(false);
        let authority = authority.clone();
        tokio::spawn(async move {
            let _stop = stop_tx;
            follow(authority, scopes, "kopfexamples".into(), Logger::new(None), stop, on_change, list).await
        })
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_listing_after_a_gain_is_retried_with_a_backoff_until_it_succeeds() {
        let authority = Authority::new(Ownership::Nothing);
        let attempts: Arc<Mutex<Vec<(usize, Instant)>>> = Arc::default();
        let changes = Arc::new(AtomicUsize::new(0));
        let counted = changes.clone();
        let follow = following(
            &authority,
            1,
            move || {
                counted.fetch_add(1, Ordering::SeqCst);
            },
            listing(3, attempts.clone()),
        );
        tokio::task::yield_now().await;
        let gained = Instant::now();
        authority.set_ownership(Ownership::All);
        tokio::time::sleep(Duration::from_secs(60)).await;
        let secs: Vec<u64> = attempts.lock().iter().map(|(_, t)| (*t - gained).as_secs()).collect();
        assert_eq!(secs, [0, 1, 2, 4], "three failures, then the listing that succeeds");
        assert_eq!(changes.load(Ordering::SeqCst), 1);
        // A loss lists nothing; a gain lists again.
        authority.set_ownership(Ownership::Nothing);
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(attempts.lock().len(), 4);
        authority.set_ownership(Ownership::All);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(attempts.lock().len(), 5);
        follow.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_newer_gain_supersedes_an_owed_listing_and_lists_every_scope_anew() {
        let authority = Authority::new(Ownership::Nothing);
        let attempts: Arc<Mutex<Vec<(usize, Instant)>>> = Arc::default();
        let follow = following(&authority, 2, || {}, listing(6, attempts.clone()));
        tokio::task::yield_now().await;
        let start = Instant::now();
        authority.set_ownership(Ownership::All);
        // Failures at 0, 1, 2, 4, 7 s; the next would be at 15 s.
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(attempts.lock().len(), 5);
        authority.set_ownership(Ownership::Nothing);
        authority.set_ownership(Ownership::All);
        tokio::time::sleep(Duration::from_secs(5)).await;
        let at: Vec<(usize, u64)> = attempts.lock().iter().map(|(s, t)| (*s, (*t - start).as_secs())).collect();
        assert_eq!(at, [(0, 0), (0, 1), (0, 2), (0, 4), (0, 7), (0, 10), (0, 11), (1, 11)], "anew at once, backoff reset");
        follow.abort();
    }

    /// A listing that takes long (a big resource, a slow API server) must not hold up acting on
    /// a change of the verdict: a loss meanwhile stops what is not ours at once, and a gain
    /// lists every scope anew.
    #[tokio::test(start_paused = true)]
    async fn a_change_during_a_listing_is_acted_on_at_once() {
        let authority = Authority::new(Ownership::Nothing);
        let attempts: Arc<Mutex<Vec<(usize, Instant)>>> = Arc::default();
        let noted = attempts.clone();
        let slow: ListScope<'static> = Box::new(move |scope| {
            let noted = noted.clone();
            Box::pin(async move {
                noted.lock().push((scope, Instant::now()));
                tokio::time::sleep(Duration::from_secs(60)).await;
                Ok(3)
            })
        });
        let changes: Arc<Mutex<Vec<Instant>>> = Arc::default();
        let counted = changes.clone();
        let follow = following(&authority, 1, move || counted.lock().push(Instant::now()), slow);
        tokio::task::yield_now().await;
        let start = Instant::now();
        authority.set_ownership(Ownership::All);
        tokio::time::sleep(Duration::from_secs(10)).await;
        authority.set_paused(true);
        tokio::time::sleep(Duration::from_millis(10)).await;
        let at: Vec<u64> = changes.lock().iter().map(|t| (*t - start).as_secs()).collect();
        assert_eq!(at, [0, 10], "the pause is acted on while the listing runs");
        authority.set_paused(false);
        tokio::time::sleep(Duration::from_millis(10)).await;
        let listed: Vec<(usize, u64)> = attempts.lock().iter().map(|(s, t)| (*s, (*t - start).as_secs())).collect();
        assert_eq!(listed, [(0, 0), (0, 10)], "the gain of the resume lists anew at once");
        follow.abort();
    }
}
