//! The controller benchmark: backlog and live workloads on the dev
//! cluster (its own process), the real `bosun` controller (its own process, measured through
//! `/proc`), an SDK handler server in this process; with `--kopf`, the same against Kopf from
//! PyPI. Prints a table (or `--json`) and the bars; exits non-zero when a run fails
//! or a bar is missed. See `tests/BENCHMARKS.md`.

#[path = "../bench/mod.rs"]
mod bench;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Parser, ValueEnum};

use bench::ops::{Flavor, Programs, ensure_kopf, ensure_python_sdk};
use bench::report::{Results, Side};
use bench::workloads::{self, Arrivals, Params};

/// Benchmark Bosun's controller (and Kopf, with --kopf) on the dev cluster.
#[derive(Debug, Parser)]
#[command(name = "bench")]
struct Args {
    /// Objects per workload.
    #[arg(long, default_value_t = 1000)]
    objects: usize,
    /// Parallel clients creating the objects of the live workload.
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Arrivals per second of the open-loop workload (objects created one every 1/rate s,
    /// whether or not the earlier ones were answered).
    #[arg(long, default_value_t = 500.0)]
    rate: f64,
    /// Objects of the open-loop workload.
    #[arg(long, default_value_t = 2000)]
    open_objects: usize,
    /// Also run Kopf (from PyPI, in a venv under the target dir) on the same workloads.
    #[arg(long)]
    kopf: bool,
    /// Also run Bosun with the handler in its Python SDK (installed from this checkout into the
    /// venv under the target dir), beside the Rust SDK's and Kopf's.
    #[arg(long)]
    python: bool,
    /// Print JSON instead of the table (progress still goes to stderr).
    #[arg(long)]
    json: bool,
    /// The controller's --max-workers (its default).
    #[arg(long, default_value_t = 64)]
    max_workers: usize,
    /// The longest any single wait may take, in seconds.
    #[arg(long, default_value_t = 300)]
    timeout: u64,
    /// Only these workloads.
    #[arg(long, value_enum, value_delimiter = ',')]
    only: Vec<Workload>,
    /// Instead of the other workloads: run 1, 2, … N replicas with `--shards auto` (each
    /// count on a fresh dev cluster) and print throughput and handler-call latency against
    /// the replica count; fails when an object is handled twice or a share is uneven.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=16))]
    replicas: Option<u16>,
    /// Objects of the restart workload (created live and handled, then the operator starts
    /// again over them).
    #[arg(long, default_value_t = 10_000)]
    restart_objects: usize,
    /// Leave out the reference, a bare kube-rs controller (and the bars against it).
    #[arg(long)]
    no_kube_rs: bool,
    /// Do not (re)build the `bosun`, `bosun-devcluster`, `bench-handler` and `bench-kube-rs`
    /// binaries first.
    #[arg(long)]
    no_build: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Workload {
    Backlog,
    Live,
    LiveDelete,
    Open,
    OpenDelete,
    Restart,
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let outcome = tokio::select! {
        r = run(&args) => r,
        _ = stop_signal() => Err(anyhow::anyhow!("interrupted")),
    };
    // Every child process was started with kill_on_drop: they are gone with `run`'s future.
    match outcome {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("bench: error: {e:#}");
            std::process::exit(2);
        }
    }
}

async fn stop_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler installs");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// Runs everything; `Ok(false)` when a run failed or a bar was missed.
async fn run(args: &Args) -> Result<bool> {
    let exe = std::env::current_exe()?;
    let bin_dir = exe.parent().context("the bench has no directory")?.to_path_buf();
    let target = bin_dir.parent().context("the bench is not in a target dir")?.to_path_buf();
    let release = bin_dir.file_name().is_some_and(|n| n == "release");
    if !release {
        eprintln!("bench: warning: not a release build; the figures mean little (use cargo run --release)");
    }
    if !args.no_build {
        build(release)?;
    }
    let programs = Programs {
        bosun: bin_dir.join("bosun"),
        devcluster: bin_dir.join("bosun-devcluster"),
        handler: bin_dir.join("bench-handler"),
        kube_rs: bin_dir.join("bench-kube-rs"),
        venv: target.join("bench-venv"),
        max_workers: args.max_workers,
    };
    for p in [&programs.bosun, &programs.devcluster, &programs.handler, &programs.kube_rs] {
        if !p.exists() {
            bail!(
                "{} is missing: cargo build {}-p bosun-controller -p bosun-devcluster -p bosun-tests --bins",
                p.display(),
                if release { "--release " } else { "" }
            );
        }
    }
    let params = Params { objects: args.objects, clients: args.clients.max(1), deadline: Duration::from_secs(args.timeout) };
    if !(args.rate > 0.0 && args.rate.is_finite()) {
        bail!("--rate must be a positive number of objects per second, not {}", args.rate);
    }
    let open = Open { rate: args.rate, params: Params { objects: args.open_objects, ..params } };
    let work = target.join("bench");
    if let Some(n) = args.replicas {
        return replicas(&programs, params, usize::from(n), &work, args.json).await;
    }
    let kopf_version = if args.kopf { Some(ensure_kopf(&programs.venv).await?) } else { None };
    if args.python {
        let version = ensure_python_sdk(&programs.venv, &programs.bosun).await?;
        eprintln!("bench: Bosun's Python SDK {version}");
    }
    let restart = Params { objects: args.restart_objects, ..params };
    let bosun = side(Flavor::Bosun, &programs, params, open, restart, &work, &args.only).await;
    let kube_rs =
        if args.no_kube_rs { None } else { Some(side(Flavor::KubeRs, &programs, params, open, restart, &work, &args.only).await) };
    let kopf = match kopf_version {
        Some(v) => Some((v, side(Flavor::Kopf, &programs, params, open, restart, &work, &args.only).await)),
        None => None,
    };
    let python =
        if args.python { Some(side(Flavor::BosunPython, &programs, params, open, restart, &work, &args.only).await) } else { None };
    let results = Results {
        objects: args.objects,
        clients: params.clients,
        rate: args.rate,
        open_objects: args.open_objects,
        restart_objects: args.restart_objects,
        max_workers: args.max_workers,
        bosun,
        kopf,
        python,
        kube_rs,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&results.json())?);
    } else {
        print!("{}", results.table());
        println!("(logs and files of each run: {})", work.display());
    }
    Ok(results.all_pass())
}

/// The replicas workload for 1..=`n` replicas; `Ok(false)` when a run failed or a check.
async fn replicas(programs: &bench::ops::Programs, params: Params, n: usize, work: &Path, as_json: bool) -> Result<bool> {
    let mut runs = Vec::new();
    for r in 1..=n {
        eprintln!("bench: {r} replica(s), --shards auto: {} objects from {} clients", params.objects, params.clients);
        let dir = work.join(format!("replicas-{r}"));
        let _ = std::fs::remove_dir_all(&dir);
        let run = bench::replicas::shards(programs, params, r, &dir).await.map_err(|e| format!("{e:#}"));
        match &run {
            Ok(x) => eprintln!(
                "bench: {r} replica(s): {:.0} objects/s, p50 {:.1} ms, p99 {:.1} ms, shares {:?}",
                x.per_second, x.p50_ms, x.p99_ms, x.shares
            ),
            Err(e) => eprintln!("bench: {r} replica(s) failed: {e}"),
        }
        runs.push(run);
    }
    let pass = runs.iter().all(|r| r.as_ref().is_ok_and(|x| x.failures.is_empty()));
    if as_json {
        let runs: Vec<serde_json::Value> =
            runs.iter().map(|r| r.as_ref().map_or_else(|e| serde_json::json!({"error": e}), |x| x.json())).collect();
        println!("{}", serde_json::to_string_pretty(&serde_json::json!({"replicas": runs, "pass": pass}))?);
    } else {
        print!("{}", bench::replicas::table(&runs, params.objects, params.clients));
        println!("(logs and files of each run: {})", work.display());
    }
    Ok(pass)
}

/// Builds the binaries the bench runs, with the cargo that runs the bench.
fn build(release: bool) -> Result<()> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut cmd = std::process::Command::new(cargo);
    cmd.current_dir(&root).args([
        "build",
        "-p",
        "bosun-controller",
        "--bin",
        "bosun",
        "--features",
        "bosun-controller/jemalloc",
        "-p",
        "bosun-devcluster",
        "--bin",
        "bosun-devcluster",
        "-p",
        "bosun-tests",
        "--bin",
        "bench-handler",
        "--bin",
        "bench-kube-rs",
    ]);
    if release {
        cmd.arg("--release");
    }
    eprintln!("bench: building bosun, bosun-devcluster, bench-handler and bench-kube-rs");
    let status = cmd.status().context("cannot run cargo (use --no-build with binaries built already)")?;
    if !status.success() {
        bail!("building the bench's programs failed ({status})");
    }
    Ok(())
}

use bench::report::SKIPPED;

/// The open-loop workload's arrivals.
#[derive(Debug, Clone, Copy)]
struct Open {
    rate: f64,
    params: Params,
}

/// One operator's runs, each on a fresh dev cluster.
async fn side(flavor: Flavor, programs: &Programs, params: Params, open: Open, restart: Params, work: &Path, only: &[Workload]) -> Side {
    let want = |w| only.is_empty() || only.contains(&w);
    let dir = |name: &str| -> PathBuf {
        let d = work.join(format!("{}-{name}", flavor.name().to_lowercase()));
        let _ = std::fs::remove_dir_all(&d);
        d
    };
    let who = flavor.name();
    let n = params.objects;
    let backlog = if want(Workload::Backlog) {
        eprintln!("bench: {who}: backlog of {n} objects");
        let r = workloads::backlog(flavor, programs, params, &dir("backlog")).await.map_err(|e| format!("{e:#}"));
        match &r {
            Ok(b) => eprintln!("bench: {who}: backlog handled in {:.3} s, {:.3} ms CPU per object", b.seconds, b.cpu_ms_per_object()),
            Err(e) => eprintln!("bench: {who}: backlog failed: {e}"),
        }
        r
    } else {
        Err(SKIPPED.to_string())
    };
    let mut lives = Vec::new();
    let runs = [
        (Workload::Live, false, "live", Arrivals::Clients, params),
        (Workload::LiveDelete, true, "live-delete", Arrivals::Clients, params),
        (Workload::Open, false, "open-loop", Arrivals::Rate(open.rate), open.params),
        (Workload::OpenDelete, true, "open-loop-delete", Arrivals::Rate(open.rate), open.params),
    ];
    for (w, with_delete, name, arrivals, params) in runs {
        if !want(w) {
            lives.push(Err(SKIPPED.to_string()));
            continue;
        }
        match arrivals {
            Arrivals::Clients => eprintln!("bench: {who}: {name}: {} objects from {} clients", params.objects, params.clients),
            Arrivals::Rate(r) => eprintln!("bench: {who}: {name}: {} objects arriving at {r}/s", params.objects),
        }
        let r = workloads::live(flavor, programs, params, arrivals, with_delete, &dir(name)).await.map_err(|e| format!("{e:#}"));
        match &r {
            Ok(l) => eprintln!(
                "bench: {who}: {name}: p50 {:.1} ms, p99 {:.1} ms, {:.2} writes per object",
                l.p50_ms, l.p99_ms, l.writes_per_object
            ),
            Err(e) => eprintln!("bench: {who}: {name} failed: {e}"),
        }
        lives.push(r);
    }
    let [live, live_delete, open, open_delete]: [Result<workloads::Live, String>; 4] =
        lives.try_into().unwrap_or_else(|_| unreachable!("four live runs"));
    let restart = if want(Workload::Restart) {
        eprintln!("bench: {who}: restart over {} handled objects", restart.objects);
        let r = workloads::restart(flavor, programs, restart, &dir("restart")).await.map_err(|e| format!("{e:#}"));
        match &r {
            Ok(x) => eprintln!(
                "bench: {who}: restart: quiet after {:.3} s, {:.3} ms CPU per object, idle RSS {:.1} MiB",
                x.quiet_s,
                x.cpu_ms_per_object(),
                x.idle_rss as f64 / 1048576.0
            ),
            Err(e) => eprintln!("bench: {who}: restart failed: {e}"),
        }
        r
    } else {
        Err(SKIPPED.to_string())
    };
    Side { backlog, live, live_delete, open, open_delete, restart }
}
