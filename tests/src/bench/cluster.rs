//! The dev cluster in its own process, clients to it, the bench's own object creation, a
//! watch telling when each object shows its handler's result, and the request counters.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use bosun_controller::cluster::{Cluster, apply};
use bosun_tests::record::now_ns;
use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use tokio::io::AsyncBufReadExt;

use super::procs::Proc;

/// The namespace the bench's objects live in.
pub const NAMESPACE: &str = "default";

/// `bosun-devcluster` running as a child process.
pub struct DevCluster {
    /// The process.
    pub proc: Proc,
    /// The kubeconfig it wrote.
    pub kubeconfig: PathBuf,
    config: kube::Config,
}

impl DevCluster {
    /// Starts the binary `bin` with its files in `dir`, waits for its address line.
    pub async fn start(bin: &Path, dir: &Path) -> Result<DevCluster> {
        let kubeconfig = dir.join("kubeconfig");
        let mut cmd = tokio::process::Command::new(bin);
        cmd.arg("--listen").arg("127.0.0.1:0").arg("--kubeconfig").arg(&kubeconfig);
        let (proc, stdout) = Proc::spawn("the dev cluster", cmd, &dir.join("devcluster.log"), true)?;
        let mut lines = tokio::io::BufReader::new(stdout.context("no stdout")?).lines();
        let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line()).await;
        match first {
            Ok(Ok(Some(line))) if line.starts_with("listening on ") => {}
            other => {
                proc.check_alive()?;
                bail!("the dev cluster did not print its address within 30 s (got {other:?}); log: {}", proc.log.display())
            }
        }
        // Keep draining its stdout so that it never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let kc = kube::config::Kubeconfig::read_from(&kubeconfig).with_context(|| format!("cannot read {}", kubeconfig.display()))?;
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
        Ok(DevCluster { proc, kubeconfig, config })
    }

    /// A new client (its own connection pool).
    pub fn client(&self) -> Result<kube::Client> {
        Ok(kube::Client::try_from(self.config.clone())?)
    }

    /// Applies `examples/crd.yaml` and waits until it is established.
    pub async fn install_crd(&self) -> Result<()> {
        let cluster = Cluster::new(self.client()?);
        apply::apply_path(&cluster, &bosun_tests::examples_dir().join("crd.yaml")).await.context("the KopfExample CRD does not apply")?;
        Ok(())
    }

    /// The request counters now.
    pub async fn counters(&self, client: &kube::Client) -> Result<Counters> {
        let req = http::Request::get("/metrics").body(Vec::new())?;
        let text = client.request_text(req).await.context("GET /metrics of the dev cluster")?;
        Ok(Counters::parse(&text))
    }
}

/// `n` object names with a prefix.
pub fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i:05}")).collect()
}

/// Creates KopfExamples named `names` from `clients.len()` parallel clients, each creating its
/// share one after the other; returns the time each create's response arrived.
pub async fn create_all(clients: &[kube::Client], names: &[String], deadline: Duration) -> Result<HashMap<String, u64>> {
    let path = format!("/apis/kopf.dev/v1/namespaces/{NAMESPACE}/kopfexamples");
    let k = clients.len().max(1);
    let tasks = clients.iter().enumerate().map(|(i, client)| {
        let cluster = Cluster::new(client.clone());
        let mine: Vec<String> = names.iter().skip(i).step_by(k).cloned().collect();
        let path = path.clone();
        async move {
            let mut done = Vec::with_capacity(mine.len());
            for name in mine {
                let body = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": name, "namespace": NAMESPACE}, "spec": {"field": "value"}});
                cluster.create(&path, &body).await.with_context(|| format!("creating {name}"))?;
                done.push((name, now_ns()));
            }
            anyhow::Ok(done)
        }
    });
    let all = tokio::time::timeout(deadline, futures::future::try_join_all(tasks))
        .await
        .map_err(|_| anyhow::anyhow!("creating {} objects took longer than {deadline:?}", names.len()))??;
    Ok(all.into_iter().flatten().collect())
}

/// Creates KopfExamples named `names` open-loop: the i-th is sent at `i / rate` seconds from the
/// start whether or not the earlier ones were answered (each on its own task, the clients taken
/// in turn), as requests reach a real API server; returns the time each create's response
/// arrived.
pub async fn create_at_rate(clients: &[kube::Client], names: &[String], rate: f64, deadline: Duration) -> Result<HashMap<String, u64>> {
    anyhow::ensure!(rate > 0.0 && rate.is_finite(), "the arrival rate must be positive, not {rate}");
    anyhow::ensure!(!clients.is_empty(), "no clients to create with");
    let path = format!("/apis/kopf.dev/v1/namespaces/{NAMESPACE}/kopfexamples");
    let start = tokio::time::Instant::now();
    let mut creates = tokio::task::JoinSet::new();
    for (i, name) in names.iter().enumerate() {
        tokio::time::sleep_until(start + Duration::from_secs_f64(i as f64 / rate)).await;
        let cluster = Cluster::new(clients[i % clients.len()].clone());
        let (name, path) = (name.clone(), path.clone());
        creates.spawn(async move {
            let body = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": name, "namespace": NAMESPACE}, "spec": {"field": "value"}});
            cluster.create(&path, &body).await.with_context(|| format!("creating {name}"))?;
            anyhow::Ok((name, now_ns()))
        });
    }
    let all = tokio::time::timeout(deadline, async {
        let mut done = HashMap::with_capacity(names.len());
        while let Some(created) = creates.join_next().await {
            let (name, at) = created??;
            done.insert(name, at);
        }
        anyhow::Ok(done)
    });
    all.await.map_err(|_| anyhow::anyhow!("creating {} objects at {rate}/s took longer than {deadline:?}", names.len()))?
}

/// Watches KopfExamples and notes when each first shows `status.create_fn` (the handler's
/// result stored by the operator), and when each first showed a finalizer.
pub struct Handled {
    seen: Arc<Mutex<HashMap<String, u64>>>,
    added: Arc<Mutex<HashMap<String, u64>>>,
    finalized: Arc<Mutex<HashMap<String, u64>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Handled {
    /// Starts watching; returns once the initial list is in.
    pub async fn start(client: kube::Client) -> Result<Handled> {
        let gvk = GroupVersionKind::gvk("kopf.dev", "v1", "KopfExample");
        let api: kube::Api<DynamicObject> = kube::Api::all_with(client, &ApiResource::from_gvk_with_plural(&gvk, "kopfexamples"));
        let seen: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
        let added: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
        let finalized: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let (s, a, f) = (seen.clone(), added.clone(), finalized.clone());
        let task = tokio::spawn(async move {
            let mut ready = Some(ready_tx);
            let mut stream = watcher(api, watcher::Config::default()).default_backoff().boxed();
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                        let name = o.metadata.name.unwrap_or_default();
                        if o.data.pointer("/status/create_fn").is_some() {
                            s.lock().unwrap().entry(name.clone()).or_insert_with(now_ns);
                        }
                        if o.metadata.finalizers.as_ref().is_some_and(|f| !f.is_empty()) {
                            f.lock().unwrap().entry(name.clone()).or_insert_with(now_ns);
                        }
                        a.lock().unwrap().entry(name).or_insert_with(now_ns);
                    }
                    Ok(watcher::Event::InitDone) => {
                        if let Some(tx) = ready.take() {
                            let _ = tx.send(());
                        }
                    }
                    Ok(_) => {}
                    Err(e) => eprintln!("bench: the bench's own watch failed (retrying): {e}"),
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(30), ready_rx).await.context("the bench's watch did not list within 30 s")??;
        Ok(Handled { seen, added, finalized, task })
    }

    /// When each of `names` was seen handled (those seen so far).
    pub fn times(&self, names: &[String]) -> Vec<u64> {
        let seen = self.seen.lock().unwrap();
        names.iter().filter_map(|n| seen.get(n).copied()).collect()
    }

    /// When the bench's watch first saw `name` at all (its ADDED event), if it did.
    pub fn added(&self, name: &str) -> Option<u64> {
        self.added.lock().unwrap().get(name).copied()
    }

    /// When the bench's watch first saw `name` with a finalizer, if it did.
    pub fn finalized(&self, name: &str) -> Option<u64> {
        self.finalized.lock().unwrap().get(name).copied()
    }

    /// How many of `names` are handled.
    pub fn count(&self, names: &[String]) -> usize {
        self.times(names).len()
    }
}

impl Drop for Handled {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The dev cluster's request counters that the bench reads.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counters {
    /// POST/PUT/PATCH/APPLY/DELETE on kopfexamples (any subresource, any code).
    pub kex_writes: u64,
    /// Of which POSTs (the bench's own creates are among them).
    pub kex_posts: u64,
    /// Of which answered with an error code (e.g. 409 conflicts).
    pub kex_write_errors: u64,
    /// Writes to core/v1 and events.k8s.io Events.
    pub event_writes: u64,
    /// Every request of any kind.
    pub requests: u64,
}

impl Counters {
    /// Sums the `apiserver_request_total` lines of a Prometheus text.
    pub fn parse(text: &str) -> Counters {
        let mut c = Counters::default();
        for line in text.lines().filter(|l| l.starts_with("apiserver_request_total{")) {
            let Some((labels, value)) = line.rsplit_once(' ') else { continue };
            let Ok(n) = value.trim().parse::<f64>() else { continue };
            let n = n as u64;
            let label = |k: &str| {
                let key = format!("{k}=\"");
                labels.find(&key).map(|i| &labels[i + key.len()..]).and_then(|r| r.split('"').next()).unwrap_or("")
            };
            c.requests += n;
            let write = matches!(label("verb"), "POST" | "PUT" | "PATCH" | "APPLY" | "DELETE" | "DELETECOLLECTION");
            if !write {
                continue;
            }
            match label("resource") {
                "kopfexamples" => {
                    c.kex_writes += n;
                    if label("verb") == "POST" {
                        c.kex_posts += n;
                    }
                    if label("code").parse::<u16>().unwrap_or(0) >= 400 {
                        c.kex_write_errors += n;
                    }
                }
                "events" => c.event_writes += n,
                _ => {}
            }
        }
        c
    }

    /// The difference `self - before`.
    pub fn since(&self, before: &Counters) -> Counters {
        Counters {
            kex_writes: self.kex_writes - before.kex_writes,
            kex_posts: self.kex_posts - before.kex_posts,
            kex_write_errors: self.kex_write_errors - before.kex_write_errors,
            event_writes: self.event_writes - before.event_writes,
            requests: self.requests - before.requests,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_sum_writes_on_kopfexamples() {
        let text = "# HELP x\n\
            apiserver_request_total{code=\"201\",group=\"kopf.dev\",resource=\"kopfexamples\",subresource=\"\",verb=\"POST\",version=\"v1\"} 10\n\
            apiserver_request_total{code=\"200\",group=\"kopf.dev\",resource=\"kopfexamples\",subresource=\"status\",verb=\"PATCH\",version=\"v1\"} 7\n\
            apiserver_request_total{code=\"409\",group=\"kopf.dev\",resource=\"kopfexamples\",subresource=\"\",verb=\"PATCH\",version=\"v1\"} 1\n\
            apiserver_request_total{code=\"200\",group=\"kopf.dev\",resource=\"kopfexamples\",subresource=\"\",verb=\"LIST\",version=\"v1\"} 3\n\
            apiserver_request_total{code=\"201\",group=\"\",resource=\"events\",subresource=\"\",verb=\"POST\",version=\"v1\"} 4\n";
        let c = Counters::parse(text);
        assert_eq!(c, Counters { kex_writes: 18, kex_posts: 10, kex_write_errors: 1, event_writes: 4, requests: 25 });
    }
}
