//! How a replica that holds a Lease stops (a leader releasing it, a shard member leaving its
//! group): it owns nothing from the start, keeps renewing while the turns in flight end (so
//! that nobody takes over under them), stops them by force if they outlast a lease duration,
//! and gives the Lease up only once they have ended; if they outlast a second duration, the
//! Lease is left to expire instead.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::Authority;
use crate::logs::Logger;

/// A Lease holder that drains: leader election's candidate, a shard member.
pub(crate) trait Draining {
    /// How often it looks at its Lease.
    fn retry(&self) -> Duration;
    /// When its renew deadline passes, if it holds the Lease.
    fn renew_deadline(&self) -> Option<Instant>;
    /// Its renew deadline's timer fired (or may have).
    fn deadline_passed(&mut self);

    /// Waits until `until` resolves (true) or the next look is due (false), firing the renew
    /// deadline meanwhile.
    async fn pause(&mut self, until: impl Future<Output = ()>) -> bool {
        let mut until = std::pin::pin!(until);
        let next = Instant::now() + self.retry();
        loop {
            let deadline = self.renew_deadline();
            tokio::select! {
                _ = &mut until => return true,
                _ = tokio::time::sleep_until(next) => return false,
                _ = async { tokio::time::sleep_until(deadline.unwrap_or(next)).await }, if deadline.is_some() => self.deadline_passed(),
            }
        }
    }

    /// Renews the Lease once.
    async fn renew_once(&mut self);
    /// Requests give up at `at` from now on.
    fn give_up_at(&mut self, at: Instant);
}

/// Drains `holder` until the turns of `authority` have ended (true), or until they outlasted
/// the revocation after `duration` by another `duration` (false: the Lease is left to
/// expire). `lease` names it in the log (`leader Lease`), `given_up` says how it goes
/// (`released`).
pub(crate) async fn drain(
    holder: &mut impl Draining,
    authority: &Authority,
    duration: Duration,
    log: &Logger,
    lease: &str,
    given_up: &str,
) -> bool {
    let mut bound = Instant::now() + duration;
    let mut revoked = false;
    loop {
        holder.give_up_at(bound);
        let turns = authority.clone();
        if holder.pause(async move { turns.settled().await }).await {
            return true;
        }
        if Instant::now() >= bound {
            if revoked {
                log.warn(None, &format!("Some cycles did not end in time; the {lease} is left to expire."));
                return false;
            }
            log.warn(None, &format!("Some cycles did not end in time; stopping them before the {lease} is {given_up}."));
            authority.revoke();
            revoked = true;
            bound = Instant::now() + duration;
            continue;
        }
        holder.renew_once().await;
    }
}

/// Resolves once `stop` is true (or its sender is gone).
pub(super) async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}
