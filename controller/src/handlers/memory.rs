//! The in-process transport to handler servers (`mem://NAME`), for simulations and tests: a
//! server registers NAME and receives one [`DuplexStream`] per connection the controller makes;
//! it serves gRPC on them as on accepted sockets (tonic's `serve_with_incoming`). A name no
//! server listens on refuses connections, as a closed port does, so a server that stops (or
//! is made to crash) is seen by the controller as one that went away. Everything stays in one
//! process and on tokio's clock: the replica simulation (`tests/src/sim`) runs the real
//! dispatch code on it under a paused clock.

use std::collections::HashMap;
use std::sync::LazyLock;

use parking_lot::Mutex;
use tokio::io::DuplexStream;
use tokio::sync::mpsc;

/// The buffer of each direction of a connection.
const BUFFER: usize = 256 * 1024;

/// The listeners by name.
static LISTENERS: LazyLock<Mutex<HashMap<String, mpsc::UnboundedSender<DuplexStream>>>> = LazyLock::new(Default::default);

/// Listens on `mem://name`: the connections made to it from now on (replacing any listener
/// of that name). Dropping the receiver closes the listener.
pub fn listen(name: &str) -> mpsc::UnboundedReceiver<DuplexStream> {
    let (tx, rx) = mpsc::unbounded_channel();
    LISTENERS.lock().insert(name.to_string(), tx);
    rx
}

/// Stops listening on `mem://name`: later connections are refused.
pub fn close(name: &str) {
    LISTENERS.lock().remove(name);
}

/// Connects to `mem://name`; refused when nothing listens there.
pub fn connect(name: &str) -> std::io::Result<DuplexStream> {
    let refused = || std::io::Error::new(std::io::ErrorKind::ConnectionRefused, format!("nothing listens on mem://{name}"));
    let listeners = LISTENERS.lock();
    let tx = listeners.get(name).ok_or_else(refused)?;
    let (ours, theirs) = tokio::io::duplex(BUFFER);
    tx.send(theirs).map_err(|_| refused())?;
    Ok(ours)
}
