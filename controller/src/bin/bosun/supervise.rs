//! The handler server command under `bosun dev`, supervised: restarted with backoff when it
//! exits, its output prefixed `[handler]`. It runs in a process group of its own, because the
//! command is often a wrapper (`npm start`, `cargo run`, `sh -c`) whose server is a grandchild:
//! ending only the direct child would leave the server running and its port taken. When bosun
//! stops or restarts the command, the whole group gets SIGTERM, then SIGKILL after [`GRACE`].

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use bosun_controller::logs::Logger;
use rustix::io::Errno;
use rustix::process::{Pid, Signal};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;

/// How long the handler server's process group has to exit after SIGTERM before SIGKILL.
const GRACE: Duration = Duration::from_secs(5);

/// A supervised handler server command.
pub struct Supervised {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Supervised {
    /// Ends the command's process group and waits for it.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// Starts `command` as the handler server on a free loopback port (in `$BOSUN_LISTEN`) and
/// adds that address to the controller's handler servers; `kubeconfig` goes to its
/// `KUBECONFIG`.
pub fn start(command: Vec<String>, settings: &mut bosun_controller::Settings, kubeconfig: Option<PathBuf>) -> std::io::Result<Supervised> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let listen = format!("127.0.0.1:{port}");
    settings.handlers.push(format!("http://{listen}"));
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(supervise(command, listen, kubeconfig, Logger::new(None), stop_rx));
    Ok(Supervised { stop, task })
}

/// Keeps the handler server command running until `stop`, restarting it with backoff.
async fn supervise(
    command: Vec<String>,
    listen: String,
    kubeconfig: Option<PathBuf>,
    log: Logger,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut delay = Duration::from_secs(1);
    loop {
        log.info(None, &format!("Starting the handler server: {} (BOSUN_LISTEN={listen})", command.join(" ")));
        let mut cmd = tokio::process::Command::new(&command[0]);
        if let Some(k) = &kubeconfig {
            cmd.env("KUBECONFIG", k);
        }
        let spawned = cmd
            .args(&command[1..])
            .env("BOSUN_LISTEN", &listen)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn();
        let started = Instant::now();
        match spawned {
            Err(e) => log.error(None, &format!("The handler server command could not start: {e}")),
            Ok(mut child) => {
                // The child leads its new group: the group's id is the child's pid, known only
                // until the child is reaped.
                let group = child.id().and_then(|id| i32::try_from(id).ok()).and_then(Pid::from_raw);
                if let Some(out) = child.stdout.take() {
                    tokio::spawn(prefix_lines(out));
                }
                if let Some(err) = child.stderr.take() {
                    tokio::spawn(prefix_lines(err));
                }
                let stopping = tokio::select! {
                    status = child.wait() => {
                        let status = status.map(|s| s.to_string()).unwrap_or_else(|e| e.to_string());
                        log.warn(None, &format!("The handler server exited ({status}); restarting it in {delay:?}."));
                        false
                    }
                    _ = stop.changed() => true,
                };
                // What the command started may outlive it: end the group before a restart too.
                if let Some(group) = group {
                    end_group(&mut child, group, &log).await;
                }
                if stopping {
                    return;
                }
            }
        }
        if started.elapsed() > Duration::from_secs(30) {
            delay = Duration::from_secs(1);
        }
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(Duration::from_secs(30));
    }
}

/// Ends the process group `group` led by `child`: SIGTERM to all of it, SIGKILL to whatever
/// still runs after [`GRACE`]; `child` is reaped either way.
async fn end_group(child: &mut Child, group: Pid, log: &Logger) {
    signal_group(group, Signal::TERM, log);
    let deadline = Instant::now() + GRACE;
    loop {
        let _ = child.try_wait(); // reaps the leader, so that it stops counting as running
        if !group_runs(group) {
            return;
        }
        if Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    log.warn(None, &format!("The handler server did not exit within {GRACE:?} of SIGTERM; killing it."));
    signal_group(group, Signal::KILL, log);
    let _ = child.wait().await;
}

fn signal_group(group: Pid, signal: Signal, log: &Logger) {
    match rustix::process::kill_process_group(group, signal) {
        Ok(()) | Err(Errno::SRCH) => {} // SRCH: every process of the group is gone already
        Err(e) => log.warn(None, &format!("Cannot send {signal:?} to the handler server's process group {group:?}: {e}")),
    }
}

/// Whether a process of `group` still runs.
fn group_runs(group: Pid) -> bool {
    match rustix::process::test_kill_process_group(group) {
        Err(Errno::SRCH) => false,
        // Members that already exited but wait to be reaped count for kill(2). Orphans are
        // reaped by init, which in some containers never does: they are dead all the same.
        _ => live_member(group).unwrap_or(true),
    }
}

/// Whether `/proc` shows a process of `group` that is not a zombie (`None`: cannot tell).
#[cfg(target_os = "linux")]
fn live_member(group: Pid) -> Option<bool> {
    let group = group.as_raw_nonzero().to_string();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        if !entry.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // `pid (comm) state ppid pgrp ...`; comm may hold spaces and parentheses.
        let Some((_, fields)) = stat.rsplit_once(')') else { continue };
        let mut fields = fields.split_whitespace();
        let (state, pgrp) = (fields.next(), fields.nth(1));
        if pgrp == Some(group.as_str()) && !matches!(state, Some("Z" | "X")) {
            return Some(true);
        }
    }
    Some(false)
}

#[cfg(not(target_os = "linux"))]
fn live_member(_: Pid) -> Option<bool> {
    None
}

async fn prefix_lines(stream: impl tokio::io::AsyncRead + Unpin) {
    let mut lines = BufReader::new(stream).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        eprintln!("[handler] {line}");
    }
}
