//! Child processes (killed when dropped, on every exit path) and what `/proc` says about
//! them: CPU time (utime + stime of all threads), peak RSS (VmHWM) and open sockets.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::process::{Child, ChildStdout, Command};

/// A child process of the bench, in a process group of its own; the whole group is
/// SIGKILLed when dropped (so a wrapper's children go too).
pub struct Proc {
    /// What it is, for messages.
    pub name: String,
    /// Its process id.
    pub pid: u32,
    /// Where its output goes.
    pub log: PathBuf,
    child: Child,
    reaped: bool,
}

impl Proc {
    /// Starts `cmd` with stdout and stderr into `log` (stdout piped instead when `pipe_stdout`).
    pub fn spawn(name: &str, mut cmd: Command, log: &Path, pipe_stdout: bool) -> Result<(Proc, Option<ChildStdout>)> {
        let file = std::fs::File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
        let stdout = if pipe_stdout { Stdio::piped() } else { Stdio::from(file.try_clone()?) };
        cmd.stdin(Stdio::null()).stdout(stdout).stderr(Stdio::from(file)).kill_on_drop(true).process_group(0);
        let mut child = cmd.spawn().with_context(|| format!("cannot start {name} ({cmd:?})"))?;
        let pid = child.id().context("the child has no pid")?;
        let out = child.stdout.take();
        Ok((Proc { name: name.into(), pid, log: log.into(), child, reaped: false }, out))
    }

    /// Whether it is still running (not gone, not a zombie).
    pub fn alive(&self) -> bool {
        match std::fs::read_to_string(format!("/proc/{}/stat", self.pid)) {
            Ok(stat) => {
                stat.rfind(')').and_then(|i| stat[i + 1..].split_whitespace().next()).is_some_and(|state| state != "Z" && state != "X")
            }
            Err(_) => false,
        }
    }

    /// Fails with its log's tail if it has exited.
    pub fn check_alive(&self) -> Result<()> {
        if self.alive() {
            return Ok(());
        }
        anyhow::bail!("{} exited early; its log ({}) ends with:\n{}", self.name, self.log.display(), self.log_tail(40))
    }

    /// CPU seconds and peak RSS so far.
    pub fn usage(&self) -> Result<Usage> {
        usage(self.pid).with_context(|| format!("cannot read /proc/{} of {}", self.pid, self.name))
    }

    /// The last `n` lines of its log.
    pub fn log_tail(&self, n: usize) -> String {
        log_tail(&self.log, n)
    }

    /// Asks its group to stop (SIGTERM), waits up to `grace`, then kills the group.
    pub async fn stop(mut self, grace: Duration) {
        signal_group(self.pid, "-TERM");
        let end = tokio::time::Instant::now() + grace;
        while self.alive() && tokio::time::Instant::now() < end {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Not reaped yet, so the group id cannot have been reused.
        signal_group(self.pid, "-KILL");
        let _ = self.child.wait().await;
        self.reaped = true;
    }
}

/// Sends a signal to the process group `pgid`.
fn signal_group(pgid: u32, signal: &str) {
    let _ = std::process::Command::new("kill").args([signal, "--", &format!("-{pgid}")]).stderr(Stdio::null()).status();
}

impl Drop for Proc {
    fn drop(&mut self) {
        // The group's id is the child's pid, held until the child is reaped (kill_on_drop
        // then reaps it).
        if !self.reaped {
            signal_group(self.pid, "-KILL");
        }
    }
}

/// The last `n` lines of a file.
pub fn log_tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// What a process used.
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    /// utime + stime of all its threads, in seconds.
    pub cpu_s: f64,
    /// Peak resident set size (VmHWM), in bytes.
    pub peak_rss: u64,
}

fn clock_ticks() -> f64 {
    static TICKS: OnceLock<f64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// CPU time and peak RSS of `pid`.
pub fn usage(pid: u32) -> Result<Usage> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces) in parentheses: state is field 3,
    // utime field 14 and stime field 15.
    let rest = &stat[stat.rfind(')').context("malformed stat")? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11).context("no utime")?.parse::<u64>()? + fields.get(12).context("no stime")?.parse::<u64>()?;
    Ok(Usage { cpu_s: ticks as f64 / clock_ticks(), peak_rss: status_bytes(pid, "VmHWM")? })
}

/// The resident set size of `pid` now (VmRSS), in bytes.
pub fn rss(pid: u32) -> Result<u64> {
    status_bytes(pid, "VmRSS")
}

/// A size in `/proc/PID/status` (`VmRSS`, `VmHWM`: kB), in bytes.
fn status_bytes(pid: u32, field: &str) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .with_context(|| format!("no {field} in /proc/{pid}/status"))?;
    Ok(kb * 1024)
}

/// How many of `pid`'s file descriptors are sockets.
pub fn sockets(pid: u32) -> usize {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return 0 };
    dir.filter_map(|e| e.ok()).filter(|e| std::fs::read_link(e.path()).is_ok_and(|t| t.to_string_lossy().starts_with("socket:"))).count()
}

/// Samples the socket count of a process every 50 ms, keeping the peak; stops when dropped.
pub struct SocketSampler {
    peak: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl SocketSampler {
    /// Starts sampling `pid`.
    pub fn start(pid: u32) -> SocketSampler {
        let peak = Arc::new(AtomicUsize::new(0));
        let p = peak.clone();
        let task = tokio::task::spawn_blocking(move || {
            // Stops when the process is gone or when the sampler is dropped (the Arc's last
            // other owner): whichever comes first.
            while Arc::strong_count(&p) > 1 && Path::new(&format!("/proc/{pid}")).exists() {
                p.fetch_max(sockets(pid), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        SocketSampler { peak, task }
    }

    /// The highest count seen so far.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }
}

impl Drop for SocketSampler {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Machine-wide CPU seconds (busy, all cores) since boot, from `/proc/stat`.
pub fn machine_busy_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = stat.lines().find(|l| l.starts_with("cpu ")) else { return 0.0 };
    // user nice system idle iowait irq softirq steal ...: busy is all but idle and iowait.
    let v: Vec<u64> = line.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
    let busy: u64 = v.iter().enumerate().filter(|(i, _)| *i != 3 && *i != 4).map(|(_, x)| *x).take(8).sum();
    busy as f64 / clock_ticks()
}
