//! What the tests of the real `bosun` binary share: a running `bosun` with its output lines,
//! kubectl, and whether a process runs.
#![allow(dead_code)] // Each test file uses its part.

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

/// How long a test waits for a line.
pub const T: Duration = Duration::from_secs(60);

/// A running `bosun` with its output lines collected.
pub struct Bosun {
    pub child: Child,
    lines: mpsc::UnboundedReceiver<String>,
    pub seen: Vec<String>,
}

impl Bosun {
    pub fn start(dir: &Path, args: &[&str]) -> Bosun {
        Bosun::start_with_env(dir, args, &[])
    }

    /// Starts bosun with these environment variables besides (over its `RUST_LOG=info`).
    pub fn start_with_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Bosun {
        let mut command = Command::new(env!("CARGO_BIN_EXE_bosun"));
        command.args(args).current_dir(dir).env("RUST_LOG", "info").envs(env.iter().copied());
        Bosun::spawn(command)
    }

    /// Runs `command` (bosun, or a container running it) with its output lines collected.
    pub fn spawn(mut command: Command) -> Bosun {
        let mut child =
            command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true).spawn().expect("bosun starts");
        let (tx, lines) = mpsc::unbounded_channel();
        for stream in
            [Box::new(child.stdout.take().unwrap()) as Box<dyn tokio::io::AsyncRead + Unpin + Send>, Box::new(child.stderr.take().unwrap())]
        {
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut r = BufReader::new(stream).lines();
                while let Ok(Some(l)) = r.next_line().await {
                    let _ = tx.send(l);
                }
            });
        }
        Bosun { child, lines, seen: Vec::new() }
    }

    pub async fn wait_line(&mut self, text: &str) -> String {
        if let Some(l) = self.seen.iter().find(|l| l.contains(text)) {
            return l.clone();
        }
        let deadline = tokio::time::Instant::now() + T;
        loop {
            let l = self.next_line(deadline, &format!("a line containing {text:?}")).await;
            if l.contains(text) {
                return l;
            }
        }
    }

    /// Waits until `n` lines contain `text`.
    pub async fn wait_count(&mut self, text: &str, n: usize) {
        let deadline = tokio::time::Instant::now() + T;
        while self.count(text) < n {
            self.next_line(deadline, &format!("{n} lines containing {text:?}")).await;
        }
    }

    /// The next output line, kept in `seen`; fails when none comes before `deadline` or bosun
    /// exits, saying that it waited for `what`.
    pub async fn next_line(&mut self, deadline: tokio::time::Instant, what: &str) -> String {
        match tokio::time::timeout_at(deadline, self.lines.recv()).await {
            Ok(Some(l)) => {
                self.seen.push(l.clone());
                l
            }
            Ok(None) => {
                let status = self.child.wait().await;
                panic!("bosun exited ({status:?}) before {what}; output:\n{}", self.seen.join("\n"))
            }
            Err(_) => panic!("no {what} within {T:?}; output:\n{}", self.seen.join("\n")),
        }
    }

    pub fn count(&self, text: &str) -> usize {
        self.seen.iter().filter(|l| l.contains(text)).count()
    }

    /// Ctrl-C.
    pub async fn interrupt(self) -> std::process::ExitStatus {
        self.signal("INT").await
    }

    /// Sends `SIG<name>` and waits for bosun to exit.
    pub async fn signal(mut self, name: &str) -> std::process::ExitStatus {
        self.send(name);
        self.wait_exit().await
    }

    /// Sends `SIG<name>`.
    pub fn send(&mut self, name: &str) {
        let pid = self.child.id().expect("running");
        std::process::Command::new("kill").args([&format!("-{name}"), &pid.to_string()]).status().unwrap();
    }

    /// Waits for bosun to exit, after a signal.
    pub async fn wait_exit(mut self) -> std::process::ExitStatus {
        tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("bosun did not exit within 20s of the signal; output:\n{}", self.seen.join("\n")))
            .unwrap()
    }
}

/// Whether process `pid` is running: it exists and is not a zombie (an orphan's zombie waits
/// for init, which in some containers never reaps it).
pub fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => !matches!(stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next()), Some("Z" | "X")),
    }
}

pub fn kubectl(kubeconfig: &str, args: &[&str]) -> Value {
    let out = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .args(["-o", "json"])
        .output()
        .expect("kubectl runs");
    assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A dev cluster in this process with `manifests` applied; its client and the path of the
/// kubeconfig written into `dir`.
pub async fn dev_cluster(
    dir: &Path,
    manifests: &[std::path::PathBuf],
) -> (bosun_devcluster::DevCluster, bosun_controller::cluster::Cluster, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let cluster = bosun_devcluster::DevCluster::start(listener, bosun_devcluster::Config::default()).await.unwrap();
    let kubeconfig = dir.join("kubeconfig");
    cluster.write_kubeconfig(&kubeconfig).unwrap();
    let api = bosun_controller::cluster::Cluster::new(cluster.client());
    for path in manifests {
        bosun_controller::cluster::apply::apply_path(&api, path).await.unwrap();
    }
    (cluster, api, kubeconfig.display().to_string())
}

/// A handler server in this process whose `create_fn` succeeds at once (result
/// `{"done": true}`); its address.
pub async fn succeeding_server() -> String {
    let server = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = format!("http://{}", server.local_addr().unwrap());
    let op = bosun_sdk::Operator::new()
        .on_create("kopf.dev/v1/kopfexamples", |_: bosun_sdk::Cause| async {
            Ok::<_, bosun_sdk::HandlerError>(serde_json::json!({"done": true}))
        })
        .id("create_fn");
    tokio::spawn(op.serve_with_listener(server, std::future::pending()));
    addr
}

/// `GET path` over plain HTTP/1.0: the status code and the body.
pub async fn get(addr: &str, path: &str) -> (u16, String) {
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    conn.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes()).await.unwrap();
    let mut raw = String::new();
    conn.read_to_string(&mut raw).await.unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let code = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (code, body.to_string())
}

/// The samples of a scrape: `name{labels}` → value. Fails on a line that is neither a
/// comment nor `name[{labels}] value`.
pub fn samples(text: &str) -> HashMap<String, f64> {
    let mut out = HashMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let (key, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("not a sample: {line:?}"));
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("not a number in {line:?}"));
        let name = key.split('{').next().unwrap();
        assert!(name.starts_with("bosun_") && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "bad name in {line:?}");
        out.insert(key.to_string(), value);
    }
    out
}
