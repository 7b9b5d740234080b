//! Engines that do the controller's outward work besides the API server: dispatching causes
//! to handler servers, posting events, the liveness endpoint, admission webhooks (the endpoint,
//! its HTTPS server and certificate, the webhook configurations), and the trace context that
//! travels with calls.

pub mod admission;
pub mod dispatch;
pub mod failures;
pub mod liveness;
pub mod memory;
pub mod outages;
pub mod posting;
#[cfg(test)]
pub(crate) mod recording;
pub mod trace_context;
pub mod webhooks;

use std::time::Duration;

/// A duration as people write it: `3s`, `1.5s`, `250ms`, `2m`.
pub fn human(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms.is_multiple_of(60_000) {
        format!("{}m", ms / 60_000)
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_people_write_them() {
        let cases = [(250, "250ms"), (3000, "3s"), (1500, "1.5s"), (120_000, "2m"), (90_000, "90s")];
        for (ms, want) in cases {
            assert_eq!(human(Duration::from_millis(ms)), want);
        }
    }
}
