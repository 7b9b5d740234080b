//! The workloads, each on a fresh dev cluster:
//! - backlog: the objects exist before the operator starts; time from its start until all
//!   show `status.create_fn`, its CPU, peak RSS and peak open sockets;
//! - live: the operator runs (warmed up on one object); the objects are created by parallel
//!   clients; latency from each create's response to its handler call, API writes per
//!   object, CPU per object.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use super::cluster::{Counters, DevCluster, Handled, create_all, names, now_ns};
use super::ops::{Flavor, Programs, UnderTest};
use super::procs::{SocketSampler, machine_busy_s, usage};

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
    /// Operator CPU seconds (utime + stime) from start to then.
    pub cpu_s: f64,
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
    /// Operator CPU ms per object over the workload.
    pub cpu_ms_per_object: f64,
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
    /// CPU seconds over the workload of the dev cluster and of the bench itself (its
    /// clients, watch and, for Bosun, the handler server): with the operator's, how busy
    /// the machine was.
    pub cluster_cpu_s: f64,
    /// The bench process's CPU seconds over the workload.
    pub bench_cpu_s: f64,
    /// The operator's CPU seconds over the workload.
    pub operator_cpu_s: f64,
    /// CPU seconds of every other process on the machine over the workload (other work
    /// running beside the bench makes the figures noisy).
    pub others_cpu_s: f64,
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
    let cluster = fresh_cluster(programs, dir).await?;
    let client = cluster.client()?;
    let clients = (0..params.clients).map(|_| cluster.client()).collect::<Result<Vec<_>>>()?;
    let names = names("backlog", params.objects);
    create_all(&clients, &names, params.deadline).await?;
    drop(clients);
    let handled = Handled::start(cluster.client()?).await?;
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
    let ours = used.cpu_s + cluster.proc.usage()?.cpu_s - cluster_before + usage(std::process::id())?.cpu_s - bench_before;
    let others_cpu_s = (machine_busy_s() - machine_before - ours).max(0.0);
    let last = handled.times(&names).into_iter().max().context("no object handled")?;
    let after = settle(&cluster, &client).await?.since(&before);
    let out = Backlog {
        objects: names.len(),
        seconds: last.saturating_sub(t0) as f64 / 1e9,
        cpu_s: used.cpu_s,
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

/// The live workload.
pub async fn live(flavor: Flavor, programs: &Programs, params: Params, with_delete: bool, dir: &Path) -> Result<Live> {
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
    let cpu_before = op.usage()?.cpu_s;
    let cluster_before = cluster.proc.usage()?.cpu_s;
    let bench_before = usage(std::process::id())?.cpu_s;
    let machine_before = machine_busy_s();

    let names = names("live", params.objects);
    let created = create_all(&clients, &names, params.deadline).await?;
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

/// Writes `name,created_ns,watched_ns,called_ns,handled_ns` per object (`watched`: when the
/// bench's own watch saw it added), for a closer look.
fn timeline(path: &Path, names: &[String], created: &HashMap<String, u64>, calls: &HashMap<String, u64>, handled: &Handled) -> Result<()> {
    let mut out = String::from("name,created_ns,watched_ns,called_ns,handled_ns\n");
    for n in names {
        let h = handled.times(std::slice::from_ref(n)).first().copied().unwrap_or_default();
        let (c, w, k) = (created.get(n).copied(), handled.added(n), calls.get(n).copied());
        out.push_str(&format!("{n},{},{},{},{h}\n", c.unwrap_or_default(), w.unwrap_or_default(), k.unwrap_or_default()));
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
