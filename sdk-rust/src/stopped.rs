//! [`Stopped`]: whether a daemon was asked to stop, as its [`Cause`](crate::Cause) tells it.
//! A handler-facing type: the daemon's task (`daemon.rs`) holds the sending side.

use tokio::sync::watch;

/// Whether a daemon was asked to stop (Kopf's `stopped`). Never stops for other handlers.
#[derive(Debug, Clone, Default)]
pub struct Stopped {
    /// `None` for handlers that are not daemons.
    flag: Option<watch::Receiver<bool>>,
}

impl Stopped {
    /// A flag not raised yet, and the sender that raises it.
    pub(crate) fn new() -> (watch::Sender<bool>, Self) {
        let (tx, flag) = watch::channel(false);
        (tx, Stopped { flag: Some(flag) })
    }

    /// Whether the daemon was asked to stop.
    pub fn is_stopped(&self) -> bool {
        self.flag.as_ref().is_some_and(|flag| *flag.borrow())
    }

    /// Resolves when the daemon is asked to stop (never for other handlers): `select!` it
    /// against the daemon's own work, or sleep with `tokio::time::timeout(d, stopped.wait())`.
    pub async fn wait(&self) {
        match &self.flag {
            // A dropped sender means the daemon's task is gone: stopped too.
            Some(flag) => {
                let _ = flag.clone().wait_for(|stopped| *stopped).await;
            }
            None => futures::future::pending().await,
        }
    }
}
