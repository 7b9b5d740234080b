//! Request counters exposed on `/metrics` in the Prometheus text format, named like the
//! real server's (`apiserver_request_total{verb,group,version,resource,subresource,code}`),
//! so tests and benchmarks can count API calls.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use parking_lot::Mutex;

/// Labels of one counter.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    /// `GET`, `LIST`, `WATCH`, `POST`, `PUT`, `PATCH`, `DELETE`, `DELETECOLLECTION`, `APPLY`.
    pub verb: &'static str,
    /// API group.
    pub group: String,
    /// Version.
    pub version: String,
    /// Resource plural.
    pub resource: String,
    /// Subresource, e.g. `status`.
    pub subresource: String,
    /// HTTP status code.
    pub code: u16,
}

/// The counters.
#[derive(Default)]
pub struct Metrics {
    counts: Mutex<BTreeMap<Key, u64>>,
    /// Requests being answered: mutating, read-only (watches, which are long-running, left out).
    mutating: Arc<AtomicI64>,
    read_only: Arc<AtomicI64>,
}

/// One request being answered, counted while this lives.
pub struct InFlight(Arc<AtomicI64>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Metrics {
    /// Count a request as being answered until the guard is dropped.
    pub fn in_flight(&self, mutating: bool) -> InFlight {
        let gauge = if mutating { &self.mutating } else { &self.read_only };
        gauge.fetch_add(1, Ordering::SeqCst);
        InFlight(gauge.clone())
    }

    /// Mutating requests being answered now.
    pub fn mutating_in_flight(&self) -> i64 {
        self.mutating.load(Ordering::SeqCst)
    }

    /// Count one request.
    pub fn count(&self, key: Key) {
        *self.counts.lock().entry(key).or_default() += 1;
    }

    /// Render the Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        out.push_str("# HELP apiserver_request_total Counter of apiserver requests broken out for each verb, group, version, resource, subresource and HTTP response code.\n");
        out.push_str("# TYPE apiserver_request_total counter\n");
        for (k, v) in self.counts.lock().iter() {
            let _ = writeln!(
                out,
                "apiserver_request_total{{code=\"{}\",group=\"{}\",resource=\"{}\",subresource=\"{}\",verb=\"{}\",version=\"{}\"}} {v}",
                k.code, k.group, k.resource, k.subresource, k.verb, k.version
            );
        }
        out.push_str("# HELP apiserver_current_inflight_requests Number of requests being answered, per request kind (watches are long-running and left out).\n");
        out.push_str("# TYPE apiserver_current_inflight_requests gauge\n");
        for (kind, gauge) in [("mutating", &self.mutating), ("readOnly", &self.read_only)] {
            let _ = writeln!(out, "apiserver_current_inflight_requests{{request_kind=\"{kind}\"}} {}", gauge.load(Ordering::SeqCst));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_render_with_their_labels() {
        let m = Metrics::default();
        let key =
            Key { verb: "GET", group: String::new(), version: "v1".into(), resource: "pods".into(), subresource: String::new(), code: 200 };
        m.count(key.clone());
        m.count(key);
        assert!(
            m.render().contains(
                "apiserver_request_total{code=\"200\",group=\"\",resource=\"pods\",subresource=\"\",verb=\"GET\",version=\"v1\"} 2"
            )
        );
    }
}
