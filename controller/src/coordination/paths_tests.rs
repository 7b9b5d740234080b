//! One replica's own path to a shared fake API server, for the coordination tests: it can
//! stall (requests sent from then on neither fail nor answer, as behind a dead load balancer),
//! stall its writes alone, and refuse chosen writes (answered 500, not applied).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::future::BoxFuture;
use http::Method;
use parking_lot::Mutex;
use serde_json::Value;

use crate::cluster::{Api, Error};

/// Which writes a path refuses: given the method and the body sent.
type Refusal = Box<dyn Fn(&Method, &Value) -> bool + Send + Sync>;

/// A path to `inner` that may stall or refuse writes.
pub struct Path {
    inner: Arc<dyn Api>,
    stalled: AtomicBool,
    writes_stalled: AtomicBool,
    pub refuse: Mutex<Option<Refusal>>,
}

impl Path {
    pub fn new(inner: Arc<dyn Api>) -> Arc<Path> {
        Arc::new(Path { inner, stalled: AtomicBool::new(false), writes_stalled: AtomicBool::new(false), refuse: Mutex::new(None) })
    }

    /// Requests sent from now on hang (or, `false`, answer again).
    pub fn stall(&self, stalled: bool) {
        self.stalled.store(stalled, Ordering::SeqCst);
    }

    /// Writes (POST, PUT, PATCH) sent from now on hang (or, `false`, answer again).
    pub fn stall_writes(&self, stalled: bool) {
        self.writes_stalled.store(stalled, Ordering::SeqCst);
    }

    /// Writes (POST, PUT, PATCH) whose body `refuse` picks fail with a 500, not applied.
    pub fn refuse(&self, refuse: impl Fn(&Method, &Value) -> bool + Send + Sync + 'static) {
        *self.refuse.lock() = Some(Box::new(refuse));
    }
}

impl Api for Path {
    fn request<'a>(
        &'a self,
        method: Method,
        path: &'a str,
        ct: Option<&'a str>,
        body: Option<Vec<u8>>,
    ) -> BoxFuture<'a, Result<Value, Error>> {
        Box::pin(async move {
            if self.stalled.load(Ordering::SeqCst) {
                std::future::pending::<()>().await;
            }
            let write = matches!(method, Method::POST | Method::PUT | Method::PATCH);
            if write && self.writes_stalled.load(Ordering::SeqCst) {
                std::future::pending::<()>().await;
            }
            let sent: Value = body.as_deref().and_then(|b| serde_json::from_slice(b).ok()).unwrap_or(Value::Null);
            if write && self.refuse.lock().as_ref().is_some_and(|r| r(&method, &sent)) {
                return Err(Error::Api { method, path: path.into(), code: 500, reason: "InternalError".into(), message: "refused".into() });
            }
            self.inner.request(method, path, ct, body).await
        })
    }
}
