//! The daemons running now ([`Running`]), so that `StopDaemon` finds the one it names; the
//! daemons are started in `daemon.rs`.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::watch;

/// A running daemon's start number and stop flag, by handler id and object uid.
type Instances = HashMap<(String, String), (u64, Arc<watch::Sender<bool>>)>;

/// The daemons running now, by handler id and object uid, with a number for each start (an
/// instance that ends late must not forget a newer one): `StopDaemon` finds them here.
#[derive(Debug, Clone, Default)]
pub(crate) struct Running {
    daemons: Arc<parking_lot::Mutex<Instances>>,
    starts: Arc<AtomicU64>,
}

impl Running {
    /// Notes a daemon that started; returns its number.
    pub(crate) fn add(&self, id: &str, uid: &str, stop: Arc<watch::Sender<bool>>) -> u64 {
        let n = self.starts.fetch_add(1, Ordering::Relaxed);
        self.daemons.lock().insert((id.to_string(), uid.to_string()), (n, stop));
        n
    }

    /// Forgets the daemon number `n`, which ended.
    pub(crate) fn remove(&self, id: &str, uid: &str, n: u64) {
        let mut daemons = self.daemons.lock();
        let key = (id.to_string(), uid.to_string());
        if daemons.get(&key).is_some_and(|(started, _)| *started == n) {
            daemons.remove(&key);
        }
    }

    /// Asks the daemon `id` of the object `uid` to stop; whether it runs.
    pub(crate) fn stop(&self, id: &str, uid: &str) -> bool {
        match self.daemons.lock().get(&(id.to_string(), uid.to_string())) {
            Some((_, stop)) => {
                stop.send_replace(true);
                true
            }
            None => false,
        }
    }
}
