//! The barrier of Kopf's guarantee about indices: no resource handler is called before every
//! index has seen the first listing of its resource (see [`super::indexing`]).

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

/// The barrier between the indices and every other resource handler: open while no served
/// resource is still indexing its first listing.
pub struct IndexGate {
    held: Mutex<HashMap<String, usize>>,
    open: tokio::sync::watch::Sender<bool>,
}

impl Default for IndexGate {
    fn default() -> Self {
        IndexGate { held: Mutex::default(), open: tokio::sync::watch::channel(true).0 }
    }
}

impl IndexGate {
    /// Closes the gate until the returned hold is dropped (holds of the same name add up).
    pub fn hold(self: &Arc<Self>, what: &str) -> GateHold {
        let mut held = self.held.lock();
        *held.entry(what.to_string()).or_default() += 1;
        self.open.send_replace(false);
        GateHold { gate: self.clone(), what: what.to_string() }
    }

    fn release(&self, what: &str) {
        let mut held = self.held.lock();
        if let Some(n) = held.get_mut(what) {
            *n -= 1;
            if *n == 0 {
                held.remove(what);
            }
        }
        if held.is_empty() {
            self.open.send_replace(true);
        }
    }

    /// Whether no index is being populated.
    pub fn is_open(&self) -> bool {
        *self.open.borrow()
    }

    /// Resolves once the gate is open.
    pub async fn opened(&self) {
        let mut rx = self.open.subscribe();
        let _ = rx.wait_for(|open| *open).await;
    }

    /// The resources whose indices are being populated, sorted.
    pub fn waiting_for(&self) -> Vec<String> {
        let mut v: Vec<String> = self.held.lock().keys().cloned().collect();
        v.sort();
        v
    }
}

/// Keeps the [`IndexGate`] closed until dropped.
pub struct GateHold {
    gate: Arc<IndexGate>,
    what: String,
}

impl Drop for GateHold {
    fn drop(&mut self) {
        self.gate.release(&self.what);
    }
}
