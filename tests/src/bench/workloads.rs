//! The workloads, each on a fresh dev cluster:
//! - backlog: the objects exist before the operator starts; time from its start until all
//!   show `status.create_fn`, its CPU, peak RSS and peak open sockets;
//! - live: the operator runs (warmed up on one object); the objects are created by parallel
//!   clients; latency from each create's response to its handler call, API writes per
//!   object, CPU per object;
//! - restart: the operator handles N objects created live (CPU per object, idle RSS after),
//!   then starts again over them; time and CPU until it is quiet, its idle RSS, and that it
//!   handles and writes nothing again.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use bosun_tests::record::now_ns;

use super::cluster::{Counters, DevCluster, Handled, create_all, create_at_rate, names};
use super::ops::{Flavor, Programs, UnderTest};
use super::procs::{SocketSampler, machine_busy_s, usage};

/// How the objects of a live workload arrive.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrivals {
    /// Closed loop: the parallel clients each create their share one after the other (how
    /// fast the machine goes: a burst).
    Clients,
    /// Open loop: one every `1 / rate` seconds whatever the answers (a latency bar's way).
    Rate(f64),
}

/// What one workload asks.
#[derive(Debug, Clone, Copy)]
pub struct Params {
    /// How many objects.
    pub objects: usize,
    /// How many parallel clients create them.
    pub clients: usize,
    /// The longest any wait may take.
    pub deadline: Duration,
}

/// Backlog figures.
#[derive(Debug, Clone, Default)]
pub struct Backlog {
    /// Objects handled.
    pub objects: usize,
    /// Seconds from the operator's start until the last object showed its result.
    pub seconds: f64,
    /// Operator CPU seconds (utime + stime) from start to then: the controller's and the
    /// handler server's when it is a process of its own.
    pub cpu_s: f64,
    /// Of which the handler server's.
    pub handler_cpu_s: f64,
    /// Peak RSS in bytes.
    pub peak_rss: u64,
    /// Peak number of open sockets.
    pub peak_sockets: usize,
    /// API writes on kopfexamples per object.
    pub writes_per_object: f64,
    /// `create_fn` calls in all.
    pub calls: u64,
    /// CPU seconds of every other process on the machine meanwhile (see [`Live`]).
    pub others_cpu_s: f64,
}

impl Backlog {
    /// CPU milliseconds per object.
    pub fn cpu_ms_per_object(&self) -> f64 {
        self.cpu_s * 1000.0 / self.objects.max(1) as f64
    }

    /// The controller's CPU milliseconds per object (the handler server's left out).
    pub fn controller_cpu_ms_per_object(&self) -> f64 {
        (self.cpu_s - self.handler_cpu_s) * 1000.0 / self.objects.max(1) as f64
    }
}

/// Live figures.
#[derive(Debug, Clone, Default)]
pub struct Live {
    /// Objects created.
    pub objects: usize,
    /// Latency percentiles, in ms, from a create's response to its handler call.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Maximum.
    pub max_ms: f64,
    /// API writes on kopfexamples per object (the bench's own creates excluded).
    pub writes_per_object: f64,
    /// Of all those writes, how many were refused (e.g. 409 conflicts).
    pub write_errors: u64,
    /// Event writes per object.
    pub event_writes_per_object: f64,
    /// Operator CPU ms per object over the workload (controller and handler server).
    pub cpu_ms_per_object: f64,
    /// Of which the handler server's.
    pub handler_cpu_ms_per_object: f64,
    /// Peak RSS in bytes (whole run).
    pub peak_rss: u64,
    /// Peak number of open sockets.
    pub peak_sockets: usize,
    /// `create_fn` calls in all (the warm-up object included).
    pub calls: u64,
    /// Seconds from the first create's response to the last's.
    pub create_seconds: f64,
    /// Seconds from the first create's response to the last object showing its result.
    pub handled_seconds: f64,
    /// CPU seconds over the workload of the dev cluster: with the operator's and the bench's
    /// own (its clients and watch), how busy the machine was.
    pub cluster_cpu_s: f64,
    /// The bench process's CPU seconds over the workload.
    pub bench_cpu_s: f64,
    /// The operator's CPU seconds over the workload (controller and handler server).
    pub operator_cpu_s: f64,
    /// CPU seconds of every other process on the machine over the workload (other work
    /// running beside the bench makes the figures noisy).
    pub others_cpu_s: f64,
}

/// Restart figures: the operator handled N objects created live, stopped, and started again
/// over them.
#[derive(Debug, Clone, Default)]
pub struct Restart {
    /// Objects handled before the restart (the warm-up object not counted).
    pub objects: usize,
    /// The first run: seconds from the first create's response to the last object showing
    /// its result.
    pub live_handled_s: f64,
    /// The first run: CPU seconds of the operator's processes (controller and handler server)
    /// from just before the creates until its writes stopped.
    pub live_cpu_s: f64,
    /// Of which the handler server's.
    pub live_handler_cpu_s: f64,
    /// The first run: RSS of the operator's processes 5 s after its writes stopped.
    pub live_idle_rss: u64,
    /// Seconds from the second start until the operator went quiet: when its CPU last rose
    /// before a whole second in which it and the API server used (almost) none.
    pub quiet_s: f64,
    /// Operator CPU seconds from the second start until quiet.
    pub cpu_s: f64,
    /// RSS of the operator 5 s after it went quiet, in bytes.
    pub idle_rss: u64,
    /// Peak RSS of the second run until then, in bytes.
    pub peak_rss: u64,
    /// `create_fn` calls after the restart (0: nothing is handled again).
    pub calls: u64,
    /// API writes on kopfexamples after the restart.
    pub writes: u64,
}

impl Restart {
    /// The first run's handler server CPU milliseconds per object created live.
    pub fn live_handler_cpu_ms_per_object(&self) -> f64 {
        self.live_handler_cpu_s * 1000.0 / self.objects.max(1) as f64
    }

    /// The first run's CPU milliseconds per object created live.
    pub fn live_cpu_ms_per_object(&self) -> f64 {
        self.live_cpu_s * 1000.0 / self.objects.max(1) as f64
    }

    /// CPU milliseconds per object until quiet.
    pub fn cpu_ms_per_object(&self) -> f64 {
        self.cpu_s * 1000.0 / self.objects.max(1) as f64
    }
}

/// What counts as no CPU use for a second, of the operator and the API server together: 20 ms
/// (a keepalive, a bookmark, a timer tick, the dev cluster's own housekeeping).
const IDLE_CPU_S: f64 = 0.020;

/// Waits until the operator (`pid`) and the API server (`server`) have used at most
/// [`IDLE_CPU_S`] of CPU together over a whole second — the server too, as an operator that
/// waits for the next page of a listing is idle but not done; returns the seconds from `t0`
/// until the operator's CPU last rose before that second, and its CPU seconds by then.
pub async fn quiet(pid: u32, server: u32, t0: std::time::Instant, deadline: Duration) -> Result<(f64, f64)> {
    let end = t0 + deadline;
    // (seconds since t0, operator cpu, operator + server cpu) every 100 ms.
    let mut samples: Vec<(f64, f64, f64)> = Vec::new();
    loop {
        let cpu = super::procs::usage(pid)?.cpu_s;
        let both = cpu + super::procs::usage(server)?.cpu_s;
        let at = t0.elapsed().as_secs_f64();
        samples.push((at, cpu, both));
        // The last sample at least 1 s before this one: idle since then?
        if let Some(&(_, base, both_base)) = samples.iter().rev().find(|(t, _, _)| at - t >= 1.0)
            && both - both_base <= IDLE_CPU_S
        {
            // When the operator's CPU first reached what it was at the start of that second.
            let busy_until = samples.iter().find(|(_, c, _)| *c >= base).map_or(0.0, |s| s.0);
            return Ok((busy_until, base));
        }
        if std::time::Instant::now() >= end {
            bail!("the operator and the API server did not go quiet within {deadline:?} (operator CPU {cpu:.2} s)");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A fresh dev cluster with `params.objects` objects named `prefix-N` created by the parallel
/// clients; a client, the names, and the bench's watch of which are handled.
async fn populated(
    programs: &Programs,
    params: Params,
    prefix: &str,
    dir: &Path,
) -> Result<(DevCluster, kube::Client, Vec<String>, Handled)> {
    let cluster = fresh_cluster(programs, dir).await?;
    let client = cluster.client()?;
    let clients = (0..params.clients).map(|_| cluster.client()).collect::<Result<Vec<_>>>()?;
    let names = names(prefix, params.objects);
    create_all(&clients, &names, params.deadline).await?;
    drop(clients);
    let handled = Handled::start(cluster.client()?).await?;
    Ok((cluster, client, names, handled))
}

/// The restart workload: N objects created live by the parallel clients and handled by a first
/// run of the operator (ready once it handled a warm-up object): its CPU per object and its RSS
/// once idle; then the operator stopped gracefully and started afresh: time and CPU until it is
/// quiet, its RSS once idle, and what it did again (nothing should be handled or written).
pub async fn restart(flavor: Flavor, programs: &Programs, params: Params, dir: &Path) -> Result<Restart> {
    let cluster = fresh_cluster(programs, dir).await?;
    let client = cluster.client()?;
    let clients = (0..params.clients).map(|_| cluster.client()).collect::<Result<Vec<_>>>()?;
    let handled = Handled::start(cluster.client()?).await?;
    std::fs::create_dir_all(dir.join("first"))?;
    let first = UnderTest::start(flavor, programs, &cluster, false, &dir.join("first")).await?;
    let warmup = names("warmup", 1);
    create_all(&clients[..1], &warmup, params.deadline).await?;
    wait("the warm-up object to be handled", params.deadline, &cluster, &first, || progress(&handled, &first, &warmup)).await?;
    settle(&cluster, &client).await?;
    let (cpu_before, handler_before) = (first.usage()?.cpu_s, first.handler_cpu_s()?);
    let names = names("restart", params.objects);
    let created = create_all(&clients, &names, params.deadline).await?;
    drop(clients);
    wait("the objects to be handled before the restart", params.deadline, &cluster, &first, || progress(&handled, &first, &names)).await?;
    let first_created = created.values().min().copied().unwrap_or_default();
    let live_handled_s = handled.times(&names).into_iter().max().unwrap_or_default().saturating_sub(first_created) as f64 / 1e9;
    settle(&cluster, &client).await?;
    let (live_cpu_s, live_handler_cpu_s) = (first.usage()?.cpu_s - cpu_before, first.handler_cpu_s()? - handler_before);
    tokio::time::sleep(Duration::from_secs(5)).await;
    first.check_alive()?;
    let live_idle_rss = first.rss()?;
    first.stop().await;
    drop(handled);
    let before = cluster.counters(&client).await?;

    let t0 = std::time::Instant::now();
    let op = UnderTest::start(flavor, programs, &cluster, false, dir).await?;
    let (quiet_s, cpu_s) = quiet(op.proc.pid, cluster.proc.pid, t0, params.deadline).await?;
    op.check_alive()?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    op.check_alive()?;
    let idle_rss = op.rss()?;
    let after = cluster.counters(&client).await?.since(&before);
    let out = Restart {
        objects: names.len(),
        live_handled_s,
        live_cpu_s,
        live_handler_cpu_s,
        live_idle_rss,
        quiet_s,
        cpu_s,
        idle_rss,
        peak_rss: op.usage()?.peak_rss,
        calls: op.calls()?,
        writes: after.kex_writes,
    };
    op.stop().await;
    cluster.proc.stop(Duration::from_secs(5)).await;
    Ok(out)
}

/// A fresh dev cluster with the KopfExample CRD, its files in `dir`.
pub async fn fresh_cluster(programs: &Programs, dir: &Path) -> Result<DevCluster> {
    std::fs::create_dir_all(dir)?;
    let cluster = DevCluster::start(&programs.devcluster, dir).await?;
    cluster.install_crd().await?;
    Ok(cluster)
}

/// Polls every 50 ms until `done` says so, failing at the deadline or when a process dies.
async fn wait(
    what: &str,
    deadline: Duration,
    cluster: &DevCluster,
    op: &UnderTest,
    done: impl FnMut() -> Result<(bool, String)>,
) -> Result<()> {
    let alive = || {
        cluster.proc.check_alive()?;
        op.check_alive()
    };
    let name = op.flavor.name();
    let tail = || format!("{name}'s log ({}) ends with:\n{}", op.proc.log.display(), op.proc.log_tail(40));
    poll(&format!("{name}: timed out"), what, deadline, alive, tail, done).await
}

/// Polls every 50 ms until `done` says so; fails when `alive` does, or at the deadline with
/// what `done` last said and `more`.
pub async fn poll(
    who: &str,
    what: &str,
    deadline: Duration,
    alive: impl Fn() -> Result<()>,
    more: impl Fn() -> String,
    mut done: impl FnMut() -> Result<(bool, String)>,
) -> Result<()> {
    let end = tokio::time::Instant::now() + deadline;
    loop {
        let (ok, progress) = done()?;
        if ok {
            return Ok(());
        }
        alive()?;
        if tokio::time::Instant::now() >= end {
            bail!("{who} after {deadline:?} waiting for {what} ({progress}); {}", more());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the write counters stay still for a second (at most 15 s): the operator's
/// trailing writes (after the result is visible) are counted too.
async fn settle(cluster: &DevCluster, client: &kube::Client) -> Result<Counters> {
    let end = tokio::time::Instant::now() + Duration::from_secs(15);
    let mut last = cluster.counters(client).await?;
    let mut still_since = tokio::time::Instant::now();
    while tokio::time::Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = cluster.counters(client).await?;
        if now.kex_writes != last.kex_writes || now.event_writes != last.event_writes {
            last = now;
            still_since = tokio::time::Instant::now();
        } else if still_since.elapsed() >= Duration::from_secs(1) {
            break;
        }
    }
    Ok(last)
}

/// Whether every one of `names` was handled (watch) and recorded (handler calls).
fn progress(handled: &Handled, op: &UnderTest, names: &[String]) -> Result<(bool, String)> {
    let seen = handled.count(names);
    if seen < names.len() {
        return Ok((false, format!("{seen}/{} objects show status.create_fn", names.len())));
    }
    let calls = op.first_calls()?;
    let recorded = names.iter().filter(|n| calls.contains_key(*n)).count();
    Ok((recorded == names.len(), format!("all objects show status.create_fn; {recorded}/{} handler calls recorded", names.len())))
}

/// The backlog workload.
pub async fn backlog(flavor: Flavor, programs: &Programs, params: Params, dir: &Path) -> Result<Backlog> {
    let (cluster, client, names, handled) = populated(programs, params, "backlog", dir).await?;
    if handled.count(&names) != 0 {
        bail!("objects show status.create_fn before any operator ran");
    }
    let before = cluster.counters(&client).await?;

    let (cluster_before, bench_before, machine_before) = (cluster.proc.usage()?.cpu_s, usage(std::process::id())?.cpu_s, machine_busy_s());
    let t0 = now_ns();
    let op = UnderTest::start(flavor, programs, &cluster, false, dir).await?;
    let sockets = SocketSampler::start(op.proc.pid);
    wait("the backlog to be handled", params.deadline, &cluster, &op, || progress(&handled, &op, &names)).await?;
    let used = op.usage()?;
    let handler_cpu_s = op.handler_cpu_s()?;
    let ours = used.cpu_s + cluster.proc.usage()?.cpu_s - cluster_before + usage(std::process::id())?.cpu_s - bench_before;
    let others_cpu_s = (machine_busy_s() - machine_before - ours).max(0.0);
    let last = handled.times(&names).into_iter().max().context("no object handled")?;
    let after = settle(&cluster, &client).await?.since(&before);
    let out = Backlog {
        objects: names.len(),
        seconds: last.saturating_sub(t0) as f64 / 1e9,
        cpu_s: used.cpu_s,
        handler_cpu_s,
        peak_rss: op.usage()?.peak_rss,
        peak_sockets: sockets.peak(),
        writes_per_object: after.kex_writes as f64 / names.len() as f64,
        calls: op.calls()?,
        others_cpu_s,
    };
    drop((sockets, handled));
    op.stop().await;
    cluster.proc.stop(Duration::from_secs(5)).await;
    Ok(out)
}

/// The live workload: the objects arrive as `arrivals` says while the operator runs.
pub async fn live(flavor: Flavor, programs: &Programs, params: Params, arrivals: Arrivals, with_delete: bool, dir: &Path) -> Result<Live> {
    let cluster = fresh_cluster(programs, dir).await?;
    let client = cluster.client()?;
    let clients = (0..params.clients).map(|_| cluster.client()).collect::<Result<Vec<_>>>()?;
    let handled = Handled::start(cluster.client()?).await?;
    let op = UnderTest::start(flavor, programs, &cluster, with_delete, dir).await?;
    let sockets = SocketSampler::start(op.proc.pid);

    // Warm up: the operator is ready once it has handled one object.
    let warmup = names("warmup", 1);
    create_all(&clients[..1], &warmup, params.deadline).await?;
    wait("the warm-up object to be handled", params.deadline, &cluster, &op, || progress(&handled, &op, &warmup)).await?;
    let before = settle(&cluster, &client).await?;
    let (cpu_before, handler_before) = (op.usage()?.cpu_s, op.handler_cpu_s()?);
    let cluster_before = cluster.proc.usage()?.cpu_s;
    let bench_before = usage(std::process::id())?.cpu_s;
    let machine_before = machine_busy_s();

    let names = names("live", params.objects);
    let created = match arrivals {
        Arrivals::Clients => create_all(&clients, &names, params.deadline).await?,
        Arrivals::Rate(rate) => create_at_rate(&clients, &names, rate, params.deadline).await?,
    };
    wait("the live objects to be handled", params.deadline, &cluster, &op, || progress(&handled, &op, &names)).await?;
    let cluster_cpu = cluster.proc.usage()?.cpu_s - cluster_before;
    let bench_cpu = usage(std::process::id())?.cpu_s - bench_before;
    let op_cpu = op.usage()?.cpu_s - cpu_before;
    let others_cpu = (machine_busy_s() - machine_before - op_cpu - cluster_cpu - bench_cpu).max(0.0);
    let handled_times = handled.times(&names);
    let after = settle(&cluster, &client).await?.since(&before);
    let used = op.usage()?;

    let calls = op.first_calls()?;
    timeline(&dir.join("timeline.csv"), &names, &created, &calls, &handled)?;
    let first_created = created.values().min().copied().unwrap_or_default();
    let last_created = created.values().max().copied().unwrap_or_default();
    let last_handled = handled_times.iter().max().copied().unwrap_or_default();
    let mut latencies: Vec<f64> = names
        .iter()
        .map(|n| {
            let (c, h) = (created[n], calls[n]);
            // The handler may be called before the create's response reaches its client: 0.
            h.saturating_sub(c) as f64 / 1e6
        })
        .collect();
    latencies.sort_by(f64::total_cmp);
    let n = names.len() as f64;
    let out = Live {
        objects: names.len(),
        p50_ms: percentile(&latencies, 50.0),
        p99_ms: percentile(&latencies, 99.0),
        max_ms: latencies.last().copied().unwrap_or_default(),
        writes_per_object: after.kex_writes.saturating_sub(names.len() as u64) as f64 / n,
        write_errors: after.kex_write_errors,
        event_writes_per_object: after.event_writes as f64 / n,
        cpu_ms_per_object: (used.cpu_s - cpu_before) * 1000.0 / n,
        handler_cpu_ms_per_object: (op.handler_cpu_s()? - handler_before) * 1000.0 / n,
        peak_rss: used.peak_rss,
        peak_sockets: sockets.peak(),
        calls: op.calls()?,
        create_seconds: last_created.saturating_sub(first_created) as f64 / 1e9,
        handled_seconds: last_handled.saturating_sub(first_created) as f64 / 1e9,
        cluster_cpu_s: cluster_cpu,
        bench_cpu_s: bench_cpu,
        operator_cpu_s: op_cpu,
        others_cpu_s: others_cpu,
    };
    if after.kex_posts != names.len() as u64 {
        eprintln!("bench: note: {} POSTs on kopfexamples during the live run, {} of them the bench's", after.kex_posts, names.len());
    }
    drop((sockets, handled));
    op.stop().await;
    cluster.proc.stop(Duration::from_secs(5)).await;
    Ok(out)
}

/// Writes `name,created_ns,watched_ns,finalized_ns,called_ns,handled_ns` per object
/// (`watched`: when the bench's own watch saw it added; `finalized`: saw it with a finalizer,
/// 0 without), for a closer look.
fn timeline(path: &Path, names: &[String], created: &HashMap<String, u64>, calls: &HashMap<String, u64>, handled: &Handled) -> Result<()> {
    let mut out = String::from("name,created_ns,watched_ns,finalized_ns,called_ns,handled_ns\n");
    for n in names {
        let h = handled.times(std::slice::from_ref(n)).first().copied().unwrap_or_default();
        let (c, w, f, k) = (created.get(n), handled.added(n), handled.finalized(n), calls.get(n));
        let or0 = |t: Option<u64>| t.unwrap_or_default();
        out.push_str(&format!("{n},{},{},{},{},{h}\n", or0(c.copied()), or0(w), or0(f), or0(k.copied())));
    }
    Ok(std::fs::write(path, out)?)
}

/// The nearest-rank percentile of sorted values.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 50.0);
        assert_eq!(percentile(&v, 99.0), 99.0);
        assert_eq!(percentile(&v[..1], 99.0), 1.0);
    }
}
