//! The replicas workload (`bench --replicas N`): for 1, 2, … N replicas, each run on
//! a fresh dev cluster, N `bosun run --shards auto` processes share the objects, each with its
//! own SDK handler server in the bench process recording which replica handled which object
//! and when. The objects are created live by parallel clients once every replica sees the
//! whole shard group (and has handled its share of a warm-up). Figures: throughput, latency
//! from a create's response to its handler call, the share of each replica, the replicas'
//! CPU. Checks: every object handled exactly once, never by two replicas at once, each
//! replica's share within ±20 % of even.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use bosun_sdk::{Cause, HandlerError, Operator};
use bosun_tests::record::now_ns;
use serde_json::{Value, json};

use super::cluster::{DevCluster, Handled, create_all, names};
use super::ops::{Programs, ServerTask, bosun_args};
use super::procs::Proc;
use super::workloads::{Params, fresh_cluster, percentile, poll};

/// One handler call: which replica, which object, start and end (ns since the epoch).
#[derive(Debug, Clone)]
struct Call {
    replica: usize,
    name: String,
    start: u64,
    end: u64,
}

type Calls = Arc<Mutex<Vec<Call>>>;

/// The figures of one replica count.
#[derive(Debug, Clone, Default)]
pub struct ReplicaRun {
    /// How many replicas.
    pub replicas: usize,
    /// Objects created.
    pub objects: usize,
    /// Seconds from the first create's response to the last object showing its result.
    pub seconds: f64,
    /// Objects handled per second over that time.
    pub per_second: f64,
    /// Latency from a create's response to its handler call, ms.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Objects handled by each replica.
    pub shares: Vec<usize>,
    /// CPU ms per object of all the replicas' controllers together (handler servers not
    /// included: they run in the bench process).
    pub cpu_ms_per_object: f64,
    /// What failed the checks (handled twice, concurrently, uneven), empty when none.
    pub failures: Vec<String>,
}

impl ReplicaRun {
    /// The figures as JSON.
    pub fn json(&self) -> Value {
        json!({
            "replicas": self.replicas, "objects": self.objects, "seconds": self.seconds,
            "objects_per_second": self.per_second, "p50_ms": self.p50_ms, "p99_ms": self.p99_ms,
            "shares": self.shares, "cpu_ms_per_object": self.cpu_ms_per_object, "failures": self.failures,
        })
    }
}

/// A handler server for one replica, recording its calls.
async fn handler_server(replica: usize, calls: Calls) -> Result<ServerTask> {
    let operator = Operator::new()
        .server_name("bench")
        .on_create("kopf.dev/v1/kopfexamples", move |cause: Cause| {
            let start = now_ns();
            let name = cause.name().to_string();
            calls.lock().unwrap().push(Call { replica, name, start, end: now_ns() });
            async { Ok::<_, HandlerError>(json!({"message": "hello world"})) }
        })
        .id("create_fn");
    ServerTask::start(operator).await
}

/// Runs `replicas` sharded controllers against a fresh dev cluster and measures them.
pub async fn shards(programs: &Programs, params: Params, replicas: usize, dir: &Path) -> Result<ReplicaRun> {
    let cluster = fresh_cluster(programs, dir).await?;
    let clients = (0..params.clients).map(|_| cluster.client()).collect::<Result<Vec<_>>>()?;
    let handled = Handled::start(cluster.client()?).await?;
    let calls = Calls::default();
    let mut servers = Vec::new();
    let mut procs = Vec::new();
    for r in 0..replicas {
        let server = handler_server(r, calls.clone()).await?;
        let mut cmd = tokio::process::Command::new(&programs.bosun);
        bosun_args(&mut cmd, programs, &cluster, &server.addr);
        let identity = format!("replica-{r}");
        cmd.args(["--shards", "auto", "--lease-namespace", "default", "--identity", &identity]);
        let (proc, _) = Proc::spawn(&format!("the Bosun controller {identity}"), cmd, &dir.join(format!("bosun-{r}.log")), false)?;
        procs.push(proc);
        servers.push(server);
    }
    let grouped = format!("Shard group 'bosun' has {replicas} member(s) now");
    wait("every replica to see the whole shard group", params.deadline, &cluster, &procs, || {
        let n = procs.iter().filter(|p| std::fs::read_to_string(&p.log).is_ok_and(|l| l.contains(&grouped))).count();
        Ok((n == replicas, format!("{n}/{replicas} replicas see {replicas} members")))
    })
    .await?;

    // Warm up: each replica is ready once it has handled its share of a few objects.
    let warmup = names("warmup", 8 * replicas);
    create_all(&clients, &warmup, params.deadline).await?;
    wait("the warm-up objects to be handled", params.deadline, &cluster, &procs, || {
        let n = handled.count(&warmup);
        Ok((n == warmup.len(), format!("{n}/{} warm-up objects handled", warmup.len())))
    })
    .await?;
    let cpu = |procs: &[Proc]| procs.iter().map(|p| p.usage().map(|u| u.cpu_s)).sum::<Result<f64>>();
    let cpu_before = cpu(&procs)?;

    let names = names("replicas", params.objects);
    let created = create_all(&clients, &names, params.deadline).await?;
    wait("the objects to be handled", params.deadline, &cluster, &procs, || {
        let n = handled.count(&names);
        Ok((n == names.len(), format!("{n}/{} objects handled", names.len())))
    })
    .await?;
    let cpu_s = cpu(&procs)? - cpu_before;
    let last_handled = handled.times(&names).into_iter().max().context("no object handled")?;
    let first_created = created.values().min().copied().unwrap_or_default();
    drop(handled);
    for p in procs {
        p.stop(Duration::from_secs(5)).await;
    }
    drop(servers);
    cluster.proc.stop(Duration::from_secs(5)).await;

    let calls = calls.lock().unwrap().clone();
    let mut by_name: HashMap<&str, Vec<&Call>> = HashMap::new();
    for c in calls.iter().filter(|c| !c.name.starts_with("warmup")) {
        by_name.entry(&c.name).or_default().push(c);
    }
    let mut failures = Vec::new();
    let mut shares = vec![0usize; replicas];
    let mut latencies = Vec::with_capacity(names.len());
    for name in &names {
        let mine = by_name.get(name.as_str()).map(Vec::as_slice).unwrap_or_default();
        match mine {
            [one] => {
                shares[one.replica] += 1;
                latencies.push(one.start.saturating_sub(created[name]) as f64 / 1e6);
            }
            [] => failures.push(format!("{name} was not handled")),
            [a, b, ..] => {
                let at_once = a.replica != b.replica && a.start <= b.end && b.start <= a.end;
                let how = if at_once { "by two replicas at once" } else { "more than once" };
                failures.push(format!("{name} was handled {how} (replicas {} and {})", a.replica, b.replica));
            }
        }
    }
    let even = names.len() as f64 / replicas as f64;
    for (r, share) in shares.iter().enumerate() {
        if (*share as f64 - even).abs() > 0.2 * even {
            failures.push(format!("replica-{r} handled {share} objects, not within ±20 % of {even:.0}"));
        }
    }
    latencies.sort_by(f64::total_cmp);
    let seconds = last_handled.saturating_sub(first_created) as f64 / 1e9;
    Ok(ReplicaRun {
        replicas,
        objects: names.len(),
        seconds,
        per_second: names.len() as f64 / seconds.max(1e-9),
        p50_ms: percentile(&latencies, 50.0),
        p99_ms: percentile(&latencies, 99.0),
        shares,
        cpu_ms_per_object: cpu_s * 1000.0 / names.len() as f64,
        failures,
    })
}

/// Polls every 50 ms until `done` says so, failing at the deadline or when a process dies.
async fn wait(
    what: &str,
    deadline: Duration,
    cluster: &DevCluster,
    procs: &[Proc],
    done: impl FnMut() -> Result<(bool, String)>,
) -> Result<()> {
    let alive = || {
        cluster.proc.check_alive()?;
        procs.iter().try_for_each(Proc::check_alive)
    };
    let logs = || format!("logs in {}", cluster.kubeconfig.parent().unwrap_or(Path::new(".")).display());
    poll("timed out", what, deadline, alive, logs, done).await
}

/// The table of all replica counts.
pub fn table(runs: &[Result<ReplicaRun, String>], objects: usize, clients: usize) -> String {
    let mut out = format!(
        "Replicas (--shards auto), {objects} objects from {clients} clients, each count on a fresh dev cluster:\n  {:<9} {:>11} {:>10} {:>9} {:>9} {:>13}  {}\n",
        "replicas", "handled in", "objects/s", "p50 ms", "p99 ms", "CPU ms/obj", "objects per replica"
    );
    for (i, run) in runs.iter().enumerate() {
        match run {
            Ok(r) => out.push_str(&format!(
                "  {:<9} {:>9.2} s {:>10.0} {:>9.1} {:>9.1} {:>13.3}  {:?}\n",
                r.replicas, r.seconds, r.per_second, r.p50_ms, r.p99_ms, r.cpu_ms_per_object, r.shares
            )),
            Err(e) => out.push_str(&format!("  {:<9} failed: {e}\n", i + 1)),
        }
    }
    let failures: Vec<String> =
        runs.iter().flatten().flat_map(|r| r.failures.iter().map(move |f| format!("{} replicas: {f}", r.replicas))).collect();
    if failures.is_empty() && runs.iter().all(Result::is_ok) {
        out.push_str(
            "  checks: every object handled exactly once, never by two replicas at once; every share within ±20 % of even: pass\n",
        );
    } else {
        out.push_str("  checks: FAIL\n");
        for f in failures.iter().take(20) {
            out.push_str(&format!("    {f}\n"));
        }
    }
    out
}
