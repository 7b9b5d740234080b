//! Throughput benchmark of the dev cluster over loopback HTTP/1.1 with keep-alive:
//! GETs and merge patches from 32 concurrent clients, a watch fanned out to 100 watchers
//! during the patches, and a LIST of 10,000 objects.
//!
//! `cargo run --release -p bosun-devcluster --example bench`

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bosun_devcluster::DevCluster;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const CLIENTS: usize = 32;
const DEFAULT_WATCHERS: usize = 100;
const PHASE: Duration = Duration::from_secs(3);

/// A minimal keep-alive HTTP/1.1 client: one request at a time on one connection.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    tmp: Vec<u8>,
}

impl Conn {
    async fn open(addr: &str) -> Result<Conn> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Conn { stream, buf: Vec::with_capacity(64 * 1024), tmp: vec![0u8; 64 * 1024] })
    }

    async fn request(&mut self, method: &str, path: &str, content_type: &str, body: &[u8]) -> Result<(u16, Vec<u8>)> {
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: bench\r\nUser-Agent: bench/1.0\r\nAccept: application/json\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        self.stream.write_all(head.as_bytes()).await?;
        self.stream.write_all(body).await?;
        self.buf.clear();
        let tmp = &mut self.tmp;
        let header_end = loop {
            if let Some(i) = find(&self.buf, b"\r\n\r\n") {
                break i + 4;
            }
            let n = self.stream.read(tmp).await?;
            if n == 0 {
                bail!("connection closed");
            }
            self.buf.extend_from_slice(&tmp[..n]);
        };
        let head = String::from_utf8_lossy(&self.buf[..header_end]).to_string();
        let code: u16 = head.split_whitespace().nth(1).context("status")?.parse()?;
        let len: usize = head
            .lines()
            .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string()))
            .context("content-length")?
            .parse()?;
        while self.buf.len() < header_end + len {
            let n = self.stream.read(tmp).await?;
            if n == 0 {
                bail!("connection closed");
            }
            self.buf.extend_from_slice(&tmp[..n]);
        }
        Ok((code, self.buf[header_end..header_end + len].to_vec()))
    }
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    memchr::memmem::find(h, n)
}

/// CPU seconds used by this process so far (user + system).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = fields.get(11).and_then(|u| u.parse::<f64>().ok()).unwrap_or(0.0)
        + fields.get(12).and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.0);
    ticks / 100.0
}

async fn phase<F, Fut>(addr: &str, work: F) -> Result<(f64, f64)>
where
    F: Fn(usize, u64, Conn) -> Fut + Send + Sync + 'static + Clone,
    Fut: std::future::Future<Output = Result<Conn>> + Send,
{
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let cpu = cpu_seconds();
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let (done, stop, work, addr) = (done.clone(), stop.clone(), work.clone(), addr.to_string());
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::open(&addr).await?;
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                conn = work(c, i, conn).await?;
                i += 1;
                done.fetch_add(1, Ordering::Relaxed);
            }
            anyhow::Ok(())
        }));
    }
    tokio::time::sleep(PHASE).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await??;
    }
    let n = done.load(Ordering::Relaxed) as f64;
    Ok((n / start.elapsed().as_secs_f64(), (cpu_seconds() - cpu) * 1e6 / n))
}

#[tokio::main]
async fn main() -> Result<()> {
    let watchers_n: usize = std::env::var("BENCH_WATCHERS").ok().and_then(|w| w.parse().ok()).unwrap_or(DEFAULT_WATCHERS);
    // BENCH_DATA_DIR=DIR measures with persistence (fdatasync per acknowledged write)
    let data_dir = std::env::var("BENCH_DATA_DIR").ok().map(std::path::PathBuf::from);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let dc = DevCluster::start(listener, bosun_devcluster::Config { data_dir, ..Default::default() }).await?;
    let addr = dc.url().trim_start_matches("http://").to_string();
    let base = "/api/v1/namespaces/default/configmaps";
    let mut conn = Conn::open(&addr).await?;
    for c in 0..CLIENTS {
        let body = format!(r#"{{"metadata":{{"name":"bench-{c}"}},"data":{{"n":"0"}}}}"#);
        let (code, _) = conn.request("POST", base, "application/json", body.as_bytes()).await?;
        anyhow::ensure!(code == 201, "create failed: {code}");
    }

    let (gets, gets_cpu) = phase(&addr, move |c, _, mut conn| async move {
        let (code, _) = conn.request("GET", &format!("{base}/bench-{c}"), "application/json", b"").await?;
        anyhow::ensure!(code == 200, "get failed: {code}");
        Ok(conn)
    })
    .await?;
    println!("gets:           {gets:>9.0} /s   (32 clients; bar 20,000/s); {gets_cpu:.1} CPU-µs each, server and client together");

    // watchers from the current resourceVersion
    let (_, list) = conn.request("GET", &format!("{base}?limit=1"), "application/json", b"").await?;
    let rv = serde_json::from_slice::<serde_json::Value>(&list)?["metadata"]["resourceVersion"].as_str().unwrap_or("0").to_string();
    let received = Arc::new(AtomicU64::new(0));
    let mut watchers = Vec::new();
    for _ in 0..watchers_n {
        let (addr, rv, received) = (addr.clone(), rv.clone(), received.clone());
        watchers.push(tokio::spawn(async move {
            let mut s = TcpStream::connect(&addr).await?;
            let req = format!(
                "GET {base}?watch=1&resourceVersion={rv}&timeoutSeconds=3600 HTTP/1.1\r\nHost: bench\r\nAccept: application/json\r\n\r\n"
            );
            s.write_all(req.as_bytes()).await?;
            let mut tmp = vec![0u8; 256 * 1024];
            let mut carry: Vec<u8> = Vec::new();
            loop {
                let n = s.read(&mut tmp).await?;
                if n == 0 {
                    return anyhow::Ok(());
                }
                carry.extend_from_slice(&tmp[..n]);
                let pattern = b"{\"type\":\"MODIFIED\"";
                let cut = carry.len().saturating_sub(pattern.len());
                let n = memchr::memmem::find_iter(&carry, pattern).filter(|at| *at < cut).count() as u64;
                received.fetch_add(n, Ordering::Relaxed);
                carry.drain(..cut);
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;

    let patches = Arc::new(AtomicU64::new(0));
    let p2 = patches.clone();
    let (patch_rate, patch_cpu) = phase(&addr, move |c, i, mut conn| {
        let p2 = p2.clone();
        async move {
            let body = format!(r#"{{"data":{{"n":"{}"}}}}"#, i + 1);
            let (code, _) = conn.request("PATCH", &format!("{base}/bench-{c}"), "application/merge-patch+json", body.as_bytes()).await?;
            anyhow::ensure!(code == 200, "patch failed: {code}");
            p2.fetch_add(1, Ordering::Relaxed);
            Ok(conn)
        }
    })
    .await?;
    println!(
        "merge patches:  {patch_rate:>9.0} /s   (32 clients; bar 5,000/s); {patch_cpu:.1} CPU-µs each incl. fan-out to {watchers_n} watchers"
    );
    let want = patches.load(Ordering::Relaxed) * watchers_n as u64;
    let deadline = Instant::now() + Duration::from_secs(10);
    let drain_start = Instant::now();
    while received.load(Ordering::Relaxed) < want && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let got = received.load(Ordering::Relaxed);
    println!(
        "watch fan-out:  {got} of {want} events delivered to {watchers_n} watchers ({:.0} events/s per watcher; caught up {:.0} ms after the last patch)",
        got as f64 / watchers_n.max(1) as f64 / PHASE.as_secs_f64(),
        drain_start.elapsed().as_millis()
    );
    for w in watchers {
        w.abort();
    }

    // 10,000 objects
    let total = 10_000usize;
    let created = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let (addr, created) = (addr.clone(), created.clone());
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::open(&addr).await?;
            let mut i = c;
            while i < total {
                let body = format!(r#"{{"metadata":{{"name":"many-{i}","labels":{{"app":"bench"}}}},"data":{{"key":"value-{i}"}}}}"#);
                let (code, _) = conn.request("POST", "/api/v1/namespaces/default/configmaps", "application/json", body.as_bytes()).await?;
                anyhow::ensure!(code == 201, "create failed: {code}");
                created.fetch_add(1, Ordering::Relaxed);
                i += CLIENTS;
            }
            anyhow::Ok(())
        }));
    }
    let t = Instant::now();
    for task in tasks {
        task.await??;
    }
    println!("creates:        {:>9.0} /s   (32 clients)", total as f64 / t.elapsed().as_secs_f64());
    let mut times = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let (code, body) =
            conn.request("GET", "/api/v1/namespaces/default/configmaps?labelSelector=app%3Dbench", "application/json", b"").await?;
        times.push(t.elapsed());
        anyhow::ensure!(code == 200, "list failed");
        let items = serde_json::from_slice::<serde_json::Value>(&body)?["items"].as_array().map_or(0, Vec::len);
        anyhow::ensure!(items == total, "list returned {items} items");
    }
    times.sort();
    println!("list 10,000:    {:>9.1} ms (median of 5, request to last byte; bar 100 ms)", times[2].as_secs_f64() * 1000.0);
    dc.shutdown().await;
    Ok(())
}
