//! The handler server command under `bosun run` and `bosun dev` (handler files served by the
//! Python or TypeScript SDK, or a command in any language), supervised: restarted with backoff when it
//! exits, its output prefixed `[handler]`. It runs in a process group of its own, because the
//! command is often a wrapper (`npm start`, `cargo run`, `sh -c`) whose server is a grandchild:
//! ending only the direct child would leave the server running and its port taken. When bosun
//! stops or restarts the command, the whole group gets SIGTERM, then SIGKILL after [`GRACE`].
//! The command runs under a guard (`bosun __guard`, [`guard`]) that ends the group when this
//! process is gone without a word (SIGKILL, an abort).

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bosun_controller::logs::Logger;
use clap::Args;
use rustix::process::{Pid, Signal};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;

use crate::group;
use crate::guard;
use crate::handler_files::{self, Sdk};

/// The handler server that `run` and `dev` start themselves: handler files (Python's served by
/// Bosun's Python SDK, `python -m bosun`; TypeScript's and JavaScript's by its TypeScript SDK),
/// Python modules, or any command after `--`.
#[derive(Debug, Args, Clone)]
pub struct HandlerServerArgs {
    /// Handler files, served by Bosun's SDK for their language as a child (`bosun dev
    /// handlers.py`, as `kopf run handlers.py` does; `bosun dev handlers.ts`): Python (.py) or
    /// TypeScript/JavaScript (.ts, .mts, .cts, .js, .mjs, .cjs: the `bosun-operator` npm
    /// package, installed in a node_modules next to the file or above it).
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Python modules with handlers, as `kopf run -m MODULE` (repeatable).
    #[arg(short = 'm', long = "module", value_name = "MODULE")]
    pub modules: Vec<String>,
    /// The Python interpreter for FILE.py and -m (default: the `python3` or `python` beside
    /// this `bosun` binary, as in a virtualenv where `pip install` put both, else `python3`).
    #[arg(long, env = "BOSUN_PYTHON", value_name = "PATH")]
    pub python: Option<PathBuf>,
    /// The Node.js for FILE.ts and FILE.js (default: `node`).
    #[arg(long, env = "BOSUN_NODE", value_name = "PATH")]
    pub node: Option<PathBuf>,
    /// The handler server command to start (and restart) as a child; it must listen where
    /// $BOSUN_LISTEN says.
    #[arg(last = true)]
    pub command: Vec<String>,
}

impl HandlerServerArgs {
    /// The command to start as the handler server, if these flags name one.
    pub fn command(&self, verbose: bool) -> anyhow::Result<Option<Vec<String>>> {
        if self.files.is_empty() && self.modules.is_empty() {
            return Ok((!self.command.is_empty()).then(|| self.command.clone()));
        }
        if !self.command.is_empty() {
            anyhow::bail!("give either handler files (FILE, -m MODULE) or a handler server command after --, not both");
        }
        let sdk = handler_files::sdk_for(&self.files, !self.modules.is_empty()).map_err(anyhow::Error::msg)?;
        let mut files = Vec::new();
        for file in &self.files {
            if !file.is_file() {
                anyhow::bail!("{}: no such handler file", file.display());
            }
            files.push(std::path::absolute(file)?);
        }
        match sdk {
            Sdk::Python => self.python_command(files, verbose).map(Some),
            Sdk::Node => self.node_command(files).map(Some),
        }
    }

    fn python_command(&self, files: Vec<PathBuf>, verbose: bool) -> anyhow::Result<Vec<String>> {
        let python = self.interpreter();
        // Checked once here: a missing SDK would otherwise be a restart loop of the child.
        let probe = std::process::Command::new(&python)
            .args(["-c", "import bosun.v1.handler_pb2"])
            .stdin(std::process::Stdio::null())
            .output()
            .with_context(|| format!("cannot start the Python interpreter {} (set --python or BOSUN_PYTHON)", python.display()))?;
        if !probe.status.success() {
            let stderr = String::from_utf8_lossy(&probe.stderr);
            let last = stderr.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("");
            anyhow::bail!(
                "the Python at {} cannot import Bosun's Python SDK ({last}): `pip install ./sdk-python` (from Bosun's repository) into its environment, or point --python / BOSUN_PYTHON at one that has it",
                python.display()
            );
        }
        let mut command = vec![python.display().to_string(), "-m".into(), "bosun".into()];
        command.extend(files.iter().map(|f| f.display().to_string()));
        for module in &self.modules {
            command.extend(["-m".to_string(), module.clone()]);
        }
        if verbose {
            command.push("--verbose".into());
        }
        Ok(command)
    }

    fn node_command(&self, files: Vec<PathBuf>) -> anyhow::Result<Vec<String>> {
        let node = self.node.clone().unwrap_or_else(|| PathBuf::from("node"));
        // Checked once here, as the Python SDK is: a missing one would be a restart loop.
        std::process::Command::new(&node)
            .arg("--version")
            .stdin(std::process::Stdio::null())
            .output()
            .with_context(|| format!("cannot start Node.js ({}): install it, or point --node / BOSUN_NODE at it", node.display()))?;
        let cwd = std::env::current_dir()?;
        let cli = handler_files::node_cli(&files[0], &cwd, Path::is_file).with_context(|| {
            format!(
                "Bosun's TypeScript SDK is not installed next to {} (no {} in its folder, the working folder or above them):                  `npm install bosun-operator` there (from Bosun's repository: `npm install <repository>/sdk-typescript`)",
                files[0].display(),
                handler_files::NODE_CLI
            )
        })?;
        let mut command = vec![node.display().to_string(), cli.display().to_string()];
        command.extend(files.iter().map(|f| f.display().to_string()));
        Ok(command)
    }

    fn interpreter(&self) -> PathBuf {
        if let Some(python) = &self.python {
            return python.clone();
        }
        let beside = std::env::current_exe().ok().and_then(|exe| exe.parent().map(Path::to_path_buf));
        for name in ["python3", "python"] {
            if let Some(path) = beside.as_ref().map(|dir| dir.join(name)).filter(|p| p.is_file()) {
                return path;
            }
        }
        PathBuf::from("python3")
    }
}

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

/// The cluster the handler server's own clients use: the controller's (Kopf's default login
/// configures the `kubernetes` client from `KUBECONFIG` and `BOSUN_CONTEXT`).
#[derive(Debug, Clone, Default)]
pub struct ChildCluster {
    /// Goes to its `KUBECONFIG`.
    pub kubeconfig: Option<PathBuf>,
    /// Goes to its `BOSUN_CONTEXT`.
    pub context: Option<String>,
}

/// Starts `command` as the handler server on a free loopback port (in `$BOSUN_LISTEN`) and
/// adds that address to the controller's handler servers; `cluster` goes to its environment.
pub fn start(command: Vec<String>, settings: &mut bosun_controller::Settings, cluster: ChildCluster) -> std::io::Result<Supervised> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let listen = format!("127.0.0.1:{port}");
    settings.handlers.push(format!("http://{listen}"));
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(supervise(command, listen, cluster, Logger::new(None), stop_rx));
    Ok(Supervised { stop, task })
}

/// Keeps the handler server command running until `stop`, restarting it with backoff.
async fn supervise(command: Vec<String>, listen: String, cluster: ChildCluster, log: Logger, mut stop: tokio::sync::watch::Receiver<bool>) {
    let mut delay = Duration::from_secs(1);
    loop {
        log.info(None, &format!("Starting the handler server: {} (BOSUN_LISTEN={listen})", command.join(" ")));
        // Under a guard, the command ends with this process however it ends (`guard.rs`).
        let guarded = guard::guarded(&command);
        if guarded.is_none() {
            log.warn(None, "This bosun's binary cannot be found to guard the handler server: it is started bare, and would outlive a bosun killed with SIGKILL.");
        }
        let argv = guarded.as_ref().unwrap_or(&command);
        let mut cmd = tokio::process::Command::new(&argv[0]);
        if let Some(k) = &cluster.kubeconfig {
            cmd.env("KUBECONFIG", k);
        }
        if let Some(c) = &cluster.context {
            cmd.env("BOSUN_CONTEXT", c);
        }
        // The guard's standard input is its lifeline: held open below for as long as the
        // command should run, closed by the kernel when this process is gone. It is not
        // killed on drop (a dropped lifeline ends its group); a bare command is.
        let spawned = cmd
            .args(&argv[1..])
            .env("BOSUN_LISTEN", &listen)
            .stdin(if guarded.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(guarded.is_none())
            .spawn();
        let started = Instant::now();
        match spawned {
            Err(e) => log.error(None, &format!("The handler server command could not start: {e}")),
            Ok(mut child) => {
                // The child leads its new group: the group's id is the child's pid, known only
                // until the child is reaped.
                let group = child.id().and_then(|id| i32::try_from(id).ok()).and_then(Pid::from_raw);
                let _lifeline = child.stdin.take();
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
    if group::wait_ended(child, GRACE, || group::runs(group)).await {
        return;
    }
    log.warn(None, &format!("The handler server did not exit within {GRACE:?} of SIGTERM; killing it."));
    signal_group(group, Signal::KILL, log);
    let _ = child.wait().await;
}

fn signal_group(group: Pid, signal: Signal, log: &Logger) {
    if let Err(e) = group::signal(group, signal) {
        log.warn(None, &format!("Cannot send {signal:?} to the handler server's process group {group:?}: {e}"));
    }
}

async fn prefix_lines(stream: impl tokio::io::AsyncRead + Unpin) {
    let mut lines = BufReader::new(stream).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        eprintln!("[handler] {line}");
    }
}

/// A future that resolves on SIGINT or SIGTERM. The handlers are installed at once, not when
/// the future is first polled: a signal that comes while bosun starts (the dev cluster, the
/// handler command) stops it cleanly instead of killing it and leaving the command running.
pub fn stop_signal() -> std::io::Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
    })
}
