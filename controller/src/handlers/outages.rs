//! Which handler servers are down and which objects wait for each, so that an outage is
//! logged once per server (with how many objects it held up), not once per object and retry;
//! and the revival that wakes the waiting objects when a server is back.
//!
//! The waiting objects are woken one after the other, in the order they began to wait, a
//! short step apart ([`stagger`]), not all at once: a server that has just restarted is not
//! flooded with every call it missed, and when one object's handler makes it exit again, only
//! the few calls in flight at that moment go with it, not every object's.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// The step between two woken objects, while they fit in [`STAGGER_SPAN`].
pub const STAGGER_STEP: Duration = Duration::from_millis(100);

/// The longest time over which the objects of one revival are woken.
pub const STAGGER_SPAN: Duration = Duration::from_secs(10);

/// When the `rank`-th (from 0) of `waiting` objects is woken after a revival: [`STAGGER_STEP`]
/// apart, or closer when that would take longer than [`STAGGER_SPAN`].
pub fn stagger(rank: usize, waiting: usize) -> Duration {
    let step = STAGGER_STEP.min(STAGGER_SPAN / u32::try_from(waiting.max(1)).unwrap_or(u32::MAX));
    step.saturating_mul(u32::try_from(rank).unwrap_or(u32::MAX)).min(STAGGER_SPAN)
}

/// The end of one server's outage, as the objects that waited for it see it.
#[derive(Debug, Clone, Default)]
pub struct Revival {
    /// The objects that waited (`namespace/name`), by the order they began to wait.
    ranks: Arc<HashMap<String, usize>>,
}

impl Revival {
    /// How long `object` waits before it goes on; `None` when it did not wait for this server.
    pub fn wake_after(&self, object: &str) -> Option<Duration> {
        self.ranks.get(object).map(|rank| stagger(*rank, self.ranks.len()))
    }
}

/// The handler servers that are down, by address, with the objects that wait for each.
#[derive(Debug)]
pub struct Outages {
    down: parking_lot::Mutex<HashMap<String, HashMap<String, usize>>>,
    revivals: tokio::sync::watch::Sender<Revival>,
}

impl Default for Outages {
    fn default() -> Outages {
        Outages { down: Default::default(), revivals: tokio::sync::watch::Sender::new(Revival::default()) }
    }
}

impl Outages {
    /// Notes that `object` could not reach `addr`; `true` when this starts an outage.
    pub fn down(&self, addr: &str, object: &str) -> bool {
        let mut down = self.down.lock();
        let starts = !down.contains_key(addr);
        let waiting = down.entry(addr.to_string()).or_default();
        let rank = waiting.len();
        waiting.entry(object.to_string()).or_insert(rank);
        if starts {
            server_up(addr, false);
        }
        starts
    }

    /// Notes that the connection to `addr` is lost, before any object noticed.
    pub fn lost(&self, addr: &str) {
        self.down.lock().entry(addr.to_string()).or_default();
        server_up(addr, false);
    }

    /// Notes that `addr` answered; `Some(n)` when this ends an outage that held up `n`
    /// objects, which are woken one after the other.
    pub fn up(&self, addr: &str) -> Option<usize> {
        let mut down = self.down.lock();
        if down.is_empty() {
            return None;
        }
        let waited = down.remove(addr)?;
        let n = waited.len();
        self.revivals.send_replace(Revival { ranks: Arc::new(waited) });
        server_up(addr, true);
        Some(n)
    }

    /// Changes each time an outage ends: objects that wait for a server wait on it too.
    pub fn revivals(&self) -> tokio::sync::watch::Receiver<Revival> {
        self.revivals.subscribe()
    }
}

/// Sets `bosun_handler_server_up` of `addr`.
pub(crate) fn server_up(addr: &str, up: bool) {
    crate::metrics::global().server_up.get_or_create(&crate::metrics::ServerLabels { server: addr.to_string() }).set(i64::from(up));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_starts_once_and_ends_with_the_number_of_objects_it_held_up() {
        let o = Outages::default();
        assert_eq!(o.up("a"), None);
        assert!(o.down("a", "ns/x"));
        assert!(!o.down("a", "ns/y"));
        assert!(!o.down("a", "ns/x"));
        assert!(o.down("b", "ns/x"));
        assert_eq!(o.up("a"), Some(2));
        assert_eq!(o.up("a"), None);
        assert!(o.down("a", "ns/z"), "a new outage");
    }

    #[test]
    fn the_end_of_an_outage_is_signalled_once() {
        let o = Outages::default();
        let mut revivals = o.revivals();
        assert_eq!(o.up("a"), None);
        assert!(!revivals.has_changed().unwrap(), "no outage, no revival");
        o.lost("a");
        assert!(!o.down("a", "ns/x"), "the outage began when the connection was lost");
        assert_eq!(o.up("a"), Some(1));
        assert!(revivals.has_changed().unwrap());
        revivals.borrow_and_update();
        assert_eq!(o.up("a"), None);
        assert!(!revivals.has_changed().unwrap());
    }

    #[test]
    fn the_objects_that_waited_are_woken_in_the_order_they_began_to_wait_a_step_apart() {
        let o = Outages::default();
        let mut revivals = o.revivals();
        for object in ["ns/c", "ns/a", "ns/b", "ns/a"] {
            o.down("s", object);
        }
        o.down("other", "ns/z");
        assert_eq!(o.up("s"), Some(3));
        let revival = revivals.borrow_and_update().clone();
        let ms = |object: &str| revival.wake_after(object).map(|d| d.as_millis());
        assert_eq!([ms("ns/c"), ms("ns/a"), ms("ns/b")], [Some(0), Some(100), Some(200)]);
        assert_eq!(ms("ns/z"), None, "it waits for another server");
    }

    #[test]
    fn a_revival_of_many_objects_is_spread_over_ten_seconds_at_most() {
        let cases = [
            (0, 1, 0),
            (1, 2, 100),
            (99, 100, 9_900),
            (999, 1_000, 9_990),
            (99_999, 100_000, 9_999),
            (5, 3, 500),
            (usize::MAX, 1, 10_000), // never past the span
        ];
        for (rank, waiting, ms) in cases {
            assert_eq!(stagger(rank, waiting).as_millis(), ms, "{rank} of {waiting}");
        }
    }
}
