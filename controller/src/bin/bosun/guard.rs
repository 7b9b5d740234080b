//! `bosun __guard -- COMMAND…`: what `run` and `dev` start in place of the handler server
//! command, so that the command never outlives them, however they end (Ctrl-C, SIGTERM, a
//! panic, an abort, SIGKILL, OOM).
//!
//! The guard leads the command's process group and starts the command in it. Its standard
//! input is a pipe whose other end only its `bosun` holds: when that `bosun` is gone, the
//! kernel closes the pipe, the guard reads its end, and ends the whole group (SIGTERM, then
//! SIGKILL after [`GRACE`], itself last). A pipe rather than `PR_SET_PDEATHSIG`: setting that
//! for the command needs `pre_exec`, which is `unsafe` (the workspace forbids it), it would
//! reach only the direct child, not the server a wrapper (`npm start`, `sh -c`) starts, and
//! it fires when the *thread* that forked ends, not the process.
//!
//! While its `bosun` lives the guard is transparent: the group's SIGTERM from `bosun` reaches
//! the command (the guard waits for it), and it exits as the command did (the command's
//! code, or 128 + the signal that ended it, as a shell says).

use std::process::Stdio;
use std::time::Duration;

use rustix::process::Signal;
use tokio::io::AsyncReadExt;

use crate::group;

/// The name of the hidden subcommand.
pub const SUBCOMMAND: &str = "__guard";

/// How long the command has after SIGTERM, once its `bosun` is gone, before SIGKILL.
pub const GRACE: Duration = Duration::from_secs(3);

/// `command` under a guard run by this very binary (`None`: the binary cannot be found, as
/// when it was replaced on disk while it runs).
pub fn guarded(command: &[String]) -> Option<Vec<String>> {
    let exe = std::env::current_exe().ok().filter(|p| p.is_file())?;
    let mut out = vec![exe.display().to_string(), SUBCOMMAND.to_string(), "--".to_string()];
    out.extend(command.iter().cloned());
    Some(out)
}

/// Runs `command` until it exits (exiting as it did) or until standard input ends (ending the
/// command's whole group, this process with it). Never returns but with an error starting it.
pub async fn guard(command: Vec<String>) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let Some((program, args)) = command.split_first() else { anyhow::bail!("bosun {SUBCOMMAND}: no command given") };
    // The group's SIGTERM and SIGINT are for the command: the guard waits for it to end.
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut child = match tokio::process::Command::new(program).args(args).stdin(Stdio::null()).spawn() {
        Ok(child) => child,
        Err(e) => {
            // As a shell says it: one line, and 126 (found, not runnable) or 127 (not found).
            eprintln!("The handler server command could not start: {program}: {e}");
            std::process::exit(if e.kind() == std::io::ErrorKind::NotFound { 127 } else { 126 });
        }
    };
    let mut stdin = tokio::io::stdin();
    let mut buf = [0u8; 64];
    loop {
        tokio::select! {
            status = child.wait() => std::process::exit(status.map_or(1, exit_code)),
            read = stdin.read(&mut buf) => {
                if matches!(read, Ok(0) | Err(_)) {
                    break;
                }
            }
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
    }
    // Its bosun is gone: end the command's group, then the guard with it.
    let me = rustix::process::getpid();
    let _ = group::signal(me, Signal::TERM);
    group::wait_ended(&mut child, GRACE, || group::others_run(me)).await;
    let _ = group::signal(me, Signal::KILL);
    std::process::exit(137)
}

/// The exit code the guard reports for the command's `status`, as a shell would.
fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status.code().or_else(|| status.signal().map(|s| 128 + s)).unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn the_guard_exits_as_a_shell_says_its_command_ended() {
        // Wait statuses as waitpid(2) gives them: the code in the high byte, a signal in the low.
        let cases = [("exit 0", 0, 0), ("exit 3", 3 << 8, 3), ("SIGKILL", 9, 137), ("SIGTERM", 15, 143)];
        for (name, raw, want) in cases {
            assert_eq!(super::exit_code(std::process::ExitStatus::from_raw(raw)), want, "{name}");
        }
    }

    #[test]
    fn a_guarded_command_runs_this_binary_first() {
        let guarded = super::guarded(&["sh".into(), "-c".into(), "x".into()]).expect("the test binary is found");
        assert_eq!(&guarded[1..], ["__guard", "--", "sh", "-c", "x"]);
    }
}
