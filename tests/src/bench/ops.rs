//! The operators under test, each with the same handler (Kopf's example 01: `create_fn`
//! returning `{"message": "hello world"}`, optionally a `delete_fn`) recording, per object
//! name, when its call arrived:
//! - Bosun: the real `bosun run` binary as a child process, talking over gRPC to a handler
//!   server written with the Rust SDK (`bench-handler`), a second child process (its CPU and
//!   memory count with the controller's);
//! - Bosun (Python): the same `bosun run`, with the handler in Bosun's Python SDK served by
//!   `python -m bosun` as a second child process (its CPU and memory count with the
//!   controller's);
//! - Kopf: `kopf run --standalone -A` from a venv the bench makes, as a child process;
//! - kube-rs: the reference, a bare controller on `kube::runtime::Controller`
//!   (`bench-kube-rs`), as a child process.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use bosun_sdk::Operator;

use super::cluster::DevCluster;
use super::procs::{Proc, Usage};

/// Which operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// Bosun's controller and an SDK handler server.
    Bosun,
    /// Bosun's controller and a handler server written with the Python SDK.
    BosunPython,
    /// Kopf.
    Kopf,
    /// The reference: a bare kube-rs controller.
    KubeRs,
}

impl Flavor {
    /// Its display name.
    pub fn name(self) -> &'static str {
        match self {
            Flavor::Bosun => "Bosun",
            Flavor::BosunPython => "Bosun-Python",
            Flavor::Kopf => "Kopf",
            Flavor::KubeRs => "kube-rs",
        }
    }
}

/// Where the programs are.
#[derive(Debug, Clone)]
pub struct Programs {
    /// The `bosun` binary.
    pub bosun: PathBuf,
    /// The `bosun-devcluster` binary.
    pub devcluster: PathBuf,
    /// The Rust SDK's handler server of the bench (`bench-handler`).
    pub handler: PathBuf,
    /// The bare kube-rs controller (`bench-kube-rs`).
    pub kube_rs: PathBuf,
    /// The venv holding Kopf (made by [`ensure_kopf`]) and, with `--python`, Bosun's Python
    /// SDK (installed by [`ensure_python_sdk`]).
    pub venv: PathBuf,
    /// The controller's `--max-workers`.
    pub max_workers: usize,
}

/// An operator running against a dev cluster.
pub struct UnderTest {
    /// Which one.
    pub flavor: Flavor,
    /// The controller process (`bosun` or Kopf's Python).
    pub proc: Proc,
    /// The handler server, in a process of its own (Bosun's).
    pub handler: Option<Proc>,
    /// Where the handler notes `NAME TIME_NS` per `create_fn` call.
    record: PathBuf,
}

/// An SDK handler server in the bench process (the replicas workload's); it stops when dropped.
pub struct ServerTask {
    /// Where it listens: `http://127.0.0.1:PORT`.
    pub addr: String,
    task: tokio::task::JoinHandle<()>,
}

impl ServerTask {
    /// Serves `operator` on a free loopback port until dropped.
    pub async fn start(operator: Operator) -> Result<ServerTask> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = format!("http://{}", listener.local_addr()?);
        let task = tokio::spawn(async move {
            if let Err(e) = operator.serve_with_listener(listener, std::future::pending()).await {
                eprintln!("bench: the SDK handler server failed: {e}");
            }
        });
        Ok(ServerTask { addr, task })
    }
}

impl Drop for ServerTask {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl UnderTest {
    /// Starts `flavor` against `cluster`, with its files in `dir`.
    pub async fn start(flavor: Flavor, programs: &Programs, cluster: &DevCluster, with_delete: bool, dir: &Path) -> Result<UnderTest> {
        match flavor {
            Flavor::Bosun => start_bosun(programs, cluster, with_delete, dir).await,
            Flavor::BosunPython => start_bosun_python(programs, cluster, with_delete, dir).await,
            Flavor::Kopf => start_kopf(programs, cluster, with_delete, dir),
            Flavor::KubeRs => start_kube_rs(programs, cluster, with_delete, dir),
        }
    }

    /// CPU and peak RSS of the operator's processes together (controller and handler server).
    pub fn usage(&self) -> Result<Usage> {
        let mut used = self.proc.usage()?;
        if let Some(handler) = &self.handler {
            let h = handler.usage()?;
            used.cpu_s += h.cpu_s;
            used.peak_rss += h.peak_rss;
        }
        Ok(used)
    }

    /// The CPU seconds of the handler server's own process so far (0 when the handlers run in
    /// the controller's process, as Kopf's and kube-rs's do).
    pub fn handler_cpu_s(&self) -> Result<f64> {
        Ok(self.handler.as_ref().map(Proc::usage).transpose()?.map_or(0.0, |u| u.cpu_s))
    }

    /// The resident set size of the operator's processes together, now.
    pub fn rss(&self) -> Result<u64> {
        let handler = self.handler.as_ref().map(|h| super::procs::rss(h.pid)).transpose()?;
        Ok(super::procs::rss(self.proc.pid)? + handler.unwrap_or(0))
    }

    /// Fails when one of the operator's processes died.
    pub fn check_alive(&self) -> Result<()> {
        self.proc.check_alive()?;
        self.handler.as_ref().map_or(Ok(()), Proc::check_alive)
    }

    /// When `create_fn` was first called for each object, by name.
    pub fn first_calls(&self) -> Result<HashMap<String, u64>> {
        Ok(bosun_tests::record::read(&self.record)?.0)
    }

    /// How many times `create_fn` was called in all.
    pub fn calls(&self) -> Result<u64> {
        Ok(bosun_tests::record::read(&self.record)?.1)
    }

    /// Stops the controller, then the handler server.
    pub async fn stop(self) {
        self.proc.stop(std::time::Duration::from_secs(5)).await;
        if let Some(handler) = self.handler {
            handler.stop(std::time::Duration::from_secs(5)).await;
        }
    }
}

async fn start_bosun(programs: &Programs, cluster: &DevCluster, with_delete: bool, dir: &Path) -> Result<UnderTest> {
    let record = empty_record(dir, "handler-calls.txt")?;
    let address = format!("unix://{}", dir.join("handlers.sock").display());
    let mut server = tokio::process::Command::new(&programs.handler);
    server.env("BOSUN_LISTEN", &address).env("BENCH_RECORD", &record).env_remove("RUST_LOG");
    if with_delete {
        server.arg("--delete");
    }
    let (handler, _) = Proc::spawn("the Rust handler server", server, &dir.join("handler.log"), false)?;
    // A profiling aid: BENCH_WRAP="perf record -g -o /tmp/perf.data --" runs the controller
    // under that command (the CPU and memory figures are then the wrapper's).
    let wrap: Vec<String> = std::env::var("BENCH_WRAP").unwrap_or_default().split_whitespace().map(String::from).collect();
    let mut cmd = match wrap.split_first() {
        Some((program, args)) => {
            let mut c = tokio::process::Command::new(program);
            c.args(args).arg(&programs.bosun);
            c
        }
        None => tokio::process::Command::new(&programs.bosun),
    };
    // The controller waits for the server itself; starting both at once keeps both startups
    // in the measured time, as for the other flavors.
    bosun_args(&mut cmd, programs, cluster, &address);
    let (proc, _) = Proc::spawn("the Bosun controller", cmd, &dir.join("bosun.log"), false)?;
    Ok(UnderTest { flavor: Flavor::Bosun, proc, handler: Some(handler), record })
}

/// An empty file in `dir` for a handler to note its calls in.
fn empty_record(dir: &Path, name: &str) -> Result<PathBuf> {
    let record = dir.join(name);
    std::fs::write(&record, "").with_context(|| format!("cannot create {}", record.display()))?;
    Ok(record)
}

fn start_kube_rs(programs: &Programs, cluster: &DevCluster, with_delete: bool, dir: &Path) -> Result<UnderTest> {
    let record = empty_record(dir, "kube-rs-calls.txt")?;
    let mut cmd = tokio::process::Command::new(&programs.kube_rs);
    cmd.env("KUBECONFIG", &cluster.kubeconfig).env("BENCH_RECORD", &record).env_remove("RUST_LOG");
    if with_delete {
        cmd.arg("--delete");
    }
    let (proc, _) = Proc::spawn("the kube-rs controller", cmd, &dir.join("kube-rs.log"), false)?;
    Ok(UnderTest { flavor: Flavor::KubeRs, proc, handler: None, record })
}

/// `bosun run`'s arguments: the dev cluster, and `handler` as the handler server.
pub fn bosun_args(cmd: &mut tokio::process::Command, programs: &Programs, cluster: &DevCluster, handler: &str) {
    cmd.arg("run")
        .arg("--handler")
        .arg(handler)
        .arg("-A")
        .arg("--standalone")
        .arg("--max-workers")
        .arg(programs.max_workers.to_string())
        .arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .env_remove("RUST_LOG")
        .env_remove("BOSUN_HANDLERS");
}

/// Kopf's example 01 for the Python operators, recording when each call arrives: the same code
/// for Kopf and for Bosun's Python SDK, one import apart (`SDK` is `kopf` or `bosun`).
const PYTHON_OPERATOR: &str = r#"# Kopf's example 01, recording when each call arrives (for the Bosun bench).
import os
import time

import SDK

_RECORD = open(os.environ["BENCH_RECORD"], "a", buffering=1)


@SDK.on.create("kopf.dev", "v1", "kopfexamples")
def create_fn(name, **_):
    _RECORD.write(f"{name} {time.time_ns()}\n")
    return {"message": "hello world"}
"#;

const PYTHON_DELETE: &str = r#"

@SDK.on.delete("kopf.dev", "v1", "kopfexamples")
def delete_fn(**_):
    pass
"#;

/// The operator file for `sdk` (`kopf` or `bosun`), with the delete handler or not.
fn python_operator(sdk: &str, with_delete: bool) -> String {
    format!("{PYTHON_OPERATOR}{}", if with_delete { PYTHON_DELETE } else { "" }).replace("SDK", sdk)
}

async fn start_bosun_python(programs: &Programs, cluster: &DevCluster, with_delete: bool, dir: &Path) -> Result<UnderTest> {
    let file = dir.join("python_handlers.py");
    std::fs::write(&file, python_operator("bosun", with_delete))?;
    let record = empty_record(dir, "python-calls.txt")?;
    let socket = dir.join("handlers.sock");
    let address = format!("unix://{}", socket.display());
    let mut server = tokio::process::Command::new(programs.venv.join("bin/python"));
    server.arg("-m").arg("bosun").arg(&file).env("BOSUN_LISTEN", &address).env("BENCH_RECORD", &record);
    let (handler, _) = Proc::spawn("the Python handler server", server, &dir.join("python.log"), false)?;
    // The controller waits for the server itself; starting it at once keeps both startups in
    // the measured time, as for the other flavors.
    let mut cmd = tokio::process::Command::new(&programs.bosun);
    bosun_args(&mut cmd, programs, cluster, &address);
    let (proc, _) = Proc::spawn("the Bosun controller", cmd, &dir.join("bosun.log"), false)?;
    Ok(UnderTest { flavor: Flavor::BosunPython, proc, handler: Some(handler), record })
}

fn start_kopf(programs: &Programs, cluster: &DevCluster, with_delete: bool, dir: &Path) -> Result<UnderTest> {
    let file = dir.join("kopf_operator.py");
    std::fs::write(&file, python_operator("kopf", with_delete))?;
    let record = empty_record(dir, "kopf-calls.txt")?;
    let mut cmd = tokio::process::Command::new(programs.venv.join("bin/kopf"));
    cmd.arg("run").arg("--standalone").arg("-A").arg(&file).env("KUBECONFIG", &cluster.kubeconfig).env("BENCH_RECORD", &record);
    let (proc, _) = Proc::spawn("Kopf", cmd, &dir.join("kopf.log"), false)?;
    Ok(UnderTest { flavor: Flavor::Kopf, proc, handler: None, record })
}

/// Runs a command to its end; its trimmed stdout, or an error with all it printed.
async fn run_checked(program: &Path, args: &[&std::ffi::OsStr]) -> Result<String> {
    let out = tokio::process::Command::new(program)
        .args(args)
        .kill_on_drop(true)
        .output()
        .await
        .with_context(|| format!("cannot run {}", program.display()))?;
    if !out.status.success() {
        bail!(
            "{} {} failed ({}):\n{}{}",
            program.display(),
            args.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Makes the venv unless it is there.
async fn ensure_venv(venv: &Path) -> Result<()> {
    if !venv.join("bin/python").exists() {
        run_checked(Path::new("python3"), &["-m".as_ref(), "venv".as_ref(), venv.as_os_str()]).await?;
    }
    Ok(())
}

/// The version of an installed distribution in the venv.
async fn installed_version(venv: &Path, distribution: &str) -> Result<String> {
    let code = format!("import importlib.metadata as m; print(m.version('{distribution}'))");
    run_checked(&venv.join("bin/python"), &["-c".as_ref(), code.as_ref()]).await
}

/// Makes the venv with Kopf from PyPI unless it is there; returns Kopf's version.
pub async fn ensure_kopf(venv: &Path) -> Result<String> {
    if !venv.join("bin/kopf").exists() {
        eprintln!("bench: making a venv with Kopf from PyPI in {}", venv.display());
        ensure_venv(venv).await?;
        run_checked(&venv.join("bin/pip"), &["install".as_ref(), "--quiet".as_ref(), "kopf".as_ref()]).await?;
    }
    installed_version(venv, "kopf").await
}

/// Installs Bosun's Python SDK from this checkout into the venv (again on every run, so the
/// bench measures the SDK as it is), with the bench's `bosun` as its binary (nothing is
/// compiled again); returns its version.
pub async fn ensure_python_sdk(venv: &Path, bosun: &Path) -> Result<String> {
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk-python");
    ensure_venv(venv).await?;
    eprintln!("bench: installing Bosun's Python SDK into {}", venv.display());
    let out = tokio::process::Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check"])
        .arg(&sdk)
        .env("BOSUN_BINARY", bosun)
        .kill_on_drop(true)
        .output()
        .await
        .context("cannot run pip")?;
    if !out.status.success() {
        bail!(
            "installing the Python SDK failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    installed_version(venv, "bosun-operator").await
}
