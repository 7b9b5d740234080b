//! Process groups of handler server commands: signalling one whole, and telling whether any of
//! it still runs.

use std::time::{Duration, Instant};

use rustix::io::Errno;
use rustix::process::{Pid, Signal};
use tokio::process::Child;

/// Sends `signal` to every process of `group`; a group with nothing left in it is no error.
pub fn signal(group: Pid, signal: Signal) -> Result<(), Errno> {
    match rustix::process::kill_process_group(group, signal) {
        Ok(()) | Err(Errno::SRCH) => Ok(()), // SRCH: every process of the group is gone already
        Err(e) => Err(e),
    }
}

/// Whether a process of `group` still runs.
pub fn runs(group: Pid) -> bool {
    match rustix::process::test_kill_process_group(group) {
        Err(Errno::SRCH) => false,
        // Members that already exited but wait to be reaped count for kill(2). Orphans are
        // reaped by init, which in some containers never does: they are dead all the same.
        _ => live_member(group, None).unwrap_or(true),
    }
}

/// Whether a process of the group `leader` leads, other than `leader`, still runs (where that
/// cannot be told: yes).
pub fn others_run(leader: Pid) -> bool {
    live_member(leader, Some(leader)).unwrap_or(true)
}

/// Waits until `runs` says nothing runs (true) or `grace` has passed (false), looking every
/// 50 ms and reaping `child` meanwhile, so that it stops counting as running once it exited.
pub async fn wait_ended(child: &mut Child, grace: Duration, runs: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + grace;
    loop {
        let _ = child.try_wait();
        if !runs() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether `/proc` shows a process of `group` (but `except`) that is not a zombie (`None`:
/// cannot tell).
#[cfg(target_os = "linux")]
fn live_member(group: Pid, except: Option<Pid>) -> Option<bool> {
    let except = except.map(|p| p.as_raw_nonzero().to_string());
    let group = group.as_raw_nonzero().to_string();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        if !entry.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if except.as_deref() == Some(&*entry.file_name().to_string_lossy()) {
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
fn live_member(_: Pid, _: Option<Pid>) -> Option<bool> {
    None
}
