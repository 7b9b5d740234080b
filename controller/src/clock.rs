//! The controller's clock, shared by everything that schedules: wall time in production, time
//! that moves with tokio's paused clock in tests (retries, timers, leases, peering).

use chrono::{DateTime, Utc};
use tokio::time::Instant;

/// The controller's clock: wall time, or time that moves with tokio's (paused) clock in tests.
#[derive(Debug, Clone, Copy)]
pub enum Clock {
    /// `Utc::now()`.
    Wall,
    /// Wall time at `at`, moving with `tokio::time::Instant` from there.
    Tokio {
        /// The wall time at `at`.
        utc: DateTime<Utc>,
        /// The tokio instant it was read at.
        at: Instant,
    },
    /// As `Tokio`, plus a step that may change while it runs, in milliseconds: a wall clock
    /// that an NTP step moves (the replica simulation's).
    Stepping {
        /// The wall time at `at`, before any step.
        utc: DateTime<Utc>,
        /// The tokio instant it was read at.
        at: Instant,
        /// The steps so far, summed.
        step_ms: &'static std::sync::atomic::AtomicI64,
    },
}

/// The longest sleep the runtime schedules (later wakes are re-checked then).
const FAR: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 3600);

impl Clock {
    /// A clock that follows tokio's time (for tests under `tokio::time::pause()`).
    pub fn tokio() -> Clock {
        Clock::Tokio { utc: Utc::now(), at: Instant::now() }
    }

    /// Now.
    pub fn now(&self) -> DateTime<Utc> {
        match self {
            Clock::Wall => Utc::now(),
            Clock::Tokio { utc, at } => *utc + chrono::Duration::from_std(at.elapsed()).unwrap_or_default(),
            Clock::Stepping { utc, at, step_ms } => {
                let step = chrono::Duration::milliseconds(step_ms.load(std::sync::atomic::Ordering::Relaxed));
                Clock::Tokio { utc: *utc, at: *at }.now() + step
            }
        }
    }

    /// The tokio instant at which wall time `t` comes (at most [`FAR`] ahead).
    pub fn instant(&self, t: DateTime<Utc>) -> Instant {
        let ahead = (t - self.now()).to_std().unwrap_or_default().min(FAR);
        Instant::now() + ahead
    }
}
